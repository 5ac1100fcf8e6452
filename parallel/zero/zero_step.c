/* The optimizer step: reductions finished, global gradient norm, clipping, the optimizer on the
 * shard, parameters written back and gathered, gradients zeroed. */
#include "zero_impl.h"
#include <math.h>
#include <string.h>

mesh_status_t mesh_zero__allgather_params(struct mesh_zero *z, const char *fn)
{
    if (z->size == 1 || z->stage == 0 || z->stage == 3)
        return MESH_OK;
    mesh_status_t first = MESH_OK;
    for (int b = 0; b < z->nb; b++) {
        zero_bucket_t *bk = &z->b[b];
        void *base = zero_at(z, z->param, bk->start);
        mesh_status_t st = mesh_allgather(z->dp, zero_at(z, base, (size_t)z->rank * bk->slice),
                                          base, bk->slice, z->dtype, NULL, &bk->req);
        if (st != MESH_OK) {
            bk->req = NULL;
            first = mesh_zero__comm_fail(z->dp, st, fn, "parameter all-gather");
            break;
        }
    }
    for (int b = 0; b < z->nb; b++) {
        if (z->b[b].req == NULL)
            continue;
        mesh_status_t st = mesh_wait(z->b[b].req);
        mesh_request_free(z->b[b].req);
        z->b[b].req = NULL;
        if (st != MESH_OK && first == MESH_OK)
            first = mesh_zero__comm_fail(z->dp, st, fn, "parameter all-gather");
    }
    return first;
}

/* Sum of squares of this rank's gradients, each tensor weighted by how it counts. */
static double local_sumsq(const struct mesh_zero *z)
{
    double total = 0;
    for (int s = 0; s < z->nseg; s++) {
        const zero_seg_t *sg = &z->seg[s];
        double w = z->t[sg->tensor].norm_weight, acc = 0;
        if (w == 0)
            continue;
        const void *g = mesh_zero__grad_of(z, sg);
        for (size_t i = 0; i < sg->len; i++) {
            double x = zero_get(z, g, i);
            acc += x * x;
        }
        total += w * acc;
    }
    return total * z->grad_scale * z->grad_scale;
}

static mesh_status_t global_sumsq(struct mesh_zero *z, const char *fn, double *out)
{
    double sq = local_sumsq(z);
    mesh_status_t st;
    /* stage 0: every dp rank holds every reduced gradient already */
    if (z->stage > 0 && z->size > 1 &&
        (st = mesh_allreduce(z->dp, &sq, &sq, 1, MESH_FP64, MESH_SUM, NULL, NULL)) != MESH_OK)
        return mesh_zero__comm_fail(z->dp, st, fn, "gradient norm all-reduce on dp_comm");
    if (z->mp_size > 1 &&
        (st = mesh_allreduce(z->mp, &sq, &sq, 1, MESH_FP64, MESH_SUM, NULL, NULL)) != MESH_OK)
        return mesh_zero__comm_fail(z->mp, st, fn, "gradient norm all-reduce on mp_comm");
    *out = sq;
    return MESH_OK;
}

void mesh_zero__sync_master(struct mesh_zero *z)
{
    if (z->synced)
        return;
    z->synced = 1;
    if (z->master == NULL || z->stage == 3)
        return;
    for (int s = 0; s < z->nseg; s++) {
        const zero_seg_t *sg = &z->seg[s];
        if (z->t[sg->tensor].initialized)
            continue;
        float *mw = z->master + sg->lidx;
        for (size_t i = 0; i < sg->len; i++)
            mw[i] = zero_get(z, z->param, sg->gidx + i);
    }
}

static void reset_micro(struct mesh_zero *z)
{
    for (int b = 0; b < z->nb; b++)
        z->b[b].ready = z->b[b].posted = 0;
    z->next_post = z->nb - 1;
    z->mb++;
    z->mb_last = 1;
    z->mb_open = 0;
    z->mb_ended = 0;
    z->mb_first = 1;
}

