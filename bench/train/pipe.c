/* mesh-train's pipeline stages: which blocks each rank holds and the executor's callbacks. */
#include "pipe.h"
#include "commrep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Blocks [l0, l1) of a model stage: L / stages each, in order. */
static void blocks_of(const pipe_t *pp, int stage, int *l0, int *l1)
{
    int per = pp->m->L / pp->stages;
    *l0 = stage * per, *l1 = (stage + 1) * per;
}

static size_t act_numel(const gpt_t *m)
{
    return (size_t)m->b * m->tl * m->C;
}

static mesh_status_t failed(const mesh_pp_work_t *w, const char *what)
{
    return mesh_error_report(MESH_ERR_INTERNAL, "mesh-train: %s of micro-batch %d, stage %d failed",
                             what, w->mb, w->stage);
}

static mesh_status_t stage_forward(void *ctx, const mesh_pp_work_t *w)
{
    pipe_t *pp = ctx;
    gpt_t *m = pp->m;
    gpt_acts_t *a = &m->acts[w->mb];
    size_t n = act_numel(m);
    int l0, l1;
    blocks_of(pp, w->stage, &l0, &l1);
    if (w->stage == 0) {
        if (gpt_embed_fwd(m, w->mb))
            return failed(w, "the embedding");
    } else {
        memcpy(a->x + gpt_xblk(m, l0) * n, w->input, n * sizeof(gpt_real));
    }
    if (gpt_blocks_fwd(m, w->mb, l0, l1))
        return failed(w, "the forward pass");
    if (w->stage < pp->stages - 1) {
        memcpy(w->output, a->x + gpt_xblk(m, l1) * n, n * sizeof(gpt_real));
        return MESH_OK;
    }
    double ls;
    if (gpt_head_fwd(m, w->mb, &ls))
        return failed(w, "the loss");
    pp->loss += ls;
    return MESH_OK;
}

/*
 * The chunk's backward pass. Under a split backward, B computes only the gradient that the
 * previous stage waits for (the model keeps what the weight gradients need) and W the weight
 * gradients; otherwise B computes both.
 */
static mesh_status_t stage_backward(void *ctx, const mesh_pp_work_t *w)
{
    pipe_t *pp = ctx;
    gpt_t *m = pp->m;
    size_t n = act_numel(m);
    int l0, l1;
    blocks_of(pp, w->stage, &l0, &l1);
    m->split_backward = pp->split;
    /* the optimizer takes each group's gradient once the step's last micro-batch is in */
    pp->lo->boundary = !pp->split && ++pp->bwd_done[w->chunk] == pp->mb;
    mesh_status_t s = MESH_OK;
    if (w->stage == pp->stages - 1) {
        if (gpt_head_bwd(m, w->mb))
            s = failed(w, "the loss's backward pass");
    } else {
        memcpy(m->dx, w->grad_output, n * sizeof(gpt_real));
    }
    if (s == MESH_OK && gpt_blocks_bwd(m, w->mb, l0, l1))
        s = failed(w, "the backward pass");
    if (s == MESH_OK && w->stage == 0 && gpt_embed_bwd(m, w->mb))
        s = failed(w, "the embedding's backward pass");
    if (s == MESH_OK && w->stage > 0)
        memcpy(w->grad_input, m->dx, n * sizeof(gpt_real));
    m->split_backward = 0, pp->lo->boundary = 0;
    return s;
}

static mesh_status_t stage_weight(void *ctx, const mesh_pp_work_t *w)
{
    pipe_t *pp = ctx;
    gpt_t *m = pp->m;
    int l0, l1;
    blocks_of(pp, w->stage, &l0, &l1);
    pp->lo->boundary = ++pp->bwd_done[w->chunk] == pp->mb;
    mesh_status_t s = MESH_OK;
    if (w->stage == pp->stages - 1 && gpt_head_wgrad(m, w->mb))
        s = failed(w, "the head's weight gradient");
    if (s == MESH_OK && gpt_blocks_wgrad(m, w->mb, l0, l1))
        s = failed(w, "the weight gradient");
    if (s == MESH_OK && w->stage == 0 && gpt_embed_wgrad(m, w->mb))
        s = failed(w, "the embedding's weight gradient");
    pp->lo->boundary = 0;
    return s;
}

