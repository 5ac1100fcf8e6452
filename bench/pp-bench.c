/*
 * pp-bench: the pipeline executor's measured bubble against the static checker's prediction.
 *
 * The callbacks sleep fixed times (default F = B = W = 2 ms; a schedule that does not split
 * the backward sleeps B + W in each B), so the ranks need no cores to compute and the timeline
 * is set by the schedule and the messages alone. The checker predicts the bubble twice: with
 * the nominal costs and free messages, and with the costs as measured here: the mean time each
 * kind of callback took in the warm-up steps (a sleep wakes up a little late), the one-way
 * time of one activation between pp neighbours to a rank that has been waiting for it a short
 * while (ping-pong), and how much later a rank notices it after a long wait, and from which
 * wait on (bench_wake): a waiting rank spins, then yields and sleeps ever longer
 * (MESH_PROGRESS_SPIN); and the executor's own time per action (the step less callbacks and
 * waits, mesh_pp_exec_stats). Each step starts after a barrier on pp; its
 * makespan T is the longest rank's step, and its bubble is the idle time over T averaged over
 * the ranks, the checker's definition:
 * 1 - sum(busy) / (p T). The table gives the median over the steps and compares it with the
 * prediction from measured costs.
 *   meshrun -n P [--nodes 2] pp-bench [--pp P] [--microbatches M] [--costs F,B,W] ...
 */
#include "bench_time.h"
#include <mesh.h>
#include <mesh/pipeline.h>

#include <errno.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage[] =
    "usage: meshrun -n N [--nodes K] pp-bench [options]\n"
    "  --pp P              pipeline ranks (default: N / dp)\n"
    "  --dp D              pipelines side by side (default 1)\n"
    "  --microbatches M    micro-batches per step (default 8)\n"
    "  --costs F,B,W       milliseconds each callback sleeps (default 2,2,2)\n"
    "  --count N           fp32 elements in an activation (default 1024)\n"
    "  --steps K           measured steps per schedule (default 15), after --warmup W (2);\n"
    "                      the last warm-up step gives the measured costs\n"
    "  --schedules LIST    of afab,1f1b,interleaved,zb1,zbv (default all)\n"
    "  --tolerance X       largest relative difference that passes (default 0.10)\n"
    "  --trace             print each rank's last step: when each F, B and W started, as\n"
    "                      measured and as the checker predicts (ms)\n";

typedef struct {
    double f, b, w; /* seconds */
    int split;
} bench_ctx_t;

static void bench_sleep(double s)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long ns = t.tv_nsec + (long)(s * 1e9);
    t.tv_sec += ns / 1000000000L;
    t.tv_nsec = ns % 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
        ;
}

static mesh_status_t bench_f(void *ctx, const mesh_pp_work_t *w)
{
    (void)w;
    bench_sleep(((bench_ctx_t *)ctx)->f);
    return MESH_OK;
}

static mesh_status_t bench_b(void *ctx, const mesh_pp_work_t *w)
{
    const bench_ctx_t *c = ctx;
    (void)w;
    bench_sleep(c->split ? c->b : c->b + c->w);
    return MESH_OK;
}

static mesh_status_t bench_w(void *ctx, const mesh_pp_work_t *w)
{
    (void)w;
    bench_sleep(((bench_ctx_t *)ctx)->w);
    return MESH_OK;
}

/* How long a sleep of s seconds really takes here (median of 21). */
static double bench_slept(double s)
{
    double t[21];
    for (int i = 0; i < 21; i++) {
        double t0 = mesh_time_now();
        bench_sleep(s);
        t[i] = mesh_time_now() - t0;
    }
    return bench_median(t, 21);
}

/* A wait as a rank of a running pipeline often waits: its message cost is measured after it. */
#define PP_SHORT_WAIT 100e-6

/* One-way time of a message of count fp32 between pp neighbours, averaged over the links
 * (median of 21 round trips each). Each side of a link sleeps `idle` before it sends, so the
 * other has been waiting that long: a rank that waited past its spin notices the message only
 * when it next wakes up from yielding or sleeping. */
