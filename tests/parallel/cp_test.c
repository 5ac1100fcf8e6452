/*
 * Context-parallel causal attention against the unsplit math, under meshrun: every rank builds
 * the whole sequence's q, k, v and the upstream gradient from one seed, computes the
 * single-process attention in double, runs its shard through mesh_cp_* and compares its part of
 * out, lse, dq, dk and dv. Values agree when |got - want| <= 1e-5 * max(1, |want|) (absolute
 * below 1, relative above).
 *   cp_test --cp N [--zigzag] [--allgather] [--no-overlap]
 * (world size / N data-parallel copies run side by side, each with its own data.) Covered:
 * the chunks of either sharding for cp 1..8, shard and unshard, refusals naming the argument,
 * forward and backward with separate q, k, v and with views of one fused qkv tensor, twice.
 */
#include "mesh.h"
#include "mesh/context.h"
#include "tests/harness/mp_check.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* T divisible by 2 * cp for cp = 1..4 */
enum { B = 2, T = 48, H = 2, D = 8, C = H * D };
#define TOL 1e-5

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

static float *rnd(uint64_t seed, size_t n, float amp)
{
    float *a = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        a[i] = amp * uniform(seed, i);
    return a;
}

static void near(const char *what, const float *got, const float *want, size_t n)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= TOL * fmax(1.0, fabs((double)want[i]))))
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

/* The global position of local row t of cp rank r, written out independently of the layer. */
static size_t position_in(size_t seq, int n, int r, int zigzag, size_t t)
{
    size_t local = seq / (size_t)n, c = local / 2;
    if (!zigzag)
        return (size_t)r * local + t;
    return t < c ? (size_t)r * c + t : (2 * (size_t)n - 1 - (size_t)r) * c + (t - c);
}

static size_t position(int n, int r, int zigzag, size_t t)
{
    return position_in(T, n, r, zigzag, t);
}

/* The single-process causal attention in double over [B, T, H, D] tensors. */
typedef struct {
    float *q, *k, *v, *dout;         /* inputs */
    float *out, *lse, *dq, *dk, *dv; /* lse [B, H, T] */
} attn_t;

static void reference(attn_t *a)
{
    const double scale = 1.0 / sqrt((double)D);
    double p[T], dp[T];
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < T; i++) {
                const float *qi = a->q + (b * T + i) * C + h * D;
                const float *doi = a->dout + (b * T + i) * C + h * D;
                double m = -INFINITY, z = 0, delta = 0;
                for (size_t j = 0; j <= i; j++) {
                    const float *kj = a->k + (b * T + j) * C + h * D;
                    double s = 0;
                    for (size_t e = 0; e < D; e++)
                        s += (double)qi[e] * kj[e];
                    p[j] = s * scale;
                    m = fmax(m, p[j]);
                }
                for (size_t j = 0; j <= i; j++)
                    z += (p[j] = exp(p[j] - m));
                a->lse[(b * H + h) * T + i] = (float)(m + log(z));
                for (size_t e = 0; e < D; e++) {
                    double o = 0;
                    for (size_t j = 0; j <= i; j++)
                        o += p[j] / z * a->v[(b * T + j) * C + h * D + e];
                    a->out[(b * T + i) * C + h * D + e] = (float)o;
                }
                for (size_t j = 0; j <= i; j++) {
                    p[j] /= z;
                    const float *vj = a->v + (b * T + j) * C + h * D;
                    dp[j] = 0;
                    for (size_t e = 0; e < D; e++)
                        dp[j] += (double)doi[e] * vj[e];
                    delta += p[j] * dp[j];
                }
                for (size_t j = 0; j <= i; j++) {
                    double ds = p[j] * (dp[j] - delta) * scale;
                    const float *kj = a->k + (b * T + j) * C + h * D;
                    for (size_t e = 0; e < D; e++) {
                        a->dq[(b * T + i) * C + h * D + e] += (float)(ds * kj[e]);
                        a->dk[(b * T + j) * C + h * D + e] += (float)(ds * qi[e]);
                        a->dv[(b * T + j) * C + h * D + e] += (float)(p[j] * doi[e]);
                    }
                }
            }
}

/* This rank's rows of a [B, T, C] tensor into [B, T / n, stride] at column offset col. */
static void take(const float *full, int n, int r, int zigzag, float *local, size_t stride,
                 size_t col)
{
    size_t L = T / (size_t)n;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < L; t++)
            memcpy(local + (b * L + t) * stride + col,
                   full + (b * T + position(n, r, zigzag, t)) * C, C * sizeof(float));
}

