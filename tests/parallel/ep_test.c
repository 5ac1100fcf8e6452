/*
 * Expert dispatch and combine against the expected math, under meshrun: every rank builds the
 * global batch (token rows, routing, weights) from one seed, takes its slice of the tokens
 * (uneven slices, some empty), runs the layer over the ep group (the world, or with --ep N the
 * ep groups of an ep x dp grid, each with its own batch) and compares, bit for bit:
 *   - the rows each rank receives and their sources with the expected grouping (local expert,
 *     then global token order), fp32 and bf16;
 *   - combine with identity experts with each token's rows summed times its weights (in the
 *     layer's stated order: the token's choices in order, in double, rounded once), and with
 *     weights in eighths, where every sum is exact, with the token times the sum of its weights;
 *   - both backward passes (sum of the kept rows; weighted rows and the weights' gradients);
 *   - with a capacity factor, the dropped choices and the per-expert statistics with a
 *     reference computed here from the global order, and with the layer run on one rank holding
 *     the whole batch;
 *   - refusals of bad input, naming the argument, on every rank at once.
 * Routings: random top-k with some experts never chosen, every token to the same experts, and
 * k = E.
 */
#include "mesh.h"
#include "mesh/expert.h"
#include "tests/harness/mp_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = 12 };
enum { RANDOM, SAME, ALL };

static int wrank, failures;
static int erank, esize;          /* in the ep group */
static mesh_ep_path_t path_param; /* --path */
#define CHECK(cond, ...) MESH_MP_CHECK(wrank, failures, cond, __VA_ARGS__)

