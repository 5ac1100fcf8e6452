/* Memory: mapped buffers whose pages are given back when a stage no longer needs them, and the
 * per-category report. */
#define _DEFAULT_SOURCE
#include "zero_impl.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

void *mesh_zero__map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void mesh_zero__unmap(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes);
}

void mesh_zero__drop(void *p, size_t bytes)
{
    size_t ps = page_size();
    uintptr_t a = (uintptr_t)p, e = a + bytes;
    uintptr_t pa = (a + ps - 1) / ps * ps, pe = e / ps * ps;
    if (pa >= pe) {
        memset(p, 0, bytes);
        return;
    }
    /* the edges share pages with neighbouring buckets that may be in use: zero only ours */
    memset(p, 0, pa - a);
    memset((void *)pe, 0, e - pe);
    /* a private anonymous page given back reads as zero when touched again */
    if (madvise((void *)pa, pe - pa, MADV_DONTNEED) != 0)
        memset((void *)pa, 0, pe - pa);
}

size_t mesh_zero__resident(const void *p, size_t bytes)
{
    if (p == NULL || bytes == 0)
        return 0;
    size_t ps = page_size();
    uintptr_t a = (uintptr_t)p / ps * ps;
    size_t len = (uintptr_t)p + bytes - a, pages = (len + ps - 1) / ps;
    unsigned char *vec = malloc(pages);
    if (vec == NULL)
        return 0;
    size_t n = 0;
    if (mincore((void *)a, len, vec) == 0)
        for (size_t i = 0; i < pages; i++)
            n += vec[i] & 1;
    free(vec);
    return n * ps;
}

mesh_status_t mesh_zero_memory(mesh_zero_h z, mesh_zero_memory_t *r)
{
    static const char fn[] = "mesh_zero_memory";
    if (z == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: z is NULL", fn);
    if (r == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: report is NULL", fn);
    if (!z->finalized)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: call mesh_zero_finalize first", fn);
    mesh_zero_memory_t m = {0};
    size_t full = z->N * z->esize, shard = z->S * z->esize;
    m.params = z->stage == 3 ? shard : full;
    m.grads = z->stage >= 2 ? shard : full;
    m.master = z->master ? z->L * sizeof(float) : 0;
    m.optimizer = (size_t)z->nstate * z->L * sizeof(float);
    /* staging: stage 3's gathered parameters and the gradient buffer of stages 2-3 */
    if (z->stage == 3)
        m.buffers += mesh_zero__resident(z->param, full);
    if (z->stage >= 2)
        m.buffers += mesh_zero__resident(z->grad, full);
    m.buffers += sizeof(*z) + (size_t)z->nt * sizeof(zero_tensor_t) +
                 (size_t)z->nb * sizeof(zero_bucket_t) + (size_t)z->ng * sizeof(zero_group_t) +
                 (size_t)z->nseg * sizeof(zero_seg_t) + z->hcap * sizeof(int) +
                 (size_t)z->nt * sizeof(int);
    m.numel = z->numel;
    m.padded_numel = z->N;
    m.shard_numel = z->S;
    m.master_is_params = z->master == NULL;
    *r = m;
    return MESH_OK;
}
