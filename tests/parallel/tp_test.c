/*
 * Tensor and sequence parallelism against the unsplit math, under meshrun: every rank builds the
 * full tensors from one seed, computes the single-process reference in double, runs its shard
 * through mesh_tp_* and compares its part of every output and gradient.
 *   tp_test --tp N [--sp]     (world size / N data-parallel copies run side by side)
 * Covered: shard arithmetic and its refusals, f/g and the sequence all-gather/reduce-scatter
 * through a column-parallel then row-parallel pair (forward, input and weight gradients), the
 * heads of a fused qkv weight, bf16 through the conjugates, replicated-parameter gradients,
 * the vocabulary-parallel embedding and cross-entropy.
 */
#include "mesh.h"
#include "mesh/tensor.h"
#include "tests/harness/mp_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* divisible by tp = 1, 2, 3, 4 */
enum { B = 2, T = 12, C = 24, HID = 48, V = 96, HEADS = 12, HD = C / HEADS };

static int wrank, failures;
#define CHECK(cond, ...) MESH_MP_CHECK(wrank, failures, cond, __VA_ARGS__)

static float uniform(uint64_t seed, uint64_t i)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + i + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *rnd(uint64_t seed, size_t n)
{
    float *a = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        a[i] = uniform(seed, i);
    return a;
}

/* out[n][m] = sum_k a[n][k] * b(m, k), where b(m, k) = b[m * ldb_m + k * ldb_k]; double sums */
static void mm(const float *a, size_t n, size_t k, const float *b, size_t ldb_m, size_t ldb_k,
               size_t m, float *out)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m; j++) {
            double s = 0;
            for (size_t x = 0; x < k; x++)
                s += (double)a[i * k + x] * b[j * ldb_m + x * ldb_k];
            out[i * m + j] = (float)s;
        }
}

static void transpose(const float *a, size_t rows, size_t cols, float *out)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++)
            out[j * rows + i] = a[i * cols + j];
}

/* columns [c0, c0 + cn) of a [rows, cols] matrix */
static float *cols_of(const float *a, size_t rows, size_t cols, size_t c0, size_t cn)
{
    float *o = malloc(rows * cn * sizeof(float) + 1);
    for (size_t i = 0; i < rows; i++)
        memcpy(o + i * cn, a + i * cols + c0, cn * sizeof(float));
    return o;
}

/* the positions [s0, s0 + sn) of every sample of a [B, T, w] tensor */
static float *seq_of(const float *a, size_t w, size_t s0, size_t sn)
{
    float *o = malloc(B * sn * w * sizeof(float));
    for (size_t b = 0; b < B; b++)
        memcpy(o + b * sn * w, a + (b * T + s0) * w, sn * w * sizeof(float));
    return o;
}

static void near(const char *what, const float *got, const float *want, size_t n, double tol)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol * (1.0 + fabs((double)want[i]))))
            if (bad++ == 0)
                first = i;
    CHECK(bad == 0, "%s: %zu of %zu differ, first [%zu] %.9g want %.9g", what, bad, n, first,
          bad ? got[first] : 0.0, bad ? want[first] : 0.0);
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

static void shard_arithmetic(mesh_tp_h tp, int n)
{
    mesh_tp_range_t r = {7, 7};
    refused(mesh_tp_split(97, 4, 1, "vocab", &r), "split 97/4", "vocab=97 does not split evenly");
    CHECK(r.start == 7 && r.count == 7, "a refused split changed its output");
    refused(mesh_tp_split(8, 4, 4, "vocab", &r), "part 4 of 4", "not a part");
    ok(mesh_tp_split(96, 4, 3, "vocab", &r), "split 96/4");
    CHECK(r.start == 72 && r.count == 24, "96/4 part 3: %zu+%zu", r.start, r.count);
    mesh_tp_range_t h, c;
    ok(mesh_tp_heads(tp, HEADS, HD, &h, &c), "heads");
    CHECK(h.count == (size_t)(HEADS / n) && h.start == h.count * mesh_tp_rank(tp) &&
              c.start == h.start * HD && c.count == h.count * HD,
          "heads %zu+%zu columns %zu+%zu", h.start, h.count, c.start, c.count);
    if (n > 1)
        refused(mesh_tp_heads(tp, n + 1, HD, &h, &c), "heads n+1", "heads=");
    if (n > 1)
        refused(mesh_tp_shard(tp, (size_t)V + 1, "vocab", &r), "vocab+1", "across tp=");
    refused(mesh_tp_copy_backward(NULL, &r, &r, 1, MESH_FP32), "NULL tp", "tp is NULL");
}

