/*
 * The pipeline executor: one rank's list of a checked schedule, run over the pp communicator.
 *
 * Buffers belong to (micro-batch, chunk) pairs: a chunk's input activation lives from its
 * receive (or the forward of the previous stage on this rank, which hands its output over
 * without a copy) until the chunk's last backward action; the gradient of its output likewise;
 * an output or an input gradient lives until its send completes, or is handed to the
 * neighbouring chunk of this rank. Freed buffers go back to a pool, kept across steps.
 *
 * Messages are tagged with direction, micro-batch and the sender's model stage, so each
 * receive matches exactly its send whatever else is in flight; tags therefore need no
 * sequence across steps. Between actions the executor tests its sends once (mesh_testany),
 * which also drives progress; it blocks only in mesh_wait on the receive an F or B needs,
 * and mesh_wait keeps
 * every communicator of the process moving (a gradient reduction on dp started from the
 * grads_ready hook goes on meanwhile).
 */
#include "pp.h"

#include <stdlib.h>
#include <string.h>

struct mesh_pp_exec {
    mesh_comm_h comm;
    mesh_pp_exec_params_t prm;
    int rank, p, m, v, S, split;
    size_t bytes;
    mesh_pp_action_t *list;
    int n;
    int *stage;              /* [v]: model stage of each chunk of this rank */
    int *prev_chunk;         /* [v]: chunk of this rank holding stage - 1, or -1 */
    int *next_chunk;         /* [v]: chunk of this rank holding stage + 1, or -1 */
    int *last_bw;            /* [v]: position of the chunk's last backward action */
    void **in, **gout;       /* [m * v]: input activation, gradient of the output */
    void **out, **gin;       /* [m * v]: output and input gradient until sent or handed over */
    mesh_request_h *rf, *rb; /* [m * v]: receives posted, not yet waited for */
    mesh_request_h *sreq;    /* [capsends]: sends under way, and their buffers */
    void **sbuf;
    int nsends, capsends;
    void **pool;
    int npool, cappool, held;
    mesh_status_t failed; /* a failed step leaves messages behind: later steps are refused */
    mesh_pp_exec_stats_t stats;
    double t_run;    /* start of the last step */
    int cur;         /* position of the action under way */
    double *t0, *t1; /* [n]: when each action of the last step started and ended */
};

/* Tag of the message that model stage `from` sends: direction (bit 27), stage (bits 14..26),
 * micro-batch (bits 0..13); all below MESH_PP_TAG_END. */
static int pp_tag(int grad, int from, int mb)
{
    return grad << 27 | from << 14 | mb;
}

static mesh_status_t pp_buf(struct mesh_pp_exec *e, void **out)
{
    void *b;
    if (e->npool > 0) {
        b = e->pool[--e->npool];
    } else {
        b = e->prm.alloc ? e->prm.alloc(e->prm.ctx, e->bytes) : malloc(e->bytes);
        if (b == NULL)
            return mesh_par_error(MESH_ERR_NO_MEMORY,
                                  "pipeline executor: cannot allocate a buffer of %zu bytes",
                                  e->bytes);
    }
    if (++e->held > e->stats.peak_buffers)
        e->stats.peak_buffers = e->held;
    *out = b;
    return MESH_OK;
}

static void pp_free(struct mesh_pp_exec *e, void *b)
{
    if (e->prm.free)
        e->prm.free(e->prm.ctx, b);
    else
        free(b);
}

static void pp_unbuf(struct mesh_pp_exec *e, void **slot)
{
    if (*slot == NULL)
        return;
    if (e->npool == e->cappool) {
        int cap = e->cappool ? 2 * e->cappool : 16;
        void **pool = realloc(e->pool, sizeof(void *) * (size_t)cap);
        if (pool) {
            e->pool = pool;
            e->cappool = cap;
        }
    }
    if (e->npool < e->cappool)
        e->pool[e->npool++] = *slot;
    else /* cannot keep it: give it back */
        pp_free(e, *slot);
    e->held--;
    *slot = NULL;
}

