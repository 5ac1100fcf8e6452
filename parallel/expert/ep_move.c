/*
 * Rows between the sources' packed buffer (destination, its expert, token order) and the
 * experts' grouped rows (local expert, source, token order) with mesh_alltoallv, so that the
 * transfer takes whatever path mesh chooses for the communicator (hierarchical across nodes,
 * ...). One all-to-all-v per local expert index x, all in flight at once: the rows for every
 * rank's expert x are one block per peer on both sides, so nothing is staged or reordered.
 */
#include "ep.h"
#include <stdlib.h>
#include <string.h>

mesh_status_t mesh_ep_move(mesh_ep_layout_h l, const void *packed, void *grouped, size_t rb,
                           int reverse, const char *fn)
{
    mesh_ep_h ep = l->ep;
    int P = ep->size, L = ep->local;
    mesh_request_h *reqs = l->reqs;
    mesh_status_t st = MESH_OK;
    int n = 0;
    for (int x = 0; x < L && st == MESH_OK; x++) {
        size_t *pc = l->counts + (size_t)x * 4 * P, *pd = pc + P, *gc = pd + P, *gd = gc + P;
        for (int p = 0; p < P; p++) {
            pc[p] = l->scount[p * L + x] * rb;
            pd[p] = l->soff[p * L + x] * rb;
            gc[p] = l->rcount[p * L + x] * rb;
            gd[p] = l->roff[p * L + x] * rb;
        }
        pc[ep->rank] = gc[ep->rank] = 0; /* mesh_ep_row finds them in place */
        if (reverse)
            st = mesh_alltoallv(ep->comm, grouped, gc, gd, (void *)(uintptr_t)packed, pc, pd,
                                MESH_UINT8, NULL, &reqs[n]);
        else
            st = mesh_alltoallv(ep->comm, packed, pc, pd, grouped, gc, gd, MESH_UINT8, NULL,
                                &reqs[n]);
        if (st == MESH_OK)
            n++;
    }
    return mesh_ep_wait(ep, reqs, n, st, fn);
}

mesh_status_t mesh_ep_wait(mesh_ep_h ep, mesh_request_h *reqs, int n, mesh_status_t st,
                           const char *fn)
{
    mesh_status_t w = n ? mesh_waitall(n, reqs) : MESH_OK;
    for (int i = 0; i < n; i++)
        mesh_request_free(reqs[i]);
    if (st == MESH_OK)
        st = w;
    return st == MESH_OK ? MESH_OK : mesh_par_fail(ep->comm, st, fn);
}

void *mesh_ep_scratch(mesh_ep_layout_h l, size_t rb, const char *fn)
{
    return mesh_ep_scratch_bytes(l, (l->nsend ? l->nsend : 1) * rb, fn);
}

void *mesh_ep_scratch_bytes(mesh_ep_layout_h l, size_t need, const char *fn)
{
    if (need > l->scratch_size) {
        void *p = realloc(l->scratch, need);
        if (p == NULL) {
            mesh_par_error(MESH_ERR_NO_MEMORY, "%s: out of memory for %zu bytes", fn, need);
            return NULL;
        }
        l->scratch = p;
        l->scratch_size = need;
    }
    return l->scratch;
}
