/* Time, the progress table, and the backoff of loops that no wake-up serves. A waiter (wait.c)
 * spins for MESH_PROGRESS_SPIN microseconds, then sleeps until a peer or another thread wakes
 * it. With the default (auto) the spin is long once a communicator has shown that the ranks on
 * this machine each have a CPU: long enough to outlast the time slice of a busy process that
 * took the CPU of the rank waited for, since a waiter that slept meanwhile costs a wake-up, and
 * its idle CPU invites the scheduler to move tasks around. It is none when ranks share CPUs,
 * where spinning only keeps the rank we wait for off its CPU: there the waiter yields its CPU
 * for a while (MESH_PROGRESS_YIELD), until a yield comes back late, and then sleeps. */
#include <config.h> /* the generated one: _GNU_SOURCE for sched_getaffinity */
#include "libmesh/progress.h"
#include "libmesh/config.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MESH_BACKOFF_SPINS        200 /* pauses before the first sleep */
#define MESH_BACKOFF_SLEEP_MIN_NS 1000
#define MESH_BACKOFF_SLEEP_MAX_NS 100000
#define MESH_BACKOFF_SLEEP_STEP   4  /* sleeps of one length before doubling it */
#define MESH_SPIN_SHARED_US       0  /* auto: ranks outnumber CPUs */
#define MESH_SPIN_UNKNOWN_US      20 /* auto: before a communicator said */
/* auto: every rank on this machine has a CPU. Longer than the slice a busy process that shares
 * the peer's CPU runs for (some 3 ms; with 1000 the 2-rank all-reduce beside one busy process
 * took 2-4x longer per call at 256 KiB-1 MiB, measured with bench/contention.sh) */
#define MESH_SPIN_OWN_US     5000
#define MESH_YIELD_SHARED_US 200 /* auto: ranks outnumber CPUs */
/* a yield that gives the CPU back this late went to a process that runs long (a rank that
 * computes, or a busy process): the waiter sleeps now, where a wake-up preempts it */
#define MESH_YIELD_LATE_S 500e-6

static atomic_int mesh_progress_spin = -1;
static atomic_int mesh_progress_yield = -1;
static atomic_int mesh_progress_node_max; /* most ranks on this machine a communicator saw */

double mesh_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

MESH_API double mesh_time_now(void)
{
    return mesh_time();
}

static int progress_check_spin(const char *value, char *why, size_t len)
{
    if (mesh_progress_spin_parse(value, NULL) == 0)
        return 0;
    snprintf(why, len, "auto or a non-negative number of microseconds");
    return -1;
}

static const mesh_config_entry_t progress_entries[] = {
    {.name = "TIMEOUT",
     .dflt = "300",
     .type = MESH_CFG_DOUBLE,
     .range = "0.001..1e9",
     .doc = "Seconds a blocking operation may go without progress before it fails with a "
            "timeout that names the ranks it waits for."},
    {.name = "PROGRESS_SPIN",
     .dflt = "auto",
     .type = MESH_CFG_STRING,
     .check = progress_check_spin,
     .doc = "Microseconds a waiting rank polls (with the CPU's pause instruction) before it "
            "sleeps until a peer or another thread wakes it (a futex that shared-memory peers "
            "ring, the sockets of the network transports). auto: 5000 while the ranks on this "
            "machine (simulated nodes included) do not outnumber the CPUs a rank may run on, "
            "longer than a busy process that takes the peer's CPU runs before the peer gets it "
            "back; 0 when they do, where the rank waited for most likely waits for this CPU (a "
            "spin of even a microsecond, some 60 polls, costs more than it saves); 20 before a "
            "communicator says. A spin ends early when the rank lost its CPU in the middle of "
            "it (something else wants that CPU), and it yields or moves (MESH_PROGRESS_SPREAD) "
            "when a rank of this machine is queued on its CPU. 0 sleeps at once."},
    {.name = "PROGRESS_YIELD",
     .dflt = "auto",
     .type = MESH_CFG_STRING,
     .check = progress_check_spin,
     .doc = "Microseconds a waiting rank, after its spin, gives its CPU away with sched_yield() "
            "between polls before it sleeps. When ranks share CPUs the runnable processes the "
            "CPU goes to are mostly the ranks it waits for, and a yield hands over faster than "
            "a sleep and a wake-up. auto: 200 while the ranks on this machine (simulated nodes "
            "included) outnumber the CPUs a rank may run on, 0 otherwise. A yield that came back "
            "later than 500 us ends the yields of that wait: the CPU went to something that "
            "runs long (a rank that computes, or a busy process), which a wake-up preempts and "
            "a yield waits out. 0 never yields."},
    {.name = "PROGRESS_SPREAD",
     .dflt = "1",
     .type = MESH_CFG_BOOL,
     .doc = "Lets a spinning rank (MESH_PROGRESS_SPIN) move off a CPU on which another rank of "
            "this machine is queued behind it: when another CPU the thread may run on has no "
            "awake rank, the thread moves there (sched_setaffinity to that CPU, then back to "
            "its own mask), at most once per millisecond. Two ranks queued on one CPU while "
            "another runs a busy process hand the CPU to each other at every message, and the "
            "scheduler's balancer counts them as one busy task and leaves them so. Otherwise, "
            "and with 0, the rank yields the CPU to the one queued. A thread pinned to one CPU "
            "never moves."},
    {.name = "PROGRESS_SLICE",
     .dflt = "0.01",
     .type = MESH_CFG_DOUBLE,
     .range = "1e-5..10",
     .doc = "Longest sleep of a waiting rank, in seconds, before it looks again on its own: "
            "deadlines (MESH_TIMEOUT, of which it sleeps an eighth at most), dead peers and "
            "transports that cannot wake it are noticed this often while it waits."},
    {.name = "PROGRESS_THREAD",
     .dflt = "0",
     .type = MESH_CFG_BOOL,
     .doc = "Runs one thread per process that progresses every communicator with operations "
            "under way, so that operations started nonblocking complete while the caller "
            "computes without calling mesh_test or mesh_wait. It spins briefly while operations "
            "wait for peers (MESH_PROGRESS_SPIN, at most 50 us) and then sleeps until a peer "
            "wakes it, so that it does not take a core from the caller's computation."},
    {.name = NULL},
};

