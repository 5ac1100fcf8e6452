/*
 * The four moves of an expert layer on a layout: dispatch and the backward of combine send
 * token rows to the experts; combine and the backward of dispatch bring expert rows back and
 * sum them per token, in the order of the token's choices, in double.
 */
#include "ep.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Arguments every move shares; the message names the bad one. */
static mesh_status_t check(mesh_ep_layout_h l, const char *fn, const void *tok, const char *tname,
                           const void *exp, const char *ename, size_t hidden, mesh_dtype_t dtype,
                           size_t *rb)
{
    if (l == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: layout is NULL", fn);
    if (dtype != MESH_FP32 && dtype != MESH_BF16)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: dtype %s is not fp32 or bf16", fn,
                              mesh_dtype_name(dtype));
    if (hidden == 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: hidden is 0", fn);
    size_t ds = mesh_dtype_size(dtype), rows = l->nsend > l->nrecv ? l->nsend : l->nrecv;
    if (rows < l->tokens * (size_t)l->ep->topk)
        rows = l->tokens * (size_t)l->ep->topk;
    if (hidden > SIZE_MAX / ds / (rows ? rows : 1))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: hidden=%zu rows of %zu are too large", fn,
                              hidden, rows);
    if (tok == NULL && l->tokens)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s is NULL for %zu tokens", fn, tname,
                              l->tokens);
    if (exp == NULL && l->nrecv)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s is NULL for %zu expert rows", fn, ename,
                              l->nrecv);
    *rb = hidden * ds;
    return MESH_OK;
}

mesh_status_t mesh_ep_dispatch(mesh_ep_layout_h l, const void *in, void *out, size_t hidden,
                               mesh_dtype_t dtype)
{
    static const char fn[] = "mesh_ep_dispatch";
    size_t rb;
    MESH_PAR_CHECK(check(l, fn, in, "in", out, "out", hidden, dtype, &rb));
    if (l->hier)
        return mesh_ep_hier_forward(l, in, NULL, out, hidden, dtype, fn);
    char *packed = mesh_ep_scratch(l, rb, fn);
    if (packed == NULL)
        return MESH_ERR_NO_MEMORY;
    size_t k = (size_t)l->ep->topk;
    for (size_t i = 0; i < l->nsend; i++)
        memcpy(mesh_ep_row(l, packed, out, i, rb),
               (const char *)in + (size_t)l->send_slot[i] / k * rb, rb);
    return mesh_ep_move(l, packed, out, rb, 0, fn);
}

/* Brings the expert rows back and sums them per token with weights (1 where NULL). */
static mesh_status_t gather_sum(mesh_ep_layout_h l, const char *fn, const void *rows,
                                const float *weights, void *out, void *gathered, size_t hidden,
                                mesh_dtype_t dtype, size_t rb)
{
    if (l->hier)
        return mesh_ep_hier_reverse(l, rows, weights, out, gathered, hidden, dtype, fn);
    size_t k = (size_t)l->ep->topk;
    char *packed = mesh_ep_scratch(l, rb, fn);
    double *acc = malloc(hidden * sizeof(double) + k * (sizeof(double) + sizeof(char *)));
    if (packed == NULL || acc == NULL) {
        free(acc);
        return packed ? mesh_par_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn)
                      : MESH_ERR_NO_MEMORY;
    }
    double *w = acc + hidden;
    const char **src = (const char **)(w + k);
    mesh_status_t st = mesh_ep_move(l, packed, (void *)(uintptr_t)rows, rb, 1, fn);
    for (size_t t = 0; t < l->tokens && st == MESH_OK; t++) {
        int n = 0;
        for (size_t j = 0; j < k; j++) {
            int64_t r = l->slot_row[t * k + j];
            char *g = gathered ? (char *)gathered + (t * k + j) * rb : NULL;
            if (r < 0) {
                if (g)
                    memset(g, 0, rb);
                continue;
            }
            src[n] = mesh_ep_row(l, packed, (char *)(uintptr_t)rows, (size_t)r, rb);
            w[n] = weights ? weights[t * k + j] : 1.0;
            if (g)
                memcpy(g, src[n], rb);
            n++;
        }
        char *o = (char *)out + t * rb;
        if (n == 0)
            memset(o, 0, rb);
        else
            mesh_ep_weighted_sum(o, src, w, n, hidden, dtype, acc);
    }
    free(acc);
    return st;
}

mesh_status_t mesh_ep_combine(mesh_ep_layout_h l, const void *expert_out, const float *weights,
                              void *out, void *gathered, size_t hidden, mesh_dtype_t dtype)
{
    static const char fn[] = "mesh_ep_combine";
    size_t rb;
    MESH_PAR_CHECK(check(l, fn, out, "out", expert_out, "expert_out", hidden, dtype, &rb));
    if (weights == NULL && l->tokens)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: weights is NULL for %zu tokens", fn,
                              l->tokens);
    return gather_sum(l, fn, expert_out, weights, out, gathered, hidden, dtype, rb);
}

mesh_status_t mesh_ep_dispatch_backward(mesh_ep_layout_h l, const void *grad_out, void *grad_in,
                                        size_t hidden, mesh_dtype_t dtype)
{
    static const char fn[] = "mesh_ep_dispatch_backward";
    size_t rb;
    MESH_PAR_CHECK(check(l, fn, grad_in, "grad_in", grad_out, "grad_out", hidden, dtype, &rb));
    return gather_sum(l, fn, grad_out, NULL, grad_in, NULL, hidden, dtype, rb);
}

mesh_status_t mesh_ep_combine_backward(mesh_ep_layout_h l, const void *grad_out,
                                       const float *weights, const void *gathered,
                                       void *grad_expert_out, float *grad_weights, size_t hidden,
                                       mesh_dtype_t dtype)
{
    static const char fn[] = "mesh_ep_combine_backward";
    size_t rb;
    MESH_PAR_CHECK(
        check(l, fn, grad_out, "grad_out", grad_expert_out, "grad_expert_out", hidden, dtype, &rb));
    if (weights == NULL && l->tokens)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: weights is NULL for %zu tokens", fn,
                              l->tokens);
    if (grad_weights && gathered == NULL && l->tokens)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: gathered is NULL but grad_weights is asked for", fn);
    size_t k = (size_t)l->ep->topk;
    for (size_t s = 0; grad_weights && s < l->tokens * k; s++) {
        double d = 0;
        if (l->slot_row[s] >= 0) {
            const char *g = (const char *)grad_out + s / k * rb;
            const char *y = (const char *)gathered + s * rb;
            for (size_t h = 0; h < hidden; h++)
                d += (double)mesh_ep_load(g, h, dtype) * mesh_ep_load(y, h, dtype);
        }
        grad_weights[s] = (float)d;
    }
    if (l->hier)
        return mesh_ep_hier_forward(l, grad_out, weights, grad_expert_out, hidden, dtype, fn);
    char *packed = mesh_ep_scratch(l, rb, fn);
    if (packed == NULL)
        return MESH_ERR_NO_MEMORY;
    for (size_t i = 0; i < l->nsend; i++) {
        size_t s = (size_t)l->send_slot[i];
        const char *row = (const char *)grad_out + s / k * rb;
        double w = weights[s];
        mesh_ep_weighted_sum(mesh_ep_row(l, packed, grad_expert_out, i, rb), &row, &w, 1, hidden,
                             dtype, NULL);
    }
    return mesh_ep_move(l, packed, grad_expert_out, rb, 0, fn);
}
