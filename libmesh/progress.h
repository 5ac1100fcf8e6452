/* Time, deadlines and polite waiting. */
#ifndef MESH_PROGRESS_H
#define MESH_PROGRESS_H

#include "mesh.h"
#include <stdint.h>

/* Monotonic seconds. */
double mesh_time(void);

/* Pauses the CPU for one round of a spin (the pause instruction where there is one). */
static inline void mesh_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/* Backoff for loops that wait for something no wake-up announces (connection set-up, a
 * library transport's flush): pauses the CPU a few hundred times, then sleeps for growing
 * intervals (1 us to 100 us). Reset *idle to 0 whenever progress was made. Waits for operations
 * use libmesh/wait.h instead, which sleeps until a peer wakes them. */
void mesh_backoff(unsigned *idle);

/* Microseconds a waiter spins, as MESH_PROGRESS_SPIN sets it: "auto" (*us = -1) or a
 * non-negative number. us may be NULL. Returns 0, or -1 for any other text. */
int mesh_progress_spin_parse(const char *text, long long *us);
/* A communicator found nranks ranks on this machine (its node, or more when simulated nodes share
 * the machine): with MESH_PROGRESS_SPIN=auto, waiting ranks spin long when they have a CPU each
 * and briefly when they share CPUs (the largest count reported wins). */
void mesh_progress_node_ranks(int nranks);
/* The spin of a waiter in seconds (MESH_PROGRESS_SPIN, auto resolved). */
double mesh_progress_spin_s(void);
/* Seconds a waiter yields its CPU after the spin (MESH_PROGRESS_YIELD; auto: only while the
 * ranks of this machine outnumber its CPUs). */
double mesh_progress_yield_s(void);
/* A waiter's sched_yield() gave the CPU back after took_s seconds: returns 1 when that was late
 * (the CPU went to a process that runs long, not to a rank that waits), so the waiter sleeps
 * now. */
int mesh_progress_yield_back(double took_s);
/* Whether a waiter may move to another CPU when a rank is queued on its own (MESH_PROGRESS_SPREAD,
 * libmesh/wait.c). */
int mesh_progress_spread(void);
/* The longest sleep of a waiter in seconds: MESH_PROGRESS_SLICE, and no more than an eighth
 * of MESH_TIMEOUT, so that deadlines pass on time. */
double mesh_progress_slice(void);

/* Default timeout of blocking waits, from MESH_TIMEOUT (seconds). */
double mesh_default_timeout(void);

/* The progress table: MESH_TIMEOUT, MESH_PROGRESS_SPIN, MESH_PROGRESS_SLICE,
 * MESH_PROGRESS_THREAD. */
mesh_status_t mesh_progress_config_register(void);

/* Registry of live communicators (progress_registry.c), opaque to libmesh: mesh_progress(), the
 * waits that keep other communicators moving, and the progress thread (MESH_PROGRESS_THREAD)
 * call fn for each. fn must not block: it tries the object's own lock and returns 0 when that is
 * taken. Once remove returns, no sweep calls fn for the object any more. */
typedef int (*mesh_progress_fn)(void *obj, int idle_too);
/* Adds to a sleep's wait set what wakes a waiter when the object has something to do
 * (libmesh/wait.h); must not block either: an object whose lock is taken makes the set blind. */
struct mesh_wait_set;
typedef void (*mesh_progress_arm_fn)(void *obj, struct mesh_wait_set *set);
void mesh_progress_add(void *obj, mesh_progress_fn fn, mesh_progress_arm_fn arm);
void mesh_progress_remove(void *obj);
/* Calls fn of every object; returns the events. */
int mesh_progress_all(void);
/* The same for every object but skip, unless another thread is sweeping already. */
int mesh_progress_others(void *skip);
/* Called by a wait that has been idle for a while: every 50 ms at most, it also progresses the
 * objects with nothing under way (idle_too), so that they answer their peers' control messages
 * (probes of a timed-out wait) while this thread waits elsewhere. */
void mesh_progress_idle(void);
/* Gathers the wait set of every object (a thread sweeping makes the set blind). */
void mesh_progress_arm_all(struct mesh_wait_set *set);
/* Objects with operations under way, counted by the objects (+1 when they get their first, -1
 * when they are done with their last), so that a wait sweeps the others only when there are. */
void mesh_progress_active_add(int delta);
int mesh_progress_active_count(void);

#endif
