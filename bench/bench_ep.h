/* Expert dispatch + combine for the benchmarks (bench_ep.c): mesh-bench's dispatch_combine op
 * and expert-bench share the routing. */
#ifndef MESH_BENCH_EP_H
#define MESH_BENCH_EP_H

#include "mesh.h"
#include "mesh/expert.h"
#include <stddef.h>
#include <stdint.h>

/* Each token's k distinct experts of E, each drawn with probability proportional to
 * 1 / (e + 1)^skew among those left (0: uniform); the same seed gives the same routing.
 * 0, or -1 when out of memory. */
int bench_ep_route(int32_t *ids, size_t tokens, int E, int k, double skew, uint64_t seed);

/* "flat", "hier" or "auto" (up to a ',' or the end): 0, or -1 for another word. */
int bench_ep_path(const char *text, mesh_ep_path_t *path);

/* mesh-bench's dispatch_combine: count elements of this rank's token rows, hidden
 * min(count, BENCH_EP_HIDDEN) wide, dispatched to 2 x ranks experts (top-2, skew) and
 * combined back with weights 1/2 by identity experts, so out equals in. The ep handle and the
 * layout are kept while comm and count stay the same. */
mesh_status_t bench_ep_run(mesh_comm_h comm, const void *in, void *out, size_t count,
                           mesh_dtype_t dtype, double skew, mesh_ep_path_t path);
/* The path of the last layout: "flat" or "hier". */
const char *bench_ep_algo(void);
void bench_ep_free(void);

#endif
