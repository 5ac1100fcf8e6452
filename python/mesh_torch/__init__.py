"""The ``mesh`` backend of torch.distributed.

Importing this package registers the backend; then::

    import mesh_torch
    torch.distributed.init_process_group("mesh", ...)

Every process group (the default one and each ``new_group``) gets a mesh communicator of its own,
formed through the group's store, so ``env://``, ``tcp://``, ``file://`` and ``torchrun`` work as
with any backend. The ``timeout`` given to ``init_process_group`` or ``new_group`` bounds every
operation of the group; a peer that dies fails the operations of every survivor with a
RuntimeError naming it.
"""

import atexit
import inspect

import torch
import torch.distributed as dist

from . import _C

__all__ = ["BACKEND", "ProcessGroupMesh", "is_mesh"]

BACKEND = "mesh"
ProcessGroupMesh = _C.ProcessGroupMesh
# the devices whose tensors the backend serves
_DEVICES = ["cpu"]


def _version(text):
    return tuple(int(p) for p in text.split("+")[0].split(".")[:2])


if _version(torch.__version__) != _version(_C.torch_version):
    raise ImportError(
        "mesh_torch was built against torch %s but torch %s is imported; rebuild mesh with the "
        "interpreter that runs this torch (./configure --with-torch=PYTHON)"
        % (_C.torch_version, torch.__version__)
    )


def _timeout_seconds(timeout):
    if hasattr(timeout, "total_seconds"):
        return timeout.total_seconds()
    return float(timeout)


def _create(opts, pg_options=None):
    """Creator handed to register_backend with extended_api=True (torch 1.13 and 2.x): the
    backend on 1.x, where it is the process group; on 2.x a ProcessGroup over it, which torch
    keeps as the group, named mesh (torch would name a group it makes itself "custom")."""
    if pg_options is not None:
        raise RuntimeError("mesh: process group options are not supported (got %r)" % (pg_options,))
    ranks = [int(r) for r in opts.global_ranks_in_group]
    rank, size = int(opts.group_rank), int(opts.group_size)
    backend = _C._create(
        opts.store,
        rank,
        size,
        _timeout_seconds(opts.timeout),
        str(opts.group_id),
        ranks,
    )
    if not hasattr(_C, "_group"):
        return backend
    # torch wraps the backends of the groups it makes in TORCH_DISTRIBUTED_DEBUG=DETAIL, which
    # checks that the ranks issue the same collectives; it leaves a group it is given as it is
    if dist.get_debug_level() == dist.DebugLevel.DETAIL:
        backend = dist.distributed_c10d._create_process_group_wrapper(
            wrapped_pg=backend,
            store_prefix=str(opts.group_id),
            store=opts.store,
            rank=rank,
            world_size=size,
            timeout=opts.timeout,
        )
    return _C._group(opts.store, rank, size, backend, _DEVICES)


def _register():
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    kwargs = {"extended_api": True}
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        kwargs["devices"] = _DEVICES
    dist.Backend.register_backend(BACKEND, _create, **kwargs)


def is_mesh(group=None):
    """Whether a process group (default: the default group) runs on mesh."""
    return dist.get_backend(group) == BACKEND


def backend_of(group=None):
    """The ProcessGroupMesh of a process group (default: the default group): the group itself
    on torch 1.x, the backend serving its CPU tensors on 2.x (the MeshGroup's); None when it is
    not on mesh."""
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    if isinstance(group, ProcessGroupMesh):
        return group
    try:
        backend = group._get_backend(torch.device("cpu"))
    except (AttributeError, RuntimeError):
        return None
    return backend if isinstance(backend, ProcessGroupMesh) else None


_register()
# no completion thread outlives the interpreter, and no exit waits for a peer
atexit.register(_C._shutdown_all)
