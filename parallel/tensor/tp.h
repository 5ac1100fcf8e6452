/* The tp handle's insides, shared by the files of parallel/tensor. */
#ifndef MESH_PAR_TP_H
#define MESH_PAR_TP_H

#include "mesh/tensor.h"
#include "../common.h"

struct mesh_tp {
    mesh_comm_h comm;
    int size;
    int rank;
    unsigned flags;
    /* grown on demand: slot 0 for the permutations of sequence-split tensors, slot 1 for the
     * vocabulary layers' own tensors, which they hand to the conjugate operators */
    void *scratch[2];
    size_t scratch_bytes[2];
};

/* A tp handle that is not NULL; records the error naming the function otherwise. */
mesh_status_t mesh_tp_check(mesh_tp_h tp, const char *fn);
/* Scratch slot 0 or 1 with room for bytes. */
mesh_status_t mesh_tp_scratch(mesh_tp_h tp, int slot, size_t bytes, void **buf);
/* Element size of a dtype the conjugate operators accept; records the error otherwise. */
mesh_status_t mesh_tp_elem(mesh_dtype_t dtype, const char *fn, size_t *elem);

#endif
