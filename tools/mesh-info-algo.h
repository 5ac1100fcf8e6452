/* mesh-info -A [--comm-size N --nodes K]. */
#ifndef MESH_INFO_ALGO_H
#define MESH_INFO_ALGO_H

/* comm_size 0: the algorithms only. wrap prints a doc string wrapped. Returns the exit code. */
int mesh_info_algorithms(int comm_size, int nodes, void (*wrap)(const char *, int, int, int));

/* mesh-info-mem.c: the memory types and the device table, two lines of the version output */
void mesh_info_memory(void);
/* One line, for -A: the path device buffers take through the algorithms. */
void mesh_info_device_path(void);
/* mesh-info -t: the path device buffers take between two ranks, on one node and across nodes
 * (IPC, staged in pipelined chunks, GPUDirect RDMA), and why GPUDirect RDMA is not used. */
void mesh_info_device_peers(void);

#endif
