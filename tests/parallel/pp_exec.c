/*
 * The pipeline executor on real processes against a single-process reference.
 *
 * The model is a chain of S = p * v stages; stage s maps a vector of n values by the matrix
 * A_s = diag(a_s) + b_s P (P shifts by one, cyclically), and the loss of a micro-batch is
 * c . x_S. Every value is a small integer, so every sum is exact in double whatever its order:
 * the parallel run must equal the reference bit for bit, losses and weight gradients both. Each
 * rank computes the reference of its own stages here and compares after every step.
 *
 * For every schedule (afab, 1f1b, interleaved, zb1, zbv) and m in {p, 2p+1} (interleaved: p
 * and 2p in groups of p, 2p+1 in groups of p+1), a few steps run on one executor. With dp > 1
 * the grads_ready hook starts an all-reduce of the chunk's gradient on the dp communicator
 * (nonblocking) while the pipeline goes on; the step ends by waiting for them, and the
 * gradients must then be the sum over the replicas, whose data differ.
 * --fail: the forward of micro-batch 1 fails on the last rank; that rank's step fails naming
 * the callback, the others fail within MESH_TIMEOUT naming what did not arrive, and no
 * executor takes another step.
 *   pp_exec --pp P [--dp D] [--n N] [--steps K] [--only KIND] [--cross] [--fail]
 * --cross: the pp links between simulated nodes must use a network transport.
 */
#include "mesh.h"
#include <mesh/pipeline.h>
#include "tests/harness/mp_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wrank, failures;
#define CHECK(cond, ...) MESH_MP_CHECK(wrank, failures, cond, __VA_ARGS__)

typedef struct {
    int p, v, S, m, n, rank, dpi, dp;
    mesh_pp_schedule_h sched;
    mesh_comm_h dpc;
    double *a;                          /* [S][n]: diagonal weights of each stage */
    double *ga, *gb;                    /* [v][n], [v]: this rank's weight gradients per chunk */
    double *ref_ga, *ref_gb, *ref_loss; /* [S][n], [S], [m]: reference, summed over dp */
    double *loss;                       /* [m] on the rank of the last stage */
    double *stash;        /* [m][v][n]: gradient of the output kept from B to W (split) */
    mesh_request_h *red;  /* [v]: dp reductions under way */
    int *ready;           /* [v]: grads_ready calls this step */
    double *tx, *tg, *ty; /* [n] each: scratch of the callbacks */
    int calls[3];
    int fail_rank; /* the rank whose forward of micro-batch 1 fails, or -1 */
} toy_t;

static double toy_b(int s)
{
    return s % 2 ? -1.0 : 1.0;
}
static double toy_c(int i)
{
    return (double)(i % 3 - 1);
}
static double toy_x0(int mb, int d, int i)
{
    return (double)((mb * 5 + i * 3 + d * 7) % 9 - 4);
}

static void toy_fwd(const toy_t *t, int s, const double *x, double *y)
{
    for (int i = 0; i < t->n; i++)
        y[i] = t->a[s * t->n + i] * x[i] + toy_b(s) * x[(i + 1) % t->n];
}

/* gradient by the input, from the gradient g of the output */
static void toy_bwd(const toy_t *t, int s, const double *g, double *gx)
{
    for (int i = 0; i < t->n; i++)
        gx[i] = t->a[s * t->n + i] * g[i] + toy_b(s) * g[(i + t->n - 1) % t->n];
}

static void toy_wgrad(const toy_t *t, const double *g, const double *x, double *ga, double *gb)
{
    for (int i = 0; i < t->n; i++) {
        ga[i] += g[i] * x[i];
        *gb += g[i] * x[(i + 1) % t->n];
    }
}