/* Frees the sends that completed, after one progress round (mesh_testany: one round however
 * many sends are under way), or every send (wait); a failed one fails the step. */
static mesh_status_t pp_reap(struct mesh_pp_exec *e, int wait)
{
    mesh_status_t st = MESH_OK;
    while (e->nsends > 0) {
        int i = 0;
        mesh_status_t s = wait ? mesh_wait(e->sreq[0]) : mesh_testany(e->nsends, e->sreq, &i);
        if (i < 0)
            break;
        if (s < 0 && st == MESH_OK)
            st = mesh_par_fail(e->comm, s, "pipeline executor: a send failed");
        mesh_request_free(e->sreq[i]);
        pp_unbuf(e, &e->sbuf[i]);
        e->nsends--;
        e->sreq[i] = e->sreq[e->nsends];
        e->sbuf[i] = e->sbuf[e->nsends];
    }
    return st;
}

static mesh_status_t pp_post_send(struct mesh_pp_exec *e, void **slot, int grad, int from, int mb,
                                  int peer)
{
    if (e->nsends == e->capsends) {
        int cap = e->capsends ? 2 * e->capsends : 16;
        mesh_request_h *r = realloc(e->sreq, sizeof(*r) * (size_t)cap);
        if (r)
            e->sreq = r;
        void **b = realloc(e->sbuf, sizeof(*b) * (size_t)cap);
        if (b)
            e->sbuf = b;
        if (r == NULL || b == NULL)
            return mesh_par_error(MESH_ERR_NO_MEMORY, "pipeline executor: cannot track a send");
        e->capsends = cap;
    }
    mesh_request_h req;
    mesh_status_t st = mesh_send_tagged(e->comm, *slot, e->prm.count, e->prm.dtype, peer,
                                        pp_tag(grad, from, mb), e->prm.stream, &req);
    if (st < 0)
        return mesh_par_fail(e->comm, st, "pipeline executor: cannot post a send");
    e->sreq[e->nsends] = req;
    e->sbuf[e->nsends++] = *slot;
    *slot = NULL;
    return MESH_OK;
}

static mesh_status_t pp_post_recv(struct mesh_pp_exec *e, void **slot, mesh_request_h *req,
                                  int grad, int from, int mb, int peer)
{
    MESH_PAR_CHECK(pp_buf(e, slot));
    mesh_status_t st = mesh_recv_tagged(e->comm, *slot, e->prm.count, e->prm.dtype, peer,
                                        pp_tag(grad, from, mb), e->prm.stream, req);
    if (st < 0) {
        pp_unbuf(e, slot);
        return mesh_par_fail(e->comm, st, "pipeline executor: cannot post a receive");
    }
    return MESH_OK;
}

/* Waits for the receive an F or B needs (if its input came from another rank). */
static mesh_status_t pp_arrive(struct mesh_pp_exec *e, mesh_request_h *req,
                               const mesh_pp_action_t *a)
{
    if (*req == NULL)
        return MESH_OK;
    double t = mesh_time_now();
    mesh_status_t st = mesh_wait(*req);
    e->stats.wait_s += mesh_time_now() - t;
    mesh_request_free(*req);
    *req = NULL;
    if (st < 0)
        return mesh_par_error(st,
                              "pipeline executor: rank %d: the %s of %s(mb %d, chunk %d) did "
                              "not arrive: %s",
                              e->rank,
                              a->op == MESH_PP_F ? "input"
                                                 : "output "
                                                   "gradient",
                              mesh_pp_op_name(a->op), a->mb, a->chunk,
                              mesh_comm_last_error(e->comm));
    return MESH_OK;
}

static mesh_status_t pp_call(struct mesh_pp_exec *e, mesh_pp_work_fn fn, mesh_pp_work_t *w)
{
    double t = mesh_time_now();
    e->t0[e->cur] = t - e->t_run;
    mesh_status_t st = fn(e->prm.ctx, w);
    e->stats.busy_s += mesh_time_now() - t;
    if (st < 0)
        return mesh_par_error(st,
                              "pipeline executor: rank %d: %s(mb %d, chunk %d) callback "
                              "failed: %s",
                              e->rank, mesh_pp_op_name(w->op), w->mb, w->chunk,
                              mesh_status_string(st));
    return MESH_OK;
}

