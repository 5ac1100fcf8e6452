/*
 * One operation of the backend: the c10d::Work that torch hands back, holding the mesh request,
 * the tensors mesh reads and writes until it completes, the copies that bring staged results
 * back into the caller's tensors, and the future DDP's reducer and communication hooks use.
 */
#ifndef MESH_TORCH_WORK_HPP
#define MESH_TORCH_WORK_HPP

#include "compat.hpp"

#include <mesh.h>

#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mesh_torch
{

class Comm;

class WorkMesh : public c10d::Work
{
  public:
    /* outputs: the future's value (the tensors the operation writes, or its inputs). */
    WorkMesh(std::shared_ptr<Comm> comm, c10d::OpType type, const char *name,
             std::vector<at::Tensor> outputs);
    ~WorkMesh() override;

    bool isCompleted() override;
    bool isSuccess() const override;
    std::exception_ptr exception() const override;
    int sourceRank() const override;
    std::vector<at::Tensor> result() override;
    void synchronize() override {}
    bool wait(std::chrono::milliseconds timeout) override;
    void abort() override;
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

    const char *name() const { return name_; }
    Comm &comm() const { return *comm_; }

    /* Set up by the operation before it is posted. */
    std::vector<at::Tensor> keep; /* buffers mesh uses until completion */
    std::function<void()> unpack; /* after success: staged results into the caller's tensors */
    int source_rank = -1;         /* receives: the peer */
    std::chrono::milliseconds timeout{0}; /* the operation's own bound on wait(); 0: none */

  private:
    friend class Comm;
    friend class Engine;
    /* Called once, by the thread that saw the request complete, without the engine's lock:
     * unpacks, releases the buffers, then completes the work and its future. */
    void complete(mesh_status_t status, const std::string &message);

    std::shared_ptr<Comm> comm_;
    const char *name_;
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
    mesh_request_h req_ = nullptr; /* set by the post, then the engine's (under its lock) */
    bool queued_ = false;          /* in flight: some thread still has to see it complete */
};

} // namespace mesh_torch

#endif
