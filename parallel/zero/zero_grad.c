/* Gradients: micro-batches, ready marks, bucket reductions (all-reduce in stage 0,
 * reduce-scatter in stages 1-3) and, in stages 2-3, their folding into the gradient shard. */
#include "zero_impl.h"
#include <string.h>

/* Stages 0-1 reduce at the accumulation boundary only; stages 2-3 at every micro-batch. */
static int communicates(const struct mesh_zero *z)
{
    return z->stage >= 2 || z->mb_last;
}

/* Stages 2-3: this micro-batch's sum of the bucket, in this rank's slice of the staging, goes
 * into the shard; the staging is given back and reads zero for the next micro-batch. */
static void fold(struct mesh_zero *z, int b)
{
    zero_bucket_t *bk = &z->b[b];
    void *src = zero_at(z, z->grad, bk->start + (size_t)z->rank * bk->slice);
    void *dst = zero_at(z, z->grad_shard, bk->shard_off);
    if (z->mb_first) {
        memcpy(dst, src, bk->slice * z->esize);
    } else {
        for (size_t i = 0; i < bk->slice; i++)
            zero_put(z, dst, i, zero_get(z, dst, i) + zero_get(z, src, i));
    }
    mesh_zero__drop(zero_at(z, z->grad, bk->start), bk->numel * z->esize);
}

static mesh_status_t finish(struct mesh_zero *z, int b, mesh_status_t st, const char *fn)
{
    zero_bucket_t *bk = &z->b[b];
    mesh_request_free(bk->req);
    bk->req = NULL;
    if (st != MESH_OK)
        return mesh_zero__comm_fail(
            z->dp, st, fn, z->stage == 0 ? "gradient all-reduce" : "gradient reduce-scatter");
    if (z->stage >= 2)
        fold(z, b);
    return MESH_OK;
}

/* At most max_inflight reductions under way: the oldest (the highest bucket in flight, since
 * buckets start from the last down) is waited for and finished before one more starts. Each
 * reduction holds its collective's receive scratch, and in stages 2-3 its staging until folded;
 * without a bound how many are alive at once would follow the timing of the ranks' calls. */
static mesh_status_t bound_inflight(struct mesh_zero *z, const char *fn)
{
    int n = 0, oldest = -1;
    for (int b = z->nb - 1; b >= 0; b--) {
        if (z->b[b].req == NULL)
            continue;
        n++;
        if (oldest < 0)
            oldest = b;
    }
    if (n < z->max_inflight)
        return MESH_OK;
    return finish(z, oldest, mesh_wait(z->b[oldest].req), fn);
}

static mesh_status_t post_bucket(struct mesh_zero *z, int b, const char *fn)
{
    zero_bucket_t *bk = &z->b[b];
    void *base = zero_at(z, z->grad, bk->start);
    mesh_status_t st;
    MESH_PAR_CHECK(bound_inflight(z, fn));
    if (z->stage == 0)
        st = mesh_allreduce(z->dp, base, base, bk->numel, z->dtype, MESH_SUM, NULL, &bk->req);
    else /* in place: this rank's slice of the bucket receives the sum */
        st = mesh_reduce_scatter(z->dp, base, zero_at(z, base, (size_t)z->rank * bk->slice),
                                 bk->slice, z->dtype, MESH_SUM, NULL, &bk->req);
    if (st != MESH_OK) {
        bk->req = NULL;
        return mesh_zero__comm_fail(
            z->dp, st, fn, z->stage == 0 ? "gradient all-reduce" : "gradient reduce-scatter");
    }
    bk->posted = 1;
    return MESH_OK;
}

/* Buckets start in backward order (the last of the layout first), each once it is complete, so
 * that every dp rank starts the same sequence whatever the order of the ready marks. */
static mesh_status_t post_ready(struct mesh_zero *z, const char *fn, int all)
{
    while (z->next_post >= 0) {
        zero_bucket_t *bk = &z->b[z->next_post];
        if (!all && bk->ready < bk->count)
            break;
        MESH_PAR_CHECK(post_bucket(z, z->next_post, fn));
        z->next_post--;
    }
    return MESH_OK;
}

