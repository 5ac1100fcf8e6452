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

/* Registry of live communicators, for mesh_progress(). Opaque to libmesh. */
typedef int (*mesh_context_progress_fn)(void *obj);
void mesh_context_add_progress(void *obj, mesh_context_progress_fn fn);
void mesh_context_remove_progress(void *obj);
int mesh_context_progress_all(void);

#endif
