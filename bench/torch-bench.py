"""The mesh backend of torch.distributed against gloo, through Python, in the same processes.

Under meshrun (or torchrun), each rank runs, for every op and size, mesh then gloo, --turns
times, and keeps each side's median time (the slowest rank's per turn):

    all_reduce, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, broadcast
    (fp32, sizes S as nccl-tests and mesh-bench count them: the whole buffer for the gathers,
    scatters and all-to-all), busbw = S / time x 2(n-1)/n for all_reduce, (n-1)/n for the
    gathers, scatters and all-to-all, 1 for broadcast

then the 8-byte all_reduce latency, and the step time of DDP on a model whose gradients
dwarf its compute (16 linear layers of 1024 x 1024, one sample per step, gradients as views of
the buckets), with the bound on its ratio where computation and transfer share each rank's
CPU (DDP on this rank alone, and one all_reduce of all gradients on each backend).

gloo (1.13) has no all_gather_into_tensor and no reduce-scatter: its all_gather into the
chunks of one tensor, and its all_reduce (the whole input, of which a rank keeps its block)
stand in for them.

    torch-bench.py [-o OPS] [-b MIN] [-e MAX] [-f F] [-n ITERS] [-w WARMUP] [--turns T]
                   [--lat-iters N] [--ddp-steps N] [--no-ddp] --csv FILE
    torch-bench.py --report DIR      (the table of bench/torch-bench.sh's CSV files)
    torch-bench.py --plan [-b MIN] [-e MAX] [-f F] [-n ITERS]   (sizes and their iterations)
"""

import argparse
import csv
import datetime
import glob
import os
import statistics
import sys
import time

OPS = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single",
       "broadcast"]
# mesh-bench's name for each op
MESH_BENCH_OP = {"all_reduce": "allreduce", "all_gather_into_tensor": "allgather",
                 "reduce_scatter_tensor": "reduce_scatter", "all_to_all_single": "alltoall",
                 "broadcast": "broadcast"}


def size_arg(text):
    text = text.strip().lower()
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:], 1)
    return int(float(text[:-1] if text[-1:] in "kmg" else text) * mult)


def iters_for(size, base):
    """Timed iterations at size bytes: base at 16 MiB, more below (up to 10 x base, so that
    small sizes are timed over more than a few scheduler ticks), fewer above, at least 2.
    mesh-bench runs the same number (bench/torch-bench.sh asks --plan)."""
    return max(2, min(10 * base, int(base * (16 << 20) / max(size, 1))))


def busbw_factor(op, n):
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op == "broadcast":
        return 1.0
    return (n - 1) / n


# ------------------------------------------------------------------ measuring (each rank)

