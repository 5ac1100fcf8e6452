/* Time and polite waiting. A waiting rank spins for MESH_PROGRESS_SPIN idle polls (cheap wake-up
 * when every rank has a core), then yields, then sleeps for growing intervals (1 us to 100 us) so
 * that oversubscribed ranks hand their core to the rank they wait for. */
#include "libmesh/progress.h"
#include "libmesh/config.h"
#include "libmesh/context.h"

#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#define MESH_BACKOFF_YIELDS 16      /* sched_yield() calls before the first sleep */
#define MESH_BACKOFF_SLEEP_MIN_NS 1000
#define MESH_BACKOFF_SLEEP_MAX_NS 100000
#define MESH_BACKOFF_SLEEP_STEP 4   /* sleeps of one length before doubling it */

static atomic_int mesh_progress_spin = -1;

double mesh_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double mesh_default_timeout(void)
{
    if (mesh_context_init() != MESH_OK)
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

static int mesh_backoff_spin(void)
{
    int spin = atomic_load_explicit(&mesh_progress_spin, memory_order_relaxed);
    if (spin < 0) {
        long long v = mesh_context_init() == MESH_OK ? mesh_config_int("PROGRESS_SPIN") : 200;
        spin = v < 0 ? 0 : v > 1000000000 ? 1000000000 : (int)v;
        atomic_store_explicit(&mesh_progress_spin, spin, memory_order_relaxed);
    }
    return spin;
}

void mesh_backoff(unsigned *idle)
{
    unsigned n = *idle;
    if (n != ~0u)
        *idle = n + 1;
    unsigned spin = (unsigned)mesh_backoff_spin();
    if (n < spin) {
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
