"""The mesh backend of torch.distributed against gloo, through Python, in the same processes.

Under meshrun (or torchrun), each rank runs, for every op and size, mesh through torch, then
mesh's C API on the same buffers (ctypes, a communicator of its own), then gloo, --turns
times, and records each turn (the slowest rank's time):

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
# the torch calls that hand mesh one buffer for input and output (in place), compared with
# mesh-bench's in-place rows; the others with its out-of-place rows
IN_PLACE = {"all_reduce", "broadcast"}


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

class CApi:
    """mesh's C API called through ctypes in this process, on a communicator of its own, with
    the library the extension loaded: the same op on the same buffers as the torch call, turn
    about with it, so that their ratio is what the binding costs, free of the drift between
    one process and the next. ctypes adds about a microsecond to each call."""

    FP32, SUM = 8, 0  # mesh_dtype_t and mesh_op_t values of mesh.h

    def __init__(self, dist, gloo, rank, n):
        import ctypes
        lib = self.lib = ctypes.CDLL("libmesh.so.0")  # the one mesh_torch._C loaded
        P, S, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        for name, args in (("mesh_allreduce", (P, P, P, S, I, I, P, P)),
                           ("mesh_broadcast", (P, P, P, S, I, I, P, P)),
                           ("mesh_reduce_scatter", (P, P, P, S, I, I, P, P)),
                           ("mesh_allgather", (P, P, P, S, I, P, P)),
                           ("mesh_alltoall", (P, P, P, S, I, P, P)),
                           ("mesh_comm_init_rank", (P, I, P, I)),
                           ("mesh_comm_destroy", (P,)), ("mesh_unique_id", (P,)),
                           ("mesh_comm_last_error", (P,))):
            getattr(lib, name).argtypes = args
        lib.mesh_comm_last_error.restype = ctypes.c_char_p
        uid = ctypes.create_string_buffer(128)  # mesh_unique_id_t
        if rank == 0:
            self.check(lib.mesh_unique_id(uid), "mesh_unique_id")
        raw = [uid.raw]
        dist.broadcast_object_list(raw, 0, group=gloo)
        uid = ctypes.create_string_buffer(raw[0], 128)
        self.comm = ctypes.c_void_p()
        self.check(lib.mesh_comm_init_rank(ctypes.byref(self.comm), n, uid, rank),
                   "mesh_comm_init_rank")

    def check(self, status, what):
        if status != 0:
            raise RuntimeError("%s: status %d: %s" % (
                what, status, self.lib.mesh_comm_last_error(None).decode(errors="replace")))

    def call(self, op, inp, out, block):
        """The C call of op: in place for all_reduce and broadcast (as the backend calls it),
        block elements per rank."""
        lib, c, i, o, fp32 = self.lib, self.comm, inp.data_ptr(), out.data_ptr(), self.FP32
        fn = {"all_reduce": lambda: lib.mesh_allreduce(c, i, i, inp.numel(), fp32, self.SUM,
                                                       None, None),
              "broadcast": lambda: lib.mesh_broadcast(c, i, i, inp.numel(), fp32, 0, None, None),
              "all_gather_into_tensor": lambda: lib.mesh_allgather(c, i, o, block, fp32, None,
                                                                   None),
              "reduce_scatter_tensor": lambda: lib.mesh_reduce_scatter(c, i, o, block, fp32,
                                                                       self.SUM, None, None),
              "all_to_all_single": lambda: lib.mesh_alltoall(c, i, o, block, fp32, None,
                                                             None)}[op]

        def run():
            st = fn()
            if st != 0:
                self.check(st, op)
        return run

    def close(self):
        self.lib.mesh_comm_destroy(self.comm)


def measure(args):
    env = os.environ
    if "RANK" not in env and "MESH_RANK" in env:
        host, port = env["MESH_ADDR"].rsplit(":", 1)
        env.update(RANK=env["MESH_RANK"], WORLD_SIZE=env["MESH_SIZE"], MASTER_ADDR=host,
                   MASTER_PORT=port, LOCAL_RANK=env.get("MESH_LOCAL_RANK", "0"))
        if not host.startswith("127.") and os.path.exists("/sys/class/net/eth0"):
            env.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    # one thread per rank, as bench/torch-bench.sh sets it: OpenMP's pool starts with torch,
    # before set_num_threads, and where the ranks fill the CPUs its extra threads only slow
    # DDP's own work
    env.setdefault("OMP_NUM_THREADS", "1")
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
        """The calls of op on S = size bytes: mesh's through torch, gloo's (or what stands in
        for it), and mesh's C API on the same buffers."""
        count = size // 4
        block = count // n
        if op == "all_reduce":
            x = torch.ones(count)
            return {"mesh": lambda: dist.all_reduce(x),
                    "gloo": lambda: dist.all_reduce(x, group=gloo),
                    "mesh_c": capi.call(op, x, x, block)}
        if op == "broadcast":
            x = torch.ones(count)
            return {"mesh": lambda: dist.broadcast(x, 0),
                    "gloo": lambda: dist.broadcast(x, 0, group=gloo),
                    "mesh_c": capi.call(op, x, x, block)}
        if op == "all_gather_into_tensor":
            out, inp = torch.empty(block * n), torch.ones(block)
            chunks = list(out.chunk(n))
            return {"mesh": lambda: dist.all_gather_into_tensor(out, inp),
                    "gloo": lambda: dist.all_gather(chunks, inp, group=gloo),
                    "mesh_c": capi.call(op, inp, out, block)}
        if op == "reduce_scatter_tensor":
            out, inp = torch.empty(block), torch.ones(block * n)
            return {"mesh": lambda: dist.reduce_scatter_tensor(out, inp),
                    "gloo": lambda: dist.all_reduce(inp, group=gloo),
                    "mesh_c": capi.call(op, inp, out, block)}
        if op == "all_to_all_single":
            out, inp = torch.empty(block * n), torch.ones(block * n)
            return {"mesh": lambda: dist.all_to_all_single(out, inp),
                    "gloo": lambda: dist.all_to_all_single(out, inp, group=gloo),
                    "mesh_c": capi.call(op, inp, out, block)}
        raise ValueError(op)

    capi = CApi(dist, gloo, rank, n)
    for op in args.ops:
        size = args.minbytes
        while size <= args.maxbytes:
            fns = calls(op, size)
            iters = iters_for(size, args.iters)
            t = {k: [] for k in fns}
            for turn in range(args.turns):
                for backend in ("mesh", "mesh_c", "gloo"):
                    sec = timed(fns[backend], gloo if backend == "gloo" else None, iters,
                                args.warmup)
                    t[backend].append(sec)
                    rows.append(dict(section="coll", op=op, bytes=size, backend=backend,
                                     nranks=n, nodes=nodes, turn=turn, time_us=sec * 1e6,
                                     busbw_GBps=size / sec / 1e9 * busbw_factor(op, n)))
            if rank == 0:
                print("%-24s %11d  mesh %10.1f us  mesh C API %10.1f us  gloo %10.1f us"
                      % (op, size, statistics.median(t["mesh"]) * 1e6,
                         statistics.median(t["mesh_c"]) * 1e6,
                         statistics.median(t["gloo"]) * 1e6), flush=True)
            del fns
            size *= args.factor
    capi.close()

    # the 8-byte all_reduce
    x = torch.zeros(2)
    lat = {"mesh": [], "gloo": []}
    for _ in range(args.turns):
        lat["mesh"].append(timed(lambda: dist.all_reduce(x), None, args.lat_iters, 100))
        lat["gloo"].append(timed(lambda: dist.all_reduce(x, group=gloo), gloo, args.lat_iters,
                                 100))
    for backend in ("mesh", "gloo"):
        rows.append(dict(section="latency", op="all_reduce", bytes=8, backend=backend,
                         nranks=n, nodes=nodes, turn="",
                         time_us=statistics.median(lat[backend]) * 1e6, busbw_GBps=0))
    if rank == 0:
        print("all_reduce 8 B latency: mesh %.1f us, gloo %.1f us"
              % (rows[-2]["time_us"], rows[-1]["time_us"]), flush=True)

    if args.ddp_steps:
        turns, nbytes = ddp_steps(torch, dist, gloo, args, timed)
        for backend, times in turns.items():
            for turn, sec in enumerate(times):
                rows.append(dict(section="ddp", op="ddp_step", bytes=nbytes, backend=backend,
                                 nranks=n, nodes=nodes, turn=turn, time_us=sec * 1e6,
                                 busbw_GBps=0))
        if rank == 0:
            med = {k: statistics.median(v) * 1e3 for k, v in turns.items()}
            print("DDP step (%d MB of gradients): mesh %.1f ms, gloo %.1f ms; alone %.1f ms, "
                  "all_reduce of the gradients mesh %.1f ms, gloo %.1f ms"
                  % (nbytes >> 20, med["mesh"], med["gloo"], med["alone"], med["ar_mesh"],
                     med["ar_gloo"]), flush=True)

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
    return t, nbytes


