/* The registry of objects that mesh_progress(), cross-communicator waits and the progress thread
 * drive. */
#include "libmesh/config.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    void *obj;
    mesh_context_progress_fn fn;
} mesh_registry_entry_t;

static pthread_mutex_t mesh_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static mesh_registry_entry_t *mesh_registry;
static int mesh_registry_len, mesh_registry_cap;
static atomic_int mesh_registry_active;

/* The progress thread, while the registry holds objects and MESH_PROGRESS_THREAD is set. */
static pthread_t mesh_pthread;
static int mesh_pthread_running;
static atomic_int mesh_pthread_stop;

void mesh_context_active_add(int delta)
{
    atomic_fetch_add_explicit(&mesh_registry_active, delta, memory_order_relaxed);
}

int mesh_context_active_count(void)
{
    return atomic_load_explicit(&mesh_registry_active, memory_order_relaxed);
}

/* Callers hold the lock. The callbacks do not block, so holding it across them only keeps a
 * removal (and the free that follows it) waiting until the sweep is done. */
static int sweep(void *skip)
{
    int events = 0;
    for (int i = 0; i < mesh_registry_len; i++) {
        if (mesh_registry[i].obj == skip) continue;
        int n = mesh_registry[i].fn(mesh_registry[i].obj);
        if (n > 0) events += n;
    }
    return events;
}

int mesh_context_progress_all(void)
{
    pthread_mutex_lock(&mesh_registry_lock);
    int events = sweep(NULL);
    pthread_mutex_unlock(&mesh_registry_lock);
    return events;
}

int mesh_context_progress_others(void *skip)
{
    /* a thread sweeping already moves them all */
    if (pthread_mutex_trylock(&mesh_registry_lock) != 0) return 0;
    int events = sweep(skip);
    pthread_mutex_unlock(&mesh_registry_lock);
    return events;
}

static void *progress_thread(void *arg)
{
    (void)arg;
    unsigned idle = 0;
    while (!atomic_load_explicit(&mesh_pthread_stop, memory_order_relaxed)) {
        if (mesh_context_active_count() == 0) {
            /* nothing under way: look again soon, without a core */
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 200000};
            nanosleep(&ts, NULL);
            idle = 0;
            continue;
        }
        if (mesh_context_progress_others(NULL) > 0) idle = 0;
        else mesh_backoff(&idle);
    }
    return NULL;
}

void mesh_context_add_progress(void *obj, mesh_context_progress_fn fn)
{
    pthread_mutex_lock(&mesh_registry_lock);
    if (mesh_registry_len == mesh_registry_cap) {
        int cap = mesh_registry_cap > 0 ? 2 * mesh_registry_cap : 16;
        mesh_registry_entry_t *p = realloc(mesh_registry, (size_t)cap * sizeof(*p));
        if (p == NULL) {
            pthread_mutex_unlock(&mesh_registry_lock);
            mesh_log_error("cannot grow the progress registry to %d objects", cap);
            return;
        }
        mesh_registry = p;
        mesh_registry_cap = cap;
    }
    mesh_registry[mesh_registry_len++] = (mesh_registry_entry_t){.obj = obj, .fn = fn};
    if (!mesh_pthread_running && mesh_context_init() == MESH_OK &&
        mesh_config_bool("PROGRESS_THREAD")) {
        atomic_store(&mesh_pthread_stop, 0);
        if (pthread_create(&mesh_pthread, NULL, progress_thread, NULL) == 0)
            mesh_pthread_running = 1;
        else
            mesh_log_warn("cannot start the progress thread (MESH_PROGRESS_THREAD): %m");
    }
    pthread_mutex_unlock(&mesh_registry_lock);
}

void mesh_context_remove_progress(void *obj)
{
    pthread_mutex_lock(&mesh_registry_lock);
    for (int i = 0; i < mesh_registry_len; i++) {
        if (mesh_registry[i].obj == obj) {
            memmove(&mesh_registry[i], &mesh_registry[i + 1],
                    (size_t)(mesh_registry_len - i - 1) * sizeof(*mesh_registry));
            mesh_registry_len--;
            break;
        }
    }
    int join = mesh_pthread_running && mesh_registry_len == 0;
    if (join) {
        atomic_store(&mesh_pthread_stop, 1);
        mesh_pthread_running = 0;
    }
    pthread_mutex_unlock(&mesh_registry_lock);
    /* the thread only ever tries the lock, so it ends without it */
    if (join) pthread_join(mesh_pthread, NULL);
}
