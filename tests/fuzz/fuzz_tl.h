/* Shared by the transport fuzz targets: a receive posted with guard bytes around its buffer. */
#ifndef MESH_FUZZ_TL_H
#define MESH_FUZZ_TL_H

#include "transports/tl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_RECVS 4
#define FUZZ_GUARD 64

typedef struct {
    mesh_tl_op_t op;
    char *raw; /* FUZZ_GUARD, len bytes, FUZZ_GUARD */
    size_t len;
    int posted;
} fuzz_recv_t;

/* Receives of 1 << (bits % 13) bytes with tags 0..FUZZ_RECVS-1. */
static inline void fuzz_recvs_init(fuzz_recv_t *r, unsigned bits)
{
    for (int k = 0; k < FUZZ_RECVS; k++, bits >>= 3) {
        r[k].len = (size_t)1 << (bits % 13);
        r[k].raw = malloc(r[k].len + 2 * FUZZ_GUARD);
        if (r[k].raw != NULL)
            memset(r[k].raw, 0x5a, r[k].len + 2 * FUZZ_GUARD);
        r[k].posted = 0;
    }
}

static inline void fuzz_recv_post(mesh_tl_ep_t *ep, fuzz_recv_t *r, int k)
{
    if (r[k].raw != NULL && !r[k].posted &&
        mesh_tl_irecv(ep, (uint64_t)k, r[k].raw + FUZZ_GUARD, r[k].len, &r[k].op) == MESH_OK)
        r[k].posted = 1;
}

/* Checks what the transport promised (nothing written outside a buffer, lengths within it for
 * successful receives), then frees. Call after the endpoint is destroyed. */
static inline void fuzz_recvs_check(fuzz_recv_t *r)
{
    for (int k = 0; k < FUZZ_RECVS; k++) {
        if (r[k].raw == NULL)
            continue;
        for (size_t i = 0; i < FUZZ_GUARD; i++)
            if ((unsigned char)r[k].raw[i] != 0x5a ||
                (unsigned char)r[k].raw[FUZZ_GUARD + r[k].len + i] != 0x5a)
                abort(); /* written outside the receive buffer */
        if (r[k].posted && r[k].op.status == MESH_OK && r[k].op.length > r[k].len)
            abort();                             /* a successful receive longer than its buffer */
        if (getenv("MESH_FUZZ_VERBOSE") != NULL) /* what a corpus file does, when writing one */
            fprintf(stderr, "receive tag %d (%zu bytes): %s, status %d, length %zu\n", k, r[k].len,
                    r[k].posted ? "posted" : "not posted", r[k].op.status, r[k].op.length);
        free(r[k].raw);
    }
}

#endif
