/*
 * torch 2.x: the ProcessGroup of a `mesh` group. torch wraps a third-party backend in a
 * ProcessGroup of its own that names itself after the backend's type, "custom", and that name
 * is what ProcessGroup.name(), DDP's logging data ("backend_name") and torch's messages report.
 * The creator hands torch this ProcessGroup instead (torch keeps a ProcessGroup it is given):
 * named "mesh", with the group's ProcessGroupMesh as its backend for every device mesh serves,
 * and the backend's sequence numbers as the group's.
 */
#ifndef MESH_TORCH_GROUP_HPP
#define MESH_TORCH_GROUP_HPP

#include "compat.hpp"

#if MESH_TORCH_BACKEND_BASE

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <string>
#include <vector>

namespace mesh_torch
{

class MeshGroup : public c10d::ProcessGroup
{
  public:
    /* backend serves each of devices ("cpu", ...); store is the group's. */
    MeshGroup(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
              const c10::intrusive_ptr<c10d::Backend> &backend,
              const std::vector<std::string> &devices);

    const std::string getBackendName() const override { return "mesh"; }

    void setSequenceNumberForGroup() override { getDefaultBackend()->setSequenceNumberForGroup(); }
    uint64_t getSequenceNumberForGroup() override
    {
        return getDefaultBackend()->getSequenceNumberForGroup();
    }
};

} // namespace mesh_torch

#endif
#endif