static mesh_status_t pp_action(struct mesh_pp_exec *e, int pos)
{
    const mesh_pp_action_t *a = &e->list[pos];
    int c = a->chunk, mb = a->mb, k = mb * e->v + c, st = e->stage[c];
    mesh_pp_work_t w = {.op = a->op, .mb = mb, .chunk = c, .stage = st};
    switch (a->op) {
    case MESH_PP_RECV_F:
        return pp_post_recv(e, &e->in[k], &e->rf[k], 0, st - 1, mb, a->peer);
    case MESH_PP_RECV_B:
        return pp_post_recv(e, &e->gout[k], &e->rb[k], 1, st + 1, mb, a->peer);
    case MESH_PP_SEND_F:
        return pp_post_send(e, &e->out[k], 0, st, mb, a->peer);
    case MESH_PP_SEND_B:
        return pp_post_send(e, &e->gin[k], 1, st, mb, a->peer);
    case MESH_PP_F:
        MESH_PAR_CHECK(pp_arrive(e, &e->rf[k], a));
        if (st < e->S - 1)
            MESH_PAR_CHECK(pp_buf(e, &e->out[k]));
        w.input = e->in[k];
        w.output = e->out[k];
        MESH_PAR_CHECK(pp_call(e, e->prm.forward, &w));
        if (e->next_chunk[c] >= 0) { /* the next stage is here: hand the output over */
            e->in[mb * e->v + e->next_chunk[c]] = e->out[k];
            e->out[k] = NULL;
        }
        return MESH_OK;
    case MESH_PP_B:
        MESH_PAR_CHECK(pp_arrive(e, &e->rb[k], a));
        if (st > 0)
            MESH_PAR_CHECK(pp_buf(e, &e->gin[k]));
        w.input = e->in[k];
        w.grad_output = e->gout[k];
        w.grad_input = e->gin[k];
        MESH_PAR_CHECK(pp_call(e, e->prm.backward, &w));
        if (e->prev_chunk[c] >= 0) {
            e->gout[mb * e->v + e->prev_chunk[c]] = e->gin[k];
            e->gin[k] = NULL;
        }
        break;
    case MESH_PP_W:
        w.input = e->in[k];
        w.grad_output = e->gout[k];
        MESH_PAR_CHECK(pp_call(e, e->prm.weight, &w));
        break;
    default:
        return mesh_par_error(MESH_ERR_INTERNAL, "pipeline executor: bad action");
    }
    /* B without W, or W: the pair's stored activation and gradient are done with */
    if (a->op == MESH_PP_W || !e->split) {
        pp_unbuf(e, &e->in[k]);
        pp_unbuf(e, &e->gout[k]);
    }
    if (pos == e->last_bw[c] && e->prm.grads_ready) {
        mesh_status_t s = e->prm.grads_ready(e->prm.ctx, c);
        if (s < 0)
            return mesh_par_error(s,
                                  "pipeline executor: rank %d: grads_ready(chunk %d) failed: "
                                  "%s",
                                  e->rank, c, mesh_status_string(s));
    }
    return MESH_OK;
}

/* After a failure: cancel what is in flight and take every buffer back. */
static void pp_unwind(struct mesh_pp_exec *e)
{
    for (int i = 0; i < e->nsends; i++) {
        mesh_request_free(e->sreq[i]);
        pp_unbuf(e, &e->sbuf[i]);
    }
    e->nsends = 0;
    for (int k = 0; k < e->m * e->v; k++) {
        mesh_request_free(e->rf[k]);
        mesh_request_free(e->rb[k]);
        e->rf[k] = e->rb[k] = NULL;
        pp_unbuf(e, &e->in[k]);
        pp_unbuf(e, &e->out[k]);
        pp_unbuf(e, &e->gout[k]);
        pp_unbuf(e, &e->gin[k]);
    }
}

