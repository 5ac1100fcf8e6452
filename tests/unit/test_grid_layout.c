/*
 * The grid layout's groups against a reference built another way: every rank's coordinates come
 * from nested loops over the axes (outermost loop = outermost axis), and a group is the set of
 * ranks that agree on the other axes, listed ascending, groups ordered by their first rank.
 * Then Megatron-Core's documented layouts, and every validation error with its message.
 */
#include "libmesh/grid_layout.h"
#include "libmesh/log.h"
#include "tests/harness/harness.h"
#include <string.h>

#define MAXW 64
#define NIDS MESH_GRID_AXIS_IDS

enum {
    TP = MESH_AXIS_TP,
    CP = MESH_AXIS_CP,
    EP = MESH_AXIS_EP,
    DP = MESH_AXIS_DP,
    PP = MESH_AXIS_PP,
    ETP = MESH_GRID_AXIS_ETP,
    EDP = MESH_GRID_AXIS_EDP
};

static const char *const names[NIDS] = {"tp", "cp", "ep", "dp", "pp", "etp", "edp"};

typedef struct {
    int world, naxes;
    int coord[MAXW][NIDS]; /* by rank and axis id; -1 where the axis is not in this grid */
} ref_grid_t;

/* Coordinates by nested loops: axes[] innermost first, sizes by id. */
static void ref_build(ref_grid_t *g, const int *axes, int naxes, const int *size)
{
    int c[5] = {0}, n[5] = {1, 1, 1, 1, 1}, rank = 0;
    memset(g, 0, sizeof(*g));
    g->naxes = naxes;
    for (int i = 0; i < naxes; i++)
        n[i] = size[axes[i]];
    for (c[4] = 0; c[4] < n[4]; c[4]++)
        for (c[3] = 0; c[3] < n[3]; c[3]++)
            for (c[2] = 0; c[2] < n[2]; c[2]++)
                for (c[1] = 0; c[1] < n[1]; c[1]++)
                    for (c[0] = 0; c[0] < n[0]; c[0]++) {
                        for (int id = 0; id < NIDS; id++)
                            g->coord[rank][id] = -1;
                        for (int i = 0; i < naxes; i++)
                            g->coord[rank][axes[i]] = c[i];
                        rank++;
                    }
    g->world = rank;
}

/* Groups of the axes in mask: out[group][member]; returns the number of groups. */
static int ref_groups(const ref_grid_t *g, unsigned mask, int out[MAXW][MAXW], int *gsize)
{
    int ngroups = 0, count[MAXW] = {0};
    for (int r = 0; r < g->world; r++) {
        int found = -1;
        for (int k = 0; k < ngroups && found < 0; k++) {
            int f = out[k][0], same = 1;
            for (int id = 0; id < NIDS; id++)
                if (!(mask & (1u << id)) && g->coord[r][id] != g->coord[f][id])
                    same = 0;
            if (same)
                found = k;
        }
        if (found < 0)
            found = ngroups++;
        out[found][count[found]++] = r;
    }
    *gsize = count[0];
    for (int k = 0; k < ngroups; k++)
        CHECK(count[k] == *gsize);
    return ngroups;
}

static void compare(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, const ref_grid_t *ref,
                    unsigned mask, const char *what)
{
    static int want[MAXW][MAXW];
    int got[MAXW], gs, ng, rgs, rng = ref_groups(ref, mask, want, &rgs);
    mesh_grid_layout_shape(l, kind, mask, &ng, &gs);
    CHECK_MSG(ng == rng && gs == rgs, "%s mask 0x%x: %d groups of %d, want %d of %d", what, mask,
              ng, gs, rng, rgs);
    for (int k = 0; k < ng; k++) {
        mesh_grid_layout_group(l, kind, mask, k, got);
        for (int i = 0; i < gs; i++) {
            int group, index;
            CHECK_MSG(got[i] == want[k][i], "%s mask 0x%x group %d member %d: %d, want %d", what,
                      mask, k, i, got[i], want[k][i]);
            mesh_grid_layout_member(l, kind, mask, got[i], &group, &index);
            CHECK(group == k && index == i);
        }
    }
    for (int r = 0; r < ref->world; r++)
        for (int id = 0; id < NIDS; id++)
            if (ref->coord[r][id] >= 0)
                CHECK(mesh_grid_layout_coord(l, kind, id, r) == ref->coord[r][id]);
}