/* A column-parallel layer (w1, output features split) then a row-parallel one (w2, input
 * features split), through the tp region's two ends in both directions. */
static void column_row(mesh_tp_h tp, int sp)
{
    int n = mesh_tp_size(tp), r = mesh_tp_rank(tp);
    const size_t BT = B * T;
    float *x = rnd(1, BT * C), *w1 = rnd(2, HID * C), *w2 = rnd(3, C * HID), *dy = rnd(4, BT * C);
    float *h = malloc(BT * HID * 4), *y = malloc(BT * C * 4), *dh = malloc(BT * HID * 4);
    float *dx = malloc(BT * C * 4), *dw1 = malloc(HID * C * 4), *dw2 = malloc(C * HID * 4);
    float *t1 = malloc(BT * HID * 4), *t2 = malloc(BT * C * 4);
    mm(x, BT, C, w1, C, 1, HID, h);   /* h = x w1^T */
    mm(h, BT, HID, w2, HID, 1, C, y); /* y = h w2^T */
    mm(dy, BT, C, w2, 1, HID, HID, dh);
    mm(dh, BT, HID, w1, 1, C, C, dx);
    transpose(dy, BT, C, t2);
    mm(t2, C, BT, h, 1, HID, HID, dw2); /* dw2 = dy^T h */
    transpose(dh, BT, HID, t1);
    mm(t1, HID, BT, x, 1, C, C, dw1); /* dw1 = dh^T x */

    mesh_tp_range_t hs, ss;
    ok(mesh_tp_shard(tp, HID, "hidden", &hs), "shard hidden");
    ok(mesh_tp_seq_shard(tp, T, &ss), "seq shard");
    CHECK(ss.count == (sp ? T / (size_t)n : T), "seq shard %zu", ss.count);
    size_t hl = hs.count, rows_out = B * ss.count;
    float *w1l = malloc(hl * C * 4), *w2l = cols_of(w2, C, HID, hs.start, hl);
    memcpy(w1l, w1 + hs.start * C, hl * C * 4);
    float *xo = seq_of(x, C, ss.start, ss.count), *xi = malloc(BT * C * 4);
    float *hl_ = malloc(BT * hl * 4), *yp = malloc(BT * C * 4), *yo = malloc(rows_out * C * 4);

    ok(mesh_tp_enter_forward(tp, xo, xi, B, T, C, MESH_FP32), "enter forward");
    near("enter forward", xi, x, BT * C, 0);
    mm(xi, BT, C, w1l, C, 1, hl, hl_);
    float *hwant = cols_of(h, BT, HID, hs.start, hl);
    near("column-parallel output", hl_, hwant, BT * hl, 1e-6);
    mm(hl_, BT, hl, w2l, hl, 1, C, yp);
    ok(mesh_tp_exit_forward(tp, yp, yo, B, T, C, MESH_FP32), "exit forward");
    float *ywant = seq_of(y, C, ss.start, ss.count);
    near("row-parallel output", yo, ywant, rows_out * C, 1e-5);

    float *dyo = seq_of(dy, C, ss.start, ss.count), *dyi = malloc(BT * C * 4);
    ok(mesh_tp_exit_backward(tp, dyo, dyi, B, T, C, MESH_FP32), "exit backward");
    near("exit backward", dyi, dy, BT * C, 0);
    float *dhl = malloc(BT * hl * 4), *dxi = malloc(BT * C * 4), *dxo = malloc(rows_out * C * 4);
    mm(dyi, BT, C, w2l, 1, hl, hl, dhl);
    float *dhwant = cols_of(dh, BT, HID, hs.start, hl);
    near("row-parallel input gradient", dhl, dhwant, BT * hl, 1e-6);
    mm(dhl, BT, hl, w1l, 1, C, C, dxi);
    ok(mesh_tp_enter_backward(tp, dxi, dxo, B, T, C, MESH_FP32), "enter backward");
    float *dxwant = seq_of(dx, C, ss.start, ss.count);
    near("column-parallel input gradient", dxo, dxwant, rows_out * C, 1e-5);
    /* weight gradients: dw2 columns and dw1 rows of this rank */
    float *dw2l = malloc(C * hl * 4), *dw1l = malloc(hl * C * 4);
    transpose(dyi, BT, C, t2);
    mm(t2, C, BT, hl_, 1, hl, hl, dw2l);
    float *dw2want = cols_of(dw2, C, HID, hs.start, hl);
    near("row-parallel weight gradient", dw2l, dw2want, C * hl, 1e-5);
    transpose(dhl, BT, hl, t1);
    mm(t1, hl, BT, xi, 1, C, C, dw1l);
    near("column-parallel weight gradient", dw1l, dw1 + hs.start * C, hl * C, 1e-5);

    /* the explicit operators agree with the region ends of this mode */
    float *again = malloc(BT * C * 4);
    if (sp) {
        ok(mesh_tp_sp_gather_forward(tp, xo, again, B, T, C, MESH_FP32), "sp gather");
        near("sp gather", again, x, BT * C, 0);
        ok(mesh_tp_sp_scatter_forward(tp, yp, again, B, T, C, MESH_FP32), "sp scatter");
        near("sp scatter", again, ywant, rows_out * C, 1e-5);
        if (n > 1)
            refused(mesh_tp_sp_gather_forward(tp, xo, xo, B, T, C, MESH_FP32), "aliased gather",
                    "same buffer");
        if (n > 1)
            refused(mesh_tp_sp_gather_forward(tp, xo, again, B, (size_t)n * 3 + 1, C, MESH_FP32),
                    "uneven seq", "seq=");
    } else {
        memcpy(again, yp, BT * C * 4);
        ok(mesh_tp_reduce_forward(tp, again, again, BT * C, MESH_FP32), "reduce in place");
        near("g in place", again, y, BT * C, 1e-5);
        memcpy(again, dxi, BT * C * 4);
        ok(mesh_tp_copy_backward(tp, again, again, BT * C, MESH_FP32), "copy backward in place");
        near("f backward in place", again, dx, BT * C, 1e-5);
    }
    (void)r;
    free(x), free(w1), free(w2), free(dy), free(h), free(y), free(dh), free(dx), free(dw1);
    free(dw2), free(t1), free(t2), free(w1l), free(w2l), free(xo), free(xi), free(hl_), free(yp);
    free(yo), free(hwant), free(ywant), free(dyo), free(dyi), free(dhl), free(dxi), free(dxo);
    free(dhwant), free(dxwant), free(dw2l), free(dw1l), free(dw2want), free(again);
}

