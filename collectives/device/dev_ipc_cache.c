/* The IPC state of a communicator: the internal stream its device copies run on, a few events,
 * and the peers' allocations mapped into this process, kept for later calls. A mapping is known
 * by its peer and the allocation's identity (mesh_mem_ipc_t.id), never by its address alone: an
 * allocation made where a freed one was gets a mapping of its own. Everything here runs under
 * the communicator's lock (poll tasks of its schedules) or once its last request ended. */
#define _GNU_SOURCE
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev_ipc.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define IPC_EVENTS 16

struct mesh_dev_ipc_map {
    int peer;
    int kind;
    uint64_t id;
    uintptr_t rbase; /* the allocation's start in the peer's process */
    size_t size;
    char *base; /* its mapping here */
    int uses;   /* calls under way that read through it */
    uint64_t last;
    struct mesh_dev_ipc_map *next;
};

struct mesh_dev_ipc {
    const mesh_mem_ops_t *ops;
    void *stream;
    void *events[IPC_EVENTS];
    int nevents;
    mesh_dev_ipc_map_t *maps;
    int nmaps;
    int *held; /* exported descriptors of calls under way */
    int nheld, capheld;
    uint64_t clock;
    uint64_t nmade, nhits;
    int max; /* MESH_DEVICE_IPC_CACHE */
};

mesh_status_t mesh_dev_ipc_state(mesh_comm_t *comm, const mesh_mem_ops_t *ops, mesh_dev_ipc_t **out)
{
    mesh_dev_ipc_t *ipc = comm->dev_ipc;
    if (ipc != NULL && ipc->ops != ops)
        return mesh_error(MESH_ERR_UNSUPPORTED,
                          "device buffers of table %s on a communicator that used table %s",
                          ops->name, ipc->ops->name);
    if (ipc == NULL) {
        if ((ipc = calloc(1, sizeof(*ipc))) == NULL)
            return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate the IPC state");
        ipc->ops = ops;
        ipc->max =
            mesh_dev_config_register() == MESH_OK ? (int)mesh_config_int("DEVICE_IPC_CACHE") : 128;
        mesh_status_t st = ops->stream_create(&ipc->stream);
        if (st < 0) {
            free(ipc);
            return st;
        }
        comm->dev_ipc = ipc;
    }
    *out = ipc;
    return MESH_OK;
}

void *mesh_dev_ipc_stream(const mesh_dev_ipc_t *ipc)
{
    return ipc->stream;
}

mesh_status_t mesh_dev_ipc_event_get(mesh_dev_ipc_t *ipc, void **event)
{
    if (ipc->nevents > 0) {
        *event = ipc->events[--ipc->nevents];
        return MESH_OK;
    }
    return ipc->ops->event_create(event);
}

void mesh_dev_ipc_event_put(mesh_dev_ipc_t *ipc, void *event)
{
    if (ipc->nevents < IPC_EVENTS)
        ipc->events[ipc->nevents++] = event;
    else
        ipc->ops->event_destroy(event);
}

mesh_status_t mesh_dev_ipc_hold(mesh_dev_ipc_t *ipc, int fd)
{
    if (ipc->nheld == ipc->capheld) {
        int cap = ipc->capheld ? 2 * ipc->capheld : 8;
        int *n = realloc(ipc->held, sizeof(*n) * (size_t)cap);
        if (n == NULL) {
            close(fd);
            return mesh_error(MESH_ERR_NO_MEMORY, "cannot keep an exported descriptor");
        }
        ipc->held = n;
        ipc->capheld = cap;
    }
    ipc->held[ipc->nheld++] = fd;
    return MESH_OK;
}

void mesh_dev_ipc_drop(mesh_dev_ipc_t *ipc, int fd)
{
    for (int i = 0; i < ipc->nheld; i++)
        if (ipc->held[i] == fd) {
            ipc->held[i] = ipc->held[--ipc->nheld];
            break;
        }
    close(fd);
}

static void map_close(mesh_dev_ipc_t *ipc, mesh_dev_ipc_map_t **link)
{
    mesh_dev_ipc_map_t *m = *link;
    *link = m->next;
    ipc->ops->ipc_close(m->base);
    ipc->nmaps--;
    free(m);
}

/* Makes room for one more: closes what the peer's new allocation replaced (its range overlaps
 * [rbase, rbase + size): the old allocation was freed), then the least recently used mappings
 * beyond MESH_DEVICE_IPC_CACHE. Mappings in use stay. */
static void cache_trim(mesh_dev_ipc_t *ipc, int peer, uintptr_t rbase, size_t size)
{
    for (mesh_dev_ipc_map_t **l = &ipc->maps; *l != NULL;) {
        mesh_dev_ipc_map_t *m = *l;
        if (m->peer == peer && m->uses == 0 && m->rbase < rbase + size &&
            rbase < m->rbase + m->size)
            map_close(ipc, l);
        else
            l = &m->next;
    }
    while (ipc->nmaps >= ipc->max) {
        mesh_dev_ipc_map_t **old = NULL;
        for (mesh_dev_ipc_map_t **l = &ipc->maps; *l != NULL; l = &(*l)->next)
            if ((*l)->uses == 0 && (old == NULL || (*l)->last < (*old)->last))
                old = l;
        if (old == NULL)
            break;
        map_close(ipc, old);
    }
}