static mesh_grid_params_t params(const int *size, const char *order)
{
    mesh_grid_params_t p = {.field_mask = MESH_GRID_PARAM_FIELD_SIZES | MESH_GRID_PARAM_FIELD_ORDER,
                            .order = order};
    memcpy(p.size, size, sizeof(p.size));
    return p;
}

/* Every permutation of the five axes as the order, for one set of sizes (expert_tp = tp). */
static int check_all_orders(const int *size5)
{
    int perm[5] = {0, 1, 2, 3, 4}, checked = 0, world = 1;
    for (int i = 0; i < 5; i++)
        world *= size5[i];
    for (int code = 0; code < 120; code++) {
        /* the code-th permutation, by its factorial digits */
        int avail[5] = {0, 1, 2, 3, 4}, left = 5, x = code;
        for (int i = 0; i < 5; i++) {
            int fact = 1;
            for (int k = 2; k < left; k++)
                fact *= k;
            int d = x / fact;
            x %= fact;
            perm[i] = avail[d];
            memmove(avail + d, avail + d + 1, sizeof(int) * (size_t)(left - d - 1));
            left--;
        }
        char order[32];
        snprintf(order, sizeof(order), "%s-%s-%s-%s-%s", names[perm[0]], names[perm[1]],
                 names[perm[2]], names[perm[3]], names[perm[4]]);
        mesh_grid_params_t p = params(size5, order);
        mesh_grid_layout_t l;
        ref_grid_t dense, expert;
        ref_build(&dense, perm, 5, size5);
        CHECK(dense.world == world);

        /* expert grid: tp -> etp, dp -> edp = cp * dp, cp dropped */
        int esize[NIDS] = {0}, eaxes[4], n = 0;
        memcpy(esize, size5, sizeof(int) * 5);
        esize[ETP] = size5[TP];
        esize[EDP] = size5[DP] * size5[CP];
        for (int i = 0; i < 5; i++)
            if (perm[i] != CP)
                eaxes[n++] = perm[i] == TP ? ETP : perm[i] == DP ? EDP : perm[i];
        ref_build(&expert, eaxes, 4, esize);
        CHECK(expert.world == world);
        /* the expert grid exists exactly when its pp groups are the dense grid's */
        static int dpp[MAXW][MAXW], epp[MAXW][MAXW];
        memset(dpp, 0, sizeof(dpp));
        memset(epp, 0, sizeof(epp));
        int a, b, na = ref_groups(&dense, 1u << PP, dpp, &a),
                  nb = ref_groups(&expert, 1u << PP, epp, &b);
        int same = na == nb && memcmp(dpp, epp, sizeof(dpp)) == 0;
        mesh_status_t st = mesh_grid_layout_init(&l, world, &p);
        if (!same && size5[EP] > 1) {
            /* ep > 1 asks for the expert grid: then it is an error */
            CHECK_MSG(st == MESH_ERR_INVALID_ARG, "%s: status %d", order, st);
            CHECK(strstr(mesh_error_last(), "other pp groups") != NULL);
            checked++;
            continue;
        }
        CHECK_MSG(st == MESH_OK, "%s: %s", order, mesh_error_last());
        for (unsigned mask = 0; mask < 32; mask++)
            compare(&l, MESH_GRID_DENSE, &dense, mask, order);
        CHECK_MSG(l.expert_ok == same, "%s: expert_ok %d, want %d", order, l.expert_ok, same);
        if (same) {
            const unsigned ids[4] = {ETP, EP, EDP, PP};
            for (unsigned m = 0; m < 16; m++) {
                unsigned mask = 0;
                for (int i = 0; i < 4; i++)
                    if (m & (1u << i))
                        mask |= 1u << ids[i];
                compare(&l, MESH_GRID_EXPERT, &expert, mask, order);
            }
        } else {
            CHECK(strstr(l.expert_why, "pp groups") != NULL);
            /* asking for experts makes it an error */
            p.field_mask |= MESH_GRID_PARAM_FIELD_EXPERT_TP;
            p.expert_tp = size5[TP];
            mesh_grid_layout_t l2;
            CHECK(mesh_grid_layout_init(&l2, world, &p) == MESH_ERR_INVALID_ARG);
            CHECK(strstr(mesh_error_last(), "other pp groups") != NULL);
        }
        mesh_grid_layout_free(&l);
        checked++;
    }
    return checked;
}

