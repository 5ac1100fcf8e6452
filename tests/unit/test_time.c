/* mesh_time_now is CLOCK_MONOTONIC in seconds: bracketed by two readings of that clock, never
 * going back over many calls, and advancing by a sleep's length (at least). */
#include "tests/harness/harness.h"
#include "mesh.h"

#include <time.h>

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void)
{
    for (int i = 0; i < 1000; i++) {
        double a = mono(), t = mesh_time_now(), b = mono();
        /* a double holds the nanoseconds of a monotonic clock to well under a microsecond */
        CHECK_MSG(t >= a - 1e-6 && t <= b + 1e-6, "%.9f outside [%.9f, %.9f]", t, a, b);
    }
    double prev = mesh_time_now();
    for (int i = 0; i < 100000; i++) {
        double t = mesh_time_now();
        CHECK_MSG(t >= prev, "went back from %.9f to %.9f", prev, t);
        prev = t;
    }
    double t0 = mesh_time_now();
    struct timespec nap = {0, 20 * 1000 * 1000};
    while (nanosleep(&nap, &nap) != 0)
        ;
    double slept = mesh_time_now() - t0;
    CHECK_MSG(slept >= 0.020 - 1e-6 && slept < 5.0, "a 20 ms sleep measured %.6f s", slept);
    return 0;
}
