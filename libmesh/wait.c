/* Waiting without a core: the process's bell, its eventfd, and the sleep of a wait loop. */
#include <config.h> /* the generated one: _GNU_SOURCE */
#define MESH_LOG_SUBSYSTEM "progress"
#include "libmesh/wait.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A sleep whose sources cannot all wake it: naps from 1 us doubling to 100 us. */
#define WAIT_NAP_MIN_NS 1000
#define WAIT_NAP_MAX_NS 100000
/* A sleep that polls descriptors while shared-memory peers may ring the bell, which poll()
 * does not see: looks at the rings after 200 us, then after doubling times up to 1.6 ms while
 * nothing comes (a wait that long is rarely short). */
#define WAIT_MIXED_S         200e-6
#define WAIT_MIXED_DOUBLINGS 3
/* A thread moves to another CPU at most this often (MESH_PROGRESS_SPREAD): the scheduler may
 * put it back beside the rank it left, and then it moves again. */
#define WAIT_SPREAD_EVERY_S 0.001
/* Two looks at the clock this far apart in a spin mean that the thread lost its CPU between
 * them (the looks are some polls, a microsecond or two, apart): the spin ends. */
#define WAIT_PREEMPTED_S 200e-6
/* Idle polls between reads of the clock while spinning (a power of two). */
#define WAIT_CLOCK_EVERY 32

static pthread_mutex_t bell_lock = PTHREAD_MUTEX_INITIALIZER;
static mesh_bell_t *bell_self;
static int bell_pid; /* the process that created bell_self (a forked child makes its own) */
static char bell_name[MESH_BELL_NAME_MAX];
static mesh_bell_t bell_private; /* without shared memory: local wake-ups only */
static int wait_efd = -1;
static int wait_efd_pid;
static atomic_int wait_fd_sleepers; /* threads of this process polling descriptors */

/* The peers' bells this process mapped, one mapping each, kept until exit: a looker
 * (mesh_wait_peer_queued_here) reads bell_live without the lock, so a mapping must outlive any
 * look that may have loaded its address. Past BELL_PEERS_MAX, bells are mapped and unmapped
 * alone and nobody looks at them. */
#define BELL_PEERS_MAX 256
static struct {
    char name[MESH_BELL_NAME_MAX];
    mesh_bell_t *bell;
    int refs;
} bell_peers[BELL_PEERS_MAX];                            /* under bell_lock */
static _Atomic(mesh_bell_t *) bell_live[BELL_PEERS_MAX]; /* the bells in use, NULL otherwise */
static atomic_int bell_npeers;                           /* slots of bell_peers filled */

static void bell_unlink_at_exit(void)
{
    if (bell_name[0] && bell_pid == getpid())
        shm_unlink(bell_name);
}

static unsigned long long bell_pidns(void)
{
    struct stat sb;
    return stat("/proc/self/ns/pid", &sb) == 0 ? (unsigned long long)sb.st_ino : 0;
}

static mesh_bell_t *bell_create(void)
{
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
        rnd = (uint64_t)(mesh_time() * 1e9);
    snprintf(bell_name, sizeof(bell_name), "/mesh-bell-%d-%016llx", (int)getpid(),
             (unsigned long long)rnd);
    int fd = shm_open(bell_name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        mesh_log_debug("no bell for this process: shm_open %s: %m", bell_name);
        bell_name[0] = '\0';
        return NULL;
    }
    mesh_bell_t *b = MAP_FAILED;
    if (ftruncate(fd, sizeof(mesh_bell_t)) == 0)
        b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (b == MAP_FAILED) {
        mesh_log_debug("no bell for this process: sizing or mapping %s: %m", bell_name);
        shm_unlink(bell_name);
        bell_name[0] = '\0';
        return NULL;
    }
    b->pid = getpid();
    b->pidns = bell_pidns();
    atomic_store(&b->seq, 0);
    atomic_store(&b->sleepers, 0);
    atomic_store(&b->cpu, -1);
    atomic_thread_fence(memory_order_release);
    b->magic = MESH_BELL_MAGIC;
    static int registered;
    if (!registered && atexit(bell_unlink_at_exit) == 0)
        registered = 1;
    return b;
}

