/*
 * The 5D mesh grid as pure arithmetic: axis sizes, the order string, each rank's coordinates,
 * the rank groups of every axis and combination of axes, the folded expert grid and the check
 * (or renumbering) against a node map. No communicator is involved, so mesh-info and the unit
 * tests use it directly.
 *
 * Ranks are laid out as mixed-radix numbers over the axes in order, innermost first (the first
 * axis varies fastest). The groups of a set of axes follow Megatron-Core's RankGenerator: ranks
 * that agree on every other axis form a group, groups are numbered by the other axes' coordinates
 * (innermost fastest) and members by the set's own coordinates, so both lists ascend.
 */
#ifndef MESH_GRID_LAYOUT_H
#define MESH_GRID_LAYOUT_H

#include "mesh.h"
#include <stddef.h>

/* Axis ids: the dense axes are mesh_axis_t; the expert grid adds its own tp and dp. */
#define MESH_GRID_AXIS_ETP MESH_AXIS_COUNT
#define MESH_GRID_AXIS_EDP (MESH_AXIS_COUNT + 1)
#define MESH_GRID_AXIS_IDS (MESH_AXIS_COUNT + 2)
#define MESH_GRID_BIT(id)  (1u << (id))

typedef enum { MESH_GRID_DENSE = 0, MESH_GRID_EXPERT = 1, MESH_GRID_KINDS = 2 } mesh_grid_kind_t;

/* One grid: its axes innermost first with their sizes and rank strides. */
typedef struct {
    int naxes;
    int id[MESH_AXIS_COUNT];
    int size[MESH_AXIS_COUNT];
    int stride[MESH_AXIS_COUNT];
} mesh_grid_dims_t;

typedef struct {
    int world;
    int size[MESH_GRID_AXIS_IDS]; /* by axis id */
    unsigned intra;               /* MESH_GRID_BIT of the axes that must stay inside a node */
    unsigned flags;               /* MESH_GRID_* */
    mesh_grid_dims_t dims[MESH_GRID_KINDS];
    int expert_ok;        /* the expert grid's pp groups equal the dense grid's */
    char expert_why[256]; /* why not, when !expert_ok */
    int reordered;        /* world_of is not the identity */
    int *world_of;        /* [world] grid rank -> world rank */
    int *grid_of;         /* [world] world rank -> grid rank */
} mesh_grid_layout_t;

/* Validates the parameters against world and lays out both grids (identity placement). */
mesh_status_t mesh_grid_layout_init(mesh_grid_layout_t *l, int world,
                                    const mesh_grid_params_t *params);
void mesh_grid_layout_free(mesh_grid_layout_t *l);

/*
 * Checks the intra-node axes against the node of each world rank (local_rank may be NULL: ranks
 * of a node then rank by world rank). With MESH_GRID_REORDER, grid ranks are first assigned node
 * by node, sorted by (node, local rank).
 */
mesh_status_t mesh_grid_layout_place(mesh_grid_layout_t *l, const int *node_of,
                                     const int *local_rank);

/* Name of an axis id ("tp", ..., "etp", "edp"); NULL when out of range. */
const char *mesh_grid_axis_name(int id);

/*
 * Parses axis names joined by '-' in any order. Names with etp or edp, or made of ep and pp only
 * with ep among them, belong to the expert grid; the others to the dense grid. Mixing tp, cp or
 * dp with etp or edp is an error, as are unknown and repeated names. fn prefixes messages.
 */
mesh_status_t mesh_grid_parse_axes(const char *fn, const char *names, mesh_grid_kind_t *kind,
                                   unsigned *mask);

/* One axis of a grid. */
typedef struct {
    mesh_grid_kind_t kind;
    int id, size;
} mesh_grid_axis_t;
#define MESH_GRID_MAX_AXES (MESH_GRID_KINDS * MESH_AXIS_COUNT)
/* Every axis of the layout once, grid by grid in their order (at most MESH_GRID_MAX_AXES):
 * pp is the dense grid's, ep the expert grid's when there is one (left out when !expert_ok).
 * Returns how many. */
int mesh_grid_layout_axes(const mesh_grid_layout_t *l, mesh_grid_axis_t *out);
/* Drops the axes of size 1 from a mask. */
unsigned mesh_grid_layout_nontrivial(const mesh_grid_layout_t *l, mesh_grid_kind_t kind,
                                     unsigned mask);
/* Coordinate of a grid rank along one axis of a grid; -1 when the grid has no such axis. */
int mesh_grid_layout_coord(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, int id, int grank);
/* Number of groups and their size for a mask. */
void mesh_grid_layout_shape(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, unsigned mask,
                            int *ngroups, int *group_size);
/* Which group of a mask a grid rank is in, and its position in it. */
void mesh_grid_layout_member(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, unsigned mask,
                             int grank, int *group, int *index);
/* Grid ranks of group number `group`, in member order (group_size entries). */
void mesh_grid_layout_group(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, unsigned mask,
                            int group, int *granks);
/* Canonical name of a mask: its axes in the grid's order joined by '-' ("" for none). */
void mesh_grid_layout_mask_name(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, unsigned mask,
                                char *buf, size_t len);

#endif
