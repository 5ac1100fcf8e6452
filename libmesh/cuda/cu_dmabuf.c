/* Whether a NIC could reach a CUDA device's memory directly (GPUDirect RDMA): the device must
 * export its allocations as dma-buf file descriptors (cuMemGetHandleForAddressRange, resolved
 * with the driver's table), which ibv_reg_dmabuf_mr registers. The device attribute answers
 * without a context, so asking costs a process that never touches the device nothing. */
#include <config.h>

#include "libmesh/cuda/cu_driver.h"
#include "libmesh/mem.h"
#include <stdio.h>

mesh_status_t mesh_cu_dmabuf_query(int device, char *why, size_t len)
{
    CUdevice dev;
    int supported = 0;
    if (!mesh_cu_ready()) {
        snprintf(why, len, "no usable CUDA driver");
        return MESH_ERR_UNSUPPORTED;
    }
    if (mesh_cu.cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
        mesh_cu.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) !=
            CUDA_SUCCESS) {
        snprintf(why, len, "cuda device %d: its dma-buf support cannot be read", device);
        return MESH_ERR_UNSUPPORTED;
    }
    if (!supported) {
        snprintf(why, len,
                 "cuda device %d does not export dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED "
                 "is 0: driver, kernel or platform)",
                 device);
        return MESH_ERR_UNSUPPORTED;
    }
    return MESH_OK;
}
