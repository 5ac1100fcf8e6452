/*
 * The expert-parallel handle and the layout of one routing: counts per (destination, expert)
 * exchanged with an all-to-all, capacity decided by the experts' owners in global token order,
 * then the offsets of every row on both sides and the rows' source positions.
 */
#include "ep.h"
#include "ep_hier.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The count exchange's words before the per-expert counts: verdict, tokens, and the four
 * counts of mesh_ep_hier_count. */
#define MSG_HDR 6

mesh_status_t mesh_ep_create(mesh_comm_h comm, const mesh_ep_params_t *params, mesh_ep_h *ep)
{
    static const char fn[] = "mesh_ep_create";
    if (ep == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: ep is NULL", fn);
    if (comm == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    if (params == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: params is NULL", fn);
    int size = mesh_comm_size(comm), rank = mesh_comm_rank(comm);
    if (size < 1 || rank < 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: comm is not a valid communicator", fn);
    if (!(params->field_mask & MESH_EP_PARAM_FIELD_EXPERTS) || params->experts < 1)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: experts must be set and at least 1", fn);
    if (params->experts % size)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: experts=%d is not a multiple of the ep size %d", fn,
                              params->experts, size);
    if (!(params->field_mask & MESH_EP_PARAM_FIELD_TOPK) || params->topk < 1 ||
        params->topk > params->experts)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: topk=%d must be set and in 1..experts=%d",
                              fn, params->topk, params->experts);
    double cf = params->field_mask & MESH_EP_PARAM_FIELD_CAPACITY ? params->capacity_factor : 0;
    if (!(cf >= 0) || isinf(cf))
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: capacity_factor=%g must be finite and >= 0 (0: dropless)", fn,
                              cf);
    mesh_ep_path_t path =
        params->field_mask & MESH_EP_PARAM_FIELD_PATH ? params->path : MESH_EP_PATH_AUTO;
    if (path != MESH_EP_PATH_AUTO && path != MESH_EP_PATH_FLAT && path != MESH_EP_PATH_HIER)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: path=%d is not MESH_EP_PATH_AUTO, _FLAT or _HIER", fn,
                              (int)path);
    double ratio = params->field_mask & MESH_EP_PARAM_FIELD_LINK_RATIO ? params->link_ratio : 0;
    if ((params->field_mask & MESH_EP_PARAM_FIELD_LINK_RATIO) && !(ratio > 0 && !isinf(ratio)))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: link_ratio=%g must be finite and > 0", fn,
                              ratio);
    mesh_ep_h e = calloc(1, sizeof(*e));
    if (e == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn);
    *e = (struct mesh_ep){.comm = comm,
                          .size = size,
                          .rank = rank,
                          .experts = params->experts,
                          .local = params->experts / size,
                          .topk = params->topk,
                          .capacity_factor = cf,
                          .path = path,
                          .link_ratio = ratio};
    if (mesh_ep_node_map(e) != MESH_OK) {
        free(e);
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn);
    }
    *ep = e;
    return MESH_OK;
}

void mesh_ep_destroy(mesh_ep_h ep)
{
    if (ep)
        free(ep->node_of);
    free(ep);
}

int mesh_ep_size(mesh_ep_h ep)
{
    return ep ? ep->size : -1;
}

int mesh_ep_rank(mesh_ep_h ep)
{
    return ep ? ep->rank : -1;
}

void mesh_ep_local_experts(mesh_ep_h ep, int *first, int *count)
{
    if (first)
        *first = ep ? ep->rank * ep->local : 0;
    if (count)
        *count = ep ? ep->local : 0;
}

void mesh_ep_layout_destroy(mesh_ep_layout_h l)
{
    if (l == NULL)
        return;
    free(l->scount);
    free(l->send_slot);
    free(l->slot_row);
    free(l->expert_rows);
    free(l->routed);
    free(l->sources);
    free(l->self_map);
    free(l->scratch);
    free(l->counts);
    free(l->reqs);
    mesh_ep_hier_destroy(l->hier);
    free(l);
}

