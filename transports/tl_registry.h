/* The ops tables the registry lists; each transport defines its own. */
#ifndef MESH_TL_REGISTRY_H
#define MESH_TL_REGISTRY_H

#include "transports/tl.h"

extern const mesh_tl_ops_t mesh_tl_self_ops;
extern const mesh_tl_ops_t mesh_tl_shm_ops;
extern const mesh_tl_ops_t mesh_tl_tcp_ops;
#if HAVE_VERBS
extern const mesh_tl_ops_t mesh_tl_verbs_ops;
#endif
#if HAVE_UCX
extern const mesh_tl_ops_t mesh_tl_ucx_ops;
#endif
#if HAVE_OFI
extern const mesh_tl_ops_t mesh_tl_ofi_ops;
#endif

#endif
