/*
 * The communicator of one process group. It is formed through the group's c10d store, so every
 * way torch rendezvouses (env://, tcp://, file://, torchrun) works unchanged. Operations are
 * posted on the calling thread, which keeps each rank's issue order; they complete on whichever
 * thread drives the communicator: a thread waiting for one of them, else the communicator's
 * completion thread, which fulfils the futures DDP's reducer and communication hooks wait on.
 * Every mesh call on the communicator is made under one lock, since mesh's communicators are
 * driven by one thread at a time.
 */
#ifndef MESH_TORCH_COMM_HPP
#define MESH_TORCH_COMM_HPP

#include "compat.hpp"

#include <mesh.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mesh_torch {

class WorkMesh;

struct CommSpec {
    c10::intrusive_ptr<c10d::Store> store; /* the group's own (prefixed) store */
    int rank = 0;
    int size = 1;
    double timeout_s = 1800; /* bounds every wait of the communicator */
    std::string group;       /* torch's group name, for messages */
    std::vector<int64_t> global_ranks; /* global rank of each group rank; empty: the same */
};

class Comm {
  public:
    using PostFn = std::function<mesh_status_t(mesh_comm_h, mesh_request_h *)>;

    /* Collective over the group; throws std::runtime_error saying why creation failed. */
    explicit Comm(const CommSpec &spec);
    ~Comm();
    Comm(const Comm &) = delete;
    Comm &operator=(const Comm &) = delete;

    /* Posts an operation and queues its work; throws, naming the operation, when mesh refuses
     * it or the communicator failed before. */
    void post(const c10::intrusive_ptr<WorkMesh> &work, const PostFn &fn);
    /* Drives the communicator on the calling thread until work is complete. A positive timeout
     * that passes first aborts the communicator (a collective cannot be taken back) and fails
     * every operation in flight. */
    void wait(WorkMesh *work, std::chrono::milliseconds timeout);
    /* Fails the communicator and every operation in flight, at once. */
    void abort(const std::string &why);
    /* Lets the operations in flight finish (each is bounded by the communicator's timeout),
     * then stops the completion thread and destroys the communicator. Idempotent. */
    void shutdown();
    /* At interpreter exit: fails what is still in flight on every live communicator of the
     * process (its peers would see this process go anyway), then shuts each one down, so that
     * no completion thread outlives the interpreter and no exit waits for a peer. */
    static void shutdown_all();
    /* Records a communicator for shutdown_all(). */
    static void track(const std::shared_ptr<Comm> &comm);

    int rank() const { return rank_; }
    int size() const { return size_; }
    double timeout_s() const { return timeout_s_; }
    /* Global rank of a group rank. */
    int64_t global_rank(int rank) const;
    /* "process group 2 (rank 1 of 3, global ranks [0, 2, 5])": where an error happened. */
    std::string where() const;
    /* mesh's message with each "rank N" of a subgroup followed by "(global rank G)". */
    std::string annotate(const std::string &message) const;
    /* Name of the transport to a peer, or of the last algorithm of an operation. */
    std::string peer_transport(int peer);
    std::string last_algorithm();

  private:
    struct Done {
        c10::intrusive_ptr<WorkMesh> work;
        mesh_status_t status;
        std::string message;
    };

    /* Tests every operation in flight once; moves the completed ones to done. Lock held. */
    int poll_locked(std::vector<Done> &done);
    /* Runs the completion of each done operation; lock not held (futures run callbacks). */
    static void complete(std::vector<Done> &done);
    void run();
    void backoff(unsigned &idle) const;

    const int rank_, size_;
    const double timeout_s_;
    const std::string group_;
    const std::vector<int64_t> global_;
    mesh_comm_h comm_ = nullptr;
    unsigned spin_ = 200; /* idle polls before a waiting thread yields its core */

    std::mutex mu_; /* guards comm_ and everything below */
    std::condition_variable cv_;
    std::vector<c10::intrusive_ptr<WorkMesh>> inflight_; /* in posting order */
    int drivers_ = 0;   /* threads in wait(): the completion thread leaves the polling to them */
    bool stop_ = false;
    bool shut_ = false;
    std::string failure_; /* the first failure, repeated to later callers */
    std::thread thread_;
};

} // namespace mesh_torch

#endif
