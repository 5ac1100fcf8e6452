/* mesh-info --grid: a 5D mesh grid's groups over a simulated node map, without launching. */
#ifndef MESH_INFO_GRID_H
#define MESH_INFO_GRID_H

/* Whether the command line asks for --grid. */
int mesh_info_grid_wanted(int argc, char **argv);
/* Runs mesh-info --grid: 0 when the layout fits, 1 when it does not or is invalid, 2 on usage
 * errors. */
int mesh_info_grid(int argc, char **argv);

#endif
