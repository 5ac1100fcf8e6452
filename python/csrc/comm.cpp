#include "comm.hpp"
#include "work.hpp"

#include <sched.h>
#include <time.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace mesh_torch {
namespace {

/*
 * mesh's out-of-band allgather over the group's store: in each round a rank sets its blob under
 * a key of its own and reads the others'. A counter taken first gives every creation over one
 * store a generation of its own, so that a group re-created over the same file:// store never
 * reads keys of the previous one. The store's own timeout bounds each read.
 */
struct StoreOob {
    c10d::Store *store;
    std::string prefix; /* "mesh/<generation>/" */
    int rank, size;
    int rounds = 0;
    std::string error;

    std::string key(int round, int r) const
    {
        return prefix + std::to_string(round) + "/" + std::to_string(r);
    }
};

int store_allgather(const void *in, void *out, size_t len, void *ctx)
{
    auto *o = static_cast<StoreOob *>(ctx);
    try {
        const int round = o->rounds++;
        const auto *src = static_cast<const uint8_t *>(in);
        std::vector<uint8_t> mine(src, src + len);
        o->store->set(o->key(round, o->rank), mine);
        for (int r = 0; r < o->size; r++) {
            std::vector<uint8_t> v = r == o->rank ? mine : o->store->get(o->key(round, r));
            if (v.size() != len) {
                o->error = "rank " + std::to_string(r) + " published " +
                           std::to_string(v.size()) + " bytes in bootstrap round " +
                           std::to_string(round) + ", expected " + std::to_string(len);
                return -1;
            }
            memcpy(static_cast<uint8_t *>(out) + (size_t)r * len, v.data(), len);
        }
        /* every rank has set its key of this round, so every rank is done with the last one */
        if (round > 0) o->store->deleteKey(o->key(round - 1, o->rank));
        return 0;
    } catch (const std::exception &e) {
        o->error = e.what();
        return -1;
    }
}

/* The keys of the last round go once every rank has created its communicator: the rank whose
 * count completes the generation knows that every other rank is done reading. */
void store_cleanup(StoreOob &o) noexcept
{
    try {
        if (o.rounds == 0) return;
        if (o.store->add(o.prefix + "done", 1) < o.size) return;
        for (int r = 0; r < o.size; r++)
            o.store->deleteKey(o.key(o.rounds - 1, r));
        o.store->deleteKey(o.prefix + "done");
    } catch (const std::exception &) {
        /* a store without deleteKey keeps a few hundred bytes per group; nothing else */
    }
}

int cpus_available()
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
    unsigned n = std::thread::hardware_concurrency();
    return n ? (int)n : 1;
}

inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* The communicators of the process, for shutdown_all() at exit. */
std::mutex live_mu;
std::vector<std::weak_ptr<Comm>> live;

} // namespace

Comm::Comm(const CommSpec &s)
    : rank_(s.rank), size_(s.size), timeout_s_(s.timeout_s), group_(s.group),
      global_(s.global_ranks)
{
    if (!s.store) throw std::runtime_error("mesh: process group " + group_ + " has no store");
    const int64_t gen = (s.store->add("mesh/generation", 1) - 1) / size_;
    StoreOob oob{s.store.get(), "mesh/" + std::to_string(gen) + "/", rank_, size_};
    mesh_comm_params_t p = {};
    p.field_mask = MESH_COMM_PARAM_FIELD_RANK | MESH_COMM_PARAM_FIELD_SIZE |
                   MESH_COMM_PARAM_FIELD_OOB | MESH_COMM_PARAM_FIELD_TIMEOUT;
    p.rank = rank_;
    p.size = size_;
    p.oob_allgather = store_allgather;
    p.oob_ctx = &oob;
    p.timeout_s = timeout_s_;
    if (mesh_comm_init(&comm_, &p) != MESH_OK) {
        std::string why = oob.error.empty() ? mesh_comm_last_error(nullptr) : oob.error;
        throw std::runtime_error("mesh: cannot create the communicator of " + where() + ": " +
                                 why);
    }
    store_cleanup(oob);
    /* spin while waiting only when the ranks of this node each have a CPU; else yield soon */
    const int node = mesh_comm_node(comm_, rank_);
    spin_ = mesh_comm_local_size(comm_, node) <= cpus_available() ? 20000 : 200;
    thread_ = std::thread(&Comm::run, this);
}

