/*
 * mesh-train: a small GPT trained on a 5D mesh through mesh's parallel layers. Every layout of
 * the same model, seed and global batch follows the single-process loss curve; see --help and
 * the README.
 */
#include "../bench_time.h"
#include "auto.h"
#include "data.h"
#include "gpt.h"
#include "layout.h"
#include "opts.h"
#include "pipe.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Under a launcher, or one rank on a fresh id without one. */
static mesh_status_t init_world(mesh_comm_h *world)
{
    if (!getenv("MESH_RANK") && !getenv("RANK") && !getenv("PMIX_RANK")) {
        mesh_unique_id_t id;
        mesh_status_t st = mesh_unique_id(&id);
        return st != MESH_OK ? st : mesh_comm_init_rank(world, 1, &id, 0);
    }
    return mesh_comm_init_env(world);
}

static void describe(char *buf, size_t len, const train_opts_t *o, const layout_t *lo,
                     const pipe_t *pp, const gpt_t *m, size_t params, mesh_comm_h world)
{
    char sched[64] = "", cp[96] = "";
    if (lo->pp_size > 1)
        snprintf(sched, sizeof(sched), " schedule=%s chunks=%d",
                 mesh_pp_kind_name(mesh_pp_schedule_kind(pp->sched)), pp->v);
    char moe[160] = "";
    int ep = lo->ep_size > 0 ? lo->ep_size : 1;
    if (m->E)
        snprintf(moe, sizeof(moe),
                 " experts=%d topk=%d expert_ffn=%d moe_layers=0x%llx capacity=%g "
                 "capacity_groups=%d aux_loss=%g",
                 m->E, m->K, m->Fe, (unsigned long long)m->cfg.moe_layers, o->capacity,
                 lo->capacity_split * lo->edp_size, o->aux_loss);
    if (lo->cp_size > 1)
        snprintf(cp, sizeof(cp), " cp_sharding=%s cp_algo=%s cp_overlap=%d",
                 mesh_cp_zigzag(lo->cp) ? "zigzag" : "contiguous",
                 mesh_cp_algorithm(lo->cp) == MESH_CP_ALLGATHER ? "allgather" : "ring",
                 !o->cp_no_overlap);
    snprintf(buf, len,
             "mesh-train tp=%d dp=%d pp=%d%s cp=%d%s ep=%d order=%s zero=%d dtype=%s sp=%d "
             "overlap=%d layers=%d d_model=%d heads=%d seq=%d vocab=%d batch=%d microbatches=%d "
             "lr=%g seed=%llu params=%zu ranks=%d nodes=%d%s",
             lo->tp_size, lo->dp_size / ep, lo->pp_size, sched, lo->cp_size, cp, ep,
             o->order ? o->order : "tp-cp-ep-dp-pp", o->zero, o->bf16 ? "bf16" : "fp32",
             o->sequence_parallel, o->overlap, m->L, m->C, m->NH, m->cfg.seq, m->V, o->batch,
             o->microbatches, o->lr, (unsigned long long)o->seed, params, mesh_comm_size(world),
             mesh_comm_node_count(world), moe);
}

