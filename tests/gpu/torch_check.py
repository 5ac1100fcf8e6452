"""PyTorch's own ProcessGroupNCCL on mesh's libnccl.so.2 (preloaded), with every rank on GPU 0.

Run by tests/gpu/torch-check.sh under torchrun, one rank per process:
  torch_check.py collectives  every torch.distributed collective on CUDA tensors (dtypes, sizes,
                              each reduction), equal to the same call on a gloo group with CPU
                              copies of the inputs
  torch_check.py train        DDP, then FSDP2 (fully_shard), of a small transformer for 20 steps,
                              fp32 with TF32 off; the parameters equal within 1e-4 relative to the
                              same model trained by one process on the whole batch
  --cpu                       gloo on CPU tensors in place of NCCL on CUDA ones: checks this
                              script's own logic on a machine without a GPU
Every rank prints "FAIL ..." for each failed check and exits 1 if any failed; rank 0 prints a
summary line "torch_check MODE: world N: P passed, F failed".
"""

import datetime
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

CPU = "--cpu" in sys.argv
MODE = next((a for a in sys.argv[1:] if not a.startswith("--")), "collectives")
rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
dev = torch.device("cpu") if CPU else torch.device("cuda", 0)
results = {"pass": 0, "fail": 0}
errors = []  # the current check's mismatches
GLOO = [None]  # the reference group


def say(*a):
    if rank == 0:
        print(*a, flush=True)


def check(name, fn):
    """Runs one check on every rank; a rank that fails prints why."""
    t0 = time.time()
    del errors[:]
    try:
        fn()
        ok = not errors
    except Exception:
        ok = False
        print("FAIL %s on rank %d:\n%s" % (name, rank, traceback.format_exc()), flush=True)
    for e in errors[:5]:
        print("FAIL %s on rank %d: %s" % (name, rank, e), flush=True)
    # the ranks agree on the verdict (over gloo, which the check did not disturb)
    bad = torch.tensor([0 if ok else 1])
    dist.all_reduce(bad, group=GLOO[0])
    ok = bad.item() == 0
    results["pass" if ok else "fail"] += 1
    say("%s %s (%.1f s)" % ("ok  " if ok else "FAIL", name, time.time() - t0))


def expect_equal(got, want, what):
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        diff = "shape %s/%s" % (tuple(got.shape), tuple(want.shape))
        if got.shape == want.shape:
            bad = (got.double() != want.double()).nonzero()
            diff = "%d elements differ, first at %s: %s vs %s" % (
                bad.shape[0], tuple(bad[0].tolist()), got[tuple(bad[0])].item(),
                want[tuple(bad[0])].item())
        # recorded, not raised: the ranks go on calling the same collectives in step
        errors.append("%s: differs from gloo's (%s)" % (what, diff))


def init():
    timeout = datetime.timedelta(seconds=60)
    if CPU:
        dist.init_process_group("gloo", timeout=timeout)
    else:
        torch.cuda.set_device(0)  # every rank shares the one GPU
        dist.init_process_group("nccl", timeout=timeout, device_id=dev)
    return dist.new_group(backend="gloo", timeout=timeout)


# ---------------------------------------------------------------- collectives

DTYPES = [torch.float32, torch.bfloat16, torch.float64, torch.int32, torch.int64]
SIZES = [1, 1000, 1 << 20]


def values(n, dtype, seed, op=None):
    """Integers (exact in every dtype and every sum of a few ranks) on the CPU."""
    g = torch.Generator().manual_seed(seed)
    if op == dist.ReduceOp.PRODUCT:
        t = torch.randint(1, 3, (n,), generator=g) * (1 - 2 * torch.randint(0, 2, (n,), generator=g))
    else:
        t = torch.randint(-64, 64, (n,), generator=g)
    return t.to(dtype)


def each_reduce_op():
    ops = [("sum", dist.ReduceOp.SUM), ("product", dist.ReduceOp.PRODUCT),
           ("min", dist.ReduceOp.MIN), ("max", dist.ReduceOp.MAX)]
    return ops


