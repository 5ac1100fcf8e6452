/* mesh-info -A [--comm-size N --nodes K]. */
#ifndef MESH_INFO_ALGO_H
#define MESH_INFO_ALGO_H

/* comm_size 0: the algorithms only. wrap prints a doc string wrapped. Returns the exit code. */
int mesh_info_algorithms(int comm_size, int nodes, void (*wrap)(const char *, int, int, int));

#endif