/*
 * The fewest activation slots this rank's list allows: micro-batch mb lives from its first
 * forward pass on this rank to its last backward or weight pass, and k slots serve when no two
 * micro-batches k apart (mb % k alike) live at once. 1F1B's stage s needs min(p - s, m), AFAB
 * m; the others come out of their lists the same way. 0 when the list cannot be read.
 */
static int act_slots(const pipe_t *pp, int rank)
{
    int n = mesh_pp_schedule_length(pp->sched, rank), M = pp->mb, k = 0;
    int *first = malloc(sizeof(int) * (size_t)M), *last = malloc(sizeof(int) * (size_t)M);
    if (n < 0 || !first || !last)
        goto out;
    for (int mb = 0; mb < M; mb++)
        first[mb] = n, last[mb] = -1;
    for (int i = 0; i < n; i++) {
        mesh_pp_action_t a;
        if (mesh_pp_schedule_action(pp->sched, rank, i, &a) != MESH_OK)
            goto out;
        if (a.op != MESH_PP_F && a.op != MESH_PP_B && a.op != MESH_PP_W)
            continue;
        if (i < first[a.mb])
            first[a.mb] = i;
        last[a.mb] = i;
    }
    for (k = 1; k < M; k++) {
        int clash = 0;
        for (int a = 0; a < M && !clash; a++)
            for (int b = a + k; b < M && !clash; b += k)
                clash = first[b] <= last[a] && first[a] <= last[b];
        if (!clash)
            break;
    }
out:
    free(first), free(last);
    return k;
}

int pipe_create(pipe_t *pp, layout_t *lo, gpt_t *m, const char *schedule, int chunks)
{
    memset(pp, 0, sizeof(*pp));
    pp->lo = lo, pp->m = m, pp->p = lo->pp_size, pp->mb = m->n_mb;
    mesh_pp_kind_t kind;
    if (mesh_pp_kind_parse(schedule ? schedule : "1f1b", &kind) != MESH_OK ||
        kind == MESH_PP_USER) {
        snprintf(pp->err, sizeof(pp->err),
                 "--schedule %s: one of afab, 1f1b, interleaved, zb1, zbv", schedule);
        return -1;
    }
    mesh_pp_schedule_params_t sp = {.kind = kind, .stages = pp->p, .microbatches = m->n_mb};
    if (chunks > 0) {
        sp.field_mask |= MESH_PP_SCHED_FIELD_CHUNKS;
        sp.chunks = chunks;
    }
    if (mesh_pp_schedule_create(&sp, &pp->sched) != MESH_OK) {
        snprintf(pp->err, sizeof(pp->err), "--schedule %s with pp=%d, --microbatches %d: %s",
                 mesh_pp_kind_name(kind), pp->p, m->n_mb, mesh_comm_last_error(NULL));
        return -1;
    }
    pp->v = mesh_pp_schedule_chunks(pp->sched);
    pp->stages = pp->p * pp->v;
    pp->split = kind == MESH_PP_ZB1 || kind == MESH_PP_ZBV;
    if (m->L % pp->stages) {
        snprintf(pp->err, sizeof(pp->err),
                 "--layers %d does not split into pp=%d x %d chunks = %d pipeline stages", m->L,
                 pp->p, pp->v, pp->stages);
        return -1;
    }
    /* the tensors of this rank's stages; the token table is on the first and the last */
    int first = -1, last = -1;
    lo->owned = calloc((size_t)m->n_tensors, sizeof(int));
    pp->bwd_done = calloc((size_t)pp->v, sizeof(int));
    uint8_t *mine = calloc((size_t)m->L, 1); /* the blocks of this rank's stages */
    if (!lo->owned || !pp->bwd_done || !mine) {
        free(mine);
        return snprintf(pp->err, sizeof(pp->err), "out of memory"), -1;
    }
    for (int r = 0; r < pp->p; r++)
        for (int c = 0; c < pp->v; c++) {
            int s = mesh_pp_schedule_stage(pp->sched, r, c);
            first = s == 0 ? r : first;
            last = s == pp->stages - 1 ? r : last;
            if (r != lo->pp_rank)
                continue;
            int l0, l1;
            blocks_of(pp, s, &l0, &l1);
            memset(mine + l0, 1, (size_t)(l1 - l0));
            for (int i = 0; i < m->n_tensors; i++) {
                const gpt_tensor_t *t = &m->tensors[i];
                int g = t->group;
                if ((g > l0 && g <= l1) || (g == m->L + 1 && s == pp->stages - 1) ||
                    (!strcmp(t->name, "wte") && (s == 0 || s == pp->stages - 1)) ||
                    (!strcmp(t->name, "wpe") && s == 0))
                    lo->owned[i] = 1;
            }
        }
    if (first != last && lo->pp_rank == first)
        lo->tied_peer = last;
    else if (first != last && lo->pp_rank == last)
        lo->tied_peer = first;
    /* the activations of this rank's blocks only, for the micro-batches it holds at once, not
     * every one of the step */
    int slots = act_slots(pp, lo->pp_rank), kept = gpt_keep_blocks(m, mine);
    free(mine);
    if (kept || slots < 1 || gpt_share_acts(m, slots))
        return snprintf(pp->err, sizeof(pp->err), "the stage's activations"), -1;
    if (pp->split && gpt_alloc_wgrad(m))
        return snprintf(pp->err, sizeof(pp->err), "out of memory"), -1;
    return 0;
}

