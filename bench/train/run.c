/* mesh-train's setup and teardown (run.h): each step builds one part of the run and refuses,
 * naming the option, what the others cannot run. */
#include "run.h"
#include "auto.h"
#include "bpe.h"
#include "commrep.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int run_first_rank(void)
{
    const char *env_rank = getenv("MESH_RANK");
    return env_rank == NULL || atoi(env_rank) == 0;
}

int run_world(run_t *r)
{
    openblas_set_num_threads(1); /* one core per rank: the ranks share the machine */
    mesh_status_t st;
    /* under a launcher, or one rank on a fresh id without one */
    if (!getenv("MESH_RANK") && !getenv("RANK") && !getenv("PMIX_RANK")) {
        mesh_unique_id_t id;
        st = mesh_unique_id(&id);
        if (st == MESH_OK)
            st = mesh_comm_init_rank(&r->world, 1, &id, 0);
    } else {
        st = mesh_comm_init_env(&r->world);
    }
    if (st != MESH_OK) {
        fprintf(stderr, "mesh-train: %s\n", mesh_comm_last_error(NULL));
        return -1;
    }
    r->say = mesh_comm_rank(r->world) == 0;
    return 0;
}

/* A refusal every rank reaches alike: rank 0 says why. */
static int refuse(const run_t *r, const char *why)
{
    if (r->say)
        fprintf(stderr, "mesh-train: %s\n", why);
    return RUN_REFUSED;
}

/* --bpe: rank 0 learns the merges on the training bytes and hands them to every rank. */
static int learn_merges(run_t *r, const uint8_t *bytes, size_t n, int32_t (*pairs)[2], int *merges)
{
    int32_t got = 0;
    size_t n_train = n - text_val_bytes(n, r->o.val_frac);
    int32_t *tokens = r->say ? malloc((n_train ? n_train : 1) * sizeof(int32_t)) : NULL;
    if (r->say && tokens)
        got = bpe_train(tokens, text_encode(bytes, n_train, tokens), r->o.bpe, pairs);
    else if (r->say)
        got = -1;
    free(tokens);
    if (mesh_broadcast(r->world, &got, &got, 1, MESH_INT32, 0, NULL, NULL) != MESH_OK ||
        (got > 0 && mesh_broadcast(r->world, pairs, pairs, 2 * (size_t)got, MESH_INT32, 0, NULL,
                                   NULL) != MESH_OK)) {
        fprintf(stderr, "mesh-train: the merges' broadcast: %s\n", mesh_comm_last_error(NULL));
        return -1;
    }
    if (got < 0)
        fprintf(stderr, "mesh-train: --bpe: out of memory\n");
    *merges = got;
    return got < 0 ? -1 : 0;
}

/* --data: world rank 0 reads the corpus and hands its bytes to every rank (a path need not
 * exist on every node), each rank tokenizes and splits them alike. */
static int setup_data(run_t *r)
{
    const train_opts_t *o = &r->o;
    char err[512] = "";
    if (!o->data)
        return RUN_OK;
    uint8_t *bytes = NULL;
    size_t n = 0;
    int files = 0, merges = 0, rc;
    int32_t(*pairs)[2] = NULL;
    int64_t head[2] = {-1, 0};
    if (r->say && text_read(o->data, &bytes, &n, &files, err, sizeof(err)) == 0)
        head[0] = (int64_t)n, head[1] = files;
    if (mesh_broadcast(r->world, head, head, 2, MESH_INT64, 0, NULL, NULL) != MESH_OK)
        goto comm;
    if (head[0] < 0) {
        free(bytes);
        return refuse(r, err);
    }
    if ((!r->say && !(bytes = malloc((size_t)head[0] + 1))) ||
        !(pairs = malloc(((size_t)o->bpe + 1) * sizeof(*pairs)))) {
        free(bytes);
        fprintf(stderr, "mesh-train: out of memory for the corpus\n");
        return RUN_FAILED;
    }
    if (head[0] && mesh_broadcast(r->world, bytes, bytes, (size_t)head[0], MESH_UINT8, 0, NULL,
                                  NULL) != MESH_OK)
        goto comm;
    if (o->bpe && learn_merges(r, bytes, (size_t)head[0], pairs, &merges)) {
        free(bytes), free(pairs);
        return RUN_FAILED;
    }
    rc = text_build(&r->text, bytes, (size_t)head[0], o->val_frac, o->seq,
                    (const int32_t(*)[2])pairs, merges, err, sizeof(err));
    free(bytes), free(pairs);
    if (rc)
        return refuse(r, err);
    r->text.files = (int)head[1];
    r->unigram = text_unigram_entropy(r->text.tokens, r->text.n);
    return RUN_OK;
comm:
    free(bytes), free(pairs);
    fprintf(stderr, "mesh-train: the corpus's broadcast: %s\n", mesh_comm_last_error(NULL));
    return RUN_FAILED;
}

