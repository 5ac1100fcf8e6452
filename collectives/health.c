/* The control channel of a communicator. A rank that sees a peer fail tells every other rank
 * which one (a verdict), so that every survivor names the same culprit, also when the rank next
 * to it only left after seeing the failure itself. A rank whose wait timed out first probes every
 * rank: ranks waiting in mesh answer at once, a stopped one (SIGSTOP, a debugger, a node that
 * froze) does not, and the verdict names it, so that survivors with longer timeouts do not blame
 * the survivor that gave up first. Control messages go straight to the transports (they are not
 * counted as user bytes) on one standing receive per peer. */
#define MESH_LOG_SUBSYSTEM "comm"
#include "collectives/health.h"
#include "collectives/comm.h"
#include "collectives/signature.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include <stdio.h>
#include <stdlib.h>

/* What a timed-out wait found out from the probe (find_hung). */
typedef struct {
    enum { DIAG_NONE = 0, DIAG_HUNG, DIAG_MISMATCH, DIAG_BEHIND } kind;
    int peer;           /* the rank to name */
    uint32_t their_sig; /* MISMATCH: its signature at the same collective */
    uint64_t their_count;
    uint32_t their_last; /* BEHIND: the sequence number of its latest collective */
    int started;         /* BEHIND: it made any collective call at all */
} diag_t;

mesh_status_t mesh_health_init(mesh_comm_t *c)
{
    mesh_health_t *h = &c->health;
    h->culprit = -1;
    h->err_rank = -1;
    h->verdict_wait_s = mesh_config_double("VERDICT_WAIT");
    h->probe_wait_s = mesh_config_double("HANG_PROBE");
    h->ctl_in = calloc((size_t)c->size, sizeof(mesh_health_ctl_t));
    h->ctl_rops = calloc(2 * (size_t)c->size, sizeof(mesh_tl_op_t));
    h->verdict_sops = h->ctl_rops ? h->ctl_rops + c->size : NULL;
    if (h->ctl_in == NULL || h->ctl_rops == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate the control channel of %d ranks",
                          c->size);
    return MESH_OK;
}

void mesh_health_fini(mesh_comm_t *c)
{
    mesh_health_t *h = &c->health;
    free(h->ctl_in);
    free(h->ctl_rops);
    free(h->ctl_sops);
    free(h->alive);
    free(h->answers);
    h->ctl_in = h->answers = NULL;
    h->ctl_rops = h->verdict_sops = h->ctl_sops = NULL;
    h->alive = NULL;
}

static mesh_status_t post_ctl(mesh_comm_t *c, int p)
{
    mesh_health_t *h = &c->health;
    h->ctl_rops[p].flags = MESH_TL_OP_STANDING;
    return mesh_tl_irecv(c->peers[p].ep, MESH_TAG_VERDICT, &h->ctl_in[p], sizeof(mesh_health_ctl_t),
                         &h->ctl_rops[p]);
}

mesh_status_t mesh_health_listen(mesh_comm_t *c)
{
    /* one preposted receive per peer for control messages */
    for (int p = 0; p < c->size; p++)
        if (p != c->rank)
            MESH_CHECK(post_ctl(c, p));
    return MESH_OK;
}

void mesh_health_failed(mesh_comm_t *c, mesh_status_t status, const mesh_health_call_t *call)
{
    if (status >= 0)
        return;
    if (c->failed >= 0) {
        c->failed = status;
        /* the detecting thread holds the message now; whichever thread waits reads it here */
        snprintf(c->last_error, sizeof(c->last_error), "%s", mesh_error_last());
        c->last_status = status;
        snprintf(c->failure, sizeof(c->failure), "%s", mesh_error_last());
    }
    /* a verdict fails the communicator before the call it ends says which it is */
    if (c->health.err_call[0] != '\0')
        return;
    if (call != NULL && call->seq != UINT32_MAX)
        mesh_coll_sig_describe(call->sig, call->count, call->root, c->health.err_call,
                               sizeof(c->health.err_call));
    else if (call != NULL)
        snprintf(c->health.err_call, sizeof(c->health.err_call), "send/recv");
}

static int is_verdict(const mesh_health_ctl_t *m, int size)
{
    return (m->kind == MESH_CTL_FAILED || m->kind == MESH_CTL_HUNG) && m->rank >= 0 &&
           m->rank < size;
}

