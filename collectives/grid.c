/* The 5D mesh grid's communicators: one per axis and per combination of axes of size > 1, in the
 * dense and the expert grid, created eagerly by splitting the world communicator. Combinations
 * with the same groups in the same order share one communicator. */
#define MESH_LOG_SUBSYSTEM "grid"
#include "collectives/api.h"
#include "libmesh/grid_layout.h"
#include "libmesh/log.h"
#include <stdlib.h>
#include <string.h>

#define GRID_MAX_ENTRIES (1 << MESH_GRID_AXIS_IDS)

typedef struct {
    int *group; /* [world] by grid rank: group number */
    int *index; /* [world] by grid rank: position in the group */
} grid_sig_t;

struct mesh_grid {
    mesh_comm_t *world;
    mesh_grid_layout_t layout;
    int grank;
    int ncomms;
    mesh_comm_h comms[GRID_MAX_ENTRIES];
    grid_sig_t sigs[GRID_MAX_ENTRIES]; /* only while creating */
    /* by kind and mask of non-trivial axis ids: index into comms, -1 when absent */
    signed char entry[MESH_GRID_KINDS][GRID_MAX_ENTRIES];
    int self; /* index of the one-rank communicator */
};

/* Hash of everything that shapes the grid, so ranks that disagree fail together. */
static uint64_t grid_params_hash(const mesh_grid_params_t *p)
{
    uint64_t h = 1469598103934665603ull;
#define GRID_MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
    if (p == NULL)
        return h;
    GRID_MIX(p->field_mask);
    if (p->field_mask & MESH_GRID_PARAM_FIELD_SIZES)
        for (int i = 0; i < MESH_AXIS_COUNT; i++)
            GRID_MIX((uint32_t)p->size[i]);
    if ((p->field_mask & MESH_GRID_PARAM_FIELD_ORDER) && p->order)
        for (const char *s = p->order; *s; s++)
            GRID_MIX((unsigned char)*s);
    if (p->field_mask & MESH_GRID_PARAM_FIELD_INTRA_NODE)
        GRID_MIX(p->intra_node);
    if (p->field_mask & MESH_GRID_PARAM_FIELD_FLAGS)
        GRID_MIX(p->flags);
    if (p->field_mask & MESH_GRID_PARAM_FIELD_EXPERT_TP)
        GRID_MIX((uint32_t)p->expert_tp);
#undef GRID_MIX
    return h;
}

static mesh_status_t grid_same_params(mesh_comm_t *world, const mesh_grid_params_t *p)
{
    uint64_t mine = grid_params_hash(p), *all = malloc(sizeof(uint64_t) * (size_t)world->size);
    if (all == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "mesh_grid_create: out of memory");
    mesh_status_t st = mesh_allgather(world, &mine, all, 1, MESH_UINT64, NULL, NULL);
    for (int r = 0; st == MESH_OK && r < world->size; r++)
        if (all[r] != mine)
            st = mesh_error(MESH_ERR_INVALID_ARG,
                            "mesh_grid_create: rank %d passed other grid "
                            "parameters than rank %d",
                            r, world->rank);
    free(all);
    return st;
}

static void grid_sig_free(grid_sig_t *s)
{
    free(s->group);
    free(s->index);
    s->group = s->index = NULL;
}

/* The communicator of a mask: an existing one with the same groups, or a new split. */
static mesh_status_t grid_add(mesh_grid_h g, mesh_grid_kind_t kind, unsigned mask)
{
    const mesh_grid_layout_t *l = &g->layout;
    grid_sig_t s = {malloc(sizeof(int) * (size_t)l->world), malloc(sizeof(int) * (size_t)l->world)};
    if (s.group == NULL || s.index == NULL) {
        grid_sig_free(&s);
        return mesh_error(MESH_ERR_NO_MEMORY, "mesh_grid_create: out of memory");
    }
    for (int r = 0; r < l->world; r++)
        mesh_grid_layout_member(l, kind, mask, r, &s.group[r], &s.index[r]);
    for (int c = 0; c < g->ncomms; c++) {
        if (g->sigs[c].group == NULL)
            continue;
        if (memcmp(g->sigs[c].group, s.group, sizeof(int) * (size_t)l->world) == 0 &&
            memcmp(g->sigs[c].index, s.index, sizeof(int) * (size_t)l->world) == 0) {
            g->entry[kind][mask] = (signed char)c;
            grid_sig_free(&s);
            return MESH_OK;
        }
    }
    mesh_comm_h comm;
    mesh_status_t st = mesh_comm_split(g->world, s.group[g->grank], s.index[g->grank], &comm);
    if (st != MESH_OK) {
        grid_sig_free(&s);
        return st;
    }
    g->entry[kind][mask] = (signed char)g->ncomms;
    g->sigs[g->ncomms] = s;
    g->comms[g->ncomms++] = comm;
    return MESH_OK;
}

