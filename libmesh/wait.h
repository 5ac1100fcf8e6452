/* Waiting for peers without a core: after a bounded spin, a waiting thread sleeps until
 * something it may have to act on happens, rather than yielding to whatever else runs here.
 *
 * Wake-ups come from the transports, which say how they can be waited for (transports/tl.h,
 * wait_arm): a shared-memory peer rings this process's bell, a futex word in a small
 * shared-memory object that every peer maps; a network transport gives file descriptors to poll.
 * Another thread of this process that completes or posts an operation rings the bell too (and
 * writes the process's eventfd when a waiter polls descriptors). Every sleep is bounded by
 * MESH_PROGRESS_SLICE, so that deadlines, dead peers and transports that cannot wake anyone are
 * still noticed in time. */
#ifndef MESH_WAIT_H
#define MESH_WAIT_H

#include "mesh.h"
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>

#define MESH_BELL_MAGIC    0x4c4c4542u /* "BELL" */
#define MESH_BELL_NAME_MAX 48

/* The bell of a process. seq is the futex word: a ring adds one and wakes its sleepers.
 * sleepers counts the threads that announced they sleep on it, so that a ring costs the load of
 * a line that nobody writes while nobody sleeps. cpu is the CPU its waiting threads last polled
 * on (-1 before any did), written only when it changes: a peer that waits on that CPU while this
 * process is awake knows that it keeps this process from running. */
typedef struct {
    uint32_t magic;
    int32_t pid;
    uint64_t pidns;
    _Alignas(64) atomic_uint seq;
    _Alignas(64) atomic_int sleepers;
    _Alignas(64) atomic_int cpu;
} mesh_bell_t;

/* This process's bell, created on first use (a shared-memory object "/mesh-bell-<pid>-<random>"
 * that lives as long as the process; names left by killed processes are removed by the next
 * creator), or NULL when shared memory is unavailable. */
mesh_bell_t *mesh_bell_self(void);
/* Its name for peers to map ("" without one). */
const char *mesh_bell_name(void);
/* Maps a peer's bell by name; NULL (logged at debug level) when it cannot. A bell mapped twice
 * is one mapping. The bells mapped are the peers that mesh_wait_peer_queued_here looks at; their
 * mappings stay until the process exits, so that a look that races an unmap still reads
 * mapped memory. */
mesh_bell_t *mesh_bell_map(const char *name);
void mesh_bell_unmap(mesh_bell_t *bell);
/* Writes this process's CPU into its bell when it changed. */
void mesh_wait_publish_cpu(void);
/* 1 when a peer whose bell this process mapped is awake and last polled on the CPU the caller
 * runs on: it waits for this CPU, so that a spin here only delays it. */
int mesh_wait_peer_queued_here(void);
/* Moves the calling thread to a CPU of its mask on which no awake peer polled last, and back to
 * its mask (MESH_PROGRESS_SPREAD; at most once per millisecond per thread). Returns 1 when it
 * moved. */
int mesh_wait_spread(void);
/* Wakes every thread sleeping on bell. */
void mesh_bell_wake(mesh_bell_t *bell);

/* Rings a bell when somebody sleeps on it. The caller published its writes before (the fence
 * orders them before the look at sleepers, as a sleeper's announcement is ordered before its
 * last look for work). */
static inline void mesh_bell_ring(mesh_bell_t *bell)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&bell->sleepers, memory_order_relaxed) > 0)
        mesh_bell_wake(bell);
}

/* mesh_bell_ring for a caller whose writes ended with a sequentially consistent store (on x86
 * a locked instruction, which orders the look at sleepers after it without a fence). */
static inline void mesh_bell_ring_after_sc(mesh_bell_t *bell)
{
    if (atomic_load_explicit(&bell->sleepers, memory_order_seq_cst) > 0)
        mesh_bell_wake(bell);
}

/* Rings this process's own bell and eventfd when a thread of it sleeps: something it may wait
 * for completed, or an operation was posted, or a communicator aborted. */
void mesh_wait_wake_local(void);

/* What one sleep waits for, gathered from every object of the progress registry. */
#define MESH_WAIT_MAX_FDS 128
typedef struct mesh_wait_set {
    int bell;  /* a source rings this process's bell */
    int blind; /* a source that cannot wake a sleeper, or one that could not be asked: nap */
    int nfds;
    struct pollfd fds[MESH_WAIT_MAX_FDS];
} mesh_wait_set_t;

/* Adds a descriptor to poll; too many make the set blind. */
void mesh_wait_set_fd(mesh_wait_set_t *set, int fd, short events);

/* The state of one wait loop. */
typedef struct {
    unsigned polls; /* idle polls since something last moved */
    unsigned naps;  /* short sleeps in a row (blind or mixed sources) */
    int expired;    /* the spin is over: idle polls yield, then sleep */
    int yielding;   /* the spin is over and the yields (MESH_PROGRESS_YIELD) are not */
    double t0;      /* when the spin began; once it expired, when the yields began */
    double tlast;   /* the spin's last look at the clock */
    double spin_s;  /* < 0: MESH_PROGRESS_SPIN */
} mesh_waiter_t;

static inline void mesh_waiter_init(mesh_waiter_t *w, double spin_s)
{
    w->polls = 0;
    w->naps = 0;
    w->expired = 0;
    w->yielding = 0;
    w->t0 = 0;
    w->tlast = 0;
    w->spin_s = spin_s;
}

/* Something moved: the next idle poll starts a new spin. */
static inline void mesh_waiter_reset(mesh_waiter_t *w)
{
    w->polls = 0;
    w->naps = 0;
    w->expired = 0;
    w->yielding = 0;
}

/* While the spin lasts, pauses the CPU once and returns 1; after it, returns 0 and does nothing
 * (a loop may keep a lock across the rounds that return 1). A spin ends early when the thread
 * lost its CPU in the middle of it: something else wants that CPU. Every few polls it publishes
 * this process's CPU and, when a peer is queued on that CPU (mesh_wait_peer_queued_here), moves to
 * another (mesh_wait_spread) or yields the CPU to it instead of the pause. */
int mesh_waiter_spin(mesh_waiter_t *w);

/* A poll found nothing to do. While the spin lasts, pauses the CPU once; after it, while ranks
 * of this machine outnumber its CPUs, yields the CPU for MESH_PROGRESS_YIELD (the runnable
 * processes it goes to are mostly the ranks it waits for; a yield that comes back late ends
 * them, see mesh_progress_yield_back); after that, sleeps until a wake-up,
 * at most timeout_s (or MESH_PROGRESS_SLICE when shorter). recheck(arg) runs after
 * the sleep is announced and before it begins: it polls once more (a message that arrived before
 * the announcement rings nobody) and returns > 0 when something moved, which cancels the sleep.
 * Returns 1 when it slept or napped, 0 when it only spun. */
int mesh_waiter_idle(mesh_waiter_t *w, int (*recheck)(void *arg), void *arg, double timeout_s);

/* mesh_waiter_idle's sleep alone: sleeps until a wake-up or timeout_s. */
void mesh_wait_sleep(int (*recheck)(void *arg), void *arg, double timeout_s, unsigned *naps);

#endif
