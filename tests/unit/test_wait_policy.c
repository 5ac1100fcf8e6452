/* The waiting policy's auto values: how long a waiter spins and yields before it sleeps, as the
 * ranks on this machine compare with its CPUs, and the pause of yields after one that came back
 * late while more threads were runnable than ranks (the CPU went to a busy process, not to a
 * rank). Numbers given in the environment are kept as given, late yields or not. */
#include <config.h> /* the generated one: _GNU_SOURCE for sched_getaffinity */
#include "tests/harness/harness.h"
#include "libmesh/progress.h"
#include "libmesh/wait.h"

#include <sched.h>
#include <signal.h>
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

/* auto: spin 20 us before a communicator says, 1000 us and no yield while every rank has a CPU;
 * no spin and 200 us of yields once ranks outnumber the CPUs, paused for 100 ms by a late
 * yield while more threads are runnable than there are ranks (a busy process took the CPU), and
 * by nothing else */
static void check_auto(void)
{
    CHECK_MSG(us(mesh_progress_spin_s()) == 20, "spin %g s before any count",
              mesh_progress_spin_s());
    mesh_progress_node_ranks(cpus());
    CHECK_MSG(us(mesh_progress_spin_s()) == 1000, "spin %g s", mesh_progress_spin_s());
    CHECK(mesh_progress_yield_s() == 0);

    mesh_progress_node_ranks(cpus() + 1);
    CHECK_MSG(mesh_progress_spin_s() == 0, "spin %g s with ranks outnumbering the CPUs",
              mesh_progress_spin_s());
    CHECK_MSG(us(mesh_progress_yield_s()) == 200, "yield %g s", mesh_progress_yield_s());
    CHECK(mesh_progress_yield_back(20e-6) == 0);
    CHECK(mesh_progress_yield_back(499e-6) == 0);
    CHECK(us(mesh_progress_yield_s()) == 200);

    /* more busy processes than ranks: a late yield went to one of them */
    start_busy(cpus() + 2);
    int late = mesh_progress_yield_back(3e-3);
    stop_busy();
    CHECK(late == 1);
    CHECK_MSG(mesh_progress_yield_s() == 0, "yields not paused after a late one");
    nap(0.05);
    CHECK_MSG(mesh_progress_yield_s() == 0, "yields paused under 100 ms");
    nap(0.06);
    CHECK_MSG(us(mesh_progress_yield_s()) == 200, "yields still paused after 110 ms");

    /* a waiter yields first (or sleeps at once after a yield that came back late), and sleeps
     * once its 200 us of yields are over */
    mesh_waiter_t w;
    mesh_waiter_init(&w, -1);
    (void)mesh_waiter_idle(&w, NULL, NULL, 1e-3);
    nap(300e-6);
    int slept = 0;
    for (int i = 0; i < 3 && !slept; i++)
        slept = mesh_waiter_idle(&w, NULL, NULL, 1e-3);
    CHECK_MSG(slept, "the waiter still yields after its 200 us");

    /* fewer runnable threads than ranks: the late yield waited for a rank that computed */
    nap(0.11);
    mesh_progress_node_ranks(1 << 20);
    CHECK(us(mesh_progress_yield_s()) == 200);
    CHECK(mesh_progress_yield_back(3e-3) == 1);
    CHECK_MSG(us(mesh_progress_yield_s()) == 200, "yields paused after a rank computed");
}

/* MESH_PROGRESS_SPIN and MESH_PROGRESS_YIELD as numbers: kept, late yields or not */
static void check_forced(void)
{
    setenv("MESH_PROGRESS_SPIN", "7", 1);
    setenv("MESH_PROGRESS_YIELD", "300", 1);
    mesh_progress_node_ranks(cpus() + 1);
    CHECK(us(mesh_progress_spin_s()) == 7);
    CHECK(us(mesh_progress_yield_s()) == 300);
    CHECK(mesh_progress_yield_back(3e-3) == 1);
    CHECK_MSG(us(mesh_progress_yield_s()) == 300, "a given yield was paused");
}

int main(void)
{
    unsetenv("MESH_PROGRESS_SPIN");
    unsetenv("MESH_PROGRESS_YIELD");
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        check_forced();
        _exit(0);
    }
    check_auto();
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forced values' check failed");
    return 0;
}
