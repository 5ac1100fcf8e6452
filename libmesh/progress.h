/* Time, deadlines and polite waiting. */
#ifndef MESH_PROGRESS_H
#define MESH_PROGRESS_H

#include <stdint.h>

/* Monotonic seconds. */
double mesh_time(void);

/* Backoff for wait loops: spins briefly, then yields the core, then sleeps a little, so that
 * oversubscribed ranks (more ranks than cores) let the rank they wait for run.
 * Reset *idle to 0 whenever progress was made. */
void mesh_backoff(unsigned *idle);

/* Idle polls before yielding, as MESH_PROGRESS_SPIN sets it: "auto" (*polls = -1) or a
 * non-negative count. polls may be NULL. Returns 0, or -1 for any other text. */
int mesh_progress_spin_parse(const char *text, long long *polls);
/* A communicator found nranks ranks on this machine (its node, or more when simulated nodes share
 * the machine): with MESH_PROGRESS_SPIN=auto, waiting ranks spin long when they have a CPU each
 * and briefly when they share CPUs (the largest count reported wins). */
void mesh_progress_node_ranks(int nranks);

/* Default timeout of blocking waits, from MESH_TIMEOUT (seconds). */
double mesh_default_timeout(void);

#endif
