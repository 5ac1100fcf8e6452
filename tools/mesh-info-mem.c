/* mesh-info: the memory types buffers may have, the device tables built and the one active. */
#include "config.h"
#include "libmesh/mem.h"
#include "tools/mesh-info-algo.h"

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
