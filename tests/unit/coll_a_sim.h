/* A single-process simulator of the schedule API (collectives/sched.h) for the coll_a tests:
 * every rank's schedule is built in one process and run with randomised completion order. */
#ifndef MESH_TEST_COLL_A_SIM_H
#define MESH_TEST_COLL_A_SIM_H

#include "collectives/algo.h"

#define SIM_MAXN 16

/* Memory a rank may touch besides scratch: [p, p + len), writable or not. */
void sim_region(int rank, const void *p, size_t len, int writable);
/* Resets the world for n ranks. */
void sim_reset(int n);
/* Runs every rank's schedule to completion; returns 0 or prints what went wrong. */
int sim_run(mesh_sched_t **scheds, int n, unsigned seed);

#endif
