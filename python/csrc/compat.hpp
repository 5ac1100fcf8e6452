/*
 * The one switch between torch versions. A third-party backend of torch 1.x is a
 * c10d::ProcessGroup; from 2.0 on, a ProcessGroup wraps one c10d::Backend per device and a
 * third-party backend is that Backend. Both bases declare the same virtual operations with the
 * same signatures (2.x adds a few), and both use the top-level c10d::Work of 1.13.
 */
#ifndef MESH_TORCH_COMPAT_HPP
#define MESH_TORCH_COMPAT_HPP

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define MESH_TORCH_BACKEND_BASE 1
namespace mesh_torch
{
using BackendBase = c10d::Backend;
}
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define MESH_TORCH_BACKEND_BASE 0
namespace mesh_torch
{
using BackendBase = c10d::ProcessGroup;
}
#endif

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#endif