/* Everything before the optimizer: the micro-batch ended, its reductions waited for, the
 * master weights taken from the parameters if they were written directly. */
static mesh_status_t finish_grads(struct mesh_zero *z, const char *fn)
{
    if (z == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: z is NULL", fn);
    if (!z->finalized)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: call mesh_zero_finalize first", fn);
    for (int g = 0; z->stage == 3 && g < z->ng; g++)
        if (z->g[g].refs > 0)
            return mesh_par_error(MESH_ERR_INVALID_ARG,
                                  "%s: group %d is still gathered: release every group first", fn,
                                  z->g[g].id);
    if (!z->mb_ended && !z->mb_last)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: the micro-batch in progress was begun with last = 0; begin the "
                              "last one with mesh_zero_micro_begin(z, 1)",
                              fn);
    MESH_PAR_CHECK(mesh_zero__end_micro(z, fn));
    MESH_PAR_CHECK(mesh_zero__wait_reductions(z, fn));
    mesh_zero__sync_master(z);
    return MESH_OK;
}

mesh_status_t mesh_zero_grad_sqnorm(mesh_zero_h z, double *sq)
{
    static const char fn[] = "mesh_zero_grad_sqnorm";
    if (sq == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: sq is NULL", fn);
    MESH_PAR_CHECK(finish_grads(z, fn));
    return global_sumsq(z, fn, sq);
}

static mesh_status_t step(struct mesh_zero *z, const char *fn, const double *given,
                          mesh_zero_step_info_t *info)
{
    MESH_PAR_CHECK(finish_grads(z, fn));
    double norm = 0;
    if (given) {
        norm = *given;
    } else {
        MESH_PAR_CHECK(global_sumsq(z, fn, &norm));
        norm = sqrt(norm);
    }
    double coef = 1.0;
    if (z->max_norm > 0) {
        coef = z->max_norm / (norm + 1e-6);
        if (coef > 1.0)
            coef = 1.0;
    }
    float scale = (float)(z->grad_scale * coef);

    z->step++;
    for (int s = 0; s < z->nseg; s++) {
        const zero_seg_t *sg = &z->seg[s];
        const zero_tensor_t *t = &z->t[sg->tensor];
        double wd = (t->flags & MESH_ZERO_NO_DECAY) ? 0.0 : z->wd;
        float *p = mesh_zero__master(z, sg);
        const void *g = mesh_zero__grad_of(z, sg);
        if (z->opt == MESH_ZERO_ADAMW)
            mesh_zero__adamw(z, p, g, scale, z->state[0] + sg->lidx, z->state[1] + sg->lidx,
                             sg->len, wd);
        else
            mesh_zero__sgd(z, p, g, scale, z->nstate ? z->state[0] + sg->lidx : NULL, sg->len, wd);
        mesh_zero__write_params(z, sg);
    }
    mesh_status_t st = mesh_zero__allgather_params(z, fn);

    if (z->stage >= 2)
        memset(z->grad_shard, 0, z->S * z->esize);
    else
        memset(z->grad, 0, z->N * z->esize);
    reset_micro(z);
    if (st != MESH_OK)
        return st;
    if (info) {
        *info = (mesh_zero_step_info_t){.grad_norm = norm,
                                        .clipped = coef < 1.0,
                                        .clip_coef = coef,
                                        .step = z->step,
                                        .lr = z->lr};
    }
    return MESH_OK;
}

mesh_status_t mesh_zero_step(mesh_zero_h z, mesh_zero_step_info_t *info)
{
    return step(z, "mesh_zero_step", NULL, info);
}

mesh_status_t mesh_zero_step_norm(mesh_zero_h z, double grad_norm, mesh_zero_step_info_t *info)
{
    static const char fn[] = "mesh_zero_step_norm";
    if (!(grad_norm >= 0 && isfinite(grad_norm)))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: grad_norm %g is not a finite number >= 0",
                              fn, grad_norm);
    return step(z, fn, &grad_norm, info);
}
