#include "comm.hpp"
#include "engine.hpp"
#include "work.hpp"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace mesh_torch
{
namespace
{

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
                o->error = "rank " + std::to_string(r) + " published " + std::to_string(v.size()) +
                           " bytes in bootstrap round " + std::to_string(round) + ", expected " +
                           std::to_string(len);
                return -1;
            }
            memcpy(static_cast<uint8_t *>(out) + (size_t)r * len, v.data(), len);
        }
        /* every rank has set its key of this round, so every rank is done with the last one */
        if (round > 0)
            o->store->deleteKey(o->key(round - 1, o->rank));
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
        if (o.rounds == 0)
            return;
        if (o.store->add(o.prefix + "done", 1) < o.size)
            return;
        for (int r = 0; r < o.size; r++)
            o.store->deleteKey(o.key(o.rounds - 1, r));
        o.store->deleteKey(o.prefix + "done");
    } catch (const std::exception &) {
        /* a store without deleteKey keeps a few hundred bytes per group; nothing else */
    }
}

/* The communicators of the process, for shutdown_all() at exit. */
std::mutex live_mu;
std::vector<std::weak_ptr<Comm>> live;

} // namespace

Comm::Comm(const CommSpec &s)
    : rank_(s.rank), size_(s.size), timeout_s_(s.timeout_s), group_(s.group),
      global_(s.global_ranks)
{
    if (!s.store)
        throw std::runtime_error("mesh: process group " + group_ + " has no store");
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
        throw std::runtime_error("mesh: cannot create the communicator of " + where() + ": " + why);
    }
    store_cleanup(oob);
    engine_ = Engine::acquire();
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
        if (!w.expired())
            live[kept++] = std::move(w);
    live.resize(kept);
    live.push_back(comm);
}

void Comm::shutdown_all()
{
    std::vector<std::shared_ptr<Comm>> all;
    {
        std::lock_guard<std::mutex> lk(live_mu);
        for (auto &w : live)
            if (auto c = w.lock())
                all.push_back(c);
        live.clear();
    }
    /* what is in flight now would keep the exit waiting for peers: it fails at once; idle
     * communicators are destroyed as usual */
    for (auto &c : all) {
        std::unique_lock<std::mutex> lk(c->mu_);
        std::shared_ptr<Engine> e = c->engine_;
        lk.unlock();
        if (e && e->busy(c.get()))
            c->abort("the process is exiting with the operation in flight");
    }
    for (auto &c : all)
        c->shutdown();
}

std::string Comm::annotate(const std::string &m) const
{
    /* the rank mesh names for the error (its structured form), with its global rank */
    mesh_error_info_t info;
    if (global_.empty() || comm_ == nullptr || mesh_comm_error_info(comm_, &info) != MESH_OK ||
        info.rank < 0 || info.rank >= (int)global_.size() || global_[info.rank] == info.rank)
        return m;
    return m + " [rank " + std::to_string(info.rank) + " (global rank " +
           std::to_string(global_[info.rank]) + ")]";
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
    /* held until the engine has the work, so that a shutdown drains it */
    std::lock_guard<std::mutex> lk(mu_);
    if (comm_ == nullptr || shut_)
        throw std::runtime_error(std::string("mesh: ") + w->name() + " on " + where() +
                                 ": the process group was destroyed");
    if (!failure_.empty())
        throw std::runtime_error(std::string("mesh: ") + w->name() + " on " + where() +
                                 ": the communicator failed earlier: " + failure_);
    mesh_request_h req = nullptr;
    if (fn(comm_, &req) != MESH_OK) {
        std::string why = annotate(mesh_comm_last_error(nullptr));
        throw std::runtime_error(std::string("mesh: ") + w->name() + " on " + where() + ": " + why);
    }
    w->req_ = req;
    engine_->add(w);
}

void Comm::wait(WorkMesh *w, std::chrono::milliseconds timeout)
{
    std::unique_lock<std::mutex> lk(mu_);
    std::shared_ptr<Engine> e = engine_;
    lk.unlock();
    if (e)
        e->wait(w, timeout);
}

void Comm::note_failure(const std::string &message)
{
    std::lock_guard<std::mutex> lk(mu_);
    if (failure_.empty())
        failure_ = message;
}

std::string Comm::failure()
{
    std::lock_guard<std::mutex> lk(mu_);
    return failure_;
}

void Comm::abort(const std::string &why)
{
    std::lock_guard<std::mutex> lk(mu_);
    if (comm_ == nullptr)
        return;
    if (failure_.empty())
        failure_ = why;
    /* never blocks; the operations in flight complete with MESH_ERR_ABORTED */
    mesh_comm_abort(comm_);
}

void Comm::shutdown()
{
    std::unique_lock<std::mutex> lk(mu_);
    if (shut_)
        return;
    shut_ = true;
    std::shared_ptr<Engine> e = engine_;
    lk.unlock();
    /* what is in flight finishes first, like any wait bounded by the communicator's timeout;
     * no post can add to it any more */
    if (e)
        e->drain(this);
    lk.lock();
    mesh_comm_destroy(comm_);
    comm_ = nullptr;
    engine_.reset();
}

std::string Comm::peer_transport(int peer)
{
    std::lock_guard<std::mutex> lk(mu_);
    if (comm_ == nullptr || peer < 0 || peer >= size_)
        return "";
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
