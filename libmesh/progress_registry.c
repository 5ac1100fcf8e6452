/* The registry of objects that mesh_progress(), cross-communicator waits and the progress thread
 * drive. */
#include "libmesh/config.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "libmesh/wait.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    void *obj;
    mesh_progress_fn fn;
    mesh_progress_arm_fn arm;
} mesh_registry_entry_t;

static pthread_mutex_t mesh_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static mesh_registry_entry_t *mesh_registry;
static int mesh_registry_len, mesh_registry_cap;
static atomic_int mesh_registry_active;

/* The progress thread, while the registry holds objects and MESH_PROGRESS_THREAD is set. */
static pthread_t mesh_pthread;
static int mesh_pthread_running;
static atomic_int mesh_pthread_stop;

void mesh_progress_active_add(int delta)
{
    atomic_fetch_add_explicit(&mesh_registry_active, delta, memory_order_relaxed);
    /* the progress thread sleeps while nothing is under way */
    if (delta > 0)
        mesh_wait_wake_local();
}

int mesh_progress_active_count(void)
{
    return atomic_load_explicit(&mesh_registry_active, memory_order_relaxed);
}

/* Callers hold the lock. The callbacks do not block, so holding it across them only keeps a
 * removal (and the free that follows it) waiting until the sweep is done. */
static int sweep(void *skip, int idle_too)
{
    int events = 0;
    for (int i = 0; i < mesh_registry_len; i++) {
        if (mesh_registry[i].obj == skip)
            continue;
        int n = mesh_registry[i].fn(mesh_registry[i].obj, idle_too);
        if (n > 0)
            events += n;
    }
    return events;
}

int mesh_progress_all(void)
{
    pthread_mutex_lock(&mesh_registry_lock);
    int events = sweep(NULL, 1);
    pthread_mutex_unlock(&mesh_registry_lock);
    return events;
}

int mesh_progress_others(void *skip)
{
    /* a thread sweeping already moves them all */
    if (pthread_mutex_trylock(&mesh_registry_lock) != 0)
        return 0;
    int events = sweep(skip, 0);
    pthread_mutex_unlock(&mesh_registry_lock);
    return events;
}

void mesh_progress_idle(void)
{
    static __thread double next;
    double now = mesh_time();
    if (now < next || pthread_mutex_trylock(&mesh_registry_lock) != 0)
        return;
    next = now + 0.05;
    sweep(NULL, 1);
    pthread_mutex_unlock(&mesh_registry_lock);
}

void mesh_progress_arm_all(struct mesh_wait_set *set)
{
    if (pthread_mutex_trylock(&mesh_registry_lock) != 0) {
        set->blind = 1; /* a sweep is under way: look again soon */
        return;
    }
    for (int i = 0; i < mesh_registry_len; i++)
        if (mesh_registry[i].arm)
            mesh_registry[i].arm(mesh_registry[i].obj, set);
    pthread_mutex_unlock(&mesh_registry_lock);
}

static int progress_thread_busy(void *arg)
{
    (void)arg;
    return atomic_load_explicit(&mesh_pthread_stop, memory_order_relaxed) ||
           mesh_progress_others(NULL) > 0;
}

static int progress_thread_posted(void *arg)
{
    (void)arg;
    return atomic_load_explicit(&mesh_pthread_stop, memory_order_relaxed) ||
           mesh_progress_active_count() > 0;
}

/* The progress thread spins briefly (it drives operations while their caller computes, and
 * where CPUs are few its spinning would take them from that computation), then sleeps until a
 * peer or a post wakes it. */
#define PROGRESS_THREAD_SPIN_MAX_S 50e-6

static void *progress_thread(void *arg)
{
    (void)arg;
    double spin = mesh_progress_spin_s();
    mesh_waiter_t w;
    mesh_waiter_init(&w, spin < PROGRESS_THREAD_SPIN_MAX_S ? spin : PROGRESS_THREAD_SPIN_MAX_S);
    while (!atomic_load_explicit(&mesh_pthread_stop, memory_order_relaxed)) {
        if (mesh_progress_active_count() == 0) {
            /* nothing under way: sleep until an operation is posted (or the slice ends) */
            mesh_wait_sleep(progress_thread_posted, NULL, -1, NULL);
            mesh_waiter_reset(&w);
            continue;
        }
        if (mesh_progress_others(NULL) > 0) {
            mesh_waiter_reset(&w);
        } else if (mesh_waiter_idle(&w, progress_thread_busy, NULL, -1)) {
            mesh_progress_idle();
        }
    }
    return NULL;
}

void mesh_progress_add(void *obj, mesh_progress_fn fn, mesh_progress_arm_fn arm)
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
    mesh_registry[mesh_registry_len++] = (mesh_registry_entry_t){.obj = obj, .fn = fn, .arm = arm};
    if (!mesh_pthread_running && mesh_progress_config_register() == MESH_OK &&
        mesh_config_bool("PROGRESS_THREAD")) {
        atomic_store(&mesh_pthread_stop, 0);
        if (pthread_create(&mesh_pthread, NULL, progress_thread, NULL) == 0)
            mesh_pthread_running = 1;
        else
            mesh_log_warn("cannot start the progress thread (MESH_PROGRESS_THREAD): %m");
    }
    pthread_mutex_unlock(&mesh_registry_lock);
}

void mesh_progress_remove(void *obj)
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
        mesh_wait_wake_local();
    }
    pthread_mutex_unlock(&mesh_registry_lock);
    /* the thread only ever tries the lock, so it ends without it */
    if (join)
        pthread_join(mesh_pthread, NULL);
}