/* The single-process run: every micro-batch of every dp replica through all S stages. */
static void toy_reference(toy_t *t)
{
    int n = t->n, S = t->S;
    double *xs = malloc(sizeof(double) * (size_t)(S + 1) * n), *g = malloc(sizeof(double) * n),
           *gx = malloc(sizeof(double) * n);
    memset(t->ref_ga, 0, sizeof(double) * (size_t)S * n);
    memset(t->ref_gb, 0, sizeof(double) * (size_t)S);
    memset(t->ref_loss, 0, sizeof(double) * (size_t)t->m);
    for (int d = 0; d < t->dp; d++)
        for (int mb = 0; mb < t->m; mb++) {
            for (int i = 0; i < n; i++)
                xs[i] = toy_x0(mb, d, i);
            for (int s = 0; s < S; s++)
                toy_fwd(t, s, xs + (size_t)s * n, xs + (size_t)(s + 1) * n);
            double loss = 0;
            for (int i = 0; i < n; i++) {
                loss += toy_c(i) * xs[(size_t)S * n + i];
                g[i] = toy_c(i);
            }
            if (d == t->dpi)
                t->ref_loss[mb] = loss;
            for (int s = S - 1; s >= 0; s--) {
                toy_wgrad(t, g, xs + (size_t)s * n, t->ref_ga + (size_t)s * n, &t->ref_gb[s]);
                toy_bwd(t, s, g, gx);
                memcpy(g, gx, sizeof(double) * n);
            }
        }
    free(xs);
    free(g);
    free(gx);
}

/* The input of stage 0 is the data; the last stage's output gradient is the loss's. */
static const double *toy_input(const toy_t *t, const mesh_pp_work_t *w, double *tmp)
{
    if (w->input)
        return w->input;
    for (int i = 0; i < t->n; i++)
        tmp[i] = toy_x0(w->mb, t->dpi, i);
    return tmp;
}

static const double *toy_gout(const toy_t *t, const mesh_pp_work_t *w, double *tmp)
{
    if (w->grad_output)
        return w->grad_output;
    for (int i = 0; i < t->n; i++)
        tmp[i] = toy_c(i);
    return tmp;
}

/* What the executor hands a callback must fit the schedule's stage map. */
static void toy_check_work(toy_t *t, const mesh_pp_work_t *w, mesh_pp_op_t op)
{
    CHECK(w->op == op && w->mb >= 0 && w->mb < t->m && w->chunk >= 0 && w->chunk < t->v,
          "bad work op %d mb %d chunk %d", (int)w->op, w->mb, w->chunk);
    CHECK(w->stage == mesh_pp_schedule_stage(t->sched, t->rank, w->chunk), "stage %d", w->stage);
    CHECK((w->input == NULL) == (w->stage == 0), "input at stage %d", w->stage);
    if (op == MESH_PP_F)
        CHECK((w->output == NULL) == (w->stage == t->S - 1), "output");
    if (op != MESH_PP_F)
        CHECK((w->grad_output == NULL) == (w->stage == t->S - 1), "grad_output at stage %d",
              w->stage);
    if (op == MESH_PP_B)
        CHECK((w->grad_input == NULL) == (w->stage == 0), "grad_input");
}

static mesh_status_t toy_forward(void *ctx, const mesh_pp_work_t *w)
{
    toy_t *t = ctx;
    toy_check_work(t, w, MESH_PP_F);
    t->calls[0]++;
    if (t->rank == t->fail_rank && w->mb == 1)
        return MESH_ERR_IO;
    double *out = w->output ? (double *)w->output : t->ty;
    toy_fwd(t, w->stage, toy_input(t, w, t->tx), out);
    if (w->stage == t->S - 1) {
        double loss = 0;
        for (int i = 0; i < t->n; i++)
            loss += toy_c(i) * out[i];
        t->loss[w->mb] = loss;
    }
    return MESH_OK;
}

static mesh_status_t toy_backward(void *ctx, const mesh_pp_work_t *w)
{
    toy_t *t = ctx;
    toy_check_work(t, w, MESH_PP_B);
    t->calls[1]++;
    const double *g = toy_gout(t, w, t->tg);
    if (w->grad_input)
        toy_bwd(t, w->stage, g, w->grad_input);
    int split = mesh_pp_schedule_kind(t->sched) == MESH_PP_ZB1 ||
                mesh_pp_schedule_kind(t->sched) == MESH_PP_ZBV;
    if (!split)
        toy_wgrad(t, g, toy_input(t, w, t->tx), t->ga + (size_t)w->chunk * t->n, &t->gb[w->chunk]);
    return MESH_OK;
}