static const mesh_config_table_t progress_table = {"progress", progress_entries};

mesh_status_t mesh_progress_config_register(void)
{
    return mesh_config_register(&progress_table);
}

double mesh_default_timeout(void)
{
    if (mesh_progress_config_register() != MESH_OK)
        return 300.0;
    return mesh_config_double("TIMEOUT");
}

int mesh_progress_spin_parse(const char *text, long long *us)
{
    if (text == NULL)
        return -1;
    if (strcmp(text, "auto") == 0) {
        if (us)
            *us = -1;
        return 0;
    }
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || v < 0)
        return -1;
    if (us)
        *us = v > 1000000000 ? 1000000000 : v;
    return 0;
}

/* 1 when the ranks of this machine outnumber the CPUs a rank may run on, 0 when they do not, -1
 * before any communicator said how many ranks it has here. */
static int mesh_cpus_shared(void)
{
    int n = atomic_load_explicit(&mesh_progress_node_max, memory_order_relaxed);
    if (n <= 0)
        return -1;
    cpu_set_t set;
    int ncpu = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    return n > ncpu;
}

static int mesh_spin_auto(void)
{
    int shared = mesh_cpus_shared();
    return shared == 0 ? MESH_SPIN_OWN_US : shared > 0 ? MESH_SPIN_SHARED_US : MESH_SPIN_UNKNOWN_US;
}

static int mesh_yield_auto(void)
{
    return mesh_cpus_shared() == 1 ? MESH_YIELD_SHARED_US : 0;
}

/* A knob in microseconds, a number or auto (then auto_us()), read into *cache the first time and
 * again after it was reset to -1. */
static int mesh_backoff_us(atomic_int *cache, const char *knob, int (*auto_us)(void))
{
    int us = atomic_load_explicit(cache, memory_order_relaxed);
    if (us < 0) {
        long long v = -1;
        if (mesh_progress_config_register() == MESH_OK)
            mesh_progress_spin_parse(mesh_config_str(knob), &v);
        us = v < 0 ? auto_us() : (int)v;
        atomic_store_explicit(cache, us, memory_order_relaxed);
    }
    return us;
}

double mesh_progress_yield_s(void)
{
    return mesh_backoff_us(&mesh_progress_yield, "PROGRESS_YIELD", mesh_yield_auto) * 1e-6;
}

int mesh_progress_yield_back(double took_s)
{
    return took_s >= MESH_YIELD_LATE_S;
}

static int mesh_backoff_spin(void)
{
    return mesh_backoff_us(&mesh_progress_spin, "PROGRESS_SPIN", mesh_spin_auto);
}

void mesh_progress_node_ranks(int nranks)
{
    int cur = atomic_load_explicit(&mesh_progress_node_max, memory_order_relaxed);
    while (nranks > cur &&
           !atomic_compare_exchange_weak_explicit(&mesh_progress_node_max, &cur, nranks,
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
    if (nranks > cur) { /* recomputed on the next wait */
        atomic_store_explicit(&mesh_progress_spin, -1, memory_order_relaxed);
        atomic_store_explicit(&mesh_progress_yield, -1, memory_order_relaxed);
    }
}

double mesh_progress_spin_s(void)
{
    return mesh_backoff_spin() * 1e-6;
}

int mesh_progress_spread(void)
{
    static atomic_int spread = -1;
    int v = atomic_load_explicit(&spread, memory_order_relaxed);
    if (v < 0) {
        v = mesh_progress_config_register() != MESH_OK || mesh_config_bool("PROGRESS_SPREAD");
        atomic_store_explicit(&spread, v, memory_order_relaxed);
    }
    return v;
}

double mesh_progress_slice(void)
{
    static _Atomic double slice = -1;
    double s = atomic_load_explicit(&slice, memory_order_relaxed);
    if (s < 0) {
        s = 0.01;
        if (mesh_progress_config_register() == MESH_OK) {
            s = mesh_config_double("PROGRESS_SLICE");
            double t = mesh_config_double("TIMEOUT") / 8;
            if (t < s)
                s = t;
        }
        atomic_store_explicit(&slice, s, memory_order_relaxed);
    }
    return s;
}

void mesh_backoff(unsigned *idle)
{
    unsigned n = *idle;
    if (n != ~0u)
        *idle = n + 1;
    if (n < MESH_BACKOFF_SPINS) {
        mesh_cpu_relax();
        return;
    }
    n = (n - MESH_BACKOFF_SPINS) / MESH_BACKOFF_SLEEP_STEP;
    long ns = MESH_BACKOFF_SLEEP_MAX_NS;
    if (n < 7)
        ns = (long)MESH_BACKOFF_SLEEP_MIN_NS << n;
    if (ns > MESH_BACKOFF_SLEEP_MAX_NS)
        ns = MESH_BACKOFF_SLEEP_MAX_NS;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};
    nanosleep(&ts, NULL);
}