def all_reduce_ops(gloo):
    for name, op in each_reduce_op():
        for dtype in DTYPES:
            for n in SIZES:
                x = values(n, dtype, 10 * rank + n % 7, op)
                d, c = x.to(dev), x.clone()
                dist.all_reduce(d, op=op)
                dist.all_reduce(c, op=op, group=gloo)
                expect_equal(d, c, "all_reduce %s %s n=%d" % (name, dtype, n))
    # gloo has no AVG and no PREMUL_SUM: their oracle is gloo's sum, divided or scaled (world
    # sizes are powers of two and the values integers, so both are exact)
    for dtype in [torch.float32, torch.bfloat16, torch.float64]:
        for n in SIZES:
            x = values(n, dtype, 7 * rank + 1)
            d, c = x.to(dev), x.clone()
            dist.all_reduce(c, op=dist.ReduceOp.SUM, group=gloo)
            if CPU:
                dist.all_reduce(d, op=dist.ReduceOp.SUM)
                d /= world
            else:
                dist.all_reduce(d, op=dist.ReduceOp.AVG)
            expect_equal(d, c / world, "all_reduce avg %s n=%d" % (dtype, n))
            if not CPU and dtype != torch.bfloat16:
                d = x.to(dev)
                dist.all_reduce(d, op=dist._make_nccl_premul_sum(2.0))
                expect_equal(d, c * 2, "all_reduce premul_sum(2.0) %s n=%d" % (dtype, n))


def rooted(gloo):
    for dtype in DTYPES:
        for n in SIZES:
            root = world - 1
            x = values(n, dtype, 3 * rank + n)
            d, c = x.to(dev), x.clone()
            dist.broadcast(d, src=root)
            dist.broadcast(c, src=root, group=gloo)
            expect_equal(d, c, "broadcast %s n=%d" % (dtype, n))
            d, c = x.to(dev), x.clone()
            dist.reduce(d, dst=1, op=dist.ReduceOp.SUM)
            dist.reduce(c, dst=1, op=dist.ReduceOp.SUM, group=gloo)
            if rank == 1:  # the other ranks' tensors are unspecified after a reduce
                expect_equal(d, c, "reduce %s n=%d" % (dtype, n))


def gathers(gloo):
    for dtype in DTYPES:
        for n in SIZES:
            x = values(n, dtype, 5 * rank + n)
            d = [torch.empty_like(x, device=dev) for _ in range(world)]
            c = [torch.empty_like(x) for _ in range(world)]
            dist.all_gather(d, x.to(dev))
            dist.all_gather(c, x, group=gloo)
            for i in range(world):
                expect_equal(d[i], c[i], "all_gather %s n=%d block %d" % (dtype, n, i))
            d = torch.empty(world * n, dtype=dtype, device=dev)
            c = torch.empty(world * n, dtype=dtype)
            dist.all_gather_into_tensor(d, x.to(dev))
            dist.all_gather_into_tensor(c, x, group=gloo)
            expect_equal(d, c, "all_gather_into_tensor %s n=%d" % (dtype, n))
            y = values(world * n, dtype, 9 * rank + n)
            d = torch.empty(n, dtype=dtype, device=dev)
            c = torch.empty(n, dtype=dtype)
            dist.reduce_scatter_tensor(d, y.to(dev))
            dist.reduce_scatter_tensor(c, y, group=gloo)
            expect_equal(d, c, "reduce_scatter_tensor %s n=%d" % (dtype, n))
            d = torch.empty(n, dtype=dtype, device=dev)
            dist.reduce_scatter(d, [b.to(dev) for b in y.chunk(world)])
            expect_equal(d, c, "reduce_scatter (list) %s n=%d" % (dtype, n))
            # gather and scatter, rooted at rank 0
            d = [torch.empty_like(x, device=dev) for _ in range(world)] if rank == 0 else None
            c = [torch.empty_like(x) for _ in range(world)] if rank == 0 else None
            dist.gather(x.to(dev), d, dst=0)
            dist.gather(x, c, dst=0, group=gloo)
            if rank == 0:
                for i in range(world):
                    expect_equal(d[i], c[i], "gather %s n=%d block %d" % (dtype, n, i))
            blocks = list(values(world * n, dtype, 11).chunk(world)) if rank == 0 else None
            d = torch.empty(n, dtype=dtype, device=dev)
            c = torch.empty(n, dtype=dtype)
            dist.scatter(d, [b.to(dev) for b in blocks] if rank == 0 else None, src=0)
            dist.scatter(c, [b.clone() for b in blocks] if rank == 0 else None, src=0, group=gloo)
            expect_equal(d, c, "scatter %s n=%d" % (dtype, n))