def measure(args):
    env = os.environ
    if "RANK" not in env and "MESH_RANK" in env:
        host, port = env["MESH_ADDR"].rsplit(":", 1)
        env.update(RANK=env["MESH_RANK"], WORLD_SIZE=env["MESH_SIZE"], MASTER_ADDR=host,
                   MASTER_PORT=port, LOCAL_RANK=env.get("MESH_LOCAL_RANK", "0"))
        if not host.startswith("127.") and os.path.exists("/sys/class/net/eth0"):
            env.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    import torch
    import torch.distributed as dist

    import mesh_torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("mesh", timeout=datetime.timedelta(seconds=600))
    gloo = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=600))
    rank, n = dist.get_rank(), dist.get_world_size()
    nodes = len(set(_gather_strings(dist, gloo, env.get("MESH_NODE_ID", "node0"))))
    rows = []

    def slowest(seconds):
        t = torch.tensor([seconds], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
        return t.item()

    def timed(fn, group, iters, warmup):
        for _ in range(warmup):
            fn()
        dist.barrier(group=group)
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return slowest((time.perf_counter() - t0) / iters)

    def calls(op, size):
        """The mesh call and gloo's (or what stands in for it) of op on S = size bytes."""
        count = size // 4
        block = count // n
        if op == "all_reduce":
            x = torch.ones(count)
            return (lambda: dist.all_reduce(x)), (lambda: dist.all_reduce(x, group=gloo))
        if op == "broadcast":
            x = torch.ones(count)
            return (lambda: dist.broadcast(x, 0)), (lambda: dist.broadcast(x, 0, group=gloo))
        if op == "all_gather_into_tensor":
            out, inp = torch.empty(block * n), torch.ones(block)
            chunks = list(out.chunk(n))
            return ((lambda: dist.all_gather_into_tensor(out, inp)),
                    (lambda: dist.all_gather(chunks, inp, group=gloo)))
        if op == "reduce_scatter_tensor":
            out, inp = torch.empty(block), torch.ones(block * n)
            return ((lambda: dist.reduce_scatter_tensor(out, inp)),
                    (lambda: dist.all_reduce(inp, group=gloo)))
        if op == "all_to_all_single":
            out, inp = torch.empty(block * n), torch.ones(block * n)
            return ((lambda: dist.all_to_all_single(out, inp)),
                    (lambda: dist.all_to_all_single(out, inp, group=gloo)))
        raise ValueError(op)

    for op in args.ops:
        size = args.minbytes
        while size <= args.maxbytes:
            mesh_call, gloo_call = calls(op, size)
            iters = iters_for(size, args.iters)
            t = {"mesh": [], "gloo": []}
            for _ in range(args.turns):
                t["mesh"].append(timed(mesh_call, None, iters, args.warmup))
                t["gloo"].append(timed(gloo_call, gloo, iters, args.warmup))
            for backend in ("mesh", "gloo"):
                sec = statistics.median(t[backend])
                rows.append(dict(section="coll", op=op, bytes=size, backend=backend, nranks=n,
                                 nodes=nodes, time_us=sec * 1e6,
                                 busbw_GBps=size / sec / 1e9 * busbw_factor(op, n)))
            if rank == 0:
                print("%-24s %11d  mesh %10.1f us  gloo %10.1f us"
                      % (op, size, statistics.median(t["mesh"]) * 1e6,
                         statistics.median(t["gloo"]) * 1e6), flush=True)
            del mesh_call, gloo_call
            size *= args.factor

    # the 8-byte all_reduce
    x = torch.zeros(2)
    lat = {"mesh": [], "gloo": []}
    for _ in range(args.turns):
        lat["mesh"].append(timed(lambda: dist.all_reduce(x), None, args.lat_iters, 100))
        lat["gloo"].append(timed(lambda: dist.all_reduce(x, group=gloo), gloo, args.lat_iters,
                                 100))
    for backend in ("mesh", "gloo"):
        rows.append(dict(section="latency", op="all_reduce", bytes=8, backend=backend,
                         nranks=n, nodes=nodes, time_us=statistics.median(lat[backend]) * 1e6,
                         busbw_GBps=0))
    if rank == 0:
        print("all_reduce 8 B latency: mesh %.1f us, gloo %.1f us"
              % (rows[-2]["time_us"], rows[-1]["time_us"]), flush=True)

    if args.ddp_steps:
        step = ddp_steps(torch, dist, gloo, args, timed)
        for backend in ("mesh", "gloo", "alone", "ar_mesh", "ar_gloo"):
            rows.append(dict(section="ddp", op="ddp_step", bytes=step["bytes"], backend=backend,
                             nranks=n, nodes=nodes, time_us=step[backend] * 1e6, busbw_GBps=0))
        if rank == 0:
            print("DDP step (%d MB of gradients): mesh %.1f ms, gloo %.1f ms; alone %.1f ms, "
                  "all_reduce of the gradients mesh %.1f ms, gloo %.1f ms"
                  % (step["bytes"] >> 20, step["mesh"] * 1e3, step["gloo"] * 1e3,
                     step["alone"] * 1e3, step["ar_mesh"] * 1e3, step["ar_gloo"] * 1e3),
                  flush=True)

    if rank == 0 and args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    dist.destroy_process_group()


def _gather_strings(dist, group, s):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, s, group=group)
    return out


