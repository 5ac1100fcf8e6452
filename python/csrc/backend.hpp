/*
 * The `mesh` backend of torch.distributed: one per process group, each with a communicator of
 * its own. Every operation checks its tensors, stages what is not one contiguous block, posts
 * the mesh call and returns a WorkMesh; unsupported combinations raise a RuntimeError saying
 * what is not supported.
 */
#ifndef MESH_TORCH_BACKEND_HPP
#define MESH_TORCH_BACKEND_HPP

#include "comm.hpp"
#include "compat.hpp"
#include "work.hpp"

#include <atomic>
#include <memory>

namespace mesh_torch
{

class ProcessGroupMesh : public BackendBase
{
  public:
    /* Collective over the group (creates its communicator through spec.store). */
    explicit ProcessGroupMesh(const CommSpec &spec);
    ~ProcessGroupMesh() override;

    const std::string getBackendName() const override { return "mesh"; }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &tensors,
                        const c10d::AllreduceCoalescedOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                        std::vector<at::Tensor> &inputs,
                        const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::GatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                           std::vector<std::vector<at::Tensor>> &inputs,
                                           const c10d::ScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                  std::vector<std::vector<at::Tensor>> &inputs,
                                                  const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                         const c10d::ReduceScatterOptions &opts) override;
#if MESH_TORCH_BACKEND_BASE
    /* torch 2.x: several all_gather_into_tensor (reduce_scatter_tensor) as one operation, as
     * DTensor and FSDP2 issue them */
    c10::intrusive_ptr<c10d::Work>
    allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                    std::vector<at::Tensor> &inputs,
                                    const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                    std::vector<at::Tensor> &inputs,
                                    const c10d::ReduceScatterOptions &opts) override;
#endif
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &output_splits,
                                                 std::vector<int64_t> &input_splits,
                                                 const c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                                 int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;

    /* Every rank counts the collectives it issues on the group, so the numbers agree. */
    void setSequenceNumberForGroup() override {}
    uint64_t getSequenceNumberForGroup() override
    {
        return seq_.load();
    }

    /* Fails the communicator and every operation in flight (after a timeout elsewhere). */
    void abort(const std::string &why)
    {
        comm_->abort(why);
    }
    /* Finishes what is in flight and releases the communicator (destruction does too). */
    void shutdown()
    {
        comm_->shutdown();
    }
    std::string peer_transport(int peer)
    {
        return comm_->peer_transport(peer);
    }
    std::string last_algorithm()
    {
        return comm_->last_algorithm();
    }
    double timeout_s() const
    {
        return comm_->timeout_s();
    }

  private:
    c10::intrusive_ptr<WorkMesh> work(c10d::OpType type, const char *name,
                                      std::vector<at::Tensor> outputs);
    /* Posts fn for work; an operation's own timeout, when it sets one, bounds its wait. */
    c10::intrusive_ptr<c10d::Work> launch(const c10::intrusive_ptr<WorkMesh> &work,
                                          const Comm::PostFn &fn,
                                          std::chrono::milliseconds timeout = c10d::kUnsetTimeout);
    /* send (or recv) of tensors' one tensor to (from) peer. */
    c10::intrusive_ptr<c10d::Work> point_to_point(std::vector<at::Tensor> &tensors, int peer,
                                                  int tag, bool send);
    void check_root(int64_t root, const char *op) const;
    void check_peer(int peer, const char *op) const;

    std::shared_ptr<Comm> comm_;
    std::atomic<uint64_t> seq_{0};
};

} // namespace mesh_torch

#endif