static double bench_latency(mesh_comm_h pp, size_t count, double idle)
{
    int p = mesh_comm_size(pp), r = mesh_comm_rank(pp), n = 21;
    float *buf = calloc(count, sizeof(float));
    double rtt[21], sum = 0;
    for (int link = 0; link + 1 < p; link++) {
        if (r == link || r == link + 1) {
            int peer = r == link ? link + 1 : link;
            for (int i = 0; i < n; i++) {
                double t = mesh_time_now();
                if (r == link) {
                    bench_sleep(idle);
                    mesh_send_tagged(pp, buf, count, MESH_FP32, peer, MESH_TAG_MAX, NULL, NULL);
                    mesh_recv_tagged(pp, buf, count, MESH_FP32, peer, MESH_TAG_MAX, NULL, NULL);
                } else {
                    mesh_recv_tagged(pp, buf, count, MESH_FP32, peer, MESH_TAG_MAX, NULL, NULL);
                    bench_sleep(idle);
                    mesh_send_tagged(pp, buf, count, MESH_FP32, peer, MESH_TAG_MAX, NULL, NULL);
                }
                rtt[i] = mesh_time_now() - t;
            }
        }
        double one = r == link ? (bench_median(rtt, n) - 2 * bench_slept(idle)) / 2 : 0;
        mesh_allreduce(pp, &one, &one, 1, MESH_FP64, MESH_SUM, NULL, NULL);
        sum += one > 0 ? one : 0;
    }
    free(buf);
    return p > 1 ? sum / (p - 1) : 0;
}

/* Mean time of the F, B and W callbacks of the last step, over every rank of pp. */
static void bench_durations(mesh_comm_h pp, mesh_pp_schedule_h sched, mesh_pp_exec_h ex,
                            double mean[3])
{
    double sum[6] = {0};
    int r = mesh_comm_rank(pp);
    for (int i = 0; i < mesh_pp_schedule_length(sched, r); i++) {
        mesh_pp_action_t a;
        double t0, t1;
        mesh_pp_schedule_action(sched, r, i, &a);
        if (a.op > MESH_PP_W)
            continue;
        mesh_pp_exec_time(ex, i, &t0, &t1);
        sum[a.op] += t1 - t0;
        sum[3 + a.op] += 1;
    }
    mesh_allreduce(pp, sum, sum, 6, MESH_FP64, MESH_SUM, NULL, NULL);
    for (int k = 0; k < 3; k++)
        mean[k] = sum[3 + k] > 0 ? sum[k] / sum[3 + k] : 0;
}

/* Each rank in turn: its compute actions of the last step, measured start against predicted. */
static void bench_trace(mesh_comm_h pp, mesh_pp_schedule_h sched, mesh_pp_exec_h ex)
{
    int p = mesh_comm_size(pp), r = mesh_comm_rank(pp);
    for (int q = 0; q < p; q++) {
        mesh_barrier(pp, NULL);
        if (q != r)
            continue;
        printf("rank %d:", r);
        for (int i = 0; i < mesh_pp_schedule_length(sched, r); i++) {
            mesh_pp_action_t a;
            double t0, t1, p0, p1;
            mesh_pp_schedule_action(sched, r, i, &a);
            if (a.op > MESH_PP_W)
                continue;
            mesh_pp_exec_time(ex, i, &t0, &t1);
            mesh_pp_check_time(sched, r, i, &p0, &p1);
            printf(" %s%d:%d %.3f/%.3f", mesh_pp_op_name(a.op), a.mb, a.chunk, t0 * 1e3, p0 * 1e3);
        }
        printf("\n");
        fflush(stdout);
    }
    mesh_barrier(pp, NULL);
}

/* The extra time a rank takes to notice a message after a long wait (one F), and the shortest
 * wait, doubling from twice PP_SHORT_WAIT, after which it pays at least half of it. */
static void bench_wake(mesh_comm_h pp, size_t count, double comm, double idle, double *wake,
                       double *after)
{
    *wake = bench_latency(pp, count, idle) - comm;
    *after = idle;
    if (*wake <= 0) {
        *wake = 0;
        return;
    }
    for (double d = 2 * PP_SHORT_WAIT; d < idle; d *= 2)
        if (bench_latency(pp, count, d) - comm >= *wake / 2) {
            *after = d;
            return;
        }
}

static int parse_costs(const char *s, bench_ctx_t *c)
{
    double f, b, w;
    char tail;
    if (sscanf(s, "%lf,%lf,%lf%c", &f, &b, &w, &tail) != 3 || !(f >= 0 && b >= 0 && w >= 0))
        return -1;
    c->f = f * 1e-3;
    c->b = b * 1e-3;
    c->w = w * 1e-3;
    return 0;
}

