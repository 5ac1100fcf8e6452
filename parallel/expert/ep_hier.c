/*
 * The moves of the hierarchical path (include/mesh/expert.h) on a plan from ep_hier_plan.c.
 * Forward (dispatch, combine_backward): each source sends every other node's forwarder the
 * rows of its tokens with a kept choice there, once each (and the choices' weights when they
 * are scaled); the forwarders copy or scale them into the staging and to their own expert
 * rows, and the staging goes to the other ranks of the node straight into their expert rows.
 * Reverse (combine, dispatch_backward): expert rows to the forwarders' staging, then to each
 * source its choices' rows in one message, a token whole on the node summed into one row
 * when no gathered rows are asked for; the source sums each token as the flat path does.
 */
#include "ep_hier.h"
#include <stdlib.h>
#include <string.h>

mesh_status_t mesh_ep_hier_post(mesh_ep_h ep, mesh_request_h *reqs, int *n, int send, int peer,
                                const void *buf, size_t bytes)
{
    if (bytes == 0)
        return MESH_OK;
    void *b = (void *)(uintptr_t)buf;
    mesh_status_t st =
        send ? mesh_send_tagged(ep->comm, b, bytes, MESH_UINT8, peer, MESH_EP_TAG, NULL, &reqs[*n])
             : mesh_recv_tagged(ep->comm, b, bytes, MESH_UINT8, peer, MESH_EP_TAG, NULL, &reqs[*n]);
    if (st == MESH_OK)
        (*n)++;
    return st;
}

/* The scratch of one move: weights of the choices sent (ws) and received (wr), then rows on
 * the source side (S, or Z coming back), the forwarder side (R, or T going back) and the
 * staging (Y). */
typedef struct {
    float *ws, *wr;
    char *S, *R, *Y;
} bufs_t;

static mesh_status_t scratch(mesh_ep_layout_h l, size_t rb, bufs_t *b, const char *fn)
{
    struct mesh_ep_hier *h = l->hier;
    int N = l->ep->nodes;
    size_t nw = h->e_off[N] + h->f_off[h->nf], ns = h->u_off[N], nr = h->r_off[h->nf];
    ns = ns > h->e_off[N] ? ns : h->e_off[N];
    nr = nr > h->f_off[h->nf] ? nr : h->f_off[h->nf];
    size_t wb = (nw * sizeof(float) + 63) / 64 * 64;
    char *p = mesh_ep_scratch_bytes(l, wb + (ns + nr + h->ny + 1) * rb, fn);
    if (p == NULL)
        return MESH_ERR_NO_MEMORY;
    b->ws = (float *)p;
    b->wr = b->ws + h->e_off[N];
    b->S = p + wb;
    b->R = b->S + ns * rb;
    b->Y = b->R + nr * rb;
    return MESH_OK;
}

/* Between the sources and their forwarders: rows (rb bytes each, at so/ro offsets) and, when
 * with_w, the choices' weights. dir 1: sources send; 0: forwarders send. */
static mesh_status_t rails(mesh_ep_layout_h l, const bufs_t *b, size_t rb, const size_t *so,
                           const size_t *ro, int with_w, int dir, int *n)
{
    struct mesh_ep_hier *h = l->hier;
    mesh_ep_h ep = l->ep;
    int mn = ep->node_of[ep->rank];
    mesh_status_t st = MESH_OK;
    for (int q = 0; q < h->nf && st == MESH_OK; q++) {
        if (with_w)
            st = mesh_ep_hier_post(ep, h->reqs, n, !dir, h->fsrc[q], b->wr + h->f_off[q],
                                   (h->f_off[q + 1] - h->f_off[q]) * sizeof(float));
        if (st == MESH_OK && rb)
            st = mesh_ep_hier_post(ep, h->reqs, n, !dir, h->fsrc[q], b->R + ro[q] * rb,
                                   (ro[q + 1] - ro[q]) * rb);
    }
    for (int d = 0; d < ep->nodes && st == MESH_OK; d++) {
        if (d == mn)
            continue;
        int fw = mesh_ep_forwarder(ep, ep->rank, d);
        if (with_w)
            st = mesh_ep_hier_post(ep, h->reqs, n, dir, fw, b->ws + h->e_off[d],
                                   (h->e_off[d + 1] - h->e_off[d]) * sizeof(float));
        if (st == MESH_OK && rb)
            st = mesh_ep_hier_post(ep, h->reqs, n, dir, fw, b->S + so[d] * rb,
                                   (so[d + 1] - so[d]) * rb);
    }
    return st;
}