static void progress_transports(mesh_comm_t *c)
{
    for (int t = 0; t < c->ntls; t++)
        if (c->tls[t].iface)
            mesh_tl_progress(c->tls[t].iface);
}

/* This rank's answer to a probe about collective seq: where it is, and what it called there. */
static const mesh_health_ctl_t *answer(mesh_comm_t *c, uint32_t seq)
{
    static _Thread_local mesh_health_ctl_t a;
    const mesh_health_t *h = &c->health;
    const mesh_health_recent_t *r = &h->recent[seq % MESH_HEALTH_RECENT];
    a = (mesh_health_ctl_t){.kind = MESH_CTL_ALIVE,
                            .rank = -1,
                            .seq = seq,
                            .seq_last = h->nstarted ? h->nstarted - 1 : UINT32_MAX};
    if (h->nstarted > seq && r->seq == seq) {
        a.found = 1;
        a.sig_mine = r->sig;
        a.count = r->count;
    }
    return &a;
}

/* Probes and answers on the send ops of the channel, allocated when first needed. */
static int ctl_send(mesh_comm_t *c, int p, const mesh_health_ctl_t *m)
{
    mesh_health_t *h = &c->health;
    if (h->ctl_sops == NULL &&
        (h->ctl_sops = calloc((size_t)c->size, sizeof(mesh_tl_op_t))) == NULL)
        return -1;
    if (h->ctl_sops[p].status == MESH_INPROGRESS || c->peers[p].ep == NULL)
        return -1;
    return mesh_tl_isend(c->peers[p].ep, MESH_TAG_VERDICT, m, sizeof(*m), &h->ctl_sops[p]) ==
                   MESH_OK
               ? 0
               : -1;
}

/* A mismatch verdict from peer p: fails the communicator (also when nothing runs here now: the
 * next call says why) and what runs on it. */
static void take_mismatch(mesh_comm_t *c, int p, const mesh_health_ctl_t *m)
{
    mesh_health_t *h = &c->health;
    if (h->mismatch_seen || m->rank < 0 || m->rank >= c->size)
        return;
    h->mismatch_seen = 1;
    char mine[96], theirs[96];
    mesh_coll_sig_describe(m->sig_mine, (size_t)m->count, -1, mine, sizeof(mine));
    mesh_coll_sig_describe(m->sig_theirs, SIZE_MAX, -1, theirs, sizeof(theirs));
    mesh_error(MESH_ERR_MISMATCH,
               "rank %d called %s where rank %d called %s (%s; reported by "
               "rank %d)",
               m->rank, theirs, p, mine, mesh_coll_sig_diff(m->sig_mine, m->sig_theirs), p);
    h->err_rank = m->rank;
    mesh_health_failed(c, MESH_ERR_MISMATCH, NULL);
    h->fail_all = MESH_ERR_MISMATCH;
}

/* Takes a verdict that arrived, without failing anything; handles probes and answers. Returns
 * the peer that sent the verdict, or -1. */
static int take_ctl(mesh_comm_t *c)
{
    mesh_health_t *h = &c->health;
    if (h->ctl_rops == NULL)
        return -1;
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank || h->ctl_rops[p].status != MESH_OK)
            continue;
        mesh_health_ctl_t m = h->ctl_in[p];
        if (m.kind == MESH_CTL_MISMATCH) {
            take_mismatch(c, p, &m);
            continue;
        }
        if (is_verdict(&m, c->size)) {
            if (h->culprit >= 0)
                continue;
            h->culprit = m.rank;
            h->culprit_hung = m.kind == MESH_CTL_HUNG;
            return p;
        }
        if (m.kind == MESH_CTL_PROBE) {
            ctl_send(c, p, answer(c, m.seq));
        } else if (m.kind == MESH_CTL_ALIVE && h->alive != NULL) {
            h->alive[p] = 1;
            h->answers[p] = m;
        }
        /* ready for the next one */
        if (post_ctl(c, p) != MESH_OK)
            h->ctl_rops[p].status = MESH_ERR_PEER_FAILED;
    }
    return -1;
}