/* The stages' work is the step's compute, whatever the tp, cp, ep and dp calls inside it take:
 * the executor's own time (its point-to-point waits) is the pipeline's exposed time. */
static mesh_status_t forward(void *ctx, const mesh_pp_work_t *w)
{
    commrep_push(CR_COMPUTE);
    return commrep_pop(stage_forward(ctx, w));
}

static mesh_status_t backward(void *ctx, const mesh_pp_work_t *w)
{
    commrep_push(CR_COMPUTE);
    return commrep_pop(stage_backward(ctx, w));
}

static mesh_status_t weight(void *ctx, const mesh_pp_work_t *w)
{
    commrep_push(CR_COMPUTE);
    return commrep_pop(stage_weight(ctx, w));
}

int pipe_start(pipe_t *pp)
{
    mesh_pp_exec_params_t ep = {.count = act_numel(pp->m),
                                .dtype = MESH_FP32,
                                .forward = forward,
                                .backward = backward,
                                .ctx = pp};
    if (pp->split) {
        ep.field_mask |= MESH_PP_EXEC_FIELD_WEIGHT;
        ep.weight = weight;
    }
    if (mesh_pp_exec_create(pp->lo->pp_comm, pp->sched, &ep, &pp->exec) != MESH_OK) {
        snprintf(pp->err, sizeof(pp->err), "pipeline: %s", mesh_comm_last_error(NULL));
        return -1;
    }
    return 0;
}

/*
 * ZeRO stage 3 under a pipeline: each group this rank's stages hold is gathered once per step,
 * before the schedule's first forward pass (in group order, the same on every dp rank), and
 * released after its last backward or weight pass, once the schedule has run. The layers'
 * acquisitions inside the schedule nest in these and move nothing, so that the dp traffic of a
 * step does not grow with the micro-batches; the stage's whole parameters are resident for the
 * step. (The group ids the rank does not hold are no-ops for the optimizer.)
 */
static int gather_stage(pipe_t *pp)
{
    if (pp->lo->stage != 3)
        return 0;
    for (int g = 0; g <= pp->m->L + 1; g++)
        if (optim_gather(&pp->lo->opt, g))
            return -1;
    return 0;
}