/* Between the forwarders' staging and the expert rows of their node's ranks; dir 1: the
 * forwarders send. */
static mesh_status_t node(mesh_ep_layout_h l, const bufs_t *b, char *rows, size_t rb, int dir,
                          int *n)
{
    struct mesh_ep_hier *h = l->hier;
    mesh_status_t st = MESH_OK;
    for (size_t i = 0; i < h->ngblk && st == MESH_OK; i++)
        st = mesh_ep_hier_post(l->ep, h->reqs, n, !dir, h->gblk[i].peer, rows + h->gblk[i].off * rb,
                               h->gblk[i].n * rb);
    for (size_t i = 0; i < h->nyblk && st == MESH_OK; i++)
        st = mesh_ep_hier_post(l->ep, h->reqs, n, dir, h->yblk[i].peer, b->Y + h->yblk[i].off * rb,
                               h->yblk[i].n * rb);
    return st;
}

mesh_status_t mesh_ep_hier_forward(mesh_ep_layout_h l, const void *in, const float *weights,
                                   void *out, size_t hidden, mesh_dtype_t dtype, const char *fn)
{
    struct mesh_ep_hier *h = l->hier;
    mesh_ep_h ep = l->ep;
    size_t rb = hidden * mesh_dtype_size(dtype), k = (size_t)ep->topk, nremote = h->f_off[h->nf];
    bufs_t b;
    MESH_PAR_CHECK(scratch(l, rb, &b, fn));
    const char *src = in;
    for (size_t i = 0; i < h->u_off[ep->nodes]; i++)
        memcpy(b.S + i * rb, src + (size_t)h->u_tok[i] * rb, rb);
    for (size_t i = 0; weights && i < h->e_off[ep->nodes]; i++)
        b.ws[i] = weights[h->e_slot[i]];
    int n = 0;
    mesh_status_t st = rails(l, &b, rb, h->u_off, h->r_off, weights != NULL, 1, &n);
    MESH_PAR_CHECK(mesh_ep_wait(ep, h->reqs, n, st, fn));
    for (size_t i = 0; i < h->nfe; i++) {
        int64_t s = h->fe_src[i], d = h->fe_dst[i];
        const char *row = s >= 0 ? b.R + (size_t)s * rb : src + (size_t)(-1 - s) / k * rb;
        char *dst = d >= 0 ? b.Y + (size_t)d * rb : (char *)out + (size_t)(-1 - d) * rb;
        if (weights) {
            double w = i < nremote ? b.wr[i] : weights[-1 - s];
            mesh_ep_weighted_sum(dst, &row, &w, 1, hidden, dtype, NULL);
        } else {
            memcpy(dst, row, rb);
        }
    }
    n = 0;
    st = node(l, &b, out, rb, 1, &n);
    return mesh_ep_wait(ep, h->reqs, n, st, fn);
}

/* A forwarded choice's row after the reverse's first step. */
static const char *fe_row(struct mesh_ep_hier *h, const bufs_t *b, const char *rows, size_t i,
                          size_t rb)
{
    int64_t d = h->fe_dst[i];
    return d >= 0 ? b->Y + (size_t)d * rb : rows + (size_t)(-1 - d) * rb;
}