def all_to_all_uneven(gloo):
    for dtype in DTYPES:
        for scale in [1, 1000]:
            # rank r sends (r + j + 1) * scale elements to rank j
            ins = [(rank + j + 1) * scale for j in range(world)]
            outs = [(j + rank + 1) * scale for j in range(world)]
            x = values(sum(ins), dtype, 13 * rank + scale)
            d = torch.empty(sum(outs), dtype=dtype, device=dev)
            c = torch.empty(sum(outs), dtype=dtype)
            dist.all_to_all_single(d, x.to(dev), outs, ins)
            dist.all_to_all_single(c, x, outs, ins, group=gloo)
            expect_equal(d, c, "all_to_all_single uneven %s x%d" % (dtype, scale))
            # even splits, no sizes given
            x = values(world * scale, dtype, 17 * rank + scale)
            d = torch.empty(world * scale, dtype=dtype, device=dev)
            c = torch.empty(world * scale, dtype=dtype)
            dist.all_to_all_single(d, x.to(dev))
            dist.all_to_all_single(c, x, group=gloo)
            expect_equal(d, c, "all_to_all_single even %s x%d" % (dtype, scale))


def point_to_point(gloo):
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for dtype in [torch.float32, torch.int64]:
        for n in SIZES:
            x = values(n, dtype, 19 * rank + n)
            # blocking send/recv: even ranks send first
            d, c = torch.empty_like(x, device=dev), torch.empty_like(x)
            for pg, buf, src in ((None, d, x.to(dev)), (gloo, c, x)):
                if rank % 2 == 0:
                    dist.send(src, nxt, group=pg)
                    dist.recv(buf, prv, group=pg)
                else:
                    dist.recv(buf, prv, group=pg)
                    dist.send(src, nxt, group=pg)
            expect_equal(d, c, "send/recv %s n=%d" % (dtype, n))
            # batch_isend_irecv, both directions at once
            d2 = [torch.empty_like(x, device=dev) for _ in range(2)]
            c2 = [torch.empty_like(x) for _ in range(2)]
            for pg, bufs, src in ((None, d2, x.to(dev)), (gloo, c2, x)):
                ops = [dist.P2POp(dist.irecv, bufs[0], prv, group=pg),
                       dist.P2POp(dist.irecv, bufs[1], nxt, group=pg),
                       dist.P2POp(dist.isend, src, nxt, group=pg),
                       dist.P2POp(dist.isend, src, prv, group=pg)]
                for w in dist.batch_isend_irecv(ops):
                    w.wait()
            expect_equal(d2[0], c2[0], "batch_isend_irecv from prev %s n=%d" % (dtype, n))
            expect_equal(d2[1], c2[1], "batch_isend_irecv from next %s n=%d" % (dtype, n))


def async_and_barrier(gloo):
    works, ds, cs = [], [], []
    for k in range(4):
        x = values(1 << 16, torch.float32, 23 * rank + k)
        d, c = x.to(dev), x.clone()
        works.append(dist.all_reduce(d, async_op=True))
        dist.all_reduce(c, group=gloo)
        ds.append(d)
        cs.append(c)
    for w, d, c in zip(works, ds, cs):
        w.wait()
        expect_equal(d, c, "async all_reduce")
    dist.barrier()
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "name": "r%d" % rank})
    assert objs == [{"rank": r, "name": "r%d" % r} for r in range(world)], objs
    lst = ["from root", rank] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == ["from root", 0], lst


def nccl_is_mesh():
    """torch's NCCL calls reach mesh's libnccl.so.2. torch loads NVIDIA's library as well (by its
    path, from the nvidia-nccl wheel), but the preloaded one comes first in the global scope, so
    that the process's ncclGetVersion, which libtorch_cuda binds to, is mesh's."""
    if CPU:
        return
    import ctypes
    want = os.environ["MESH_NCCL_LIB"]
    with open("/proc/self/maps") as f:
        libs = sorted({l.split()[-1] for l in f if "libnccl" in l})
    assert os.path.realpath(want) in libs, "%s is not mapped (only %s)" % (want, libs)

    def addr(lib):
        return ctypes.cast(lib.ncclGetVersion, ctypes.c_void_p).value

    glob, mesh = addr(ctypes.CDLL(None)), addr(ctypes.CDLL(want))
    assert glob == mesh, "the process's ncclGetVersion (0x%x) is not mesh's (0x%x)" % (glob, mesh)
    say("   libnccl mapped: %s; ncclGetVersion is mesh's; version %s" %
        (", ".join(libs), torch.cuda.nccl.version()))