mesh_status_t mesh_health_poll(mesh_comm_t *c)
{
    mesh_health_t *h = &c->health;
    int had = h->culprit >= 0;
    int from = take_ctl(c);
    if (!had && from >= 0) {
        mesh_status_t st = h->culprit_hung ? MESH_ERR_TIMEOUT : MESH_ERR_PEER_FAILED;
        if (h->culprit_hung)
            mesh_error(st, "rank %d stopped answering (found by rank %d when its wait timed out)",
                       h->culprit, from);
        else
            mesh_error(st, "rank %d failed (reported by rank %d)", h->culprit, from);
        h->err_rank = h->culprit;
        mesh_health_failed(c, st, NULL);
        h->fail_all = st;
    }
    mesh_status_t st = h->fail_all;
    h->fail_all = MESH_OK;
    return st;
}

/* After seeing a peer fail, listens for another rank's verdict for MESH_VERDICT_WAIT seconds
 * (progressing transports only); returns the culprit known by then, or -1. */
static int await_verdict(mesh_comm_t *c)
{
    double until = mesh_time() + c->health.verdict_wait_s;
    while (c->health.culprit < 0 && mesh_time() < until) {
        progress_transports(c);
        take_ctl(c);
    }
    return c->health.culprit;
}

/* Sends verdict_out to every live peer but skip, and gives the notices a bounded moment to
 * leave: the caller is about to fail, abort or exit. */
static void send_verdict(mesh_comm_t *c, int skip)
{
    mesh_health_t *h = &c->health;
    int pending = 0;
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank || p == skip || c->peers[p].ep == NULL)
            continue;
        if (mesh_comm_check_peer(c, p) != MESH_OK)
            continue;
        if (mesh_tl_isend(c->peers[p].ep, MESH_TAG_VERDICT, &h->verdict_out,
                          sizeof(mesh_health_ctl_t), &h->verdict_sops[p]) == MESH_OK)
            pending = 1;
    }
    double until = mesh_time() + 0.2;
    while (pending && mesh_time() < until) {
        pending = 0;
        progress_transports(c);
        for (int p = 0; p < c->size; p++)
            if (h->verdict_sops[p].status == MESH_INPROGRESS && c->peers[p].ep && p != c->rank &&
                p != skip && mesh_comm_check_peer(c, p) == MESH_OK)
                pending = 1;
    }
}

/* After a peer failure (hung: it stopped answering): records the culprit and tells every other
 * live rank, flushing for a bounded moment so the notice leaves before the caller aborts. */
static void publish_verdict(mesh_comm_t *c, int culprit, int hung)
{
    mesh_health_t *h = &c->health;
    if (h->verdict_sent || culprit < 0)
        return;
    h->verdict_sent = 1;
    if (h->culprit < 0) {
        h->culprit = culprit;
        h->culprit_hung = hung;
    }
    h->verdict_out = (mesh_health_ctl_t){.kind = h->culprit_hung ? MESH_CTL_HUNG : MESH_CTL_FAILED,
                                         .rank = h->culprit};
    send_verdict(c, h->culprit);
}

/* This rank received from peer a message of another call: tells every other rank (each fails
 * its operations with MESH_ERR_MISMATCH naming both calls). */
static void publish_mismatch(mesh_comm_t *c, int peer, uint32_t sig_mine, uint32_t sig_theirs,
                             uint64_t count)
{
    mesh_health_t *h = &c->health;
    h->err_rank = peer;
    if (h->mismatch_seen)
        return;
    h->mismatch_seen = 1;
    h->verdict_out = (mesh_health_ctl_t){.kind = MESH_CTL_MISMATCH,
                                         .rank = peer,
                                         .sig_mine = sig_mine,
                                         .sig_theirs = sig_theirs,
                                         .count = count};
    send_verdict(c, -1);
}

/* This rank saw peer fail: returns the rank every survivor names (another rank's verdict, if one
 * arrives within MESH_VERDICT_WAIT, else peer, which it then tells the others). */
static int blame(mesh_comm_t *c, int peer)
{
    mesh_health_t *h = &c->health;
    if (h->culprit < 0)
        await_verdict(c);
    if (h->culprit >= 0 && h->culprit != peer) {
        h->err_rank = h->culprit;
        return h->culprit;
    }
    publish_verdict(c, peer, 0);
    h->err_rank = peer;
    return peer;
}

