/* Call signatures carried by every message of a collective. */
#include "collectives/signature.h"
#include "libmesh/dtype.h"
#include <stdio.h>

#define SIG_TYPE(s)  (((s) >> 20) & 0xfu)
#define SIG_DTYPE(s) (((s) >> 16) & 0xfu)
#define SIG_OP(s)    (((s) >> 13) & 0x7u)
#define SIG_HASH(s)  ((s)&0x1fffu)

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

uint32_t mesh_coll_sig(const mesh_coll_args_t *a, int opcode, int size)
{
    uint64_t h = 0x84222325cbf29ce4ull;
    switch (a->type) {
    case MESH_COLL_ALLGATHER:
    case MESH_COLL_REDUCE_SCATTER:
        /* every rank passes the same counts (the uniform forms fill them) */
        for (int i = 0; i < size; i++)
            h = mix(h, a->counts[i]);
        break;
    case MESH_COLL_ALLTOALL:
    case MESH_COLL_BARRIER:
        /* the counts of all-to-all-v differ by rank; each message's length is checked */
        break;
    case MESH_COLL_REDUCE:
    case MESH_COLL_BROADCAST:
    case MESH_COLL_GATHER:
    case MESH_COLL_SCATTER:
        h = mix(h, (uint64_t)(uint32_t)a->root);
        /* fall through */
    default:
        h = mix(h, a->count);
        break;
    }
    h ^= h >> 29;
    return ((uint32_t)a->type & 0xfu) << 20 | ((uint32_t)a->dtype & 0xfu) << 16 |
           ((uint32_t)opcode & 0x7u) << 13 | (uint32_t)(h & 0x1fffu);
}

static const char *op_name(unsigned op)
{
    static const char *const names[8] = {"", "sum", "prod", "min", "max", "avg", "", "premul_sum"};
    return names[op & 7];
}

void mesh_coll_sig_describe(uint32_t sig, size_t count, int root, char *buf, size_t len)
{
    const char *coll = mesh_coll_type_name((mesh_coll_type_t)SIG_TYPE(sig));
    const char *dt = mesh_dtype_name((mesh_dtype_t)SIG_DTYPE(sig));
    const char *op = op_name(SIG_OP(sig));
    char what[64];
    if (count != SIZE_MAX)
        snprintf(what, sizeof(what), "%zu %s", count, dt);
    else
        snprintf(what, sizeof(what), "%s", dt);
    if (SIG_TYPE(sig) == MESH_COLL_BARRIER) {
        snprintf(buf, len, "%s", coll);
        return;
    }
    char rootbuf[24] = "";
    if (root >= 0)
        snprintf(rootbuf, sizeof(rootbuf), "root %d, ", root);
    snprintf(buf, len, "%s(%s%s%s%s)", coll, rootbuf, op, *op ? ", " : "", what);
}

const char *mesh_coll_sig_diff(uint32_t a, uint32_t b)
{
    if (SIG_TYPE(a) != SIG_TYPE(b))
        return "another collective";
    if (SIG_OP(a) != SIG_OP(b))
        return "another operation";
    if (SIG_DTYPE(a) != SIG_DTYPE(b))
        return "another datatype";
    return "another count, counts or root";
}
