"""DistributedDataParallel on the mesh backend against the same training on gloo, in the same
processes (run under torchrun or meshrun): a small model with batch norm (buffers broadcast
every step) in several gradient buckets, trained 20 steps with the same seed and data on a mesh
group and on a gloo group, plainly, with no_sync gradient accumulation, with the fp16
compression hook, and with ZeroRedundancyOptimizer. The parameters must equal gloo's within
1e-6, and be bitwise the same on every rank.

With the fp16 hook the two backends round differently (gloo adds in fp16, step by step; mesh
adds in fp32 and rounds once), by up to an fp16 ulp of the gradients: that variant trains on a
loss scaled down so that 20 such differences stay below the tolerance, while the parameters
still move by far more than it."""

import harness
from harness import dist, expect, torch

from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 20
TOL = 1e-6


def model():
    torch.manual_seed(1234)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.BatchNorm1d(64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))


def batch(step, micro=0):
    g = torch.Generator().manual_seed(1000 * dist.get_rank() + 10 * step + micro)
    x = torch.randn(16, 32, generator=g)
    y = torch.randn(16, 8, generator=g)
    return x, y


def train(pg, variant):
    net = model()
    ddp = DDP(net, process_group=pg, bucket_cap_mb=0.005)
    logged = ddp._get_ddp_logging_data().get("backend_name")
    expect(logged == dist.get_backend(pg), "DDP logs the backend %s as %s"
           % (dist.get_backend(pg), logged))
    if variant == "fp16 hook":
        ddp.register_comm_hook(pg, default_hooks.fp16_compress_hook)
    if variant == "zero":
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.SGD,
                                      process_group=pg, lr=0.02, momentum=0.9)
    else:
        opt = torch.optim.SGD(ddp.parameters(), lr=0.02, momentum=0.9)
    mse = torch.nn.MSELoss()
    scale = 0.01 if variant == "fp16 hook" else 1.0

    def loss_fn(out, y):
        return mse(out, y) * scale

    for step in range(STEPS):
        opt.zero_grad()
        if variant == "no_sync":
            with ddp.no_sync():
                x, y = batch(step, 1)
                loss_fn(ddp(x), y).backward()
        x, y = batch(step)
        loss_fn(ddp(x), y).backward()
        opt.step()
    params = [p.detach().clone() for p in net.parameters()]
    buffers = [b.detach().clone() for b in net.buffers() if b.dtype.is_floating_point]
    return params, buffers


def compare(variant, gloo):
    start = [p.detach().clone() for p in model().parameters()]
    got, got_buf = train(None, variant)
    want, want_buf = train(gloo, variant)
    worst = max((a - b).abs().max().item() for a, b in zip(got + got_buf, want + want_buf))
    expect(worst <= TOL, "%s: parameters differ from gloo's by %.3g (tolerance %g)"
           % (variant, worst, TOL))
    moved = max((a - b).abs().max().item() for a, b in zip(got, start))
    expect(moved > 100 * TOL, "%s: the parameters moved by %.3g only" % (variant, moved))
    # every replica holds the same parameters, bit for bit (batch norm's running statistics
    # are each rank's own since the last broadcast)
    flat = torch.cat([t.reshape(-1) for t in got])
    ref = flat.clone()
    dist.broadcast(ref, 0, group=gloo)
    expect(torch.equal(flat, ref), "%s: replicas differ between ranks" % variant)
    if dist.get_rank() == 0:
        print("   %s: largest difference from gloo %.3g, parameters moved up to %.3g"
              % (variant, worst, moved), flush=True)


def body(checks, gloo):
    for variant in ("plain", "no_sync", "fp16 hook", "zero"):
        checks.run("DDP %d steps, %s" % (STEPS, variant), compare, variant, gloo)


if __name__ == "__main__":
    harness.main("torch ddp", body)
