/* mesh-info --pp: a pipeline schedule's predicted timeline, bubble and stored activations. */
#ifndef MESH_INFO_PP_H
#define MESH_INFO_PP_H

/* Whether the command line asks for --pp. */
int mesh_info_pp_wanted(int argc, char **argv);
/* Runs mesh-info --pp: 0 when the schedule passes the checker, 1 when it is refused or the plot
 * fails, 2 on usage errors. */
int mesh_info_pp(int argc, char **argv);

#endif
