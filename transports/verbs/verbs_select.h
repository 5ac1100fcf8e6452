/*
 * Device-independent pieces of device and port selection and of error reporting:
 * - MESH_IB_HCA parsing ("mlx5_0:1,mlx5_1": devices in order of preference, optional port),
 * - the choice of a GID index on RoCE (a RoCE v2 IPv4-mapped GID first),
 * - completion statuses and asynchronous events turned into mesh statuses with a message that
 *   names the peer rank.
 */
#ifndef MESH_TL_VERBS_SELECT_H
#define MESH_TL_VERBS_SELECT_H

#include "mesh.h"
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#define MESH_TL_VERBS_HCA_MAX 16

typedef struct {
    char name[IBV_SYSFS_NAME_MAX];
    int port; /* 0: any active port of the device */
} mesh_tl_verbs_hca_t;

/* Parses spec into at most max entries; "" gives 0 entries (any device). A malformed entry
 * fails with MESH_ERR_INVALID_ARG naming MESH_IB_HCA and the entry. */
mesh_status_t mesh_tl_verbs_hca_parse(const char *spec, mesh_tl_verbs_hca_t *list, int max, int *n);
/* Preference rank (0 best) of a device port under the list, or -1 when it is not allowed. */
int mesh_tl_verbs_hca_match(const mesh_tl_verbs_hca_t *list, int n, const char *dev, int port);

typedef enum {
    MESH_TL_VERBS_GID_IB = 0,
    MESH_TL_VERBS_GID_ROCE_V1,
    MESH_TL_VERBS_GID_ROCE_V2
} mesh_tl_verbs_gid_type_t;

typedef struct {
    int index;
    mesh_tl_verbs_gid_type_t type;
    uint8_t raw[16];
} mesh_tl_verbs_gid_t;

/* The best entry for RoCE: v2 with an IPv4-mapped address (routable, what RoCE fabrics are
 * configured for), then v2 with a global IPv6 address, then v2, then v1; the lowest index on a
 * tie. Returns the chosen entry's index field, or -1 when n is 0. Zero GIDs are skipped. */
int mesh_tl_verbs_gid_pick(const mesh_tl_verbs_gid_t *gids, int n);

/* A completion status on the connection to peer: MESH_OK for success, otherwise
 * MESH_ERR_PEER_FAILED with why filled ("rank 3: ..."). */
mesh_status_t mesh_tl_verbs_wc_status(enum ibv_wc_status status, int peer, char *why, size_t len);
/* An asynchronous event: MESH_OK when it is informational; MESH_ERR_PEER_FAILED for a queue
 * pair's error (peer >= 0 names its rank) and for a port or device failure (peer < 0: every
 * peer is lost); MESH_ERR_IO for a completion queue overrun. */
mesh_status_t mesh_tl_verbs_async_status(enum ibv_event_type ev, int peer, char *why, size_t len);

#endif