/* ------------------------------------------------------------- messages left behind */

/* The first message kept for a receive that belongs to a collective before floor. */
typedef struct {
    uint32_t floor;
    int peer;
    uint64_t tag;
} orphan_scan_t;

static int orphan_visit(void *arg, int peer, uint64_t tag)
{
    orphan_scan_t *o = arg;
    if (tag & MESH_TAG_P2P)
        return 0; /* point-to-point and control traffic */
    /* how far before floor, modulo the tag's sequence bits: half the range is the past */
    uint32_t behind = (o->floor - mesh_tag_coll_seq(tag)) & MESH_TAG_COLL_SEQ_MASK;
    if (behind == 0 || behind > MESH_TAG_COLL_SEQ_MASK / 2)
        return 0;
    o->peer = peer;
    o->tag = tag;
    return 1;
}

static mesh_status_t check_orphans(mesh_comm_t *c, uint32_t floor)
{
    const mesh_health_t *h = &c->health;
    orphan_scan_t o = {.floor = floor & MESH_TAG_COLL_SEQ_MASK, .peer = -1};
    for (int t = 0; t < c->ntls && o.peer < 0; t++)
        if (c->tls[t].iface)
            mesh_tl_unexpected(c->tls[t].iface, orphan_visit, &o);
    if (o.peer < 0)
        return MESH_OK;
    uint32_t seq = mesh_tag_coll_seq(o.tag);
    uint32_t theirs = (uint32_t)(o.tag & MESH_TL_TAG_SIG_MASK);
    /* this rank's call there, while the last few calls still remember it */
    const mesh_health_recent_t *r = &h->recent[seq % MESH_HEALTH_RECENT];
    int known = (r->seq & MESH_TAG_COLL_SEQ_MASK) == seq && h->nstarted > r->seq;
    char a[96] = "its call", b[96];
    if (known)
        mesh_coll_sig_describe(r->sig, (size_t)r->count, r->root, a, sizeof(a));
    mesh_coll_sig_describe(theirs, SIZE_MAX, -1, b, sizeof(b));
    const char *why = !known             ? "the ranks called different operations"
                      : r->sig != theirs ? mesh_coll_sig_diff(r->sig, theirs)
                                         : "the same call, run differently on the two ranks";
    publish_mismatch(c, o.peer, known ? r->sig : theirs, theirs, known ? r->count : 0);
    mesh_status_t st = mesh_error(MESH_ERR_MISMATCH,
                                  "rank %d called %s where rank %d called %s (%s; collective %u "
                                  "of the communicator, which ended on rank %d without the "
                                  "message rank %d sent it)",
                                  o.peer, b, c->rank, a, why, seq, c->rank, o.peer);
    mesh_health_call_t call = {.seq = seq,
                               .sig = known ? r->sig : theirs,
                               .count = known ? (size_t)r->count : SIZE_MAX,
                               .root = known ? r->root : -1};
    mesh_health_failed(c, st, &call);
    return st;
}

mesh_status_t mesh_health_start_call(mesh_comm_t *c, const mesh_health_call_t *call, uint32_t floor)
{
    mesh_health_t *h = &c->health;
    h->recent[call->seq % MESH_HEALTH_RECENT] = (mesh_health_recent_t){
        .seq = call->seq, .sig = call->sig, .count = call->count, .root = call->root};
    h->nstarted = call->seq + 1;
    return floor == UINT32_MAX ? MESH_OK : check_orphans(c, floor);
}

/* ------------------------------------------------------------- the runner's reports */

mesh_status_t mesh_health_peer_failed(mesh_comm_t *c, int peer, const char *during)
{
    int culprit = blame(c, peer);
    if (culprit != peer && c->health.culprit_hung)
        return mesh_error(MESH_ERR_TIMEOUT,
                          "rank %d stopped answering (reported by another "
                          "rank); rank %d closed its connection during a %s it",
                          culprit, peer, during);
    if (culprit != peer)
        return mesh_error(MESH_ERR_PEER_FAILED,
                          "rank %d failed (reported by another rank); "
                          "rank %d closed its connection during a %s it",
                          culprit, peer, during);
    return mesh_error(MESH_ERR_PEER_FAILED, "rank %d failed: %s during a %s rank %d", peer,
                      mesh_status_string(MESH_ERR_PEER_FAILED), during, peer);
}

