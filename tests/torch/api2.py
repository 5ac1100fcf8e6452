"""What users of torch 2.x meet beyond the classic collectives, on the mesh backend against the
same calls on gloo in the same processes (4 ranks, run under meshrun or torchrun):

- DeviceMesh: init_device_mesh("cpu", (2, 2)) over the default group (mesh) and its
  per-dimension groups, which must be mesh groups of the right ranks;
- DTensor: distribute_tensor, full_tensor, and redistributions that all-gather, all-reduce and
  reduce-scatter (Partial to Replicate and to Shard) on each dimension of the 2-D mesh;
- FSDP2: fully_shard of a small model on a 1-D mesh, trained 10 steps;
- torch.distributed.pipelining: one stage per rank under ScheduleGPipe, 4 microbatches;
- all_to_all_single with uneven splits, and batch_isend_irecv around the ring both ways;
- all_gather_into_tensor and reduce_scatter_tensor under the coalescing manager (one call of
  the backend for several tensors, as DTensor and FSDP2 make), against single calls on gloo.

The same thing runs on a DeviceMesh (or group) of gloo; results must be equal (within 1e-6 for
training, exactly for data movement and integer-valued sums). Exits 77 on torch 1.x.
"""

import sys

import harness
from harness import dist, expect, expect_equal, torch

if int(torch.__version__.split(".")[0]) < 2:
    print("skipped: DeviceMesh, DTensor, FSDP2 and pipelining need torch 2.x (this is %s)"
          % torch.__version__)
    sys.exit(77)

from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe  # noqa: E402
from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402

TOL = 1e-6
rank = size = 0


def meshes(shape, names):
    """The same DeviceMesh on the default group's backend (mesh) and on gloo."""
    on_mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    on_gloo = init_device_mesh("cpu", shape, mesh_dim_names=names,
                               backend_override={n: "gloo" for n in names})
    return on_mesh, on_gloo


def device_mesh_groups(m, g):
    for name in ("dp", "tp"):
        pg, ref = m.get_group(name), g.get_group(name)
        expect(dist.get_backend(pg) == "mesh", "%s: the group's backend is %s"
               % (name, dist.get_backend(pg)))
        expect(dist.get_backend(ref) == "gloo", "%s: gloo's group is %s"
               % (name, dist.get_backend(ref)))
        ranks = dist.get_process_group_ranks(pg)
        expect(ranks == dist.get_process_group_ranks(ref), "%s: ranks %s, gloo's %s"
               % (name, ranks, dist.get_process_group_ranks(ref)))
        expect(rank in ranks and len(ranks) == 2, "%s: rank %d in %s" % (name, rank, ranks))
        for dtype in (torch.float32, torch.int64):
            got = torch.arange(1001, dtype=dtype) * (rank + 1)
            want = got.clone()
            dist.all_reduce(got, group=pg)
            dist.all_reduce(want, group=ref)
            expect_equal(got, want, "%s all_reduce %s" % (name, dtype))
            out = [torch.empty(5, dtype=dtype) for _ in range(2)]
            out_ref = [torch.empty(5, dtype=dtype) for _ in range(2)]
            dist.all_gather(out, torch.full((5,), rank, dtype=dtype), group=pg)
            dist.all_gather(out_ref, torch.full((5,), rank, dtype=dtype), group=ref)
            for i in range(2):
                expect_equal(out[i], out_ref[i], "%s all_gather %s [%d]" % (name, dtype, i))