int main(int argc, char **argv)
{
    train_opts_t o;
    const char *env_rank = getenv("MESH_RANK");
    int first = env_rank == NULL || atoi(env_rank) == 0;
    int rc = train_opts_parse(&o, argc, argv, first);
    if (rc)
        return rc > 0 ? 0 : 2;
    openblas_set_num_threads(1); /* one core per rank: the ranks share the machine */
    mesh_comm_h world;
    if (init_world(&world) != MESH_OK) {
        fprintf(stderr, "mesh-train: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    int wrank = mesh_comm_rank(world), wsize = mesh_comm_size(world);
    int say = wrank == 0;
    layout_t lo;
    gpt_t m;
    pipe_t pp;
    memset(&lo, 0, sizeof(lo));
    memset(&m, 0, sizeof(m));
    memset(&pp, 0, sizeof(pp));
    rc = 1;
    int agreed = 0; /* every rank found the same error: they leave together, none is killed */
    char plan_why[1024] = "", err[512];
    if (o.plan && train_auto(&o, world, plan_why, sizeof(plan_why), err, sizeof(err))) {
        if (say)
            fprintf(stderr, "mesh-train: %s\n", err);
        goto out_agreed;
    }
    layout_params_t lp = {.order = o.order,
                          .sequence_parallel = o.sequence_parallel,
                          .bf16 = o.bf16,
                          .stage = o.zero,
                          .experts = o.experts,
                          .topk = o.topk,
                          .capacity = o.capacity,
                          .capacity_groups = o.capacity_groups,
                          .seq = o.seq,
                          .cp_zigzag = o.cp_zigzag,
                          .cp_no_overlap = o.cp_no_overlap,
                          .cp_algo = o.cp_algo};
    memcpy(lp.size, o.size, sizeof(lp.size));
    if (lp.size[MESH_AXIS_DP] == 0) { /* dp takes the ranks the other axes leave */
        int other = 1;
        for (int a = 0; a < MESH_AXIS_COUNT; a++)
            other *= lp.size[a] ? lp.size[a] : 1;
        lp.size[MESH_AXIS_DP] = wsize % other ? 1 : wsize / other;
    }
    if (layout_create(&lo, world, &lp)) {
        if (say)
            fprintf(stderr, "mesh-train: %s\n", lo.err);
        goto out_agreed;
    }
    gpt_config_t cfg = {.vocab = o.vocab,
                        .seq = o.seq,
                        .d_model = o.d_model,
                        .layers = o.layers,
                        .heads = o.heads,
                        .tp = lo.tp_size,
                        .tp_rank = lo.tp_rank,
                        .sequence_parallel = o.sequence_parallel,
                        .cp = lo.cp_size,
                        .cp_rank = lo.cp_rank,
                        .experts = o.experts,
                        .topk = o.topk,
                        .expert_ffn = o.expert_ffn,
                        .moe_layers = o.moe_layers,
                        .capacity = o.capacity,
                        .capacity_groups = lo.capacity_split,
                        .ep = lo.ep_size,
                        .ep_rank = lo.ep_rank,
                        .pos = lo.cp_pos};
    if (gpt_create(&m, &cfg, err, sizeof(err))) {
        if (say)
            fprintf(stderr, "mesh-train: %s\n", err);
        goto out_agreed;
    }
    int per_rank = o.batch / lo.dp_size;
    if (o.batch % lo.dp_size || per_rank % o.microbatches) {
        if (say)
            fprintf(stderr,
                    "mesh-train: --batch %d does not split into dp=%d ranks x "
                    "--microbatches %d\n",
                    o.batch, lo.dp_size, o.microbatches);
        goto out_agreed;
    }
    int b = per_rank / o.microbatches;
    /* capacity groups of whole samples, the same in every layout */
    int groups = lo.capacity_split * lo.edp_size;
    if (o.capacity > 0 && (o.batch / o.microbatches) % groups) {
        if (say)
            fprintf(stderr,
                    "mesh-train: --capacity with %d capacity groups: the %d samples of a "
                    "micro-batch do not split evenly into them\n",
                    groups, o.batch / o.microbatches);
        goto out_agreed;
    }
    if (gpt_alloc_acts(&m, b, o.microbatches)) {
        fprintf(stderr, "mesh-train: out of memory for activations\n");
        goto out;
    }
    m.dloss_scale = 1.0f / ((float)o.batch * o.seq);
    m.aux_scale = (float)(o.aux_loss / o.microbatches);
    const char *pp_refused = o.save   ? "--save"
                             : o.load ? "--load"
                             : o.dump ? "--dump-params"
                                      : NULL;
    if (lo.pp_size == 1 && (o.schedule || o.chunks)) {
        if (say)
            fprintf(stderr, "mesh-train: --schedule and --chunks need --mesh pp=P with P > 1\n");
        goto out_agreed;
    } else if (lo.pp_size > 1 && pp_refused) {
        if (say)
            fprintf(stderr, "mesh-train: %s is not available with pp > 1 yet\n", pp_refused);
        goto out_agreed;
    } else if (lo.pp_size > 1 && pipe_create(&pp, &lo, &m, o.schedule, o.chunks)) {
        if (say)
            fprintf(stderr, "mesh-train: %s\n", pp.err);
        goto out_agreed;
    }
    mesh_zero_params_t zp = {
        .field_mask = MESH_ZERO_PARAM_FIELD_OPTIMIZER | MESH_ZERO_PARAM_FIELD_LR |
                      MESH_ZERO_PARAM_FIELD_BETAS | MESH_ZERO_PARAM_FIELD_EPS |
                      MESH_ZERO_PARAM_FIELD_WEIGHT_DECAY | MESH_ZERO_PARAM_FIELD_MAX_GRAD_NORM |
                      MESH_ZERO_PARAM_FIELD_OVERLAP | MESH_ZERO_PARAM_FIELD_BUCKET_BYTES,
        .optimizer = MESH_ZERO_ADAMW,
        .lr = o.lr,
        .beta1 = 0.9,
        .beta2 = 0.95,
        .eps = 1e-8,
        .weight_decay = o.weight_decay,
        .max_grad_norm = o.clip,
        .overlap = o.overlap,
        .bucket_bytes = (size_t)(o.bucket_mb * 1048576.0)};
    if (layout_bind(&lo, &m, &zp))
        goto out;
    if (lo.pp_size > 1 && pipe_start(&pp)) {
        fprintf(stderr, "mesh-train: %s\n", pp.err);
        goto out;
    }
    int64_t start = 0;
    if (o.load) {
        if (layout_load(&lo, o.load, &start))
            goto out;
    } else if (layout_init_params(&lo, o.seed)) {
        goto out;
    }
    mesh_zero_memory_t mem;
    if (optim_memory(&lo.opt, &mem))
        goto out;
    /* the full parameter count: every tensor once */
    size_t full_params = 0;
    for (int i = 0; i < m.n_tensors; i++)
        full_params += (size_t)m.tensors[i].rows * m.tensors[i].cols;
    char desc[512];
    describe(desc, sizeof(desc), &o, &lo, &pp, &m, full_params, world);
    FILE *csv = NULL;
    if (say) {
        if (plan_why[0])
            printf("%s\n", plan_why);
        printf("# %s\n", desc);
        printf("# model state per rank (MiB): parameters %.3f, gradients %.3f, master %.3f, "
               "optimizer %.3f, buffers %.3f\n",
               mem.params / 1048576.0, mem.grads / 1048576.0, mem.master / 1048576.0,
               mem.optimizer / 1048576.0, mem.buffers / 1048576.0);
        if (o.csv && !(csv = fopen(o.csv, "w"))) {
            perror(o.csv);
            goto out;
        }
        if (csv)
            fprintf(csv, "# %s\nstep,loss,grad_norm,time_ms,tokens_per_s%s\n", desc,
                    o.experts ? ",aux_loss,dropped" : "");
    }
    int steps_run = 0;
    double *times = calloc((size_t)o.steps + 1, sizeof(double));
    double *opt_times = calloc((size_t)o.steps + 1, sizeof(double));
    double tokens = (double)o.batch * o.seq;
    int32_t *seq_tokens = malloc((size_t)o.seq * sizeof(int32_t));
    int32_t *seq_targets = malloc((size_t)o.seq * sizeof(int32_t));
    if (!times || !opt_times || !seq_tokens || !seq_targets) {
        fprintf(stderr, "mesh-train: out of memory\n");
        goto out_loop;
    }
    for (int64_t step = start + 1; step <= o.steps; step++) {
        double t0 = 1e3 * mesh_time_now(), loss = 0, aux = 0, dropped = 0;
        for (int mb = 0; mb < o.microbatches; mb++)
            m.acts[mb].aux = 0, m.acts[mb].dropped = 0;
        for (int mb = 0; mb < o.microbatches; mb++) {
            gpt_acts_t *a = &m.acts[mb];
            /* micro-batch mb of the step is samples mb B/M .. (mb + 1) B/M - 1 whatever dp is,
             * so that what is counted per micro-batch (a mixture of experts' balance loss and
             * capacity) is the same on every layout; the cp ranks of a dp rank share its samples */
            int64_t first_sample = (int64_t)mb * b * lo.dp_size + (int64_t)lo.dp_rank * b;
            for (int s = 0; s < b; s++) {
                /* the whole sample, of which a cp rank keeps its positions */
                train_data_sample(o.seed, step, first_sample + s, o.seq, m.V, seq_tokens,
                                  seq_targets);
                for (int t = 0; t < m.T; t++) {
                    a->tokens[s * m.T + t] = seq_tokens[lo.cp_pos[t]];
                    a->targets[s * m.T + t] = seq_targets[lo.cp_pos[t]];
                }
            }
            if (lo.pp_size > 1)
                continue; /* the schedule runs them all below */
            double ls;
            lo.boundary = mb == o.microbatches - 1;
            if (optim_micro_begin(&lo.opt, lo.boundary))
                goto out_loop;
            if (gpt_forward(&m, mb, &ls) || gpt_backward(&m, mb))
                goto out_loop;
            loss += ls;
        }
        if (lo.pp_size > 1 && pipe_step(&pp, &loss)) {
            fprintf(stderr, "mesh-train: %s\n", pp.err);
            goto out_loop;
        }
        for (int mb = 0; mb < o.microbatches; mb++)
            aux += m.acts[mb].aux, dropped += (double)m.acts[mb].dropped;
        double t1 = 1e3 * mesh_time_now();
        double norm;
        if (optim_step(&lo.opt, &norm))
            goto out_loop;
        double t2 = 1e3 * mesh_time_now();
        /* every tp rank holds the same rows' losses; the dp ranks hold different samples; the
         * last pipeline stage has them all, the others add zero; each stage has its own
         * mixture-of-experts blocks' balance loss and dropped choices */
        double stages[3] = {loss, aux, dropped};
        if (lo.pp_size > 1 &&
            mesh_allreduce(lo.pp_comm, stages, stages, 3, MESH_FP64, MESH_SUM, NULL, NULL)) {
            fprintf(stderr, "mesh-train: loss all-reduce: %s\n", mesh_comm_last_error(NULL));
            goto out_loop;
        }
        loss = stages[0], aux = stages[1], dropped = stages[2];
        /* the balance loss is over the whole batch already; the dropped choices are each
         * rank's own tokens'; the cp ranks hold different positions of the same samples */
        double sums[2] = {loss, dropped};
        if (lo.dp_size * lo.cp_size > 1 &&
            mesh_allreduce(lo.zero_comm, sums, sums, 2, MESH_FP64, MESH_SUM, NULL, NULL)) {
            fprintf(stderr, "mesh-train: loss all-reduce: %s\n", mesh_comm_last_error(NULL));
            goto out_loop;
        }
        loss = sums[0] / tokens, dropped = sums[1];
        double ms = t2 - t0;
        times[steps_run] = ms, opt_times[steps_run] = t2 - t1;
        steps_run++;
        char moe[96] = "", moe_csv[64] = "";
        if (o.experts) {
            snprintf(moe, sizeof(moe), "  aux %.6f  dropped %.0f", aux, dropped);
            snprintf(moe_csv, sizeof(moe_csv), ",%.9g,%.0f", aux, dropped);
        }
        if (say && !o.quiet)
            printf("step %4lld  loss %.6f  grad_norm %.6f%s  time %8.1f ms  tokens/s %.0f\n",
                   (long long)step, loss, norm, moe, ms, tokens / (ms / 1e3));
        if (csv)
            fprintf(csv, "%lld,%.9g,%.9g,%.3f,%.1f%s\n", (long long)step, loss, norm, ms,
                    tokens / (ms / 1e3), moe_csv);
        fflush(stdout);
    }
    /* the first step warms caches and connections: medians over the rest when there are any */
    int skip = steps_run > 1;
    double med = bench_median(times + skip, steps_run - skip);
    double med_opt = bench_median(opt_times + skip, steps_run - skip);
    if (say && steps_run)
        printf("# median over %d steps: step %.1f ms, tokens/s %.0f, optimizer step (exposed "
               "communication) %.1f ms\n",
               steps_run - skip, med, tokens / (med / 1e3), med_opt);
    if (o.save && layout_save(&lo, o.save, o.steps))
        goto out_loop;
    if (o.dump && layout_dump_params(&lo, o.dump))
        goto out_loop;
    rc = 0;
out_loop:
    free(times), free(opt_times), free(seq_tokens), free(seq_targets);
    if (csv && fclose(csv))
        rc = 1;
    goto out;
out_agreed:
    agreed = 1;
out:
    pipe_destroy(&pp);
    gpt_destroy(&m);
    layout_destroy(&lo);
    if (rc && agreed)
        mesh_barrier(world, NULL);
    else if (rc)
        mesh_comm_abort(world); /* a failed rank must not leave its peers waiting */
    mesh_comm_destroy(world);
    return rc;
}
