/* The process-wide context: the only global state. Created once on first use. */
#ifndef MESH_CONTEXT_H
#define MESH_CONTEXT_H

#include "mesh.h"
#include <pthread.h>

/* Initialises logging and the core config table once; later calls return the first result. */
mesh_status_t mesh_context_init(void);

/* This host's node label: MESH_NODE_ID if set, else the host name. */
const char *mesh_context_node_name(void);
/* Identity of this process's pid namespace (so pid liveness checks are only trusted between
 * processes that share one). */
unsigned long long mesh_context_pidns(void);
/* Whether process pid of pid namespace pidns is known to have ended (exited, killed, or a zombie
 * not yet reaped). Always 0 for processes of another namespace or host. */
int mesh_context_pid_gone(int pid, unsigned long long pidns);

/* Registry of live communicators (context_registry.c), opaque to libmesh: mesh_progress(), the
 * waits that keep other communicators moving, and the progress thread (MESH_PROGRESS_THREAD)
 * call fn for each. fn must not block: it tries the object's own lock and returns 0 when that is
 * taken. Once remove returns, no sweep calls fn for the object any more. */
typedef int (*mesh_context_progress_fn)(void *obj);
void mesh_context_add_progress(void *obj, mesh_context_progress_fn fn);
void mesh_context_remove_progress(void *obj);
/* Calls fn of every object; returns the events. */
int mesh_context_progress_all(void);
/* The same for every object but skip, unless another thread is sweeping already. */
int mesh_context_progress_others(void *skip);
/* Objects with operations under way, counted by the objects (+1 when they get their first, -1
 * when they are done with their last), so that a wait sweeps the others only when there are. */
void mesh_context_active_add(int delta);
int mesh_context_active_count(void);

#endif
