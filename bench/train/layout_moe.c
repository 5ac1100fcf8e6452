/* mesh-train's mixture of experts: the expert grid's groups and the ep handle, the model's
 * hooks (routing and moves of expert rows over the ep communicator, mesh/expert.h; the sums of
 * the router's statistics over dp and of its weights' gradients over tp). */
#include "layout.h"
#include "commrep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int st(mesh_status_t s, const char *what)
{
    if (s == MESH_OK)
        return 0;
    fprintf(stderr, "mesh-train: %s: %s: %s\n", what, mesh_status_string(s),
            mesh_comm_last_error(NULL));
    return -1;
}

/*
 * The capacity counts the tokens of one ep group in a micro-batch (mesh/expert.h), so each of
 * the edp groups drops on its own: the same as one process that counts each of edp equal,
 * consecutive parts of the micro-batch apart (--capacity-groups). Given, the groups must be a
 * multiple of edp; more groups than ep groups split each rank's tokens, which only the
 * one-process routing of ep=1 can.
 */
static int capacity_groups(layout_t *lo, const layout_params_t *p)
{
    int g = p->capacity_groups ? p->capacity_groups : lo->edp_size;
    if (g % lo->edp_size) {
        snprintf(lo->err, sizeof(lo->err),
                 "--capacity-groups %d is not a multiple of the %d ep groups (ep=%d of %d "
                 "data-parallel ranks)",
                 g, lo->edp_size, lo->ep_size, lo->dp_size);
        return -1;
    }
    lo->capacity_split = g / lo->edp_size;
    if (lo->capacity_split > 1 && lo->ep_size > 1) {
        snprintf(lo->err, sizeof(lo->err),
                 "--capacity-groups %d with %d ep groups of ep=%d: an ep group counts its tokens "
                 "as one; more groups than ep groups need ep=1",
                 g, lo->edp_size, lo->ep_size);
        return -1;
    }
    /* each ep group must hold consecutive samples: its ranks consecutive in dp-ep */
    int32_t ok =
        mesh_comm_rank(lo->dp_comm) == mesh_grid_coord(lo->grid, "edp") * lo->ep_size + lo->ep_rank;
    if (st(mesh_allreduce(lo->world, &ok, &ok, 1, MESH_INT32, MESH_MIN, NULL, NULL), "--capacity"))
        return -1;
    if (!ok) {
        snprintf(lo->err, sizeof(lo->err),
                 "--capacity with --order %s: an ep group's ranks are not consecutive among the "
                 "data-parallel ones, so its tokens are not consecutive samples; put ep inside "
                 "dp in the order",
                 p->order ? p->order : "(default)");
        return -1;
    }
    return 0;
}

/* The expert grid's groups (expert tp is tp: each expert split across tp as the dense MLP) and
 * the ep handle. */
int layout_moe_create(layout_t *lo, const layout_params_t *p)
{
    mesh_status_t s = mesh_grid_comm(lo->grid, "ep", &lo->ep_comm);
    if (s == MESH_OK)
        s = mesh_grid_comm(lo->grid, "edp", &lo->edp_comm);
    mesh_ep_params_t epp = {.field_mask = MESH_EP_PARAM_FIELD_EXPERTS | MESH_EP_PARAM_FIELD_TOPK |
                                          MESH_EP_PARAM_FIELD_CAPACITY,
                            .experts = p->experts,
                            .topk = p->topk,
                            .capacity_factor = p->capacity};
    if (s == MESH_OK && p->experts % mesh_comm_size(lo->ep_comm)) {
        snprintf(lo->err, sizeof(lo->err), "--experts %d does not split evenly across ep=%d",
                 p->experts, mesh_comm_size(lo->ep_comm));
        return -1;
    }
    if (s == MESH_OK)
        s = mesh_ep_create(lo->ep_comm, &epp, &lo->ep);
    if (s != MESH_OK) {
        snprintf(lo->err, sizeof(lo->err), "--experts: %s", mesh_comm_last_error(NULL));
        return -1;
    }
    lo->ep_size = mesh_ep_size(lo->ep), lo->ep_rank = mesh_ep_rank(lo->ep);
    lo->edp_size = mesh_comm_size(lo->edp_comm);
    return p->capacity > 0 ? capacity_groups(lo, p) : 0;
}

