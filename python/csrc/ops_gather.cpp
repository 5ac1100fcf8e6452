/*
 * The operations that move blocks without reducing them: broadcast, all_gather (list, tensor,
 * coalesced lists and, on torch 2.x, coalesced tensors), gather, scatter. They move bytes, so every
 * element type is served.
 */
#include "backend.hpp"
#include "tensors.hpp"

namespace mesh_torch
{
namespace
{

void check_list(const std::vector<at::Tensor> &list, const at::Tensor &ref, int size,
                const char *op, const char *what)
{
    if ((int)list.size() != size)
        refuse(std::string(op) + ": the " + what + " list holds " + std::to_string(list.size()) +
               " tensors for a group of " + std::to_string(size));
    check_dtypes(list, ref, op);
}

} // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupMesh::broadcast(std::vector<at::Tensor> &tensors,
                                                           const c10d::BroadcastOptions &opts)
{
    static const char op[] = "broadcast";
    at::Tensor &t = single(tensors, op, "");
    check_root(opts.rootRank, op);
    if (opts.rootTensor != 0)
        refuse(std::string(op) + ": root tensor must be 0");
    const int root = (int)opts.rootRank;
    at::Tensor buf = dense(t);
    auto w = work(c10d::OpType::BROADCAST, op, tensors);
    w->keep = {buf};
    if (!buf.is_same(t) && root != getRank())
        w->unpack = [t, buf]() mutable { t.copy_(buf); };
    void *p = buf.data_ptr();
    const size_t n = nbytes(buf);
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_broadcast(c, p, p, n, MESH_UINT8, root, nullptr, q);
        },
        opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMesh::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                            std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts)
{
    static const char op[] = "all_gather";
    at::Tensor &in = single(inputs, op, "input");
    if (outputs.size() != 1)
        refuse(std::string(op) + " takes one output list per process, got " +
               std::to_string(outputs.size()));
    std::vector<at::Tensor> &out = outputs[0];
    check_list(out, in, getSize(), op, "output");
    if (out[getRank()].numel() != in.numel())
        refuse(std::string(op) + ": this rank's output holds " +
               std::to_string(out[getRank()].numel()) + " elements, its input " +
               std::to_string(in.numel()));
    auto w = work(c10d::OpType::ALLGATHER, op, out);
    std::vector<size_t> counts;
    bool uniform = true;
    for (const at::Tensor &t : out) {
        counts.push_back(nbytes(t));
        uniform = uniform && counts.back() == counts[0];
    }
    at::Tensor sbuf = dense(in);
    w->keep.push_back(sbuf);
    const void *s = sbuf.data_ptr();
    uint8_t *d = landing(*w, out);
    if (uniform) {
        const size_t n = counts[0];
        return launch(
            w,
            [=](mesh_comm_h c, mesh_request_h *q) {
                return mesh_allgather(c, s, d, n, MESH_UINT8, nullptr, q);
            },
            opts.timeout);
    }
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_allgatherv(c, s, d, counts.data(), nullptr, MESH_UINT8, nullptr, q);
        },
        opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMesh::_allgather_base(at::Tensor &output,
                                                                 at::Tensor &input,
                                                                 const c10d::AllgatherOptions &opts)
{
    static const char op[] = "all_gather_into_tensor";
    check_tensor(output, op);
    check_dtypes({input}, output, op);
    if (output.numel() != input.numel() * getSize())
        refuse(std::string(op) + ": the output holds " + std::to_string(output.numel()) +
               " elements, not the group size " + std::to_string(getSize()) +
               " times the input's " + std::to_string(input.numel()));
    at::Tensor sbuf = dense(input), rbuf = dense(output);
    auto w = work(c10d::OpType::_ALLGATHER_BASE, op, {output});
    w->keep = {sbuf, rbuf};
    if (!rbuf.is_same(output))
        w->unpack = [output, rbuf]() mutable { output.copy_(rbuf); };
    const void *s = sbuf.data_ptr();
    void *d = rbuf.data_ptr();
    const size_t n = nbytes(sbuf);
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_allgather(c, s, d, n, MESH_UINT8, nullptr, q);
        },
        opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMesh::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                      std::vector<at::Tensor> &inputs,
                                      const c10d::AllgatherOptions &opts)
{
    static const char op[] = "all_gather_coalesced";
    for (const at::Tensor &t : inputs)
        check_tensor(t, op);
    if ((int)outputs.size() != getSize())
        refuse(std::string(op) + ": " + std::to_string(outputs.size()) +
               " output lists for a group of " + std::to_string(getSize()));
    /* each rank's tensors travel as one block, packed the same way on every rank */
    const Packing mine = packing(inputs, 16);
    for (size_t r = 0; r < outputs.size(); r++) {
        if (outputs[r].size() != inputs.size())
            refuse(std::string(op) + ": output list " + std::to_string(r) + " holds " +
                   std::to_string(outputs[r].size()) + " tensors, the input list " +
                   std::to_string(inputs.size()));
        for (size_t i = 0; i < inputs.size(); i++) {
            check_tensor(outputs[r][i], op);
            if (outputs[r][i].scalar_type() != inputs[i].scalar_type() ||
                outputs[r][i].numel() != inputs[i].numel())
                refuse(std::string(op) + ": output " + std::to_string(r) + "/" + std::to_string(i) +
                       " differs from input " + std::to_string(i) + " in element type or count");
        }
    }
    std::vector<at::Tensor> all;
    for (auto &list : outputs)
        all.insert(all.end(), list.begin(), list.end());
    auto w = work(c10d::OpType::ALLGATHER_COALESCED, op, all);
    at::Tensor sbuf = pack(inputs, mine);
    at::Tensor rbuf =
        at::empty({(int64_t)(mine.total * getSize())}, at::TensorOptions().dtype(at::kByte));
    w->keep = {sbuf, rbuf};
    const size_t block = mine.total;
    w->unpack = [outputs, mine, rbuf, block]() mutable {
        const auto *base = static_cast<const uint8_t *>(rbuf.data_ptr());
        for (size_t r = 0; r < outputs.size(); r++)
            unpack_into(base + r * block, mine, outputs[r]);
    };
    const void *s = sbuf.data_ptr();
    void *d = rbuf.data_ptr();
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_allgather(c, s, d, block, MESH_UINT8, nullptr, q);
        },
        opts.timeout);
}

