/*
 * expert-bench: throughput of expert dispatch + combine (identity experts) against mesh's own
 * all-to-all-v moving the same byte matrix there and back, measured in the same run, iterations
 * interleaved. Run under meshrun, e.g.
 *   tools/meshrun -n 4 --nodes 2 bench/expert-bench --skew 0,1.5
 * Each rank routes its tokens to the top-k experts drawn with probability proportional to
 * 1 / (e + 1)^skew (0: uniform). Times are the slowest rank's; bytes are those that leave a
 * rank, both ways; rank 0 prints the medians, the ratio of the throughputs (all-to-all-v's
 * median time over dispatch + combine's) and the median of the per-iteration ratios, which a
 * load that drifts during the run disturbs less.
 */
#include "mesh.h"
#include "mesh/expert.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(void)
{
    fprintf(stderr, "usage: expert-bench [--tokens T] [--hidden H] [--experts E] [--topk K]\n"
                    "                    [--skew S[,S...]] [--iters N] [--bf16]\n"
                    "  defaults: 2048 tokens per rank, hidden 1024, 8 experts, top-2, skew 0,1.5,\n"
                    "  20 iterations, fp32 rows\n");
}

/* Top-k distinct experts, each drawn from the skewed distribution among those left. */
static void route(int32_t *ids, size_t tokens, int E, int k, double skew, uint64_t seed)
{
    double p[256];
    for (size_t t = 0; t < tokens; t++) {
        double total = 0;
        for (int e = 0; e < E; e++)
            total += p[e] = pow(e + 1.0, -skew);
        for (int j = 0; j < k; j++) {
            double u = (double)(mix(seed * 1000003u + t * 64 + j) >> 11) / 9007199254740992.0;
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
}

int main(int argc, char **argv)
{
    size_t tokens = 2048, hidden = 1024;
    int E = 8, k = 2, iters = 20;
    const char *skews = "0,1.5";
    mesh_dtype_t dt = MESH_FP32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--bf16")) {
            dt = MESH_BF16;
            continue;
        }
        if (v == NULL) {
            usage();
            return strcmp(a, "--help") && strcmp(a, "-h") ? 2 : 0;
        }
        i++;
        if (!strcmp(a, "--tokens"))
            tokens = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--hidden"))
            hidden = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--experts"))
            E = atoi(v);
        else if (!strcmp(a, "--topk"))
            k = atoi(v);
        else if (!strcmp(a, "--skew"))
            skews = v;
        else if (!strcmp(a, "--iters"))
            iters = atoi(v);
        else {
            usage();
            return 2;
        }
    }
    if (E < 1 || E > 256 || k < 1 || k > E || iters < 1 || hidden < 1) {
        usage();
        return 2;
    }
    mesh_comm_h comm;
    if (mesh_comm_init_env(&comm) != MESH_OK) {
        fprintf(stderr, "init: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    int rank = mesh_comm_rank(comm), P = mesh_comm_size(comm);
    mesh_ep_params_t prm = {.field_mask = MESH_EP_PARAM_FIELD_EXPERTS | MESH_EP_PARAM_FIELD_TOPK,
                            .experts = E,
                            .topk = k};
    mesh_ep_h ep;
    if (mesh_ep_create(comm, &prm, &ep) != MESH_OK) {
        fprintf(stderr, "expert-bench: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    size_t rb = hidden * mesh_dtype_size(dt);
    int32_t *ids = malloc(tokens * k * sizeof(int32_t));
    float *w = malloc(tokens * k * sizeof(float));
    char *in = malloc(tokens * rb), *out = malloc(tokens * rb);
    for (size_t i = 0; i < tokens * k; i++)
        w[i] = 1.0f / k;
    for (size_t i = 0; i < tokens * rb; i++)
        in[i] = (char)(mix(i) & 0x3f);
    size_t *sc = calloc(4 * (size_t)P, sizeof(size_t)), *sd = sc + P, *rc = sd + P, *rd = rc + P;
    double *te = malloc(iters * sizeof(double)), *ta = malloc(iters * sizeof(double));
    double *td = malloc(iters * sizeof(double)), *tr = malloc(iters * sizeof(double));
    if (rank == 0)
        printf("# expert-bench: %d ranks on %d nodes, %zu tokens per rank, hidden %zu %s, E=%d "
               "top-%d, %d iterations\n",
               P, mesh_comm_node_count(comm), tokens, hidden, mesh_dtype_name(dt), E, k, iters);
    int status = 0;
    for (const char *s = skews; s && *s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL) {
        double skew = atof(s);
        route(ids, tokens, E, k, skew, (uint64_t)rank + 1);
        mesh_ep_layout_h l;
        if (mesh_ep_layout_create(ep, tokens, ids, &l) != MESH_OK) {
            fprintf(stderr, "layout: %s\n", mesh_comm_last_error(NULL));
            status = 1;
            break;
        }
        size_t nrecv = mesh_ep_layout_recv_rows(l);
        char *ex = malloc((nrecv + 1) * rb);
        /* the same byte matrix for all-to-all-v: rows to each expert's owner */
        memset(sc, 0, 4 * (size_t)P * sizeof(size_t));
        for (size_t i = 0; i < tokens * k; i++)
            sc[ids[i] / (E / P)] += rb;
        mesh_alltoall(comm, sc, rc, sizeof(size_t), MESH_UINT8, NULL, NULL);
        uint64_t off = 0, bytes[2] = {0, 0};
        size_t stot = 0, rtot = 0;
        for (int p = 0; p < P; p++) {
            sd[p] = stot, stot += sc[p];
            rd[p] = rtot, rtot += rc[p];
            off += p == rank ? 0 : sc[p] + rc[p];
        }
        bytes[0] = off;
        mesh_allreduce(comm, bytes, bytes + 1, 1, MESH_UINT64, MESH_SUM, NULL, NULL);
        char *sb = malloc(stot + 1), *rbuf = malloc(rtot + 1);
        memset(sb, 1, stot);
        for (int it = -3; it < iters; it++) {
            double t[3];
            mesh_barrier(comm, NULL);
            t[0] = now();
            mesh_status_t st = mesh_ep_dispatch(l, in, ex, hidden, dt);
            t[2] = now() - t[0];
            if (st == MESH_OK)
                st = mesh_ep_combine(l, ex, w, out, NULL, hidden, dt);
            t[0] = now() - t[0];
            mesh_barrier(comm, NULL);
            t[1] = now();
            if (st == MESH_OK)
                st = mesh_alltoallv(comm, sb, sc, sd, rbuf, rc, rd, MESH_UINT8, NULL, NULL);
            if (st == MESH_OK)
                st = mesh_alltoallv(comm, rbuf, rc, rd, sb, sc, sd, MESH_UINT8, NULL, NULL);
            t[1] = now() - t[1];
            if (st != MESH_OK) {
                fprintf(stderr, "[rank %d] %s\n", rank, mesh_comm_last_error(NULL));
                status = 1;
                break;
            }
            mesh_allreduce(comm, t, t, 3, MESH_FP64, MESH_MAX, NULL, NULL);
            if (it >= 0)
                te[it] = t[0], ta[it] = t[1], td[it] = t[2];
        }
        if (status == 0 && rank == 0) {
            for (int it = 0; it < iters; it++) /* paired: each iteration's two runs are adjacent */
                tr[it] = ta[it] / te[it];
            double me = median(te, iters), ma = median(ta, iters), md = median(td, iters);
            double mr = median(tr, iters);
            printf("skew %-4g rank 0's experts get %5.1f%% of the rows: dispatch+combine %8.3f ms "
                   "%7.1f MB/s (dispatch %.3f ms) | alltoallv x2 %8.3f ms %7.1f MB/s | ratio %.2f "
                   "(median of paired ratios %.2f)\n",
                   skew, 100.0 * nrecv / ((double)tokens * k * P), me * 1e3, bytes[1] / me / 1e6,
                   md * 1e3, ma * 1e3, bytes[1] / ma / 1e6, ma / me, mr);
        }
        free(sb), free(rbuf), free(ex);
        mesh_ep_layout_destroy(l);
        if (status)
            break;
    }
    mesh_ep_destroy(ep);
    mesh_comm_destroy(comm);
    free(ids), free(w), free(in), free(out), free(sc), free(te), free(ta), free(td), free(tr);
    return status;
}