static int release_stage(pipe_t *pp)
{
    if (pp->lo->stage != 3)
        return 0;
    for (int g = 0; g <= pp->m->L + 1; g++)
        if (optim_release(&pp->lo->opt, g))
            return -1;
    return 0;
}

int pipe_step(pipe_t *pp, double *loss_sum)
{
    layout_t *lo = pp->lo;
    pp->loss = 0;
    memset(pp->bwd_done, 0, (size_t)pp->v * sizeof(int));
    /* one micro-batch for the optimizer whatever the stage: the step's gradients accumulate
     * across the pipeline's micro-batches and are handed over (their buckets reduced, in stages
     * 2 and 3 reduce-scattered into the shard) as each group's last backward or weight pass is
     * in */
    if (optim_micro_begin(&lo->opt, 1)) {
        snprintf(pp->err, sizeof(pp->err), "the optimizer's micro-batch");
        return -1;
    }
    if (gather_stage(pp)) {
        snprintf(pp->err, sizeof(pp->err), "the stage's parameter all-gather");
        return -1;
    }
    mesh_status_t s = CR(CR_PP, mesh_pp_exec_run(pp->exec));
    if (s != MESH_OK) {
        snprintf(pp->err, sizeof(pp->err), "%s", mesh_comm_last_error(NULL));
        return -1;
    }
    if (layout_pp_handover(lo)) {
        snprintf(pp->err, sizeof(pp->err), "the tied embedding's gradient");
        return -1;
    }
    if (release_stage(pp)) {
        snprintf(pp->err, sizeof(pp->err), "the stage's parameter release");
        return -1;
    }
    *loss_sum = pp->loss;
    return 0;
}

/* The pp rank that runs model stage s. */
static int rank_of_stage(const pipe_t *pp, int s)
{
    for (int r = 0; r < pp->p; r++)
        for (int c = 0; c < pp->v; c++)
            if (mesh_pp_schedule_stage(pp->sched, r, c) == s)
                return r;
    return -1;
}

int pipe_forward(pipe_t *pp, int mb, double *loss_sum)
{
    gpt_t *m = pp->m;
    mesh_comm_h comm = pp->lo->pp_comm;
    size_t n = act_numel(m);
    int me = pp->lo->pp_rank, prev = -1;
    *loss_sum = 0;
    for (int s = 0; s < pp->stages; s++) {
        int owner = rank_of_stage(pp, s), l0, l1;
        blocks_of(pp, s, &l0, &l1);
        gpt_real *in = m->acts[mb].x + gpt_xblk(m, l0) * n;
        mesh_status_t st = MESH_OK;
        if (prev >= 0 && prev != owner && me == prev)
            st = mesh_send(comm, in, n, MESH_FP32, owner, NULL, NULL);
        else if (prev >= 0 && prev != owner && me == owner)
            st = mesh_recv(comm, in, n, MESH_FP32, prev, NULL, NULL);
        if (st != MESH_OK) {
            snprintf(pp->err, sizeof(pp->err), "validation activations of stage %d: %s", s,
                     mesh_comm_last_error(NULL));
            return -1;
        }
        prev = owner;
        if (me != owner)
            continue;
        double ls = 0;
        if ((s == 0 && gpt_embed_fwd(m, mb)) || gpt_blocks_fwd(m, mb, l0, l1) ||
            (s == pp->stages - 1 && gpt_head_fwd(m, mb, &ls))) {
            snprintf(pp->err, sizeof(pp->err), "validation forward pass of stage %d", s);
            return -1;
        }
        *loss_sum += ls;
    }
    return 0;
}

void pipe_destroy(pipe_t *pp)
{
    mesh_pp_exec_destroy(pp->exec);
    mesh_pp_schedule_destroy(pp->sched);
    free(pp->bwd_done);
    memset(pp, 0, sizeof(*pp));
}
