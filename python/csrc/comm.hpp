/*
 * The communicator of one process group. It is formed through the group's c10d store, so every
 * way torch rendezvouses (env://, tcp://, file://, torchrun) works unchanged. Operations are
 * posted on the calling thread, which keeps each rank's issue order (mesh orders the calls
 * made on a communicator); the engine (engine.hpp) completes them.
 */
#ifndef MESH_TORCH_COMM_HPP
#define MESH_TORCH_COMM_HPP

#include "compat.hpp"

#include <mesh.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mesh_torch
{

class Engine;
class WorkMesh;

struct CommSpec {
    c10::intrusive_ptr<c10d::Store> store; /* the group's own (prefixed) store */
    int rank = 0;
    int size = 1;
    double timeout_s = 1800;           /* bounds every wait of the communicator */
    std::string group;                 /* torch's group name, for messages */
    std::vector<int64_t> global_ranks; /* global rank of each group rank; empty: the same */
};

class Comm
{
  public:
    using PostFn = std::function<mesh_status_t(mesh_comm_h, mesh_request_h *)>;

    /* Collective over the group; throws std::runtime_error saying why creation failed. */
    explicit Comm(const CommSpec &spec);
    ~Comm();
    Comm(const Comm &) = delete;
    Comm &operator=(const Comm &) = delete;

    /* Posts an operation on the calling thread and hands its work to the engine; throws,
     * naming the operation, when mesh refuses it or the communicator failed before. */
    void post(const c10::intrusive_ptr<WorkMesh> &work, const PostFn &fn);
    /* Drives mesh until work completes (see Engine::wait). */
    void wait(WorkMesh *work, std::chrono::milliseconds timeout);
    /* Fails the communicator and every operation in flight, at once. */
    void abort(const std::string &why);
    /* Lets the operations in flight finish (each is bounded by the communicator's timeout),
     * then destroys the communicator. Idempotent. */
    void shutdown();
    /* Records the first failure of an operation, which later posts repeat. */
    void note_failure(const std::string &message);
    /* The first failure recorded, or "". */
    std::string failure();
    /* At interpreter exit: fails what is still in flight on every communicator of the
     * process (its peers would see this process go anyway), then shuts each one down, so that
     * no completion thread outlives the interpreter and no exit waits for a peer. */
    static void shutdown_all();
    /* Records a communicator for shutdown_all(). */
    static void track(const std::shared_ptr<Comm> &comm);

    int rank() const { return rank_; }
    int size() const { return size_; }
    double timeout_s() const { return timeout_s_; }
    /* "process group 2 (rank 1 of 3, global ranks [0, 2, 5])": where an error happened. */
    std::string where() const;
    /* mesh's message followed, in a subgroup, by the rank the error names (mesh_comm_error_info)
     * and its global rank: "... [rank 1 (global rank 2)]". */
    std::string annotate(const std::string &message) const;
    /* Name of the transport to a peer, or of the last algorithm of an operation. */
    std::string peer_transport(int peer);
    std::string last_algorithm();

  private:
    const int rank_, size_;
    const double timeout_s_;
    const std::string group_;
    const std::vector<int64_t> global_;
    std::shared_ptr<Engine> engine_;

    std::mutex mu_; /* guards the handle's life (posts against shutdown) and failure_ */
    mesh_comm_h comm_ = nullptr;
    bool shut_ = false;
    std::string failure_;
};

} // namespace mesh_torch

#endif
