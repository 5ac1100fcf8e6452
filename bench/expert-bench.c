/*
 * expert-bench: throughput of expert dispatch + combine (identity experts) against mesh's own
 * all-to-all-v moving the same byte matrix there and back, measured in the same run, iterations
 * interleaved, on each path asked for (--path: flat, hier, auto). Run under meshrun, e.g.
 *   tools/meshrun -n 4 --nodes 2 bench/expert-bench --skew 0,1.5 --path flat,hier
 * Each rank routes its tokens to the top-k experts drawn with probability proportional to
 * 1 / (e + 1)^skew (0: uniform). Times are the slowest rank's; bytes are those that leave a
 * rank, both ways; rank 0 prints the medians, the ratio of the throughputs (all-to-all-v's
 * median time over dispatch + combine's) and the median of the per-iteration ratios, which a
 * load that drifts during the run disturbs less. "across nodes" is what all ranks sent per
 * dispatch and per combine through the transports that reach other nodes
 * (mesh_comm_tl_bytes), named in the heading.
 */
#include "bench_time.h"
#include "bench/bench_ep.h"
#include "mesh.h"
#include "mesh/expert.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void usage(void)
{
    fprintf(stderr, "usage: expert-bench [--tokens T] [--hidden H] [--experts E] [--topk K]\n"
                    "                    [--skew S[,S...]] [--path P[,P...]] [--iters N] [--bf16]\n"
                    "  defaults: 2048 tokens per rank, hidden 1024, 8 experts, top-2, skew 0,1.5,\n"
                    "  paths flat,hier (and auto), 20 iterations, fp32 rows\n");
}

/* The transports that reach ranks of other nodes: up to 8 names, how many. */
static int cross_tls(mesh_comm_h comm, const char **names)
{
    int nn = 0, me = mesh_comm_node(comm, mesh_comm_rank(comm));
    for (int p = 0; p < mesh_comm_size(comm); p++) {
        const char *t = mesh_comm_peer_transport(comm, p);
        int i = 0;
        while (i < nn && strcmp(names[i], t))
            i++;
        if (mesh_comm_node(comm, p) != me && i == nn && nn < 8)
            names[nn++] = t;
    }
    return nn;
}

/* Bytes this rank sent through them so far. */
static uint64_t cross_bytes(mesh_comm_h comm, const char **names, int nn)
{
    uint64_t sum = 0, sent;
    for (int i = 0; i < nn; i++)
        if (mesh_comm_tl_bytes(comm, names[i], &sent, NULL) == MESH_OK)
            sum += sent;
    return sum;
}

/* What every run shares. */
typedef struct {
    mesh_comm_h comm;
    int rank, P, E, k, iters, ntl;
    size_t tokens, hidden, rb;
    mesh_dtype_t dt;
    const char *tls[8];
    int32_t *ids;
    float *w;
    char *in, *out;
    size_t *sc; /* all-to-all-v counts and displacements [4][P] */
    double *te, *ta, *td, *tr;
} bench_t;

