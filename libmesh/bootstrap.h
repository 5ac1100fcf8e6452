/* Bootstrap: how ranks find each other before any transport exists. Every flavour gives the
 * same thing, an allgather of small blobs among the ranks, bounded by a deadline. timeout_s
 * bounds creation and each allgather; 0 or less means MESH_TIMEOUT. */
#ifndef MESH_BOOTSTRAP_H
#define MESH_BOOTSTRAP_H

#include "mesh.h"
#include "libmesh/sock.h"
#include <stddef.h>
#include <stdint.h>

typedef struct mesh_bootstrap mesh_bootstrap_t;
struct mesh_bootstrap {
    int rank;
    int size;
    double timeout_s;
    /* Gathers len bytes from every rank into out (size * len, rank order). Collective. */
    mesh_status_t (*allgather)(mesh_bootstrap_t *bs, const void *in, void *out, size_t len);
    void (*destroy)(mesh_bootstrap_t *bs);
};

static inline mesh_status_t mesh_bootstrap_allgather(mesh_bootstrap_t *bs, const void *in,
                                                     void *out, size_t len)
{
    return bs->allgather(bs, in, out, len);
}

/* Layout of mesh_unique_id_t's bytes. */
typedef struct {
    uint32_t magic;          /* MESH_UID_MAGIC */
    uint16_t family;         /* AF_INET or AF_INET6 */
    uint16_t port;           /* network order */
    uint8_t addr[16];        /* IPv4 in the first 4 bytes, or IPv6 */
    uint8_t secret[32];      /* random; every bootstrap connection must present it */
    uint64_t listener_token; /* identifies the root's listener inside its process */
} mesh_uid_layout_t;
#define MESH_UID_MAGIC 0x4d455348u /* "MESH" */

/* Registers the "bootstrap" config table (MESH_RANK, MESH_SIZE, MESH_ADDR, MESH_SECRET,
 * MESH_SOCKET_IFNAME, MESH_BOOTSTRAP_PORT_OFFSET); idempotent, called by every create below. */
mesh_status_t mesh_bootstrap_config_register(void);

/* Root side of mesh_unique_id(): opens a listening socket (MESH_SOCKET_IFNAME picks the
 * interface) and records it in the process so that rank 0 of mesh_comm_init_rank uses it. */
mesh_status_t mesh_bootstrap_uid_create(mesh_unique_id_t *id);

/* TCP star bootstrap around rank 0; ranks present the id's secret, others are dropped (logged). */
mesh_status_t mesh_bootstrap_tcp_create(const mesh_unique_id_t *id, int rank, int size,
                                        double timeout_s, mesh_bootstrap_t **bs);

/* The TCP star the tcp, env and PMIx flavours share. Rank 0 passes its listening socket lfd
 * (the bootstrap owns it from then on, even on failure) and root == NULL; the others pass lfd -1
 * and rank 0's address. Every rank passes the same 32-byte secret. */
mesh_status_t mesh_bootstrap_star_create(int rank, int size, double timeout_s,
                                         const uint8_t secret[32], int lfd,
                                         const mesh_sockaddr_t *root, mesh_bootstrap_t **bs);

/* The star's wire parsers, pure so that tests and fuzzers reach them without sockets. */
/* A hello of len bytes: the rank it claims (1..size-1), or -1 with the reason in why. */
int mesh_bootstrap_star_hello_parse(const void *buf, size_t len, const uint8_t *secret, int size,
                                    char *why, size_t wlen);
typedef struct {
    uint32_t type;
    uint64_t seq;
    uint64_t len;         /* an abort's reason length, at most what rank 0 ever sends */
    mesh_status_t status; /* an abort's status, always an error */
} mesh_bootstrap_star_msg_t;
/* A message header of len bytes: 0 with its fields, -1 when it is not a star message. */
int mesh_bootstrap_star_msg_parse(const void *buf, size_t len, mesh_bootstrap_star_msg_t *out);
/* The address and secret in a unique id's bytes (u: the layout), or MESH_ERR_INVALID_ARG. */
mesh_status_t mesh_bootstrap_uid_parse(const mesh_unique_id_t *id, mesh_uid_layout_t *u,
                                       mesh_sockaddr_t *addr);

/* From the environment: MESH_RANK/MESH_SIZE/MESH_ADDR(/MESH_SECRET), torchrun's
 * RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, or PMIx when built with it. Fails with
 * MESH_ERR_NOT_FOUND naming the variables when none is set. */
mesh_status_t mesh_bootstrap_env_create(double timeout_s, mesh_bootstrap_t **bs);

/* User callback allgather. */
mesh_status_t mesh_bootstrap_oob_create(mesh_oob_allgather_fn fn, void *ctx, int rank, int size,
                                        double timeout_s, mesh_bootstrap_t **bs);

#if HAVE_PMIX
mesh_status_t mesh_bootstrap_pmix_create(double timeout_s, mesh_bootstrap_t **bs);
#endif

#endif
