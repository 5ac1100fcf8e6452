/*
 * The per-element loops of combine and its backward pass. They bound the layer's throughput
 * beside the all-to-all, so this file is built to vectorise (as libmesh's reductions are): each
 * element is independent and summed in a fixed order, so vectorising changes no result.
 */
#pragma GCC optimize("O3")

#include "ep.h"

/* out = sum of w[j] * rows[j] over n rows, in order, in double, rounded once; in one pass for
 * the usual n (the sums are the same as the general loop's). */
void mesh_ep_weighted_sum(char *out, const char **rows, const double *w, int n, size_t hidden,
                          mesh_dtype_t dtype, double *acc)
{
    if (n <= 2 && dtype == MESH_FP32) {
        float *o = (float *)out;
        const float *a = (const float *)rows[0], *b = (const float *)rows[n - 1];
        if (n == 1)
            for (size_t h = 0; h < hidden; h++)
                o[h] = (float)(w[0] * a[h]);
        else
            for (size_t h = 0; h < hidden; h++)
                o[h] = (float)(w[0] * a[h] + w[1] * b[h]);
        return;
    }
    if (n <= 2) {
        if (n == 1)
            for (size_t h = 0; h < hidden; h++)
                mesh_ep_store(out, h, w[0] * mesh_ep_load(rows[0], h, dtype), dtype);
        else
            for (size_t h = 0; h < hidden; h++)
                mesh_ep_store(out, h,
                              w[0] * mesh_ep_load(rows[0], h, dtype) +
                                  w[1] * mesh_ep_load(rows[1], h, dtype),
                              dtype);
        return;
    }
    for (size_t h = 0; h < hidden; h++)
        acc[h] = w[0] * mesh_ep_load(rows[0], h, dtype);
    for (int j = 1; j < n; j++)
        for (size_t h = 0; h < hidden; h++)
            acc[h] += w[j] * mesh_ep_load(rows[j], h, dtype);
    for (size_t h = 0; h < hidden; h++)
        mesh_ep_store(out, h, acc[h], dtype);
}