static void chunks_everywhere(void)
{
    for (int n = 1; n <= 8; n++)
        for (int zz = 0; zz <= 1; zz++) {
            size_t seq = 2 * 3 * 4 * 5 * 7 * 8, seen[2 * 3 * 4 * 5 * 7 * 8] = {0}, bad = 0;
            for (int r = 0; r < n; r++) {
                mesh_cp_range_t ch[2];
                int nc = 0;
                ok(mesh_cp_chunks(seq, n, r, zz, ch, &nc), "chunks");
                CHECK(nc == 1 + zz, "cp=%d zigzag=%d: %d chunks", n, zz, nc);
                for (int c = 0; c < nc && c < 2; c++) {
                    CHECK(ch[c].start == position_in(seq, n, r, zz, c * ch[0].count),
                          "cp=%d rank %d zigzag=%d chunk %d starts at %zu", n, r, zz, c,
                          ch[c].start);
                    for (size_t i = 0; i < ch[c].count && ch[c].start + i < seq; i++)
                        seen[ch[c].start + i]++;
                }
            }
            for (size_t i = 0; i < seq; i++)
                bad += seen[i] != 1;
            CHECK(bad == 0, "cp=%d zigzag=%d: %zu positions not held exactly once", n, zz, bad);
        }
    mesh_cp_range_t ch[2] = {{7, 7}, {7, 7}};
    int nc = 5;
    refused(mesh_cp_chunks(20, 3, 0, 0, ch, &nc), "seq 20 over cp 3", "seq=20 does not split");
    refused(mesh_cp_chunks(12, 4, 1, 1, ch, &nc), "seq 12 over 2*4", "seq=12 does not split");
    CHECK(nc == 5 && ch[0].start == 7, "a refused split changed its output");
    refused(mesh_cp_chunks(12, 2, 2, 0, ch, &nc), "rank 2 of 2", "rank 2 of cp=2");
}

static void sharding(mesh_cp_h cp, int zigzag)
{
    int n = mesh_cp_size(cp), r = mesh_cp_rank(cp);
    size_t L = T / (size_t)n;
    float *full = rnd(7, B * T * C, 1.0f), *want = malloc(B * L * C * 4);
    float *local = malloc(B * L * C * 4), *back = calloc(B * T * C, 4);
    take(full, n, r, zigzag, want, C, 0);
    ok(mesh_cp_shard(cp, full, local, B, T, C, MESH_FP32), "shard");
    near("shard", local, want, B * L * C);
    ok(mesh_cp_unshard(cp, local, back, B, T, C, MESH_FP32), "unshard");
    near("unshard", back, full, B * T * C);
    if (n > 1 || zigzag)
        refused(mesh_cp_shard(cp, full, local, B, 2 * (size_t)n * 3 + 1, C, MESH_FP32), "uneven",
                "does not split");
    refused(mesh_cp_shard(NULL, full, local, B, T, C, MESH_FP32), "NULL cp", "cp is NULL");
    refused(mesh_cp_unshard(cp, NULL, back, B, T, C, MESH_FP32), "NULL local", "local is NULL");
    free(full), free(want), free(local), free(back);
}

/* Forward and backward through the layer, q/k/v separate (fused = 0) or three views of one
 * [B, L, 3C] tensor, compared with the reference rows of this rank. */
static void attention(mesh_cp_h cp, int zigzag, const attn_t *ref, int fused)
{
    int n = mesh_cp_size(cp), r = mesh_cp_rank(cp);
    size_t L = T / (size_t)n, S = fused ? 3 * C : C, rows = B * L;
    char what[96];
    float *qkv = malloc(3 * rows * C * 4), *dqkv = malloc(3 * rows * C * 4);
    float *q = qkv, *k = fused ? qkv + C : qkv + rows * C, *v = fused ? qkv + 2 * C : k + rows * C;
    float *dq = dqkv, *dk = fused ? dqkv + C : dqkv + rows * C;
    float *dv = fused ? dqkv + 2 * C : dk + rows * C;
    take(ref->q, n, r, zigzag, qkv, S, 0);
    take(ref->k, n, r, zigzag, fused ? qkv : k, S, fused ? C : 0);
    take(ref->v, n, r, zigzag, fused ? qkv : v, S, fused ? 2 * C : 0);
    float *out = malloc(rows * C * 4), *lse = malloc(B * H * L * 4), *dout = malloc(rows * C * 4);
    float *want = malloc(3 * rows * C * 4), *lwant = malloc(B * H * L * 4);
    take(ref->dout, n, r, zigzag, dout, C, 0);
    memset(dqkv, 0x7f, 3 * rows * C * 4); /* every element must be written */
    mesh_cp_shape_t shape = {.batch = B, .seq = T, .heads = H, .head_dim = D, .stride = S};
    ok(mesh_cp_attention_forward(cp, &shape, q, k, v, out, lse), "forward");
    take(ref->out, n, r, zigzag, want, C, 0);
    snprintf(what, sizeof(what), "out (%s q/k/v)", fused ? "fused" : "separate");
    near(what, out, want, rows * C);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t t = 0; t < L; t++)
                lwant[(b * H + h) * L + t] = ref->lse[(b * H + h) * T + position(n, r, zigzag, t)];
    near("lse", lse, lwant, B * H * L);

    ok(mesh_cp_attention_backward(cp, &shape, q, k, v, out, lse, dout, dq, dk, dv), "backward");
    const float *grads[3] = {ref->dq, ref->dk, ref->dv};
    const char *names[3] = {"dq", "dk", "dv"};
    for (int g = 0; g < 3; g++) {
        take(grads[g], n, r, zigzag, want, S, fused ? (size_t)g * C : 0);
        snprintf(what, sizeof(what), "%s (%s q/k/v)", names[g], fused ? "fused" : "separate");
        if (fused)
            for (size_t i = 0; i < rows; i++)
                near(what, dqkv + i * S + (size_t)g * C, want + i * S + (size_t)g * C, C);
        else
            near(what, dqkv + (size_t)g * rows * C, want, rows * C);
    }

    mesh_cp_shape_t bad = shape;
    bad.heads = 0;
    refused(mesh_cp_attention_forward(cp, &bad, q, k, v, out, lse), "heads 0", "heads=0");
    bad = shape;
    bad.stride = C - 1;
    refused(mesh_cp_attention_forward(cp, &bad, q, k, v, out, lse), "stride", "stride=");
    bad = shape;
    bad.seq = 2 * (size_t)n * 3 + 1;
    if (n > 1 || zigzag)
        refused(mesh_cp_attention_backward(cp, &bad, q, k, v, out, lse, dout, dq, dk, dv), "seq",
                "does not split");
    refused(mesh_cp_attention_backward(cp, &shape, q, k, v, out, NULL, dout, dq, dk, dv), "lse",
            "lse is NULL");
    free(qkv), free(dqkv), free(out), free(lse), free(dout), free(want), free(lwant);
}

