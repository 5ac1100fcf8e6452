/*
 * shm: one POSIX shared-memory segment per communicator and rank ("/mesh-<uid>-<rank>") holding
 * a ring per sending rank of the node (ring pages are only touched by ranks that send to us, so
 * the file stays sparse). Names are unlinked as soon as every peer has mapped them, so nothing
 * leaks even when a process is killed. A dead peer is noticed by its pid (same pid namespace
 * only) or by the "aborted" flag it sets in its segment.
 */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "shm"
#include "transports/shm/shm.h"
#include "transports/tl_registry.h"
#include "libmesh/config.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static const mesh_config_entry_t shm_config_entries[] = {
    {"SHM_FIFO_SIZE", "256k", MESH_CFG_SIZE,
     "Ring size per sending peer in each receiver's shared segment.", NULL, "4k..1g"},
    {"SHM_EAGER_LIMIT", "16k", MESH_CFG_SIZE,
     "Largest message copied through the ring; larger ones are read once by the receiver "
     "with cross-memory attach when it works.",
     NULL, "0..64m"},
    {"SHM_EAGER_LIMIT_REUSED", "128k", MESH_CFG_SIZE,
     "Eager limit of a message whose sender writes its buffer again soon after the send (an "
     "in-place reduction, scratch that the next call refills): copying it out spares those "
     "writes taking every line back from the reader's cache.",
     NULL, "0..64m"},
    {"SHM_CMA", "1", MESH_CFG_BOOL,
     "Use cross-memory attach (process_vm_readv) for large messages; 0 streams them through "
     "the ring.",
     NULL},
    {NULL, NULL, 0, NULL, NULL},
};

static const mesh_config_table_t shm_config = {"shm", shm_config_entries};

/* Whether process_vm_readv works at all here (kernel, seccomp). */
static int shm_cma_works(void)
{
    char src[8] = "meshcma", dst[8] = {0};
    struct iovec l = {dst, sizeof(dst)}, r = {src, sizeof(src)};
    return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)sizeof(dst) &&
           memcmp(src, dst, sizeof(dst)) == 0;
}

/* Segments of processes killed before every peer mapped them keep their names; each open
 * removes those whose creator is dead in our pid namespace, so they cannot pile up. */
static void shm_remove_stale_bell(const char *entry)
{
    int pid, len = 0;
    unsigned long long rnd;
    if (sscanf(entry, "mesh-bell-%d-%16llx%n", &pid, &rnd, &len) != 2 || entry[len] != '\0')
        return;
    char name[300];
    snprintf(name, sizeof(name), "/%s", entry);
    int fd = shm_open(name, O_RDONLY, 0);
    if (fd < 0)
        return;
    mesh_bell_t b;
    ssize_t n = pread(fd, &b, sizeof(b), 0);
    close(fd);
    if (n == (ssize_t)sizeof(b) && b.magic == MESH_BELL_MAGIC &&
        mesh_context_pid_gone(b.pid, b.pidns) && shm_unlink(name) == 0)
        mesh_log_debug("removed %s left by dead process %d", name, b.pid);
}

static void shm_remove_stale(unsigned long long pidns)
{
    DIR *d = opendir("/dev/shm");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        unsigned long long uid;
        int rank, len = 0;
        if (strncmp(e->d_name, "mesh-bell-", 10) == 0) {
            shm_remove_stale_bell(e->d_name);
            continue;
        }
        if (sscanf(e->d_name, "mesh-%16llx-%d%n", &uid, &rank, &len) != 2 || e->d_name[len] != '\0')
            continue;
        char name[300];
        snprintf(name, sizeof(name), "/%s", e->d_name);
        int fd = shm_open(name, O_RDONLY, 0);
        if (fd < 0)
            continue;
        mesh_tl_shm_seg_hdr_t h;
        ssize_t n = pread(fd, &h, sizeof(h), 0);
        close(fd);
        if (n == (ssize_t)sizeof(h) && h.magic == MESH_TL_SHM_MAGIC &&
            mesh_context_pid_gone(h.pid, h.pidns) && shm_unlink(name) == 0)
            mesh_log_debug("removed %s left by dead process %d", name, h.pid);
    }
    closedir(d);
}

