/* Pure state machines and accounting of the verbs transport (see verbs_proto.h). */
#include "config.h"
#include "transports/verbs/verbs_proto.h"

int mesh_tl_verbs_conn_next(mesh_tl_verbs_conn_state_t s, mesh_tl_verbs_conn_event_t ev)
{
    if (ev == MESH_TL_VERBS_EV_CLOSE)
        return MESH_TL_VERBS_CONN_CLOSED;
    if (s == MESH_TL_VERBS_CONN_CLOSED)
        return -1;
    if (ev == MESH_TL_VERBS_EV_ERROR)
        return s == MESH_TL_VERBS_CONN_NONE ? -1 : MESH_TL_VERBS_CONN_FAILED;
    switch (s) {
    case MESH_TL_VERBS_CONN_NONE:
        return ev == MESH_TL_VERBS_EV_CREATE ? MESH_TL_VERBS_CONN_INIT : -1;
    case MESH_TL_VERBS_CONN_INIT:
        /* an acknowledgement always comes with the peer's own information, applied first */
        return ev == MESH_TL_VERBS_EV_PEER_INFO ? MESH_TL_VERBS_CONN_RTS : -1;
    case MESH_TL_VERBS_CONN_RTS:
        if (ev == MESH_TL_VERBS_EV_PEER_INFO)
            return MESH_TL_VERBS_CONN_RTS; /* repeat */
        return ev == MESH_TL_VERBS_EV_PEER_ACK ? MESH_TL_VERBS_CONN_READY : -1;
    case MESH_TL_VERBS_CONN_READY:
        /* repeats from a peer that missed our acknowledgement */
        return ev == MESH_TL_VERBS_EV_PEER_INFO || ev == MESH_TL_VERBS_EV_PEER_ACK
                   ? MESH_TL_VERBS_CONN_READY
                   : -1;
    case MESH_TL_VERBS_CONN_FAILED:
        /* late connect messages of a failed connection are dropped */
        return ev == MESH_TL_VERBS_EV_PEER_INFO || ev == MESH_TL_VERBS_EV_PEER_ACK
                   ? MESH_TL_VERBS_CONN_FAILED
                   : -1;
    default:
        return -1;
    }
}

const char *mesh_tl_verbs_conn_name(mesh_tl_verbs_conn_state_t s)
{
    static const char *const names[] = {"none", "init", "rts", "ready", "failed", "closed"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

int mesh_tl_verbs_conn_resend_due(mesh_tl_verbs_conn_state_t s, double now, double last_sent,
                                  int attempts, double interval)
{
    if (s != MESH_TL_VERBS_CONN_INIT && s != MESH_TL_VERBS_CONN_RTS)
        return 0;
    if (attempts == 0)
        return 1;
    double wait = interval;
    for (int i = 1; i < attempts && wait < 1.0; i++)
        wait *= 2;
    if (wait > 1.0)
        wait = 1.0;
    return now - last_sent >= wait;
}

mesh_tl_verbs_proto_t mesh_tl_verbs_proto_pick(size_t len, size_t hdr, size_t max_inline,
                                               size_t bounce)
{
    if (len <= bounce && hdr <= bounce - len) {
        if (len + hdr <= max_inline)
            return MESH_TL_VERBS_PROTO_INLINE;
        return MESH_TL_VERBS_PROTO_EAGER;
    }
    return MESH_TL_VERBS_PROTO_RNDV;
}

int mesh_tl_verbs_msg_next(mesh_tl_verbs_msg_state_t s, mesh_tl_verbs_proto_t proto,
                           mesh_tl_verbs_msg_event_t ev)
{
    int rndv = proto == MESH_TL_VERBS_PROTO_RNDV;
    if (ev == MESH_TL_VERBS_MEV_ERROR)
        return s == MESH_TL_VERBS_MSG_DONE ? -1 : MESH_TL_VERBS_MSG_FAILED;
    switch (s) {
    case MESH_TL_VERBS_MSG_QUEUED:
        return ev == MESH_TL_VERBS_MEV_POST ? MESH_TL_VERBS_MSG_POSTED : -1;
    case MESH_TL_VERBS_MSG_POSTED:
        if (ev == MESH_TL_VERBS_MEV_LOCAL)
            return rndv ? MESH_TL_VERBS_MSG_WAIT_FIN : MESH_TL_VERBS_MSG_DONE;
        return ev == MESH_TL_VERBS_MEV_FIN && rndv ? MESH_TL_VERBS_MSG_WAIT_LOCAL : -1;
    case MESH_TL_VERBS_MSG_WAIT_FIN:
        return ev == MESH_TL_VERBS_MEV_FIN ? MESH_TL_VERBS_MSG_DONE : -1;
    case MESH_TL_VERBS_MSG_WAIT_LOCAL:
        return ev == MESH_TL_VERBS_MEV_LOCAL ? MESH_TL_VERBS_MSG_DONE : -1;
    case MESH_TL_VERBS_MSG_MATCHED:
        return ev == MESH_TL_VERBS_MEV_POST && rndv ? MESH_TL_VERBS_MSG_READING : -1;
    case MESH_TL_VERBS_MSG_READING:
        return ev == MESH_TL_VERBS_MEV_LOCAL ? MESH_TL_VERBS_MSG_DONE : -1;
    default:
        return -1;
    }
}

int mesh_tl_verbs_credits_take(mesh_tl_verbs_credits_t *c)
{
    if (mesh_tl_verbs_credits_avail(c) == 0)
        return 0;
    c->sent++;
    return 1;
}

void mesh_tl_verbs_credits_update(mesh_tl_verbs_credits_t *c, uint64_t peer_freed)
{
    if (peer_freed > c->peer_freed && peer_freed <= c->sent)
        c->peer_freed = peer_freed;
}

int mesh_tl_verbs_creturn_due(const mesh_tl_verbs_creturn_t *r, uint32_t threshold, int idle)
{
    if (r->in_flight)
        return 0;
    uint64_t owed = r->reposted - r->reported;
    return owed >= threshold || (owed > 0 && idle);
}
