#include "backend.hpp"
#include "tensors.hpp"

namespace mesh_torch
{

ProcessGroupMesh::ProcessGroupMesh(const CommSpec &spec)
    : BackendBase(spec.rank, spec.size), comm_(std::make_shared<Comm>(spec))
{
    Comm::track(comm_);
    init();
}

ProcessGroupMesh::~ProcessGroupMesh()
{
    comm_->shutdown();
}

c10::intrusive_ptr<WorkMesh> ProcessGroupMesh::work(c10d::OpType type, const char *name,
                                                    std::vector<at::Tensor> outputs)
{
    return c10::make_intrusive<WorkMesh>(comm_, type, name, std::move(outputs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMesh::launch(const c10::intrusive_ptr<WorkMesh> &w,
                                                        const Comm::PostFn &fn,
                                                        std::chrono::milliseconds timeout)
{
    if (timeout.count() > 0)
        w->timeout = timeout;
    comm_->post(w, fn);
    seq_++;
    return w;
}

void ProcessGroupMesh::check_root(int64_t root, const char *op) const
{
    if (root < 0 || root >= getSize())
        refuse(std::string(op) + ": root " + std::to_string(root) + " is outside 0.." +
               std::to_string(getSize() - 1));
}

void ProcessGroupMesh::check_peer(int peer, const char *op) const
{
    if (peer < 0 || peer >= getSize())
        refuse(std::string(op) + ": peer " + std::to_string(peer) + " is outside 0.." +
               std::to_string(getSize() - 1));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMesh::barrier(const c10d::BarrierOptions &opts)
{
    auto w = work(c10d::OpType::BARRIER, "barrier", {});
    return launch(
        w, [](mesh_comm_h c, mesh_request_h *r) { return mesh_barrier(c, r); }, opts.timeout);
}

} // namespace mesh_torch