static mesh_status_t shm_open_iface(const mesh_tl_open_params_t *params, mesh_tl_iface_t **iface)
{
    mesh_status_t st;
    mesh_tl_shm_iface_t *si = calloc(1, sizeof(*si));
    if (si == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "shm interface allocation failed");
    si->super.ops = mesh_tl_shm_ops;
    si->super.rank = params->rank;
    si->super.size = params->size;
    si->comm_uid = params->comm_uid;
    snprintf(si->node, sizeof(si->node), "%s",
             params->node ? params->node : mesh_context_node_name());
    atomic_init(&si->aborted, 0);
    si->pidns = mesh_context_pidns();
    size_t fifo = mesh_config_size("SHM_FIFO_SIZE");
    si->fifo = (fifo + MESH_TL_SHM_LINE - 1) & ~(size_t)(MESH_TL_SHM_LINE - 1);
    si->eager_limit = mesh_config_size("SHM_EAGER_LIMIT");
    si->eager_reused = mesh_config_size("SHM_EAGER_LIMIT_REUSED");
    if (si->eager_reused < si->eager_limit)
        si->eager_reused = si->eager_limit;
    si->cma = mesh_config_bool("SHM_CMA") && shm_cma_works();
    si->eps = calloc((size_t)params->size, sizeof(*si->eps));
    if (si->eps == NULL) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "shm endpoint table for %d ranks", params->size);
        goto err_free;
    }
    shm_remove_stale(si->pidns);
    snprintf(si->name, sizeof(si->name), "/mesh-%016llx-%d", (unsigned long long)params->comm_uid,
             params->rank);
    uint64_t stride = sizeof(mesh_tl_shm_ring_t) + si->fifo;
    si->seg_len = MESH_TL_SHM_HDR_SIZE + stride * (uint64_t)params->size;
    int fd = shm_open(si->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        st = mesh_error(MESH_ERR_IO, "shm_open %s: %m", si->name);
        goto err_free;
    }
    if (ftruncate(fd, (off_t)si->seg_len) != 0) {
        st = mesh_error(MESH_ERR_IO, "sizing %s to %zu bytes: %m", si->name, si->seg_len);
        goto err_unlink;
    }
    si->seg = mmap(NULL, si->seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (si->seg == MAP_FAILED) {
        st = mesh_error(MESH_ERR_IO, "mapping %s: %m", si->name);
        goto err_unlink;
    }
    close(fd);
    si->hdr = si->seg;
    si->hdr->pid = getpid();
    si->hdr->pidns = si->pidns;
    si->hdr->rank = params->rank;
    si->hdr->size = params->size;
    si->hdr->fifo_size = si->fifo;
    si->hdr->ring_stride = stride;
    if (getrandom(&si->hdr->stamp_key, sizeof(si->hdr->stamp_key), GRND_NONBLOCK) !=
        sizeof(si->hdr->stamp_key))
        si->hdr->stamp_key =
            params->comm_uid ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(mesh_time() * 1e9);
    atomic_store(&si->hdr->aborted, 0);
    atomic_thread_fence(memory_order_release);
    si->hdr->magic = MESH_TL_SHM_MAGIC;
    mesh_log_debug("rank %d created %s (%zu bytes per peer ring, cma %s)", params->rank, si->name,
                   (size_t)si->fifo, si->cma ? "on" : "off");
    *iface = &si->super;
    return MESH_OK;

err_unlink:
    close(fd);
    shm_unlink(si->name);
err_free:
    free(si->eps);
    free(si);
    return st;
}

static void shm_unlink_once(mesh_tl_shm_iface_t *si)
{
    if (si->unlinked)
        return;
    si->unlinked = 1;
    if (shm_unlink(si->name) != 0 && errno != ENOENT)
        mesh_log_warn("unlinking %s: %m", si->name);
}

/* The bell of the peer process pid, mapped once per interface (NULL when it has none). */
static mesh_tl_shm_bell_t *shm_bell_get(mesh_tl_shm_iface_t *si, int pid, const char *name)
{
    if (name[0] == '\0')
        return NULL;
    for (mesh_tl_shm_bell_t *b = si->bells; b; b = b->next) {
        if (b->pid == pid && strcmp(b->name, name) == 0) {
            b->refs++;
            return b;
        }
    }
    mesh_bell_t *bell = mesh_bell_map(name);
    if (bell == NULL)
        return NULL;
    mesh_tl_shm_bell_t *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        mesh_bell_unmap(bell);
        return NULL;
    }
    b->refs = 1;
    b->pid = pid;
    snprintf(b->name, sizeof(b->name), "%s", name);
    b->bell = bell;
    b->next = si->bells;
    si->bells = b;
    return b;
}