static uint64_t mix(uint64_t seed, uint64_t i)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + i + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float uniform(uint64_t seed, uint64_t i)
{
    return (float)((double)(mix(seed, i) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void ok(mesh_status_t st, const char *what)
{
    CHECK(st == MESH_OK, "%s: %s: %s", what, mesh_status_string(st), mesh_comm_last_error(NULL));
}

static void refused(mesh_status_t st, const char *what, const char *text)
{
    const char *msg = mesh_comm_last_error(NULL);
    CHECK(st == MESH_ERR_INVALID_ARG && msg && strstr(msg, text), "%s: status %d, message '%s'",
          what, (int)st, msg ? msg : "");
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* One global batch and its routing. */
typedef struct {
    const char *name;
    int E, k, mode;
    size_t tokens;   /* global */
    double capacity; /* factor; 0 dropless */
    int dyadic;      /* weights in eighths: every sum is exact, so out == (sum of w) * x */
} cas_t;

typedef struct {
    size_t start, count;        /* this rank's slice */
    int32_t *ids;               /* [tokens * k] global */
    float *x, *g, *w;           /* [tokens, H], [tokens, H], [tokens * k] */
    uint8_t *drop;              /* [tokens * k] expected */
    uint64_t *routed, *dropped; /* [E] expected */
} batch_t;

static size_t slice_start(size_t n, int r, int p)
{
    return n * (size_t)r * (size_t)r / ((size_t)p * (size_t)p);
}

static void make(const cas_t *c, batch_t *b, uint64_t seed)
{
    int E = c->E, k = c->k;
    size_t n = c->tokens;
    b->start = slice_start(n, erank, esize);
    b->count = slice_start(n, erank + 1, esize) - b->start;
    b->ids = malloc(n * k * sizeof(int32_t) + 1);
    b->x = malloc(n * H * sizeof(float) + 1);
    b->g = malloc(n * H * sizeof(float) + 1);
    b->w = malloc(n * k * sizeof(float) + 1);
    b->drop = calloc(n * k + 1, 1);
    b->routed = calloc((size_t)E, sizeof(uint64_t));
    b->dropped = calloc((size_t)E, sizeof(uint64_t));
    for (size_t i = 0; i < n * H; i++) {
        b->x[i] = uniform(seed, i);
        b->g[i] = uniform(seed + 1, i);
    }
    /* experts e % 3 == 1 are never chosen by the random routing when enough remain */
    int allowed[64], na = 0;
    for (int e = 0; e < E; e++)
        if (e % 3 != 1)
            allowed[na++] = e;
    if (na < k)
        for (na = 0; na < E; na++)
            allowed[na] = na;
    for (size_t t = 0; t < n; t++) {
        int perm[64];
        for (int i = 0; i < E; i++)
            perm[i] = i;
        for (int i = na - 1; i > 0; i--) { /* shuffle of the allowed ones */
            int j = (int)(mix(seed + 2, t * 64 + (uint64_t)i) % (uint64_t)(i + 1)), tmp;
            tmp = allowed[i], allowed[i] = allowed[j], allowed[j] = tmp;
        }
        for (int j = 0; j < k; j++) {
            int e = c->mode == SAME  ? (j + 1) % E
                    : c->mode == ALL ? (int)((t + j) % E)
                                     : allowed[j];
            b->ids[t * k + j] = e;
            b->w[t * k + j] = c->dyadic
                                  ? (float)(1 + mix(seed + 3, t * k + j) % 8) / 8
                                  : (float)(0.05 + 0.9 * (uniform(seed + 3, t * k + j) + 1) / 2);
        }
        (void)perm;
    }
    /* the capacity keeps the first tokens of each expert in global order */
    size_t cap = c->capacity > 0 ? (size_t)ceil(c->capacity * (double)n * k / E) : 0;
    for (size_t t = 0; t < n; t++)
        for (int j = 0; j < k; j++) {
            int e = b->ids[t * k + j];
            if (cap && b->routed[e] >= cap) {
                b->drop[t * k + j] = 1;
                b->dropped[e]++;
            }
            b->routed[e]++;
        }
}

static void unmake(batch_t *b)
{
    free(b->ids);
    free(b->x);
    free(b->g);
    free(b->w);
    free(b->drop);
    free(b->routed);
    free(b->dropped);
}

/* The owner of global token t. */
static int owner(size_t n, size_t t)
{
    int r = 0;
    while (r + 1 < esize && slice_start(n, r + 1, esize) <= t)
        r++;
    return r;
}

static void run_case(mesh_comm_h world, const cas_t *c, uint64_t seed)
{
    int E = c->E, k = c->k;
    size_t n = c->tokens;
    batch_t b;
    make(c, &b, seed);
    mesh_ep_params_t p = {.field_mask = MESH_EP_PARAM_FIELD_EXPERTS | MESH_EP_PARAM_FIELD_TOPK |
                                        MESH_EP_PARAM_FIELD_CAPACITY | MESH_EP_PARAM_FIELD_PATH,
                          .experts = E,
                          .topk = k,
                          .capacity_factor = c->capacity,
                          .path = path_param};
    mesh_ep_h ep = NULL;
    mesh_ep_layout_h l = NULL;
    ok(mesh_ep_create(world, &p, &ep), c->name);
    if (ep == NULL)
        goto out;
    ok(mesh_ep_layout_create(ep, b.count, b.ids + b.start * k, &l), c->name);
    if (l == NULL)
        goto out;
    if (path_param != MESH_EP_PATH_AUTO)
        CHECK(mesh_ep_layout_path(l) == path_param, "%s: path %d, forced %d", c->name,
              (int)mesh_ep_layout_path(l), (int)path_param);
    int first, L;
    mesh_ep_local_experts(ep, &first, &L);
    CHECK(first == erank * (E / esize) && L == E / esize, "%s: local experts %d+%d", c->name, first,
          L);

    /* the expected expert rows: local expert, then global token order, kept choices only */
    size_t want = 0;
    for (size_t t = 0; t < n; t++)
        for (int j = 0; j < k; j++)
            want += b.ids[t * k + j] / L == erank && !b.drop[t * k + j];
    size_t nrecv = mesh_ep_layout_recv_rows(l);
    CHECK(nrecv == want, "%s: %zu expert rows, want %zu", c->name, nrecv, want);
    if (nrecv != want)
        goto out;
    mesh_ep_source_t *src = malloc((nrecv + 1) * sizeof(*src));
    size_t *rows = malloc((size_t)L * sizeof(size_t));
    float *ex = malloc((nrecv + 1) * H * sizeof(float));
    ok(mesh_ep_layout_sources(l, src), "sources");
    ok(mesh_ep_layout_expert_rows(l, rows), "expert_rows");
    ok(mesh_ep_dispatch(l, b.x + b.start * H, ex, H, MESH_FP32), "dispatch");
    size_t i = 0, bad = 0;
    for (int x = 0; x < L; x++) {
        size_t before = i;
        for (size_t t = 0; t < n; t++)
            for (int j = 0; j < k; j++) {
                if (b.ids[t * k + j] != first + x || b.drop[t * k + j])
                    continue;
                int r = owner(n, t);
                size_t lt = t - slice_start(n, r, esize);
                if (src[i].rank != r || src[i].token != (int64_t)lt || src[i].slot != j ||
                    memcmp(ex + i * H, b.x + t * H, H * sizeof(float)))
                    if (bad++ == 0)
                        CHECK(0, "%s: expert row %zu: source %d/%lld/%d, want %d/%zu/%d%s", c->name,
                              i, src[i].rank, (long long)src[i].token, src[i].slot, r, lt, j,
                              memcmp(ex + i * H, b.x + t * H, H * 4) ? ", row differs" : "");
                i++;
            }
        CHECK(rows[x] == i - before, "%s: expert %d has %zu rows, want %zu", c->name, first + x,
              rows[x], i - before);
    }

    /* identity experts: combine, then the backward passes */
    size_t T = b.count;
    float *out = malloc((T + 1) * H * sizeof(float));
    float *gath = malloc((T * k + 1) * H * sizeof(float));
    float *gin = malloc((T + 1) * H * sizeof(float));
    float *gex = malloc((nrecv + 1) * H * sizeof(float));
    float *gw = malloc((T * k + 1) * sizeof(float));
    const float *xs = b.x + b.start * H, *gs = b.g + b.start * H, *ws = b.w + b.start * k;
    const uint8_t *ds = b.drop + b.start * k;
    ok(mesh_ep_combine(l, ex, ws, out, gath, H, MESH_FP32), "combine");
    ok(mesh_ep_dispatch_backward(l, ex, gin, H, MESH_FP32), "dispatch_backward");
    ok(mesh_ep_combine_backward(l, gs, ws, gath, gex, gw, H, MESH_FP32), "combine_backward");
    size_t bc = 0, bd = 0, bg = 0, bw = 0;
    for (size_t t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            double s = 0, u = 0, wsum = 0;
            for (int j = 0; j < k; j++)
                if (!ds[t * k + j]) {
                    s += (double)ws[t * k + j] * xs[t * H + h];
                    u += xs[t * H + h];
                    wsum += ws[t * k + j];
                }
            bc += out[t * H + h] != (float)s;
            if (c->dyadic)
                bc += out[t * H + h] != (float)(wsum * xs[t * H + h]);
            bd += gin[t * H + h] != (float)u;
            for (int j = 0; j < k; j++)
                bg += gath[(t * k + j) * H + h] != (ds[t * k + j] ? 0.0f : xs[t * H + h]);
        }
    for (size_t t = 0; t < T; t++)
        for (int j = 0; j < k; j++) {
            double d = 0;
            for (int h = 0; h < H && !ds[t * k + j]; h++)
                d += (double)gs[t * H + h] * xs[t * H + h];
            bw += gw[t * k + j] != (float)d;
        }
    CHECK(bc == 0, "%s: combine differs in %zu values", c->name, bc);
    CHECK(bd == 0, "%s: dispatch_backward differs in %zu values", c->name, bd);
    CHECK(bg == 0, "%s: combine's gathered rows differ in %zu values", c->name, bg);
    CHECK(bw == 0, "%s: weight gradients differ in %zu values", c->name, bw);
    size_t be = 0;
    for (size_t r = 0; r < nrecv; r++) {
        size_t t = slice_start(n, src[r].rank, esize) + (size_t)src[r].token;
        float w = b.w[t * k + src[r].slot];
        for (int h = 0; h < H; h++)
            be += gex[r * H + h] != (float)((double)w * b.g[t * H + h]);
    }
    CHECK(be == 0, "%s: combine_backward's expert rows differ in %zu values", c->name, be);

    /* bf16 rows travel unchanged; combine rounds its double sum once */
    uint16_t *xb = malloc((T + 1) * H * 2), *eb = malloc((nrecv + 1) * H * 2);
    uint16_t *ob = malloc((T + 1) * H * 2);
    for (size_t q = 0; q < T * H; q++)
        xb[q] = to_bf16(xs[q]);
    ok(mesh_ep_dispatch(l, xb, eb, H, MESH_BF16), "dispatch bf16");
    ok(mesh_ep_combine(l, eb, ws, ob, NULL, H, MESH_BF16), "combine bf16");
    size_t bb = 0;
    for (size_t r = 0; r < nrecv; r++) {
        size_t t = slice_start(n, src[r].rank, esize) + (size_t)src[r].token;
        for (int h = 0; h < H; h++)
            bb += eb[r * H + h] != to_bf16(b.x[t * H + h]);
    }
    for (size_t t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            double s = 0;
            for (int j = 0; j < k; j++)
                if (!ds[t * k + j])
                    s += (double)ws[t * k + j] * from_bf16(xb[t * H + h]);
            bb += ob[t * H + h] != to_bf16((float)s);
        }
    CHECK(bb == 0, "%s: bf16 dispatch/combine differ in %zu values", c->name, bb);

    /* drops and statistics: the reference, and the same batch on one rank */
    uint8_t *dm = malloc(T * k + 1);
    uint64_t *rt = malloc((size_t)L * 8), *dr = malloc((size_t)L * 8);
    ok(mesh_ep_layout_dropped(l, dm), "dropped");
    ok(mesh_ep_layout_stats(l, rt, dr), "stats");
    CHECK(T == 0 || !memcmp(dm, ds, T * k), "%s: dropped choices differ from the reference",
          c->name);
    for (int x = 0; x < L; x++)
        CHECK(rt[x] == b.routed[first + x] && dr[x] == b.dropped[first + x],
              "%s: expert %d routed %llu dropped %llu, want %llu %llu", c->name, first + x,
              (unsigned long long)rt[x], (unsigned long long)dr[x],
              (unsigned long long)b.routed[first + x], (unsigned long long)b.dropped[first + x]);
    size_t ndrop = 0;
    for (size_t q = 0; q < n * k; q++)
        ndrop += b.drop[q];
    if (c->capacity > 0)
        CHECK(ndrop > 0, "%s: the capacity drops nothing, the case proves nothing", c->name);

    mesh_comm_h self = NULL;
    ok(mesh_comm_split(world, erank, 0, &self), "split"); /* world: the ep group here */
    mesh_ep_h ep1 = NULL;
    mesh_ep_layout_h l1 = NULL;
    if (self && mesh_ep_create(self, &p, &ep1) == MESH_OK &&
        mesh_ep_layout_create(ep1, n, b.ids, &l1) == MESH_OK) {
        uint8_t *d1 = malloc(n * k + 1);
        ok(mesh_ep_layout_dropped(l1, d1), "dropped 1 rank");
        CHECK(T == 0 || !memcmp(d1 + b.start * k, dm, T * k),
              "%s: dropped choices differ from the 1-rank layout", c->name);
        CHECK(mesh_ep_layout_capacity(l1) == mesh_ep_layout_capacity(l),
              "%s: capacity %zu on 1 rank, %zu on %d", c->name, mesh_ep_layout_capacity(l1),
              mesh_ep_layout_capacity(l), esize);
        free(d1);
    } else {
        CHECK(0, "%s: 1-rank layout: %s", c->name, mesh_comm_last_error(NULL));
    }
    mesh_ep_layout_destroy(l1);
    mesh_ep_destroy(ep1);
    if (self)
        mesh_comm_destroy(self);
    free(dm), free(rt), free(dr), free(xb), free(eb), free(ob);
    free(out), free(gath), free(gin), free(gex), free(gw), free(src), free(rows), free(ex);
out:
    mesh_ep_layout_destroy(l);
    mesh_ep_destroy(ep);
    unmake(&b);
}

/* Bytes this rank sent through the transports that reach ranks of other nodes. */
static uint64_t cross_bytes(mesh_comm_h comm)
{
    const char *names[8];
    int nn = 0, me = mesh_comm_node(comm, mesh_comm_rank(comm));
    for (int p = 0; p < mesh_comm_size(comm); p++) {
        const char *t = mesh_comm_peer_transport(comm, p);
        int i = 0;
        while (i < nn && strcmp(names[i], t))
            i++;
        if (mesh_comm_node(comm, p) != me && i == nn && nn < 8)
            names[nn++] = t;
    }
    uint64_t sum = 0, sent;
    for (int i = 0; i < nn; i++)
        if (mesh_comm_tl_bytes(comm, names[i], &sent, NULL) == MESH_OK)
            sum += sent;
    return sum;
}

/* The automatic path weighs the rows it saves between nodes by the link ratio: a routing whose
 * every choice lies on the next node (forwarders pass on half of them) goes hierarchical at
 * ratio 10 (above) and flat at ratio 0.5 (it saves 2L - 1 of 2L rows per token, forwarders
 * pass on 2L - 2 on nodes of L ranks; hierarchical still when L = 1); with the ratio measured,
 * every rank takes the same path. */
static void auto_choice(mesh_comm_h comm, const int32_t *ids, int T, int E, int k)
{
    for (int v = 0; v < 2; v++) {
        mesh_ep_params_t p = {.field_mask = MESH_EP_PARAM_FIELD_EXPERTS | MESH_EP_PARAM_FIELD_TOPK,
                              .experts = E,
                              .topk = k,
                              .link_ratio = 0.5};
        p.field_mask |= v == 0 ? MESH_EP_PARAM_FIELD_LINK_RATIO : 0;
        mesh_ep_h ep = NULL;
        mesh_ep_layout_h l = NULL;
        ok(mesh_ep_create(comm, &p, &ep), "auto: create");
        if (ep)
            ok(mesh_ep_layout_create(ep, (size_t)T, ids, &l), "auto: layout");
        int path[2] = {l ? (int)mesh_ep_layout_path(l) : -1, 0};
        path[1] = -path[0];
        mesh_allreduce(comm, path, path, 2, MESH_INT32, MESH_MAX, NULL, NULL);
        /* the ratio in use: the one given, or one measured alike on every rank */
        double r[2] = {ep ? mesh_ep_link_ratio(ep) : -1, 0};
        r[1] = -r[0];
        mesh_allreduce(comm, r, r, 2, MESH_FP64, MESH_MAX, NULL, NULL);
        CHECK(r[0] == -r[1] && (v == 0 ? r[0] == 0.5 : r[0] > 0),
              "auto: link ratio %g..%g on the ranks, want %s", -r[1], r[0],
              v == 0 ? "0.5" : "one measured value");
        int want = k >= 4 ? MESH_EP_PATH_FLAT : MESH_EP_PATH_HIER;
        if (v == 0)
            CHECK(path[0] == want && path[1] == -want, "auto: link ratio 0.5: path %d..%d, want %d",
                  -path[1], path[0], want);
        else
            CHECK(path[0] == -path[1] && path[0] > 0,
                  "auto: measured ratio: ranks took paths "
                  "%d..%d",
                  -path[1], path[0]);
        mesh_ep_layout_destroy(l);
        mesh_ep_destroy(ep);
    }
    mesh_ep_params_t bad = {.field_mask = MESH_EP_PARAM_FIELD_EXPERTS | MESH_EP_PARAM_FIELD_TOPK |
                                          MESH_EP_PARAM_FIELD_LINK_RATIO,
                            .experts = E,
                            .topk = k,
                            .link_ratio = -1};
    mesh_ep_h ep = NULL;
    CHECK(mesh_ep_create(comm, &bad, &ep) == MESH_ERR_INVALID_ARG && ep == NULL &&
              strstr(mesh_comm_last_error(NULL), "link_ratio=-1") != NULL,
          "auto: link_ratio -1 accepted or unclear: %s", mesh_comm_last_error(NULL));
}

/* Tokens that choose every expert of the next node, in a rotating order: the hierarchical path
 * sends each token's row across once and brings back one summed row, and gives the flat
 * path's bits in all four moves; the automatic choice takes it. */
static void fewer_bytes(mesh_comm_h comm)
{
    int N = mesh_comm_node_count(comm), k = 1 << 30, E = 2 * esize;
    if (N < 2)
        return;
    for (int b = 0; b < N; b++)
        k = 2 * mesh_comm_local_size(comm, b) < k ? 2 * mesh_comm_local_size(comm, b) : k;
    int ranks[64],
        nb = mesh_comm_node_ranks(comm, (mesh_comm_node(comm, erank) + 1) % N, ranks, 64);
    enum { T = 40 };
    int32_t ids[T * 16];
    float x[T * H], w[T * 16], *res[3][4];
    if (k > 16 || nb > 64)
        return;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < k; j++) {
            int c = (t + j) % k; /* the c-th expert of that node */
            ids[t * k + j] = 2 * ranks[c / 2] + c % 2;
            w[t * k + j] = 0.05f + 0.9f * (uniform(77 + erank, (uint64_t)(t * k + j)) + 1) / 2;
        }
    for (int i = 0; i < T * H; i++)
        x[i] = uniform(99 + erank, (uint64_t)i);
    uint64_t bytes[3][2] = {{0}};
    const mesh_ep_path_t paths[3] = {MESH_EP_PATH_FLAT, MESH_EP_PATH_HIER, MESH_EP_PATH_AUTO};
    for (int v = 0; v < 3; v++) {
        /* the automatic path with links between nodes ten times slower than inside */
        mesh_ep_params_t p = {.field_mask = MESH_EP_PARAM_FIELD_EXPERTS | MESH_EP_PARAM_FIELD_TOPK |
                                            MESH_EP_PARAM_FIELD_PATH |
                                            MESH_EP_PARAM_FIELD_LINK_RATIO,
                              .experts = E,
                              .topk = k,
                              .path = paths[v],
                              .link_ratio = 10};
        mesh_ep_h ep = NULL;
        mesh_ep_layout_h l = NULL;
        size_t nrecv = 0;
        for (int m = 0; m < 4; m++)
            res[v][m] = calloc((size_t)T * k * esize * H + 1, sizeof(float)); /* >= rows */
        ok(mesh_ep_create(comm, &p, &ep), "bytes: create");
        if (ep)
            ok(mesh_ep_layout_create(ep, T, ids, &l), "bytes: layout");
        if (l == NULL) {
            mesh_ep_destroy(ep);
            continue;
        }
        CHECK(mesh_ep_layout_path(l) == (v ? MESH_EP_PATH_HIER : MESH_EP_PATH_FLAT),
              "bytes: path %d took %d", (int)paths[v], (int)mesh_ep_layout_path(l));
        nrecv = mesh_ep_layout_recv_rows(l);
        float *ex = malloc((nrecv + 1) * H * sizeof(float));
        uint64_t b0 = cross_bytes(comm);
        ok(mesh_ep_dispatch(l, x, ex, H, MESH_FP32), "bytes: dispatch");
        uint64_t b1 = cross_bytes(comm);
        ok(mesh_ep_combine(l, ex, w, res[v][0], NULL, H, MESH_FP32), "bytes: combine");
        bytes[v][0] = b1 - b0;
        bytes[v][1] = cross_bytes(comm) - b1;
        memcpy(res[v][1], ex, nrecv * H * sizeof(float));
        ok(mesh_ep_dispatch_backward(l, ex, res[v][2], H, MESH_FP32), "bytes: dispatch_backward");
        ok(mesh_ep_combine_backward(l, x, w, NULL, res[v][3], NULL, H, MESH_FP32),
           "bytes: combine_backward");
        free(ex);
        mesh_ep_layout_destroy(l);
        mesh_ep_destroy(ep);
        size_t len[4] = {T * H, nrecv * H, T * H, nrecv * H};
        for (int m = 0; v && m < 4; m++)
            CHECK(!memcmp(res[v][m], res[0][m], len[m] * sizeof(float)),
                  "bytes: path %s: move %d differs from the flat path", v == 1 ? "hier" : "auto",
                  m);
    }
    mesh_allreduce(comm, bytes, bytes, 6, MESH_UINT64, MESH_SUM, NULL, NULL);
    uint64_t rb = H * sizeof(float), rows = (uint64_t)T * esize;
    CHECK(bytes[0][0] >= rows * k * rb && bytes[1][0] == rows * rb && bytes[2][0] == rows * rb,
          "bytes: dispatch sent %llu across nodes flat, %llu hierarchical, %llu auto; want %llu "
          "for the last two",
          (unsigned long long)bytes[0][0], (unsigned long long)bytes[1][0],
          (unsigned long long)bytes[2][0], (unsigned long long)(rows * rb));
    CHECK(bytes[0][1] >= rows * k * rb && bytes[1][1] == rows * (rb + 4 * k),
          "bytes: combine sent %llu across nodes flat, %llu hierarchical; want %llu for the last",
          (unsigned long long)bytes[0][1], (unsigned long long)bytes[1][1],
          (unsigned long long)(rows * (rb + 4 * k)));
    for (int v = 0; v < 3; v++)
        for (int m = 0; m < 4; m++)
            free(res[v][m]);
    auto_choice(comm, ids, T, E, k);
}

static void refusals(mesh_comm_h world)
{
    mesh_ep_h ep = NULL;
    mesh_ep_params_t p = {.field_mask = MESH_EP_PARAM_FIELD_EXPERTS | MESH_EP_PARAM_FIELD_TOPK,
                          .experts = 4 * esize,
                          .topk = 2};
    mesh_ep_params_t q = p;
    q.topk = q.experts + 1;
    refused(mesh_ep_create(world, &q, &ep), "k > E", "topk=");
    q = p;
    q.field_mask &= ~(uint64_t)MESH_EP_PARAM_FIELD_EXPERTS;
    refused(mesh_ep_create(world, &q, &ep), "no experts", "experts must be set");
    if (esize > 1) {
        q = p;
        q.experts = esize + 1;
        refused(mesh_ep_create(world, &q, &ep), "E % ep", "not a multiple of the ep size");
    }
    q = p;
    q.field_mask |= MESH_EP_PARAM_FIELD_CAPACITY;
    q.capacity_factor = -1;
    refused(mesh_ep_create(world, &q, &ep), "capacity", "capacity_factor=");
    q = p;
    q.field_mask |= MESH_EP_PARAM_FIELD_PATH;
    q.path = (mesh_ep_path_t)7;
    refused(mesh_ep_create(world, &q, &ep), "path", "path=7");
    refused(mesh_ep_create(NULL, &p, &ep), "comm", "comm is NULL");
    CHECK(ep == NULL, "a refused create set its output");
    ok(mesh_ep_create(world, &p, &ep), "create");
    if (ep == NULL)
        return;
    int32_t ids[8] = {0, 1, 2, 3, 1, 0, 3, 2};
    mesh_ep_layout_h l = (mesh_ep_layout_h)(uintptr_t)1;
    /* a bad id on rank 0 fails the layout everywhere */
    if (erank == 0)
        ids[5] = p.experts;
    mesh_status_t st = mesh_ep_layout_create(ep, 4, ids, &l);
    refused(st, "id out of range", erank == 0 ? "expert_ids[5]" : "ep rank 0");
    CHECK(l == (mesh_ep_layout_h)(uintptr_t)1, "a refused layout set its output");
    ids[5] = erank == esize - 1 ? 1 : 0;
    st = mesh_ep_layout_create(ep, 4, ids, &l);
    refused(st, "duplicate id", erank == esize - 1 ? "chooses expert 1 twice" : "ep rank");
    ids[5] = 0;
    refused(mesh_ep_layout_create(ep, 4, NULL, &l), "NULL ids", "expert_ids is NULL");
    l = NULL;
    ok(mesh_ep_layout_create(ep, 4, ids, &l), "layout");
    if (l) {
        float in[4 * H] = {0}, o[4 * H];
        float *ex = malloc((mesh_ep_layout_recv_rows(l) + 1) * H * sizeof(float));
        float w[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        refused(mesh_ep_dispatch(l, NULL, ex, H, MESH_FP32), "NULL in", "in is NULL");
        if (mesh_ep_layout_recv_rows(l))
            refused(mesh_ep_dispatch(l, in, NULL, H, MESH_FP32), "NULL out", "out is NULL");
        refused(mesh_ep_dispatch(l, in, ex, 0, MESH_FP32), "hidden 0", "hidden is 0");
        refused(mesh_ep_dispatch(l, in, ex, H, MESH_INT32), "dtype", "dtype int32");
        refused(mesh_ep_dispatch(l, in, ex, SIZE_MAX / 2, MESH_FP32), "huge", "too large");
        refused(mesh_ep_combine(l, ex, NULL, o, NULL, H, MESH_FP32), "NULL weights",
                "weights is NULL");
        refused(mesh_ep_combine_backward(l, in, w, NULL, ex, w, H, MESH_FP32), "no gathered",
                "gathered is NULL");
        refused(mesh_ep_dispatch(NULL, in, ex, H, MESH_FP32), "NULL layout", "layout is NULL");
        /* still usable after the refusals */
        ok(mesh_ep_dispatch(l, in, ex, H, MESH_FP32), "dispatch after refusals");
        ok(mesh_ep_combine(l, ex, w, o, NULL, H, MESH_FP32), "combine after refusals");
        free(ex);
    }
    mesh_ep_layout_destroy(l);
    mesh_ep_destroy(ep);
}

int main(int argc, char **argv)
{
    int epn = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ep") && i + 1 < argc) {
            epn = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--path") && i + 1 < argc) {
            const char *v = argv[++i];
            path_param = !strcmp(v, "flat")   ? MESH_EP_PATH_FLAT
                         : !strcmp(v, "hier") ? MESH_EP_PATH_HIER
                                              : MESH_EP_PATH_AUTO;
        } else {
            fprintf(stderr, "usage: ep_test [--ep N] [--path auto|flat|hier]\n"
                            "  (default: the world is the ep group, the automatic path)\n");
            return 2;
        }
    }
    mesh_comm_h world;
    if (mesh_comm_init_env(&world) != MESH_OK) {
        fprintf(stderr, "init: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    wrank = mesh_comm_rank(world);
    int wsize = mesh_comm_size(world), group = 0;
    mesh_comm_h epc = world;
    mesh_grid_h grid = NULL;
    if (epn > 0 && epn != wsize) {
        /* ep groups of an ep x dp grid side by side, each with its own batch */
        mesh_grid_params_t gp = {.field_mask = MESH_GRID_PARAM_FIELD_SIZES,
                                 .size = {[MESH_AXIS_EP] = epn, [MESH_AXIS_DP] = wsize / epn}};
        if (wsize % epn || mesh_grid_create(world, &gp, &grid) != MESH_OK ||
            mesh_grid_comm(grid, "ep", &epc) != MESH_OK) {
            fprintf(stderr, "[rank %d] grid ep=%d of %d ranks: %s\n", wrank, epn, wsize,
                    mesh_comm_last_error(NULL));
            return 1;
        }
        group = mesh_grid_coord(grid, "edp");
    }
    erank = mesh_comm_rank(epc);
    esize = mesh_comm_size(epc);
    /* E a multiple of every ep size tested (1, 2, 4; 3 and 5 scale it) */
    int m = 4 % esize == 0 ? 1 : esize;
    const cas_t cases[] = {
        {"random E=4 k=2", 4 * m, 2, RANDOM, 61, 0},
        {"random E=8 k=3", 8 * m, 3, RANDOM, 50, 0},
        {"one expert k=1", 4 * m, 1, SAME, 40, 0},
        {"same two k=2", 4 * m, 2, SAME, 33, 0},
        {"k=E=4", 4 * m, 4 * m, ALL, 29, 0},
        {"few tokens", 4 * m, 2, RANDOM, 3, 0},
        {"capacity 1.0", 4 * m, 2, RANDOM, 61, 1.0},
        {"capacity 0.5 E=8", 8 * m, 2, RANDOM, 64, 0.5},
        {"capacity one expert", 4 * m, 1, SAME, 40, 1.0},
        {"capacity k=E", 4 * m, 4 * m, ALL, 29, 0.6},
        {"dyadic random k=2", 4 * m, 2, RANDOM, 45, 0, 1},
        {"dyadic k=E", 4 * m, 4 * m, ALL, 21, 0, 1},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
        run_case(epc, &cases[c], 100 + c + 1000 * (uint64_t)group);
    refusals(epc);
    fewer_bytes(epc);
    int64_t f = failures;
    mesh_allreduce(world, &f, &f, 1, MESH_INT64, MESH_SUM, NULL, NULL);
    if (wrank == 0)
        printf("ep_test ranks=%d ep=%d: %lld failures\n", wsize, esize, (long long)f);
    mesh_grid_destroy(grid);
    mesh_comm_destroy(world);
    return f ? 1 : 0;
}
