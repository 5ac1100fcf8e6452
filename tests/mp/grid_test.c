/*
 * The 5D mesh grid under meshrun, through the public API only. Every communicator of the dense
 * and the expert grid is checked against groups computed here from the sizes and the full order
 * (rank = mixed-radix number of its coordinates): its size, this rank's place in it, and an
 * all-reduce whose sums must be exact. Axes that must stay in a node are checked against the
 * world's node map, and the byte counters show shm inside a node and tcp across nodes.
 *   grid_test --sizes TP,CP,EP,DP,PP [--order O] [--expert-tp N] [--intra cp,ep] [--reorder]
 *             [--expect-fail TEXT] [--expect-reordered] [--cross AXIS]
 * The order must list all five axes.
 */
#include "mesh.h"
#include "tests/harness/mp_check.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXW 256
enum { TP, CP, EP, DP, PP, ETP, EDP, NIDS };
static const char *const names[NIDS] = {"tp", "cp", "ep", "dp", "pp", "etp", "edp"};

static int wrank, wsize, failures;
static mesh_comm_h world;

#define CHECK(cond, ...) MESH_MP_CHECK(wrank, failures, cond, __VA_ARGS__)

/* One grid: axes innermost first and sizes by id. */
typedef struct {
    int n, axes[5], size[NIDS];
} ref_t;

static int ref_coord(const ref_t *r, int grank, int id)
{
    for (int i = 0; i < r->n; i++) {
        if (r->axes[i] == id)
            return grank % r->size[id];
        grank /= r->size[r->axes[i]];
    }
    return 0; /* an axis the grid lacks has one position */
}

/* Same group: equal coordinates on every axis outside mask. */
static int same_group(const ref_t *r, unsigned mask, int a, int b)
{
    for (int id = 0; id < NIDS; id++)
        if (!(mask & (1u << id)) && ref_coord(r, a, id) != ref_coord(r, b, id))
            return 0;
    return 1;
}

static int name_id(const char *s, size_t len)
{
    for (int id = 0; id < NIDS; id++)
        if (strlen(names[id]) == len && strncmp(names[id], s, len) == 0)
            return id;
    return -1;
}

/* Checks the communicator the grid gives for `name` against the groups of mask in r. */
static void check_comm(mesh_grid_h grid, const ref_t *r, unsigned mask, const char *name,
                       const int *world_of, int grank)
{
    mesh_comm_h c = NULL;
    mesh_status_t st = mesh_grid_comm(grid, name, &c);
    CHECK(st == MESH_OK, "mesh_grid_comm(%s): %s", name, mesh_comm_last_error(NULL));
    if (st != MESH_OK)
        return;
    int64_t want[4] = {0, 0, 0, 0}, got[4], mine[4] = {1, wrank, grank, (int64_t)wrank * wrank};
    int pos = 0;
    for (int g = 0; g < wsize; g++)
        if (same_group(r, mask, g, grank)) {
            want[0]++;
            want[1] += world_of[g];
            want[2] += g;
            want[3] += (int64_t)world_of[g] * world_of[g];
            if (g < grank)
                pos++;
        }
    CHECK(mesh_comm_size(c) == want[0], "%s: size %d, want %lld", name, mesh_comm_size(c),
          (long long)want[0]);
    CHECK(mesh_comm_rank(c) == pos, "%s: rank %d, want %d", name, mesh_comm_rank(c), pos);
    st = mesh_allreduce(c, mine, got, 4, MESH_INT64, MESH_SUM, NULL, NULL);
    CHECK(st == MESH_OK, "%s: allreduce: %s", name, mesh_comm_last_error(c));
    for (int i = 0; st == MESH_OK && i < 4; i++)
        CHECK(got[i] == want[i], "%s: sum %d is %lld, want %lld", name, i, (long long)got[i],
              (long long)want[i]);
}

/* The name of a mask, axes listed outermost first so the library must normalise it. */
static void mask_name(unsigned mask, char *buf)
{
    buf[0] = '\0';
    for (int id = NIDS - 1; id >= 0; id--)
        if (mask & (1u << id)) {
            if (buf[0])
                strcat(buf, "-");
            strcat(buf, names[id]);
        }
}