static mesh_status_t toy_weight(void *ctx, const mesh_pp_work_t *w)
{
    toy_t *t = ctx;
    toy_check_work(t, w, MESH_PP_W);
    t->calls[2]++;
    toy_wgrad(t, toy_gout(t, w, t->tg), toy_input(t, w, t->tx), t->ga + (size_t)w->chunk * t->n,
              &t->gb[w->chunk]);
    return MESH_OK;
}

/* The chunk's gradient is final: on one replica it must already equal the reference; with
 * replicas, its reduction over dp starts now, in place, while the pipeline goes on. */
static mesh_status_t toy_ready(void *ctx, int chunk)
{
    toy_t *t = ctx;
    t->ready[chunk]++;
    if (t->dp == 1) {
        int s = mesh_pp_schedule_stage(t->sched, t->rank, chunk);
        CHECK(memcmp(t->ga + (size_t)chunk * t->n, t->ref_ga + (size_t)s * t->n,
                     sizeof(double) * t->n) == 0 &&
                  t->gb[chunk] == t->ref_gb[s],
              "chunk %d (stage %d): gradient not final when grads_ready runs", chunk, s);
        return MESH_OK;
    }
    /* ga[chunk] then gb[chunk] are apart: reduce them as two requests */
    mesh_status_t st =
        mesh_allreduce(t->dpc, t->ga + (size_t)chunk * t->n, t->ga + (size_t)chunk * t->n, t->n,
                       MESH_FP64, MESH_SUM, NULL, &t->red[2 * chunk]);
    if (st == MESH_OK)
        st = mesh_allreduce(t->dpc, &t->gb[chunk], &t->gb[chunk], 1, MESH_FP64, MESH_SUM, NULL,
                            &t->red[2 * chunk + 1]);
    return st;
}