/* Local checks of one rank's routing; the message names the argument. */
static mesh_status_t check_ids(mesh_ep_h ep, size_t tokens, const int32_t *ids, int64_t *count)
{
    static const char fn[] = "mesh_ep_layout_create";
    int k = ep->topk, E = ep->experts;
    if (tokens && ids == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: expert_ids is NULL for %zu tokens", fn,
                              tokens);
    if (tokens > (size_t)INT64_MAX / (size_t)k / 2)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: tokens=%zu is too large", fn, tokens);
    for (size_t t = 0; t < tokens; t++)
        for (int j = 0; j < k; j++) {
            int32_t e = ids[t * k + j];
            if (e < 0 || e >= E)
                return mesh_par_error(MESH_ERR_INVALID_ARG,
                                      "%s: expert_ids[%zu] = %d (token %zu) is not in 0..%d", fn,
                                      t * k + j, (int)e, t, E - 1);
            for (int i = 0; i < j; i++)
                if (ids[t * k + i] == e)
                    return mesh_par_error(MESH_ERR_INVALID_ARG,
                                          "%s: expert_ids: token %zu chooses expert %d twice", fn,
                                          t, (int)e);
            count[e]++;
        }
    return MESH_OK;
}

static void prefix(const size_t *count, size_t *off, size_t n, size_t *total)
{
    size_t s = 0;
    for (size_t i = 0; i < n; i++) {
        off[i] = s;
        s += count[i];
    }
    *total = s;
}

/* The owners' half: what each source may send to each local expert. */
static void decide_kept(mesh_ep_layout_h l, const int64_t *msg, int64_t *kept, int W)
{
    mesh_ep_h ep = l->ep;
    int P = ep->size, L = ep->local;
    for (int x = 0; x < L; x++) {
        size_t before = 0;
        for (int s = 0; s < P; s++) {
            size_t n = (size_t)msg[s * W + MSG_HDR + x], keep = n;
            if (l->capacity)
                keep = before >= l->capacity      ? 0
                       : l->capacity - before < n ? l->capacity - before
                                                  : n;
            before += n;
            kept[s * L + x] = (int64_t)keep;
            l->rcount[s * L + x] = keep;
            l->routed[x] += n;
            l->dropped[x] += n - keep;
        }
    }
}

/* The path of the layout's moves: the same on every rank, from what every rank sent. The flat
 * path moves rows between nodes and inside them at once; the hierarchical path sends a token
 * once per other node instead of once per choice there, and then, in a second phase, the rows
 * its forwarders pass on inside their node with the rows that stay in the node anyway. With r
 * the cost of a byte between nodes over one inside (measured, or given), it is taken when
 * r x its rows between nodes + the rows inside its nodes < max(r x the flat rows between
 * nodes, the flat rows inside them). */
static mesh_status_t choose_hier(mesh_ep_h ep, const int64_t *rmsg, int stride, int *hier)
{
    *hier = ep->path == MESH_EP_PATH_HIER;
    if (ep->path != MESH_EP_PATH_AUTO || ep->nodes < 2)
        return MESH_OK;
    int64_t flat = 0, rows = 0, fwd = 0, inside = 0;
    for (int s = 0; s < ep->size; s++) {
        flat += rmsg[s * stride + 2];
        rows += rmsg[s * stride + 3];
        fwd += rmsg[s * stride + 4];
        inside += rmsg[s * stride + 5];
    }
    if (rows >= flat)
        return MESH_OK;
    double r, t_flat, t_hier;
    MESH_PAR_CHECK(mesh_ep_measure_link(ep, &r));
    t_flat = fmax(r * (double)flat, (double)inside);
    t_hier = r * (double)rows + (double)(fwd + inside);
    *hier = t_hier < t_flat;
    return MESH_OK;
}