mesh_status_t mesh_health_other_call(mesh_comm_t *c, const mesh_health_call_t *call, int peer,
                                     uint32_t theirs)
{
    char a[96], b[96];
    mesh_coll_sig_describe(call->sig, call->count, call->root, a, sizeof(a));
    mesh_coll_sig_describe(theirs, SIZE_MAX, -1, b, sizeof(b));
    publish_mismatch(c, peer, call->sig, theirs, call->count);
    return mesh_error(MESH_ERR_MISMATCH,
                      "rank %d called %s where rank %d called %s (%s; "
                      "collective %u of the communicator)",
                      peer, b, c->rank, a, mesh_coll_sig_diff(call->sig, theirs), call->seq);
}

mesh_status_t mesh_health_watch(mesh_comm_t *c, int p)
{
    if (p == c->rank || mesh_comm_check_peer(c, p) != MESH_ERR_PEER_FAILED)
        return MESH_OK;
    int culprit = blame(c, p);
    if (culprit != p && c->health.culprit_hung)
        return mesh_error(MESH_ERR_TIMEOUT,
                          "rank %d of the communicator stopped answering "
                          "(reported by another rank; rank %d of %d saw rank %d leave)",
                          culprit, c->rank, c->size, p);
    return mesh_error(MESH_ERR_PEER_FAILED,
                      "rank %d of the communicator failed (rank %d of %d saw it)", culprit, c->rank,
                      c->size);
}

/* Among the ranks that answered, one at this collective from another call, or one that has not
 * made it; waited-on ranks first. */
static void diagnose(mesh_comm_t *c, const int *waits, int nwaits, uint32_t seq, uint32_t sig,
                     diag_t *d)
{
    const mesh_health_t *h = &c->health;
    if (seq == UINT32_MAX)
        return; /* point-to-point: no call to compare */
    for (int pass = 0; pass < 2 && d->kind == DIAG_NONE; pass++) {
        int n = pass == 0 ? nwaits : c->size;
        for (int i = 0; i < n && d->kind == DIAG_NONE; i++) {
            int p = pass == 0 ? waits[i] : i;
            if (p < 0 || p >= c->size || p == c->rank || !h->alive[p])
                continue;
            const mesh_health_ctl_t *a = &h->answers[p];
            if (a->found && a->seq == seq && a->sig_mine != sig)
                *d = (diag_t){.kind = DIAG_MISMATCH,
                              .peer = p,
                              .their_sig = a->sig_mine,
                              .their_count = a->count};
            else if (a->seq_last == UINT32_MAX || a->seq_last < seq)
                *d = (diag_t){.kind = DIAG_BEHIND,
                              .peer = p,
                              .their_last = a->seq_last,
                              .started = a->seq_last != UINT32_MAX};
        }
    }
}

/* A wait timed out on peers waits[0..nwaits) in collective seq with signature sig (seq
 * UINT32_MAX: point-to-point): probes every rank for MESH_HANG_PROBE seconds. HUNG: d->peer did
 * not answer (one waited on first), or another rank's verdict named it meanwhile; MISMATCH: it
 * answered from another call at the same collective; BEHIND: it answered but has not made this
 * collective call; NONE: every rank answered and is at this call. */