def dtensor_run(dm):
    """Results of DTensor collectives on the 2-D mesh dm (the same on every backend)."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randint(-50, 50, (8, 12), generator=gen).float()
    out = {}
    d = distribute_tensor(x, dm, [Shard(0), Shard(1)])
    out["shard local"] = d.to_local().clone()
    out["full_tensor"] = d.full_tensor()
    out["shard to replicate"] = d.redistribute(dm, [Replicate(), Shard(0)]).to_local()
    local = (torch.arange(96, dtype=torch.float32).reshape(8, 12) + 100 * rank)
    p = DTensor.from_local(local, dm, [Partial(), Partial()])
    out["partial to replicate"] = p.redistribute(dm, [Replicate(), Replicate()]).to_local()
    out["partial to shard"] = p.redistribute(dm, [Shard(0), Shard(1)]).to_local()
    out["matmul"] = (d @ distribute_tensor(x.t().contiguous(), dm, [Shard(1), Replicate()])
                     ).full_tensor()
    return x, out


def dtensor(m, g):
    x, got = dtensor_run(m)
    _, want = dtensor_run(g)
    for k in got:
        expect_equal(got[k], want[k], "DTensor %s" % k)
    expect_equal(got["full_tensor"], x, "DTensor full_tensor against the tensor distributed")
    s = sum(torch.arange(96, dtype=torch.float32).reshape(8, 12) + 100 * r for r in range(size))
    expect_equal(got["partial to replicate"], s, "DTensor partial sum")
    expect_equal(got["matmul"], x @ x.t(), "DTensor matmul")


def fsdp_train(dm, steps=10):
    torch.manual_seed(1234)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                              torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=dm)
    fully_shard(net, mesh=dm)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        g = torch.Generator().manual_seed(100 * rank + step)
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    return [p.full_tensor().detach().clone() for p in net.parameters()]


def fsdp2():
    m = init_device_mesh("cpu", (size,))
    g = init_device_mesh("cpu", (size,), backend_override={0: "gloo"})
    expect(dist.get_backend(m.get_group()) == "mesh", "FSDP's mesh is not on mesh")
    got, want = fsdp_train(m), fsdp_train(g)
    worst = max((a - b).abs().max().item() for a, b in zip(got, want))
    expect(worst <= TOL, "FSDP2: parameters differ from gloo's by %.3g" % worst)
    torch.manual_seed(1234)
    start = torch.nn.Linear(16, 32).weight
    moved = (got[0] - start).abs().max().item()
    expect(moved > 100 * TOL, "FSDP2: the parameters moved by %.3g only" % moved)
    if rank == 0:
        print("   FSDP2: largest difference from gloo %.3g" % worst, flush=True)


def pipeline_run(pg):
    torch.manual_seed(50 + rank)
    stage_mod = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh())
    stage = PipelineStage(stage_mod, rank, size, torch.device("cpu"), group=pg)
    last = rank == size - 1
    # every stage's schedule gets the loss: it tells the schedule to run the backward pass
    sched = ScheduleGPipe(stage, n_microbatches=4, loss_fn=torch.nn.functional.mse_loss)
    g = torch.Generator().manual_seed(99)
    x, y = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    losses = []
    if rank == 0:
        sched.step(x)
    elif last:
        sched.step(target=y, losses=losses)
    else:
        sched.step()
    grads = [p.grad.detach().clone() for p in stage_mod.parameters()]
    return grads, [l.detach().clone() for l in losses]


def pipelining(gloo):
    got, got_loss = pipeline_run(None)
    want, want_loss = pipeline_run(gloo)
    for i, (a, b) in enumerate(zip(got + got_loss, want + want_loss)):
        expect_equal(a, b, "pipelining gradient or loss %d" % i, tol=TOL)
    expect(len(got_loss) == (4 if rank == size - 1 else 0), "pipelining: %d losses"
           % len(got_loss))
    expect(all(g.abs().max().item() > 0 for g in got), "pipelining: a gradient is zero")


def all_to_all_uneven(gloo):
    # rank r sends (r + j) % 3 + j elements to rank j: some are 0
    splits_in = [(rank + j) % 3 + j for j in range(size)]
    splits_out = [(i + rank) % 3 + rank for i in range(size)]
    for dtype in (torch.float32, torch.int64, torch.uint8):
        src = (torch.arange(sum(splits_in)) + 1000 * rank).to(dtype)
        got = torch.full((sum(splits_out),), 7, dtype=dtype)
        want = got.clone()
        dist.all_to_all_single(got, src, splits_out, splits_in)
        dist.all_to_all_single(want, src, splits_out, splits_in, group=gloo)
        expect_equal(got, want, "all_to_all_single uneven %s" % dtype)
    # asynchronously, with a future
    src = torch.arange(sum(splits_in), dtype=torch.float64) + rank
    got = torch.zeros(sum(splits_out), dtype=torch.float64)
    work = dist.all_to_all_single(got, src, splits_out, splits_in, async_op=True)
    work.get_future().wait()
    want = torch.zeros_like(got)
    dist.all_to_all_single(want, src, splits_out, splits_in, group=gloo)
    expect_equal(got, want, "all_to_all_single uneven, async")


def coalesced_run(pg, coalesce, dtype):
    """all_gather_into_tensor and reduce_scatter_tensor on three tensors each (one of them
    empty), under the coalescing manager (one backend call each) or one by one."""
    ins = [torch.arange(5, dtype=dtype) + 10 * rank, torch.zeros(0, dtype=dtype),
           torch.arange(3, dtype=dtype) * (rank + 1)]
    gathered = [torch.full((t.numel() * size,), -1, dtype=dtype) for t in ins]
    rs_in = [torch.arange(4 * size, dtype=dtype) * (rank + 1), torch.zeros(0, dtype=dtype),
             torch.arange(2 * size, dtype=dtype) + rank]
    scattered = [torch.full((t.numel() // size,), -1, dtype=dtype) for t in rs_in]
    if coalesce:
        with dist._coalescing_manager(group=pg, async_ops=True) as cm:
            for o, i in zip(gathered, ins):
                dist.all_gather_into_tensor(o, i, group=pg)
        cm.wait()
        with dist._coalescing_manager(group=pg, async_ops=True) as cm:
            for o, i in zip(scattered, rs_in):
                dist.reduce_scatter_tensor(o, i, group=pg)
        cm.wait()
    else:
        for o, i in zip(gathered, ins):
            dist.all_gather_into_tensor(o, i, group=pg)
        for o, i in zip(scattered, rs_in):
            if i.numel():
                dist.reduce_scatter_tensor(o, i, group=pg)
    return gathered + scattered


def coalesced(gloo):
    for dtype in (torch.float32, torch.int64):
        got = coalesced_run(None, True, dtype)
        want = coalesced_run(gloo, False, dtype)
        for i, (a, b) in enumerate(zip(got, want)):
            expect_equal(a, b, "coalesced %s, tensor %d" % (dtype, i))


def batch_p2p(pg):
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    out = [torch.arange(100 + rank, dtype=torch.float32) * (rank + 1),
           torch.full((3, 5), rank, dtype=torch.int64)]
    inp = [torch.empty(100 + prv, dtype=torch.float32), torch.empty(3, 5, dtype=torch.int64)]
    ops = [dist.P2POp(dist.isend, out[0], nxt, group=pg),
           dist.P2POp(dist.irecv, inp[0], prv, group=pg),
           dist.P2POp(dist.isend, out[1], prv, group=pg),
           dist.P2POp(dist.irecv, inp[1], nxt, group=pg)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    return inp


def batch_isend_irecv(gloo):
    got, want = batch_p2p(None), batch_p2p(gloo)
    for i in range(2):
        expect_equal(got[i], want[i], "batch_isend_irecv tensor %d" % i)
    prv = (rank - 1) % size
    expect_equal(got[0], torch.arange(100 + prv, dtype=torch.float32) * (prv + 1),
                 "batch_isend_irecv from the previous rank")


def body(checks, gloo):
    global rank, size
    rank, size = dist.get_rank(), dist.get_world_size()
    if size != 4:
        raise SystemExit("api2.py runs on 4 ranks (got %d)" % size)
    m, g = meshes((2, 2), ("dp", "tp"))
    checks.run("DeviceMesh (2, 2): per-dimension groups", device_mesh_groups, m, g)
    checks.run("DTensor collectives on a (2, 2) mesh", dtensor, m, g)
    checks.run("FSDP2 fully_shard, 10 steps", fsdp2)
    checks.run("pipelining: ScheduleGPipe, one stage per rank", pipelining, gloo)
    checks.run("all_to_all_single, uneven splits", all_to_all_uneven, gloo)
    checks.run("batch_isend_irecv around the ring", batch_isend_irecv, gloo)
    checks.run("coalesced all_gather_into_tensor and reduce_scatter_tensor", coalesced, gloo)


if __name__ == "__main__":
    harness.main("torch 2.x api", body)