def collectives(gloo):
    check("the NCCL in the process is mesh's", nccl_is_mesh)
    check("all_reduce: each op and dtype, 3 sizes", lambda: all_reduce_ops(gloo))
    check("broadcast and reduce", lambda: rooted(gloo))
    check("all_gather, all_gather_into_tensor, reduce_scatter(_tensor), gather, scatter",
          lambda: gathers(gloo))
    check("all_to_all_single, uneven and even", lambda: all_to_all_uneven(gloo))
    check("send/recv and batch_isend_irecv", lambda: point_to_point(gloo))
    check("async work, barrier, object collectives", lambda: async_and_barrier(gloo))


# ---------------------------------------------------------------- training

VOCAB, DIM, HEADS, LAYERS, SEQ, BATCH, STEPS, LR = 64, 32, 4, 2, 16, 8, 20, 0.05
RTOL = 1e-4


class Tiny(torch.nn.Module):
    """A small causal transformer language model (fp32)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, DIM)
        self.pos = torch.nn.Parameter(torch.randn(SEQ, DIM) * 0.02)
        self.layers = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(DIM, HEADS, 2 * DIM, dropout=0.0, batch_first=True)
            for _ in range(LAYERS))
        self.head = torch.nn.Linear(DIM, VOCAB)
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(SEQ))

    def forward(self, x):
        h = self.emb(x) + self.pos
        for layer in self.layers:
            h = layer(h, src_mask=self.mask, is_causal=True)
        return self.head(h)


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    return x[:, :-1], x[:, 1:]


def train(model, shard):
    """STEPS steps of SGD on rows shard of each batch; the loss is the mean over those rows, so
    the ranks' average gradient is the whole batch's."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    for step in range(STEPS):
        x, y = batch(step)
        x, y = x[shard].to(dev), y[shard].to(dev)
        opt.zero_grad()
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out.reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
    return loss.item()


def fresh():
    torch.manual_seed(1234)
    return Tiny().to(dev)


def reference():
    model = fresh()
    loss = train(model, slice(0, BATCH))
    return {k: v.detach().cpu() for k, v in model.named_parameters()}, loss


def compare(got, want, what):
    worst = 0.0
    start = {k: v.detach().cpu() for k, v in fresh().named_parameters()}
    moved = 0.0
    for k, w in want.items():
        g = got[k]
        scale = w.abs().max().item() or 1.0
        worst = max(worst, (g - w).abs().max().item() / scale)
        moved = max(moved, (w - start[k]).abs().max().item() / scale)
    assert moved > 100 * RTOL, "%s: training moved the parameters by %.3g only" % (what, moved)
    assert worst <= RTOL, "%s: parameters differ from one process's by %.3g relative" % (what,
                                                                                         worst)
    say("   %s: largest relative difference from one process %.3g (parameters moved %.3g)" %
        (what, worst, moved))


def shard():
    per = BATCH // world
    return slice(rank * per, (rank + 1) * per)


def ddp(want):
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(fresh(), device_ids=None if CPU else [0])
    train(model, shard())
    got = {k[len("module."):]: v.detach().cpu() for k, v in model.named_parameters()}
    compare(got, want, "DDP")


def fsdp2(want):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    dm = init_device_mesh("cpu" if CPU else "cuda", (world,))
    model = fresh()
    for layer in model.layers:
        fully_shard(layer, mesh=dm)
    fully_shard(model, mesh=dm)
    train(model, shard())
    got = {k: v.full_tensor().detach().cpu() for k, v in model.named_parameters()}
    compare(got, want, "FSDP2")


def training(gloo):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    assert BATCH % world == 0
    want, loss = reference()
    say("   one process on the whole batch: loss %.4f after %d steps" % (loss, STEPS))
    check("DDP, %d steps" % STEPS, lambda: ddp(want))
    check("FSDP2 fully_shard, %d steps" % STEPS, lambda: fsdp2(want))


def main():
    if not CPU and not torch.cuda.is_available():
        print("skipped: torch.cuda.is_available() is false")
        sys.exit(77)
    t0 = time.time()
    gloo = init()
    GLOO[0] = gloo
    say("torch %s, %s, world %d%s" % (torch.__version__, MODE, world,
                                      " (CPU, gloo)" if CPU else " on GPU 0"))
    if MODE == "collectives":
        collectives(gloo)
    elif MODE == "train":
        training(gloo)
    else:
        raise SystemExit("unknown mode %s" % MODE)
    failed = torch.tensor([results["fail"]])
    say("torch_check %s: world %d: %d passed, %d failed (%.0f s)" % (
        MODE, world, results["pass"], results["fail"], time.time() - t0))
    dist.destroy_process_group()
    sys.exit(1 if failed.item() else 0)


if __name__ == "__main__":
    main()
