/* mesh-train's chained optimizer: the dense and the expert ZeRO instances as one (optim.h). */
#include "optim.h"
#include "commrep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int st(mesh_status_t s)
{
    if (s == MESH_OK)
        return 0;
    fprintf(stderr, "mesh-train: %s: %s\n", mesh_status_string(s), mesh_comm_last_error(NULL));
    return -1;
}

int optim_create(optim_t *o, int kind, mesh_comm_h comm, const mesh_zero_params_t *p, int groups)
{
    if (!o->holds) {
        o->holds = calloc((size_t)groups, 1);
        if (!o->holds)
            return -1;
        o->groups = groups;
    }
    return st(mesh_zero_create(comm, p, &o->z[kind]));
}

void optim_chain(optim_t *o, mesh_comm_h pp_comm)
{
    o->chained = 1;
    o->norm_comm = pp_comm;
}

mesh_zero_h optim_zero(const optim_t *o, int kind)
{
    return o->z[kind];
}

int optim_add(optim_t *o, int kind, const char *name, size_t numel, const size_t shape[2],
              unsigned flags, int group)
{
    if (group < 0 || group >= o->groups)
        return -1;
    o->holds[group] |= (unsigned char)(1u << kind);
    return st(mesh_zero_add(o->z[kind], name, numel, 2, shape, flags, group));
}

/* fn on each instance of mask (bits by kind), in kind order, until one fails. */
static int each(optim_t *o, unsigned mask, mesh_status_t (*fn)(mesh_zero_h z))
{
    for (int k = 0; k < OPTIM_KINDS; k++)
        if (o->z[k] && (mask >> k & 1) && st(fn(o->z[k])))
            return -1;
    return 0;
}

static int each_arg(optim_t *o, unsigned mask, mesh_status_t (*fn)(mesh_zero_h z, int arg), int arg)
{
    for (int k = 0; k < OPTIM_KINDS; k++)
        if (o->z[k] && (mask >> k & 1) && st(fn(o->z[k], arg)))
            return -1;
    return 0;
}

/* The instances holding tensors of a group. */
static unsigned held(const optim_t *o, int group)
{
    return group >= 0 && group < o->groups ? o->holds[group] : 0;
}

int optim_finalize(optim_t *o)
{
    return each(o, ~0u, mesh_zero_finalize);
}

int optim_gather(optim_t *o, int group)
{
    return each_arg(o, held(o, group), mesh_zero_gather, group);
}

int optim_wait_params(optim_t *o, int group)
{
    return each_arg(o, held(o, group), mesh_zero_wait_params, group);
}

int optim_release(optim_t *o, int group)
{
    return each_arg(o, held(o, group), mesh_zero_release, group);
}

int optim_progress(optim_t *o)
{
    return each(o, ~0u, mesh_zero_progress);
}

int optim_micro_begin(optim_t *o, int last)
{
    return each_arg(o, ~0u, mesh_zero_micro_begin, last);
}

int optim_wait_grads(optim_t *o)
{
    for (int k = 0; k < OPTIM_KINDS; k++)
        if (o->z[k] && st(CR(CR_DP, mesh_zero_wait_grads(o->z[k]))))
            return -1;
    return 0;
}

int optim_step(optim_t *o, double *norm)
{
    mesh_zero_step_info_t info;
    if (!o->chained) { /* one instance: its own norm */
        if (st(mesh_zero_step(o->z[OPTIM_DENSE], &info)))
            return -1;
        *norm = info.grad_norm;
        return 0;
    }
    /* every parameter once: the dense ones (their instance sums over tp and pp), the experts'
     * (theirs over the expert grid's tp and ep; over the stages here) */
    double sq[OPTIM_KINDS] = {0};
    for (int k = 0; k < OPTIM_KINDS; k++)
        if (o->z[k] && st(mesh_zero_grad_sqnorm(o->z[k], &sq[k])))
            return -1;
    if (o->norm_comm && st(mesh_allreduce(o->norm_comm, &sq[OPTIM_EXPERT], &sq[OPTIM_EXPERT], 1,
                                          MESH_FP64, MESH_SUM, NULL, NULL)))
        return -1;
    *norm = sqrt(sq[OPTIM_DENSE] + sq[OPTIM_EXPERT]);
    for (int k = 0; k < OPTIM_KINDS; k++)
        if (o->z[k] && st(mesh_zero_step_norm(o->z[k], *norm, &info)))
            return -1;
    return 0;
}

int optim_memory(const optim_t *o, mesh_zero_memory_t *mem)
{
    memset(mem, 0, sizeof(*mem));
    for (int k = 0; k < OPTIM_KINDS; k++) {
        mesh_zero_memory_t m;
        if (!o->z[k])
            continue;
        if (st(mesh_zero_memory(o->z[k], &m)))
            return -1;
        mem->params += m.params, mem->grads += m.grads, mem->master += m.master;
        mem->optimizer += m.optimizer, mem->buffers += m.buffers;
    }
    return 0;
}

/* A checkpoint's files: the dense instance's in dir, the experts' in a folder of it. */
static int each_dir(optim_t *o, const char *dir,
                    mesh_status_t (*fn)(mesh_zero_h z, const char *dir))
{
    char d[4096];
    for (int k = 0; k < OPTIM_KINDS; k++) {
        snprintf(d, sizeof(d), k == OPTIM_EXPERT ? "%s/experts" : "%s", dir);
        if (o->z[k] && st(fn(o->z[k], d)))
            return -1;
    }
    return 0;
}

int optim_save(optim_t *o, const char *dir)
{
    return each_dir(o, dir, mesh_zero_save);
}

int optim_load(optim_t *o, const char *dir)
{
    return each_dir(o, dir, mesh_zero_load);
}

void optim_destroy(optim_t *o)
{
    for (int k = OPTIM_KINDS - 1; k >= 0; k--)
        mesh_zero_destroy(o->z[k]);
    free(o->holds);
    memset(o, 0, sizeof(*o));
}