/* The grid and its handles, from the options or (--mesh auto) the planner. */
static int setup_layout(run_t *r)
{
    const train_opts_t *o = &r->o;
    char err[512];
    if (o->plan && train_auto(&r->o, r->world, r->plan_why, sizeof(r->plan_why), err, sizeof(err)))
        return refuse(r, err);
    layout_params_t lp = {.order = o->order,
                          .sequence_parallel = o->sequence_parallel,
                          .bf16 = o->bf16,
                          .stage = o->zero,
                          .experts = o->experts,
                          .topk = o->topk,
                          .capacity = o->capacity,
                          .capacity_groups = o->capacity_groups,
                          .seq = o->seq,
                          .cp_zigzag = o->cp_zigzag,
                          .cp_no_overlap = o->cp_no_overlap,
                          .cp_algo = o->cp_algo};
    memcpy(lp.size, o->size, sizeof(lp.size));
    if (lp.size[MESH_AXIS_DP] == 0) { /* dp takes the ranks the other axes leave */
        int other = 1, wsize = mesh_comm_size(r->world);
        for (int a = 0; a < MESH_AXIS_COUNT; a++)
            other *= lp.size[a] ? lp.size[a] : 1;
        lp.size[MESH_AXIS_DP] = wsize % other ? 1 : wsize / other;
    }
    return layout_create(&r->lo, r->world, &lp) ? refuse(r, r->lo.err) : RUN_OK;
}

/* This rank's shard of the model and the activations of its micro-batches. */
static int setup_model(run_t *r)
{
    const train_opts_t *o = &r->o;
    const layout_t *lo = &r->lo;
    char err[512];
    gpt_config_t cfg = {.vocab = o->vocab,
                        .seq = o->seq,
                        .d_model = o->d_model,
                        .layers = o->layers,
                        .heads = o->heads,
                        .tp = lo->tp_size,
                        .tp_rank = lo->tp_rank,
                        .sequence_parallel = o->sequence_parallel,
                        .cp = lo->cp_size,
                        .cp_rank = lo->cp_rank,
                        .experts = o->experts,
                        .topk = o->topk,
                        .expert_ffn = o->expert_ffn,
                        .moe_layers = o->moe_layers,
                        .capacity = o->capacity,
                        .capacity_groups = lo->capacity_split,
                        .ep = lo->ep_size,
                        .ep_rank = lo->ep_rank,
                        .pos = lo->cp_pos};
    if (gpt_create(&r->m, &cfg, err, sizeof(err)))
        return refuse(r, err);
    int per_rank = o->batch / lo->dp_size;
    if (o->batch % lo->dp_size || per_rank % o->microbatches) {
        snprintf(err, sizeof(err), "--batch %d does not split into dp=%d ranks x --microbatches %d",
                 o->batch, lo->dp_size, o->microbatches);
        return refuse(r, err);
    }
    r->b = per_rank / o->microbatches;
    /* capacity groups of whole samples, the same in every layout */
    int groups = lo->capacity_split * lo->edp_size;
    if (o->capacity > 0 && (o->batch / o->microbatches) % groups) {
        snprintf(err, sizeof(err),
                 "--capacity with %d capacity groups: the %d samples of a micro-batch do not "
                 "split evenly into them",
                 groups, o->batch / o->microbatches);
        return refuse(r, err);
    }
    if (gpt_alloc_acts(&r->m, r->b, o->microbatches)) {
        fprintf(stderr, "mesh-train: out of memory for activations\n");
        return RUN_FAILED;
    }
    r->m.dloss_scale = 1.0f / ((float)o->batch * o->seq);
    r->m.aux_scale = (float)(o->aux_loss / o->microbatches);
    return RUN_OK;
}

