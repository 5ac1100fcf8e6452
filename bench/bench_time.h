/* The median of the benches that time steps themselves (cp, expert, pp, zero, train): one
 * definition, so that they all report the same statistic. Their clock is mesh_time_now(). */
#ifndef MESH_BENCH_TIME_H
#define MESH_BENCH_TIME_H

#include <stdlib.h>

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorted in place); 0 when n is 0. */
static inline double bench_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
