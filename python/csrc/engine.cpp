#include "engine.hpp"
#include "comm.hpp"
#include "work.hpp"

#include <algorithm>

namespace mesh_torch
{
namespace
{

std::mutex engine_mu;
std::weak_ptr<Engine> engine_current;

int64_t now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

} // namespace

std::shared_ptr<Engine> Engine::acquire()
{
    std::lock_guard<std::mutex> lk(engine_mu);
    std::shared_ptr<Engine> e = engine_current.lock();
    if (!e) {
        e = std::shared_ptr<Engine>(new Engine());
        engine_current = e;
    }
    return e;
}

Engine::Engine() : thread_(&Engine::run, this) {}

Engine::~Engine()
{
    {
        std::lock_guard<std::mutex> lk(rest_mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.get_id() == std::this_thread::get_id())
        thread_.detach(); /* the last communicator went in a future's callback */
    else
        thread_.join();
}

void Engine::add(const c10::intrusive_ptr<WorkMesh> &w)
{
    last_post_ns_.store(now_ns());
    int before;
    {
        std::lock_guard<std::mutex> lk(mu_);
        w->queued_ = true;
        inflight_.push_back(w);
        before = ninflight_.fetch_add(1);
    }
    /* the completion thread sees the count before it sleeps, or is seen sleeping here; an
     * operation already in flight that no thread waits on (asynchronous work) ends its nap */
    const Rest rest = rest_.load();
    if (drivers_.load() == 0 && (rest == SLEEPING || (rest == NAPPING && before > 0)))
        wake();
}

void Engine::wake()
{
    /* taking the lock orders the notification after the sleeper's last look */
    {
        std::lock_guard<std::mutex> lk(rest_mu_);
    }
    cv_.notify_all();
}

int Engine::poll_locked(std::vector<Done> &done, bool &moved)
{
    int found = 0;
    while (!inflight_.empty()) {
        reqs_.clear();
        for (auto &w : inflight_)
            reqs_.push_back(w->req_);
        int idx = -1, events = 0;
        /* one round of progress over every communicator, then the first completed request */
        const mesh_status_t st =
            mesh_testany_events((int)reqs_.size(), reqs_.data(), &idx, &events);
        if (events > 0)
            moved = true;
        if (idx < 0)
            break;
        c10::intrusive_ptr<WorkMesh> w = std::move(inflight_[idx]);
        inflight_.erase(inflight_.begin() + idx);
        std::string msg = st != MESH_OK ? mesh_comm_last_error(nullptr) : "";
        mesh_request_free(w->req_);
        w->req_ = nullptr;
        w->queued_ = false;
        ninflight_.fetch_sub(1);
        done.push_back(Done{std::move(w), st, std::move(msg)});
        found++;
    }
    return found;
}

void Engine::complete(std::vector<Done> &done)
{
    for (Done &d : done)
        d.work->complete(d.status, d.message);
    done.clear();
}

void Engine::idle_init(mesh_idle_t &idle, bool waiter)
{
    /* max_sleep 0: mesh's slice; a post, a completion by another thread, or a peer's message
     * ends the sleep sooner */
    mesh_idle_init(&idle, waiter ? -1.0 : completion_spin_s, 0);
}

void Engine::step(std::unique_lock<std::mutex> &lk, std::vector<Done> &done, mesh_idle_t &idle,
                  std::optional<bool> mark)
{
    bool moved = false;
    if (poll_locked(done, moved) > 0) {
        if (mark)
            drivers_finish_.store(*mark, std::memory_order_relaxed);
        lk.unlock();
        complete(done);
        mesh_idle_reset(&idle);
    } else {
        lk.unlock();
        /* a transfer that keeps moving is polled without pause, as mesh_wait polls it */
        if (moved)
            mesh_idle_reset(&idle);
        else
            mesh_idle(&idle);
    }
    lk.lock();
}

template <class More> void Engine::drive(std::optional<bool> mark, More more)
{
    std::vector<Done> done;
    mesh_idle_t idle;
    idle_init(idle, mark.has_value() && *mark);
    drivers_.fetch_add(1); /* before the lock: the completion thread yields it sooner */
    std::unique_lock<std::mutex> lk(mu_);
    while (more(lk))
        step(lk, done, idle, mark);
    /* hand the polling back to the completion thread */
    const bool left = drivers_.fetch_sub(1) == 1 && !inflight_.empty();
    lk.unlock();
    if (left)
        wake();
}

void Engine::wait(WorkMesh *w, std::chrono::milliseconds timeout)
{
    using clock = std::chrono::steady_clock;
    const auto deadline = timeout.count() > 0 ? clock::now() + timeout : clock::time_point::max();
    bool aborted = false;
    drive(true, [&](std::unique_lock<std::mutex> &lk) {
        if (w->queued_ && !aborted && clock::now() >= deadline) {
            aborted = true;
            lk.unlock();
            w->comm().abort(std::string(w->name()) + " timed out after " +
                            std::to_string(timeout.count()) +
                            " ms (Work.wait); the communicator is aborted");
            lk.lock();
        }
        return w->queued_;
    });
}

bool Engine::busy(const Comm *c)
{
    std::lock_guard<std::mutex> lk(mu_);
    return busy_locked(c);
}

bool Engine::busy_locked(const Comm *c) const
{
    for (auto &w : inflight_)
        if (&w->comm() == c)
            return true;
    return false;
}

void Engine::drain(const Comm *c)
{
    drive(std::nullopt, [&](std::unique_lock<std::mutex> &) { return busy_locked(c); });
}

void Engine::drive_orphans()
{
    std::vector<Done> done;
    mesh_idle_t idle;
    idle_init(idle, false);
    std::unique_lock<std::mutex> lk(mu_);
    while (!inflight_.empty() && drivers_.load() == 0)
        step(lk, done, idle, false);
}

void Engine::run()
{
    /* Naps are the longest an asynchronous operation posted after blocking ones waits before
     * this thread drives it (its first moves happen at the post, and the next post or a
     * waiting caller's return wakes this thread at once). They grow from nap_min to nap_max
     * while callers keep finishing their own operations, since every wake-up of this thread
     * costs the caller on its CPU, and stop after a quiet spell. A blocking call waits on its
     * operation within microseconds of posting it: grace keeps this thread out of that window,
     * where it would only contend with the caller. */
    const int64_t nap_min = 500000, nap_max = 16000000, quiet = 100000000, grace = 50000;
    int64_t nap = nap_min;
    std::unique_lock<std::mutex> rl(rest_mu_);
    for (;;) {
        const bool idle = ninflight_.load() == 0 || drivers_.load() > 0;
        if (idle && stop_)
            break;
        const int64_t age = now_ns() - last_post_ns_.load();
        if (!idle && age >= grace) {
            rest_.store(RUNNING);
            rl.unlock();
            drive_orphans();
            rl.lock();
            nap = nap_min;
            continue;
        }
        if (!idle) {
            rest_.store(NAPPING);
            cv_.wait_for(rl, std::chrono::nanoseconds(grace - age));
        } else if (drivers_finish_.load(std::memory_order_relaxed) && age < quiet) {
            rest_.store(NAPPING);
            if (cv_.wait_for(rl, std::chrono::nanoseconds(nap)) == std::cv_status::timeout)
                nap = std::min(2 * nap, nap_max);
            else
                nap = nap_min;
        } else {
            rest_.store(SLEEPING);
            /* a post after this look sees SLEEPING and wakes this thread */
            if (ninflight_.load() == 0 || drivers_.load() > 0)
                cv_.wait(rl);
            nap = nap_min;
        }
        rest_.store(RUNNING);
    }
}

} // namespace mesh_torch
