/*
 * The health of a communicator: which rank failed, stopped answering or called another
 * operation, and the control channel that tells every rank, so that every survivor names the
 * same rank and the same calls (health.c has the protocol).
 *
 * The schedule runner reports what it sees in a few calls, each returning the status it fails
 * with, the message recorded and the other ranks told: an operation a peer's failure ended
 * (mesh_health_peer_failed), a message of another call (mesh_health_other_call), a peer it still
 * needs found gone while nothing moves (mesh_health_watch), and a wait that timed out
 * (mesh_health_stalled). Every call of this file runs with the communicator's lock held.
 */
#ifndef MESH_COLL_HEALTH_H
#define MESH_COLL_HEALTH_H

#include "mesh.h"
#include "transports/tl.h"
#include <stddef.h>
#include <stdint.h>

typedef struct mesh_comm mesh_comm_t;

/* A control message: what kind, and the rank a verdict names; a mismatch verdict also carries
 * the two calls' signatures (the reporter's first) and the reporter's count. */
enum { MESH_CTL_FAILED = 1, MESH_CTL_HUNG, MESH_CTL_PROBE, MESH_CTL_ALIVE, MESH_CTL_MISMATCH };
typedef struct {
    int32_t kind;
    int32_t rank;
    uint32_t sig_mine, sig_theirs;
    uint64_t count;
    /* a probe: the collective (sequence number) the prober waits in. An answer: the sequence
     * number of the answerer's latest collective (seq_last), and, when it made the asked one
     * (found), its signature (sig_mine) and count there */
    uint32_t seq, seq_last;
    int32_t found, pad;
} mesh_health_ctl_t;

/* The collectives this rank started lately, for the answers to probes. */
#define MESH_HEALTH_RECENT 16
typedef struct {
    uint32_t seq, sig;
    uint64_t count;
    int root; /* -1: none */
} mesh_health_recent_t;

/* The communicator's part: the control channel and what it learnt. */
typedef struct {
    int32_t culprit;               /* rank known to have failed or stopped, -1 if none */
    int culprit_hung;              /* it stopped answering (timeout) rather than died */
    mesh_health_ctl_t verdict_out; /* what we sent */
    mesh_health_ctl_t *ctl_in;     /* [size] the last control message from each peer */
    mesh_tl_op_t *ctl_rops;        /* [size] standing receives, posted again after probes */
    mesh_tl_op_t *verdict_sops;    /* [size] verdicts sent */
    mesh_tl_op_t *ctl_sops;        /* [size] probes and answers sent; allocated by the first */
    mesh_health_ctl_t *answers;    /* [size] their answers (allocated with alive) */
    uint8_t *alive;                /* [size] answered this rank's probe */
    mesh_health_recent_t recent[MESH_HEALTH_RECENT]; /* by seq % MESH_HEALTH_RECENT */
    uint32_t nstarted; /* collectives started (recent[] holds the last ones) */
    int verdict_sent;
    int mismatch_seen; /* a mismatch verdict arrived (or this rank sent one) */
    int look_calls; /* calls still to start with a look for messages left behind (comm_progress.c)
                     */
    mesh_status_t fail_all; /* a verdict arrived: what runs fails with (mesh_health_poll) */
    double verdict_wait_s;  /* MESH_VERDICT_WAIT */
    double probe_wait_s;    /* MESH_HANG_PROBE */
    /* the failure, for mesh_comm_error_info: the rank it names and the call it ended */
    int err_rank;
    char err_call[96];
} mesh_health_t;

/* The call a schedule serves, as the runner knows it: its collective sequence number
 * (UINT32_MAX: point-to-point), signature, count (SIZE_MAX: unknown) and root (-1: none). */
typedef struct {
    uint32_t seq, sig;
    size_t count;
    int root;
} mesh_health_call_t;

/* Allocates the channel (the knobs read); the standing receives are posted once every peer has
 * an endpoint (mesh_health_listen). fini frees what init and later calls allocated. */
mesh_status_t mesh_health_init(mesh_comm_t *comm);
mesh_status_t mesh_health_listen(mesh_comm_t *comm);
void mesh_health_fini(mesh_comm_t *comm);

/* A collective this rank starts: recorded for the answers to probes, and refused when a
 * message of a collective before floor (a sequence number: every collective before it ended
 * here) still waits for a receive: its sender ran another call than this rank did (another
 * root, most often), which ended here without taking it. Then MESH_ERR_MISMATCH naming both
 * ranks and calls, told to every rank. floor UINT32_MAX: recorded only. Transports that cannot list
 * the messages they keep (tl.h) are not looked at. */
mesh_status_t mesh_health_start_call(mesh_comm_t *comm, const mesh_health_call_t *call,
                                     uint32_t floor);
/* Handles the control messages that arrived (answers probes, takes verdicts); returns, once,
 * the status every operation under way fails with after a verdict, else MESH_OK. */
mesh_status_t mesh_health_poll(mesh_comm_t *comm);
/* An operation failed: the communicator is unusable from now on (sticky status, and the message
 * this thread recorded for it); call: the call it ended (NULL: none). */
void mesh_health_failed(mesh_comm_t *comm, mesh_status_t status, const mesh_health_call_t *call);

/* The runner's reports. A send to or receive from peer (during: "send to", "recv from") ended
 * with MESH_ERR_PEER_FAILED: names the rank every survivor names. */
mesh_status_t mesh_health_peer_failed(mesh_comm_t *comm, int peer, const char *during);
/* A message from peer carries another call's signature (theirs) than call's. */
mesh_status_t mesh_health_other_call(mesh_comm_t *comm, const mesh_health_call_t *call, int peer,
                                     uint32_t theirs);
/* Nothing moves and call still needs peer: MESH_OK while it is alive, else the failure. */
mesh_status_t mesh_health_watch(mesh_comm_t *comm, int peer);
/* call's wait timed out on peers[0..npeers) (described in waits): probes every rank and names
 * the one that stopped, the one that called another operation, or the one that has not made
 * the call, and tells the others. */
mesh_status_t mesh_health_stalled(mesh_comm_t *comm, const mesh_health_call_t *call,
                                  const int *peers, int npeers, const char *waits);

#endif