static mesh_status_t build(mesh_ep_layout_h l, const int32_t *ids, const int64_t *count)
{
    static const char fn[] = "mesh_ep_layout_create";
    mesh_ep_h ep = l->ep;
    int P = ep->size, L = ep->local, k = ep->topk, E = ep->experts, W = L + MSG_HDR;
    size_t n = (size_t)P * L;
    int64_t *msg = calloc((size_t)P * W * 2 + n, sizeof(int64_t)), cross[4] = {0, 0, 0, 0};
    if (msg == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn);
    int64_t *rmsg = msg + (size_t)P * W, *kept = rmsg + (size_t)P * W;
    if (count)
        mesh_ep_hier_count(ep, l->tokens, ids, cross);
    /* to each destination: this rank's verdict, its token count, the rows it would send to
     * other nodes on each path, its counts for their experts */
    for (int d = 0; d < P; d++) {
        msg[d * W] = count == NULL;
        msg[d * W + 1] = (int64_t)l->tokens;
        msg[d * W + 2] = cross[0];
        msg[d * W + 3] = cross[1];
        msg[d * W + 4] = cross[2];
        msg[d * W + 5] = cross[3];
        for (int x = 0; x < L && count; x++)
            msg[d * W + MSG_HDR + x] = count[d * L + x];
    }
    mesh_status_t st = mesh_alltoall(ep->comm, msg, rmsg, (size_t)W, MESH_INT64, NULL, NULL);
    if (st != MESH_OK) {
        free(msg);
        return mesh_par_fail(ep->comm, st, "mesh_ep_layout_create: count exchange");
    }
    int bad = -1;
    uint64_t global = 0;
    for (int s = 0; s < P; s++) {
        if (rmsg[s * W] && bad < 0)
            bad = s;
        global += (uint64_t)rmsg[s * W + 1];
    }
    if (bad >= 0) {
        free(msg);
        if (count == NULL) /* this rank's own message stands */
            return MESH_ERR_INVALID_ARG;
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: ep rank %d passed an invalid routing", fn,
                              bad);
    }
    if (ep->capacity_factor > 0)
        l->capacity = (size_t)ceil(ep->capacity_factor * (double)global * k / E);
    int hier;
    st = choose_hier(ep, rmsg, W, &hier);
    if (st != MESH_OK) {
        free(msg);
        return st;
    }
    l->path = hier ? MESH_EP_PATH_HIER : MESH_EP_PATH_FLAT;
    decide_kept(l, rmsg, kept, W);
    if (l->capacity) {
        st = mesh_alltoall(ep->comm, kept, msg, (size_t)L, MESH_INT64, NULL, NULL);
        if (st != MESH_OK) {
            free(msg);
            return mesh_par_fail(ep->comm, st, "mesh_ep_layout_create: kept counts");
        }
        for (size_t i = 0; i < n; i++)
            l->scount[i] = (size_t)msg[i];
    } else {
        for (size_t i = 0; i < n; i++)
            l->scount[i] = (size_t)count[i];
    }
    free(msg);
    /* the packed send rows: destination, its expert, token order; e = d * L + x */
    prefix(l->scount, l->soff, n, &l->nsend);
    /* the expert rows: local expert, then source */
    size_t s = 0;
    for (int x = 0; x < L; x++) {
        l->expert_rows[x] = 0;
        for (int p = 0; p < P; p++) {
            l->roff[p * L + x] = s;
            s += l->rcount[p * L + x];
            l->expert_rows[x] += l->rcount[p * L + x];
        }
    }
    l->nrecv = s;
    int me = ep->rank;
    l->self_lo = l->self_hi = l->soff[me * L];
    for (int x = 0; x < L; x++)
        l->self_hi += l->scount[me * L + x];
    l->self_map = malloc((l->self_hi - l->self_lo + 1) * sizeof(size_t));
    if (l->self_map == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn);
    for (int x = 0; x < L; x++)
        for (size_t i = 0; i < l->scount[me * L + x]; i++)
            l->self_map[l->soff[me * L + x] - l->self_lo + i] = l->roff[me * L + x] + i;
    l->send_slot = malloc((l->nsend ? l->nsend : 1) * sizeof(int64_t));
    size_t *seen = calloc(n, sizeof(size_t));
    if (l->send_slot == NULL || seen == NULL) {
        free(seen);
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn);
    }
    for (size_t t = 0; t < l->tokens; t++)
        for (int j = 0; j < k; j++) {
            size_t e = (size_t)ids[t * k + j], pos = seen[e]++;
            int64_t row = -1;
            if (pos < l->scount[e]) {
                row = (int64_t)(l->soff[e] + pos);
                l->send_slot[row] = (int64_t)(t * k + j);
            }
            l->slot_row[t * k + j] = row;
        }
    free(seen);
    return MESH_OK;
}

/* The source positions travel like the rows, as one int64 t * k + j each. */
static mesh_status_t exchange_sources(mesh_ep_layout_h l)
{
    static const char fn[] = "mesh_ep_layout_create";
    mesh_ep_h ep = l->ep;
    int P = ep->size, L = ep->local, k = ep->topk;
    int64_t *got = malloc((l->nrecv ? l->nrecv : 1) * sizeof(int64_t));
    l->sources = malloc((l->nrecv ? l->nrecv : 1) * sizeof(mesh_ep_source_t));
    if (got == NULL || l->sources == NULL) {
        free(got);
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn);
    }
    mesh_status_t st = mesh_ep_move(l, l->send_slot, got, sizeof(int64_t), 0, fn);
    for (size_t r = l->self_lo; r < l->self_hi; r++)
        got[l->self_map[r - l->self_lo]] = l->send_slot[r];
    if (st == MESH_OK)
        for (int p = 0; p < P; p++)
            for (int x = 0; x < L; x++)
                for (size_t i = 0; i < l->rcount[p * L + x]; i++) {
                    int64_t v = got[l->roff[p * L + x] + i];
                    l->sources[l->roff[p * L + x] + i] =
                        (mesh_ep_source_t){.rank = p, .slot = (int32_t)(v % k), .token = v / k};
                }
    free(got);
    return st;
}