static void run_case(toy_t *t, mesh_comm_h pp, mesh_pp_kind_t kind, int m, int group, int chunks,
                     int steps)
{
    mesh_pp_schedule_params_t sp = {.kind = kind, .stages = t->p, .microbatches = m};
    if (group) {
        sp.field_mask |= MESH_PP_SCHED_FIELD_GROUP;
        sp.group = group;
    }
    if (chunks) {
        sp.field_mask |= MESH_PP_SCHED_FIELD_CHUNKS;
        sp.chunks = chunks;
    }
    if (mesh_pp_schedule_create(&sp, &t->sched) != MESH_OK) {
        CHECK(0, "%s p=%d m=%d: %s", mesh_pp_kind_name(kind), t->p, m, mesh_comm_last_error(NULL));
        return;
    }
    t->v = mesh_pp_schedule_chunks(t->sched);
    t->S = t->p * t->v;
    t->m = m;
    size_t n = (size_t)t->n, S = (size_t)t->S, v = (size_t)t->v;
    t->a = malloc(sizeof(double) * S * n);
    t->ga = malloc(sizeof(double) * v * n);
    t->gb = malloc(sizeof(double) * v);
    t->ref_ga = malloc(sizeof(double) * S * n);
    t->ref_gb = malloc(sizeof(double) * S);
    t->ref_loss = malloc(sizeof(double) * (size_t)m);
    t->loss = malloc(sizeof(double) * (size_t)m);
    t->red = calloc(2 * v, sizeof(mesh_request_h));
    t->ready = calloc(v, sizeof(int));
    static const double diag[4] = {1, -2, 2, -1};
    for (size_t s = 0; s < S; s++)
        for (size_t i = 0; i < n; i++)
            t->a[s * n + i] = diag[(s + i) % 4];
    toy_reference(t);

    mesh_pp_exec_params_t ep = {.field_mask =
                                    MESH_PP_EXEC_FIELD_WEIGHT | MESH_PP_EXEC_FIELD_GRADS_READY,
                                .count = n,
                                .dtype = MESH_FP64,
                                .forward = toy_forward,
                                .backward = toy_backward,
                                .weight = toy_weight,
                                .grads_ready = toy_ready,
                                .ctx = t};
    mesh_pp_exec_h ex = NULL;
    mesh_status_t st = mesh_pp_exec_create(pp, t->sched, &ep, &ex);
    CHECK(st == MESH_OK, "exec_create: %s", mesh_comm_last_error(NULL));
    int last_rank = -1, bad = failures, early = 0;
    for (int r = 0; r < t->p; r++)
        for (int c = 0; c < t->v; c++)
            if (mesh_pp_schedule_stage(t->sched, r, c) == t->S - 1)
                last_rank = r;
    for (int k = 0; k < steps && st == MESH_OK; k++) {
        memset(t->ga, 0, sizeof(double) * v * n);
        memset(t->gb, 0, sizeof(double) * v);
        memset(t->ready, 0, sizeof(int) * v);
        memset(t->calls, 0, sizeof(t->calls));
        st = mesh_pp_exec_run(ex);
        CHECK(st == MESH_OK, "%s m=%d step %d: %s", mesh_pp_kind_name(kind), m, k,
              mesh_comm_last_error(NULL));
        if (st != MESH_OK)
            break;
        if (t->dp > 1) {
            /* how many reductions the pipeline's own waits already finished (not asserted:
             * it depends on timing) */
            for (size_t i = 0; i < 2 * v; i++) {
                int done = 0;
                if (t->red[i] && mesh_test(t->red[i], &done) >= 0 && done)
                    early++;
            }
            st = mesh_waitall((int)(2 * v), t->red);
            CHECK(st == MESH_OK, "dp reductions: %s", mesh_comm_last_error(NULL));
            for (size_t i = 0; i < 2 * v; i++) {
                mesh_request_free(t->red[i]);
                t->red[i] = NULL;
            }
        }
        int split = kind == MESH_PP_ZB1 || kind == MESH_PP_ZBV;
        CHECK(t->calls[0] == m * t->v && t->calls[1] == m * t->v &&
                  t->calls[2] == (split ? m * t->v : 0),
              "%s: F, B, W ran %d, %d, %d times", mesh_pp_kind_name(kind), t->calls[0], t->calls[1],
              t->calls[2]);
        for (int c = 0; c < t->v; c++) {
            int s = mesh_pp_schedule_stage(t->sched, t->rank, c);
            CHECK(t->ready[c] == 1, "grads_ready(chunk %d) ran %d times", c, t->ready[c]);
            for (size_t i = 0; i < n; i++)
                CHECK(t->ga[c * n + i] == t->ref_ga[s * n + i],
                      "%s m=%d step %d stage %d: da[%zu] %.17g, reference %.17g",
                      mesh_pp_kind_name(kind), m, k, s, i, t->ga[c * n + i], t->ref_ga[s * n + i]);
            CHECK(t->gb[c] == t->ref_gb[s],
                  "%s m=%d step %d stage %d: db %.17g, reference "
                  "%.17g",
                  mesh_pp_kind_name(kind), m, k, s, t->gb[c], t->ref_gb[s]);
        }
        if (t->rank == last_rank)
            for (int mb = 0; mb < m; mb++)
                CHECK(t->loss[mb] == t->ref_loss[mb],
                      "%s m=%d step %d: loss of micro-batch %d "
                      "%.17g, reference %.17g",
                      mesh_pp_kind_name(kind), m, k, mb, t->loss[mb], t->ref_loss[mb]);
    }
    mesh_pp_exec_stats_t stats;
    if (ex && mesh_pp_exec_stats(ex, &stats) == MESH_OK && wrank == 0) {
        printf("%s %s p=%d v=%d m=%d%s: %d steps, step %.2f ms, %d buffers at most",
               failures == bad ? "ok:" : "FAIL:", mesh_pp_kind_name(kind), t->p, t->v, m,
               group ? " (group)" : "", steps, stats.wall_s * 1e3, stats.peak_buffers);
        if (t->dp > 1)
            printf(", %d of %d dp reductions done when the step returned", early,
                   (int)(2 * v) * steps);
        printf("\n");
    }
    mesh_pp_exec_destroy(ex);
    mesh_pp_schedule_destroy(t->sched);
    free(t->a);
    free(t->ga);
    free(t->gb);
    free(t->ref_ga);
    free(t->ref_gb);
    free(t->ref_loss);
    free(t->loss);
    free(t->red);
    free(t->ready);
}

