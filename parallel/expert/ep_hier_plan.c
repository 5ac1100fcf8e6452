/*
 * The plan of the hierarchical path (include/mesh/expert.h): which rows a rank sends to each
 * other node's forwarder, which rows it forwards to the ranks of its own node, and where each
 * row lands on the way back. Built once per layout from its counts and offsets, with two
 * point-to-point exchanges between each source and its forwarders: the counts, then the
 * choices, one int64 each: ((token's row in the message * E + expert) << 1) | whole.
 * The ep handle's node map lives here too.
 */
#include "ep_hier.h"
#include <stdlib.h>
#include <string.h>

mesh_status_t mesh_ep_node_map(mesh_ep_h ep)
{
    int P = ep->size, N = mesh_comm_node_count(ep->comm);
    N = N < 1 ? 1 : N;
    int *map = malloc((3 * (size_t)P + N + 1) * sizeof(int));
    if (map == NULL)
        return MESH_ERR_NO_MEMORY;
    ep->nodes = N;
    ep->node_of = map;
    ep->node_index = map + P;
    ep->node_ranks = map + 2 * P;
    ep->node_first = map + 3 * P;
    memset(ep->node_first, 0, ((size_t)N + 1) * sizeof(int));
    for (int r = 0; r < P; r++) {
        int b = mesh_comm_node(ep->comm, r);
        ep->node_of[r] = b >= 0 && b < N ? b : 0;
        ep->node_first[ep->node_of[r] + 1]++;
    }
    for (int b = 0; b < N; b++)
        ep->node_first[b + 1] += ep->node_first[b];
    int *next = calloc((size_t)N, sizeof(int));
    if (next == NULL) {
        free(map);
        return MESH_ERR_NO_MEMORY;
    }
    for (int r = 0; r < P; r++) {
        int b = ep->node_of[r];
        ep->node_index[r] = next[b];
        ep->node_ranks[ep->node_first[b] + next[b]++] = r;
    }
    free(next);
    return MESH_OK;
}

void mesh_ep_hier_count(mesh_ep_h ep, size_t tokens, const int32_t *ids, int64_t cross[4])
{
    int k = ep->topk, me = ep->node_of[ep->rank];
    int seen[64]; /* nodes a token reached; beyond 64, each further choice counts as a row */
    cross[0] = cross[1] = cross[2] = cross[3] = 0;
    for (size_t t = 0; t < tokens && ids; t++) {
        int n = 0;
        for (int j = 0; j < k; j++) {
            int dst = ids[t * k + j] / ep->local, b = ep->node_of[dst], i = 0;
            if (b == me) {
                cross[3] += dst != ep->rank;
                continue;
            }
            cross[0]++;
            cross[2] += mesh_ep_forwarder(ep, ep->rank, b) != dst;
            while (i < n && seen[i] != b)
                i++;
            if (i == n) {
                cross[1]++;
                if (n < 64)
                    seen[n++] = b;
            }
        }
    }
}

void mesh_ep_hier_destroy(struct mesh_ep_hier *h)
{
    if (h == NULL)
        return;
    free(h->u_off);
    free(h->u_tok);
    free(h->slot_ref);
    free(h->fsrc);
    free(h->r_off);
    free(h->fe_src);
    free(h->yblk);
    free(h->reqs);
    free(h);
}

static void prefix(size_t *off, int n)
{
    for (int i = 0; i < n; i++)
        off[i + 1] += off[i];
}

