/* Failure verdicts: a rank that sees a peer fail tells every other rank which one, so that every
 * survivor names the same culprit, also when the rank next to it only left after seeing the
 * failure itself. */
#define MESH_LOG_SUBSYSTEM "comm"
#include "collectives/comm.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"

/* A verdict from a peer fails whatever is running with the same culprit everywhere. */
void mesh_comm_check_verdicts(mesh_comm_t *c)
{
    if (c->culprit >= 0 || c->verdict_rops == NULL) return;
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank || c->verdict_rops[p].status != MESH_OK) continue;
        int32_t x = c->verdict_in[p];
        if (x < 0 || x >= c->size) continue;
        c->culprit = x;
        mesh_error(MESH_ERR_PEER_FAILED, "rank %d failed (reported by rank %d)", x, p);
        mesh_comm_fail_active(c, MESH_ERR_PEER_FAILED);
        return;
    }
}

/* Reads a verdict that has arrived, without failing anything; the culprit, or -1. */
static int take_verdict(mesh_comm_t *c)
{
    if (c->culprit >= 0 || c->verdict_rops == NULL) return c->culprit;
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank || c->verdict_rops[p].status != MESH_OK) continue;
        int32_t x = c->verdict_in[p];
        if (x < 0 || x >= c->size) continue;
        c->culprit = x;
        mesh_log_debug("rank %d failed (reported by rank %d)", x, p);
        return x;
    }
    return -1;
}

int mesh_comm_await_verdict(mesh_comm_t *c)
{
    double until = mesh_time() + c->verdict_wait_s;
    while (take_verdict(c) < 0 && mesh_time() < until)
        for (int t = 0; t < c->ntls; t++)
            if (c->tls[t].iface) mesh_tl_progress(c->tls[t].iface);
    return c->culprit;
}

void mesh_comm_publish_verdict(mesh_comm_t *c, int culprit)
{
    if (c->verdict_sent || culprit < 0) return;
    c->verdict_sent = 1;
    if (c->culprit < 0) c->culprit = culprit;
    c->verdict_out = c->culprit;
    int pending = 0;
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank || p == c->culprit || c->peers[p].ep == NULL) continue;
        if (mesh_comm_check_peer(c, p) != MESH_OK) continue;
        if (mesh_tl_isend(c->peers[p].ep, MESH_TAG_VERDICT, &c->verdict_out, sizeof(int32_t),
                          &c->verdict_sops[p]) == MESH_OK)
            pending = 1;
    }
    /* give the notices a bounded moment to leave: the caller is about to abort or exit */
    double until = mesh_time() + 0.2;
    while (pending && mesh_time() < until) {
        pending = 0;
        for (int t = 0; t < c->ntls; t++)
            if (c->tls[t].iface) mesh_tl_progress(c->tls[t].iface);
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
    mesh_comm_publish_verdict(c, peer);
    return peer;
}
