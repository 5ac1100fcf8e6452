/* The control channel of a communicator. A rank that sees a peer fail tells every other rank
 * which one (a verdict), so that every survivor names the same culprit, also when the rank next
 * to it only left after seeing the failure itself. A rank whose wait timed out first probes every
 * rank: ranks waiting in mesh answer at once, a stopped one (SIGSTOP, a debugger, a node that
 * froze) does not, and the verdict names it, so that survivors with longer timeouts do not blame
 * the survivor that gave up first. Control messages go straight to the transports (they are not
 * counted as user bytes) on one standing receive per peer. */
#define MESH_LOG_SUBSYSTEM "comm"
#include "collectives/comm.h"
#include "collectives/signature.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include <stdlib.h>


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

void mesh_comm_note_call(mesh_comm_t *c, uint32_t seq, uint32_t sig, uint64_t count, int root)
{
    c->recent[seq % MESH_COMM_RECENT] = (mesh_comm_recent_t){.seq = seq, .sig = sig,
                                                             .count = count, .root = root};
    c->nstarted = seq + 1;
}

/* The first message kept for a receive that belongs to a collective before floor. */
typedef struct {
    uint32_t floor;
    int peer;
    uint64_t tag;
} orphan_scan_t;

static int orphan_visit(void *arg, int peer, uint64_t tag)
{
    orphan_scan_t *o = arg;
    if (tag & MESH_TAG_P2P) return 0; /* point-to-point and control traffic */
    /* how far before floor, modulo the tag's sequence bits: half the range is the past */
    uint32_t behind = (o->floor - mesh_tag_coll_seq(tag)) & MESH_TAG_COLL_SEQ_MASK;
    if (behind == 0 || behind > MESH_TAG_COLL_SEQ_MASK / 2) return 0;
    o->peer = peer;
    o->tag = tag;
    return 1;
}

mesh_status_t mesh_comm_check_orphans(mesh_comm_t *c, uint32_t floor)
{
    orphan_scan_t o = {.floor = floor & MESH_TAG_COLL_SEQ_MASK, .peer = -1};
    for (int t = 0; t < c->ntls && o.peer < 0; t++)
        if (c->tls[t].iface) mesh_tl_unexpected(c->tls[t].iface, orphan_visit, &o);
    if (o.peer < 0) return MESH_OK;
    uint32_t seq = mesh_tag_coll_seq(o.tag);
    uint32_t theirs = (uint32_t)(o.tag & MESH_TL_TAG_SIG_MASK);
    /* this rank's call there, while the last few calls still remember it */
    const mesh_comm_recent_t *r = &c->recent[seq % MESH_COMM_RECENT];
    int known = (r->seq & MESH_TAG_COLL_SEQ_MASK) == seq && c->nstarted > r->seq;
    char a[96] = "its call", b[96];
    if (known) mesh_coll_sig_describe(r->sig, (size_t)r->count, r->root, a, sizeof(a));
    mesh_coll_sig_describe(theirs, SIZE_MAX, -1, b, sizeof(b));
    const char *why = !known                ? "the ranks called different operations"
                      : r->sig != theirs    ? mesh_coll_sig_diff(r->sig, theirs)
                                            : "the same call, run differently on the two ranks";
    mesh_comm_publish_mismatch(c, o.peer, known ? r->sig : theirs, theirs,
                               known ? r->count : 0);
    mesh_status_t st = mesh_error(MESH_ERR_MISMATCH,
                                  "rank %d called %s where rank %d called %s (%s; collective %u "
                                  "of the communicator, which ended on rank %d without the "
                                  "message rank %d sent it)",
                                  o.peer, b, c->rank, a, why, seq, c->rank, o.peer);
    mesh_comm_set_failed(c, st);
    return st;
}

