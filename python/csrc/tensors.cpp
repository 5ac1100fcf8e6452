#include "tensors.hpp"
#include "work.hpp"

#include <c10/util/Exception.h>

namespace mesh_torch
{
namespace
{

const char *op_name(c10d::ReduceOp::RedOpType op)
{
    switch (op) {
    case c10d::ReduceOp::SUM:
        return "SUM";
    case c10d::ReduceOp::AVG:
        return "AVG";
    case c10d::ReduceOp::PRODUCT:
        return "PRODUCT";
    case c10d::ReduceOp::MIN:
        return "MIN";
    case c10d::ReduceOp::MAX:
        return "MAX";
    case c10d::ReduceOp::BAND:
        return "BAND";
    case c10d::ReduceOp::BOR:
        return "BOR";
    case c10d::ReduceOp::BXOR:
        return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
        return "PREMUL_SUM";
    default:
        return "an unknown operator";
    }
}

std::string type_name(at::ScalarType t)
{
    return c10::toString(t);
}

} // namespace

void refuse(const std::string &what)
{
    TORCH_CHECK(false, "mesh: ", what);
}

void check_tensor(const at::Tensor &t, const char *op)
{
    if (!t.defined())
        refuse(std::string(op) + ": a tensor is undefined");
    if (t.layout() != at::kStrided)
        refuse(std::string(op) + " does not support " + (t.is_sparse() ? "sparse" : "non-strided") +
               " tensors");
    if (!t.device().is_cpu())
        refuse(std::string(op) + " does not support " + t.device().str() +
               " tensors in this build (host memory only)");
}

at::Tensor &single(std::vector<at::Tensor> &tensors, const char *op, const char *what)
{
    if (tensors.size() != 1)
        refuse(std::string(op) + " takes one " + what + " tensor per process, got " +
               std::to_string(tensors.size()));
    check_tensor(tensors[0], op);
    return tensors[0];
}

void check_dtypes(const std::vector<at::Tensor> &list, const at::Tensor &ref, const char *op)
{
    for (const at::Tensor &t : list) {
        check_tensor(t, op);
        if (t.scalar_type() != ref.scalar_type())
            refuse(std::string(op) + ": tensors of types " + type_name(t.scalar_type()) + " and " +
                   type_name(ref.scalar_type()) + " in one call");
    }
}

Reduction reduction(at::ScalarType type, const c10d::ReduceOp &rop, const char *opname)
{
    using R = c10d::ReduceOp;
    const R::RedOpType op = rop.op_;
    /* the message is built only for a refusal: this runs on every call */
    auto what = [&]() {
        return std::string(opname) + " with ReduceOp." + op_name(op) + " on " + type_name(type) +
               " tensors";
    };
    if (op == R::PREMUL_SUM)
        refuse(what() + " is not supported (NCCL's pre-multiplied sum)");
    if (type == at::kBool) {
        /* as torch's other backends: a sum or maximum of truths is "any", a product or
         * minimum "all", computed on bytes that hold 0 or 1 */
        switch (op) {
        case R::SUM:
        case R::MAX:
        case R::BOR:
            return {MESH_UINT8, MESH_MAX, 1};
        case R::PRODUCT:
        case R::MIN:
        case R::BAND:
            return {MESH_UINT8, MESH_MIN, 1};
        default:
            refuse(what() + " is not supported");
        }
    }
    if (op == R::BAND || op == R::BOR || op == R::BXOR)
        refuse(what() + " is not supported (bitwise operators work on bool tensors only)");
    mesh_op_t mop = MESH_SUM;
    switch (op) {
    case R::SUM:
        mop = MESH_SUM;
        break;
    case R::AVG:
        mop = MESH_AVG;
        break;
    case R::PRODUCT:
        mop = MESH_PROD;
        break;
    case R::MIN:
        mop = MESH_MIN;
        break;
    case R::MAX:
        mop = MESH_MAX;
        break;
    default:
        refuse(what() + " is not supported");
    }
    if (mop == MESH_AVG && !at::isFloatingType(type) && !at::isComplexType(type))
        refuse(what() + " is not supported (averages need floating-point or complex tensors)");
    switch (type) {
    case at::kByte:
        return {MESH_UINT8, mop, 1};
    case at::kChar:
        return {MESH_INT8, mop, 1};
    case at::kInt:
        return {MESH_INT32, mop, 1};
    case at::kLong:
        return {MESH_INT64, mop, 1};
    case at::kHalf:
        return {MESH_FP16, mop, 1};
    case at::kBFloat16:
        return {MESH_BF16, mop, 1};
    case at::kFloat:
        return {MESH_FP32, mop, 1};
    case at::kDouble:
        return {MESH_FP64, mop, 1};
    case at::kComplexFloat:
    case at::kComplexDouble:
        /* sums and averages of complex numbers are those of their parts */
        if (mop != MESH_SUM && mop != MESH_AVG)
            refuse(what() + " is not supported (complex numbers reduce by SUM or AVG only)");
        return {type == at::kComplexFloat ? MESH_FP32 : MESH_FP64, mop, 2};
    default:
        break;
    }
    refuse(what() + " is not supported (reductions take uint8, int8, int32, int64, bool, "
                    "float16, bfloat16, float32, float64, complex64 and complex128)");
}

at::Tensor dense(const at::Tensor &t)
{
    return t.is_contiguous() ? t : t.contiguous();
}

void *back_to_back(const std::vector<at::Tensor> &list)
{
    if (list.empty())
        return nullptr;
    auto *next = static_cast<uint8_t *>(list[0].data_ptr());
    if (next == nullptr)
        return nullptr;
    for (const at::Tensor &t : list) {
        if (!t.is_contiguous() || t.scalar_type() != list[0].scalar_type() ||
            static_cast<uint8_t *>(t.data_ptr()) != next)
            return nullptr;
        next += nbytes(t);
    }
    return list[0].data_ptr();
}

Packing packing(const std::vector<at::Tensor> &list, size_t align)
{
    Packing p;
    for (const at::Tensor &t : list) {
        p.offset.push_back(p.total);
        p.bytes.push_back(nbytes(t));
        p.total += (nbytes(t) + align - 1) / align * align;
    }
    return p;
}

at::Tensor pack(const std::vector<at::Tensor> &list, const Packing &p)
{
    at::Tensor buf = at::empty({(int64_t)p.total}, at::TensorOptions().dtype(at::kByte));
    auto *base = static_cast<uint8_t *>(buf.data_ptr());
    for (size_t i = 0; i < list.size(); i++) {
        if (p.bytes[i] == 0)
            continue;
        at::from_blob(base + p.offset[i], list[i].sizes(), list[i].options()).copy_(list[i]);
    }
    return buf;
}

void unpack_into(const uint8_t *base, const Packing &p, std::vector<at::Tensor> &list)
{
    for (size_t i = 0; i < list.size(); i++) {
        if (p.bytes[i] == 0)
            continue;
        list[i].copy_(at::from_blob(const_cast<uint8_t *>(base) + p.offset[i], list[i].sizes(),
                                    list[i].options()));
    }
}

uint8_t *landing(WorkMesh &w, const std::vector<at::Tensor> &list)
{
    if (void *p = back_to_back(list))
        return static_cast<uint8_t *>(p);
    const Packing pk = packing(list, 1);
    at::Tensor buf = at::empty({(int64_t)pk.total}, at::TensorOptions().dtype(at::kByte));
    w.keep.push_back(buf);
    auto *base = static_cast<uint8_t *>(buf.data_ptr());
    w.unpack = [base, pk, dst = list]() mutable { unpack_into(base, pk, dst); };
    return base;
}

const uint8_t *source(WorkMesh &w, const std::vector<at::Tensor> &list)
{
    if (void *p = back_to_back(list))
        return static_cast<const uint8_t *>(p);
    at::Tensor buf = pack(list, packing(list, 1));
    w.keep.push_back(buf);
    return static_cast<const uint8_t *>(buf.data_ptr());
}

} // namespace mesh_torch