mesh_status_t mesh_ep_layout_create(mesh_ep_h ep, size_t tokens, const int32_t *expert_ids,
                                    mesh_ep_layout_h *layout)
{
    static const char fn[] = "mesh_ep_layout_create";
    if (ep == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: ep is NULL", fn);
    if (layout == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: layout is NULL", fn);
    size_t n = (size_t)ep->size * ep->local;
    mesh_ep_layout_h l = calloc(1, sizeof(*l));
    int64_t *count = calloc((size_t)ep->experts, sizeof(int64_t));
    if (l == NULL || count == NULL) {
        free(l);
        free(count);
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn);
    }
    l->ep = ep;
    l->tokens = tokens;
    /* a bad routing still takes part in the count exchange, so that every rank fails */
    int ok = check_ids(ep, tokens, expert_ids, count) == MESH_OK;
    l->scount = calloc(4 * n, sizeof(size_t));
    l->expert_rows = calloc((size_t)ep->local, sizeof(size_t));
    l->routed = calloc(2 * (size_t)ep->local, sizeof(uint64_t));
    l->slot_row = malloc((ok && tokens ? tokens * ep->topk : 1) * sizeof(int64_t));
    l->counts = calloc(4 * (size_t)ep->size * ep->local, sizeof(size_t));
    l->reqs = calloc((size_t)ep->local, sizeof(mesh_request_h));
    if (l->counts == NULL || l->reqs == NULL || l->scount == NULL || l->expert_rows == NULL ||
        l->routed == NULL || l->slot_row == NULL) {
        mesh_ep_layout_destroy(l);
        free(count);
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn);
    }
    l->soff = l->scount + n;
    l->rcount = l->soff + n;
    l->roff = l->rcount + n;
    l->dropped = l->routed + ep->local;
    mesh_status_t st = build(l, expert_ids, ok ? count : NULL);
    free(count);
    if (st == MESH_OK)
        st = exchange_sources(l);
    if (st == MESH_OK && l->path == MESH_EP_PATH_HIER)
        st = mesh_ep_hier_build(l, expert_ids);
    if (st != MESH_OK) {
        mesh_ep_layout_destroy(l);
        return st;
    }
    *layout = l;
    return MESH_OK;
}

size_t mesh_ep_layout_recv_rows(mesh_ep_layout_h l)
{
    return l ? l->nrecv : 0;
}

mesh_ep_path_t mesh_ep_layout_path(mesh_ep_layout_h l)
{
    return l ? l->path : MESH_EP_PATH_FLAT;
}

size_t mesh_ep_layout_tokens(mesh_ep_layout_h l)
{
    return l ? l->tokens : 0;
}

size_t mesh_ep_layout_capacity(mesh_ep_layout_h l)
{
    return l ? l->capacity : 0;
}

mesh_status_t mesh_ep_layout_expert_rows(mesh_ep_layout_h l, size_t *rows)
{
    if (l == NULL || rows == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_ep_layout_expert_rows: %s is NULL",
                              l ? "rows" : "layout");
    memcpy(rows, l->expert_rows, (size_t)l->ep->local * sizeof(size_t));
    return MESH_OK;
}

mesh_status_t mesh_ep_layout_sources(mesh_ep_layout_h l, mesh_ep_source_t *sources)
{
    if (l == NULL || (sources == NULL && l->nrecv))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_ep_layout_sources: %s is NULL",
                              l ? "sources" : "layout");
    if (l->nrecv)
        memcpy(sources, l->sources, l->nrecv * sizeof(*sources));
    return MESH_OK;
}

mesh_status_t mesh_ep_layout_stats(mesh_ep_layout_h l, uint64_t *routed, uint64_t *dropped)
{
    if (l == NULL || routed == NULL || dropped == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_ep_layout_stats: %s is NULL",
                              l == NULL        ? "layout"
                              : routed == NULL ? "routed"
                                               : "dropped");
    memcpy(routed, l->routed, (size_t)l->ep->local * sizeof(uint64_t));
    memcpy(dropped, l->dropped, (size_t)l->ep->local * sizeof(uint64_t));
    return MESH_OK;
}

mesh_status_t mesh_ep_layout_dropped(mesh_ep_layout_h l, uint8_t *dropped)
{
    if (l == NULL || (dropped == NULL && l->tokens))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_ep_layout_dropped: %s is NULL",
                              l ? "dropped" : "layout");
    for (size_t i = 0; i < l->tokens * (size_t)l->ep->topk; i++)
        dropped[i] = l->slot_row[i] < 0;
    return MESH_OK;
}