static void shm_bell_put(mesh_tl_shm_iface_t *si, mesh_tl_shm_bell_t *bell)
{
    if (bell == NULL || --bell->refs > 0)
        return;
    for (mesh_tl_shm_bell_t **p = &si->bells; *p; p = &(*p)->next) {
        if (*p == bell) {
            *p = bell->next;
            break;
        }
    }
    mesh_bell_unmap(bell->bell);
    free(bell);
}

static void shm_ep_destroy(mesh_tl_ep_t *uep)
{
    mesh_tl_shm_ep_t *ep = (mesh_tl_shm_ep_t *)uep;
    mesh_tl_shm_iface_t *si = (mesh_tl_shm_iface_t *)uep->iface;
    if (ep->failed == MESH_OK)
        ep->failed = MESH_ERR_ABORTED;
    mesh_tl_shm_ep_fail_ops(ep, MESH_ERR_ABORTED);
    mesh_tl_shm_ep_free(ep);
    if (ep->peer_seg)
        munmap(ep->peer_seg, ep->peer_seg_len);
    shm_bell_put(si, ep->peer_bell);
    if (si->eps[uep->peer] == ep) {
        si->eps[uep->peer] = NULL;
        si->neps--;
    }
    free(ep);
}

static void shm_close(mesh_tl_iface_t *iface)
{
    mesh_tl_shm_iface_t *si = (mesh_tl_shm_iface_t *)iface;
    for (int r = 0; r < iface->size; r++)
        if (si->eps[r])
            shm_ep_destroy(&si->eps[r]->super);
    shm_unlink_once(si);
    while (si->unexp_free) {
        mesh_tl_shm_unexp_t *u = si->unexp_free;
        si->unexp_free = u->next;
        free(u);
    }
    while (si->rndv_free) {
        mesh_tl_shm_rndv_t *r = si->rndv_free;
        si->rndv_free = r->next;
        free(r);
    }
    munmap(si->seg, si->seg_len);
    free(si->eps);
    free(si);
}

static void shm_query(mesh_tl_iface_t *iface, mesh_tl_caps_t *caps)
{
    mesh_tl_shm_iface_t *si = (mesh_tl_shm_iface_t *)iface;
    memset(caps, 0, sizeof(*caps));
    caps->flags =
        MESH_TL_CAP_TAGGED | MESH_TL_CAP_SIGNATURE | (si->cma ? MESH_TL_CAP_SINGLE_COPY : 0);
    caps->scope = MESH_TL_SCOPE_NODE;
    caps->latency_us = 0.5;
    caps->bandwidth_GBps = si->cma ? 8.0 : 4.0;
    caps->eager_limit = si->eager_limit;
    caps->priority = 50;
}

static mesh_status_t shm_address(mesh_tl_iface_t *iface, void *addr, size_t *len)
{
    mesh_tl_shm_iface_t *si = (mesh_tl_shm_iface_t *)iface;
    mesh_tl_shm_addr_t a;
    memset(&a, 0, sizeof(a));
    a.magic = MESH_TL_SHM_MAGIC;
    a.pid = getpid();
    a.cma = si->cma;
    a.fifo_size = si->fifo;
    snprintf(a.name, sizeof(a.name), "%s", si->name);
    snprintf(a.bell, sizeof(a.bell), "%s", mesh_bell_name());
    memcpy(addr, &a, sizeof(a));
    *len = sizeof(a);
    return MESH_OK;
}

static int shm_reachable(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer)
{
    const mesh_tl_shm_addr_t *a = peer->addr;
    mesh_tl_shm_iface_t *si = (mesh_tl_shm_iface_t *)iface;
    const char *node = si->node;
    return peer->addr_len == sizeof(*a) && a->magic == MESH_TL_SHM_MAGIC && peer->node && node &&
           strcmp(peer->node, node) == 0;
}