/* A failing callback ends the step on every rank, bounded by MESH_TIMEOUT, with a message
 * that says what happened, and the executors refuse to go on. */
static void check_failure(toy_t *t, mesh_comm_h pp)
{
    mesh_pp_schedule_params_t sp = {.kind = MESH_PP_1F1B, .stages = t->p, .microbatches = 4};
    mesh_pp_exec_params_t ep = {.count = (size_t)t->n,
                                .dtype = MESH_FP64,
                                .forward = toy_forward,
                                .backward = toy_backward,
                                .ctx = t};
    mesh_pp_exec_h ex = NULL;
    if (mesh_pp_schedule_create(&sp, &t->sched) != MESH_OK)
        return;
    t->v = 1;
    t->S = t->p;
    t->m = 4;
    size_t n = (size_t)t->n, S = (size_t)t->S;
    t->a = calloc(S * n, sizeof(double));
    t->ga = calloc(n, sizeof(double));
    t->gb = calloc(1, sizeof(double));
    t->loss = calloc(4, sizeof(double));
    t->fail_rank = t->p - 1;
    CHECK(mesh_pp_exec_create(pp, t->sched, &ep, &ex) == MESH_OK, "%s", mesh_comm_last_error(NULL));
    mesh_status_t st = mesh_pp_exec_run(ex);
    const char *msg = mesh_comm_last_error(NULL);
    CHECK(st < 0, "a step with a failing forward succeeded");
    if (t->rank == t->fail_rank)
        CHECK(st == MESH_ERR_IO && strstr(msg, "F(mb 1, chunk 0) callback failed") != NULL,
              "%s: %s", mesh_status_string(st), msg);
    else
        CHECK(strstr(msg, "did not arrive") != NULL || strstr(msg, "send failed") != NULL, "%s: %s",
              mesh_status_string(st), msg);
    printf("rank %d: %s: %s\n", t->rank, mesh_status_string(st), msg);
    CHECK(mesh_pp_exec_run(ex) == st &&
              strstr(mesh_comm_last_error(NULL), "an earlier step") != NULL,
          "a second step after a failure: %s", mesh_comm_last_error(NULL));
    mesh_pp_exec_destroy(ex);
    mesh_pp_schedule_destroy(t->sched);
    free(t->a);
    free(t->ga);
    free(t->gb);
    free(t->loss);
    t->fail_rank = -1;
}

/* Refusals and an executor whose peers are gone leave no request behind. */
static void check_refusals(toy_t *t, mesh_comm_h pp)
{
    mesh_pp_schedule_params_t sp = {.kind = MESH_PP_ZB1, .stages = t->p, .microbatches = t->p};
    mesh_pp_schedule_h s;
    mesh_pp_exec_h ex = NULL;
    if (mesh_pp_schedule_create(&sp, &s) != MESH_OK)
        return;
    mesh_pp_exec_params_t ep = {
        .count = 4, .dtype = MESH_FP64, .forward = toy_forward, .backward = toy_backward, .ctx = t};
    CHECK(mesh_pp_exec_create(pp, s, &ep, &ex) == MESH_ERR_INVALID_ARG && ex == NULL,
          "zb1 without a weight callback accepted");
    CHECK(strstr(mesh_comm_last_error(NULL), "needs params->weight") != NULL, "message: %s",
          mesh_comm_last_error(NULL));
    /* a broken schedule is refused by the executor with the checker's message */
    mesh_pp_schedule_remove(s, t->p - 1, 0);
    ep.field_mask = MESH_PP_EXEC_FIELD_WEIGHT;
    ep.weight = toy_weight;
    CHECK(mesh_pp_exec_create(pp, s, &ep, &ex) == MESH_ERR_INVALID_ARG && ex == NULL,
          "a broken schedule accepted");
    CHECK(strstr(mesh_comm_last_error(NULL), "zb1 schedule refused: rank") != NULL, "message: %s",
          mesh_comm_last_error(NULL));
    mesh_pp_schedule_destroy(s);
    sp.stages = t->p + 1;
    if (mesh_pp_schedule_create(&sp, &s) != MESH_OK)
        return;
    CHECK(mesh_pp_exec_create(pp, s, &ep, &ex) == MESH_ERR_INVALID_ARG, "stages != pp size");
    CHECK(strstr(mesh_comm_last_error(NULL), "communicator") != NULL, "message: %s",
          mesh_comm_last_error(NULL));
    mesh_pp_schedule_destroy(s);
}