mesh_status_t mesh_pp_exec_run(mesh_pp_exec_h e)
{
    if (e == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_pp_exec_run: exec is NULL");
    if (e->failed < 0)
        return mesh_par_error(e->failed,
                              "mesh_pp_exec_run: an earlier step of this executor "
                              "failed (%s); its peers are out of step: destroy it",
                              mesh_status_string(e->failed));
    memset(&e->stats, 0, sizeof(e->stats));
    e->stats.peak_buffers = e->held;
    double t0 = mesh_time_now();
    mesh_status_t st = MESH_OK;
    e->t_run = t0;
    for (int i = 0; i < e->n && st == MESH_OK; i++) {
        e->t0[i] = mesh_time_now() - t0;
        e->cur = i;
        st = pp_action(e, i);
        e->t1[i] = mesh_time_now() - t0;
        if (st == MESH_OK && e->nsends)
            st = pp_reap(e, 0);
    }
    if (st == MESH_OK)
        st = pp_reap(e, 1);
    if (st == MESH_OK && e->held != 0)
        st = mesh_par_error(MESH_ERR_INTERNAL, "pipeline executor: %d buffers left after a step",
                            e->held);
    if (st != MESH_OK) {
        pp_unwind(e);
        e->failed = st;
    }
    e->stats.wall_s = mesh_time_now() - t0;
    return st;
}

static mesh_status_t pp_exec_params(mesh_comm_h pp, mesh_pp_schedule_h s,
                                    const mesh_pp_exec_params_t *prm)
{
    const char *fn = "mesh_pp_exec_create";
    if (pp == NULL || s == NULL || prm == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                              pp == NULL  ? "pp"
                              : s == NULL ? "sched"
                                          : "params");
    if (mesh_comm_size(pp) != s->p)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: the schedule has %d stages but the pp communicator %d ranks", fn,
                              s->p, mesh_comm_size(pp));
    if (prm->forward == NULL || prm->backward == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: params->%s is NULL", fn,
                              prm->forward == NULL ? "forward" : "backward");
    if (prm->count == 0 || mesh_dtype_size(prm->dtype) == 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: activations need count > 0 (got %zu) of a known dtype (got %d)",
                              fn, prm->count, (int)prm->dtype);
    int alloc = !!(prm->field_mask & MESH_PP_EXEC_FIELD_ALLOC);
    if (alloc && (prm->alloc == NULL || prm->free == NULL))
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: params->alloc and params->free go "
                              "together",
                              fn);
    return MESH_OK;
}

static mesh_status_t pp_exec_tables(struct mesh_pp_exec *e, mesh_pp_schedule_h s)
{
    size_t mv = (size_t)e->m * (size_t)e->v, v = (size_t)e->v;
    e->list = malloc(sizeof(*e->list) * (size_t)(e->n ? e->n : 1));
    e->t0 = calloc((size_t)(e->n ? e->n : 1), sizeof(double));
    e->t1 = calloc((size_t)(e->n ? e->n : 1), sizeof(double));
    e->stage = malloc(sizeof(int) * v);
    e->prev_chunk = malloc(sizeof(int) * v);
    e->next_chunk = malloc(sizeof(int) * v);
    e->last_bw = malloc(sizeof(int) * v);
    e->in = calloc(mv, sizeof(void *));
    e->gout = calloc(mv, sizeof(void *));
    e->out = calloc(mv, sizeof(void *));
    e->gin = calloc(mv, sizeof(void *));
    e->rf = calloc(mv, sizeof(mesh_request_h));
    e->rb = calloc(mv, sizeof(mesh_request_h));
    if (!e->list || !e->t0 || !e->t1 || !e->stage || !e->prev_chunk || !e->next_chunk ||
        !e->last_bw || !e->in || !e->gout || !e->out || !e->gin || !e->rf || !e->rb)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "pipeline executor: cannot allocate its state");
    memcpy(e->list, s->list[e->rank].a, sizeof(*e->list) * (size_t)e->n);
    for (int c = 0; c < e->v; c++) {
        int st = s->stage_of[e->rank * e->v + c], oc;
        e->stage[c] = st;
        e->prev_chunk[c] = e->next_chunk[c] = e->last_bw[c] = -1;
        if (st > 0 && mesh_pp_rank_of(s, st - 1, &oc) == e->rank)
            e->prev_chunk[c] = oc;
        if (st < e->S - 1 && mesh_pp_rank_of(s, st + 1, &oc) == e->rank)
            e->next_chunk[c] = oc;
    }
    mesh_pp_op_t last = e->split ? MESH_PP_W : MESH_PP_B;
    for (int i = 0; i < e->n; i++)
        if (e->list[i].op == last)
            e->last_bw[e->list[i].chunk] = i;
    return MESH_OK;
}

