/*
 * mesh-train: a small GPT trained on a 5D mesh through mesh's parallel layers. Every layout of
 * the same model, seed and global batch follows the single-process loss curve; see --help and
 * the README. main reads as the training loop: parse, build (run.c), then for each step the
 * batch, the forward and backward passes, the optimizer's step and the log; then a checkpoint.
 */
#include "../bench_time.h"
#include "commrep.h"
#include "data.h"
#include "run.h"
#include "sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a step reports: the mean loss over the global batch, the gradient norm, the mixture of
 * experts' balance loss and dropped choices. */
typedef struct {
    double loss, norm, aux, dropped, val; /* val: NaN where not measured */
} step_stats_t;

/* Sample `sample` of a global batch: of training step `index`, or of validation batch `index`
 * (--data only): the corpus's windows, or the seeded synthetic tokens. */
static void batch_sample(const run_t *r, int split, int64_t index, int64_t sample, int32_t *tokens,
                         int32_t *targets)
{
    if (r->o.data)
        text_sample(&r->text, split, r->o.seed, index, sample, r->o.seq, tokens, targets);
    else
        train_data_sample(r->o.seed, index, sample, r->o.seq, r->m.V, tokens, targets);
}

/* The samples of a global batch into each micro-batch's tokens and targets. Micro-batch mb of
 * the step is samples mb B/M .. (mb + 1) B/M - 1 whatever dp is, so that what is counted per
 * micro-batch (a mixture of experts' balance loss and capacity) is the same on every layout;
 * the cp ranks of a dp rank share its samples, each keeping its positions. */
