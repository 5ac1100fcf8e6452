/*
 * Node map and rank summaries under meshrun with simulated nodes. Each simulated node loads its
 * own topology fixture (node k: dgx8, pcie4, cpuonly for k % 3 = 0, 1, 2) through
 * MESH_TOPO_FILE, and every rank checks what the communicator says about every rank against
 * the placement meshrun used.
 *   topo_map --nodes K [--cyclic] [--visible LIST]
 * LIST is the CUDA_VISIBLE_DEVICES value meshrun passed to every rank ("" when unset).
 */
#include "mesh.h"
#include "tests/harness/mp_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, failures;

#define CHECK(cond, ...) MESH_MP_CHECK(rank, failures, cond, __VA_ARGS__)

static const char *const fixtures[3] = {"dgx8.xml", "pcie4.xml", "cpuonly.xml"};
static const int fixture_gpus[3] = {8, 4, 0};

typedef struct {
    int label; /* k of node<k> */
    int node;  /* index in the communicator: order of first appearance */
    int local_rank;
    int gpu;
    char nic[32];
    int cpu_first, cpu_last, cpu_count;
} expect_t;

/* meshrun's placement: block gives the first n % k nodes one rank more; cyclic is r % k */
static int label_of(int r, int n, int k, int cyclic)
{
    if (cyclic)
        return r % k;
    int base = n / k, extra = n % k;
    return r < extra * (base + 1) ? r / (base + 1) : extra + (r - extra * (base + 1)) / base;
}

/* The documented rule with CUDA_VISIBLE_DEVICES: entry local % entries when it is an index of
 * the node, else local % GPUs. */
static int gpu_of(int local, int ngpus, const char *visible)
{
    if (ngpus == 0)
        return -1;
    if (visible && *visible) {
        int n = 1;
        for (const char *p = visible; *p; p++)
            n += *p == ',';
        const char *p = visible;
        for (int i = 0; i < local % n; i++)
            p = strchr(p, ',') + 1;
        int v = atoi(p);
        if (v < ngpus)
            return v;
    }
    return local % ngpus;
}

static void expected(int n, int k, int cyclic, const char *visible, expect_t *e)
{
    int order[64], nseen = 0, count[64] = {0};
    for (int r = 0; r < n; r++) {
        int l = label_of(r, n, k, cyclic), idx;
        for (idx = 0; idx < nseen && order[idx] != l; idx++) {
        }
        if (idx == nseen)
            order[nseen++] = l;
        e[r].label = l;
        e[r].node = idx;
        e[r].local_rank = count[l]++;
        int f = l % 3;
        e[r].gpu = gpu_of(e[r].local_rank, fixture_gpus[f], visible);
        if (f == 0) {
            snprintf(e[r].nic, sizeof(e[r].nic), "mlx5_%d", e[r].gpu);
            e[r].cpu_first = e[r].gpu < 4 ? 0 : 16;
            e[r].cpu_last = e[r].cpu_first + 15;
            e[r].cpu_count = 16;
        } else if (f == 1) {
            snprintf(e[r].nic, sizeof(e[r].nic), "mlx5_0");
            e[r].cpu_first = 0, e[r].cpu_last = 15, e[r].cpu_count = 16;
        } else {
            snprintf(e[r].nic, sizeof(e[r].nic), "eno1");
            e[r].cpu_first = 0, e[r].cpu_last = 3, e[r].cpu_count = 4;
        }
    }
}

static void check_rank(mesh_comm_h comm, int r, const expect_t *e, int world_rank)
{
    mesh_rank_info_t info = {.field_mask = MESH_RANK_INFO_FIELD_NODE | MESH_RANK_INFO_FIELD_GPU |
                                           MESH_RANK_INFO_FIELD_CPUS | MESH_RANK_INFO_FIELD_NIC};
    CHECK(mesh_comm_rank_info(comm, r, &info) == MESH_OK, "%s", mesh_comm_last_error(comm));
    char name[32];
    snprintf(name, sizeof(name), "node%d", e->label);
    CHECK(info.field_mask == (MESH_RANK_INFO_FIELD_NODE | MESH_RANK_INFO_FIELD_GPU |
                              MESH_RANK_INFO_FIELD_CPUS | MESH_RANK_INFO_FIELD_NIC),
          "mask %llx", (unsigned long long)info.field_mask);
    CHECK(strcmp(info.node_name, name) == 0, "world rank %d on %s, expected %s", world_rank,
          info.node_name, name);
    CHECK(info.local_rank == e->local_rank, "world rank %d local rank %d, expected %d", world_rank,
          info.local_rank, e->local_rank);
    CHECK(info.gpu == e->gpu, "world rank %d gpu %d, expected %d", world_rank, info.gpu, e->gpu);
    CHECK(strcmp(info.nic, e->nic) == 0, "world rank %d nic '%s', expected '%s'", world_rank,
          info.nic, e->nic);
    CHECK(info.cpu_first == e->cpu_first && info.cpu_last == e->cpu_last &&
              info.cpu_count == e->cpu_count,
          "world rank %d cpus %d-%d (%d), expected %d-%d (%d)", world_rank, info.cpu_first,
          info.cpu_last, info.cpu_count, e->cpu_first, e->cpu_last, e->cpu_count);
}

