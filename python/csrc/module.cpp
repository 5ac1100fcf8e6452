/* The Python module mesh_torch._C: the backend class and its creator, which the package hands to
 * torch.distributed.Backend.register_backend. */
#include "backend.hpp"
#include "group.hpp"
#include "tensors.hpp"

#include <torch/python.h>

namespace py = pybind11;

namespace mesh_torch
{

/*
 * The holder of the Python objects: dropping the last reference releases the GIL first, since
 * destruction finishes the operations in flight, and the futures they complete may run Python
 * callbacks on the completion thread. Laid out as c10::intrusive_ptr, as torch's casters of
 * the base class expect.
 */
template <typename T> class GilFreePtr
{
  public:
    GilFreePtr() = default;
    GilFreePtr(const GilFreePtr &) = default;
    GilFreePtr(GilFreePtr &&) noexcept = default;
    GilFreePtr &operator=(const GilFreePtr &) = default;
    GilFreePtr &operator=(GilFreePtr &&) noexcept = default;
    explicit GilFreePtr(c10::intrusive_ptr<T> p) : p_(std::move(p)) {}
    explicit GilFreePtr(T *p) : p_(c10::intrusive_ptr<T>::unsafe_reclaim_from_nonowning(p)) {}
    ~GilFreePtr()
    {
        if (p_ && Py_IsInitialized() && PyGILState_Check()) {
            py::gil_scoped_release no_gil;
            p_.reset();
        }
    }
    T *get() const noexcept { return p_.get(); }
    T &operator*() const noexcept { return *p_; }
    T *operator->() const noexcept { return p_.get(); }

  private:
    c10::intrusive_ptr<T> p_;
};

} // namespace mesh_torch

PYBIND11_DECLARE_HOLDER_TYPE(T, mesh_torch::GilFreePtr<T>, true);

namespace mesh_torch
{
namespace
{

GilFreePtr<ProcessGroupMesh> create(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                    int size, double timeout_s, const std::string &group,
                                    const std::vector<int64_t> &global_ranks)
{
    if (size < 1 || rank < 0 || rank >= size)
        refuse("rank " + std::to_string(rank) + " of a group of " + std::to_string(size));
    if (!global_ranks.empty() && (int)global_ranks.size() != size)
        refuse(std::to_string(global_ranks.size()) + " global ranks for a group of " +
               std::to_string(size));
    CommSpec spec;
    spec.store = store;
    spec.rank = rank;
    spec.size = size;
    spec.timeout_s = timeout_s > 0 ? timeout_s : 1800;
    spec.group = group;
    spec.global_ranks = global_ranks;
    return GilFreePtr<ProcessGroupMesh>(c10::make_intrusive<ProcessGroupMesh>(spec));
}

#if MESH_TORCH_BACKEND_BASE
/* torch 2.x: the ProcessGroup of a group, over the backend _create made (or the wrapper torch's
 * debug mode puts around it). */
GilFreePtr<MeshGroup> group(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                            c10d::Backend *backend, const std::vector<std::string> &devices)
{
    return GilFreePtr<MeshGroup>(c10::make_intrusive<MeshGroup>(
        store, rank, size,
        c10::intrusive_ptr<c10d::Backend>::unsafe_reclaim_from_nonowning(backend), devices));
}
#endif

} // namespace
} // namespace mesh_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    using mesh_torch::ProcessGroupMesh;
    m.doc() = "The mesh backend of torch.distributed (import mesh_torch to register it).";
    /* the base class is torch's: its Python type must exist before ours derives from it */
    py::module::import("torch.distributed");

    py::class_<ProcessGroupMesh, mesh_torch::BackendBase, mesh_torch::GilFreePtr<ProcessGroupMesh>>(
        m, "ProcessGroupMesh",
        "A process group (torch 2.x: a backend) whose collectives run on mesh.")
        .def("_peer_transport", &ProcessGroupMesh::peer_transport, py::arg("peer"),
             "Transport carrying traffic to a peer of the group (shm, tcp, ...).")
        .def("_last_algorithm", &ProcessGroupMesh::last_algorithm,
             "Algorithm the group's last collective ran.")
        .def(
            "_abort", [](ProcessGroupMesh &pg, const std::string &why) { pg.abort(why); },
            py::arg("why") = "aborted from Python", py::call_guard<py::gil_scoped_release>(),
            "Fails the group's communicator and every operation in flight, at once.")
        .def("_shutdown", &ProcessGroupMesh::shutdown, py::call_guard<py::gil_scoped_release>(),
             "Finishes the operations in flight and releases the communicator.")
        .def_property_readonly("_timeout_s", &ProcessGroupMesh::timeout_s);

    m.def("_create", &mesh_torch::create, py::arg("store"), py::arg("rank"), py::arg("size"),
          py::arg("timeout_s"), py::arg("group_name"), py::arg("global_ranks"),
          py::call_guard<py::gil_scoped_release>(),
          "Creates the backend of one process group (collective over the group).");
#if MESH_TORCH_BACKEND_BASE
    py::class_<mesh_torch::MeshGroup, c10d::ProcessGroup,
               mesh_torch::GilFreePtr<mesh_torch::MeshGroup>>(
        m, "MeshGroup",
        "torch 2.x: the ProcessGroup of a mesh group, named mesh; its backend is a "
        "ProcessGroupMesh.");
    m.def("_group", &mesh_torch::group, py::arg("store"), py::arg("rank"), py::arg("size"),
          py::arg("backend"), py::arg("devices"),
          "torch 2.x: the ProcessGroup of a group whose backend serves devices.");
#endif
    m.def("_shutdown_all", &mesh_torch::Comm::shutdown_all,
          py::call_guard<py::gil_scoped_release>(),
          "At exit: fails what is in flight and releases every communicator of the process.");
    m.attr("torch_version") = TORCH_VERSION;
    m.attr("mesh_version") = std::to_string(MESH_VERSION_MAJOR) + "." +
                             std::to_string(MESH_VERSION_MINOR) + "." +
                             std::to_string(MESH_VERSION_PATCH);
}
