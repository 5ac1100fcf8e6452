/* mesh-info: the memory types buffers may have, the device tables built and the one active. */
#include "config.h"
#include "collectives/device/dev.h"
#include "libmesh/config.h"
#include "libmesh/mem.h"
#include "tools/mesh-info-algo.h"
#if HAVE_VERBS
#include "transports/verbs/verbs.h"
#endif

#include <stdio.h>

void mesh_info_memory(void)
{
    const mesh_mem_ops_t *ops = mesh_mem_table(NULL);
    printf("  device     : %s active (tables built: %semu under MESH_DEVICE_EMU=1)\n",
           ops ? ops->name : "none", HAVE_CUDA ? "cuda, and " : "");
    /* managed memory is a pointer kind of the CUDA driver alone */
    printf("  memory     : host%s%s\n", ops ? ", host-pinned, device" : "",
           ops && ops != &mesh_mem_emu_ops ? ", managed" : "");
}

void mesh_info_device_path(void)
{
    const mesh_mem_ops_t *ops = mesh_mem_table(NULL);
    printf(
        "# device buffers (%s%s): on the caller's stream; within one node by device copies\n"
        "# between the ranks' IPC-mapped buffers where a collective's line says ipc, across nodes\n"
        "# by such copies inside each node and pinned host memory on the rails where it says\n"
        "# ipc-hier, otherwise staged through pinned host memory by the device engine and run by\n"
        "# the selection shown\n",
        ops ? ops->name : "no device table active", ops ? " table" : "");
}

/* Why device data between nodes does not go by GPUDirect RDMA here. */
static void gdr_why(char *why, size_t len)
{
#if HAVE_VERBS
    if (mesh_tl_verbs_dmabuf(why, len)) {
        snprintf(why, len,
                 "the device exports dma-buf and libibverbs registers it, but mesh has no "
                 "GPUDirect RDMA data path yet");
        return;
    }
#else
    snprintf(why, len, "the verbs transport is not built");
#endif
}

void mesh_info_device_peers(void)
{
    const mesh_mem_ops_t *ops = mesh_mem_table(NULL);
    size_t chunk = mesh_dev_chunk_bytes();
    size_t max = mesh_config_size("DEVICE_STAGING_MAX");
    char why[256];
    gdr_why(why, sizeof(why));
    printf("\n# device buffers between two ranks (%s%s):\n",
           ops ? ops->name : "no device table active",
           ops ? " table" : "; the paths they would take");
    if (mesh_config_bool("DEVICE_IPC"))
        printf("  same node   : ipc: device copies between the ranks' buffers mapped through "
               "IPC\n                (all-gather, broadcast, all-reduce, reduce-scatter, "
               "all-to-all; the others staged)\n");
    else
        printf("  same node   : staged through pinned host memory (MESH_DEVICE_IPC=0)\n");
    if (chunk > 0)
        printf(
            "  other nodes : staged through pinned host memory; all-reduce, reduce and broadcast\n"
            "                in chunks of %zu bytes (MESH_DEVICE_STAGING_CHUNK), up to 3 in "
            "flight\n                within %zu bytes (MESH_DEVICE_STAGING_MAX), copies and "
            "wire overlapping;\n                the others staged whole\n",
            chunk, max);
    else
        printf("  other nodes : staged whole through pinned host memory "
               "(MESH_DEVICE_STAGING_CHUNK=0),\n"
               "                within %zu bytes (MESH_DEVICE_STAGING_MAX)\n",
               max);
    printf("  GPUDirect   : not used: %s\n", why);
}
