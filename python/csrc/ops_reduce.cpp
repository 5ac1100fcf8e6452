/* The reductions: all_reduce (also coalesced), reduce, reduce_scatter (list, tensor and, on
 * torch 2.x, coalesced tensors). */
#include "backend.hpp"
#include "tensors.hpp"

namespace mesh_torch
{

c10::intrusive_ptr<c10d::Work> ProcessGroupMesh::allreduce(std::vector<at::Tensor> &tensors,
                                                           const c10d::AllreduceOptions &opts)
{
    static const char op[] = "all_reduce";
    at::Tensor &t = single(tensors, op, "");
    const Reduction r = reduction(t.scalar_type(), opts.reduceOp, op);
    at::Tensor buf = dense(t);
    auto w = work(c10d::OpType::ALLREDUCE, op, tensors);
    w->keep = {buf};
    if (!buf.is_same(t))
        w->unpack = [t, buf]() mutable { t.copy_(buf); };
    void *p = buf.data_ptr();
    const size_t n = (size_t)buf.numel() * r.factor;
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_allreduce(c, p, p, n, r.dtype, r.op, nullptr, q);
        },
        opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMesh::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                      const c10d::AllreduceCoalescedOptions &opts)
{
    static const char op[] = "all_reduce_coalesced";
    if (tensors.empty())
        refuse(std::string(op) + ": no tensors");
    check_dtypes(tensors, tensors[0], op);
    const Reduction r = reduction(tensors[0].scalar_type(), opts.reduceOp, op);
    auto w = work(c10d::OpType::ALLREDUCE_COALESCED, op, tensors);
    void *p = back_to_back(tensors);
    size_t n = 0;
    for (const at::Tensor &t : tensors)
        n += (size_t)t.numel();
    if (p == nullptr) {
        /* one reduction over the tensors side by side, then each takes its part back */
        std::vector<at::Tensor> flat;
        for (const at::Tensor &t : tensors)
            flat.push_back(t.reshape({-1}));
        at::Tensor buf = at::cat(flat);
        w->keep = {buf};
        w->unpack = [tensors, buf]() mutable {
            int64_t at = 0;
            for (at::Tensor &t : tensors) {
                t.copy_(buf.narrow(0, at, t.numel()).view(t.sizes()));
                at += t.numel();
            }
        };
        p = buf.data_ptr();
    }
    n *= r.factor;
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_allreduce(c, p, p, n, r.dtype, r.op, nullptr, q);
        },
        opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMesh::reduce(std::vector<at::Tensor> &tensors,
                                                        const c10d::ReduceOptions &opts)
{
    static const char op[] = "reduce";
    at::Tensor &t = single(tensors, op, "");
    check_root(opts.rootRank, op);
    const Reduction r = reduction(t.scalar_type(), opts.reduceOp, op);
    const int root = (int)opts.rootRank;
    at::Tensor buf = dense(t);
    auto w = work(c10d::OpType::REDUCE, op, tensors);
    w->keep = {buf};
    if (!buf.is_same(t) && root == getRank())
        w->unpack = [t, buf]() mutable { t.copy_(buf); };
    void *p = buf.data_ptr();
    const size_t n = (size_t)buf.numel() * r.factor;
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_reduce(c, p, p, n, r.dtype, r.op, root, nullptr, q);
        },
        opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMesh::reduce_scatter(std::vector<at::Tensor> &outputs,
                                 std::vector<std::vector<at::Tensor>> &inputs,
                                 const c10d::ReduceScatterOptions &opts)
{
    static const char op[] = "reduce_scatter";
    at::Tensor &out = single(outputs, op, "output");
    if (inputs.size() != 1)
        refuse(std::string(op) + " takes one input list per process, got " +
               std::to_string(inputs.size()));
    std::vector<at::Tensor> &in = inputs[0];
    if ((int)in.size() != getSize())
        refuse(std::string(op) + ": the input list holds " + std::to_string(in.size()) +
               " tensors for a group of " + std::to_string(getSize()));
    check_dtypes(in, out, op);
    if (in[getRank()].numel() != out.numel())
        refuse(std::string(op) + ": the output holds " + std::to_string(out.numel()) +
               " elements, this rank's input " + std::to_string(in[getRank()].numel()));
    const Reduction r = reduction(out.scalar_type(), opts.reduceOp, op);
    auto w = work(c10d::OpType::REDUCE_SCATTER, op, outputs);
    std::vector<size_t> counts;
    bool uniform = true;
    for (const at::Tensor &t : in) {
        counts.push_back((size_t)t.numel() * r.factor);
        uniform = uniform && counts.back() == counts[0];
    }
    const void *s = back_to_back(in);
    if (s == nullptr) {
        std::vector<at::Tensor> flat;
        for (const at::Tensor &t : in)
            flat.push_back(t.reshape({-1}));
        at::Tensor buf = at::cat(flat);
        w->keep.push_back(buf);
        s = buf.data_ptr();
    }
    at::Tensor rbuf = dense(out);
    w->keep.push_back(rbuf);
    if (!rbuf.is_same(out))
        w->unpack = [out, rbuf]() mutable { out.copy_(rbuf); };
    void *d = rbuf.data_ptr();
    if (uniform) {
        const size_t n = counts[0];
        return launch(
            w,
            [=](mesh_comm_h c, mesh_request_h *q) {
                return mesh_reduce_scatter(c, s, d, n, r.dtype, r.op, nullptr, q);
            },
            opts.timeout);
    }
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_reduce_scatterv(c, s, d, counts.data(), r.dtype, r.op, nullptr, q);
        },
        opts.timeout);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMesh::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                       const c10d::ReduceScatterOptions &opts)
{
    static const char op[] = "reduce_scatter_tensor";
    check_tensor(output, op);
    check_dtypes({input}, output, op);
    if (input.numel() != output.numel() * getSize())
        refuse(std::string(op) + ": the input holds " + std::to_string(input.numel()) +
               " elements, not the group size " + std::to_string(getSize()) +
               " times the output's " + std::to_string(output.numel()));
    const Reduction r = reduction(output.scalar_type(), opts.reduceOp, op);
    at::Tensor sbuf = dense(input), rbuf = dense(output);
    auto w = work(c10d::OpType::_REDUCE_SCATTER_BASE, op, {output});
    w->keep = {sbuf, rbuf};
    if (!rbuf.is_same(output))
        w->unpack = [output, rbuf]() mutable { output.copy_(rbuf); };
    const void *s = sbuf.data_ptr();
    void *d = rbuf.data_ptr();
    const size_t n = (size_t)output.numel() * r.factor;
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_reduce_scatter(c, s, d, n, r.dtype, r.op, nullptr, q);
        },
        opts.timeout);
}