/* The heads of a fused [3C, C] qkv weight: this rank's rows of q, k and v give the columns of
 * its heads in each. */
static void heads(mesh_tp_h tp)
{
    const size_t BT = B * T;
    float *x = rnd(5, BT * C), *w = rnd(6, 3 * C * C), *qkv = malloc(BT * 3 * C * 4);
    mm(x, BT, C, w, C, 1, 3 * C, qkv);
    mesh_tp_range_t hr, cr;
    ok(mesh_tp_heads(tp, HEADS, HD, &hr, &cr), "heads");
    size_t cl = cr.count;
    float *wl = malloc(3 * cl * C * 4), *ql = malloc(BT * 3 * cl * 4);
    for (int part = 0; part < 3; part++)
        memcpy(wl + part * cl * C, w + (part * C + cr.start) * C, cl * C * 4);
    mm(x, BT, C, wl, C, 1, 3 * cl, ql);
    for (int part = 0; part < 3; part++) {
        float *want = malloc(BT * cl * 4), *got = malloc(BT * cl * 4);
        for (size_t i = 0; i < BT; i++) {
            memcpy(want + i * cl, qkv + i * 3 * C + part * C + cr.start, cl * 4);
            memcpy(got + i * cl, ql + i * 3 * cl + part * cl, cl * 4);
        }
        near(part == 0   ? "q of local heads"
             : part == 1 ? "k of local heads"
                         : "v of local heads",
             got, want, BT * cl, 1e-6);
        free(want), free(got);
    }
    free(x), free(w), free(qkv), free(wl), free(ql);
}

