#include "group.hpp"

#if MESH_TORCH_BACKEND_BASE

#include "tensors.hpp"

namespace mesh_torch
{

MeshGroup::MeshGroup(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                     const c10::intrusive_ptr<c10d::Backend> &backend,
                     const std::vector<std::string> &devices)
    : c10d::ProcessGroup(store, rank, size)
{
    if (!backend)
        refuse("a group needs a backend");
    if (backend->getRank() != rank || backend->getSize() != size)
        refuse("the backend is rank " + std::to_string(backend->getRank()) + " of " +
               std::to_string(backend->getSize()) + ", the group rank " + std::to_string(rank) +
               " of " + std::to_string(size));
    if (devices.empty())
        refuse("a group serves at least one device");
    for (const auto &device : devices)
        setBackend(c10::Device(device).type(), BackendType::CUSTOM, backend);
    setDefaultBackend(BackendType::CUSTOM);
    init();
}

} // namespace mesh_torch

#endif