/* Every member of the axis's group is on this rank's node (world ranks gathered over it). */
static void check_intra(mesh_grid_h grid, const char *axis)
{
    mesh_comm_h c;
    int all[MAXW];
    if (mesh_grid_comm(grid, axis, &c) != MESH_OK)
        return;
    int n = mesh_comm_size(c);
    CHECK(mesh_allgather(c, &wrank, all, 1, MESH_INT32, NULL, NULL) == MESH_OK, "allgather");
    for (int i = 0; i < n; i++)
        CHECK(mesh_comm_node(world, all[i]) == mesh_comm_node(world, wrank),
              "%s member %d (world rank %d) is on node %d, this rank on %d", axis, i, all[i],
              mesh_comm_node(world, all[i]), mesh_comm_node(world, wrank));
    uint64_t shm_s = 0, shm_r = 0, tcp_s = 0, tcp_r = 0;
    CHECK(mesh_comm_tl_bytes(c, "shm", &shm_s, &shm_r) == MESH_OK, "shm counters");
    CHECK(mesh_comm_tl_bytes(c, "tcp", &tcp_s, &tcp_r) == MESH_OK, "tcp counters");
    CHECK(n == 1 || (shm_s > 0 && shm_r > 0), "%s: shm sent %llu received %llu", axis,
          (unsigned long long)shm_s, (unsigned long long)shm_r);
    CHECK(tcp_s == 0 && tcp_r == 0, "%s: tcp sent %llu", axis, (unsigned long long)tcp_s);
}

/* The axis's groups span nodes: an all-reduce on it moves bytes over tcp. */
static void check_cross(mesh_grid_h grid, const char *axis)
{
    mesh_comm_h c;
    if (mesh_grid_comm(grid, axis, &c) != MESH_OK)
        return;
    double x[1024], y[1024];
    for (int i = 0; i < 1024; i++)
        x[i] = wrank + i;
    CHECK(mesh_allreduce(c, x, y, 1024, MESH_FP64, MESH_SUM, NULL, NULL) == MESH_OK, "allreduce");
    uint64_t s = 0, r = 0;
    CHECK(mesh_comm_tl_bytes(c, "tcp", &s, &r) == MESH_OK, "tcp counters");
    CHECK(s > 0 && r > 0, "%s: tcp sent %llu received %llu", axis, (unsigned long long)s,
          (unsigned long long)r);
}

