/*
 * mesh parallel layers: the building blocks of model training on a 5D mesh, as clients of
 * mesh.h. Link with -lmesh_parallel (pkg-config mesh-parallel).
 *
 * Every layer takes its communicators as arguments (from a mesh_grid), holds no global state,
 * and returns mesh_status_t; on failure the message is this thread's last error,
 * mesh_comm_last_error(NULL).
 */
#ifndef MESH_PARALLEL_H
#define MESH_PARALLEL_H

#include <mesh.h>
#include <mesh/context.h>
#include <mesh/expert.h>
#include <mesh/pipeline.h>
#include <mesh/tensor.h>
#include <mesh/zero.h>
#include <mesh/plan.h>

#endif