mesh_bell_t *mesh_bell_self(void)
{
    mesh_bell_t *b = bell_self;
    if (b != NULL && bell_pid == getpid())
        return b;
    pthread_mutex_lock(&bell_lock);
    if (bell_self == NULL || bell_pid != getpid()) {
        bell_self = bell_create();
        bell_pid = getpid();
    }
    b = bell_self;
    pthread_mutex_unlock(&bell_lock);
    return b;
}

const char *mesh_bell_name(void)
{
    return mesh_bell_self() != NULL ? bell_name : "";
}

static mesh_bell_t *bell_map_new(const char *name)
{
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        mesh_log_debug("cannot open the bell %s: %m", name);
        return NULL;
    }
    struct stat sb;
    mesh_bell_t *b = MAP_FAILED;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size == sizeof(mesh_bell_t))
        b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (b == MAP_FAILED || b->magic != MESH_BELL_MAGIC) {
        mesh_log_debug("the bell %s is not one", name);
        if (b != MAP_FAILED)
            munmap(b, sizeof(*b));
        return NULL;
    }
    return b;
}

mesh_bell_t *mesh_bell_map(const char *name)
{
    if (name == NULL || name[0] != '/' || memchr(name, '\0', MESH_BELL_NAME_MAX) == NULL)
        return NULL;
    pthread_mutex_lock(&bell_lock);
    int n = atomic_load_explicit(&bell_npeers, memory_order_relaxed), i = 0;
    while (i < n && strcmp(bell_peers[i].name, name) != 0)
        i++;
    mesh_bell_t *b = i < n ? bell_peers[i].bell : bell_map_new(name);
    if (b != NULL && i < BELL_PEERS_MAX) {
        if (i == n) {
            snprintf(bell_peers[i].name, sizeof(bell_peers[i].name), "%s", name);
            bell_peers[i].bell = b;
            atomic_store_explicit(&bell_npeers, n + 1, memory_order_release);
        }
        if (bell_peers[i].refs++ == 0)
            atomic_store_explicit(&bell_live[i], b, memory_order_release);
    }
    pthread_mutex_unlock(&bell_lock);
    return b;
}

void mesh_bell_unmap(mesh_bell_t *bell)
{
    if (bell == NULL)
        return;
    pthread_mutex_lock(&bell_lock);
    int n = atomic_load_explicit(&bell_npeers, memory_order_relaxed), i = 0;
    while (i < n && bell_peers[i].bell != bell)
        i++;
    if (i < n && --bell_peers[i].refs == 0)
        atomic_store_explicit(&bell_live[i], NULL, memory_order_relaxed);
    pthread_mutex_unlock(&bell_lock);
    if (i == n)
        munmap(bell, sizeof(*bell));
}

void mesh_wait_publish_cpu(void)
{
    mesh_bell_t *b = bell_self;
    int cpu = b != NULL ? sched_getcpu() : -1;
    if (cpu >= 0 && atomic_load_explicit(&b->cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&b->cpu, cpu, memory_order_relaxed);
}

/* The bell b of an awake thread of another process: the CPU it last polled on, else -1. */
static int bell_peer_cpu(const mesh_bell_t *b)
{
    const mesh_bell_t *me = bell_self;
    if (b == NULL || (me != NULL && b->pid == me->pid && b->pidns == me->pidns) ||
        atomic_load_explicit(&b->sleepers, memory_order_relaxed) != 0)
        return -1;
    return atomic_load_explicit(&b->cpu, memory_order_relaxed);
}

/* The CPU after cpu, cyclically, in mask and not in busy; -1 when there is none. */
static int wait_free_cpu(int cpu, const cpu_set_t *mask, const cpu_set_t *busy)
{
    for (int i = 1; i < CPU_SETSIZE; i++) {
        int c = (cpu + i) % CPU_SETSIZE;
        if (CPU_ISSET(c, mask) && !CPU_ISSET(c, busy))
            return c;
    }
    return -1;
}

int mesh_wait_spread(void)
{
    static _Thread_local double next;
    double now = mesh_time();
    if (now < next || !mesh_progress_spread())
        return 0;
    next = now + WAIT_SPREAD_EVERY_S;
    cpu_set_t mine, busy, to;
    int cpu = sched_getcpu();
    if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof(mine), &mine) != 0 ||
        CPU_COUNT(&mine) < 2)
        return 0;
    CPU_ZERO(&busy);
    CPU_SET(cpu, &busy);
    int n = atomic_load_explicit(&bell_npeers, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        int c = bell_peer_cpu(atomic_load_explicit(&bell_live[i], memory_order_acquire));
        if (c >= 0 && c < CPU_SETSIZE)
            CPU_SET(c, &busy);
    }
    int c = wait_free_cpu(cpu, &mine, &busy);
    if (c < 0)
        return 0;
    CPU_ZERO(&to);
    CPU_SET(c, &to);
    if (sched_setaffinity(0, sizeof(to), &to) != 0)
        return 0;
    if (sched_setaffinity(0, sizeof(mine), &mine) != 0)
        mesh_log_warn("could not give this thread its CPUs back after moving it to CPU %d: %m", c);
    mesh_log_debug("moved from CPU %d, where a rank of this machine waited, to CPU %d", cpu, c);
    mesh_wait_publish_cpu();
    return 1;
}