static mesh_status_t shm_ep_create(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer,
                                   mesh_tl_ep_t **out)
{
    mesh_tl_shm_iface_t *si = (mesh_tl_shm_iface_t *)iface;
    const mesh_tl_shm_addr_t *a = peer->addr;
    mesh_status_t st;
    if (peer->rank < 0 || peer->rank >= iface->size || si->eps[peer->rank])
        return mesh_error(MESH_ERR_INVALID_ARG, "shm endpoint to rank %d: bad or duplicate",
                          peer->rank);
    if (peer->addr_len != sizeof(*a) || a->magic != MESH_TL_SHM_MAGIC)
        return mesh_error(MESH_ERR_INVALID_ARG, "shm address of rank %d is malformed", peer->rank);
    if (a->fifo_size != si->fifo)
        return mesh_error(MESH_ERR_INVALID_ARG, "rank %d uses MESH_SHM_FIFO_SIZE %llu, we use %llu",
                          peer->rank, (unsigned long long)a->fifo_size,
                          (unsigned long long)si->fifo);
    mesh_tl_shm_ep_t *ep = calloc(1, sizeof(*ep));
    if (ep == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "shm endpoint allocation failed");
    ep->super.iface = iface;
    ep->super.peer = peer->rank;
    ep->pid = peer->pid;
    ep->same_pidns = peer->pidns == si->pidns;
    ep->peer_cma = a->cma;
    ep->fifo = si->fifo;
    int fd = shm_open(a->name, O_RDWR, 0);
    if (fd < 0) {
        st = mesh_error(MESH_ERR_PEER_FAILED, "opening %s of rank %d: %m", a->name, peer->rank);
        goto err_free;
    }
    struct stat sb;
    uint64_t stride = sizeof(mesh_tl_shm_ring_t) + si->fifo;
    size_t want = MESH_TL_SHM_HDR_SIZE + stride * (uint64_t)iface->size;
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size != want) {
        st = mesh_error(MESH_ERR_PEER_FAILED, "segment %s of rank %d has the wrong size", a->name,
                        peer->rank);
        close(fd);
        goto err_free;
    }
    ep->peer_seg = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (ep->peer_seg == MAP_FAILED) {
        ep->peer_seg = NULL;
        st = mesh_error(MESH_ERR_IO, "mapping %s of rank %d: %m", a->name, peer->rank);
        goto err_free;
    }
    ep->peer_seg_len = want;
    ep->peer_hdr = ep->peer_seg;
    if (ep->peer_hdr->magic != MESH_TL_SHM_MAGIC || ep->peer_hdr->rank != peer->rank) {
        st = mesh_error(MESH_ERR_PEER_FAILED, "segment %s does not belong to rank %d", a->name,
                        peer->rank);
        goto err_unmap;
    }
    ep->tx = mesh_tl_shm_ring(ep->peer_seg, stride, iface->rank);
#ifdef MADV_POPULATE_WRITE
    {
        /* map our ring in the peer's segment now, not page by page on the first lap of sends
         * (best effort: older kernels refuse) */
        uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)ep->tx & ~(pg - 1);
        uintptr_t e = ((uintptr_t)ep->tx->data + si->fifo + pg - 1) & ~(pg - 1);
        (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
    }
#endif
    ep->rx = mesh_tl_shm_ring(si->seg, stride, peer->rank);
    ep->tx_head = atomic_load(&ep->tx->head);
    ep->tx_tail_cache = atomic_load(&ep->tx->tail);
    ep->rx_tail = atomic_load(&ep->rx->tail);
    ep->rx_known = ep->rx_tail;
    ep->tx_key = ep->peer_hdr->stamp_key;
    ep->rx_key = si->hdr->stamp_key;
    char bell[MESH_BELL_NAME_MAX];
    snprintf(bell, sizeof(bell), "%.*s", (int)sizeof(bell) - 1, a->bell);
    ep->peer_bell = shm_bell_get(si, peer->pid, bell);
    atomic_store_explicit(&ep->tx->mapped, 1, memory_order_release);
    si->eps[peer->rank] = ep;
    si->neps++;
    *out = &ep->super;
    return MESH_OK;

err_unmap:
    munmap(ep->peer_seg, want);
err_free:
    free(ep);
    return st;
}

/* Waits until every peer we have an endpoint to has mapped our segment, then unlinks it. */
static mesh_status_t shm_wireup(mesh_tl_iface_t *iface, double deadline)
{
    mesh_tl_shm_iface_t *si = (mesh_tl_shm_iface_t *)iface;
    unsigned idle = 0;
    for (;;) {
        int missing = 0, first = -1;
        for (int r = 0; r < iface->size; r++) {
            mesh_tl_shm_ep_t *ep = si->eps[r];
            if (ep && !atomic_load_explicit(&ep->rx->mapped, memory_order_acquire)) {
                if (first < 0)
                    first = r;
                missing++;
            }
        }
        if (missing == 0) {
            shm_unlink_once(si);
            /* a waiter sleeps only when every peer can wake it, and it can wake them */
            si->bell_ok = mesh_bell_self() != NULL;
            for (int r = 0; r < iface->size; r++)
                if (si->eps[r] && si->eps[r]->peer_bell == NULL)
                    si->bell_ok = 0;
            return MESH_OK;
        }
        if (atomic_load_explicit(&si->aborted, memory_order_acquire))
            return mesh_error(MESH_ERR_ABORTED, "shm wireup aborted");
        if (mesh_time() > deadline)
            return mesh_error(MESH_ERR_TIMEOUT,
                              "shm wireup timed out: %d peers never mapped %s (first: rank %d)",
                              missing, si->name, first);
        mesh_backoff(&idle);
    }
}

