/* A loopback port for a test's own listener (libmesh/listen_port.h, as meshrun draws rank 0's),
 * from a seed per process, so that tests running side by side do not all try the same ports
 * first. */
#ifndef MESH_TEST_FREE_PORT_H
#define MESH_TEST_FREE_PORT_H

#include "libmesh/listen_port.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline int mesh_test_port_rand(void *seed, unsigned *out)
{
    *out = (unsigned)rand_r((unsigned *)seed);
    return 0;
}

/* A port nobody listens on now (and, with want_next, whose successor is free too); -1 when
 * none was found. */
static inline int mesh_test_free_port(int want_next)
{
    static unsigned seed;
    if (seed == 0)
        seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    return mesh_listen_port_pick(want_next ? 2 : 1, mesh_test_port_rand, &seed);
}

#endif