int mesh_wait_peer_queued_here(void)
{
    int n = atomic_load_explicit(&bell_npeers, memory_order_acquire);
    int cpu = n > 0 ? sched_getcpu() : -1;
    for (int i = 0; i < n && cpu >= 0; i++)
        if (bell_peer_cpu(atomic_load_explicit(&bell_live[i], memory_order_acquire)) == cpu)
            return 1;
    return 0;
}

void mesh_bell_wake(mesh_bell_t *bell)
{
    atomic_fetch_add_explicit(&bell->seq, 1, memory_order_release);
    int op = bell == &bell_private ? FUTEX_WAKE_PRIVATE : FUTEX_WAKE;
    syscall(SYS_futex, &bell->seq, op, INT_MAX, NULL, NULL, 0);
}

static mesh_bell_t *bell_local(void)
{
    mesh_bell_t *b = mesh_bell_self();
    return b != NULL ? b : &bell_private;
}

static int wait_eventfd(void)
{
    if (wait_efd >= 0 && wait_efd_pid == getpid())
        return wait_efd;
    pthread_mutex_lock(&bell_lock);
    if (wait_efd < 0 || wait_efd_pid != getpid()) {
        wait_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        wait_efd_pid = getpid();
        if (wait_efd < 0)
            mesh_log_debug("no eventfd for local wake-ups: %m");
    }
    int fd = wait_efd;
    pthread_mutex_unlock(&bell_lock);
    return fd;
}

void mesh_wait_wake_local(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    mesh_bell_t *b = bell_self != NULL ? bell_self : &bell_private;
    if (atomic_load_explicit(&b->sleepers, memory_order_relaxed) > 0)
        mesh_bell_wake(b);
    if (atomic_load_explicit(&wait_fd_sleepers, memory_order_relaxed) > 0 && wait_efd >= 0) {
        uint64_t one = 1;
        ssize_t n = write(wait_efd, &one, sizeof(one));
        (void)n; /* EAGAIN: a wake-up is pending already */
    }
}

void mesh_wait_set_fd(mesh_wait_set_t *set, int fd, short events)
{
    if (set->nfds == MESH_WAIT_MAX_FDS) {
        set->blind = 1;
        return;
    }
    set->fds[set->nfds++] = (struct pollfd){.fd = fd, .events = events};
}

static struct timespec wait_ts(double s)
{
    if (s < 0)
        s = 0;
    struct timespec ts = {.tv_sec = (time_t)s};
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    return ts;
}

/* Sleeps on the bell: the announcement (sleepers), then the last look, then the futex. */
static void sleep_bell(mesh_bell_t *b, int (*recheck)(void *), void *arg, double s)
{
    atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
    unsigned seq = atomic_load_explicit(&b->seq, memory_order_seq_cst);
    if (recheck == NULL || recheck(arg) <= 0) {
        struct timespec ts = wait_ts(s);
        int op = b == &bell_private ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT;
        syscall(SYS_futex, &b->seq, op, seq, &ts, NULL, 0);
    }
    atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_relaxed);
}

/* Polls the set's descriptors and the local eventfd; a mixed set announces itself on the bell
 * too, which a ring only counts (the sleep is short). */