mesh_status_t mesh_zero__poll(struct mesh_zero *z)
{
    static const char fn[] = "mesh_zero_progress";
    for (int b = z->nb - 1; b >= 0; b--) {
        if (z->b[b].req == NULL)
            continue;
        int done = 0;
        mesh_status_t st = mesh_test(z->b[b].req, &done);
        if (st != MESH_OK || done)
            MESH_PAR_CHECK(finish(z, b, st, fn));
    }
    for (int g = 0; g < z->ng; g++) {
        zero_group_t *gr = &z->g[g];
        if (gr->reqs == NULL)
            continue;
        for (int k = 0; k < gr->count; k++) {
            if (gr->reqs[k] == NULL)
                continue;
            int done = 0;
            mesh_status_t st = mesh_test(gr->reqs[k], &done);
            if (st != MESH_OK)
                return mesh_zero__comm_fail(z->dp, st, fn, "parameter all-gather");
            if (done) {
                mesh_request_free(gr->reqs[k]);
                gr->reqs[k] = NULL;
            }
        }
    }
    return MESH_OK;
}

mesh_status_t mesh_zero__wait_reductions(struct mesh_zero *z, const char *fn)
{
    mesh_status_t first = MESH_OK;
    for (int b = z->nb - 1; b >= 0; b--) {
        if (z->b[b].req == NULL)
            continue;
        mesh_status_t st = finish(z, b, mesh_wait(z->b[b].req), fn);
        if (st != MESH_OK && first == MESH_OK)
            first = st;
    }
    return first;
}

mesh_status_t mesh_zero__end_micro(struct mesh_zero *z, const char *fn)
{
    if (z->mb_ended)
        return MESH_OK;
    if (communicates(z))
        MESH_PAR_CHECK(post_ready(z, fn, 1));
    z->mb_ended = 1;
    return MESH_OK;
}

static mesh_status_t check_z(const struct mesh_zero *z, const char *fn)
{
    if (z == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: z is NULL", fn);
    if (!z->finalized)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: call mesh_zero_finalize first", fn);
    return MESH_OK;
}

mesh_status_t mesh_zero_micro_begin(mesh_zero_h z, int last)
{
    static const char fn[] = "mesh_zero_micro_begin";
    MESH_PAR_CHECK(check_z(z, fn));
    if (z->mb_open) {
        if (z->mb_last)
            return mesh_par_error(MESH_ERR_INVALID_ARG,
                                  "%s: the last micro-batch before the step has run: call "
                                  "mesh_zero_step first",
                                  fn);
        MESH_PAR_CHECK(mesh_zero__end_micro(z, fn));
        MESH_PAR_CHECK(mesh_zero__wait_reductions(z, fn));
        if (z->stage >= 2)
            z->mb_first = 0;
        z->mb++;
        for (int b = 0; b < z->nb; b++)
            z->b[b].ready = z->b[b].posted = 0;
        z->next_post = z->nb - 1;
        z->mb_ended = 0;
    }
    z->mb_open = 1;
    z->mb_last = last != 0;
    return MESH_OK;
}

mesh_status_t mesh_zero_micro_end(mesh_zero_h z)
{
    static const char fn[] = "mesh_zero_micro_end";
    MESH_PAR_CHECK(check_z(z, fn));
    z->mb_open = 1;
    MESH_PAR_CHECK(mesh_zero__end_micro(z, fn));
    return mesh_zero__poll(z);
}

mesh_status_t mesh_zero_grad_ready(mesh_zero_h z, const char *name)
{
    static const char fn[] = "mesh_zero_grad_ready";
    int i = -1;
    MESH_PAR_CHECK(mesh_zero__lookup(z, fn, name, &i));
    zero_tensor_t *t = &z->t[i];
    if (z->mb_ended)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: '%s': the micro-batch has ended (mesh_zero_micro_begin or "
                              "mesh_zero_step next)",
                              fn, name);
    if (t->ready_mb == z->mb)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: '%s' is already marked ready in this "
                              "micro-batch",
                              fn, name);
    t->ready_mb = z->mb;
    z->mb_open = 1;
    z->b[t->bucket].ready++;
    if (z->overlap && communicates(z))
        MESH_PAR_CHECK(post_ready(z, fn, 0));
    return mesh_zero__poll(z);
}

mesh_status_t mesh_zero_progress(mesh_zero_h z)
{
    MESH_PAR_CHECK(check_z(z, "mesh_zero_progress"));
    return mesh_zero__poll(z);
}

mesh_status_t mesh_zero_wait_grads(mesh_zero_h z)
{
    static const char fn[] = "mesh_zero_wait_grads";
    MESH_PAR_CHECK(check_z(z, fn));
    if (!z->mb_ended && !z->mb_last && z->stage < 2)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: stages 0-1 reduce at the last micro-batch only, and this one "
                              "was begun with last = 0",
                              fn);
    z->mb_open = 1;
    MESH_PAR_CHECK(mesh_zero__end_micro(z, fn));
    return mesh_zero__wait_reductions(z, fn);
}