/* The rows each source gets back from this forwarder: a whole token's summed when sum. */
static void pack_back(mesh_ep_layout_h l, const bufs_t *b, const char *rows, const float *weights,
                      int sum, size_t hidden, mesh_dtype_t dtype, size_t rb, double *acc)
{
    struct mesh_ep_hier *h = l->hier;
    double *w = acc + hidden;
    const char **src = (const char **)(w + l->ep->topk);
    for (int q = 0; q < h->nf; q++) {
        char *t = b->R + (sum ? h->t_off[q] : h->f_off[q]) * rb;
        for (size_t i = h->f_off[q]; i < h->f_off[q + 1]; t += rb) {
            if (!sum || !h->fe_whole[i]) {
                memcpy(t, fe_row(h, b, rows, i++, rb), rb);
                continue;
            }
            int m = 0;
            for (int64_t s0 = h->fe_src[i];
                 i < h->f_off[q + 1] && h->fe_whole[i] && h->fe_src[i] == s0; i++, m++) {
                src[m] = fe_row(h, b, rows, i, rb);
                w[m] = weights ? b->wr[i] : 1.0;
            }
            mesh_ep_weighted_sum(t, src, w, m, hidden, dtype, acc);
        }
    }
}

/* Each token's sum on its source, from the rows back (Z), the staging and the expert rows. */
static void sum_tokens(mesh_ep_layout_h l, const bufs_t *b, const char *rows, const float *weights,
                       void *out, void *gathered, size_t hidden, mesh_dtype_t dtype, size_t rb,
                       double *acc)
{
    struct mesh_ep_hier *h = l->hier;
    size_t k = (size_t)l->ep->topk;
    int sum = gathered == NULL;
    double *w = acc + hidden;
    const char **src = (const char **)(w + k);
    const char *base[3] = {b->S, b->Y, rows};
    for (size_t t = 0; t < l->tokens; t++) {
        char *o = (char *)out + t * rb;
        int n = 0;
        for (size_t j = 0; j < k; j++) {
            size_t s = t * k + j;
            int64_t ref = h->slot_ref[s];
            char *g = gathered ? (char *)gathered + s * rb : NULL;
            if (ref < 0) {
                if (g)
                    memset(g, 0, rb);
                continue;
            }
            if (sum && (ref & 3) == 0)
                ref = h->slot_zred[s] << 2;
            if (sum && h->tok_whole[t]) { /* summed by its node's forwarder */
                memcpy(o, b->S + (size_t)(ref >> 2) * rb, rb);
                n = -1;
                break;
            }
            src[n] = base[ref & 3] + (size_t)(ref >> 2) * rb;
            w[n] = weights ? weights[s] : 1.0;
            if (g)
                memcpy(g, src[n], rb);
            n++;
        }
        if (n == 0)
            memset(o, 0, rb);
        else if (n > 0)
            mesh_ep_weighted_sum(o, src, w, n, hidden, dtype, acc);
    }
}

mesh_status_t mesh_ep_hier_reverse(mesh_ep_layout_h l, const void *rows, const float *weights,
                                   void *out, void *gathered, size_t hidden, mesh_dtype_t dtype,
                                   const char *fn)
{
    struct mesh_ep_hier *h = l->hier;
    mesh_ep_h ep = l->ep;
    size_t rb = hidden * mesh_dtype_size(dtype), k = (size_t)ep->topk;
    int sum = gathered == NULL, with_w = sum && weights;
    bufs_t b;
    MESH_PAR_CHECK(scratch(l, rb, &b, fn));
    double *acc = malloc(hidden * sizeof(double) + k * (sizeof(double) + sizeof(char *)));
    if (acc == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn);
    for (size_t i = 0; with_w && i < h->e_off[ep->nodes]; i++)
        b.ws[i] = weights[h->e_slot[i]];
    int n = 0;
    mesh_status_t st = with_w ? rails(l, &b, 0, NULL, NULL, 1, 1, &n) : MESH_OK;
    if (st == MESH_OK)
        st = node(l, &b, (char *)(uintptr_t)rows, rb, 0, &n);
    st = mesh_ep_wait(ep, h->reqs, n, st, fn);
    if (st == MESH_OK) {
        pack_back(l, &b, rows, weights, sum, hidden, dtype, rb, acc);
        n = 0;
        st = rails(l, &b, rb, sum ? h->z_off : h->e_off, sum ? h->t_off : h->f_off, 0, 0, &n);
        st = mesh_ep_wait(ep, h->reqs, n, st, fn);
    }
    if (st == MESH_OK)
        sum_tokens(l, &b, rows, weights, out, gathered, hidden, dtype, rb, acc);
    free(acc);
    return st;
}
