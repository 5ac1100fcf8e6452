/*
 * zero-bench: how much of the ZeRO layer's gradient communication hides under the backward pass.
 *
 * A model of --layers layers of --params parameters each; the backward pass computes each layer
 * for --compute-ms milliseconds (a busy loop standing in for the kernels, calling
 * mesh_zero_progress every --poll-us microseconds, as a trainer would between kernels; 0: never)
 * and then marks its gradient ready. Per iteration, taking turns:
 *   comm     the backward pass without compute, then mesh_zero_wait_grads: communication alone
 *   compute  the compute alone
 *   on/off   the whole backward pass with overlap on / off, then mesh_zero_wait_grads
 * hidden = (compute + comm - whole) / comm: the part of the communication that the compute
 * covered (0: none, 1: all), per iteration. Prints from rank 0 the medians over --iters
 * iterations and the range of the hidden fractions.
 *   meshrun -n 2 [--nodes 2] bench/zero-bench [--stage 2] [--layers 8] [--params 1048576]
 *       [--compute-ms 4] [--poll-us 100] [--dtype fp32|bf16] [--bucket BYTES] [--iters 10]
 */
#include "bench_time.h"
#include <mesh.h>
#include <mesh/zero.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
    int stage, layers, iters;
    size_t params, bucket;
    double compute_ms, poll_us;
    mesh_dtype_t dtype;
} o = {.stage = 2,
       .layers = 8,
       .iters = 10,
       .params = 1 << 20,
       .bucket = 4 << 20,
       .compute_ms = 4,
       .poll_us = 100,
       .dtype = MESH_FP32};

static int rank;