/* One skew on one path: dispatch + combine against all-to-all-v, iterations interleaved. */
static int run_path(bench_t *b, double skew, mesh_ep_path_t path)
{
    static const char *pname[] = {"auto", "flat", "hier"};
    mesh_comm_h comm = b->comm;
    int P = b->P, rank = b->rank, iters = b->iters, status = 0;
    size_t rb = b->rb, *sc = b->sc, *sd = sc + P, *rc = sd + P, *rd = rc + P;
    mesh_ep_params_t prm = {.field_mask = MESH_EP_PARAM_FIELD_EXPERTS | MESH_EP_PARAM_FIELD_TOPK |
                                          MESH_EP_PARAM_FIELD_PATH,
                            .experts = b->E,
                            .topk = b->k,
                            .path = path};
    mesh_ep_h ep;
    mesh_ep_layout_h l;
    if (mesh_ep_create(comm, &prm, &ep) != MESH_OK) {
        fprintf(stderr, "expert-bench: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    if (mesh_ep_layout_create(ep, b->tokens, b->ids, &l) != MESH_OK) {
        fprintf(stderr, "layout: %s\n", mesh_comm_last_error(NULL));
        mesh_ep_destroy(ep);
        return 1;
    }
    size_t nrecv = mesh_ep_layout_recv_rows(l);
    char *ex = malloc((nrecv + 1) * rb);
    /* the same byte matrix for all-to-all-v: rows to each expert's owner */
    memset(sc, 0, 4 * (size_t)P * sizeof(size_t));
    for (size_t i = 0; i < b->tokens * b->k; i++)
        sc[b->ids[i] / (b->E / P)] += rb;
    mesh_alltoall(comm, sc, rc, sizeof(size_t), MESH_UINT8, NULL, NULL);
    uint64_t off = 0, bytes[2] = {0, 0}, cross[2] = {0, 0};
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
        uint64_t c0 = cross_bytes(comm, b->tls, b->ntl);
        t[0] = mesh_time_now();
        mesh_status_t st = mesh_ep_dispatch(l, b->in, ex, b->hidden, b->dt);
        t[2] = mesh_time_now() - t[0];
        uint64_t c1 = cross_bytes(comm, b->tls, b->ntl);
        if (st == MESH_OK)
            st = mesh_ep_combine(l, ex, b->w, b->out, NULL, b->hidden, b->dt);
        t[0] = mesh_time_now() - t[0];
        if (it >= 0) {
            cross[0] += c1 - c0;
            cross[1] += cross_bytes(comm, b->tls, b->ntl) - c1;
        }
        mesh_barrier(comm, NULL);
        t[1] = mesh_time_now();
        if (st == MESH_OK)
            st = mesh_alltoallv(comm, sb, sc, sd, rbuf, rc, rd, MESH_UINT8, NULL, NULL);
        if (st == MESH_OK)
            st = mesh_alltoallv(comm, rbuf, rc, rd, sb, sc, sd, MESH_UINT8, NULL, NULL);
        t[1] = mesh_time_now() - t[1];
        if (st != MESH_OK) {
            fprintf(stderr, "[rank %d] %s\n", rank, mesh_comm_last_error(NULL));
            status = 1;
            break;
        }
        mesh_allreduce(comm, t, t, 3, MESH_FP64, MESH_MAX, NULL, NULL);
        if (it >= 0)
            b->te[it] = t[0], b->ta[it] = t[1], b->td[it] = t[2];
    }
    if (status == 0)
        mesh_allreduce(comm, cross, cross, 2, MESH_UINT64, MESH_SUM, NULL, NULL);
    if (status == 0 && rank == 0) {
        double *te = b->te, *ta = b->ta, *td = b->td, *tr = b->tr;
        for (int it = 0; it < iters; it++) /* paired: each iteration's two runs are adjacent */
            tr[it] = ta[it] / te[it];
        double me = bench_median(te, iters), ma = bench_median(ta, iters),
               md = bench_median(td, iters);
        double mr = bench_median(tr, iters);
        char how[48] = "";
        if (path == MESH_EP_PATH_AUTO)
            snprintf(how, sizeof(how), "(%s, link ratio %.2f)",
                     mesh_ep_layout_path(l) == MESH_EP_PATH_HIER ? "hier" : "flat",
                     mesh_ep_link_ratio(ep));
        printf("skew %-4g %s%s rank 0's experts get %5.1f%% of the rows: dispatch+combine %8.3f ms "
               "%7.1f MB/s (dispatch %.3f ms) across nodes: dispatch %.2f MB combine %.2f MB | "
               "alltoallv x2 %8.3f ms %7.1f MB/s | ratio %.2f (median of paired ratios %.2f)\n",
               skew, pname[path], how, 100.0 * nrecv / ((double)b->tokens * b->k * P), me * 1e3,
               bytes[1] / me / 1e6, md * 1e3, cross[0] / 1e6 / iters, cross[1] / 1e6 / iters,
               ma * 1e3, bytes[1] / ma / 1e6, ma / me, mr);
    }
    free(sb), free(rbuf), free(ex);
    mesh_ep_layout_destroy(l);
    mesh_ep_destroy(ep);
    return status;
}

