/* Shared stubs for the operations a transport does not offer, and helpers every transport uses. */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "tl"
#include "transports/tl.h"
#include "libmesh/log.h"
#include "libmesh/wait.h"

mesh_status_t mesh_tl_stub_mem_reg(mesh_tl_iface_t *iface, void *addr, size_t len,
                                   mesh_tl_mem_t *mem)
{
    return mesh_error(MESH_ERR_UNSUPPORTED, "transport %s has no memory registration",
                      iface->ops.name);
}

void mesh_tl_stub_mem_dereg(mesh_tl_iface_t *iface, mesh_tl_mem_t *mem) {}

mesh_status_t mesh_tl_stub_put(mesh_tl_ep_t *ep, const void *buf, size_t len, uint64_t raddr,
                               uint64_t rkey, mesh_tl_op_t *op)
{
    return mesh_error(MESH_ERR_UNSUPPORTED, "transport %s has no put (peer rank %d)",
                      ep->iface->ops.name, ep->peer);
}

mesh_status_t mesh_tl_stub_get(mesh_tl_ep_t *ep, void *buf, size_t len, uint64_t raddr,
                               uint64_t rkey, mesh_tl_op_t *op)
{
    return mesh_error(MESH_ERR_UNSUPPORTED, "transport %s has no get (peer rank %d)",
                      ep->iface->ops.name, ep->peer);
}

mesh_status_t mesh_tl_stub_flush(mesh_tl_ep_t *ep, mesh_tl_op_t *op)
{
    return mesh_error(MESH_ERR_UNSUPPORTED, "transport %s has no flush (peer rank %d)",
                      ep->iface->ops.name, ep->peer);
}

/* For transports whose endpoints are usable as soon as they are created. */
mesh_status_t mesh_tl_stub_wireup(mesh_tl_iface_t *iface, double deadline)
{
    return MESH_OK;
}

void mesh_tl_stub_wait_arm(mesh_tl_iface_t *iface, struct mesh_wait_set *set)
{
    (void)iface;
    set->blind = 1;
}

void mesh_tl_nowait_arm(mesh_tl_iface_t *iface, struct mesh_wait_set *set)
{
    (void)iface;
    (void)set;
}

int mesh_tl_stub_usable(void)
{
    return 1;
}

mesh_status_t mesh_tl_truncated(const mesh_tl_ep_t *ep, size_t len, size_t cap)
{
    if (len == 0)
        return mesh_error(MESH_ERR_TRUNCATED,
                          "%s: a message from rank %d is longer than the %zu-byte receive",
                          ep->iface->ops.name, ep->peer, cap);
    return mesh_error(MESH_ERR_TRUNCATED,
                      "%s: a %zu-byte message from rank %d is longer than the %zu-byte receive",
                      ep->iface->ops.name, len, ep->peer, cap);
}
