/* The waiting policy's auto values: how long a waiter spins and yields before it sleeps, as the
 * ranks on this machine compare with its CPUs; a late yield ends only its own wait's yields.
 * Numbers given in the environment are kept as given. A spin ends when
 * it lost its CPU; a peer queued on the waiter's CPU is seen, and the waiter moves off. */
#include <config.h> /* the generated one: _GNU_SOURCE for sched_getaffinity */
#include "tests/harness/harness.h"
#include "libmesh/progress.h"
#include "libmesh/wait.h"

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* seconds as whole microseconds (the knobs are in microseconds) */
static long us(double s)
{
    return (long)(s * 1e6 + 0.5);
}

static int cpus(void)
{
    cpu_set_t set;
    CHECK(sched_getaffinity(0, sizeof(set), &set) == 0);
    return CPU_COUNT(&set);
}

/* Keeps n processes busy on this process's CPUs until stop_busy. */
static pid_t busy[64];
static int nbusy;

static void start_busy(int n)
{
    for (nbusy = 0; nbusy < n && nbusy < 64; nbusy++) {
        busy[nbusy] = fork();
        CHECK(busy[nbusy] >= 0);
        if (busy[nbusy] == 0)
            for (;;) {
            }
    }
    nap(0.02); /* until they run */
}

static void stop_busy(void)
{
    for (int i = 0; i < nbusy; i++) {
        kill(busy[i], SIGKILL);
        waitpid(busy[i], NULL, 0);
    }
    nbusy = 0;
}

/* auto: spin 20 us before a communicator says, 5000 us and no yield while every rank has a CPU;
 * no spin and 200 us of yields once ranks outnumber the CPUs. A yield that came back late ends
 * the yields of its wait only: busy processes or not, the next wait yields again. */
static void check_auto(void)
{
    CHECK_MSG(us(mesh_progress_spin_s()) == 20, "spin %g s before any count",
              mesh_progress_spin_s());
    mesh_progress_node_ranks(cpus());
    CHECK_MSG(us(mesh_progress_spin_s()) == 5000, "spin %g s", mesh_progress_spin_s());
    CHECK(mesh_progress_yield_s() == 0);

    mesh_progress_node_ranks(cpus() + 1);
    CHECK_MSG(mesh_progress_spin_s() == 0, "spin %g s with ranks outnumbering the CPUs",
              mesh_progress_spin_s());
    CHECK_MSG(us(mesh_progress_yield_s()) == 200, "yield %g s", mesh_progress_yield_s());
    CHECK(mesh_progress_yield_back(20e-6) == 0);
    CHECK(mesh_progress_yield_back(499e-6) == 0);
    start_busy(cpus() + 2);
    int late = mesh_progress_yield_back(3e-3);
    stop_busy();
    CHECK(late == 1);
    CHECK_MSG(us(mesh_progress_yield_s()) == 200, "a late yield changed the yields of others");

    /* a waiter yields first, and sleeps once its 200 us of yields are over */
    mesh_waiter_t w;
    mesh_waiter_init(&w, -1);
    (void)mesh_waiter_idle(&w, NULL, NULL, 1e-3);
    nap(300e-6);
    int slept = 0;
    for (int i = 0; i < 3 && !slept; i++)
        slept = mesh_waiter_idle(&w, NULL, NULL, 1e-3);
    CHECK_MSG(slept, "the waiter still yields after its 200 us");
}

/* A spin that lost its CPU for a millisecond ends within the next look at the clock; one that
 * kept it goes on. Retried when the machine took the CPU during the part that must spin. */
static void check_preempted(void)
{
    int ended = 0, kept = 0;
    for (int attempt = 0; attempt < 20 && !(ended && kept); attempt++) {
        mesh_waiter_t w;
        mesh_waiter_init(&w, 1.0);
        int spun = 0;
        while (spun < 200 && mesh_waiter_spin(&w))
            spun++;
        if (spun < 200)
            continue; /* preempted already */
        kept = 1;
        nap(1e-3);
        int more = 0;
        while (more < 64 && mesh_waiter_spin(&w))
            more++;
        ended = more < 64;
    }
    CHECK_MSG(kept, "a spin of 1 s did not last 200 polls in 20 attempts");
    CHECK_MSG(ended, "a spin that lost its CPU for 1 ms went on");
}

