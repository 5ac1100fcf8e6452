/*
 * Call signatures: every message of a collective carries in its tag (comm.h) 24 bits that say
 * which call sent it: the collective (4 bits), the datatype (4), the operation (3) and a 13-bit
 * hash of what must agree between ranks (the count, the counts of a v-collective, the root).
 * A receiver that sees another signature than its own knows the ranks called different
 * operations, and says which.
 */
#ifndef MESH_COLL_SIGNATURE_H
#define MESH_COLL_SIGNATURE_H

#include "collectives/algo.h"
#include <stddef.h>
#include <stdint.h>

/* The operation as the caller named it (MESH_AVG and pre-multiplied sums included). */
enum { MESH_SIG_OP_NONE = 0, MESH_SIG_OP_PREMUL = 7 };

/* The signature of a call: args as the algorithms see them, opcode 1 + the caller's mesh_op_t
 * (MESH_SIG_OP_PREMUL for a pre-multiplied sum, MESH_SIG_OP_NONE for no reduction), and the
 * communicator's size (for the counts of a v-collective). */
uint32_t mesh_coll_sig(const mesh_coll_args_t *args, int opcode, int size);

/* "allreduce(sum, 1024 fp32)" for a call whose count and root are known (count SIZE_MAX, root
 * -1: unknown), else from the signature alone: "broadcast(fp32)". */
void mesh_coll_sig_describe(uint32_t sig, size_t count, int root, char *buf, size_t len);
/* What differs between two signatures, described from the second's point of view:
 * "another collective", "another datatype", "another operation", "another count, counts or
 * root". */
const char *mesh_coll_sig_diff(uint32_t a, uint32_t b);

#endif
