/* mesh-train's mixture-of-experts hooks: the model's routing and moves of expert rows over the
 * ep communicator (mesh/expert.h), and the sums of the router's statistics over dp and of its
 * weights' gradients over tp. */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>

static int st(layout_t *lo, mesh_status_t s, const char *what)
{
    if (s == MESH_OK)
        return 0;
    fprintf(stderr, "mesh-train: %s: %s: %s\n", what, mesh_status_string(s),
            mesh_comm_last_error(NULL));
    (void)lo;
    return -1;
}

static mesh_ep_layout_h *route_of(layout_t *lo, int mb, int layer)
{
    return &lo->routes[(size_t)mb * lo->m->L + layer];
}

static int route(void *ctx, int mb, int layer, int tokens, const int32_t *ids, int *rows,
                 int *expert_rows, uint8_t *dropped)
{
    layout_t *lo = ctx;
    gpt_t *m = lo->m;
    mesh_ep_layout_h *r = route_of(lo, mb, layer);
    if (*r) { /* a forward pass again without its backward: the old routing goes */
        mesh_ep_layout_destroy(*r);
        *r = NULL;
    }
    if (st(lo, mesh_ep_layout_create(lo->ep, (size_t)tokens, ids, r), "expert routing"))
        return -1;
    size_t n = mesh_ep_layout_recv_rows(*r), *per = malloc((size_t)m->El * sizeof(size_t));
    if (!per)
        return -1;
    int rc = st(lo, mesh_ep_layout_expert_rows(*r, per), "expert rows") ||
             st(lo, mesh_ep_layout_dropped(*r, dropped), "dropped tokens");
    for (int x = 0; rc == 0 && x < m->El; x++)
        expert_rows[x] = (int)per[x];
    free(per);
    if (rc == 0 && n > (size_t)m->rmax) {
        fprintf(stderr, "mesh-train: %zu expert rows, more than the %d possible\n", n, m->rmax);
        rc = -1;
    }
    *rows = (int)n;
    return rc;
}

static int dispatch(void *ctx, int mb, int layer, const float *in, float *rows)
{
    layout_t *lo = ctx;
    return st(lo, mesh_ep_dispatch(*route_of(lo, mb, layer), in, rows, lo->m->C, MESH_FP32),
              "expert dispatch");
}

static int combine(void *ctx, int mb, int layer, const float *rows, const float *weights,
                   float *out, float *gathered)
{
    layout_t *lo = ctx;
    return st(lo,
              mesh_ep_combine(*route_of(lo, mb, layer), rows, weights, out, gathered, lo->m->C,
                              MESH_FP32),
              "expert combine");
}

static int combine_bwd(void *ctx, int mb, int layer, const float *dout, const float *weights,
                       const float *gathered, float *drows, float *dweights)
{
    layout_t *lo = ctx;
    return st(lo,
              mesh_ep_combine_backward(*route_of(lo, mb, layer), dout, weights, gathered, drows,
                                       dweights, lo->m->C, MESH_FP32),
              "expert combine backward");
}

static int dispatch_bwd(void *ctx, int mb, int layer, const float *drows, float *din)
{
    layout_t *lo = ctx;
    return st(lo,
              mesh_ep_dispatch_backward(*route_of(lo, mb, layer), drows, din, lo->m->C, MESH_FP32),
              "expert dispatch backward");
}

static int done(void *ctx, int mb, int layer)
{
    layout_t *lo = ctx;
    mesh_ep_layout_h *r = route_of(lo, mb, layer);
    mesh_ep_layout_destroy(*r);
    *r = NULL;
    return 0;
}

static int dp_sum(void *ctx, double *buf, int n)
{
    layout_t *lo = ctx;
    if (lo->dp_size == 1)
        return 0;
    return st(lo, mesh_allreduce(lo->dp_comm, buf, buf, (size_t)n, MESH_FP64, MESH_SUM, NULL, NULL),
              "router statistics all-reduce");
}

static int tp_sum(void *ctx, float *buf, int n)
{
    layout_t *lo = ctx;
    return st(lo, mesh_allreduce(lo->tp_comm, buf, buf, (size_t)n, MESH_FP32, MESH_SUM, NULL, NULL),
              "router weight gradient all-reduce");
}

int layout_moe_bind(layout_t *lo)
{
    gpt_t *m = lo->m;
    lo->routes = calloc((size_t)m->n_mb * m->L, sizeof(*lo->routes));
    if (!lo->routes)
        return -1;
    m->ops.moe_route = route, m->ops.moe_dispatch = dispatch, m->ops.moe_combine = combine;
    m->ops.moe_combine_bwd = combine_bwd, m->ops.moe_dispatch_bwd = dispatch_bwd;
    m->ops.moe_done = done, m->ops.moe_dp_sum = dp_sum;
    if (lo->tp_size > 1)
        m->ops.moe_tp_sum = tp_sum;
    return 0;
}
