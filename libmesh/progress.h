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

/* Default timeout of blocking waits, from MESH_TIMEOUT (seconds). */
double mesh_default_timeout(void);

#endif