static mesh_ep_layout_h *route_of(layout_t *lo, int mb, int layer)
{
    return &lo->routes[(size_t)mb * lo->m->L + layer];
}

/* --comm-report: the rows of this routing that come from other ep ranks (the ones the dispatch
 * and the combine move). */
static int remote_rows(layout_t *lo, mesh_ep_layout_h r, size_t n)
{
    mesh_ep_source_t *src = malloc((n ? n : 1) * sizeof(*src));
    if (!src || st(mesh_ep_layout_sources(r, src), "expert row sources")) {
        free(src);
        return -1;
    }
    uint64_t remote = 0;
    for (size_t i = 0; i < n; i++)
        remote += src[i].rank != lo->ep_rank;
    free(src);
    commrep_ep_rows(remote);
    return 0;
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
    if (st(CR(CR_EP, mesh_ep_layout_create(lo->ep, (size_t)tokens, ids, r)), "expert routing"))
        return -1;
    size_t n = mesh_ep_layout_recv_rows(*r), *per = malloc((size_t)m->El * sizeof(size_t));
    if (!per)
        return -1;
    int rc = st(mesh_ep_layout_expert_rows(*r, per), "expert rows") ||
             st(mesh_ep_layout_dropped(*r, dropped), "dropped tokens");
    for (int x = 0; rc == 0 && x < m->El; x++)
        expert_rows[x] = (int)per[x];
    free(per);
    if (rc == 0 && commrep_on)
        rc = remote_rows(lo, *r, n);
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
    return st(CR(CR_EP, mesh_ep_dispatch(*route_of(lo, mb, layer), in, rows, lo->m->C, MESH_FP32)),
              "expert dispatch");
}

static int combine(void *ctx, int mb, int layer, const float *rows, const float *weights,
                   float *out, float *gathered)
{
    layout_t *lo = ctx;
    return st(CR(CR_EP, mesh_ep_combine(*route_of(lo, mb, layer), rows, weights, out, gathered,
                                        lo->m->C, MESH_FP32)),
              "expert combine");
}

static int combine_bwd(void *ctx, int mb, int layer, const float *dout, const float *weights,
                       const float *gathered, float *drows, float *dweights)
{
    layout_t *lo = ctx;
    return st(CR(CR_EP, mesh_ep_combine_backward(*route_of(lo, mb, layer), dout, weights, gathered,
                                                 drows, dweights, lo->m->C, MESH_FP32)),
              "expert combine backward");
}

static int dispatch_bwd(void *ctx, int mb, int layer, const float *drows, float *din)
{
    layout_t *lo = ctx;
    return st(CR(CR_EP, mesh_ep_dispatch_backward(*route_of(lo, mb, layer), drows, din, lo->m->C,
                                                  MESH_FP32)),
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

/* over every rank holding other tokens: dp x ep, and cp's other positions */
static int dp_sum(void *ctx, double *buf, int n)
{
    layout_t *lo = ctx;
    if (mesh_comm_size(lo->zero_comm) == 1)
        return 0;
    return st(CR(CR_DP, mesh_allreduce(lo->zero_comm, buf, buf, (size_t)n, MESH_FP64, MESH_SUM,
                                       NULL, NULL)),
              "router statistics all-reduce");
}

static int tp_sum(void *ctx, float *buf, int n)
{
    layout_t *lo = ctx;
    return st(CR(CR_TP,
                 mesh_allreduce(lo->tp_comm, buf, buf, (size_t)n, MESH_FP32, MESH_SUM, NULL, NULL)),
              "router weight gradient all-reduce");
}

int layout_moe_bind(layout_t *lo)
{
    gpt_t *m = lo->m;
    lo->routes = calloc((size_t)m->n_mb * m->L, sizeof(*lo->routes));
    if (!lo->routes)
        return -1;
    /* ep=1: every expert here, routed by the model itself */
    if (lo->ep_size > 1) {
        m->ops.moe_route = route, m->ops.moe_dispatch = dispatch, m->ops.moe_combine = combine;
        m->ops.moe_combine_bwd = combine_bwd, m->ops.moe_dispatch_bwd = dispatch_bwd;
        m->ops.moe_done = done;
    }
    m->ops.moe_dp_sum = dp_sum;
    if (lo->tp_size > 1)
        m->ops.moe_tp_sum = tp_sum;
    return 0;
}