/* The source side; vals [e_off[nodes]] gets the choices to send. */
static mesh_status_t plan_source(mesh_ep_layout_h l, struct mesh_ep_hier *h, const int32_t *ids,
                                 int64_t **vals)
{
    mesh_ep_h ep = l->ep;
    int N = ep->nodes, k = ep->topk, L = ep->local, E = ep->experts, me = ep->node_of[ep->rank];
    size_t T = l->tokens, S = T * (size_t)k;
    h->u_off = calloc(6 * ((size_t)N + 1), sizeof(size_t));
    h->slot_ref = malloc((2 * S + 1) * sizeof(int64_t) + T + 1);
    int64_t *last = malloc((size_t)N * sizeof(int64_t));
    if (h->u_off == NULL || h->slot_ref == NULL || last == NULL) {
        free(last);
        return MESH_ERR_NO_MEMORY;
    }
    h->e_off = h->u_off + N + 1;
    h->z_off = h->e_off + N + 1;
    size_t *ucur = h->z_off + N + 1, *ecur = ucur + N + 1, *zcur = ecur + N + 1;
    h->slot_zred = h->slot_ref + S;
    h->tok_whole = (uint8_t *)(h->slot_zred + S);
    /* pass 1: how many tokens, choices and summed-mode rows go to each node */
    for (int b = 0; b < N; b++)
        last[b] = -1;
    for (size_t t = 0; t < T; t++) {
        int nb = -2;
        for (int j = 0; j < k; j++) {
            size_t s = t * k + j;
            h->slot_ref[s] = h->slot_zred[s] = -1;
            if (l->slot_row[s] < 0)
                continue;
            int b = ep->node_of[ids[s] / L];
            nb = nb == -2 || nb == b ? b : -1;
        }
        h->tok_whole[t] = nb >= 0 && nb != me;
        for (int j = 0; j < k; j++) {
            size_t s = t * k + j;
            int b = l->slot_row[s] < 0 ? me : ep->node_of[ids[s] / L];
            if (b == me)
                continue;
            h->e_off[b + 1]++;
            if (last[b] != (int64_t)t) {
                last[b] = (int64_t)t;
                h->u_off[b + 1]++;
                h->z_off[b + 1] += h->tok_whole[t];
            }
            h->z_off[b + 1] += !h->tok_whole[t];
        }
    }
    prefix(h->u_off, N);
    prefix(h->e_off, N);
    prefix(h->z_off, N);
    memcpy(ucur, h->u_off, (size_t)N * sizeof(size_t));
    memcpy(ecur, h->e_off, (size_t)N * sizeof(size_t));
    memcpy(zcur, h->z_off, (size_t)N * sizeof(size_t));
    size_t ne = h->e_off[N];
    h->u_tok = malloc((h->u_off[N] + 2 * ne + 1) * sizeof(int64_t));
    if (h->u_tok == NULL) {
        free(last);
        return MESH_ERR_NO_MEMORY;
    }
    h->e_slot = h->u_tok + h->u_off[N];
    *vals = h->e_slot + ne;
    /* pass 2: fill them in token, then choice order */
    for (int b = 0; b < N; b++)
        last[b] = -1;
    for (size_t t = 0; t < T; t++) {
        int64_t zt = -1;
        for (int j = 0; j < k; j++) {
            size_t s = t * k + j;
            int b = l->slot_row[s] < 0 ? me : ep->node_of[ids[s] / L];
            if (b == me)
                continue;
            if (last[b] != (int64_t)t) {
                last[b] = (int64_t)t;
                h->u_tok[ucur[b]++] = (int64_t)t;
                if (h->tok_whole[t])
                    zt = (int64_t)zcur[b]++;
            }
            size_t i = ecur[b]++;
            int64_t u = (int64_t)(ucur[b] - 1 - h->u_off[b]);
            h->e_slot[i] = (int64_t)s;
            (*vals)[i] = ((u * E + ids[s]) << 1) | h->tok_whole[t];
            h->slot_ref[s] = (int64_t)(i << 2);
            h->slot_zred[s] = h->tok_whole[t] ? zt : (int64_t)zcur[b]++;
        }
    }
    free(last);
    return MESH_OK;
}