/* This rank's answer to a probe about collective seq: where it is, and what it called there. */
static const mesh_comm_ctl_t *answer(mesh_comm_t *c, uint32_t seq)
{
    static _Thread_local mesh_comm_ctl_t a;
    const mesh_comm_recent_t *r = &c->recent[seq % MESH_COMM_RECENT];
    a = (mesh_comm_ctl_t){.kind = MESH_CTL_ALIVE, .rank = -1, .seq = seq,
                          .seq_last = c->nstarted ? c->nstarted - 1 : UINT32_MAX};
    if (c->nstarted > seq && r->seq == seq) {
        a.found = 1;
        a.sig_mine = r->sig;
        a.count = r->count;
    }
    return &a;
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
        if (m.kind == MESH_CTL_MISMATCH) {
            if (c->mismatch_seen || m.rank < 0 || m.rank >= c->size) continue;
            c->mismatch_seen = 1;
            char mine[96], theirs[96];
            mesh_coll_sig_describe(m.sig_mine, (size_t)m.count, -1, mine, sizeof(mine));
            mesh_coll_sig_describe(m.sig_theirs, SIZE_MAX, -1, theirs, sizeof(theirs));
            mesh_error(MESH_ERR_MISMATCH, "rank %d called %s where rank %d called %s (%s; "
                       "reported by rank %d)", m.rank, theirs, p, mine,
                       mesh_coll_sig_diff(m.sig_mine, m.sig_theirs), p);
            /* also when nothing runs here now: the next call says why the communicator failed */
            mesh_comm_set_failed(c, MESH_ERR_MISMATCH);
            mesh_comm_fail_active(c, MESH_ERR_MISMATCH);
            continue;
        }
        if (is_verdict(&m, c->size)) {
            if (c->culprit >= 0) continue;
            c->culprit = m.rank;
            c->culprit_hung = m.kind == MESH_CTL_HUNG;
            return p;
        }
        if (m.kind == MESH_CTL_PROBE) {
            ctl_send(c, p, answer(c, m.seq));
        } else if (m.kind == MESH_CTL_ALIVE && c->alive != NULL) {
            c->alive[p] = 1;
            c->answers[p] = m;
        }
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
    mesh_status_t st = c->culprit_hung ? MESH_ERR_TIMEOUT : MESH_ERR_PEER_FAILED;
    if (c->culprit_hung)
        mesh_error(st, "rank %d stopped answering (found by rank %d when its wait timed out)",
                   c->culprit, from);
    else
        mesh_error(st, "rank %d failed (reported by rank %d)", c->culprit, from);
    mesh_comm_set_failed(c, st);
    mesh_comm_fail_active(c, st);
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

/* Sends verdict_out to every live peer but skip, and gives the notices a bounded moment to
 * leave: the caller is about to fail, abort or exit. */
static void send_verdict(mesh_comm_t *c, int skip)
{
    int pending = 0;
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank || p == skip || c->peers[p].ep == NULL) continue;
        if (mesh_comm_check_peer(c, p) != MESH_OK) continue;
        if (mesh_tl_isend(c->peers[p].ep, MESH_TAG_VERDICT, &c->verdict_out,
                          sizeof(mesh_comm_ctl_t), &c->verdict_sops[p]) == MESH_OK)
            pending = 1;
    }
    double until = mesh_time() + 0.2;
    while (pending && mesh_time() < until) {
        pending = 0;
        progress_transports(c);
        for (int p = 0; p < c->size; p++)
            if (c->verdict_sops[p].status == MESH_INPROGRESS && c->peers[p].ep &&
                p != c->rank && p != skip && mesh_comm_check_peer(c, p) == MESH_OK)
                pending = 1;
    }
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
    send_verdict(c, c->culprit);
}

void mesh_comm_publish_mismatch(mesh_comm_t *c, int peer, uint32_t sig_mine, uint32_t sig_theirs,
                                uint64_t count)
{
    if (c->mismatch_seen) return;
    c->mismatch_seen = 1;
    c->verdict_out = (mesh_comm_ctl_t){.kind = MESH_CTL_MISMATCH, .rank = peer,
                                       .sig_mine = sig_mine, .sig_theirs = sig_theirs,
                                       .count = count};
    send_verdict(c, -1);
}

int mesh_comm_blame(mesh_comm_t *c, int peer)
{
    if (c->culprit < 0) mesh_comm_await_verdict(c);
    if (c->culprit >= 0 && c->culprit != peer) return c->culprit;
    mesh_comm_publish_verdict(c, peer, 0);
    return peer;
}

