/*
 * mesh-train: a small GPT trained on a 5D mesh through mesh's parallel layers. Every layout of
 * the same model, seed and global batch follows the single-process loss curve; see --help and
 * the README. main reads as the training loop: parse, build (run.c), then for each step the
 * batch, the forward and backward passes, the optimizer's step and the log; then a checkpoint.
 */
#include "../bench_time.h"
#include "data.h"
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a step reports: the mean loss over the global batch, the gradient norm, the mixture of
 * experts' balance loss and dropped choices. */
typedef struct {
    double loss, norm, aux, dropped;
} step_stats_t;

/* The step's samples into each micro-batch's tokens and targets. Micro-batch mb of the step is
 * samples mb B/M .. (mb + 1) B/M - 1 whatever dp is, so that what is counted per micro-batch (a
 * mixture of experts' balance loss and capacity) is the same on every layout; the cp ranks of a
 * dp rank share its samples, each keeping its positions. */
static void load_batch(run_t *r, int64_t step, int32_t *seq_tokens, int32_t *seq_targets)
{
    gpt_t *m = &r->m;
    const layout_t *lo = &r->lo;
    for (int mb = 0; mb < r->o.microbatches; mb++) {
        gpt_acts_t *a = &m->acts[mb];
        a->aux = 0, a->dropped = 0;
        int64_t first_sample = (int64_t)mb * r->b * lo->dp_size + (int64_t)lo->dp_rank * r->b;
        for (int s = 0; s < r->b; s++) {
            train_data_sample(r->o.seed, step, first_sample + s, r->o.seq, m->V, seq_tokens,
                              seq_targets);
            for (int t = 0; t < m->T; t++) {
                a->tokens[s * m->T + t] = seq_tokens[lo->cp_pos[t]];
                a->targets[s * m->T + t] = seq_targets[lo->cp_pos[t]];
            }
        }
    }
}

/* Forward and backward passes of every micro-batch, each gradient handed to the optimizer as
 * it is final: one micro-batch after another, or as the pipeline's schedule runs them. *loss:
 * this rank's sum of row losses. */
static int forward_backward(run_t *r, double *loss)
{
    *loss = 0;
    if (r->lo.pp_size > 1) {
        if (pipe_step(&r->pp, loss) == 0)
            return 0;
        fprintf(stderr, "mesh-train: %s\n", r->pp.err);
        return -1;
    }
    for (int mb = 0; mb < r->o.microbatches; mb++) {
        double ls;
        r->lo.boundary = mb == r->o.microbatches - 1;
        if (optim_micro_begin(&r->lo.opt, r->lo.boundary) || gpt_forward(&r->m, mb, &ls) ||
            gpt_backward(&r->m, mb))
            return -1;
        *loss += ls;
    }
    return 0;
}

/* The step's figures over the ranks: every tp rank holds the same rows' losses; the last
 * pipeline stage has them all (the others add zero) and each stage its own blocks' balance loss
 * and dropped choices; the dp and cp ranks hold different rows (the balance loss is over the
 * whole batch already). */
static int reduce_stats(run_t *r, step_stats_t *s)
{
    const layout_t *lo = &r->lo;
    s->aux = s->dropped = 0;
    for (int mb = 0; mb < r->o.microbatches; mb++)
        s->aux += r->m.acts[mb].aux, s->dropped += (double)r->m.acts[mb].dropped;
    double stages[3] = {s->loss, s->aux, s->dropped}, sums[2];
    if (lo->pp_size > 1 &&
        mesh_allreduce(lo->pp_comm, stages, stages, 3, MESH_FP64, MESH_SUM, NULL, NULL))
        goto err;
    sums[0] = stages[0], sums[1] = stages[2], s->aux = stages[1];
    if (lo->dp_size * lo->cp_size > 1 &&
        mesh_allreduce(lo->zero_comm, sums, sums, 2, MESH_FP64, MESH_SUM, NULL, NULL))
        goto err;
    s->loss = sums[0] / ((double)r->o.batch * r->o.seq), s->dropped = sums[1];
    return 0;
err:
    fprintf(stderr, "mesh-train: loss all-reduce: %s\n", mesh_comm_last_error(NULL));
    return -1;
}

