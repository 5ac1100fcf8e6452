/*
 * Fuzz target: a topology file (hwloc XML, MESH_TOPO_FILE and mesh-plan --from-topo), loaded
 * and walked as the library does: GPUs, NICs, their NUMA nodes and distances.
 */
#define _GNU_SOURCE
#include "config.h"
#include "tests/fuzz/fuzz.h"
#include "libmesh/topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    setenv("MESH_LOG_FILE", "/dev/null", 0);
    if (fd < 0 && (fd = memfd_create("mesh-fuzz-topo", MFD_CLOEXEC)) < 0)
        return 0;
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        return 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    mesh_topo_t *t = NULL;
    if (mesh_topo_load(path, &t) == MESH_OK) {
        (void)mesh_topo_npackages(t);
        (void)mesh_topo_nnuma(t);
        (void)mesh_topo_ncores(t);
        (void)mesh_topo_npus(t);
        (void)mesh_topo_ngpus(t);
        (void)mesh_topo_nnics(t);
        static FILE *null;
        if (null == NULL)
            null = fopen("/dev/null", "w");
        if (null != NULL)
            mesh_topo_print(t, "node0", null);
        mesh_topo_free(t);
    }
    return 0;
}