#if MESH_TORCH_BACKEND_BASE
c10::intrusive_ptr<c10d::Work>
ProcessGroupMesh::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                  std::vector<at::Tensor> &inputs,
                                                  const c10d::AllgatherOptions &opts)
{
    static const char op[] = "all_gather_into_tensor_coalesced";
    if (outputs.size() != inputs.size())
        refuse(std::string(op) + ": " + std::to_string(outputs.size()) + " outputs for " +
               std::to_string(inputs.size()) + " inputs");
    std::vector<int64_t> counts;
    for (size_t i = 0; i < inputs.size(); i++) {
        check_tensor(inputs[i], op);
        check_tensor(outputs[i], op);
        check_dtypes({inputs[i]}, outputs[i], op);
        if (outputs[i].numel() != inputs[i].numel() * getSize())
            refuse(std::string(op) + ": output " + std::to_string(i) + " holds " +
                   std::to_string(outputs[i].numel()) + " elements, not the group size " +
                   std::to_string(getSize()) + " times its input's " +
                   std::to_string(inputs[i].numel()));
        counts.push_back(inputs[i].numel());
    }
    /* each rank's inputs travel as one block; output i takes tensor i of every block */
    const Packing mine = packing(inputs, 16);
    auto w = work(c10d::OpType::ALLGATHER_COALESCED, op, outputs);
    at::Tensor sbuf = pack(inputs, mine);
    at::Tensor rbuf =
        at::empty({(int64_t)(mine.total * getSize())}, at::TensorOptions().dtype(at::kByte));
    w->keep = {sbuf, rbuf};
    const size_t block = mine.total;
    const int size = getSize();
    w->unpack = [outputs, counts, mine, rbuf, block, size]() mutable {
        const auto *base = static_cast<uint8_t *>(rbuf.data_ptr());
        for (size_t i = 0; i < outputs.size(); i++) {
            if (counts[i] == 0)
                continue;
            at::Tensor dst = dense(outputs[i]), flat = dst.view({-1});
            for (int r = 0; r < size; r++)
                flat.narrow(0, r * counts[i], counts[i])
                    .copy_(at::from_blob(const_cast<uint8_t *>(base) + r * block + mine.offset[i],
                                         {counts[i]}, dst.options()));
            if (!dst.is_same(outputs[i]))
                outputs[i].copy_(dst);
        }
    };
    const void *s = sbuf.data_ptr();
    void *d = rbuf.data_ptr();
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_allgather(c, s, d, block, MESH_UINT8, nullptr, q);
        },
        opts.timeout);
}
#endif