# ------------------------------------------------------------------ the report

def read_rows(pattern):
    rows = []
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            rows.extend(dict(r, source=path) for r in csv.DictReader(f))
    return rows


def by_turn(rows, value):
    """{(op, size, file, turn): {backend: value}}: what ran one right after the other in the
    same processes."""
    turns = {}
    for r in rows:
        key = (r["op"], int(r["bytes"]), r["source"], r.get("turn"))
        turns.setdefault(key, {})[r["backend"]] = float(r[value])
    return turns


def paired(rows, num, den):
    """Median over the turns of every round of busbw(num) / busbw(den), by (op, size)."""
    out = {}
    for (op, size, _, _), t in by_turn(rows, "busbw_GBps").items():
        if t.get(num) and t.get(den):
            out.setdefault((op, size), []).append(t[num] / t[den])
    return {k: statistics.median(v) for k, v in out.items()}


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
        coll = [r for r in torch_rows if r["section"] == "coll"]
        tb = median_by(coll, lambda r: (r["op"], int(r["bytes"]), r["backend"]), "busbw_GBps")
        vs_gloo, vs_c = paired(coll, "mesh", "gloo"), paired(coll, "mesh", "mesh_c")
        mb = median_by(bench, lambda r: (r["op"], int(r["bytes"]), r["in_place"] == "1"),
                       "busbw_GBps")
        print("\n== %s: busbw in GB/s (medians of %d rounds)" % (title, len(
            glob.glob(os.path.join(folder, "torch-%s-*.csv" % place)))))
        print("%-24s %10s %7s %7s %9s %7s %7s %10s %7s %s %s" % (
            "op", "size", "mesh", "gloo", "mesh/gloo", "C API", "mesh/C", "mesh-bench",
            "mesh/mb", "iperf3/gloo " if link else "",
            "targets from 1 MiB: mesh/gloo >= 1.5, mesh/C >= 0.8"))
        for op in OPS:
            sizes = sorted({b for (o, b, _) in tb if o == op})
            for size in sizes:
                m, g, c = (tb.get((op, size, k)) for k in ("mesh", "gloo", "mesh_c"))
                ref = mb.get((MESH_BENCH_OP[op], size, op in IN_PLACE))
                r_g, r_c = vs_gloo.get((op, size), float("nan")), vs_c.get((op, size))
                r_b = m / ref if m and ref else float("nan")
                verdict = ""
                if size >= (1 << 20):
                    miss = []
                    if not r_g >= 1.5:
                        miss.append("gloo")
                    if not (r_c if r_c is not None else r_b) >= 0.8:
                        miss.append("binding")
                    verdict = "MISSED: " + ",".join(miss) if miss else "met"
                    status = status or (1 if miss else 0)
                r_l = "%11.2f " % (link[op] / g) if link and g else ""
                print("%-24s %10d %7.3f %7.3f %9.2f %7s %7s %10s %7s %s %s" % (
                    op, size, m or 0, g or 0, r_g, "%.3f" % c if c else "-",
                    "%.2f" % r_c if r_c is not None else "-", "%.3f" % ref if ref else "-",
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
        ddp = [r for r in torch_rows if r["section"] == "ddp"]
        dd = median_by(ddp, lambda r: r["backend"], "time_us")
        if dd:
            turns = by_turn(ddp, "time_us")
            # each turn's ratio, and its bound (one CPU per rank: computation and transfer
            # take turns on it)
            ratio = statistics.median(t["mesh"] / t["gloo"] for t in turns.values())
            print("DDP step: mesh %.1f ms, gloo %.1f ms, mesh/gloo %.2f (median of the turns' "
                  "ratios); target <= 0.7: %s" % (dd["mesh"] / 1e3, dd["gloo"] / 1e3, ratio,
                                                  "met" if ratio <= 0.7 else "MISSED"))
            if "alone" in dd:
                lo = statistics.median((t["alone"] + t["ar_mesh"]) / (t["alone"] + t["ar_gloo"])
                                       for t in turns.values())
                print("  bound without overlap: DDP alone %.1f ms, all_reduce of the gradients "
                      "mesh %.1f ms, gloo %.1f ms: mesh/gloo >= %.2f (median of the turns')"
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