/* Among the ranks that answered, one at this collective from another call, or one that has not
 * made it; waited-on ranks first. */
static void diagnose(mesh_comm_t *c, const int *waits, int nwaits, uint32_t seq, uint32_t sig,
                     mesh_comm_diag_t *d)
{
    if (seq == UINT32_MAX) return; /* point-to-point: no call to compare */
    for (int pass = 0; pass < 2 && d->kind == MESH_DIAG_NONE; pass++) {
        int n = pass == 0 ? nwaits : c->size;
        for (int i = 0; i < n && d->kind == MESH_DIAG_NONE; i++) {
            int p = pass == 0 ? waits[i] : i;
            if (p < 0 || p >= c->size || p == c->rank || !c->alive[p]) continue;
            const mesh_comm_ctl_t *a = &c->answers[p];
            if (a->found && a->seq == seq && a->sig_mine != sig)
                *d = (mesh_comm_diag_t){.kind = MESH_DIAG_MISMATCH, .peer = p,
                                        .their_sig = a->sig_mine, .their_count = a->count};
            else if (a->seq_last == UINT32_MAX || a->seq_last < seq)
                *d = (mesh_comm_diag_t){.kind = MESH_DIAG_BEHIND, .peer = p,
                                        .their_last = a->seq_last,
                                        .started = a->seq_last != UINT32_MAX};
        }
    }
}

void mesh_comm_find_hung(mesh_comm_t *c, const int *waits, int nwaits, uint32_t seq,
                         uint32_t sig, mesh_comm_diag_t *d)
{
    *d = (mesh_comm_diag_t){.kind = MESH_DIAG_NONE, .peer = -1};
    if (c->culprit >= 0) {
        *d = (mesh_comm_diag_t){.kind = MESH_DIAG_HUNG, .peer = c->culprit};
        return;
    }
    if (c->probe_wait_s <= 0 || c->size < 2) return;
    if (c->alive == NULL) {
        c->alive = calloc((size_t)c->size, 1);
        c->answers = calloc((size_t)c->size, sizeof(*c->answers));
        if (c->alive == NULL || c->answers == NULL) return;
    }
    mesh_comm_ctl_t probe = {.kind = MESH_CTL_PROBE, .rank = -1, .seq = seq};
    int asked = 0;
    for (int p = 0; p < c->size; p++) {
        c->alive[p] = p == c->rank;
        /* a rank already known gone cannot answer: the ordinary failure path names it */
        if (p != c->rank && mesh_comm_check_peer(c, p) == MESH_OK && ctl_send(c, p, &probe) == 0)
            asked = 1;
    }
    if (!asked) return;
    double until = mesh_time() + c->probe_wait_s;
    for (;;) {
        progress_transports(c);
        take_ctl(c);
        /* ranks probing this one on other communicators get their answers meanwhile */
        mesh_progress_idle();
        if (c->culprit >= 0) { /* another rank named one meanwhile */
            *d = (mesh_comm_diag_t){.kind = MESH_DIAG_HUNG, .peer = c->culprit};
            return;
        }
        int all = 1;
        for (int p = 0; p < c->size && all; p++) all = c->alive[p];
        if (all || mesh_time() >= until) break;
    }
    /* a rank that answers from another call explains the hang better than one that is silent
     * (it may have left the communicator after failing on the mismatch itself) */
    diagnose(c, waits, nwaits, seq, sig, d);
    if (d->kind != MESH_DIAG_NONE) return;
    for (int i = 0; i < nwaits; i++)
        if (waits[i] >= 0 && waits[i] < c->size && !c->alive[waits[i]]) {
            *d = (mesh_comm_diag_t){.kind = MESH_DIAG_HUNG, .peer = waits[i]};
            return;
        }
    for (int p = 0; p < c->size; p++)
        if (!c->alive[p]) {
            *d = (mesh_comm_diag_t){.kind = MESH_DIAG_HUNG, .peer = p};
            return;
        }
}
