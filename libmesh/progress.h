/* Time, deadlines and polite waiting. */
#ifndef MESH_PROGRESS_H
#define MESH_PROGRESS_H

#include "mesh.h"
#include <stdint.h>

/* Monotonic seconds. */
double mesh_time(void);

/* Backoff for wait loops: spins briefly, then yields the core, then sleeps a little, so that
 * oversubscribed ranks (more ranks than cores) let the rank they wait for run.
 * Reset *idle to 0 whenever progress was made. */
void mesh_backoff(unsigned *idle);
/* Whether mesh_backoff(&idle) with this count only pauses the CPU (no yield, no sleep): a wait
 * loop may keep a lock across such rounds. */
int mesh_backoff_spins(unsigned idle);

/* Idle polls before yielding, as MESH_PROGRESS_SPIN sets it: "auto" (*polls = -1) or a
 * non-negative count. polls may be NULL. Returns 0, or -1 for any other text. */
int mesh_progress_spin_parse(const char *text, long long *polls);
/* A communicator found nranks ranks on this machine (its node, or more when simulated nodes share
 * the machine): with MESH_PROGRESS_SPIN=auto, waiting ranks spin long when they have a CPU each
 * and briefly when they share CPUs (the largest count reported wins). */
void mesh_progress_node_ranks(int nranks);

/* Default timeout of blocking waits, from MESH_TIMEOUT (seconds). */
double mesh_default_timeout(void);

/* The progress table: MESH_TIMEOUT, MESH_PROGRESS_SPIN, MESH_PROGRESS_THREAD. */
mesh_status_t mesh_progress_config_register(void);

/* Registry of live communicators (progress_registry.c), opaque to libmesh: mesh_progress(), the
 * waits that keep other communicators moving, and the progress thread (MESH_PROGRESS_THREAD)
 * call fn for each. fn must not block: it tries the object's own lock and returns 0 when that is
 * taken. Once remove returns, no sweep calls fn for the object any more. */
typedef int (*mesh_progress_fn)(void *obj, int idle_too);
void mesh_progress_add(void *obj, mesh_progress_fn fn);
void mesh_progress_remove(void *obj);
/* Calls fn of every object; returns the events. */
int mesh_progress_all(void);
/* The same for every object but skip, unless another thread is sweeping already. */
int mesh_progress_others(void *skip);
/* Called by a wait that has been idle for a while: every 50 ms at most, it also progresses the
 * objects with nothing under way (idle_too), so that they answer their peers' control messages
 * (probes of a timed-out wait) while this thread waits elsewhere. */
void mesh_progress_idle(void);
/* Objects with operations under way, counted by the objects (+1 when they get their first, -1
 * when they are done with their last), so that a wait sweeps the others only when there are. */
void mesh_progress_active_add(int delta);
int mesh_progress_active_count(void);

#endif