int main(int argc, char **argv)
{
    int pp_size = 0, dp = 1, m = 8, steps = 15, warmup = 2, trace = 0;
    size_t count = 1024;
    double tol = 0.10;
    const char *list = "afab,1f1b,interleaved,zb1,zbv";
    bench_ctx_t ctx = {.f = 2e-3, .b = 2e-3, .w = 2e-3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = v == NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--trace")) {
            trace = 1;
            continue;
        } else if (!bad && !strcmp(a, "--pp"))
            pp_size = atoi(v);
        else if (!bad && !strcmp(a, "--dp"))
            dp = atoi(v);
        else if (!bad && !strcmp(a, "--microbatches"))
            m = atoi(v);
        else if (!bad && !strcmp(a, "--costs"))
            bad = parse_costs(v, &ctx);
        else if (!bad && !strcmp(a, "--count"))
            count = (size_t)atol(v);
        else if (!bad && !strcmp(a, "--steps"))
            steps = atoi(v);
        else if (!bad && !strcmp(a, "--warmup"))
            warmup = atoi(v);
        else if (!bad && !strcmp(a, "--schedules"))
            list = v;
        else if (!bad && !strcmp(a, "--tolerance"))
            tol = atof(v);
        else
            bad = 1;
        if (bad || steps < 1 || steps > 1000 || warmup < 1 || m < 1 || dp < 1 || count < 1) {
            fprintf(stderr, "pp-bench: bad option '%s'\n%s", a, usage);
            return 2;
        }
        i++;
    }
    mesh_comm_h world;
    if (mesh_comm_init_env(&world) != MESH_OK) {
        fprintf(stderr, "pp-bench: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    int wrank = mesh_comm_rank(world), wsize = mesh_comm_size(world);
    /* wake from a sleep as close to its end as the kernel can */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (pp_size == 0)
        pp_size = wsize / dp;
    /* a pipeline's stages are consecutive ranks, so that a round-robin placement puts each pp
     * link across nodes */
    mesh_grid_params_t gp = {.field_mask =
                                 MESH_GRID_PARAM_FIELD_SIZES | MESH_GRID_PARAM_FIELD_ORDER,
                             .size = {[MESH_AXIS_PP] = pp_size, [MESH_AXIS_DP] = dp},
                             .order = "tp-cp-ep-pp-dp"};
    mesh_grid_h grid;
    if (mesh_grid_create(world, &gp, &grid) != MESH_OK) {
        if (wrank == 0)
            fprintf(stderr, "pp-bench: %s\n", mesh_comm_last_error(world));
        return 1;
    }
    mesh_comm_h pp, dpc;
    mesh_grid_comm(grid, "pp", &pp);
    mesh_grid_comm(grid, "dp", &dpc);
    int p = pp_size, r = mesh_comm_rank(pp);
    /* the first pipeline measures the messages while the others wait (the pipelines are laid
     * out alike); ranks busy waiting would disturb the ping-pong on a machine with few cores */
    double lat[3] = {0};
    if (mesh_grid_coord(grid, "dp") == 0) {
        lat[0] = bench_latency(pp, count, PP_SHORT_WAIT);
        bench_wake(pp, count, lat[0], ctx.f, &lat[1], &lat[2]);
    }
    mesh_broadcast(dpc, lat, lat, 3, MESH_FP64, 0, NULL, NULL);
    double comm = lat[0], wake = lat[1], after = lat[2];
    if (wrank == 0) {
        printf("# pp-bench: %d stages x %d pipeline%s, %d nodes, %d micro-batches, callbacks "
               "sleep F %.3g ms, B %.3g ms, W %.3g ms\n",
               p, dp, dp > 1 ? "s" : "", mesh_comm_node_count(world), m, ctx.f * 1e3, ctx.b * 1e3,
               ctx.w * 1e3);
        printf("# activation %zu fp32: one-way %.1f us to a rank that waited %.0f us; one that "
               "waited %.0f us or more notices it %.1f us later (means over the pp links); "
               "node of each stage:",
               count, comm * 1e6, PP_SHORT_WAIT * 1e6, after * 1e6, wake * 1e6);
        for (int q = 0; q < p; q++)
            printf(" %d", mesh_comm_node(pp, q));
        printf("\n# bubble = idle / makespan per rank, averaged; median of %d steps\n", steps);
        printf("# nominal: predicted with the nominal costs and free messages; predicted: with "
               "the measured ones (F, B, W ms; the executor's gap after each)\n");
        printf("%-12s %2s %8s %20s %6s %10s %10s %9s %9s %s\n", "schedule", "v", "nominal",
               "measured costs", "gap us", "predicted", "measured", "rel.diff", "step ms",
               "verdict");
    }
    int failed = 0;
    for (const char *s = list; *s;) {
        char name[32];
        size_t len = strcspn(s, ",");
        snprintf(name, sizeof(name), "%.*s", (int)(len < 31 ? len : 31), s);
        s += len + (s[len] == ',');
        mesh_pp_schedule_params_t sp = {.stages = p, .microbatches = m};
        mesh_pp_schedule_h sched;
        mesh_pp_report_t rep;
        mesh_pp_costs_t costs = {
            .field_mask = MESH_PP_COSTS_FIELD_F | MESH_PP_COSTS_FIELD_B | MESH_PP_COSTS_FIELD_W |
                          MESH_PP_COSTS_FIELD_COMM | MESH_PP_COSTS_FIELD_WAKE |
                          MESH_PP_COSTS_FIELD_WAKE_AFTER | MESH_PP_COSTS_FIELD_GAP,
            .f = ctx.f,
            .b = ctx.b,
            .w = ctx.w};
        if (mesh_pp_kind_parse(name, &sp.kind) != MESH_OK ||
            mesh_pp_schedule_create(&sp, &sched) != MESH_OK ||
            mesh_pp_check(sched, &costs, &rep) != MESH_OK) {
            if (wrank == 0)
                printf("%-12s %s\n", name, mesh_comm_last_error(NULL));
            failed = 1;
            continue;
        }
        ctx.split = rep.split_backward;
        double nominal = rep.bubble;
        mesh_pp_exec_params_t ep = {.field_mask = MESH_PP_EXEC_FIELD_WEIGHT,
                                    .count = count,
                                    .dtype = MESH_FP32,
                                    .forward = bench_f,
                                    .backward = bench_b,
                                    .weight = bench_w,
                                    .ctx = &ctx};
        mesh_pp_exec_h ex;
        if (mesh_pp_exec_create(pp, sched, &ep, &ex) != MESH_OK) {
            fprintf(stderr, "pp-bench: %s\n", mesh_comm_last_error(NULL));
            return 1;
        }
        double bubble[1000], wall[1000];
        for (int k = -warmup; k < steps; k++) {
            mesh_pp_exec_stats_t st;
            mesh_barrier(pp, NULL);
            if (mesh_pp_exec_run(ex) != MESH_OK) {
                fprintf(stderr, "pp-bench: rank %d: %s\n", r, mesh_comm_last_error(NULL));
                return 1;
            }
            mesh_pp_exec_stats(ex, &st);
            double t = st.wall_s, busy = st.busy_s;
            mesh_allreduce(pp, &t, &t, 1, MESH_FP64, MESH_MAX, NULL, NULL);
            mesh_allreduce(pp, &busy, &busy, 1, MESH_FP64, MESH_SUM, NULL, NULL);
            if (k == -1) { /* the last warm-up step gives the costs */
                double mean[3];
                bench_durations(pp, sched, ex, mean);
                costs.f = mean[MESH_PP_F];
                costs.b = mean[MESH_PP_B];
                costs.w = ctx.split ? mean[MESH_PP_W] : 0;
                costs.comm = comm;
                costs.wake = wake;
                costs.wake_after = after;
                /* the executor's own time per compute action: the step less callbacks and
                 * waits, over the F, B and W actions, averaged over the ranks */
                mesh_pp_exec_stats_t es;
                mesh_pp_exec_stats(ex, &es);
                int nc = 0;
                for (int i = 0; i < mesh_pp_schedule_length(sched, r); i++) {
                    mesh_pp_action_t a;
                    mesh_pp_schedule_action(sched, r, i, &a);
                    nc += a.op <= MESH_PP_W;
                }
                costs.gap = (es.wall_s - es.busy_s - es.wait_s) / nc;
                mesh_allreduce(pp, &costs.gap, &costs.gap, 1, MESH_FP64, MESH_SUM, NULL, NULL);
                costs.gap /= p;
                if (mesh_pp_check(sched, &costs, &rep) != MESH_OK) {
                    fprintf(stderr, "pp-bench: %s\n", mesh_comm_last_error(NULL));
                    return 1;
                }
            }
            if (k < 0)
                continue;
            bubble[k] = 1 - busy / (p * t);
            wall[k] = t;
        }
        double meas = bench_median(bubble, steps), ms = bench_median(wall, steps) * 1e3;
        double rel = rep.bubble > 0 ? (meas - rep.bubble) / rep.bubble : meas;
        double worst = rel < 0 ? -rel : rel;
        mesh_allreduce(dpc, &worst, &worst, 1, MESH_FP64, MESH_MAX, NULL, NULL);
        int ok = worst <= tol;
        failed |= !ok;
        if (wrank == 0) {
            char mc[64];
            snprintf(mc, sizeof(mc), "%.3f,%.3f,%.3f", costs.f * 1e3, costs.b * 1e3, costs.w * 1e3);
            printf("%-12s %2d %8.4f %20s %6.1f %10.4f %10.4f %+8.1f%% %9.2f %s\n", name,
                   mesh_pp_schedule_chunks(sched), nominal, mc, costs.gap * 1e6, rep.bubble, meas,
                   rel * 100, ms, ok ? "within" : "OUTSIDE");
        }
        fflush(stdout);
        if (trace)
            bench_trace(pp, sched, ex);
        mesh_pp_exec_destroy(ex);
        mesh_pp_schedule_destroy(sched);
    }
    if (wrank == 0)
        printf("# %s: every schedule's measured bubble within %.0f%% of the prediction%s\n",
               failed ? "FAIL" : "ok", tol * 100, dp > 1 ? " on every pipeline" : "");
    mesh_grid_destroy(grid);
    mesh_comm_destroy(world);
    return wrank == 0 ? failed : 0; /* one verdict, given once all ranks are done */
}