int main(int argc, char **argv)
{
    int k = 1, cyclic = 0;
    const char *visible = "";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc)
            k = atoi(argv[++i]);
        else if (strcmp(argv[i], "--cyclic") == 0)
            cyclic = 1;
        else if (strcmp(argv[i], "--visible") == 0 && i + 1 < argc)
            visible = argv[++i];
        else {
            fprintf(stderr, "usage: topo_map --nodes K [--cyclic] [--visible LIST]\n");
            return 2;
        }
    }
    /* this simulated node's machine, chosen before the library reads its knobs */
    const char *id = getenv("MESH_NODE_ID"), *src = getenv("top_srcdir");
    int label = id && strncmp(id, "node", 4) == 0 ? atoi(id + 4) : 0;
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/fixtures/topo/%s", src && *src ? src : MESH_TEST_SRCDIR,
             fixtures[label % 3]);
    setenv("MESH_TOPO_FILE", path, 1);

    mesh_comm_h comm;
    int n;
    if (mesh_mp_init(&comm, &rank, &n))
        return 1;
    if (n > 64)
        return 77;
    expect_t e[64];
    expected(n, k, cyclic, visible, e);

    /* the node map */
    CHECK(mesh_comm_node_count(comm) == k, "%d nodes, expected %d", mesh_comm_node_count(comm), k);
    for (int node = 0; node < mesh_comm_node_count(comm); node++) {
        int ranks[64], want[64], nw = 0;
        for (int r = 0; r < n; r++)
            if (e[r].node == node)
                want[nw++] = r;
        int got = mesh_comm_node_ranks(comm, node, ranks, 64);
        CHECK(got == nw && mesh_comm_local_size(comm, node) == nw, "node %d: %d ranks, expected %d",
              node, got, nw);
        for (int i = 0; i < nw && i < got; i++)
            CHECK(ranks[i] == want[i], "node %d rank %d is %d, expected %d", node, i, ranks[i],
                  want[i]);
        int one = -1;
        CHECK(mesh_comm_node_ranks(comm, node, &one, 1) == nw && one == want[0], "truncated");
    }
    CHECK(mesh_comm_node_ranks(comm, k, NULL, 0) == -1, "node %d accepted", k);
    for (int r = 0; r < n; r++) {
        CHECK(mesh_comm_node(comm, r) == e[r].node, "rank %d node %d, expected %d", r,
              mesh_comm_node(comm, r), e[r].node);
        CHECK(mesh_comm_local_rank(comm, r) == e[r].local_rank, "rank %d local rank %d", r,
              mesh_comm_local_rank(comm, r));
        check_rank(comm, r, &e[r], r);
    }

    /* only the fields asked for are written */
    mesh_rank_info_t part = {
        .field_mask = MESH_RANK_INFO_FIELD_GPU, .nic = "untouched", .node = -7};
    CHECK(mesh_comm_rank_info(comm, rank, &part) == MESH_OK, "partial");
    CHECK(part.field_mask == MESH_RANK_INFO_FIELD_GPU && part.gpu == e[rank].gpu &&
              strcmp(part.nic, "untouched") == 0 && part.node == -7,
          "partial fill");
    CHECK(mesh_comm_rank_info(comm, n, &part) == MESH_ERR_INVALID_ARG, "rank %d accepted", n);
    CHECK(strstr(mesh_comm_last_error(comm), "rank") != NULL, "%s", mesh_comm_last_error(comm));
    CHECK(mesh_comm_rank_info(comm, 0, NULL) == MESH_ERR_INVALID_ARG, "NULL info accepted");

    /* a split keeps every process's GPU, CPUs and NIC: they belong to the process */
    mesh_comm_h half;
    CHECK(mesh_comm_split(comm, rank % 2, n - rank, &half) == MESH_OK, "split");
    if (half) {
        int hn = mesh_comm_size(half);
        for (int i = 0; i < hn; i++) {
            int w = -1, c = 0;
            /* keys n - rank order each half by descending world rank */
            for (int r = n - 1; r >= 0; r--)
                if (r % 2 == rank % 2 && c++ == i)
                    w = r;
            mesh_rank_info_t info = {.field_mask =
                                         MESH_RANK_INFO_FIELD_GPU | MESH_RANK_INFO_FIELD_NIC};
            CHECK(mesh_comm_rank_info(half, i, &info) == MESH_OK, "split info");
            CHECK(w >= 0 && info.gpu == e[w].gpu && strcmp(info.nic, e[w].nic) == 0,
                  "split rank %d (world %d): gpu %d nic %s", i, w, info.gpu, info.nic);
        }
        CHECK(mesh_barrier(half, NULL) == MESH_OK, "barrier on the split");
        mesh_comm_destroy(half);
    }
    CHECK(mesh_barrier(comm, NULL) == MESH_OK, "barrier");
    mesh_comm_destroy(comm);
    if (failures == 0 && rank == 0)
        printf("node map of %d ranks on %d nodes: ok\n", n, k);
    return failures ? 1 : 0;
}