static uint16_t bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact for the small integers used here */
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* bf16 through the region exit and the replicated-gradient sum, on integers bf16 holds exactly */
static void bf16_and_replicated(mesh_tp_h tp, int sp)
{
    int n = mesh_tp_size(tp), r = mesh_tp_rank(tp);
    mesh_tp_range_t ss;
    ok(mesh_tp_seq_shard(tp, T, &ss), "seq shard");
    const size_t W = 8, full = B * T * W, out = B * ss.count * W;
    uint16_t *in = malloc(full * 2), *o = malloc(full * 2);
    for (size_t i = 0; i < full; i++)
        in[i] = bf16((float)((i % 7) * (r + 1)));
    ok(mesh_tp_exit_forward(tp, in, o, B, T, W, MESH_BF16), "bf16 exit");
    size_t bad = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < ss.count; t++)
            for (size_t c = 0; c < W; c++) {
                size_t gi = (b * T + ss.start + t) * W + c;
                float want = (float)((gi % 7) * (size_t)(n * (n + 1) / 2));
                bad += from_bf16(o[(b * ss.count + t) * W + c]) != want;
            }
    CHECK(bad == 0, "bf16 exit: %zu of %zu wrong", bad, out);
    float g[5];
    for (int i = 0; i < 5; i++)
        g[i] = (float)(r + 1 + i);
    ok(mesh_tp_replicated_grad(tp, g, 5, MESH_FP32), "replicated grad");
    for (int i = 0; i < 5; i++) {
        float want = sp ? (float)(n * (n + 1) / 2 + n * i) : (float)(r + 1 + i);
        CHECK(g[i] == want, "replicated grad [%d] %g want %g", i, g[i], want);
    }
    free(in), free(o);
}

static void embedding(mesh_tp_h tp)
{
    const size_t BT = B * T;
    int32_t tok[B * T];
    for (size_t i = 0; i < BT; i++)
        tok[i] = (int32_t)((uniform(7, i) + 1.0f) * 0.5f * V) % V;
    tok[3] = V - 1, tok[4] = 0;
    float *w = rnd(8, V * C), *x = malloc(BT * C * 4), *dout = rnd(9, BT * C);
    float *dw = calloc(V * C, 4);
    for (size_t i = 0; i < BT; i++) {
        memcpy(x + i * C, w + (size_t)tok[i] * C, C * 4);
        for (size_t c = 0; c < C; c++)
            dw[(size_t)tok[i] * C + c] += dout[i * C + c];
    }
    mesh_tp_range_t vr, ss;
    ok(mesh_tp_shard(tp, V, "vocab", &vr), "vocab shard");
    ok(mesh_tp_seq_shard(tp, T, &ss), "seq shard");
    float *got = malloc(BT * C * 4), *want = seq_of(x, C, ss.start, ss.count);
    ok(mesh_tp_embedding_forward(tp, tok, B, T, w + vr.start * C, V, C, got), "embedding");
    near("embedding forward", got, want, B * ss.count * C, 0);
    float *dol = seq_of(dout, C, ss.start, ss.count), *dwl = calloc(vr.count * C, 4);
    ok(mesh_tp_embedding_backward(tp, tok, B, T, dol, V, C, dwl), "embedding backward");
    near("embedding weight gradient", dwl, dw + vr.start * C, vr.count * C, 1e-6);
    tok[5] = V;
    refused(mesh_tp_embedding_forward(tp, tok, B, T, w + vr.start * C, V, C, got),
            "token out of range", "tokens[5]=");
    free(w), free(x), free(dout), free(dw), free(got), free(want), free(dol), free(dwl);
}