int main(int argc, char **argv)
{
    int pp_size = 2, dp = 1, n = 4, steps = 3, cross = 0, fail = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--pp") && i + 1 < argc)
            pp_size = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dp") && i + 1 < argc)
            dp = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--cross"))
            cross = 1;
        else if (!strcmp(argv[i], "--fail"))
            fail = 1;
        else {
            fprintf(stderr, "usage: pp_exec --pp P [--dp D] [--n N] [--steps K] [--only KIND] "
                            "[--cross] [--fail]\n");
            return 2;
        }
    }
    mesh_comm_h world;
    if (mesh_comm_init_env(&world) != MESH_OK) {
        fprintf(stderr, "init: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    wrank = mesh_comm_rank(world);
    mesh_grid_params_t gp = {.field_mask = MESH_GRID_PARAM_FIELD_SIZES,
                             .size = {[MESH_AXIS_PP] = pp_size, [MESH_AXIS_DP] = dp}};
    mesh_grid_h grid;
    if (mesh_grid_create(world, &gp, &grid) != MESH_OK) {
        fprintf(stderr, "grid: %s\n", mesh_comm_last_error(world));
        return 1;
    }
    mesh_comm_h pp, dpc;
    mesh_grid_comm(grid, "pp", &pp);
    mesh_grid_comm(grid, "dp", &dpc);
    toy_t t = {.p = pp_size,
               .n = n,
               .rank = mesh_comm_rank(pp),
               .dp = dp,
               .dpi = mesh_grid_coord(grid, "dp"),
               .dpc = dpc,
               .tx = malloc(sizeof(double) * (size_t)n),
               .tg = malloc(sizeof(double) * (size_t)n),
               .ty = malloc(sizeof(double) * (size_t)n),
               .fail_rank = -1};
    if (fail) {
        check_failure(&t, pp);
        /* the peers are out of step: no collective on world can follow */
        printf("%s: rank %d\n", failures ? "FAIL" : "ok", t.rank);
        return failures != 0;
    }
    if (cross)
        for (int d = -1; d <= 1; d += 2) {
            int q = t.rank + d;
            if (q < 0 || q >= pp_size)
                continue;
            const char *tl = mesh_comm_peer_transport(pp, q);
            int other = mesh_comm_node(pp, q) != mesh_comm_node(pp, t.rank);
            CHECK(tl && (other ? strcmp(tl, "shm") != 0 && strcmp(tl, "self") != 0 : 1),
                  "pp link %d-%d across nodes goes over %s", t.rank, q, tl ? tl : "nothing");
            if (other && wrank < pp_size)
                printf("pp link %d-%d: %s\n", t.rank, q, tl);
        }

    for (int k = 0; k < MESH_PP_USER; k++) {
        mesh_pp_kind_t kind = (mesh_pp_kind_t)k;
        if (only && strcmp(only, mesh_pp_kind_name(kind)) != 0)
            continue;
        int p = pp_size;
        if (kind == MESH_PP_INTERLEAVED) {
            run_case(&t, pp, kind, p, 0, 0, steps);
            run_case(&t, pp, kind, 2 * p, 0, 0, steps);
            run_case(&t, pp, kind, 2 * p + 1, p + 1, 0, steps);
            run_case(&t, pp, kind, 2 * p, 0, 3, steps); /* three chunks per rank */
        } else {
            run_case(&t, pp, kind, p, 0, 0, steps);
            run_case(&t, pp, kind, 2 * p + 1, 0, 0, steps);
        }
    }
    check_refusals(&t, pp);

    int total = failures;
    mesh_allreduce(world, &total, &total, 1, MESH_INT32, MESH_SUM, NULL, NULL);
    free(t.tx);
    free(t.tg);
    free(t.ty);
    mesh_grid_destroy(grid);
    mesh_comm_destroy(world);
    if (wrank == 0)
        printf("%s: %d failed checks over all ranks\n", total ? "FAIL" : "ok", total);
    return total != 0;
}