static void log_step(run_t *r, int64_t step, const step_stats_t *s, double ms)
{
    double tokens = (double)r->o.batch * r->o.seq;
    char moe[96] = "", moe_csv[64] = "";
    if (r->o.experts) {
        snprintf(moe, sizeof(moe), "  aux %.6f  dropped %.0f", s->aux, s->dropped);
        snprintf(moe_csv, sizeof(moe_csv), ",%.9g,%.0f", s->aux, s->dropped);
    }
    if (r->say && !r->o.quiet)
        printf("step %4lld  loss %.6f  grad_norm %.6f%s  time %8.1f ms  tokens/s %.0f\n",
               (long long)step, s->loss, s->norm, moe, ms, tokens / (ms / 1e3));
    if (r->csv)
        fprintf(r->csv, "%lld,%.9g,%.9g,%.3f,%.1f%s\n", (long long)step, s->loss, s->norm, ms,
                tokens / (ms / 1e3), moe_csv);
    fflush(stdout);
}

/* Medians of the step times (ms) and of the optimizer's part, over the steps after the first,
 * which warms caches and connections, when there are any. */
static void log_summary(const run_t *r, double *step_ms, double *opt_ms, int n)
{
    int skip = n > 1;
    double med = bench_median(step_ms + skip, n - skip);
    double med_opt = bench_median(opt_ms + skip, n - skip);
    double tokens = (double)r->o.batch * r->o.seq;
    if (r->say && n)
        printf("# median over %d steps: step %.1f ms, tokens/s %.0f, optimizer step (exposed "
               "communication) %.1f ms\n",
               n - skip, med, tokens / (med / 1e3), med_opt);
}

static int checkpoint(run_t *r)
{
    if (r->o.save && layout_save(&r->lo, r->o.save, r->o.steps))
        return -1;
    return r->o.dump && layout_dump_params(&r->lo, r->o.dump) ? -1 : 0;
}

/* The training loop; 0 when every step ran and the checkpoint is written. */
static int train(run_t *r)
{
    int n = 0, rc = -1;
    double *step_ms = calloc((size_t)r->o.steps + 1, sizeof(double));
    double *opt_ms = calloc((size_t)r->o.steps + 1, sizeof(double));
    int32_t *seq_tokens = malloc((size_t)r->o.seq * sizeof(int32_t));
    int32_t *seq_targets = malloc((size_t)r->o.seq * sizeof(int32_t));
    if (!step_ms || !opt_ms || !seq_tokens || !seq_targets) {
        fprintf(stderr, "mesh-train: out of memory\n");
        goto out;
    }
    for (int64_t step = r->start + 1; step <= r->o.steps; step++) {
        step_stats_t s;
        double t0 = mesh_time_now();
        load_batch(r, step, seq_tokens, seq_targets);
        if (forward_backward(r, &s.loss))
            goto out;
        double t1 = mesh_time_now();
        if (optim_step(&r->lo.opt, &s.norm))
            goto out;
        double t2 = mesh_time_now();
        if (reduce_stats(r, &s))
            goto out;
        step_ms[n] = 1e3 * (t2 - t0), opt_ms[n] = 1e3 * (t2 - t1);
        log_step(r, step, &s, step_ms[n++]);
    }
    log_summary(r, step_ms, opt_ms, n);
    rc = checkpoint(r);
out:
    free(step_ms), free(opt_ms), free(seq_tokens), free(seq_targets);
    return rc;
}

int main(int argc, char **argv)
{
    run_t r;
    memset(&r, 0, sizeof(r));
    int rc = train_opts_parse(&r.o, argc, argv, run_first_rank());
    if (rc)
        return rc > 0 ? 0 : 2;
    if (run_world(&r))
        return 1;
    int status = run_setup(&r);
    if (status == RUN_OK && train(&r))
        status = RUN_FAILED;
    return run_teardown(&r, status);
}