/* The counts, then the choices, between each source and its forwarders. */
static mesh_status_t exchange(mesh_ep_layout_h l, struct mesh_ep_hier *h, const int64_t *vals,
                              int64_t **raw)
{
    static const char fn[] = "mesh_ep_layout_create: hierarchical plan";
    mesh_ep_h ep = l->ep;
    int P = ep->size, N = ep->nodes, me = ep->rank, mn = ep->node_of[me];
    h->fsrc = malloc((size_t)P * sizeof(int));
    h->r_off = calloc(3 * ((size_t)P + 1), sizeof(size_t));
    int64_t *cnt = malloc(2 * ((size_t)N + P) * sizeof(int64_t));
    h->reqs = malloc(2 * ((size_t)N + P) * sizeof(mesh_request_h));
    if (h->fsrc == NULL || h->r_off == NULL || cnt == NULL || h->reqs == NULL) {
        free(cnt);
        return MESH_ERR_NO_MEMORY;
    }
    h->f_off = h->r_off + P + 1;
    h->t_off = h->f_off + P + 1;
    for (int p = 0; p < P; p++)
        if (ep->node_of[p] != mn && mesh_ep_forwarder(ep, p, mn) == me)
            h->fsrc[h->nf++] = p;
    int64_t *got = cnt + 2 * N;
    int n = 0;
    mesh_status_t st = MESH_OK;
    for (int q = 0; q < h->nf && st == MESH_OK; q++)
        st = mesh_ep_hier_post(ep, h->reqs, &n, 0, h->fsrc[q], got + 2 * q, 16);
    for (int b = 0; b < N && st == MESH_OK; b++) {
        if (b == mn)
            continue;
        cnt[2 * b] = (int64_t)(h->u_off[b + 1] - h->u_off[b]);
        cnt[2 * b + 1] = (int64_t)(h->e_off[b + 1] - h->e_off[b]);
        st = mesh_ep_hier_post(ep, h->reqs, &n, 1, mesh_ep_forwarder(ep, me, b), cnt + 2 * b, 16);
    }
    st = mesh_ep_wait(ep, h->reqs, n, st, fn);
    for (int q = 0; q < h->nf && st == MESH_OK; q++) {
        h->r_off[q + 1] = h->r_off[q] + (size_t)got[2 * q];
        h->f_off[q + 1] = h->f_off[q] + (size_t)got[2 * q + 1];
    }
    free(cnt);
    if (st != MESH_OK)
        return st;
    *raw = malloc((h->f_off[h->nf] + 1) * sizeof(int64_t));
    if (*raw == NULL)
        return MESH_ERR_NO_MEMORY;
    n = 0;
    for (int q = 0; q < h->nf && st == MESH_OK; q++)
        st = mesh_ep_hier_post(ep, h->reqs, &n, 0, h->fsrc[q], *raw + h->f_off[q],
                               (h->f_off[q + 1] - h->f_off[q]) * sizeof(int64_t));
    for (int b = 0; b < N && st == MESH_OK; b++)
        if (b != mn)
            st = mesh_ep_hier_post(ep, h->reqs, &n, 1, mesh_ep_forwarder(ep, me, b),
                                   vals + h->e_off[b],
                                   (h->e_off[b + 1] - h->e_off[b]) * sizeof(int64_t));
    return mesh_ep_wait(ep, h->reqs, n, st, fn);
}

/* The forwarder side: every choice it forwards (the sources', then its own), the staging
 * blocks and where each row goes. */
