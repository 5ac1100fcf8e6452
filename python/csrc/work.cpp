#include "work.hpp"
#include "comm.hpp"

#include <ATen/core/grad_mode.h>

#include <stdexcept>

namespace mesh_torch
{
namespace
{

/* The type of every future's value, a list of tensors, made once. */
const c10::TypePtr &tensor_list_type()
{
    static const c10::TypePtr t = c10::ListType::create(c10::TensorType::get());
    return t;
}

} // namespace

WorkMesh::WorkMesh(std::shared_ptr<Comm> comm, c10d::OpType type, const char *name,
                   std::vector<at::Tensor> outputs)
    : c10d::Work(comm->rank(), type, name, outputs), comm_(std::move(comm)), name_(name),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(tensor_list_type()))
{
}

WorkMesh::~WorkMesh() = default;

void WorkMesh::complete(mesh_status_t status, const std::string &message)
{
    std::exception_ptr error;
    if (status != MESH_OK) {
        /* names the operation, the group and, through mesh's message, the rank that failed;
         * an abort repeats why the communicator was aborted */
        std::string why = comm_->annotate(message);
        comm_->note_failure(why.empty() ? mesh_status_string(status) : why);
        if (status == MESH_ERR_ABORTED || why.empty())
            why = comm_->failure();
        error = std::make_exception_ptr(std::runtime_error(
            std::string("mesh: ") + name_ + " failed on " + comm_->where() + ": " + why));
    } else if (unpack) {
        try {
            /* the caller's tensors may require grad; these copies are no part of the graph */
            at::NoGradGuard no_grad;
            unpack();
        } catch (...) {
            error = std::current_exception();
        }
    }
    unpack = nullptr;
    keep.clear();
    /* the future first: whoever returns from wait() may read it at once */
    if (error)
        future_->setError(error);
    else
        future_->markCompleted(c10::IValue(outputs_));
    finish(error);
}

bool WorkMesh::isCompleted()
{
    std::lock_guard<std::mutex> lk(mutex_);
    return completed_;
}

bool WorkMesh::isSuccess() const
{
    std::lock_guard<std::mutex> lk(mutex_);
    return completed_ && !exception_;
}

std::exception_ptr WorkMesh::exception() const
{
    std::lock_guard<std::mutex> lk(mutex_);
    return exception_;
}

int WorkMesh::sourceRank() const
{
    if (source_rank < 0)
        throw std::runtime_error(std::string("mesh: sourceRank() of ") + name_ +
                                 ": only receives have a source rank");
    return source_rank;
}

std::vector<at::Tensor> WorkMesh::result()
{
    return outputs_;
}

bool WorkMesh::wait(std::chrono::milliseconds timeout)
{
    if (!isCompleted())
        comm_->wait(this, timeout.count() > 0 ? timeout : this->timeout);
    std::unique_lock<std::mutex> lk(mutex_);
    /* another thread saw it complete and may still be copying results out */
    cv_.wait(lk, [this] { return completed_; });
    if (exception_)
        std::rethrow_exception(exception_);
    return true;
}

void WorkMesh::abort()
{
    comm_->abort(std::string(name_) + " was aborted through Work.abort()");
}

c10::intrusive_ptr<c10::ivalue::Future> WorkMesh::getFuture()
{
    return future_;
}

} // namespace mesh_torch