c10::intrusive_ptr<c10d::Work>
ProcessGroupMesh::gather(std::vector<std::vector<at::Tensor>> &outputs,
                         std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts)
{
    static const char op[] = "gather";
    at::Tensor &in = single(inputs, op, "input");
    check_root(opts.rootRank, op);
    const int root = (int)opts.rootRank;
    const size_t n = nbytes(in);
    std::vector<at::Tensor> out;
    if (getRank() == root) {
        if (outputs.size() != 1)
            refuse(std::string(op) + ": the root takes one output list, got " +
                   std::to_string(outputs.size()));
        out = outputs[0];
        check_list(out, in, getSize(), op, "output");
        for (const at::Tensor &t : out)
            if (nbytes(t) != n)
                refuse(std::string(op) + ": output tensors must match the input's " +
                       std::to_string(in.numel()) + " elements");
    } else if (!outputs.empty() && !(outputs.size() == 1 && outputs[0].empty())) {
        refuse(std::string(op) + ": only the root takes an output list");
    }
    auto w = work(c10d::OpType::GATHER, op, out);
    at::Tensor sbuf = dense(in);
    w->keep.push_back(sbuf);
    const void *s = sbuf.data_ptr();
    uint8_t *d = getRank() == root ? landing(*w, out) : nullptr;
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_gather(c, s, d, n, MESH_UINT8, root, nullptr, q);
        },
        opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMesh::scatter(std::vector<at::Tensor> &outputs,
                          std::vector<std::vector<at::Tensor>> &inputs,
                          const c10d::ScatterOptions &opts)
{
    static const char op[] = "scatter";
    at::Tensor &out = single(outputs, op, "output");
    check_root(opts.rootRank, op);
    const int root = (int)opts.rootRank;
    const size_t n = nbytes(out);
    auto w = work(c10d::OpType::SCATTER, op, outputs);
    const void *s = nullptr;
    if (getRank() == root) {
        if (inputs.size() != 1)
            refuse(std::string(op) + ": the root takes one input list, got " +
                   std::to_string(inputs.size()));
        check_list(inputs[0], out, getSize(), op, "input");
        for (const at::Tensor &t : inputs[0])
            if (nbytes(t) != n)
                refuse(std::string(op) + ": input tensors must match the output's " +
                       std::to_string(out.numel()) + " elements");
        s = source(*w, inputs[0]);
    } else if (!inputs.empty() && !(inputs.size() == 1 && inputs[0].empty())) {
        refuse(std::string(op) + ": only the root takes an input list");
    }
    at::Tensor rbuf = dense(out);
    w->keep.push_back(rbuf);
    if (!rbuf.is_same(out))
        w->unpack = [out, rbuf]() mutable { out.copy_(rbuf); };
    void *d = rbuf.data_ptr();
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_scatter(c, s, d, n, MESH_UINT8, root, nullptr, q);
        },
        opts.timeout);
}

} // namespace mesh_torch