static void find_hung(mesh_comm_t *c, const int *waits, int nwaits, uint32_t seq, uint32_t sig,
                      diag_t *d)
{
    mesh_health_t *h = &c->health;
    *d = (diag_t){.kind = DIAG_NONE, .peer = -1};
    if (h->culprit >= 0) {
        *d = (diag_t){.kind = DIAG_HUNG, .peer = h->culprit};
        return;
    }
    if (h->probe_wait_s <= 0 || c->size < 2)
        return;
    if (h->alive == NULL) {
        h->alive = calloc((size_t)c->size, 1);
        h->answers = calloc((size_t)c->size, sizeof(*h->answers));
        if (h->alive == NULL || h->answers == NULL)
            return;
    }
    mesh_health_ctl_t probe = {.kind = MESH_CTL_PROBE, .rank = -1, .seq = seq};
    int asked = 0;
    for (int p = 0; p < c->size; p++) {
        h->alive[p] = p == c->rank;
        /* a rank already known gone cannot answer: the ordinary failure path names it */
        if (p != c->rank && mesh_comm_check_peer(c, p) == MESH_OK && ctl_send(c, p, &probe) == 0)
            asked = 1;
    }
    if (!asked)
        return;
    double until = mesh_time() + h->probe_wait_s;
    for (;;) {
        progress_transports(c);
        take_ctl(c);
        /* ranks probing this one on other communicators get their answers meanwhile */
        mesh_progress_idle();
        if (h->culprit >= 0) { /* another rank named one meanwhile */
            *d = (diag_t){.kind = DIAG_HUNG, .peer = h->culprit};
            return;
        }
        int all = 1;
        for (int p = 0; p < c->size && all; p++)
            all = h->alive[p];
        if (all || mesh_time() >= until)
            break;
    }
    /* a rank that answers from another call explains the hang better than one that is silent
     * (it may have left the communicator after failing on the mismatch itself) */
    diagnose(c, waits, nwaits, seq, sig, d);
    if (d->kind != DIAG_NONE)
        return;
    for (int i = 0; i < nwaits; i++)
        if (waits[i] >= 0 && waits[i] < c->size && !h->alive[waits[i]]) {
            *d = (diag_t){.kind = DIAG_HUNG, .peer = waits[i]};
            return;
        }
    for (int p = 0; p < c->size; p++)
        if (!h->alive[p]) {
            *d = (diag_t){.kind = DIAG_HUNG, .peer = p};
            return;
        }
}

mesh_status_t mesh_health_stalled(mesh_comm_t *c, const mesh_health_call_t *call, const int *peers,
                                  int npeers, const char *waits)
{
    mesh_health_t *h = &c->health;
    uint32_t seq = call->seq, sig = call->sig;
    diag_t d;
    find_hung(c, peers, npeers, seq, sig, &d);
    int hung = d.kind == DIAG_HUNG ? d.peer : -1;
    if (d.kind == DIAG_MISMATCH) {
        char a[96], b[96];
        mesh_coll_sig_describe(sig, call->count, call->root, a, sizeof(a));
        mesh_coll_sig_describe(d.their_sig, (size_t)d.their_count, -1, b, sizeof(b));
        publish_mismatch(c, d.peer, sig, d.their_sig, call->count);
        return mesh_error(MESH_ERR_MISMATCH,
                          "rank %d called %s where rank %d called %s (%s; "
                          "collective %u of the communicator, found when rank %d's wait timed "
                          "out)",
                          d.peer, b, c->rank, a, mesh_coll_sig_diff(sig, d.their_sig), seq,
                          c->rank);
    }
    if (d.kind == DIAG_BEHIND) {
        char a[96], last[48] = "no collective call yet";
        mesh_coll_sig_describe(sig, call->count, call->root, a, sizeof(a));
        if (d.started)
            snprintf(last, sizeof(last), "its last is collective %u", d.their_last);
        publish_verdict(c, d.peer, 1);
        h->err_rank = d.peer;
        return mesh_error(MESH_ERR_TIMEOUT,
                          "rank %d has not called collective %u of the "
                          "communicator, %s, which rank %d waits in since %.1f s "
                          "(MESH_TIMEOUT): a call missing on rank %d, or made on another "
                          "communicator?",
                          d.peer, seq, a, c->rank, c->timeout_s, d.peer);
    }
    if (hung >= 0)
        h->err_rank = hung;
    if (hung >= 0 && h->culprit == hung && !h->culprit_hung)
        return mesh_error(MESH_ERR_PEER_FAILED,
                          "rank %d failed (reported by another rank) "
                          "while rank %d waited on: %s",
                          hung, c->rank, waits);
    if (hung >= 0) {
        publish_verdict(c, hung, 1);
        return mesh_error(MESH_ERR_TIMEOUT,
                          "rank %d stopped answering: rank %d waited %.1f s "
                          "(MESH_TIMEOUT) on: %s, and rank %d did not answer a probe within "
                          "%.2f s (MESH_HANG_PROBE)",
                          hung, c->rank, c->timeout_s, waits, hung, h->probe_wait_s);
    }
    return mesh_error(MESH_ERR_TIMEOUT, "rank %d waited %.1f s (MESH_TIMEOUT) on: %s", c->rank,
                      c->timeout_s, waits);
}
