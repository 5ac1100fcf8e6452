/* Exchanges: all_to_all (tensor with equal or uneven splits, and lists), send and recv. */
#include "backend.hpp"
#include "tensors.hpp"

namespace mesh_torch
{
namespace
{

/* Bytes of one row (the slice along dimension 0) of t; a 0-d tensor is one row. */
size_t row_bytes(const at::Tensor &t)
{
    size_t n = t.element_size();
    for (int64_t d = 1; d < t.dim(); d++)
        n *= (size_t)t.size(d);
    return n;
}

/* Byte counts and displacements of a tensor split along dimension 0 into splits rows each (an
 * empty list: equal parts). */
void split_bytes(const at::Tensor &t, const std::vector<int64_t> &splits, int size, const char *op,
                 const char *what, std::vector<size_t> &counts, std::vector<size_t> &displs)
{
    const int64_t rows = t.dim() > 0 ? t.size(0) : 1;
    std::vector<int64_t> s = splits;
    if (s.empty()) {
        if (rows % size != 0)
            refuse(std::string(op) + ": the " + what + "'s " + std::to_string(rows) +
                   " rows do not split evenly among " + std::to_string(size) + " ranks");
        s.assign(size, rows / size);
    }
    if ((int)s.size() != size)
        refuse(std::string(op) + ": " + std::to_string(s.size()) + " " + what +
               " splits for a group of " + std::to_string(size));
    int64_t sum = 0;
    for (int64_t v : s) {
        if (v < 0)
            refuse(std::string(op) + ": a negative " + what + " split");
        sum += v;
    }
    if (sum != rows)
        refuse(std::string(op) + ": the " + what + " splits add up to " + std::to_string(sum) +
               " rows, the tensor has " + std::to_string(rows));
    const size_t row = row_bytes(t);
    size_t at = 0;
    for (int64_t v : s) {
        counts.push_back((size_t)v * row);
        displs.push_back(at);
        at += (size_t)v * row;
    }
}

} // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupMesh::alltoall_base(at::Tensor &output,
                                                               at::Tensor &input,
                                                               std::vector<int64_t> &output_splits,
                                                               std::vector<int64_t> &input_splits,
                                                               const c10d::AllToAllOptions &opts)
{
    static const char op[] = "all_to_all_single";
    check_tensor(output, op);
    check_dtypes({input}, output, op);
    std::vector<size_t> sc, sd, rc, rd;
    split_bytes(input, input_splits, getSize(), op, "input", sc, sd);
    split_bytes(output, output_splits, getSize(), op, "output", rc, rd);
    at::Tensor sbuf = dense(input), rbuf = dense(output);
    auto w = work(c10d::OpType::ALLTOALL_BASE, op, {output});
    w->keep = {sbuf, rbuf};
    if (!rbuf.is_same(output))
        w->unpack = [output, rbuf]() mutable { output.copy_(rbuf); };
    const void *s = sbuf.data_ptr();
    void *d = rbuf.data_ptr();
    bool uniform = true;
    for (int i = 0; i < getSize(); i++)
        uniform = uniform && sc[i] == sc[0] && rc[i] == sc[0];
    if (uniform) {
        const size_t n = sc[0];
        return launch(
            w,
            [=](mesh_comm_h c, mesh_request_h *q) {
                return mesh_alltoall(c, s, d, n, MESH_UINT8, nullptr, q);
            },
            opts.timeout);
    }
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_alltoallv(c, s, sc.data(), sd.data(), d, rc.data(), rd.data(), MESH_UINT8,
                                  nullptr, q);
        },
        opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMesh::alltoall(std::vector<at::Tensor> &outputs,
                                                          std::vector<at::Tensor> &inputs,
                                                          const c10d::AllToAllOptions &opts)
{
    static const char op[] = "all_to_all";
    if ((int)outputs.size() != getSize() || (int)inputs.size() != getSize())
        refuse(std::string(op) + ": " + std::to_string(inputs.size()) + " inputs and " +
               std::to_string(outputs.size()) + " outputs for a group of " +
               std::to_string(getSize()));
    for (size_t i = 0; i < inputs.size(); i++) {
        check_tensor(inputs[i], op);
        check_tensor(outputs[i], op);
        if (outputs[i].scalar_type() != inputs[i].scalar_type())
            refuse(std::string(op) + ": tensors of types " +
                   c10::toString(inputs[i].scalar_type()) + " and " +
                   c10::toString(outputs[i].scalar_type()) + " in one call");
    }
    auto w = work(c10d::OpType::ALLTOALL, op, outputs);
    const Packing sp = packing(inputs, 1), rp = packing(outputs, 1);
    const void *s = source(*w, inputs);
    void *d = landing(*w, outputs);
    return launch(
        w,
        [=](mesh_comm_h c, mesh_request_h *q) {
            return mesh_alltoallv(c, s, sp.bytes.data(), sp.offset.data(), d, rp.bytes.data(),
                                  rp.offset.data(), MESH_UINT8, nullptr, q);
        },
        opts.timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMesh::send(std::vector<at::Tensor> &tensors, int dst,
                                                      int tag)
{
    return point_to_point(tensors, dst, tag, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMesh::recv(std::vector<at::Tensor> &tensors, int src,
                                                      int tag)
{
    return point_to_point(tensors, src, tag, false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMesh::point_to_point(std::vector<at::Tensor> &tensors,
                                                                int peer, int tag, bool send)
{
    const char *op = send ? "send" : "recv";
    at::Tensor &t = single(tensors, op, "");
    check_peer(peer, op);
    at::Tensor buf = dense(t);
    auto w = work(send ? c10d::OpType::SEND : c10d::OpType::RECV, op, tensors);
    w->keep = {buf};
    if (!send) {
        w->source_rank = peer;
        if (!buf.is_same(t))
            w->unpack = [t, buf]() mutable { t.copy_(buf); };
    }
    void *p = buf.data_ptr();
    const size_t n = nbytes(buf);
#ifdef MESH_TAG_MAX
    if (tag < 0 || tag > MESH_TAG_MAX)
        refuse(std::string(op) + ": tag " + std::to_string(tag) + " is outside 0.." +
               std::to_string(MESH_TAG_MAX));
    return launch(w, [=](mesh_comm_h c, mesh_request_h *q) {
        return send ? mesh_send_tagged(c, p, n, MESH_UINT8, peer, tag, nullptr, q)
                    : mesh_recv_tagged(c, p, n, MESH_UINT8, peer, tag, nullptr, q);
    });
#else
    /* without tags, messages between two ranks match in the order they were posted */
    (void)tag;
    return launch(w, [=](mesh_comm_h c, mesh_request_h *q) {
        return send ? mesh_send(c, p, n, MESH_UINT8, peer, nullptr, q)
                    : mesh_recv(c, p, n, MESH_UINT8, peer, nullptr, q);
    });
#endif
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMesh::recvAnysource(std::vector<at::Tensor> &tensors,
                                                               int tag)
{
    (void)tensors;
    (void)tag;
    refuse("recv from any source is not supported: name the source rank (src=...)");
}

} // namespace mesh_torch