static void load_batch(run_t *r, int split, int64_t index, int32_t *seq_tokens,
                       int32_t *seq_targets)
{
    gpt_t *m = &r->m;
    const layout_t *lo = &r->lo;
    for (int mb = 0; mb < r->o.microbatches; mb++) {
        gpt_acts_t *a = &m->acts[mb];
        a->aux = 0, a->dropped = 0;
        int64_t first_sample = (int64_t)mb * r->b * lo->dp_size + (int64_t)lo->dp_rank * r->b;
        for (int s = 0; s < r->b; s++) {
            batch_sample(r, split, index, first_sample + s, seq_tokens, seq_targets);
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

/* The mean loss over --val-batches fixed batches of the validation tokens, the forward passes
 * alone (the parameters and gradients untouched), reduced over the ranks as the step's. */
static int validate(run_t *r, double *val, int32_t *seq_tokens, int32_t *seq_targets)
{
    const layout_t *lo = &r->lo;
    double sum = 0;
    for (int k = 0; k < r->o.val_batches; k++) {
        load_batch(r, TEXT_VAL, k, seq_tokens, seq_targets);
        for (int mb = 0; mb < r->o.microbatches; mb++) {
            double ls = 0;
            int rc = lo->pp_size > 1 ? pipe_forward(&r->pp, mb, &ls) : gpt_forward(&r->m, mb, &ls);
            if (rc) {
                fprintf(stderr, "mesh-train: validation: %s\n",
                        lo->pp_size > 1 ? r->pp.err : "the forward pass failed");
                return -1;
            }
            sum += ls;
        }
    }
    if (lo->pp_size > 1 &&
        mesh_allreduce(lo->pp_comm, &sum, &sum, 1, MESH_FP64, MESH_SUM, NULL, NULL) != MESH_OK)
        goto err;
    if (lo->dp_size * lo->cp_size > 1 &&
        mesh_allreduce(lo->zero_comm, &sum, &sum, 1, MESH_FP64, MESH_SUM, NULL, NULL) != MESH_OK)
        goto err;
    *val = sum / ((double)r->o.val_batches * r->o.batch * r->o.seq);
    return 0;
err:
    fprintf(stderr, "mesh-train: validation loss all-reduce: %s\n", mesh_comm_last_error(NULL));
    return -1;
}

/* Whether the validation loss is measured after this step. */
static int val_due(const run_t *r, int64_t step)
{
    return r->o.data && r->text.n > r->text.n_train &&
           (step == r->o.steps || (r->o.val_every && step % r->o.val_every == 0));
}

static void log_step(run_t *r, int64_t step, const step_stats_t *s, double ms, const char *comm_csv)
{
    double tokens = (double)r->o.batch * r->o.seq;
    char moe[96] = "", moe_csv[64] = "", val[48] = "", val_csv[32] = "";
    if (r->o.experts) {
        snprintf(moe, sizeof(moe), "  aux %.6f  dropped %.0f", s->aux, s->dropped);
        snprintf(moe_csv, sizeof(moe_csv), ",%.9g,%.0f", s->aux, s->dropped);
    }
    if (r->o.data && !isnan(s->val)) {
        snprintf(val, sizeof(val), "  val_loss %.6f", s->val);
        snprintf(val_csv, sizeof(val_csv), ",%.9g", s->val);
    } else if (r->o.data) {
        snprintf(val_csv, sizeof(val_csv), ",");
    }
    if (r->say && !r->o.quiet)
        printf("step %4lld  loss %.6f%s  grad_norm %.6f%s  time %8.1f ms  tokens/s %.0f\n",
               (long long)step, s->loss, val, s->norm, moe, ms, tokens / (ms / 1e3));
    if (r->csv)
        fprintf(r->csv, "%lld,%.9g,%.9g,%.3f,%.1f%s%s%s\n", (long long)step, s->loss, s->norm, ms,
                tokens / (ms / 1e3), moe_csv, val_csv, comm_csv);
    fflush(stdout);
}

/* The last losses against the corpus's unigram entropy, the plot, then --sample's text. */
static int finish_text(run_t *r, const int64_t *steps, const double *loss, const double *val, int n)
{
    double last_val = NAN;
    for (int i = 0; i < n; i++)
        last_val = isnan(val[i]) ? last_val : val[i];
    if (r->say && r->o.data && n)
        printf("# final: step %lld, train loss %.6f, validation loss %.6f, unigram entropy "
               "%.6f nats per %s (validation / unigram %.3f)\n",
               (long long)steps[n - 1], loss[n - 1], last_val, r->unigram,
               r->text.merges ? "token" : "byte", last_val / r->unigram);
    if (plot_losses(r, steps, loss, val, n))
        return -1;
    return r->o.sample ? sample_text(r) : 0;
}

/* Bytes this rank has sent on the dense optimizer's data-parallel communicator, over every
 * transport it uses. */
static uint64_t dp_sent(const layout_t *lo)
{
    const char *seen[8];
    int n = 0, size = mesh_comm_size(lo->zero_comm);
    uint64_t total = 0;
    for (int p = 0; p < size; p++) {
        const char *tl = mesh_comm_peer_transport(lo->zero_comm, p);
        int dup = tl == NULL || n == 8;
        for (int i = 0; !dup && i < n; i++)
            dup = !strcmp(seen[i], tl);
        uint64_t b = 0;
        if (dup || mesh_comm_tl_bytes(lo->zero_comm, tl, &b, NULL) != MESH_OK)
            continue;
        seen[n++] = tl, total += b;
    }
    return total;
}

/* Rank 0's data-parallel traffic of a step (its passes and the optimizer's step: the gradients'
 * reductions, the parameters' gathers and the norm), the least and the most over the steps,
 * beside the padded parameter count of its dense optimizer: the formulas of docs/mesh-train.md
 * read them. */
static void log_dp_bytes(const run_t *r, uint64_t lo, uint64_t hi, int n)
{
    mesh_zero_memory_t mem;
    mesh_zero_h z = optim_zero(&r->lo.opt, OPTIM_DENSE);
    if (!r->say || !n || !z || mesh_zero_memory(z, &mem) != MESH_OK)
        return;
    printf("# dp bytes sent per step by rank 0: min=%llu max=%llu; its optimizer's "
           "parameters=%zu padded=%zu element_bytes=%zu dp=%d\n",
           (unsigned long long)lo, (unsigned long long)hi, mem.numel, mem.padded_numel,
           r->o.bf16 ? (size_t)2 : (size_t)4, mesh_comm_size(r->lo.zero_comm));
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
    double *loss = calloc((size_t)r->o.steps + 1, sizeof(double));
    double *val = calloc((size_t)r->o.steps + 1, sizeof(double));
    int64_t *steps = calloc((size_t)r->o.steps + 1, sizeof(int64_t));
    int32_t *seq_tokens = malloc((size_t)r->o.seq * sizeof(int32_t));
    int32_t *seq_targets = malloc((size_t)r->o.seq * sizeof(int32_t));
    if (!step_ms || !opt_ms || !loss || !val || !steps || !seq_tokens || !seq_targets) {
        fprintf(stderr, "mesh-train: out of memory\n");
        goto out;
    }
    uint64_t dp_lo = UINT64_MAX, dp_hi = 0;
    for (int64_t step = r->start + 1; step <= r->o.steps; step++) {
        step_stats_t s;
        uint64_t dp0 = dp_sent(&r->lo);
        commrep_step_t cs;
        char comm_csv[512] = "";
        double t0 = mesh_time_now();
        if (commrep_on)
            commrep_step_begin();
        load_batch(r, TEXT_TRAIN, step, seq_tokens, seq_targets);
        if (forward_backward(r, &s.loss))
            goto out;
        double t1 = mesh_time_now();
        /* with --comm-report the wait for the gradients' reductions is dp's, apart from the
         * optimizer's step */
        if (commrep_on) {
            commrep_dp_wait(0);
            if (optim_wait_grads(&r->lo.opt))
                goto out;
            commrep_dp_wait(1);
        }
        commrep_push(CR_OPT);
        int step_rc = optim_step(&r->lo.opt, &s.norm);
        commrep_pop(MESH_OK);
        if (step_rc)
            goto out;
        double t2 = mesh_time_now();
        uint64_t dp = dp_sent(&r->lo) - dp0;
        dp_lo = dp < dp_lo ? dp : dp_lo, dp_hi = dp > dp_hi ? dp : dp_hi;
        if (commrep_on)
            commrep_step_end(&cs);
        if (reduce_stats(r, &s))
            goto out;
        if (commrep_on && commrep_report(r->world, step, &cs, r->say && !r->o.quiet,
                                         r->csv ? comm_csv : NULL, sizeof(comm_csv)))
            goto out;
        step_ms[n] = 1e3 * (t2 - t0), opt_ms[n] = 1e3 * (t2 - t1);
        s.val = NAN;
        if (val_due(r, step) && validate(r, &s.val, seq_tokens, seq_targets))
            goto out;
        steps[n] = step, loss[n] = s.loss, val[n] = s.val;
        log_step(r, step, &s, step_ms[n++], comm_csv);
    }
    log_summary(r, step_ms, opt_ms, n);
    log_dp_bytes(r, dp_lo, dp_hi, n);
    if (commrep_on && commrep_memory(r->world, &r->lo.opt, r->m.act_bytes, r->say && !r->o.quiet))
        goto out;
    rc = checkpoint(r);
    if (rc == 0)
        rc = finish_text(r, steps, loss, val, n);
out:
    free(step_ms), free(opt_ms), free(loss), free(val), free(steps), free(seq_tokens),
        free(seq_targets);
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
