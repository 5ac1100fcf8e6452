/* Expert dispatch + combine for the benchmarks (bench_ep.h). */
#include "config.h"
#include "bench/bench.h"
#include "bench/bench_ep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t bench_ep_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int bench_ep_route(int32_t *ids, size_t tokens, int E, int k, double skew, uint64_t seed)
{
    double *p = malloc((size_t)E * sizeof(double));
    if (p == NULL)
        return -1;
    for (size_t t = 0; t < tokens; t++) {
        double total = 0;
        for (int e = 0; e < E; e++)
            total += p[e] = pow(e + 1.0, -skew);
        for (int j = 0; j < k; j++) {
            double u =
                (double)(bench_ep_mix(seed * 1000003u + t * 64 + j) >> 11) / 9007199254740992.0;
            double acc = 0;
            int e = 0;
            for (; e < E - 1; e++) {
                acc += p[e] / total;
                if (p[e] > 0 && u < acc)
                    break;
            }
            while (p[e] == 0)
                e = (e + E - 1) % E;
            ids[t * k + j] = e;
            total -= p[e];
            p[e] = 0;
        }
    }
    free(p);
    return 0;
}

int bench_ep_path(const char *text, mesh_ep_path_t *path)
{
    static const char *const names[] = {"auto", "flat", "hier"};
    size_t n = strcspn(text, ",");
    for (int i = 0; i < 3; i++)
        if (n == strlen(names[i]) && strncmp(text, names[i], n) == 0) {
            *path = (mesh_ep_path_t)i;
            return 0;
        }
    return -1;
}

static struct {
    mesh_comm_h comm;
    mesh_ep_h ep;
    mesh_ep_layout_h lay;
    size_t count;
    float *w; /* [tokens * k] */
    char *ex; /* expert rows */
} bench_ep;

void bench_ep_free(void)
{
    mesh_ep_layout_destroy(bench_ep.lay);
    mesh_ep_destroy(bench_ep.ep);
    free(bench_ep.ex);
    free(bench_ep.w);
    memset(&bench_ep, 0, sizeof(bench_ep));
}

/* A layout for count elements on comm (collective: every rank asks for the same count). */
static mesh_status_t bench_ep_layout(mesh_comm_h comm, size_t count, double skew,
                                     mesh_ep_path_t path)
{
    size_t hidden = count < BENCH_EP_HIDDEN ? count : BENCH_EP_HIDDEN;
    size_t tokens = hidden ? count / hidden : 0;
    int size = mesh_comm_size(comm), k = BENCH_EP_TOPK;
    mesh_ep_params_t p = {.field_mask = MESH_EP_PARAM_FIELD_EXPERTS | MESH_EP_PARAM_FIELD_TOPK |
                                        MESH_EP_PARAM_FIELD_PATH,
                          .experts = 2 * size,
                          .topk = k,
                          .path = path};
    bench_ep_free();
    mesh_status_t st = mesh_ep_create(comm, &p, &bench_ep.ep);
    int32_t *ids = malloc(tokens * k * sizeof(int32_t) + 1);
    if (st == MESH_OK && (ids == NULL || bench_ep_route(ids, tokens, p.experts, k, skew,
                                                        (uint64_t)mesh_comm_rank(comm) + 1)))
        st = MESH_ERR_NO_MEMORY;
    /* every rank takes part in the layout, so that one short of memory fails them all */
    mesh_status_t lst = mesh_ep_layout_create(bench_ep.ep, st == MESH_OK ? tokens : 0,
                                              st == MESH_OK ? ids : NULL, &bench_ep.lay);
    st = st != MESH_OK ? st : lst;
    free(ids);
    if (st != MESH_OK)
        return st;
    /* fp32 rows at most */
    bench_ep.ex = malloc((mesh_ep_layout_recv_rows(bench_ep.lay) + 1) * hidden * 4 + 1);
    bench_ep.w = malloc(tokens * k * sizeof(float) + 1);
    if (bench_ep.ex == NULL || bench_ep.w == NULL)
        return MESH_ERR_NO_MEMORY;
    for (size_t i = 0; i < tokens * k; i++)
        bench_ep.w[i] = 1.0f / k;
    bench_ep.comm = comm;
    bench_ep.count = count;
    return MESH_OK;
}

mesh_status_t bench_ep_run(mesh_comm_h comm, const void *in, void *out, size_t count,
                           mesh_dtype_t dtype, double skew, mesh_ep_path_t path)
{
    size_t hidden = count < BENCH_EP_HIDDEN ? count : BENCH_EP_HIDDEN;
    if (count == 0)
        return MESH_OK;
    if (comm != bench_ep.comm || count != bench_ep.count || bench_ep.lay == NULL) {
        mesh_status_t st = bench_ep_layout(comm, count, skew, path);
        if (st != MESH_OK)
            return st;
    }
    mesh_status_t st = mesh_ep_dispatch(bench_ep.lay, in, bench_ep.ex, hidden, dtype);
    if (st == MESH_OK)
        st = mesh_ep_combine(bench_ep.lay, bench_ep.ex, bench_ep.w, out, NULL, hidden, dtype);
    return st;
}

const char *bench_ep_algo(void)
{
    if (bench_ep.lay == NULL)
        return "?";
    return mesh_ep_layout_path(bench_ep.lay) == MESH_EP_PATH_HIER ? "hier" : "flat";
}