Comm::~Comm()
{
    shutdown();
}

void Comm::track(const std::shared_ptr<Comm> &comm)
{
    std::lock_guard<std::mutex> lk(live_mu);
    size_t kept = 0;
    for (auto &w : live)
        if (!w.expired()) live[kept++] = std::move(w);
    live.resize(kept);
    live.push_back(comm);
}

void Comm::shutdown_all()
{
    std::vector<std::shared_ptr<Comm>> all;
    {
        std::lock_guard<std::mutex> lk(live_mu);
        for (auto &w : live)
            if (auto c = w.lock()) all.push_back(c);
        live.clear();
    }
    /* what is in flight now would keep the exit waiting for peers: it fails at once; idle
     * communicators are destroyed as usual */
    for (auto &c : all) {
        std::unique_lock<std::mutex> lk(c->mu_);
        const bool busy = !c->inflight_.empty();
        lk.unlock();
        if (busy) c->abort("the process is exiting with the operation in flight");
    }
    for (auto &c : all)
        c->shutdown();
}

int64_t Comm::global_rank(int rank) const
{
    return global_.empty() || rank < 0 || rank >= (int)global_.size() ? rank : global_[rank];
}

std::string Comm::annotate(const std::string &m) const
{
    if (global_.empty()) return m;
    std::string out;
    size_t i = 0;
    while (i < m.size()) {
        size_t at = m.find("rank ", i);
        if (at == std::string::npos || (at > 0 && isalpha((unsigned char)m[at - 1]))) {
            size_t end = at == std::string::npos ? m.size() : at + 5;
            out += m.substr(i, end - i);
            i = end;
            continue;
        }
        size_t d = at + 5, e = d;
        while (e < m.size() && isdigit((unsigned char)m[e]))
            e++;
        out += m.substr(i, e - i);
        if (e > d) {
            int r = atoi(m.substr(d, e - d).c_str());
            if (r >= 0 && r < (int)global_.size() && global_[r] != r)
                out += " (global rank " + std::to_string(global_[r]) + ")";
        }
        i = e;
    }
    return out;
}

std::string Comm::where() const
{
    std::ostringstream s;
    s << "process group " << group_ << " (rank " << rank_ << " of " << size_;
    if (!global_.empty()) {
        s << ", global ranks [";
        for (size_t i = 0; i < global_.size(); i++)
            s << (i ? ", " : "") << global_[i];
        s << "]";
    }
    s << ")";
    return s.str();
}

void Comm::post(const c10::intrusive_ptr<WorkMesh> &w, const PostFn &fn)
{
    std::unique_lock<std::mutex> lk(mu_);
    if (comm_ == nullptr)
        throw std::runtime_error(std::string("mesh: ") + w->name() + " on " + where() +
                                 ": the process group was destroyed");
    if (!failure_.empty())
        throw std::runtime_error(std::string("mesh: ") + w->name() + " on " + where() +
                                 ": the communicator failed earlier: " + failure_);
    mesh_request_h req = nullptr;
    if (fn(comm_, &req) != MESH_OK) {
        std::string why = annotate(mesh_comm_last_error(nullptr));
        throw std::runtime_error(std::string("mesh: ") + w->name() + " on " + where() + ": " +
                                 why);
    }
    w->req_ = req;
    w->queued_ = true;
    inflight_.push_back(w);
    const bool wake = inflight_.size() == 1 && drivers_ == 0;
    lk.unlock();
    if (wake) cv_.notify_one();
}

int Comm::poll_locked(std::vector<Done> &done)
{
    size_t kept = 0;
    const size_t n = inflight_.size();
    for (size_t i = 0; i < n; i++) {
        c10::intrusive_ptr<WorkMesh> &w = inflight_[i];
        int flag = 0;
        mesh_status_t st = mesh_test(w->req_, &flag);
        if (st == MESH_OK && !flag) {
            if (kept != i) inflight_[kept] = std::move(w);
            kept++;
            continue;
        }
        std::string msg;
        if (st != MESH_OK) {
            /* the message of the failure is this thread's: every test happens under the lock,
             * and the one that saw the failure first made it */
            msg = annotate(mesh_comm_last_error(comm_));
            if (failure_.empty()) failure_ = msg.empty() ? mesh_status_string(st) : msg;
            if (msg.empty() || st == MESH_ERR_ABORTED) msg = failure_;
        }
        mesh_request_free(w->req_);
        w->req_ = nullptr;
        w->queued_ = false;
        done.push_back(Done{std::move(w), st, std::move(msg)});
    }
    inflight_.resize(kept);
    return (int)(n - kept);
}