/* A descriptor of this process for descriptor fd of process pid. */
static mesh_status_t fetch_fd(int peer, uint64_t pid, int fd, int *out)
{
    int err = 0;
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
    int pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (pfd >= 0) {
        int r = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
        err = errno;
        close(pfd);
        if (r >= 0) {
            *out = r;
            return MESH_OK;
        }
    }
#endif
    /* without pidfd_getfd (or ptrace rights over the peer): reopen it, as memfds allow */
    char path[64];
    snprintf(path, sizeof(path), "/proc/%llu/fd/%d", (unsigned long long)pid, fd);
    int r = open(path, O_RDWR | O_CLOEXEC);
    if (r >= 0) {
        *out = r;
        return MESH_OK;
    }
    if (err == 0)
        err = errno;
    return mesh_error(MESH_ERR_UNSUPPORTED,
                      "cannot obtain rank %d's memory handle (descriptor %d of process %llu): "
                      "%s; MESH_DEVICE_IPC=0 stages device buffers through host memory instead",
                      peer, fd, (unsigned long long)pid, strerror(err));
}

static mesh_status_t map_new(mesh_dev_ipc_t *ipc, int peer, uint64_t pid, uint64_t addr,
                             const mesh_mem_ipc_t *h, mesh_dev_ipc_map_t **out)
{
    mesh_dev_ipc_map_t *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate an IPC mapping");
    mesh_mem_ipc_t mine = *h;
    mesh_status_t st = MESH_OK;
    if (h->fd >= 0)
        st = fetch_fd(peer, pid, h->fd, &mine.fd);
    void *p = NULL;
    if (st == MESH_OK) {
        st = ipc->ops->ipc_import(&mine, &p);
        if (h->fd >= 0)
            close(mine.fd); /* the mapping keeps what it needs */
        if (st < 0) {
            /* the table logged it; the message names the peer */
            char msg[512];
            snprintf(msg, sizeof(msg), "mapping rank %d's device buffer: %s", peer,
                     mesh_error_last());
            mesh_error_restore(msg);
        }
    }
    if (st < 0) {
        free(m);
        return st;
    }
    *m = (mesh_dev_ipc_map_t){.peer = peer,
                              .kind = h->kind,
                              .id = h->id,
                              .rbase = (uintptr_t)addr - h->offset,
                              .size = h->size,
                              .base = (char *)p - h->offset,
                              .next = ipc->maps};
    ipc->maps = m;
    ipc->nmaps++;
    ipc->nmade++;
    *out = m;
    return MESH_OK;
}

mesh_status_t mesh_dev_ipc_map(mesh_dev_ipc_t *ipc, int peer, uint64_t pid, uint64_t addr,
                               const mesh_mem_ipc_t *h, void **out, mesh_dev_ipc_map_t **used)
{
    *used = NULL;
    if (pid == (uint64_t)getpid()) {
        /* a peer in this process: its pointer is ours (CUDA cannot import its own handle) */
        *out = (void *)(uintptr_t)addr;
        return MESH_OK;
    }
    if (h->offset >= h->size)
        return mesh_error(MESH_ERR_INTERNAL,
                          "rank %d's buffer descriptor: offset %zu outside its %zu bytes", peer,
                          h->offset, h->size);
    mesh_dev_ipc_map_t *m = ipc->maps;
    while (m != NULL && !(m->peer == peer && m->kind == h->kind && m->id == h->id))
        m = m->next;
    if (m != NULL) {
        ipc->nhits++;
    } else {
        cache_trim(ipc, peer, (uintptr_t)addr - h->offset, h->size);
        MESH_CHECK(map_new(ipc, peer, pid, addr, h, &m));
    }
    m->uses++;
    m->last = ++ipc->clock;
    *out = m->base + h->offset;
    *used = m;
    return MESH_OK;
}

void mesh_dev_ipc_release(mesh_dev_ipc_map_t *m)
{
    if (m != NULL)
        m->uses--;
}

void mesh_dev_ipc_stats(const mesh_comm_t *comm, uint64_t *maps, uint64_t *hits, int *open)
{
    const mesh_dev_ipc_t *ipc = comm->dev_ipc;
    *maps = ipc ? ipc->nmade : 0;
    *hits = ipc ? ipc->nhits : 0;
    *open = ipc ? ipc->nmaps : 0;
}

void mesh_dev_ipc_free(mesh_comm_t *comm)
{
    mesh_dev_ipc_t *ipc = comm->dev_ipc;
    if (ipc == NULL)
        return;
    while (ipc->maps != NULL)
        map_close(ipc, &ipc->maps);
    for (int i = 0; i < ipc->nheld; i++)
        close(ipc->held[i]);
    free(ipc->held);
    for (int i = 0; i < ipc->nevents; i++)
        ipc->ops->event_destroy(ipc->events[i]);
    ipc->ops->stream_destroy(ipc->stream);
    free(ipc);
    comm->dev_ipc = NULL;
}