/* Every non-empty subset of the grid's axes of size > 1. */
static mesh_status_t grid_build(mesh_grid_h g)
{
    for (int kind = 0; kind < MESH_GRID_KINDS; kind++) {
        if (kind == MESH_GRID_EXPERT && !g->layout.expert_ok)
            continue;
        unsigned all =
            mesh_grid_layout_nontrivial(&g->layout, (mesh_grid_kind_t)kind, GRID_MAX_ENTRIES - 1);
        for (unsigned mask = 1; mask < GRID_MAX_ENTRIES; mask++)
            if ((mask & all) == mask)
                MESH_CHECK(grid_add(g, (mesh_grid_kind_t)kind, mask));
    }
    /* trivial names (axes of size 1 only) get one communicator of this rank alone */
    mesh_comm_h self;
    MESH_CHECK(mesh_comm_split(g->world, g->world->rank, 0, &self));
    g->self = g->ncomms;
    g->comms[g->ncomms++] = self;
    return MESH_OK;
}

mesh_status_t mesh_grid_create(mesh_comm_h world, const mesh_grid_params_t *params,
                               mesh_grid_h *grid)
{
    static const char fn[] = "mesh_grid_create";
    MESH_CHECK(mesh_api_check_comm(world, fn, NULL));
    if (grid == NULL)
        return mesh_comm_fail(world, mesh_error(MESH_ERR_INVALID_ARG, "%s: grid is NULL", fn));
    mesh_grid_h g = calloc(1, sizeof(*g));
    if (g == NULL)
        return mesh_comm_fail(world, mesh_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn));
    g->world = world;
    memset(g->entry, -1, sizeof(g->entry));
    g->self = -1;

    /* every rank validates the same inputs, so all fail or none does */
    mesh_status_t st = grid_same_params(world, params);
    if (st == MESH_OK)
        st = mesh_grid_layout_init(&g->layout, world->size, params);
    if (st == MESH_OK)
        st = mesh_grid_layout_place(&g->layout, world->node_of, world->local_rank);
    if (st == MESH_OK) {
        g->grank = g->layout.grid_of[world->rank];
        st = grid_build(g);
    }
    for (int c = 0; c < g->ncomms; c++)
        grid_sig_free(&g->sigs[c]);
    if (st != MESH_OK) {
        mesh_grid_destroy(g);
        return mesh_comm_fail(world, st);
    }
    mesh_log_debug("grid of %d ranks: %d communicators, grid rank %d", world->size, g->ncomms,
                   g->grank);
    *grid = g;
    return MESH_OK;
}

void mesh_grid_destroy(mesh_grid_h g)
{
    if (g == NULL)
        return;
    for (int c = g->ncomms - 1; c >= 0; c--) {
        mesh_comm_destroy(g->comms[c]);
        grid_sig_free(&g->sigs[c]);
    }
    mesh_grid_layout_free(&g->layout);
    free(g);
}

mesh_status_t mesh_grid_comm(mesh_grid_h g, const char *axes, mesh_comm_h *comm)
{
    static const char fn[] = "mesh_grid_comm";
    mesh_grid_kind_t kind;
    unsigned mask;
    if (g == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: grid is NULL", fn);
    if (comm == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    MESH_CHECK(mesh_grid_parse_axes(fn, axes, &kind, &mask));
    if (kind == MESH_GRID_EXPERT && !g->layout.expert_ok) {
        /* without the expert grid, ep and pp alone still mean the dense grid's axes */
        if (mask & (MESH_GRID_BIT(MESH_GRID_AXIS_ETP) | MESH_GRID_BIT(MESH_GRID_AXIS_EDP)))
            return mesh_error(MESH_ERR_INVALID_ARG, "%s: no expert grid for '%s': %s", fn, axes,
                              g->layout.expert_why);
        kind = MESH_GRID_DENSE;
    }
    mask = mesh_grid_layout_nontrivial(&g->layout, kind, mask);
    int c = mask ? g->entry[kind][mask] : g->self;
    if (c < 0)
        return mesh_error(MESH_ERR_INTERNAL, "%s: no communicator for '%s'", fn, axes);
    *comm = g->comms[c];
    return MESH_OK;
}

int mesh_grid_coord(mesh_grid_h g, const char *axis)
{
    int id = -1;
    if (g == NULL || axis == NULL)
        return -1;
    /* a plain lookup: an unknown name is an answer (-1), not an error to log */
    for (int i = 0; i < MESH_GRID_AXIS_IDS; i++)
        if (strcmp(axis, mesh_grid_axis_name(i)) == 0)
            id = i;
    if (id < 0)
        return -1;
    mesh_grid_kind_t kind = id >= MESH_AXIS_COUNT ? MESH_GRID_EXPERT : MESH_GRID_DENSE;
    if (id == MESH_AXIS_EP)
        kind = MESH_GRID_EXPERT;
    if (kind == MESH_GRID_EXPERT && !g->layout.expert_ok) {
        if (id >= MESH_AXIS_COUNT)
            return -1;
        kind = MESH_GRID_DENSE;
    }
    return mesh_grid_layout_coord(&g->layout, kind, id, g->grank);
}

int mesh_grid_rank(mesh_grid_h g)
{
    return g ? g->grank : -1;
}