mesh_status_t mesh_pp_exec_create(mesh_comm_h pp, mesh_pp_schedule_h s,
                                  const mesh_pp_exec_params_t *prm, mesh_pp_exec_h *exec)
{
    MESH_PAR_CHECK(pp_exec_params(pp, s, prm));
    if (exec == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_pp_exec_create: exec is NULL");
    /* a schedule checked since its last change keeps the caller's costs and timeline */
    if (!s->checked)
        MESH_PAR_CHECK(mesh_pp_check(s, NULL, NULL));
    if (s->split && (!(prm->field_mask & MESH_PP_EXEC_FIELD_WEIGHT) || prm->weight == NULL))
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_pp_exec_create: the %s schedule splits the backward: it "
                              "needs params->weight (MESH_PP_EXEC_FIELD_WEIGHT)",
                              mesh_pp_kind_name(s->kind));
    struct mesh_pp_exec *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "cannot allocate an executor");
    e->comm = pp;
    e->prm = *prm;
    if (!(prm->field_mask & MESH_PP_EXEC_FIELD_WEIGHT))
        e->prm.weight = NULL;
    if (!(prm->field_mask & MESH_PP_EXEC_FIELD_GRADS_READY))
        e->prm.grads_ready = NULL;
    if (!(prm->field_mask & MESH_PP_EXEC_FIELD_ALLOC))
        e->prm.alloc = NULL, e->prm.free = NULL;
    if (!(prm->field_mask & MESH_PP_EXEC_FIELD_STREAM))
        e->prm.stream = NULL;
    e->rank = mesh_comm_rank(pp);
    e->p = s->p;
    e->m = s->m;
    e->v = s->v;
    e->S = s->p * s->v;
    e->split = s->split;
    e->bytes = prm->count * mesh_dtype_size(prm->dtype);
    e->n = s->list[e->rank].n;
    mesh_status_t st = pp_exec_tables(e, s);
    if (st != MESH_OK) {
        mesh_pp_exec_destroy(e);
        return st;
    }
    *exec = e;
    return MESH_OK;
}

void mesh_pp_exec_destroy(mesh_pp_exec_h e)
{
    if (e == NULL)
        return;
    if (e->rf && e->rb && e->in && e->out && e->gout && e->gin)
        pp_unwind(e);
    for (int i = 0; i < e->npool; i++)
        pp_free(e, e->pool[i]);
    free(e->pool);
    free(e->sreq);
    free(e->sbuf);
    free(e->list);
    free(e->t0);
    free(e->t1);
    free(e->stage);
    free(e->prev_chunk);
    free(e->next_chunk);
    free(e->last_bw);
    free(e->in);
    free(e->gout);
    free(e->out);
    free(e->gin);
    free(e->rf);
    free(e->rb);
    free(e);
}

mesh_status_t mesh_pp_exec_stats(mesh_pp_exec_h e, mesh_pp_exec_stats_t *stats)
{
    if (e == NULL || stats == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_pp_exec_stats: %s is NULL",
                              e == NULL ? "exec" : "stats");
    *stats = e->stats;
    return MESH_OK;
}

mesh_status_t mesh_pp_exec_time(mesh_pp_exec_h e, int index, double *start, double *end)
{
    if (e == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_pp_exec_time: exec is NULL");
    if (index < 0 || index >= e->n)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_pp_exec_time: index %d is outside this rank's %d actions",
                              index, e->n);
    if (start)
        *start = e->t0[index];
    if (end)
        *end = e->t1[index];
    return MESH_OK;
}
