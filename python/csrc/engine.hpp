/*
 * Completion of the backend's operations, for every process group of the process. A thread
 * waiting for an operation drives mesh itself (no hand-off on the path of a blocking call);
 * otherwise the engine's one completion thread does, and finishes the operations nobody waits
 * for: it copies staged results out and fulfils the futures that DDP's reducer and
 * communication hooks wait on. One thread serves every group, since a test on any request moves
 * every communicator of the process. Operations are posted by their callers, not here.
 */
#ifndef MESH_TORCH_ENGINE_HPP
#define MESH_TORCH_ENGINE_HPP

#include "compat.hpp"

#include <mesh.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace mesh_torch
{

class Comm;
class WorkMesh;

class Engine
{
  public:
    /* The process's engine, started with the first communicator and stopped when the last
     * one holding it goes. */
    static std::shared_ptr<Engine> acquire();
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    /* Takes a posted operation into the engine's care. */
    void add(const c10::intrusive_ptr<WorkMesh> &work);
    /* Drives mesh on the calling thread until work is complete. A positive timeout that
     * passes first aborts the work's communicator, which fails what it has in flight. */
    void wait(WorkMesh *work, std::chrono::milliseconds timeout);
    /* Drives mesh until no operation of comm is in flight (each is bounded by its
     * communicator's timeout). */
    void drain(const Comm *comm);
    /* Whether comm has operations in flight. */
    bool busy(const Comm *comm);

  private:
    Engine();

    struct Done {
        c10::intrusive_ptr<WorkMesh> work;
        mesh_status_t status;
        std::string message;
    };

    /* Collects the completed operations into done; the lock is held. moved becomes true when
     * mesh saw events (data moved) on the way. */
    int poll_locked(std::vector<Done> &done, bool &moved);
    /* Completes them (copies, futures, callbacks); the lock is not held. */
    static void complete(std::vector<Done> &done);
    void run();
    /* The wait policy of a driving thread (mesh_idle: spins, then sleeps until mesh has
     * something to do): a thread in wait() spins as mesh_wait does (MESH_PROGRESS_SPIN); the
     * completion thread and a drain drive operations while their caller computes (DDP's
     * backward), so they spin completion_spin_s at most: where CPUs are few, their spinning
     * would take them from that computation. */
    static void idle_init(mesh_idle_t &idle, bool waiter);
    static constexpr double completion_spin_s = 20e-6;
    /* One round of driving, the lock held (and released meanwhile): completes what mesh
     * finished, else backs off unless data moved. Where something completed, drivers_finish_
     * becomes mark (is left as it is without one). */
    void step(std::unique_lock<std::mutex> &lk, std::vector<Done> &done, mesh_idle_t &idle,
              std::optional<bool> mark);
    /* Drives mesh on the calling thread while more(lock) says there is something to wait for;
     * more runs with the lock held and may release it meanwhile. */
    template <class More> void drive(std::optional<bool> mark, More more);
    bool busy_locked(const Comm *comm) const;
    /* The completion thread drives while operations are in flight that no thread waits on. */
    void drive_orphans();

    std::mutex mu_; /* guards inflight_ and reqs_; mesh is called with it held only to test */
    std::vector<c10::intrusive_ptr<WorkMesh>> inflight_;
    std::vector<mesh_request_h> reqs_; /* scratch of poll_locked */
    /* Read by the completion thread without mu_, so that its naps never contend with a
     * driving caller (which holds mu_ nearly all the time): operations in flight, threads in
     * wait() or drain() (the completion thread leaves the driving to them), when the last
     * operation was posted (steady clock, ns), and whether the last operation to complete
     * was finished by a thread waiting on it. */
    std::atomic<int> ninflight_{0};
    std::atomic<int> drivers_{0};
    std::atomic<int64_t> last_post_ns_{0};
    std::atomic<bool> drivers_finish_{false};
    /* How the completion thread rests, guarded by rest_mu_. While callers wait for their own
     * operations (blocking calls), it naps, longer and longer up to a bound, and looks again,
     * so that posting costs no wake-up;
     * after a while without posts, or once it finished operations itself (asynchronous work),
     * it sleeps until a post wakes it. Either way it leaves an operation younger than grace to
     * the caller that posted it, which waits on it at once if the call is blocking. */
    enum Rest { RUNNING, NAPPING, SLEEPING };
    std::mutex rest_mu_;
    std::condition_variable cv_;
    std::atomic<Rest> rest_{RUNNING};
    bool stop_ = false; /* guarded by rest_mu_ */
    /* wakes the completion thread if it sleeps */
    void wake();
    std::thread thread_;
};

} // namespace mesh_torch

#endif