static mesh_status_t plan_forward(mesh_ep_layout_h l, struct mesh_ep_hier *h, const int32_t *ids,
                                  const int64_t *raw)
{
    mesh_ep_h ep = l->ep;
    int P = ep->size, L = ep->local, E = ep->experts, k = ep->topk, me = ep->rank;
    int mn = ep->node_of[me], ls = ep->node_first[mn + 1] - ep->node_first[mn];
    const int *nr = ep->node_ranks + ep->node_first[mn];
    size_t nremote = h->f_off[h->nf], nown = 0, S = l->tokens * (size_t)k;
    for (size_t s = 0; s < S; s++)
        nown += l->slot_row[s] >= 0 && ep->node_of[ids[s] / L] == mn;
    h->nfe = nremote + nown;
    size_t nb = (size_t)ls * P * L, ng = (size_t)P * L;
    h->fe_src = malloc(2 * (h->nfe + 1) * sizeof(int64_t) + h->nfe + 1);
    h->yblk = malloc((nb + ng) * sizeof(mesh_ep_blk_t));
    size_t *cnt = calloc(nb + ng, sizeof(size_t)), *run = cnt ? cnt + nb : NULL;
    mesh_request_h *reqs =
        realloc(h->reqs, (2 * ((size_t)ep->nodes + P) + nb + ng + 1) * sizeof(mesh_request_h));
    if (reqs)
        h->reqs = reqs;
    if (h->fe_src == NULL || h->yblk == NULL || cnt == NULL || reqs == NULL) {
        free(cnt);
        return MESH_ERR_NO_MEMORY;
    }
    h->fe_dst = h->fe_src + h->nfe + 1;
    h->fe_whole = (uint8_t *)(h->fe_dst + h->nfe + 1);
    h->gblk = h->yblk + nb;
    /* the choices: expert in fe_dst for now, source rank in p */
    int q = 0;
    for (size_t i = 0; i < nremote; i++) {
        while (i >= h->f_off[q + 1])
            q++;
        int64_t v = raw[i] >> 1, e = v % E, u = v / E;
        if (e < 0 || ep->node_of[e / L] != mn || (size_t)u >= h->r_off[q + 1] - h->r_off[q]) {
            free(cnt);
            return mesh_par_error(MESH_ERR_INVALID_ARG,
                                  "mesh_ep_layout_create: ep rank %d sent a bad choice",
                                  h->fsrc[q]);
        }
        h->fe_src[i] = (int64_t)h->r_off[q] + u;
        h->fe_whole[i] = raw[i] & 1;
        h->fe_dst[i] = e;
    }
    size_t i = nremote;
    for (size_t s = 0; s < S; s++)
        if (l->slot_row[s] >= 0 && ep->node_of[ids[s] / L] == mn) {
            h->fe_src[i] = -1 - (int64_t)s;
            h->fe_whole[i] = 0;
            h->fe_dst[i++] = ids[s];
        }
    q = 0;
    for (i = 0; i < h->nfe; i++) {
        while (i < nremote && i >= h->f_off[q + 1])
            q++;
        int p = i < nremote ? h->fsrc[q] : me, d = (int)(h->fe_dst[i] / L);
        if (d != me)
            cnt[((size_t)ep->node_index[d] * P + p) * L + h->fe_dst[i] % L]++;
    }
    /* staging blocks: node rank, source, expert; cnt becomes each block's cursor */
    for (int di = 0; di < ls; di++)
        for (size_t b = (size_t)di * P * L; b < (size_t)(di + 1) * P * L; b++) {
            size_t c = cnt[b];
            cnt[b] = h->ny;
            if (c && nr[di] != me)
                h->yblk[h->nyblk++] = (mesh_ep_blk_t){nr[di], h->ny, c};
            h->ny += c;
        }
    q = 0;
    for (i = 0; i < h->nfe; i++) {
        while (i < nremote && i >= h->f_off[q + 1])
            q++;
        int p = i < nremote ? h->fsrc[q] : me, d = (int)(h->fe_dst[i] / L);
        int x = (int)(h->fe_dst[i] % L);
        if (d != me)
            h->fe_dst[i] = (int64_t)cnt[((size_t)ep->node_index[d] * P + p) * L + x]++;
        else
            h->fe_dst[i] = -1 - (int64_t)(l->roff[p * L + x] + run[p * L + x]++);
        if (i >= nremote) {
            int64_t f = h->fe_dst[i];
            h->slot_ref[-1 - h->fe_src[i]] = f >= 0 ? (f << 2) | 1 : ((-1 - f) << 2) | 2;
        }
    }
    free(cnt);
    /* rows back to each source when whole tokens come back summed: one per token */
    for (q = 0; q < h->nf; q++) {
        size_t rows = 0;
        for (i = h->f_off[q]; i < h->f_off[q + 1]; i++)
            rows += !h->fe_whole[i] || i == h->f_off[q] || h->fe_src[i - 1] != h->fe_src[i];
        h->t_off[q + 1] = h->t_off[q] + rows;
    }
    /* this rank's expert rows that its node's forwarders send: source, expert */
    for (int p = 0; p < P; p++) {
        int fw = mesh_ep_forwarder(ep, p, mn);
        for (int x = 0; x < L && fw != me; x++)
            if (l->rcount[p * L + x])
                h->gblk[h->ngblk++] = (mesh_ep_blk_t){fw, l->roff[p * L + x], l->rcount[p * L + x]};
    }
    return MESH_OK;
}

mesh_status_t mesh_ep_hier_build(mesh_ep_layout_h l, const int32_t *ids)
{
    static const char fn[] = "mesh_ep_layout_create";
    struct mesh_ep_hier *h = calloc(1, sizeof(*h));
    int64_t *vals = NULL, *raw = NULL;
    if (h == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn);
    mesh_status_t st = plan_source(l, h, ids, &vals);
    if (st == MESH_OK)
        st = exchange(l, h, vals, &raw);
    if (st == MESH_OK)
        st = plan_forward(l, h, ids, raw);
    free(raw);
    if (st != MESH_OK) {
        mesh_ep_hier_destroy(h);
        return st == MESH_ERR_NO_MEMORY ? mesh_par_error(st, "%s: out of memory", fn) : st;
    }
    l->hier = h;
    return MESH_OK;
}