int mesh_tl_shm_ep_fail(mesh_tl_shm_ep_t *ep, mesh_status_t status, const char *why)
{
    if (ep->failed == MESH_OK) {
        ep->failed = status;
        snprintf(ep->why, sizeof(ep->why), "%s", why);
        mesh_tl_shm_iface_t *si = (mesh_tl_shm_iface_t *)ep->super.iface;
        int none = 0;
        if (status == MESH_ERR_PEER_FAILED && strstr(why, "aborted") == NULL &&
            ep->npending > ep->nstanding)
            atomic_compare_exchange_strong(&si->hdr->failed_rank, &none, ep->super.peer + 1);
        if (ep->npending > ep->nstanding)
            mesh_error(status, "peer rank %d (pid %d) failed: %s", ep->super.peer, ep->pid, why);
        else
            mesh_log_debug("peer rank %d (pid %d) is gone: %s", ep->super.peer, ep->pid, why);
    }
    return mesh_tl_shm_ep_fail_ops(ep, ep->failed);
}

int mesh_tl_shm_sweep(mesh_tl_shm_iface_t *si)
{
    int n = 0;
    for (int r = 0; r < si->super.size; r++) {
        mesh_tl_shm_ep_t *ep = si->eps[r];
        /* a peer we wait for nothing from may have finished and left: that is no failure */
        if (ep && ep->failed == MESH_OK && ep->npending > 0 && ep->same_pidns &&
            !atomic_load_explicit(&ep->peer_hdr->aborted, memory_order_acquire) &&
            mesh_context_pid_gone(ep->pid, mesh_context_pidns())) {
            /* nor is a peer that sent what we wait for and left before we read it: the ring is
             * ours, and whatever it holds was written before the process ended */
            n += mesh_tl_shm_ep_drain(ep);
            if (ep->failed == MESH_OK && ep->npending > 0)
                n += mesh_tl_shm_ep_fail(ep, MESH_ERR_PEER_FAILED, "its process no longer exists");
        }
    }
    for (int r = 0; r < si->super.size; r++) {
        mesh_tl_shm_ep_t *ep = si->eps[r];
        if (ep == NULL || ep->failed != MESH_OK ||
            !atomic_load_explicit(&ep->peer_hdr->aborted, memory_order_acquire))
            continue;
        char why[96];
        int culprit = atomic_load_explicit(&ep->peer_hdr->failed_rank, memory_order_acquire);
        mesh_tl_shm_ep_t *cep =
            culprit > 0 && culprit <= si->super.size ? si->eps[culprit - 1] : NULL;
        if (cep && cep->failed == MESH_OK) {
            /* it may still be tearing down, too early for its pid to look dead */
            snprintf(why, sizeof(why), "rank %d saw it die", r);
            n += mesh_tl_shm_ep_fail(cep, MESH_ERR_PEER_FAILED, why);
        }
        if (culprit > 0)
            snprintf(why, sizeof(why), "it aborted after rank %d failed", culprit - 1);
        else
            snprintf(why, sizeof(why), "it aborted");
        n += mesh_tl_shm_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
    }
    return n;
}

static int shm_abort_pending(mesh_tl_shm_iface_t *si)
{
    int n = 0;
    if (si->abort_done)
        return 0;
    si->abort_done = 1;
    for (int r = 0; r < si->super.size; r++) {
        mesh_tl_shm_ep_t *ep = si->eps[r];
        if (ep == NULL)
            continue;
        if (ep->failed == MESH_OK) {
            ep->failed = MESH_ERR_ABORTED;
            snprintf(ep->why, sizeof(ep->why), "aborted");
        }
        n += mesh_tl_shm_ep_fail_ops(ep, MESH_ERR_ABORTED);
    }
    return n;
}