static void expect_groups(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, const char *axes,
                          int ngroups, int gs, const int *want)
{
    mesh_grid_kind_t k;
    unsigned mask;
    int ng, s, got[MAXW];
    CHECK(mesh_grid_parse_axes("test", axes, &k, &mask) == MESH_OK);
    CHECK(k == kind);
    mesh_grid_layout_shape(l, k, mask, &ng, &s);
    CHECK_MSG(ng == ngroups && s == gs, "%s: %d groups of %d", axes, ng, s);
    for (int g = 0; g < ng; g++) {
        mesh_grid_layout_group(l, k, mask, g, got);
        for (int i = 0; i < gs; i++)
            CHECK_MSG(got[i] == want[g * gs + i], "%s group %d member %d: %d, want %d", axes, g, i,
                      got[i], want[g * gs + i]);
    }
}

static void test_megatron_examples(void)
{
    mesh_grid_layout_t l;
    /* 8 ranks, tp = pp = dp = 2, order tp-pp-dp */
    int s1[5] = {2, 1, 1, 2, 2};
    mesh_grid_params_t p = params(s1, "tp-pp-dp");
    CHECK(mesh_grid_layout_init(&l, 8, &p) == MESH_OK);
    expect_groups(&l, MESH_GRID_DENSE, "dp", 4, 2, (int[]){0, 4, 1, 5, 2, 6, 3, 7});
    expect_groups(&l, MESH_GRID_DENSE, "tp", 4, 2, (int[]){0, 1, 2, 3, 4, 5, 6, 7});
    expect_groups(&l, MESH_GRID_DENSE, "pp", 4, 2, (int[]){0, 2, 1, 3, 4, 6, 5, 7});
    expect_groups(&l, MESH_GRID_DENSE, "pp-tp", 2, 4, (int[]){0, 1, 2, 3, 4, 5, 6, 7});
    expect_groups(&l, MESH_GRID_DENSE, "dp-tp", 2, 4, (int[]){0, 1, 4, 5, 2, 3, 6, 7});
    expect_groups(&l, MESH_GRID_DENSE, "dp-pp", 2, 4, (int[]){0, 2, 4, 6, 1, 3, 5, 7});
    mesh_grid_layout_free(&l);

    /* 16 ranks, tp = 2, pp = 4, dp = 2, default order: 8 tp, 8 dp and 4 pp groups */
    int s2[5] = {2, 0, 0, 2, 4};
    p = params(s2, NULL);
    p.field_mask &= ~(uint64_t)MESH_GRID_PARAM_FIELD_ORDER;
    CHECK(mesh_grid_layout_init(&l, 16, &p) == MESH_OK);
    expect_groups(&l, MESH_GRID_DENSE, "dp", 8, 2,
                  (int[]){0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15});
    expect_groups(&l, MESH_GRID_DENSE, "tp", 8, 2,
                  (int[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
    expect_groups(&l, MESH_GRID_DENSE, "pp", 4, 4,
                  (int[]){0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15});
    /* names in any order, axes of size 1 add nothing */
    expect_groups(&l, MESH_GRID_DENSE, "cp-dp-ep", 8, 2,
                  (int[]){0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15});
    /* the expert grid with expert_tp = tp has the same groups */
    expect_groups(&l, MESH_GRID_EXPERT, "etp", 8, 2,
                  (int[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
    expect_groups(&l, MESH_GRID_EXPERT, "edp", 8, 2,
                  (int[]){0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15});
    mesh_grid_layout_free(&l);

    /* folded experts: 8 ranks, tp = 2, ep = 2, dp = 2, expert_tp = 1 -> edp = 4 */
    int s3[5] = {2, 1, 2, 2, 1};
    p = params(s3, "tp-cp-ep-dp-pp");
    p.field_mask |= MESH_GRID_PARAM_FIELD_EXPERT_TP;
    p.expert_tp = 1;
    CHECK(mesh_grid_layout_init(&l, 8, &p) == MESH_OK);
    CHECK(l.size[ETP] == 1 && l.size[EDP] == 4 && l.expert_ok);
    expect_groups(&l, MESH_GRID_EXPERT, "ep", 4, 2, (int[]){0, 1, 2, 3, 4, 5, 6, 7});
    expect_groups(&l, MESH_GRID_EXPERT, "edp", 2, 4, (int[]){0, 2, 4, 6, 1, 3, 5, 7});
    expect_groups(&l, MESH_GRID_DENSE, "dp-ep", 2, 4, (int[]){0, 2, 4, 6, 1, 3, 5, 7});
    expect_groups(&l, MESH_GRID_DENSE, "dp", 4, 2, (int[]){0, 4, 1, 5, 2, 6, 3, 7});
    mesh_grid_layout_free(&l);
}

/* Initialisation must fail with MESH_ERR_INVALID_ARG and a message containing each needle. */
static void expect_init_error(int world, const mesh_grid_params_t *p, const char *n1,
                              const char *n2)
{
    mesh_grid_layout_t l;
    mesh_error_clear();
    mesh_status_t st = mesh_grid_layout_init(&l, world, p);
    CHECK_MSG(st == MESH_ERR_INVALID_ARG, "status %d for want '%s'", st, n1);
    CHECK_MSG(strstr(mesh_error_last(), n1) != NULL, "'%s' lacks '%s'", mesh_error_last(), n1);
    CHECK_MSG(!n2 || strstr(mesh_error_last(), n2) != NULL, "'%s' lacks '%s'", mesh_error_last(),
              n2);
}

static void test_param_errors(void)
{
    int s[5] = {2, 1, 1, 2, 2};
    mesh_grid_params_t p = params(s, "tp-cp-ep-dp-pp");
    expect_init_error(6, &p, "tp=2 x cp=1 x ep=1 x dp=2 x pp=2", "world size 6");
    p.size[PP] = -1;
    expect_init_error(8, &p, "size of pp is -1", NULL);
    p.size[PP] = 2;
    p.order = "tp-xx-dp-pp";
    expect_init_error(8, &p, "order 'tp-xx-dp-pp'", "unknown axis 'xx'");
    p.order = "tp-dp-tp-pp";
    expect_init_error(8, &p, "order 'tp-dp-tp-pp'", "axis tp appears twice");
    p.order = "tp--dp-pp";
    expect_init_error(8, &p, "order 'tp--dp-pp'", "empty axis name");
    p.order = "";
    expect_init_error(8, &p, "order ''", "is empty");
    p.order = "tp-dp-etp";
    expect_init_error(8, &p, "unknown axis 'etp'", NULL);
    p.order = "tp-dp";
    expect_init_error(8, &p, "order 'tp-dp'", "leaves out axis pp of size 2");
    p.order = NULL;
    p.field_mask |= MESH_GRID_PARAM_FIELD_EXPERT_TP;
    p.expert_tp = 3;
    expect_init_error(8, &p, "expert_tp=3 x ep=1 x pp=2 does not divide the world size 8", NULL);
    p.expert_tp = -2;
    expect_init_error(8, &p, "expert_tp=-2", NULL);
    /* expert_tp = 1 with pp inside dp: the expert grid's pp groups would differ */
    p.expert_tp = 1;
    p.order = "tp-pp-dp";
    expect_init_error(8, &p, "other pp groups", "expert_tp=1");
    p.order = NULL;
    p.field_mask |= MESH_GRID_PARAM_FIELD_FLAGS;
    p.flags = 0x10;
    expect_init_error(8, &p, "flags 0x10", NULL);
    p.flags = 0;
    p.field_mask |= MESH_GRID_PARAM_FIELD_INTRA_NODE;
    p.intra_node = 1u << 7;
    expect_init_error(8, &p, "intra_node 0x80", NULL);
    expect_init_error(0, NULL, "world size 0", NULL);

    /* without sizes, the world must be one rank */
    mesh_grid_layout_t l;
    CHECK(mesh_grid_layout_init(&l, 1, NULL) == MESH_OK);
    CHECK(mesh_grid_layout_place(&l, (int[]){0}, NULL) == MESH_OK);
    mesh_grid_layout_free(&l);
    expect_init_error(2, NULL, "world size 2", NULL);
}

static void test_axis_names(void)
{
    mesh_grid_kind_t k;
    unsigned m, m2;
    CHECK(mesh_grid_parse_axes("f", "dp-cp", &k, &m) == MESH_OK && k == MESH_GRID_DENSE);
    CHECK(mesh_grid_parse_axes("f", "cp-dp", &k, &m2) == MESH_OK && m == m2);
    CHECK(m == ((1u << DP) | (1u << CP)));
    CHECK(mesh_grid_parse_axes("f", "ep", &k, &m) == MESH_OK && k == MESH_GRID_EXPERT);
    CHECK(mesh_grid_parse_axes("f", "pp-ep", &k, &m) == MESH_OK && k == MESH_GRID_EXPERT);
    CHECK(mesh_grid_parse_axes("f", "pp", &k, &m) == MESH_OK && k == MESH_GRID_DENSE);
    CHECK(mesh_grid_parse_axes("f", "ep-dp", &k, &m) == MESH_OK && k == MESH_GRID_DENSE);
    CHECK(mesh_grid_parse_axes("f", "edp-etp", &k, &m) == MESH_OK && k == MESH_GRID_EXPERT);
    CHECK(m == ((1u << ETP) | (1u << EDP)));
    CHECK(mesh_grid_parse_axes("f", "tp-xy", &k, &m) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_error_last(), "unknown axis 'xy'") != NULL);
    CHECK(mesh_grid_parse_axes("f", "dp-dp", &k, &m) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_error_last(), "axis dp appears twice") != NULL);
    CHECK(mesh_grid_parse_axes("f", "tp-etp", &k, &m) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_error_last(), "'tp-etp' mixes") != NULL);
    CHECK(mesh_grid_parse_axes("f", "", &k, &m) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_grid_parse_axes("f", NULL, &k, &m) == MESH_ERR_INVALID_ARG);
}

/* Placement: a node map per rank; expect an error containing needles, or success. */
static void place(const int *size, unsigned intra, unsigned flags, int expert_tp,
                  const int *node_of, int world, const char *n1, const char *n2, int *world_of)
{
    mesh_grid_params_t p = params(size, NULL);
    p.field_mask = MESH_GRID_PARAM_FIELD_SIZES | MESH_GRID_PARAM_FIELD_INTRA_NODE |
                   MESH_GRID_PARAM_FIELD_FLAGS | MESH_GRID_PARAM_FIELD_EXPERT_TP;
    p.intra_node = intra;
    p.flags = flags;
    p.expert_tp = expert_tp;
    mesh_grid_layout_t l;
    CHECK_MSG(mesh_grid_layout_init(&l, world, &p) == MESH_OK, "%s", mesh_error_last());
    mesh_status_t st = mesh_grid_layout_place(&l, node_of, NULL);
    if (n1) {
        CHECK_MSG(st == MESH_ERR_INVALID_ARG, "placement should fail with '%s'", n1);
        CHECK_MSG(strstr(mesh_error_last(), n1), "'%s' lacks '%s'", mesh_error_last(), n1);
        CHECK_MSG(!n2 || strstr(mesh_error_last(), n2), "'%s' lacks '%s'", mesh_error_last(), n2);
    } else {
        CHECK_MSG(st == MESH_OK, "%s", mesh_error_last());
        for (int g = 0; g < world; g++) {
            if (world_of)
                CHECK(l.world_of[g] == world_of[g]);
            CHECK(l.grid_of[l.world_of[g]] == g);
        }
    }
    mesh_grid_layout_free(&l);
}

static void test_placement(void)
{
    const int block2[8] = {0, 0, 1, 1, 2, 2, 3, 3}, block4[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    const int cyclic2[8] = {0, 1, 0, 1, 0, 1, 0, 1}, uneven[8] = {0, 0, 0, 1, 1, 1, 2, 2};
    const int tp4dp2[5] = {4, 1, 1, 2, 1}, tp2cp2dp2[5] = {2, 2, 1, 2, 1};
    const int ep4dp2[5] = {1, 1, 4, 2, 1}, dp8[5] = {1, 1, 1, 8, 1}, tp2dp4[5] = {2, 1, 1, 4, 1};
    const unsigned R = MESH_GRID_REORDER;

    place(tp4dp2, 0, 0, 0, block4, 8, NULL, NULL, (int[]){0, 1, 2, 3, 4, 5, 6, 7});
    place(tp4dp2, 0, 0, 0, block2, 8, "tp=4 does not fit in a node: nodes have 2,2,2,2 ranks",
          "multiple of the intra-node block tp = 4", NULL);
    place(tp4dp2, 0, 0, 0, cyclic2, 8, "tp=4 does not fit in a node: nodes have 4,4 ranks",
          "tp group of ranks 0,1,2,3 spans nodes 0 and 1", NULL);
    /* renumbered node by node: node 0 holds world ranks 0, 2, 4, 6 */
    place(tp4dp2, 0, R, 0, cyclic2, 8, NULL, NULL, (int[]){0, 2, 4, 6, 1, 3, 5, 7});
    place(tp4dp2, 0, R, 0, block2, 8, "tp=4 does not fit in a node: nodes have 2,2,2,2 ranks",
          "multiple of the intra-node block tp = 4", NULL);
    /* cp only when asked, and its block includes tp */
    place(tp2cp2dp2, 0, 0, 0, block2, 8, NULL, NULL, NULL);
    place(tp2cp2dp2, 1u << CP, 0, 0, block2, 8,
          "cp=2 does not fit in a node: nodes have "
          "2,2,2,2 ranks",
          "block tp x cp = 4", NULL);
    place(tp2cp2dp2, 1u << CP, R, 0, cyclic2, 8, NULL, NULL, (int[]){0, 2, 4, 6, 1, 3, 5, 7});
    place(ep4dp2, 0, 0, 0, block2, 8, NULL, NULL, NULL);
    place(ep4dp2, 1u << EP, 0, 0, block2, 8, "ep=4 does not fit in a node", "2,2,2,2", NULL);
    /* the expert grid's tensor parallel axis is tensor parallel too */
    place(dp8, 0, 0, 4, block2, 8, "etp=4 does not fit in a node: nodes have 2,2,2,2 ranks", NULL,
          NULL);
    place(dp8, 0, 0, 2, block2, 8, NULL, NULL, NULL);
    /* nodes of 3, 3 and 2 ranks cannot hold whole tp pairs, renumbered or not */
    place(tp2dp4, 0, R, 0, uneven, 8, "tp=2 does not fit in a node: nodes have 3,3,2 ranks",
          "multiple of the intra-node block tp = 2", NULL);
    place(tp2dp4, 1u << DP, 0, 0, block4, 8, "dp=4 does not fit in a node", "block tp x dp = 8",
          NULL);
}

int main(void)
{
    const int sizes[][5] = {{2, 1, 1, 2, 2}, {2, 2, 2, 2, 2}, {4, 1, 2, 1, 2}, {1, 3, 1, 2, 2},
                            {2, 3, 1, 1, 2}, {3, 1, 2, 2, 1}, {1, 1, 1, 1, 1}, {1, 2, 2, 1, 3},
                            {2, 2, 1, 4, 2}, {8, 1, 1, 1, 1}, {1, 1, 1, 1, 7}};
    int layouts = 0;
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        layouts += check_all_orders(sizes[i]);
    test_megatron_examples();
    test_param_errors();
    test_axis_names();
    test_placement();
    printf("%d layouts checked against the reference\n", layouts);
    return 0;
}