static void sleep_fds(mesh_wait_set_t *set, mesh_bell_t *b, int (*recheck)(void *), void *arg,
                      double s)
{
    int efd = wait_eventfd();
    if (efd >= 0)
        mesh_wait_set_fd(set, efd, POLLIN);
    atomic_fetch_add_explicit(&wait_fd_sleepers, 1, memory_order_seq_cst);
    if (set->bell)
        atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
    if (recheck == NULL || recheck(arg) <= 0) {
        struct timespec ts = wait_ts(s);
        int rc = ppoll(set->fds, (nfds_t)set->nfds, &ts, NULL);
        if (rc > 0 && efd >= 0 && (set->fds[set->nfds - 1].revents & POLLIN)) {
            uint64_t v;
            ssize_t n = read(efd, &v, sizeof(v));
            (void)n;
        }
    }
    if (set->bell)
        atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&wait_fd_sleepers, 1, memory_order_relaxed);
}

void mesh_wait_sleep(int (*recheck)(void *), void *arg, double timeout_s, unsigned *naps)
{
    double slice = mesh_progress_slice();
    if (timeout_s <= 0 || timeout_s > slice)
        timeout_s = slice;
    mesh_wait_set_t set;
    set.bell = 0;
    set.blind = 0;
    set.nfds = 0;
    mesh_progress_arm_all(&set);
    mesh_bell_t *b = bell_local();
    if (set.blind) {
        /* a source that cannot wake us (or one busy in another thread): nap, still woken by
         * the bell's ringers */
        unsigned n = naps ? (*naps)++ : 0;
        long ns = n < 7 ? (long)WAIT_NAP_MIN_NS << n : WAIT_NAP_MAX_NS;
        if (ns > WAIT_NAP_MAX_NS)
            ns = WAIT_NAP_MAX_NS;
        if (timeout_s > ns * 1e-9)
            timeout_s = ns * 1e-9;
        sleep_bell(b, recheck, arg, timeout_s);
        return;
    }
    if (set.nfds == 0 || !set.bell) {
        if (naps)
            *naps = 0;
        if (set.nfds == 0)
            sleep_bell(b, recheck, arg, timeout_s);
        else
            sleep_fds(&set, b, recheck, arg, timeout_s);
        return;
    }
    unsigned n = naps ? (*naps)++ : 0;
    if (n > WAIT_MIXED_DOUBLINGS)
        n = WAIT_MIXED_DOUBLINGS;
    double mixed = WAIT_MIXED_S * (double)(1u << n);
    if (timeout_s > mixed)
        timeout_s = mixed;
    sleep_fds(&set, b, recheck, arg, timeout_s);
}

static double waiter_spin(const mesh_waiter_t *w)
{
    return w->spin_s >= 0 ? w->spin_s : mesh_progress_spin_s();
}

int mesh_waiter_spin(mesh_waiter_t *w)
{
    if (w->expired)
        return 0;
    if (w->polls == 0 && waiter_spin(w) <= 0) {
        w->expired = 1;
        return 0;
    }
    /* the clock is first read some polls into the spin, not when it starts: most waits end
     * within a few polls, and a read costs about as much as a poll */
    if ((w->polls & (WAIT_CLOCK_EVERY - 1)) == WAIT_CLOCK_EVERY - 1) {
        double now = mesh_time();
        if (w->polls < WAIT_CLOCK_EVERY)
            w->t0 = now;
        else if (now - w->t0 >= waiter_spin(w) || now - w->tlast >= WAIT_PREEMPTED_S) {
            w->expired = 1;
            return 0;
        }
        w->tlast = now;
        mesh_wait_publish_cpu();
        if (mesh_wait_peer_queued_here()) {
            w->polls++;
            if (!mesh_wait_spread())
                sched_yield();
            w->tlast = mesh_time();
            return 1;
        }
    }
    w->polls++;
    mesh_cpu_relax();
    return 1;
}

/* After the spin: yields the CPU while MESH_PROGRESS_YIELD lasts; 0 once it is over. */
static int waiter_yield(mesh_waiter_t *w)
{
    double t = mesh_time(), y = mesh_progress_yield_s();
    if (!w->yielding) {
        if (y <= 0)
            return 0;
        w->yielding = 1;
        w->t0 = t;
    } else if (t - w->t0 >= y) {
        return 0;
    }
    sched_yield();
    return !mesh_progress_yield_back(mesh_time() - t);
}

int mesh_waiter_idle(mesh_waiter_t *w, int (*recheck)(void *), void *arg, double timeout_s)
{
    if (mesh_waiter_spin(w))
        return 0;
    w->polls++;
    if (waiter_yield(w))
        return 0;
    mesh_wait_sleep(recheck, arg, timeout_s, &w->naps);
    return 1;
}