int main(int argc, char **argv)
{
    bench_t b = {.tokens = 2048, .hidden = 1024, .E = 8, .k = 2, .iters = 20, .dt = MESH_FP32};
    const char *skews = "0,1.5", *paths = "flat,hier";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--bf16")) {
            b.dt = MESH_BF16;
            continue;
        }
        if (v == NULL) {
            usage();
            return strcmp(a, "--help") && strcmp(a, "-h") ? 2 : 0;
        }
        i++;
        if (!strcmp(a, "--tokens"))
            b.tokens = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--hidden"))
            b.hidden = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--experts"))
            b.E = atoi(v);
        else if (!strcmp(a, "--topk"))
            b.k = atoi(v);
        else if (!strcmp(a, "--skew"))
            skews = v;
        else if (!strcmp(a, "--path"))
            paths = v;
        else if (!strcmp(a, "--iters"))
            b.iters = atoi(v);
        else {
            usage();
            return 2;
        }
    }
    mesh_ep_path_t path;
    for (const char *s = paths; s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
        if (bench_ep_path(s, &path)) {
            usage();
            return 2;
        }
    if (b.E < 1 || b.E > 256 || b.k < 1 || b.k > b.E || b.iters < 1 || b.hidden < 1) {
        usage();
        return 2;
    }
    if (mesh_comm_init_env(&b.comm) != MESH_OK) {
        fprintf(stderr, "init: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    b.rank = mesh_comm_rank(b.comm);
    b.P = mesh_comm_size(b.comm);
    if (b.E % b.P) {
        if (b.rank == 0)
            fprintf(stderr, "expert-bench: experts=%d is not a multiple of %d ranks\n", b.E, b.P);
        mesh_comm_destroy(b.comm);
        return 2;
    }
    b.ntl = cross_tls(b.comm, b.tls);
    b.rb = b.hidden * mesh_dtype_size(b.dt);
    size_t tk = b.tokens * b.k;
    b.ids = malloc(tk * sizeof(int32_t) + 1);
    b.w = malloc(tk * sizeof(float) + 1);
    b.in = malloc(b.tokens * b.rb + 1);
    b.out = malloc(b.tokens * b.rb + 1);
    for (size_t i = 0; i < tk; i++)
        b.w[i] = 1.0f / b.k;
    for (size_t i = 0; i < b.tokens * b.rb; i++)
        b.in[i] = (char)(mix(i) & 0x3f);
    b.sc = calloc(4 * (size_t)b.P, sizeof(size_t));
    b.te = malloc(4 * b.iters * sizeof(double));
    b.ta = b.te + b.iters, b.td = b.ta + b.iters, b.tr = b.td + b.iters;
    if (b.rank == 0) {
        printf("# expert-bench: %d ranks on %d nodes, %zu tokens per rank, hidden %zu %s, E=%d "
               "top-%d, %d iterations; across nodes:",
               b.P, mesh_comm_node_count(b.comm), b.tokens, b.hidden, mesh_dtype_name(b.dt), b.E,
               b.k, b.iters);
        for (int i = 0; i < b.ntl; i++)
            printf(" %s", b.tls[i]);
        printf("%s\n", b.ntl ? "" : " none");
    }
    int status = 0;
    for (const char *s = skews; s && *s && !status;
         s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL) {
        double skew = atof(s);
        if (bench_ep_route(b.ids, b.tokens, b.E, b.k, skew, (uint64_t)b.rank + 1)) {
            fprintf(stderr, "expert-bench: out of memory\n");
            status = 1;
            break;
        }
        for (const char *q = paths; q && !status; q = strchr(q, ',') ? strchr(q, ',') + 1 : NULL) {
            bench_ep_path(q, &path);
            status = run_path(&b, skew, path);
        }
    }
    mesh_comm_destroy(b.comm);
    free(b.ids), free(b.w), free(b.in), free(b.out), free(b.sc), free(b.te);
    return status;
}
