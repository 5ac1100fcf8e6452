/* The memory of a call's buffers: host memory, or memory of one device table that the call
 * orders on a stream. Reached only where a device table is active or a stream was given; the
 * host fast path decides inline (api.h). */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/api.h"
#include "libmesh/log.h"

static int mem_on_device(const mesh_mem_info_t *m)
{
    return m->kind == MESH_MEM_DEVICE || m->kind == MESH_MEM_MANAGED;
}

static const char *mem_kind_name(const mesh_mem_info_t *m)
{
    switch (m->kind) {
    case MESH_MEM_HOST_PINNED:
        return "pinned host memory";
    case MESH_MEM_DEVICE:
        return "device memory";
    case MESH_MEM_MANAGED:
        return "managed memory";
    default:
        return "host memory";
    }
}

/* Both buffers given device-side (device, managed or pinned memory): same table, and device
 * memory of one device. */
static mesh_status_t mem_same_device(mesh_comm_t *comm, const char *fn, const char *const *name,
                                     const mesh_mem_info_t *m)
{
    CHECK_ARG(m[0].ops == m[1].ops, "%s: %s is %s of table %s but %s is %s of table %s", fn,
              name[0], mem_kind_name(&m[0]), m[0].ops->name, name[1], mem_kind_name(&m[1]),
              m[1].ops->name);
    CHECK_ARG(!mem_on_device(&m[0]) || !mem_on_device(&m[1]) || m[0].device == m[1].device,
              "%s: %s is memory of device %d but %s is memory of device %d", fn, name[0],
              m[0].device, name[1], m[1].device);
    return MESH_OK;
}

/* Memory of a device table in a call: the table must be active and the memory this rank's. */
static mesh_status_t mem_device_call(mesh_comm_t *comm, const char *fn, void *stream,
                                     const char *name, const mesh_mem_info_t *m,
                                     mesh_coll_args_t *args)
{
    int cur = -1;
    if (!mesh_mem_table_active(m->ops))
        return mesh_comm_fail(comm, mesh_error(MESH_ERR_UNSUPPORTED,
                                               "%s: %s is %s of device table %s, which is not "
                                               "active (no driver, or the table is off): device "
                                               "buffers are not supported here",
                                               fn, name, mem_kind_name(m), m->ops->name));
    mesh_status_t st = m->ops->current_device(&cur);
    if (st < 0)
        return mesh_comm_fail(comm, st);
    CHECK_ARG(!mem_on_device(m) || m->device == cur,
              "%s: %s is memory of device %d, but this rank uses device %d", fn, name, m->device,
              cur);
    args->mem = m->ops;
    args->device = cur;
    args->stream = stream;
    return MESH_OK;
}

mesh_status_t mesh_api_check_mem_slow(mesh_comm_t *comm, const char *fn, void *stream,
                                      const char *sname, const void *sbuf, const char *rname,
                                      const void *rbuf, mesh_coll_args_t *args)
{
    const char *name[2] = {sname, rname};
    const void *buf[2] = {sbuf, rbuf};
    mesh_mem_info_t m[2];
    int dev = -1, side = -1, host = -1;
    args->mem = NULL;
    args->mappable = 1;
    for (int i = 0; i < 2; i++) {
        mesh_status_t st = mesh_mem_query(buf[i], &m[i]);
        if (st < 0)
            return mesh_comm_fail(comm, st);
        if (buf[i] == NULL)
            continue;
        args->mappable &= m[i].kind == MESH_MEM_DEVICE;
        if (mem_on_device(&m[i]) && dev < 0)
            dev = i;
        if (m[i].kind != MESH_MEM_HOST && side < 0)
            side = i;
        if (m[i].kind == MESH_MEM_HOST && host < 0)
            host = i;
    }
    if (dev >= 0) {
        CHECK_ARG(host < 0, "%s: %s is %s but %s is host memory", fn, name[dev],
                  mem_kind_name(&m[dev]), name[host]);
        if (buf[0] != NULL && buf[1] != NULL)
            MESH_CHECK(mem_same_device(comm, fn, name, m));
        return mem_device_call(comm, fn, stream, name[dev], &m[dev], args);
    }
    if (stream == NULL)
        return MESH_OK; /* host memory, pinned or not */
    CHECK_ARG(host < 0, "%s: stream must be NULL for host buffers (%s is host memory)", fn,
              name[host]);
    if (side >= 0) {
        /* pinned host memory ordered on a stream: the table's copy engines reach it */
        if (buf[1 - side] != NULL)
            MESH_CHECK(mem_same_device(comm, fn, name, m));
        return mem_device_call(comm, fn, stream, name[side], &m[side], args);
    }
    /* no buffer at all (counts of 0) on a stream: ordered there by the first active table */
    const mesh_mem_ops_t *t = mesh_mem_table(NULL);
    CHECK_ARG(t != NULL, "%s: stream must be NULL for host buffers (no device table is active)",
              fn);
    mesh_mem_info_t none = {.kind = MESH_MEM_DEVICE, .device = -1, .ops = t};
    MESH_CHECK(t->current_device(&none.device));
    return mem_device_call(comm, fn, stream, "the call", &none, args);
}