int main(int argc, char **argv)
{
    int cpn = 1, zigzag = 0, allgather = 0, no_overlap = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cp") && i + 1 < argc)
            cpn = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--zigzag"))
            zigzag = 1;
        else if (!strcmp(argv[i], "--allgather"))
            allgather = 1;
        else if (!strcmp(argv[i], "--no-overlap"))
            no_overlap = 1;
        else {
            fprintf(stderr, "usage: cp_test --cp N [--zigzag] [--allgather] [--no-overlap]\n");
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
                             .size = {[MESH_AXIS_CP] = cpn, [MESH_AXIS_DP] = wsize / cpn}};
    mesh_grid_h grid = NULL;
    mesh_comm_h cpc = NULL;
    mesh_cp_h cp = NULL;
    if (cpn < 1 || wsize % cpn || mesh_grid_create(world, &gp, &grid) != MESH_OK ||
        mesh_grid_comm(grid, "cp", &cpc) != MESH_OK) {
        fprintf(stderr, "[rank %d] grid cp=%d of %d ranks: %s\n", wrank, cpn, wsize,
                mesh_comm_last_error(NULL));
        return 1;
    }
    mesh_cp_params_t p = {.field_mask = MESH_CP_PARAM_FIELD_FLAGS | MESH_CP_PARAM_FIELD_ALGORITHM,
                          .flags = (zigzag ? MESH_CP_ZIGZAG : 0u) |
                                   (no_overlap ? MESH_CP_NO_OVERLAP : 0u),
                          .algorithm = allgather ? MESH_CP_ALLGATHER : MESH_CP_RING};
    mesh_cp_params_t bad = {.field_mask = MESH_CP_PARAM_FIELD_FLAGS, .flags = 1u << 7};
    mesh_cp_h none = NULL;
    refused(mesh_cp_create(cpc, &bad, &none), "unknown flags", "unknown flags");
    ok(mesh_cp_create(cpc, &p, &cp), "create");
    if (cp) {
        CHECK(mesh_cp_size(cp) == cpn && mesh_cp_zigzag(cp) == zigzag &&
                  mesh_cp_algorithm(cp) == (allgather ? MESH_CP_ALLGATHER : MESH_CP_RING),
              "cp handle");
        chunks_everywhere();
        sharding(cp, zigzag);
        /* each data-parallel copy its own data, so groups that mixed would not agree */
        uint64_t seed = 100 + 10 * (uint64_t)mesh_grid_coord(grid, "dp");
        attn_t ref = {rnd(seed, B * T * C, 3.0f),
                      rnd(seed + 1, B * T * C, 1.0f),
                      rnd(seed + 2, B * T * C, 1.0f),
                      rnd(seed + 3, B * T * C, 1.0f),
                      malloc(B * T * C * 4),
                      malloc(B * H * T * 4),
                      calloc(B * T * C, 4),
                      calloc(B * T * C, 4),
                      calloc(B * T * C, 4)};
        reference(&ref);
        attention(cp, zigzag, &ref, 0);
        attention(cp, zigzag, &ref, 1);
        free(ref.q), free(ref.k), free(ref.v), free(ref.dout), free(ref.out), free(ref.lse);
        free(ref.dq), free(ref.dk), free(ref.dv);
    }
    /* every rank reports, so a failure on one is seen by all before they leave */
    int64_t f = failures;
    mesh_allreduce(world, &f, &f, 1, MESH_INT64, MESH_SUM, NULL, NULL);
    if (wrank == 0)
        printf("cp_test cp=%d zigzag=%d %s%s ranks=%d: %lld failures\n", cpn, zigzag,
               allgather ? "allgather" : "ring", no_overlap ? " no-overlap" : "", wsize,
               (long long)f);
    mesh_cp_destroy(cp);
    mesh_grid_destroy(grid);
    mesh_comm_destroy(world);
    return f ? 1 : 0;
}