/* With pp > 1, the schedule and the stages this rank holds. */
static int setup_pipeline(run_t *r)
{
    const train_opts_t *o = &r->o;
    char err[512];
    const char *pp_refused = o->save   ? "--save"
                             : o->load ? "--load"
                             : o->dump ? "--dump-params"
                                       : NULL;
    if (r->lo.pp_size == 1 && (o->schedule || o->chunks))
        return refuse(r, "--schedule and --chunks need --mesh pp=P with P > 1");
    /* without a pipeline each micro-batch's backward pass follows its forward: one slot */
    if (r->lo.pp_size == 1) {
        if (!gpt_share_acts(&r->m, 1))
            return RUN_OK;
        fprintf(stderr, "mesh-train: the activation slots\n");
        return RUN_FAILED;
    }
    if (pp_refused) {
        snprintf(err, sizeof(err), "%s is not available with pp > 1 yet", pp_refused);
        return refuse(r, err);
    }
    return pipe_create(&r->pp, &r->lo, &r->m, o->schedule, o->chunks) ? refuse(r, r->pp.err)
                                                                      : RUN_OK;
}

/* The chained optimizer over the model's tensors, the pipeline's executor, and the parameters:
 * a checkpoint's or the seed's. */
static int setup_optimizer(run_t *r)
{
    const train_opts_t *o = &r->o;
    mesh_zero_params_t zp = {
        .field_mask = MESH_ZERO_PARAM_FIELD_OPTIMIZER | MESH_ZERO_PARAM_FIELD_LR |
                      MESH_ZERO_PARAM_FIELD_BETAS | MESH_ZERO_PARAM_FIELD_EPS |
                      MESH_ZERO_PARAM_FIELD_WEIGHT_DECAY | MESH_ZERO_PARAM_FIELD_MAX_GRAD_NORM |
                      MESH_ZERO_PARAM_FIELD_OVERLAP | MESH_ZERO_PARAM_FIELD_BUCKET_BYTES |
                      MESH_ZERO_PARAM_FIELD_MAX_INFLIGHT,
        .optimizer = MESH_ZERO_ADAMW,
        .lr = o->lr,
        .beta1 = 0.9,
        .beta2 = 0.95,
        .eps = 1e-8,
        .weight_decay = o->weight_decay,
        .max_grad_norm = o->clip,
        .overlap = o->overlap,
        .bucket_bytes = (size_t)(o->bucket_mb * 1048576.0),
        .max_inflight = o->inflight};
    if (layout_bind(&r->lo, &r->m, &zp))
        return RUN_FAILED;
    if (r->lo.pp_size > 1 && pipe_start(&r->pp)) {
        fprintf(stderr, "mesh-train: %s\n", r->pp.err);
        return RUN_FAILED;
    }
    if (o->load)
        return layout_load(&r->lo, o->load, &r->start) ? RUN_FAILED : RUN_OK;
    return layout_init_params(&r->lo, o->seed) ? RUN_FAILED : RUN_OK;
}

/* The run's one-line description: what every layout of the same model prints alike but for
 * the layout's own fields. */
static void describe(const run_t *r, char *buf, size_t len)
{
    const train_opts_t *o = &r->o;
    const layout_t *lo = &r->lo;
    const gpt_t *m = &r->m;
    char sched[64] = "", cp[96] = "", moe[160] = "";
    if (lo->pp_size > 1)
        snprintf(sched, sizeof(sched), " schedule=%s chunks=%d",
                 mesh_pp_kind_name(mesh_pp_schedule_kind(r->pp.sched)), r->pp.v);
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
    /* the full parameter count: every tensor once */
    size_t params = 0;
    for (int i = 0; i < m->n_tensors; i++)
        params += (size_t)m->tensors[i].rows * m->tensors[i].cols;
    snprintf(buf, len,
             "mesh-train tp=%d dp=%d pp=%d%s cp=%d%s ep=%d order=%s zero=%d dtype=%s sp=%d "
             "overlap=%d layers=%d d_model=%d heads=%d seq=%d vocab=%d batch=%d microbatches=%d "
             "lr=%g seed=%llu params=%zu ranks=%d nodes=%d%s",
             lo->tp_size, lo->dp_size / ep, lo->pp_size, sched, lo->cp_size, cp, ep,
             o->order ? o->order : "tp-cp-ep-dp-pp", o->zero, o->bf16 ? "bf16" : "fp32",
             o->sequence_parallel, o->overlap, m->L, m->C, m->NH, m->cfg.seq, m->V, o->batch,
             o->microbatches, o->lr, (unsigned long long)o->seed, params, mesh_comm_size(r->world),
             mesh_comm_node_count(r->world), moe);
}