void Comm::complete(std::vector<Done> &done)
{
    for (Done &d : done)
        d.work->complete(d.status, d.message);
    done.clear();
}

void Comm::backoff(unsigned &idle) const
{
    const unsigned n = idle++;
    if (n < spin_) {
        cpu_relax();
        return;
    }
    if (n < spin_ + 16) {
        sched_yield();
        return;
    }
    /* sleeps from 1 us doubling to 100 us: an oversubscribed machine runs the peer meanwhile */
    const unsigned step = (n - spin_ - 16) / 4;
    long ns = step < 7 ? 1000L << step : 100000L;
    if (ns > 100000L) ns = 100000L;
    struct timespec ts = {0, ns};
    nanosleep(&ts, nullptr);
}

void Comm::wait(WorkMesh *w, std::chrono::milliseconds timeout)
{
    using clock = std::chrono::steady_clock;
    const auto deadline = timeout.count() > 0 ? clock::now() + timeout : clock::time_point::max();
    std::vector<Done> done;
    unsigned idle = 0;
    bool aborted = false;
    std::unique_lock<std::mutex> lk(mu_);
    drivers_++;
    for (;;) {
        if (!w->queued_) break;
        if (!aborted && clock::now() >= deadline) {
            if (failure_.empty())
                failure_ = std::string(w->name()) + " timed out after " +
                           std::to_string(timeout.count()) + " ms; the communicator is aborted";
            mesh_comm_abort(comm_);
            aborted = true;
        }
        if (poll_locked(done) > 0) {
            lk.unlock();
            complete(done);
            idle = 0;
            lk.lock();
            continue;
        }
        lk.unlock();
        backoff(idle);
        lk.lock();
    }
    /* hand the polling back to the completion thread */
    const bool wake = --drivers_ == 0 && !inflight_.empty();
    lk.unlock();
    if (wake) cv_.notify_all();
}

void Comm::abort(const std::string &why)
{
    std::lock_guard<std::mutex> lk(mu_);
    if (comm_ == nullptr) return;
    if (failure_.empty()) failure_ = why;
    mesh_comm_abort(comm_);
    cv_.notify_all();
}

void Comm::run()
{
    std::vector<Done> done;
    unsigned idle = 0;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
        if (inflight_.empty() || drivers_ > 0) {
            if (stop_) break;
            cv_.wait(lk);
            idle = 0;
            continue;
        }
        if (poll_locked(done) > 0) {
            lk.unlock();
            complete(done);
            idle = 0;
            lk.lock();
            continue;
        }
        lk.unlock();
        backoff(idle);
        lk.lock();
    }
}

void Comm::shutdown()
{
    std::unique_lock<std::mutex> lk(mu_);
    if (shut_) return;
    shut_ = true;
    /* what is in flight finishes first, like any wait bounded by the communicator's timeout */
    std::vector<Done> done;
    unsigned idle = 0;
    drivers_++;
    while (!inflight_.empty()) {
        if (poll_locked(done) > 0) {
            lk.unlock();
            complete(done);
            idle = 0;
            lk.lock();
            continue;
        }
        lk.unlock();
        backoff(idle);
        lk.lock();
    }
    drivers_--;
    stop_ = true;
    lk.unlock();
    cv_.notify_all();
    if (thread_.joinable()) {
        if (thread_.get_id() == std::this_thread::get_id())
            thread_.detach(); /* the last reference went in a future's callback */
        else
            thread_.join();
    }
    lk.lock();
    mesh_comm_destroy(comm_);
    comm_ = nullptr;
}

std::string Comm::peer_transport(int peer)
{
    std::lock_guard<std::mutex> lk(mu_);
    if (comm_ == nullptr || peer < 0 || peer >= size_) return "";
    const char *t = mesh_comm_peer_transport(comm_, peer);
    return t ? t : "";
}

std::string Comm::last_algorithm()
{
    std::lock_guard<std::mutex> lk(mu_);
    const char *a = comm_ ? mesh_comm_last_algorithm(comm_) : nullptr;
    return a ? a : "";
}

} // namespace mesh_torch
