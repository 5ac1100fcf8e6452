/* mesh-info -A: the algorithms of each collective and, for a communicator shape
 * (--comm-size N --nodes K), the selection map a communicator of that shape builds, and the
 * path device buffers take on it (IPC inside a node, staging, or refused). */
#include "config.h"
#include "tools/mesh-info-algo.h"
#include "collectives/algo.h"
#include "collectives/comm.h"
#include "collectives/device/dev.h"
#include "libmesh/config.h"
#include "libmesh/log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 16k, 16k+1, 64m-1, 1000, inf */
static const char *fmt_size(size_t v, char *buf, size_t len)
{
    static const struct {
        size_t unit;
        char suffix;
    } units[] = {{(size_t)1 << 30, 'g'}, {(size_t)1 << 20, 'm'}, {(size_t)1 << 10, 'k'}};
    if (v == SIZE_MAX)
        return "inf";
    for (int i = 0; i < 3; i++) {
        size_t u = units[i].unit;
        for (int d = 0; d <= 2; d++) {
            /* d: 0 exact, 1 one above, 2 one below */
            size_t base = d == 1 ? v - 1 : d == 2 ? v + 1 : v;
            if ((d == 1 && v == 0) || base < u || base % u != 0)
                continue;
            snprintf(buf, len, "%zu%c%s", base / u, units[i].suffix,
                     d == 1   ? "+1"
                     : d == 2 ? "-1"
                              : "");
            return buf;
        }
    }
    snprintf(buf, len, "%zu", v);
    return buf;
}

static void print_range(size_t lo, size_t hi, const mesh_coll_algo_t *const *cand, int ncand,
                        int forced, void *arg)
{
    (void)arg;
    char a[32], b[32], range[72];
    snprintf(range, sizeof(range), "%s - %s", fmt_size(lo, a, sizeof(a)),
             fmt_size(hi, b, sizeof(b)));
    printf("    %-22s", range);
    if (ncand == 0) {
        printf("(no algorithm)\n");
        return;
    }
    printf("%s%s", cand[0]->name, forced ? " (MESH_TUNE)" : "");
    for (int i = 1; i < ncand; i++)
        printf("%s%s", i == 1 ? ", then " : ", ", cand[i]->name);
    printf("\n");
}

int mesh_info_algorithms(int comm_size, int nodes, void (*wrap)(const char *, int, int, int))
{
    const char *tune = mesh_config_str("TUNE");
    printf("# algorithms per collective, in the order that breaks score ties; force one with\n"
           "# MESH_TUNE=coll:algo[@min-max],... (e.g. allreduce:ring@1m-inf)\n");
    printf("# MESH_TUNE now: %s\n", tune && *tune ? tune : "(unset: highest score wins)");
    mesh_info_device_path();
    mesh_coll_map_t *map = NULL;
    mesh_comm_t shape = {0};
    int *node_size = NULL;
    if (comm_size > 0) {
        if (nodes < 1 || nodes > comm_size) {
            fprintf(stderr, "mesh-info: --nodes %d must be 1..%d (the communicator size)\n", nodes,
                    comm_size);
            return 2;
        }
        node_size = calloc((size_t)nodes, sizeof(int));
        if (node_size == NULL)
            return 1;
        /* ranks split as evenly as they go, the first nodes taking one more */
        for (int n = 0; n < nodes; n++)
            node_size[n] = comm_size / nodes + (n < comm_size % nodes);
        shape.size = comm_size;
        shape.nnodes = nodes;
        shape.node_size = node_size;
        if (mesh_coll_map_build(&shape, tune, &map) != MESH_OK) {
            fprintf(stderr, "mesh-info: %s\n", mesh_error_last());
            free(node_size);
            return 1;
        }
        printf("# selection for %d ranks on %d node(s) (", comm_size, nodes);
        for (int n = 0; n < nodes; n++)
            printf("%s%d", n ? "," : "", node_size[n]);
        printf(" ranks per node): message size in bytes (nccl-tests' S) -> algorithm, then the "
               "ones tried when it declines a call\n");
    }
    for (int t = 0; t < MESH_COLL_TYPE_COUNT; t++) {
        printf("\n%s\n", mesh_coll_type_name((mesh_coll_type_t)t));
        for (int i = 0; i < mesh_coll_algo_count(); i++) {
            const mesh_coll_algo_t *a = mesh_coll_algo_get(i);
            if (a->type != (mesh_coll_type_t)t)
                continue;
            printf("  %-20s ", a->name);
            wrap(a->desc ? a->desc : "", 0, 23, 96);
        }
        if (map != NULL) {
            printf("  selection:\n");
            mesh_coll_map_foreach(map, (mesh_coll_type_t)t, print_range, NULL);
            if (t != MESH_COLL_BARRIER)
                printf("  device buffers: %s\n", mesh_dev_path(&shape, (mesh_coll_type_t)t));
        }
    }
    mesh_coll_map_free(map);
    free(node_size);
    return 0;
}
