/*
 * Tensors as mesh sees them: element types and reduction operators mapped to mesh's, checks that
 * refuse what the backend cannot do with a message saying what, and the staging of tensors that
 * are not one contiguous block (non-contiguous tensors, lists of tensors).
 */
#ifndef MESH_TORCH_TENSORS_HPP
#define MESH_TORCH_TENSORS_HPP

#include "compat.hpp"

#include <mesh.h>

#include <string>
#include <vector>

namespace mesh_torch
{

class WorkMesh;

/* Throws c10::Error, a RuntimeError in Python: "mesh: <what>". */
[[noreturn]] void refuse(const std::string &what);

/* A host tensor with strides (not sparse, not on a device); op names the operation. */
void check_tensor(const at::Tensor &t, const char *op);
/* The one tensor of a per-process list (lists of several are for several devices per process). */
at::Tensor &single(std::vector<at::Tensor> &tensors, const char *op, const char *what);
/* Every tensor of list has ref's element type. */
void check_dtypes(const std::vector<at::Tensor> &list, const at::Tensor &ref, const char *op);

/* How mesh reduces a tensor: mesh element type, operator, and elements per tensor element
 * (2 for complex numbers, reduced as pairs of reals). */
struct Reduction {
    mesh_dtype_t dtype;
    mesh_op_t op;
    size_t factor;
};
Reduction reduction(at::ScalarType type, const c10d::ReduceOp &op, const char *opname);

inline size_t nbytes(const at::Tensor &t)
{
    return (size_t)t.numel() * t.element_size();
}

/* t itself when it is contiguous, else a contiguous copy. */
at::Tensor dense(const at::Tensor &t);

/* Where a list of contiguous tensors of one element type lies back to back in memory (the
 * chunks of one tensor): the first one's data; else nullptr. */
void *back_to_back(const std::vector<at::Tensor> &list);

/* A list of tensors packed into one byte buffer, each at an offset aligned to align bytes. */
struct Packing {
    std::vector<size_t> offset, bytes;
    size_t total = 0;
};
Packing packing(const std::vector<at::Tensor> &list, size_t align);
/* A new byte buffer holding list's contents as laid out by p. */
at::Tensor pack(const std::vector<at::Tensor> &list, const Packing &p);
/* list's tensors take their contents from base + p's offsets. */
void unpack_into(const uint8_t *base, const Packing &p, std::vector<at::Tensor> &list);

/* Where a list of received blocks lands, back to back: the list's own memory when it lies so,
 * else a byte buffer that w keeps and unpacks into the list on completion. */
uint8_t *landing(WorkMesh &w, const std::vector<at::Tensor> &list);
/* The blocks of a list to send, back to back: the list's own memory, or a copy that w keeps. */
const uint8_t *source(WorkMesh &w, const std::vector<at::Tensor> &list);

} // namespace mesh_torch

#endif