int main(int argc, char **argv)
{
    mesh_grid_params_t p = {.field_mask = MESH_GRID_PARAM_FIELD_SIZES};
    const char *order = "tp-cp-ep-dp-pp", *expect_fail = NULL, *cross = NULL;
    int expect_reordered = 0, etp = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(a, "--sizes") == 0 && i++) {
            sscanf(v, "%d,%d,%d,%d,%d", &p.size[0], &p.size[1], &p.size[2], &p.size[3], &p.size[4]);
        } else if (strcmp(a, "--order") == 0 && i++) {
            order = v;
            p.field_mask |= MESH_GRID_PARAM_FIELD_ORDER;
            p.order = order;
        } else if (strcmp(a, "--expert-tp") == 0 && i++) {
            p.field_mask |= MESH_GRID_PARAM_FIELD_EXPERT_TP;
            p.expert_tp = etp = atoi(v);
        } else if (strcmp(a, "--intra") == 0 && i++) {
            p.field_mask |= MESH_GRID_PARAM_FIELD_INTRA_NODE;
            if (strstr(v, "cp"))
                p.intra_node |= 1u << MESH_AXIS_CP;
            if (strstr(v, "ep"))
                p.intra_node |= 1u << MESH_AXIS_EP;
        } else if (strcmp(a, "--reorder") == 0) {
            p.field_mask |= MESH_GRID_PARAM_FIELD_FLAGS;
            p.flags |= MESH_GRID_REORDER;
        } else if (strcmp(a, "--expect-fail") == 0 && i++) {
            expect_fail = v;
        } else if (strcmp(a, "--expect-reordered") == 0) {
            expect_reordered = 1;
        } else if (strcmp(a, "--cross") == 0 && i++) {
            cross = v;
        } else {
            fprintf(stderr, "grid_test: unknown argument %s\n", a);
            return 2;
        }
    }
    if (mesh_comm_init_env(&world) != MESH_OK) {
        fprintf(stderr, "init: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    wrank = mesh_comm_rank(world);
    wsize = mesh_comm_size(world);

    mesh_grid_h grid = NULL;
    mesh_status_t st = mesh_grid_create(world, &p, &grid);
    if (expect_fail) {
        CHECK(st == MESH_ERR_INVALID_ARG, "create returned %s", mesh_status_string(st));
        CHECK(strstr(mesh_comm_last_error(world), expect_fail) != NULL, "message '%s' lacks '%s'",
              mesh_comm_last_error(world), expect_fail);
        if (st == MESH_OK)
            mesh_grid_destroy(grid);
        /* the world communicator still works */
        int one = 1, n = 0;
        CHECK(mesh_allreduce(world, &one, &n, 1, MESH_INT32, MESH_SUM, NULL, NULL) == MESH_OK &&
                  n == wsize,
              "world all-reduce after the failed creation");
        mesh_comm_destroy(world);
        if (wrank == 0 && !failures)
            printf("grid fails as expected: %s\n", expect_fail);
        return failures ? 1 : 0;
    }
    CHECK(st == MESH_OK, "mesh_grid_create: %s", mesh_comm_last_error(world));
    if (st != MESH_OK)
        return 1;

    /* the reference grids: dense from the order, expert with tp -> etp, dp -> edp, no cp */
    ref_t dense = {0}, expert = {0};
    for (const char *s = order; *s;) {
        size_t len = strcspn(s, "-");
        dense.axes[dense.n++] = name_id(s, len);
        s += len + (s[len] == '-');
    }
    for (int id = 0; id < 5; id++)
        dense.size[id] = expert.size[id] = p.size[id] ? p.size[id] : 1;
    expert.size[ETP] = etp ? etp : dense.size[TP];
    expert.size[EDP] = wsize / (expert.size[ETP] * dense.size[EP] * dense.size[PP]);
    for (int i = 0; i < 5; i++)
        if (dense.axes[i] != CP)
            expert.axes[expert.n++] = dense.axes[i] == TP   ? ETP
                                      : dense.axes[i] == DP ? EDP
                                                            : dense.axes[i];

    /* grid ranks: a permutation, the identity unless renumbered node by node */
    int grank = mesh_grid_rank(grid), grank_of[MAXW], world_of[MAXW], want_world_of[MAXW];
    CHECK(mesh_allgather(world, &grank, grank_of, 1, MESH_INT32, NULL, NULL) == MESH_OK, "ag");
    for (int w = 0; w < wsize; w++)
        world_of[w] = -1;
    for (int w = 0; w < wsize; w++)
        if (grank_of[w] >= 0 && grank_of[w] < wsize)
            world_of[grank_of[w]] = w;
    int n = 0;
    for (int node = 0; node < mesh_comm_node_count(world); node++)
        for (int lr = 0; lr < mesh_comm_local_size(world, node); lr++)
            for (int w = 0; w < wsize; w++)
                if (mesh_comm_node(world, w) == node && mesh_comm_local_rank(world, w) == lr)
                    want_world_of[n++] = w;
    for (int g = 0; g < wsize; g++) {
        CHECK(world_of[g] >= 0, "grid rank %d has no world rank", g);
        CHECK(world_of[g] == (expect_reordered ? want_world_of[g] : g),
              "grid rank %d is world rank %d", g, world_of[g]);
    }
    for (int id = 0; id < NIDS; id++) {
        const ref_t *r = id >= ETP || id == EP ? &expert : &dense;
        CHECK(mesh_grid_coord(grid, names[id]) == ref_coord(r, grank, id), "coord %s: %d, want %d",
              names[id], mesh_grid_coord(grid, names[id]), ref_coord(r, grank, id));
    }
    CHECK(mesh_grid_coord(grid, "xp") == -1, "coord of an unknown axis");
    mesh_comm_h c;
    CHECK(mesh_grid_comm(grid, "tp-zz", &c) == MESH_ERR_INVALID_ARG, "unknown name accepted");
    CHECK(strstr(mesh_comm_last_error(NULL), "'zz'") != NULL, "%s", mesh_comm_last_error(NULL));

    /* every combination: dense names made of ep and pp only belong to the expert grid */
    char name[64];
    for (unsigned mask = 1; mask < 32; mask++) {
        int expert_name = !(mask & ((1u << TP) | (1u << CP) | (1u << DP))) && (mask & (1u << EP));
        if (expert_name)
            continue;
        mask_name(mask, name);
        check_comm(grid, &dense, mask, name, world_of, grank);
    }
    const unsigned eids[4] = {ETP, EP, EDP, PP};
    for (unsigned m = 1; m < 16; m++) {
        unsigned mask = 0;
        for (int i = 0; i < 4; i++)
            if (m & (1u << i))
                mask |= 1u << eids[i];
        mask_name(mask, name);
        check_comm(grid, &expert, mask, name, world_of, grank);
    }
    check_intra(grid, "tp");
    check_intra(grid, "etp");
    if (p.intra_node & (1u << MESH_AXIS_CP))
        check_intra(grid, "cp");
    if (p.intra_node & (1u << MESH_AXIS_EP))
        check_intra(grid, "ep");
    if (cross)
        check_cross(grid, cross);

    mesh_grid_destroy(grid);
    mesh_comm_destroy(world);
    if (wrank == 0 && !failures)
        printf("grid %s over %d ranks: ok\n", order, wsize);
    return failures ? 1 : 0;
}