static int shm_unexpected(mesh_tl_iface_t *iface, mesh_tl_unexpected_fn fn, void *arg)
{
    mesh_tl_shm_iface_t *si = (mesh_tl_shm_iface_t *)iface;
    for (int r = 0; r < iface->size; r++) {
        const mesh_tl_shm_ep_t *ep = si->eps[r];
        if (ep == NULL)
            continue;
        /* one a receive took while its payload still streams in is no longer waiting */
        for (const mesh_tl_shm_unexp_t *u = ep->unexp_head; u; u = u->next) {
            int rc = u->op == NULL ? fn(arg, r, u->tag) : 0;
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int shm_progress(mesh_tl_iface_t *iface)
{
    mesh_tl_shm_iface_t *si = (mesh_tl_shm_iface_t *)iface;
    if (atomic_load_explicit(&si->aborted, memory_order_acquire))
        return shm_abort_pending(si);
    int done = 0, moved = 0, pending = 0;
    for (int r = 0; r < iface->size; r++) {
        mesh_tl_shm_ep_t *ep = si->eps[r];
        if (ep == NULL || ep->failed < 0)
            continue;
        done += mesh_tl_shm_ep_progress(ep);
        mesh_tl_shm_notify(ep);
        moved |= ep->moved;
        ep->moved = 0;
        pending |= ep->npending > 0;
    }
    /* liveness of every peer, at most every 100 ms and only while we wait for something; the
     * clock is read every few polls, since a read costs about as much as a poll */
    if (pending && (++si->polls & (MESH_TL_SHM_CLOCK_EVERY - 1)) == 0) {
        double now = mesh_time();
        if (now >= si->next_sweep) {
            si->next_sweep = now + MESH_TL_SHM_LIVENESS_S;
            done += mesh_tl_shm_sweep(si);
        }
    }
    /* bytes that moved without completing anything still tell waiters not to sleep */
    return done + moved;
}

static mesh_status_t shm_ep_check(mesh_tl_ep_t *uep)
{
    mesh_tl_shm_ep_t *ep = (mesh_tl_shm_ep_t *)uep;
    if (ep->failed == MESH_OK)
        mesh_tl_shm_sweep((mesh_tl_shm_iface_t *)uep->iface);
    return ep->failed == MESH_ERR_ABORTED ? MESH_ERR_ABORTED
           : ep->failed < 0               ? MESH_ERR_PEER_FAILED
                                          : MESH_OK;
}

/* Peers ring this process's bell whenever they write to our rings or free room in theirs; a
 * peer that died rings nothing, which the sleep's slice and the liveness sweep cover. */
static void shm_wait_arm(mesh_tl_iface_t *iface, struct mesh_wait_set *set)
{
    mesh_tl_shm_iface_t *si = (mesh_tl_shm_iface_t *)iface;
    if (si->neps == 0)
        return; /* no peer on this node: nothing comes this way */
    if (si->bell_ok)
        set->bell = 1;
    else
        set->blind = 1;
}

/* Flags our segment so peers notice; the owner's next progress() fails pending operations. */
static void shm_abort(mesh_tl_iface_t *iface)
{
    mesh_tl_shm_iface_t *si = (mesh_tl_shm_iface_t *)iface;
    atomic_store_explicit(&si->hdr->aborted, 1, memory_order_release);
    atomic_store_explicit(&si->aborted, 1, memory_order_release);
}

const mesh_tl_ops_t mesh_tl_shm_ops = {
    .name = "shm",
    .doc = "shared-memory rings, cross-memory attach for large messages",
    .config = &shm_config,
    .usable = mesh_tl_stub_usable,
    .open = shm_open_iface,
    .close = shm_close,
    .query = shm_query,
    .address = shm_address,
    .reachable = shm_reachable,
    .ep_create = shm_ep_create,
    .ep_destroy = shm_ep_destroy,
    .wireup = shm_wireup,
    .isend = mesh_tl_shm_isend,
    .irecv = mesh_tl_shm_irecv,
    .progress = shm_progress,
    .ep_check = shm_ep_check,
    .unexpected = shm_unexpected,
    .abort = shm_abort,
    .wait_arm = shm_wait_arm,
    .mem_reg = mesh_tl_stub_mem_reg,
    .mem_dereg = mesh_tl_stub_mem_dereg,
    .put = mesh_tl_stub_put,
    .get = mesh_tl_stub_get,
    .flush = mesh_tl_stub_flush,
};
