/* Time and polite waiting. A waiting rank spins for MESH_PROGRESS_SPIN idle polls (cheap wake-up
 * when every rank has a core), then yields, then sleeps for growing intervals (1 us to 100 us) so
 * that oversubscribed ranks hand their core to the rank they wait for. With the default (auto)
 * the spin is long once a communicator has shown that the ranks on this machine each have a
 * CPU: a sleep costs tens of microseconds however short it is asked to be. */
#include <config.h> /* the generated one: _GNU_SOURCE for sched_getaffinity */
#include "libmesh/progress.h"
#include "libmesh/config.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MESH_BACKOFF_YIELDS 16      /* sched_yield() calls before the first sleep */
#define MESH_BACKOFF_SLEEP_MIN_NS 1000
#define MESH_BACKOFF_SLEEP_MAX_NS 100000
#define MESH_BACKOFF_SLEEP_STEP 4   /* sleeps of one length before doubling it */
#define MESH_SPIN_SHARED 200        /* auto: ranks share CPUs (or nothing is known yet) */
#define MESH_SPIN_OWN 20000         /* auto: every rank on this machine has a CPU */
/* A long spin yields once every this many polls (a power of two): 0.4 ms or more of polling.
 * Ranks that yield much more often stay "cache hot" to Linux's load balancer when they start
 * on the same CPU (as a launcher's children often do), so it seldom moves one to an idle CPU,
 * and every step of a collective waits for the other rank's yield: 8-15 us for an 8-byte
 * all-reduce of 2 ranks that takes 0.3 us on a CPU each. */
#define MESH_SPIN_YIELD_EVERY 16384

static atomic_int mesh_progress_spin = -1;
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
    if (mesh_progress_spin_parse(value, NULL) == 0) return 0;
    snprintf(why, len, "auto or a non-negative number of polls");
    return -1;
}

static const mesh_config_entry_t progress_entries[] = {
    {.name = "TIMEOUT", .dflt = "300", .type = MESH_CFG_DOUBLE, .range = "0.001..1e9",
     .doc = "Seconds a blocking operation may go without progress before it fails with a "
            "timeout that names the ranks it waits for."},
    {.name = "PROGRESS_SPIN", .dflt = "auto", .type = MESH_CFG_STRING,
     .check = progress_check_spin,
     .doc = "Idle polls a waiting rank spins before it yields the core to others. auto: 20000 "
            "(about a millisecond) while the ranks on this machine (simulated nodes included) do "
            "not outnumber the CPUs a rank may run on, 200 when they do or before a communicator "
            "says. A longer spin yields once every 16384 polls."},
    {.name = "PROGRESS_THREAD", .dflt = "0", .type = MESH_CFG_BOOL,
     .doc = "Runs one thread per process that progresses every communicator with operations "
            "under way, so that operations started nonblocking complete while the caller "
            "computes without calling mesh_test or mesh_wait. It spins while operations wait "
            "for peers: for callers that compute for long between calls, with a core to spare."},
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

int mesh_progress_spin_parse(const char *text, long long *polls)
{
    if (text == NULL)
        return -1;
    if (strcmp(text, "auto") == 0) {
        if (polls)
            *polls = -1;
        return 0;
    }
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || v < 0)
        return -1;
    if (polls)
        *polls = v > 1000000000 ? 1000000000 : v;
    return 0;
}

static int mesh_spin_auto(void)
{
    int n = atomic_load_explicit(&mesh_progress_node_max, memory_order_relaxed);
    if (n <= 0)
        return MESH_SPIN_SHARED;
    cpu_set_t set;
    int ncpu = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    return n <= ncpu ? MESH_SPIN_OWN : MESH_SPIN_SHARED;
}

static int mesh_backoff_spin(void)
{
    int spin = atomic_load_explicit(&mesh_progress_spin, memory_order_relaxed);
    if (spin < 0) {
        long long v = -1;
        if (mesh_progress_config_register() == MESH_OK)
            mesh_progress_spin_parse(mesh_config_str("PROGRESS_SPIN"), &v);
        spin = v < 0 ? mesh_spin_auto() : (int)v;
        atomic_store_explicit(&mesh_progress_spin, spin, memory_order_relaxed);
    }
    return spin;
}

void mesh_progress_node_ranks(int nranks)
{
    int cur = atomic_load_explicit(&mesh_progress_node_max, memory_order_relaxed);
    while (nranks > cur &&
           !atomic_compare_exchange_weak_explicit(&mesh_progress_node_max, &cur, nranks,
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
    if (nranks > cur) /* recomputed on the next wait */
        atomic_store_explicit(&mesh_progress_spin, -1, memory_order_relaxed);
}

int mesh_backoff_spins(unsigned idle)
{
    return idle < (unsigned)mesh_backoff_spin() &&
           (idle & (MESH_SPIN_YIELD_EVERY - 1)) != MESH_SPIN_YIELD_EVERY - 1;
}

void mesh_backoff(unsigned *idle)
{
    unsigned n = *idle;
    if (n != ~0u)
        *idle = n + 1;
    unsigned spin = (unsigned)mesh_backoff_spin();
    if (n < spin) {
        /* a long spin still yields now and then: when something else wants this CPU (another
         * job, or ranks that outnumber the CPUs unseen), it runs within a millisecond; when
         * nothing does, sched_yield returns at once */
        if ((n & (MESH_SPIN_YIELD_EVERY - 1)) == MESH_SPIN_YIELD_EVERY - 1)
            sched_yield();
        else
            mesh_cpu_relax();
        return;
    }
    n -= spin;
    if (n < MESH_BACKOFF_YIELDS) {
        sched_yield();
        return;
    }
    n = (n - MESH_BACKOFF_YIELDS) / MESH_BACKOFF_SLEEP_STEP;
    long ns = MESH_BACKOFF_SLEEP_MAX_NS;
    if (n < 7)
        ns = (long)MESH_BACKOFF_SLEEP_MIN_NS << n;
    if (ns > MESH_BACKOFF_SLEEP_MAX_NS)
        ns = MESH_BACKOFF_SLEEP_MAX_NS;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};
    nanosleep(&ts, NULL);
}