def ddp_steps(torch, dist, gloo, args, timed):
    """Median step time of DDP (forward, backward with its bucketed all-reduces, SGD) on mesh
    and on gloo, taking turns, with what bounds their ratio: the same DDP step on a group of
    this rank alone (all of DDP's own work, no transfer) and one all_reduce of all gradients
    on each backend. Where each rank has one CPU, as here, the transfer's copies through the
    kernel and the computation take turns on it, so mesh/gloo cannot fall below
    (alone + all_reduce on mesh) / (alone + all_reduce on gloo)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    def build(group):
        torch.manual_seed(0)
        layers = []
        for _ in range(16):
            layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
        net = torch.nn.Sequential(*layers)
        ddp = DDP(net, process_group=group, gradient_as_bucket_view=True)
        return ddp, torch.optim.SGD(ddp.parameters(), lr=1e-4)

    # a one-rank group per rank (every rank takes part in creating each)
    alone = [dist.new_group([r]) for r in range(dist.get_world_size())][dist.get_rank()]
    x, y = torch.randn(1, 1024), torch.randn(1, 1024)
    runs = {"mesh": build(None), "gloo": build(gloo), "alone": build(alone)}
    nbytes = sum(p.numel() * 4 for p in runs["mesh"][0].parameters())
    grads = torch.ones(nbytes // 4)

    def step(ddp, opt):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()

    t = {k: [] for k in ("mesh", "gloo", "alone", "ar_mesh", "ar_gloo")}
    for _ in range(args.turns):
        for backend, group in (("mesh", None), ("gloo", gloo), ("alone", None)):
            ddp, opt = runs[backend]
            t[backend].append(timed(lambda: step(ddp, opt), group, args.ddp_steps, 2))
        t["ar_mesh"].append(timed(lambda: dist.all_reduce(grads), None, 3, 1))
        t["ar_gloo"].append(timed(lambda: dist.all_reduce(grads, group=gloo), gloo, 3, 1))
    out = {k: statistics.median(v) for k, v in t.items()}
    out["bytes"] = nbytes
    return out


# ------------------------------------------------------------------ the report

def read_rows(pattern):
    rows = []
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            rows.extend(csv.DictReader(f))
    return rows


def median_by(rows, key, value):
    groups = {}
    for r in rows:
        groups.setdefault(key(r), []).append(float(r[value]))
    return {k: statistics.median(v) for k, v in groups.items()}


def report(folder):
    """Tables from the rounds of bench/torch-bench.sh: torch-PLACE-R.csv (this script) and
    mesh-bench-PLACE-R.csv, mesh-lat-PLACE-R.csv (mesh-bench); medians over the rounds."""
    status = 0
    for place, title in (("1node", "2 ranks, one node (shared memory)"),
                         ("2nodes", "2 ranks, 2 simulated nodes (TCP)")):
        torch_rows = read_rows(os.path.join(folder, "torch-%s-*.csv" % place))
        if not torch_rows:
            continue
        bench = read_rows(os.path.join(folder, "mesh-bench-%s-*.csv" % place))
        lat = read_rows(os.path.join(folder, "mesh-lat-%s-*.csv" % place))
        link = {}
        if place == "2nodes" and os.path.exists(os.path.join(folder, "iperf3.txt")):
            with open(os.path.join(folder, "iperf3.txt")) as f:
                gbits = [float(v) for v in f.read().split()]
            if len(gbits) == 2:
                # GB/s a TCP stream carries: one way (broadcast), else both ways at once
                link = {op: gbits[0 if op == "broadcast" else 1] / 8 for op in OPS}
                print("\niperf3 between the nodes (median of the rounds): one stream %.3f GB/s; "
                      "one each way at once %.3f GB/s per direction" % (gbits[0] / 8,
                                                                       gbits[1] / 8))
        tb = median_by([r for r in torch_rows if r["section"] == "coll"],
                       lambda r: (r["op"], int(r["bytes"]), r["backend"]), "busbw_GBps")
        mb = median_by([r for r in bench if r["in_place"] == "0"],
                       lambda r: (r["op"], int(r["bytes"])), "busbw_GBps")
        print("\n== %s: busbw in GB/s (medians of %d rounds)" % (title, len(
            glob.glob(os.path.join(folder, "torch-%s-*.csv" % place)))))
        print("%-24s %10s %9s %9s %9s %11s %9s %s %s" % (
            "op", "size", "mesh", "gloo", "mesh/gloo", "mesh-bench", "mesh/mb",
            "iperf3/gloo " if link else "", "targets (>=1.5, >=0.8 from 1 MiB)"))
        for op in OPS:
            sizes = sorted({b for (o, b, _) in tb if o == op})
            for size in sizes:
                m, g = tb.get((op, size, "mesh")), tb.get((op, size, "gloo"))
                ref = mb.get((MESH_BENCH_OP[op], size))
                r_g = m / g if m and g else float("nan")
                r_b = m / ref if m and ref else float("nan")
                verdict = ""
                if size >= (1 << 20):
                    miss = []
                    if not r_g >= 1.5:
                        miss.append("gloo")
                    if not r_b >= 0.8:
                        miss.append("mesh-bench")
                    verdict = "MISSED: " + ",".join(miss) if miss else "met"
                    status = status or (1 if miss else 0)
                r_l = "%11.2f " % (link[op] / g) if link and g else ""
                print("%-24s %10d %9.3f %9.3f %9.2f %11s %9s %s %s" % (
                    op, size, m or 0, g or 0, r_g, "%.3f" % ref if ref else "-",
                    "%.2f" % r_b if ref else "-", r_l, verdict))
        lt = median_by([r for r in torch_rows if r["section"] == "latency"],
                       lambda r: r["backend"], "time_us")
        lb = median_by([r for r in lat if r["in_place"] == "1"], lambda r: r["op"], "time_us")
        if lt:
            ref = lb.get("allreduce")
            bound = 2 * ref + 10 if ref is not None else float("nan")
            print("all_reduce of 8 B: mesh %.1f us, gloo %.1f us, mesh-bench %s us; target "
                  "<= 2 x mesh-bench + 10 = %.1f us: %s"
                  % (lt.get("mesh", 0), lt.get("gloo", 0),
                     "%.1f" % ref if ref is not None else "-", bound,
                     "met" if lt.get("mesh", 1e9) <= bound else "MISSED"))
        dd = median_by([r for r in torch_rows if r["section"] == "ddp"],
                       lambda r: r["backend"], "time_us")
        if dd:
            ratio = dd["mesh"] / dd["gloo"]
            print("DDP step: mesh %.1f ms, gloo %.1f ms, mesh/gloo %.2f; target <= 0.7: %s"
                  % (dd["mesh"] / 1e3, dd["gloo"] / 1e3, ratio,
                     "met" if ratio <= 0.7 else "MISSED"))
            if "alone" in dd:
                # one CPU per rank: computation and transfer take turns on it
                lo = (dd["alone"] + dd["ar_mesh"]) / (dd["alone"] + dd["ar_gloo"])
                print("  bound without overlap: DDP alone %.1f ms, all_reduce of the gradients "
                      "mesh %.1f ms, gloo %.1f ms: mesh/gloo >= %.2f"
                      % (dd["alone"] / 1e3, dd["ar_mesh"] / 1e3, dd["ar_gloo"] / 1e3, lo))
    return status


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", dest="ops", default=",".join(OPS))
    p.add_argument("-b", dest="minbytes", type=size_arg, default=size_arg("64k"))
    p.add_argument("-e", dest="maxbytes", type=size_arg, default=size_arg("256m"))
    p.add_argument("-f", dest="factor", type=int, default=4)
    p.add_argument("-n", dest="iters", type=int, default=20)
    p.add_argument("-w", dest="warmup", type=int, default=3)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--lat-iters", type=int, default=2000)
    p.add_argument("--ddp-steps", type=int, default=10)
    p.add_argument("--no-ddp", action="store_true")
    p.add_argument("--csv")
    p.add_argument("--report")
    p.add_argument("--plan", action="store_true",
                   help="print each size and its timed iterations, one line each")
    args = p.parse_args()
    if args.plan:
        size = args.minbytes
        while size <= args.maxbytes:
            print(size, iters_for(size, args.iters))
            size *= args.factor
        return 0
    if args.report:
        return report(args.report)
    args.ops = [o for o in args.ops.split(",") if o]
    for o in args.ops:
        if o not in OPS:
            p.error("unknown op %s (one of %s)" % (o, ", ".join(OPS)))
    if args.no_ddp:
        args.ddp_steps = 0
    measure(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