static void fail(const char *what, mesh_status_t st)
{
    fprintf(stderr, "zero-bench: rank %d: %s: %s: %s\n", rank, what, mesh_status_string(st),
            mesh_comm_last_error(NULL));
    exit(1);
}
#define MUST(call)                                                                                 \
    do {                                                                                           \
        mesh_status_t st_ = (call);                                                                \
        if (st_ != MESH_OK)                                                                        \
            fail(#call, st_);                                                                      \
    } while (0)

/* One layer's backward compute: busy for ms, with progress calls every poll_us. */
static void compute(mesh_zero_h z, double ms)
{
    double end = mesh_time_now() + ms * 1e-3, next = mesh_time_now() + o.poll_us * 1e-6;
    volatile double sink = 0;
    while (mesh_time_now() < end) {
        for (int i = 0; i < 200; i++)
            sink += i * 0.5;
        if (z && o.poll_us > 0 && mesh_time_now() >= next) {
            MUST(mesh_zero_progress(z));
            next = mesh_time_now() + o.poll_us * 1e-6;
        }
    }
}

static mesh_zero_h make(mesh_comm_h comm, int overlap)
{
    mesh_zero_params_t p = {.field_mask =
                                MESH_ZERO_PARAM_FIELD_STAGE | MESH_ZERO_PARAM_FIELD_DTYPE |
                                MESH_ZERO_PARAM_FIELD_BUCKET_BYTES | MESH_ZERO_PARAM_FIELD_OVERLAP,
                            .stage = o.stage,
                            .dtype = o.dtype,
                            .bucket_bytes = o.bucket,
                            .overlap = overlap};
    mesh_zero_h z;
    MUST(mesh_zero_create(comm, &p, &z));
    for (int l = 0; l < o.layers; l++) {
        char name[32];
        snprintf(name, sizeof(name), "layer%d", l);
        MUST(mesh_zero_add(z, name, o.params, 0, NULL, 0, l));
    }
    MUST(mesh_zero_finalize(z));
    return z;
}

/* Backward pass (stage 3 gathers each layer first, the next one prefetched) and the wait for
 * the gradients; seconds. */
static double backward(mesh_comm_h comm, mesh_zero_h z, double ms)
{
    MUST(mesh_barrier(comm, NULL));
    double t0 = mesh_time_now();
    MUST(mesh_zero_gather(z, o.layers - 1));
    for (int l = o.layers - 1; l >= 0; l--) {
        char name[32];
        void *g;
        snprintf(name, sizeof(name), "layer%d", l);
        if (l > 0)
            MUST(mesh_zero_gather(z, l - 1));
        MUST(mesh_zero_wait_params(z, l));
        MUST(mesh_zero_grad(z, name, &g));
        ((char *)g)[0] = 1; /* the first write: staging pages come in as a real model's would */
        compute(z, ms);
        MUST(mesh_zero_grad_ready(z, name));
        MUST(mesh_zero_release(z, l));
    }
    MUST(mesh_zero_wait_grads(z));
    double t = mesh_time_now() - t0;
    MUST(mesh_zero_step(z, NULL));
    return t;
}

static void usage(void)
{
    printf("usage: meshrun -n N [--nodes K] zero-bench [--stage 0..3] [--layers L] [--params P]\n"
           "       [--compute-ms MS] [--poll-us US] [--dtype fp32|bf16] [--bucket BYTES]\n"
           "       [--iters N]\n"
           "Measures the fraction of the gradient communication hidden under a simulated\n"
           "backward pass (L layers of P parameters, MS ms of compute each, progress calls every\n"
           "US us) with overlap on and off; prints medians from rank 0.\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 0;
        }
        if (v == NULL) {
            fprintf(stderr, "zero-bench: %s needs a value (--help)\n", a);
            return 2;
        }
        if (!strcmp(a, "--stage"))
            o.stage = atoi(v);
        else if (!strcmp(a, "--layers"))
            o.layers = atoi(v);
        else if (!strcmp(a, "--params"))
            o.params = (size_t)atol(v);
        else if (!strcmp(a, "--compute-ms"))
            o.compute_ms = atof(v);
        else if (!strcmp(a, "--poll-us"))
            o.poll_us = atof(v);
        else if (!strcmp(a, "--dtype"))
            o.dtype = !strcmp(v, "bf16") ? MESH_BF16 : MESH_FP32;
        else if (!strcmp(a, "--bucket"))
            o.bucket = (size_t)atol(v);
        else if (!strcmp(a, "--iters"))
            o.iters = atoi(v);
        else {
            fprintf(stderr, "zero-bench: unknown option %s (--help)\n", a);
            return 2;
        }
        i++;
    }
    if (o.layers < 1 || o.iters < 1 || o.params < 1) {
        fprintf(stderr, "zero-bench: --layers, --iters and --params must be at least 1\n");
        return 2;
    }
    mesh_comm_h comm;
    MUST(mesh_comm_init_env(&comm));
    rank = mesh_comm_rank(comm);
    mesh_zero_h on = make(comm, 1), off = make(comm, 0);
    double *t[4];
    for (int k = 0; k < 4; k++)
        t[k] = calloc((size_t)o.iters, sizeof(double));
    backward(comm, on, 0); /* warm up: connections, schedules, pages */
    backward(comm, off, 0);
    for (int it = 0; it < o.iters; it++) {
        t[0][it] = backward(comm, on, 0);
        MUST(mesh_barrier(comm, NULL));
        double t0 = mesh_time_now();
        for (int l = 0; l < o.layers; l++)
            compute(NULL, o.compute_ms);
        t[1][it] = mesh_time_now() - t0;
        t[2][it] = backward(comm, on, o.compute_ms);
        t[3][it] = backward(comm, off, o.compute_ms);
    }
    /* hidden fractions per iteration, from measurements taken back to back, then their medians:
     * steadier than a ratio of medians when the machine's load drifts */
    double *h[2];
    for (int m = 0; m < 2; m++) {
        h[m] = calloc((size_t)o.iters, sizeof(double));
        for (int it = 0; it < o.iters; it++)
            h[m][it] = (t[1][it] + t[0][it] - t[2 + m][it]) / t[0][it];
    }
    double lo[2], hi[2];
    for (int m = 0; m < 2; m++) {
        lo[m] = hi[m] = h[m][0];
        for (int it = 1; it < o.iters; it++) {
            lo[m] = h[m][it] < lo[m] ? h[m][it] : lo[m];
            hi[m] = h[m][it] > hi[m] ? h[m][it] : hi[m];
        }
    }
    double hon = bench_median(h[0], o.iters), hoff = bench_median(h[1], o.iters);
    double comm_s = bench_median(t[0], o.iters), comp = bench_median(t[1], o.iters);
    double won = bench_median(t[2], o.iters), woff = bench_median(t[3], o.iters);
    if (rank == 0) {
        printf("# zero-bench: %d ranks on %d node(s), stage %d, %s, %d layers x %zu params, "
               "bucket %zu bytes, %.1f ms compute per layer, progress every %.0f us\n",
               mesh_comm_size(comm), mesh_comm_node_count(comm), o.stage, mesh_dtype_name(o.dtype),
               o.layers, o.params, o.bucket, o.compute_ms, o.poll_us);
        printf("%-8s %9s %11s %9s %9s %10s %10s %17s %17s\n", "", "comm_ms", "compute_ms", "on_ms",
               "off_ms", "hidden_on", "hidden_off", "on_range", "off_range");
        printf("%-8s %9.2f %11.2f %9.2f %9.2f %10.2f %10.2f %8.2f..%-7.2f %8.2f..%-7.2f\n",
               "median", comm_s * 1e3, comp * 1e3, won * 1e3, woff * 1e3, hon, hoff, lo[0], hi[0],
               lo[1], hi[1]);
    }
    free(h[0]);
    free(h[1]);
    for (int k = 0; k < 4; k++)
        free(t[k]);
    mesh_zero_destroy(on);
    mesh_zero_destroy(off);
    mesh_comm_destroy(comm);
    return 0;
}