/* A peer's bell: a child process publishes the CPU this process runs on as its own; awake on
 * that CPU it is queued here, asleep or on another CPU it is not, nor once unmapped. A thread
 * that may run on two CPUs moves off the one it shares and gets its mask back (not again within
 * a millisecond); one pinned to a CPU stays, and so does any thread with spread set to 0. */
static void check_queued(int spread)
{
    cpu_set_t all, one;
    CHECK(sched_getaffinity(0, sizeof(all), &all) == 0);
    int cpu = sched_getcpu();
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
    CHECK(sched_getcpu() == cpu);
    CHECK(mesh_wait_peer_queued_here() == 0);

    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        mesh_bell_t *b = mesh_bell_self();
        char name[MESH_BELL_NAME_MAX] = "";
        if (b != NULL) {
            atomic_store(&b->cpu, cpu);
            snprintf(name, sizeof(name), "%s", mesh_bell_name());
        }
        char c;
        _exit(write(up[1], name, sizeof(name)) == (ssize_t)sizeof(name) && read(down[0], &c, 1) >= 0
                  ? 0
                  : 1);
    }
    char name[MESH_BELL_NAME_MAX];
    CHECK(read(up[0], name, sizeof(name)) == (ssize_t)sizeof(name));
    mesh_bell_t *peer = mesh_bell_map(name);
    CHECK_MSG(peer != NULL, "the child's bell %s", name);
    CHECK(mesh_bell_map(name) == peer); /* one mapping */
    mesh_bell_unmap(peer);
    CHECK(mesh_wait_peer_queued_here() == 1);
    atomic_store(&peer->sleepers, 1);
    CHECK_MSG(mesh_wait_peer_queued_here() == 0, "a sleeping peer is queued");
    atomic_store(&peer->sleepers, 0);
    atomic_store(&peer->cpu, cpu + 1);
    CHECK_MSG(mesh_wait_peer_queued_here() == 0, "a peer on another CPU is queued here");
    atomic_store(&peer->cpu, cpu);

    CHECK_MSG(mesh_wait_spread() == 0, "a thread pinned to one CPU moved");
    CHECK(sched_getcpu() == cpu);
    if (CPU_COUNT(&all) >= 2) {
        nap(2e-3);
        cpu_set_t two = one, now;
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (c != cpu && CPU_ISSET(c, &all)) {
                CPU_SET(c, &two);
                break;
            }
        CHECK(sched_setaffinity(0, sizeof(two), &two) == 0);
        int moved = mesh_wait_spread();
        CHECK(sched_getaffinity(0, sizeof(now), &now) == 0);
        CHECK_MSG(CPU_EQUAL(&now, &two), "the mask was not given back");
        if (spread) {
            CHECK_MSG(moved == 1, "no move off a CPU a peer is queued on");
            CHECK_MSG(sched_getcpu() != cpu, "still on CPU %d", cpu);
            CHECK_MSG(mesh_wait_spread() == 0, "moved twice within a millisecond");
        } else {
            CHECK_MSG(moved == 0, "moved with MESH_PROGRESS_SPREAD=0");
        }
    }
    mesh_bell_unmap(peer);
    CHECK_MSG(mesh_wait_peer_queued_here() == 0, "an unmapped peer is queued");
    CHECK(write(down[1], "x", 1) == 1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(sched_setaffinity(0, sizeof(all), &all) == 0);
}

/* MESH_PROGRESS_SPIN and MESH_PROGRESS_YIELD as numbers: kept, late yields or not; and
 * MESH_PROGRESS_SPREAD=0 */
static void check_forced(void)
{
    setenv("MESH_PROGRESS_SPIN", "7", 1);
    setenv("MESH_PROGRESS_YIELD", "300", 1);
    setenv("MESH_PROGRESS_SPREAD", "0", 1);
    mesh_progress_node_ranks(cpus() + 1);
    CHECK(us(mesh_progress_spin_s()) == 7);
    CHECK(us(mesh_progress_yield_s()) == 300);
    CHECK(mesh_progress_yield_back(3e-3) == 1);
    CHECK_MSG(us(mesh_progress_yield_s()) == 300, "a given yield was paused");
    check_queued(0);
}

int main(void)
{
    unsetenv("MESH_PROGRESS_SPIN");
    unsetenv("MESH_PROGRESS_YIELD");
    unsetenv("MESH_PROGRESS_SPREAD");
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        check_forced();
        _exit(0);
    }
    check_auto();
    check_preempted();
    check_queued(1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forced values' check failed");
    return 0;
}
