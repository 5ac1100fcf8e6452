/*
 * cp-bench: context-parallel causal attention (mesh/context.h), forward and backward, by the ring
 * with overlap, the ring waiting for each block (MESH_CP_NO_OVERLAP) and the all-gather variant,
 * over the world as the cp group. Run under meshrun, e.g.
 *   tools/meshrun -n 4 bench/cp-bench --seq 4096 --zigzag
 * The three first run once and must agree (out and the gradients within 1e-4 relative of the
 * ring's) before anything is timed; then their iterations are interleaved, times are the
 * slowest rank's, and rank 0 prints the medians and each variant's time over the ring's.
 */
#include "bench_time.h"
#include "mesh.h"
#include "mesh/context.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { VARIANTS = 3, OUTS = 4 }; /* out, dq, dk, dv */

static const char *const names[VARIANTS] = {"ring", "ring, no overlap", "all-gather"};

static float *rnd(uint64_t seed, size_t n)
{
    float *a = malloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++) {
        uint64_t z = seed * 0x9e3779b97f4a7c15ull + i + 1;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        a[i] = (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    return a;
}

static void usage(void)
{
    fprintf(stderr, "usage: cp-bench [--seq S] [--heads H] [--head-dim D] [--batch B] [--iters N]\n"
                    "                [--zigzag]\n"
                    "  defaults: seq 2048 (the whole sequence), 8 heads of 64, batch 1,\n"
                    "  10 iterations, contiguous sharding\n");
}

int main(int argc, char **argv)
{
    size_t seq = 2048, hd = 64, batch = 1;
    int heads = 8, iters = 10, zigzag = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seq") && i + 1 < argc)
            seq = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--heads") && i + 1 < argc)
            heads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--head-dim") && i + 1 < argc)
            hd = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--zigzag"))
            zigzag = 1;
        else {
            usage();
            return 2;
        }
    }
    mesh_comm_h comm;
    if (mesh_comm_init_env(&comm) != MESH_OK) {
        fprintf(stderr, "init: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    int rank = mesh_comm_rank(comm), P = mesh_comm_size(comm), status = 0;
    if (iters < 1 || heads < 1 || seq % ((size_t)P * (zigzag ? 2 : 1))) {
        if (rank == 0)
            fprintf(stderr, "cp-bench: --seq %zu does not split into %d%s ranks' chunks\n", seq, P,
                    zigzag ? " x 2" : "");
        mesh_comm_destroy(comm);
        return 2;
    }
    mesh_cp_h cp[VARIANTS] = {NULL, NULL, NULL};
    for (int v = 0; v < VARIANTS; v++) {
        mesh_cp_params_t p = {
            .field_mask = MESH_CP_PARAM_FIELD_FLAGS | MESH_CP_PARAM_FIELD_ALGORITHM,
            .flags = (zigzag ? MESH_CP_ZIGZAG : 0u) | (v == 1 ? MESH_CP_NO_OVERLAP : 0u),
            .algorithm = v == 2 ? MESH_CP_ALLGATHER : MESH_CP_RING};
        if (mesh_cp_create(comm, &p, &cp[v]) != MESH_OK) {
            fprintf(stderr, "cp: %s\n", mesh_comm_last_error(NULL));
            return 1;
        }
    }
    size_t w = (size_t)heads * hd, n = batch * (seq / (size_t)P) * w;
    size_t nl = batch * (size_t)heads * (seq / (size_t)P);
    float *q = rnd(1 + (uint64_t)rank, n), *k = rnd(101 + (uint64_t)rank, n);
    float *v = rnd(201 + (uint64_t)rank, n), *dout = rnd(301 + (uint64_t)rank, n);
    float *lse = malloc(nl * sizeof(float)), *res[VARIANTS][OUTS];
    for (int x = 0; x < VARIANTS; x++)
        for (int o = 0; o < OUTS; o++)
            res[x][o] = malloc(n * sizeof(float));
    double *tf[VARIANTS], *tb[VARIANTS];
    for (int x = 0; x < VARIANTS; x++)
        tf[x] = calloc((size_t)iters, sizeof(double)),
        tb[x] = calloc((size_t)iters, sizeof(double));
    mesh_cp_shape_t sh = {.batch = batch, .seq = seq, .heads = heads, .head_dim = hd};
    /* iteration -1 validates, the rest are timed */
    for (int it = -1; it < iters && status == 0; it++)
        for (int x = 0; x < VARIANTS && status == 0; x++) {
            double t[2];
            mesh_barrier(comm, NULL);
            t[0] = mesh_time_now();
            mesh_status_t st = mesh_cp_attention_forward(cp[x], &sh, q, k, v, res[x][0], lse);
            t[0] = mesh_time_now() - t[0];
            mesh_barrier(comm, NULL);
            t[1] = mesh_time_now();
            if (st == MESH_OK)
                st = mesh_cp_attention_backward(cp[x], &sh, q, k, v, res[x][0], lse, dout,
                                                res[x][1], res[x][2], res[x][3]);
            t[1] = mesh_time_now() - t[1];
            if (st != MESH_OK) {
                fprintf(stderr, "[rank %d] %s: %s\n", rank, names[x], mesh_comm_last_error(NULL));
                status = 1;
            }
            mesh_allreduce(comm, t, t, 2, MESH_FP64, MESH_MAX, NULL, NULL);
            if (it >= 0)
                tf[x][it] = t[0], tb[x][it] = t[1];
            else if (x > 0) {
                int64_t bad = 0;
                for (int o = 0; o < OUTS; o++)
                    for (size_t i = 0; i < n; i++)
                        bad += !(fabsf(res[x][o][i] - res[0][o][i]) <=
                                 1e-4f * (1.0f + fabsf(res[0][o][i])));
                mesh_allreduce(comm, &bad, &bad, 1, MESH_INT64, MESH_SUM, NULL, NULL);
                if (bad) {
                    if (rank == 0)
                        fprintf(stderr, "cp-bench: %s differs from the ring in %lld values\n",
                                names[x], (long long)bad);
                    status = 1;
                }
            }
        }
    if (status == 0 && rank == 0) {
        printf("# cp=%d seq=%zu heads=%d head_dim=%zu batch=%zu %s, %d iterations\n", P, seq, heads,
               hd, batch, zigzag ? "zig-zag" : "contiguous", iters);
        double ring = 0;
        for (int x = 0; x < VARIANTS; x++) {
            double f = bench_median(tf[x], iters), b = bench_median(tb[x], iters);
            if (x == 0)
                ring = f + b;
            printf("%-17s forward %9.3f ms  backward %9.3f ms  total / ring's %.2f\n", names[x],
                   f * 1e3, b * 1e3, (f + b) / ring);
        }
    }
    for (int x = 0; x < VARIANTS; x++) {
        mesh_cp_destroy(cp[x]);
        free(tf[x]), free(tb[x]);
        for (int o = 0; o < OUTS; o++)
            free(res[x][o]);
    }
    free(q), free(k), free(v), free(dout), free(lse);
    mesh_comm_destroy(comm);
    return status;
}