static void cross_entropy(mesh_tp_h tp)
{
    const size_t R = B * T;
    float *logits = rnd(10, R * V), *gl = rnd(11, R);
    int32_t tgt[B * T];
    for (size_t i = 0; i < R * V; i++)
        logits[i] *= 6.0f;
    for (size_t i = 0; i < R; i++)
        tgt[i] = (int32_t)((uniform(12, i) + 1.0f) * 0.5f * V) % V;
    float loss_ref[B * T], lse_ref[B * T], *dref = malloc(R * V * 4);
    for (size_t i = 0; i < R; i++) {
        double m = -1e30, s = 0;
        for (size_t v = 0; v < V; v++)
            m = fmax(m, logits[i * V + v]);
        for (size_t v = 0; v < V; v++)
            s += exp(logits[i * V + v] - m);
        lse_ref[i] = (float)(m + log(s));
        loss_ref[i] = (float)(m + log(s) - logits[i * V + (size_t)tgt[i]]);
        for (size_t v = 0; v < V; v++)
            dref[i * V + v] =
                (float)((exp(logits[i * V + v] - m) / s - (v == (size_t)tgt[i])) * gl[i]);
    }
    mesh_tp_range_t vr;
    ok(mesh_tp_shard(tp, V, "vocab", &vr), "vocab shard");
    float *ll = cols_of(logits, R, V, vr.start, vr.count), loss[B * T], lse[B * T];
    ok(mesh_tp_cross_entropy_forward(tp, ll, R, V, tgt, loss, lse), "cross-entropy");
    near("cross-entropy loss", loss, loss_ref, R, 1e-5);
    near("cross-entropy logsumexp", lse, lse_ref, R, 1e-6);
    float *dl = malloc(R * vr.count * 4), *dwant = cols_of(dref, R, V, vr.start, vr.count);
    ok(mesh_tp_cross_entropy_backward(tp, ll, R, V, tgt, lse, gl, dl), "cross-entropy backward");
    near("cross-entropy logit gradient", dl, dwant, R * vr.count, 1e-5);
    ok(mesh_tp_cross_entropy_backward(tp, ll, R, V, tgt, lse, gl, ll), "in place");
    near("cross-entropy gradient in place", ll, dwant, R * vr.count, 1e-5);
    tgt[2] = -1;
    refused(mesh_tp_cross_entropy_forward(tp, ll, R, V, tgt, loss, lse), "bad target",
            "targets[2]=-1");
    free(logits), free(gl), free(dref), free(ll), free(dl), free(dwant);
}

int main(int argc, char **argv)
{
    int tpn = 1, sp = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tp") && i + 1 < argc)
            tpn = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sp"))
            sp = 1;
        else {
            fprintf(stderr, "usage: tp_test --tp N [--sp]\n");
            return 2;
        }
    }
    mesh_comm_h world;
    if (mesh_comm_init_env(&world) != MESH_OK) {
        fprintf(stderr, "init: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    wrank = mesh_comm_rank(world);
    int wsize = mesh_comm_size(world);
    mesh_grid_params_t gp = {.field_mask = MESH_GRID_PARAM_FIELD_SIZES,
                             .size = {[MESH_AXIS_TP] = tpn, [MESH_AXIS_DP] = wsize / tpn}};
    mesh_grid_h grid = NULL;
    mesh_comm_h tpc = NULL;
    mesh_tp_h tp = NULL;
    if (tpn < 1 || wsize % tpn || mesh_grid_create(world, &gp, &grid) != MESH_OK ||
        mesh_grid_comm(grid, "tp", &tpc) != MESH_OK) {
        fprintf(stderr, "[rank %d] grid tp=%d of %d ranks: %s\n", wrank, tpn, wsize,
                mesh_comm_last_error(NULL));
        return 1;
    }
    mesh_tp_params_t p = {.field_mask = MESH_TP_PARAM_FIELD_FLAGS,
                          .flags = sp ? MESH_TP_SEQUENCE_PARALLEL : 0};
    ok(mesh_tp_create(tpc, &p, &tp), "create");
    if (tp) {
        CHECK(mesh_tp_size(tp) == tpn && mesh_tp_sequence_parallel(tp) == sp, "tp handle");
        shard_arithmetic(tp, tpn);
        column_row(tp, sp);
        heads(tp);
        bf16_and_replicated(tp, sp);
        embedding(tp);
        cross_entropy(tp);
    }
    /* every rank reports, so a failure on one is seen by all before they leave */
    int64_t f = failures;
    mesh_allreduce(world, &f, &f, 1, MESH_INT64, MESH_SUM, NULL, NULL);
    if (wrank == 0)
        printf("tp_test tp=%d sp=%d ranks=%d: %lld failures\n", tpn, sp, wsize, (long long)f);
    mesh_tp_destroy(tp);
    mesh_grid_destroy(grid);
    mesh_comm_destroy(world);
    return f ? 1 : 0;
}