#if MESH_TORCH_BACKEND_BASE
c10::intrusive_ptr<c10d::Work>
ProcessGroupMesh::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                  std::vector<at::Tensor> &inputs,
                                                  const c10d::ReduceScatterOptions &opts)
{
    static const char op[] = "reduce_scatter_tensor_coalesced";
    if (outputs.size() != inputs.size())
        refuse(std::string(op) + ": " + std::to_string(outputs.size()) + " outputs for " +
               std::to_string(inputs.size()) + " inputs");
    if (outputs.empty())
        refuse(std::string(op) + ": no tensors");
    /* one reduction over one element type: rank r's block holds chunk r of every input */
    std::vector<int64_t> counts, offsets;
    int64_t total = 0;
    for (size_t i = 0; i < inputs.size(); i++) {
        check_tensor(inputs[i], op);
        check_tensor(outputs[i], op);
        check_dtypes({inputs[i], outputs[i]}, outputs[0], op);
        if (inputs[i].numel() != outputs[i].numel() * getSize())
            refuse(std::string(op) + ": input " + std::to_string(i) + " holds " +
                   std::to_string(inputs[i].numel()) + " elements, not the group size " +
                   std::to_string(getSize()) + " times its output's " +
                   std::to_string(outputs[i].numel()));
        counts.push_back(outputs[i].numel());
        offsets.push_back(total);
        total += counts.back();
    }
    const Reduction r = reduction(outputs[0].scalar_type(), opts.reduceOp, op);
    const auto options = at::TensorOptions().dtype(outputs[0].scalar_type());
    at::Tensor sbuf = at::empty({total * getSize()}, options);
    at::Tensor rbuf = at::empty({total}, options);
    for (size_t i = 0; i < inputs.size(); i++) {
        if (counts[i] == 0)
            continue;
        at::Tensor in = dense(inputs[i]).view({-1});
        for (int k = 0; k < getSize(); k++)
            sbuf.narrow(0, k * total + offsets[i], counts[i])
                .copy_(in.narrow(0, k * counts[i], counts[i]));
    }
    auto w = work(c10d::OpType::COALESCED, op, outputs);
    w->keep = {sbuf, rbuf};
    w->unpack = [outputs, counts, offsets, rbuf]() mutable {
        for (size_t i = 0; i < outputs.size(); i++)
            if (counts[i] != 0)
                outputs[i].copy_(rbuf.narrow(0, offsets[i], counts[i]).view(outputs[i].sizes()));
    };
    const void *s = sbuf.data_ptr();
    void *d = rbuf.data_ptr();
    const size_t n = (size_t)total * r.factor;
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_reduce_scatter(c, s, d, n, r.dtype, r.op, nullptr, q);
        },
        opts.timeout);
}
#endif

} // namespace mesh_torch