/* Rank 0 prints the plan's reasons, the run and its model-state memory, and opens the CSV. */
static int setup_log(run_t *r)
{
    mesh_zero_memory_t mem;
    if (optim_memory(&r->lo.opt, &mem))
        return RUN_FAILED;
    char desc[512];
    describe(r, desc, sizeof(desc));
    if (r->o.comm_report) {
        commrep_on = 1;
        if (commrep_setup(&r->lo)) {
            fprintf(stderr, "mesh-train: --comm-report: %s\n", mesh_comm_last_error(NULL));
            return RUN_FAILED;
        }
    }
    char comm[256] = "";
    if (r->o.comm_report)
        commrep_describe(comm, sizeof(comm));
    if (!r->say)
        return RUN_OK;
    if (comm[0])
        printf("# %s\n", comm);
    if (r->plan_why[0])
        printf("%s\n", r->plan_why);
    printf("# %s\n", desc);
    printf("# model state per rank (MiB): parameters %.3f, gradients %.3f, master %.3f, "
           "optimizer %.3f, buffers %.3f\n",
           mem.params / 1048576.0, mem.grads / 1048576.0, mem.master / 1048576.0,
           mem.optimizer / 1048576.0, mem.buffers / 1048576.0);
    if (r->o.csv && !(r->csv = fopen(r->o.csv, "w"))) {
        perror(r->o.csv);
        return RUN_FAILED;
    }
    char data[4096 + 512] = "", tok[160] = "one token each";
    const text_t *t = &r->text;
    if (t->merges)
        snprintf(tok, sizeof(tok), "%d byte-pair merges learnt, %zu tokens (%.3f bytes each)",
                 t->merges, t->n, (double)t->bytes / (double)t->n);
    if (r->o.data)
        snprintf(data, sizeof(data),
                 "# data %s: %d file%s, %zu bytes, %s: %zu train, %zu validate; unigram entropy "
                 "%.4f nats per %s (%.4f bits)\n",
                 r->o.data, t->files, t->files == 1 ? "" : "s", t->bytes, tok, t->n_train,
                 t->n - t->n_train, r->unigram, t->merges ? "token" : "byte",
                 r->unigram / log(2.0));
    printf("%s", data);
    if (r->csv && comm[0])
        fprintf(r->csv, "# %s\n", comm);
    if (r->csv)
        fprintf(r->csv, "# %s\n%sstep,loss,grad_norm,time_ms,tokens_per_s%s%s%s\n", desc, data,
                r->o.experts ? ",aux_loss,dropped" : "", r->o.data ? ",val_loss" : "",
                r->o.comm_report ? commrep_csv_header() : "");
    return RUN_OK;
}

int run_setup(run_t *r)
{
    int (*const steps[])(run_t *) = {setup_data,     setup_layout,    setup_model,
                                     setup_pipeline, setup_optimizer, setup_log};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        int status = steps[i](r);
        if (status != RUN_OK)
            return status;
    }
    return RUN_OK;
}

int run_teardown(run_t *r, int status)
{
    if (r->csv && fclose(r->csv) && status == RUN_OK)
        status = RUN_FAILED;
    pipe_destroy(&r->pp);
    text_free(&r->text);
    gpt_destroy(&r->m);
    layout_destroy(&r->lo);
    if (status == RUN_REFUSED)
        mesh_barrier(r->world, NULL); /* every rank found the same error: none is killed */
    else if (status == RUN_FAILED)
        mesh_comm_abort(r->world); /* a failed rank must not leave its peers waiting */
    mesh_comm_destroy(r->world);
    return status == RUN_OK ? 0 : 1;
}
