/* The control channel of a communicator. A rank that sees a peer fail tells every other rank
 * which one (a verdict), so that every survivor names the same culprit, also when the rank next
 * to it only left after seeing the failure itself. A rank whose wait timed out first probes every
 * rank: ranks waiting in mesh answer at once, a stopped one (SIGSTOP, a debugger, a node that
 * froze) does not, and the verdict names it, so that survivors with longer timeouts do not blame
 * the survivor that gave up first. Control messages go straight to the transports (they are not
 * counted as user bytes) on one standing receive per peer. */
#define MESH_LOG_SUBSYSTEM "comm"
#include "collectives/comm.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include <stdlib.h>

static const mesh_comm_ctl_t ctl_probe = {.kind = MESH_CTL_PROBE, .rank = -1};
static const mesh_comm_ctl_t ctl_alive = {.kind = MESH_CTL_ALIVE, .rank = -1};

mesh_status_t mesh_comm_post_ctl(mesh_comm_t *c, int p)
{
    c->ctl_rops[p].flags = MESH_TL_OP_STANDING;
    return mesh_tl_irecv(c->peers[p].ep, MESH_TAG_VERDICT, &c->ctl_in[p], sizeof(mesh_comm_ctl_t),
                         &c->ctl_rops[p]);
}

static int is_verdict(const mesh_comm_ctl_t *m, int size)
{
    return (m->kind == MESH_CTL_FAILED || m->kind == MESH_CTL_HUNG) && m->rank >= 0 &&
           m->rank < size;
}

static void progress_transports(mesh_comm_t *c)
{
    for (int t = 0; t < c->ntls; t++)
        if (c->tls[t].iface) mesh_tl_progress(c->tls[t].iface);
}

/* Probes and answers on the send ops of the channel, allocated when first needed. */
static int ctl_send(mesh_comm_t *c, int p, const mesh_comm_ctl_t *m)
{
    if (c->ctl_sops == NULL && (c->ctl_sops = calloc((size_t)c->size, sizeof(mesh_tl_op_t))) == NULL)
        return -1;
    if (c->ctl_sops[p].status == MESH_INPROGRESS || c->peers[p].ep == NULL) return -1;
    return mesh_tl_isend(c->peers[p].ep, MESH_TAG_VERDICT, m, sizeof(*m), &c->ctl_sops[p]) ==
                   MESH_OK
               ? 0
               : -1;
}

/* Takes a verdict that arrived, without failing anything; handles probes and answers. Returns
 * the peer that sent the verdict, or -1. */
static int take_ctl(mesh_comm_t *c)
{
    if (c->ctl_rops == NULL) return -1;
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank || c->ctl_rops[p].status != MESH_OK) continue;
        mesh_comm_ctl_t m = c->ctl_in[p];
        if (is_verdict(&m, c->size)) {
            if (c->culprit >= 0) continue;
            c->culprit = m.rank;
            c->culprit_hung = m.kind == MESH_CTL_HUNG;
            return p;
        }
        if (m.kind == MESH_CTL_PROBE) ctl_send(c, p, &ctl_alive);
        else if (m.kind == MESH_CTL_ALIVE && c->alive != NULL) c->alive[p] = 1;
        /* ready for the next one */
        if (mesh_comm_post_ctl(c, p) != MESH_OK) c->ctl_rops[p].status = MESH_ERR_PEER_FAILED;
    }
    return -1;
}

void mesh_comm_check_verdicts(mesh_comm_t *c)
{
    int had = c->culprit >= 0;
    int from = take_ctl(c);
    if (had || from < 0) return;
    if (c->culprit_hung) {
        mesh_error(MESH_ERR_TIMEOUT, "rank %d stopped answering (found by rank %d when its wait "
                   "timed out)", c->culprit, from);
        mesh_comm_fail_active(c, MESH_ERR_TIMEOUT);
    } else {
        mesh_error(MESH_ERR_PEER_FAILED, "rank %d failed (reported by rank %d)", c->culprit, from);
        mesh_comm_fail_active(c, MESH_ERR_PEER_FAILED);
    }
}

int mesh_comm_await_verdict(mesh_comm_t *c)
{
    double until = mesh_time() + c->verdict_wait_s;
    while (c->culprit < 0 && mesh_time() < until) {
        progress_transports(c);
        take_ctl(c);
    }
    return c->culprit;
}

void mesh_comm_publish_verdict(mesh_comm_t *c, int culprit, int hung)
{
    if (c->verdict_sent || culprit < 0) return;
    c->verdict_sent = 1;
    if (c->culprit < 0) {
        c->culprit = culprit;
        c->culprit_hung = hung;
    }
    c->verdict_out = (mesh_comm_ctl_t){.kind = c->culprit_hung ? MESH_CTL_HUNG : MESH_CTL_FAILED,
                                       .rank = c->culprit};
    int pending = 0;
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank || p == c->culprit || c->peers[p].ep == NULL) continue;
        if (mesh_comm_check_peer(c, p) != MESH_OK) continue;
        if (mesh_tl_isend(c->peers[p].ep, MESH_TAG_VERDICT, &c->verdict_out,
                          sizeof(mesh_comm_ctl_t), &c->verdict_sops[p]) == MESH_OK)
            pending = 1;
    }
    /* give the notices a bounded moment to leave: the caller is about to abort or exit */
    double until = mesh_time() + 0.2;
    while (pending && mesh_time() < until) {
        pending = 0;
        progress_transports(c);
        for (int p = 0; p < c->size; p++)
            if (c->verdict_sops[p].status == MESH_INPROGRESS && c->peers[p].ep &&
                p != c->rank && p != c->culprit && mesh_comm_check_peer(c, p) == MESH_OK)
                pending = 1;
    }
}

int mesh_comm_blame(mesh_comm_t *c, int peer)
{
    if (c->culprit < 0) mesh_comm_await_verdict(c);
    if (c->culprit >= 0 && c->culprit != peer) return c->culprit;
    mesh_comm_publish_verdict(c, peer, 0);
    return peer;
}

int mesh_comm_find_hung(mesh_comm_t *c, const int *waits, int nwaits)
{
    if (c->culprit >= 0) return c->culprit;
    if (c->probe_wait_s <= 0 || c->size < 2) return -1;
    if (c->alive == NULL && (c->alive = calloc((size_t)c->size, 1)) == NULL) return -1;
    int asked = 0;
    for (int p = 0; p < c->size; p++) {
        c->alive[p] = p == c->rank;
        /* a rank already known gone cannot answer: the ordinary failure path names it */
        if (p != c->rank && mesh_comm_check_peer(c, p) == MESH_OK && ctl_send(c, p, &ctl_probe) == 0)
            asked = 1;
    }
    if (!asked) return -1;
    double until = mesh_time() + c->probe_wait_s;
    for (;;) {
        progress_transports(c);
        take_ctl(c);
        if (c->culprit >= 0) return c->culprit; /* another rank named one meanwhile */
        int all = 1;
        for (int p = 0; p < c->size && all; p++) all = c->alive[p];
        if (all || mesh_time() >= until) break;
    }
    for (int i = 0; i < nwaits; i++)
        if (waits[i] >= 0 && waits[i] < c->size && !c->alive[waits[i]]) return waits[i];
    for (int p = 0; p < c->size; p++)
        if (!c->alive[p]) return p;
    return -1;
}
