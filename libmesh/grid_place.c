/* The 5D mesh grid against a node map: intra-node axes must keep each group inside one node;
 * MESH_GRID_REORDER first renumbers the ranks node by node. */
#define MESH_LOG_SUBSYSTEM "grid"
#include "libmesh/grid_layout.h"
#include "libmesh/log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const int *node_of, *local_rank;
} grid_sort_ctx_t;

/* qsort has no context argument; placement runs once per grid creation, never concurrently
 * on one thread, so a thread-local pointer is enough. */
static _Thread_local const grid_sort_ctx_t *grid_sort_ctx;

static int grid_by_node(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    const grid_sort_ctx_t *c = grid_sort_ctx;
    if (c->node_of[x] != c->node_of[y])
        return c->node_of[x] < c->node_of[y] ? -1 : 1;
    if (c->local_rank) {
        if (c->local_rank[x] != c->local_rank[y])
            return c->local_rank[x] < c->local_rank[y] ? -1 : 1;
    }
    return x < y ? -1 : x > y;
}

/* "4,4" or "2,2,2,2" (the first 16 nodes) */
static void grid_node_sizes(const int *count, int nnodes, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int n = 0; n < nnodes && at < len; n++) {
        int w = n == 16 ? snprintf(buf + at, len - at, ",...")
                        : snprintf(buf + at, len - at, "%s%d", n ? "," : "", count[n]);
        if (w < 0)
            break;
        at += (size_t)w;
        if (n == 16)
            break;
    }
}

/* Product of the sizes from the innermost axis out to the outermost intra-node one, with its
 * text ("tp x cp"): nodes whose size is a multiple of it hold whole groups once renumbered. */
static int grid_block(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, char *text, size_t len)
{
    const mesh_grid_dims_t *d = &l->dims[kind];
    int last = -1, block = 1;
    size_t at = 0;
    for (int i = 0; i < d->naxes; i++)
        if ((l->intra & MESH_GRID_BIT(d->id[i])) && d->size[i] > 1)
            last = i;
    text[0] = '\0';
    for (int i = 0; i <= last; i++) {
        if (d->size[i] == 1)
            continue;
        block *= d->size[i];
        int w =
            snprintf(text + at, len - at, "%s%s", at ? " x " : "", mesh_grid_axis_name(d->id[i]));
        if (w > 0 && (size_t)w < len - at)
            at += (size_t)w;
    }
    return block;
}

/* The first group of axis id in grid kind that spans nodes, or -1. */
static int grid_split_group(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, int id,
                            const int *node_of, int *members)
{
    int ngroups, gs;
    mesh_grid_layout_shape(l, kind, MESH_GRID_BIT(id), &ngroups, &gs);
    for (int g = 0; g < ngroups; g++) {
        mesh_grid_layout_group(l, kind, MESH_GRID_BIT(id), g, members);
        for (int i = 1; i < gs; i++)
            if (node_of[l->world_of[members[i]]] != node_of[l->world_of[members[0]]])
                return g;
    }
    return -1;
}

static mesh_status_t grid_not_fitting(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, int id,
                                      const int *node_of, const int *count, int nnodes,
                                      const int *members)
{
    char sizes[160], detail[256] = "", block_text[64];
    const char *name = mesh_grid_axis_name(id);
    int gs = l->size[id], block = grid_block(l, kind, block_text, sizeof(block_text));
    int multiple = 1;

    grid_node_sizes(count, nnodes, sizes, sizeof(sizes));
    for (int n = 0; n < nnodes; n++)
        if (count[n] % block != 0)
            multiple = 0;
    if (!multiple) {
        snprintf(detail, sizeof(detail),
                 "; ranks per node must be a multiple of the intra-node "
                 "block %s = %d",
                 block_text, block);
    } else {
        size_t at = 0;
        at += (size_t)snprintf(detail, sizeof(detail), "; %s group of ranks ", name);
        for (int i = 0; i < gs && i < 8 && at < sizeof(detail); i++)
            at += (size_t)snprintf(detail + at, sizeof(detail) - at, "%s%d", i ? "," : "",
                                   l->world_of[members[i]]);
        if (at < sizeof(detail))
            at += (size_t)snprintf(detail + at, sizeof(detail) - at, "%s spans nodes %d and %d%s",
                                   gs > 8 ? ",..." : "", node_of[l->world_of[members[0]]],
                                   node_of[l->world_of[members[gs - 1]]],
                                   l->flags & MESH_GRID_REORDER
                                       ? ""
                                       : " (MESH_GRID_REORDER renumbers ranks node by node)");
    }
    return mesh_error(MESH_ERR_INVALID_ARG, "%s=%d does not fit in a node: nodes have %s ranks%s",
                      name, gs, sizes, detail);
}

/* Whether the intra-node axes fit; reports the first that does not. */
static mesh_status_t grid_check(const mesh_grid_layout_t *l, const int *node_of, const int *count,
                                int nnodes, int *members)
{
    mesh_grid_axis_t ax[MESH_GRID_MAX_AXES];
    int n = mesh_grid_layout_axes(l, ax);
    for (int i = 0; i < n; i++) {
        if (!(l->intra & MESH_GRID_BIT(ax[i].id)) || ax[i].size == 1)
            continue;
        if (grid_split_group(l, ax[i].kind, ax[i].id, node_of, members) >= 0)
            return grid_not_fitting(l, ax[i].kind, ax[i].id, node_of, count, nnodes, members);
    }
    return MESH_OK;
}

mesh_status_t mesh_grid_layout_place(mesh_grid_layout_t *l, const int *node_of,
                                     const int *local_rank)
{
    int nnodes = 0, world = l->world;
    mesh_status_t st;
    for (int r = 0; r < world; r++) {
        if (node_of[r] < 0)
            return mesh_error(MESH_ERR_INVALID_ARG, "mesh_grid: rank %d has node %d", r,
                              node_of[r]);
        if (node_of[r] >= nnodes)
            nnodes = node_of[r] + 1;
    }
    int *count = calloc((size_t)nnodes, sizeof(int));
    int *members = malloc(sizeof(int) * (size_t)world);
    if (count == NULL || members == NULL) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "mesh_grid: cannot allocate the node map of %d ranks",
                        world);
        goto out;
    }
    for (int r = 0; r < world; r++)
        count[node_of[r]]++;

    for (int g = 0; g < world; g++)
        l->world_of[g] = g;
    if (l->flags & MESH_GRID_REORDER) {
        grid_sort_ctx_t ctx = {node_of, local_rank};
        grid_sort_ctx = &ctx;
        qsort(l->world_of, (size_t)world, sizeof(int), grid_by_node);
        grid_sort_ctx = NULL;
    }
    l->reordered = 0;
    for (int g = 0; g < world; g++) {
        l->grid_of[l->world_of[g]] = g;
        if (l->world_of[g] != g)
            l->reordered = 1;
    }
    st = grid_check(l, node_of, count, nnodes, members);
    if (st == MESH_OK && l->reordered)
        mesh_log_info("grid ranks renumbered node by node (the launcher did not place "
                      "consecutive ranks on one node); grid rank 1 is world rank %d",
                      world > 1 ? l->world_of[1] : 0);
out:
    free(count);
    free(members);
    return st;
}
