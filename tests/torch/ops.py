"""Every operation of the mesh backend x element type x size (0, 1, odd, odd and strided, 16 MiB)
against gloo's result in the same run, on the default group (run under meshrun or torchrun).

gloo is the reference wherever it serves the case; where it cannot (bool and bfloat16 tensors,
ReduceOp.AVG, empty all-gathers, reduce_scatter, all_to_all of lists, all_gather_into_tensor),
the reference is built from gloo operations that it can do: wider element types, byte views,
an all-reduce then a slice. Values are small integers so that sums and products are exact in
every type: results must be equal, except averages (rounded once, within a tolerance).

    ops.py [--big BYTES]   (default 16 MiB; 0 leaves the large size out)
"""

import sys

import harness
from harness import dist, expect, expect_equal, expect_raises, torch

R = dist.ReduceOp
DTYPES = [torch.uint8, torch.int8, torch.int32, torch.int64, torch.bool, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
OPS = [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG]
AVG_TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-6, torch.float64: 1e-12}

rank = size = 0
gloo = None


def name_of(dtype):
    return str(dtype).replace("torch.", "")


def op_name(op):
    for n in ("SUM", "PRODUCT", "MIN", "MAX", "AVG"):
        if op == getattr(R, n):
            return n.lower()
    return str(op)


class Arena:
    """Memory for the tensors of one check, taken from one block that lives for the run: fresh
    allocations of large tensors cost a page fault per page, which would make the run's time."""

    def __init__(self):
        self.block = torch.zeros(0, dtype=torch.uint8)
        self.used = 0

    def reset(self):
        self.used = 0

    def take(self, shape, dtype):
        n = 1
        for d in shape:
            n *= d
        nbytes = n * torch.empty(0, dtype=dtype).element_size()
        if n == 0 or nbytes < (1 << 20):
            return torch.empty(shape, dtype=dtype)
        if self.used + nbytes > self.block.numel():
            # grows between checks only: tensors of the running check keep the old block
            self.block = torch.empty(max(2 * self.block.numel(), self.used + nbytes),
                                     dtype=torch.uint8)
            self.used = 0
        t = self.block[self.used:self.used + nbytes].view(dtype).reshape(shape)
        self.used += (nbytes + 63) // 64 * 64
        return t


arena = Arena()


def pattern(who, n, dtype, salt=0, strided=False, cols=1):
    """n rows (of cols elements) of small integers that depend on who and salt, cheaply for
    large n: a period of 112 elements repeated."""
    shape = (n, cols) if cols > 1 else (n,)
    v = (torch.arange(112, dtype=torch.int64) * (2 * who + 3) + 5 * salt + who) % 7 - 3
    if dtype == torch.bool:
        v = v > 0
    elif dtype == torch.uint8:
        v = v + 3
    v = v.to(dtype)
    out = zeros(n, dtype, strided, cols)
    flat = out.view(-1) if not strided else out
    total = n * cols
    if not strided:
        full, rest = divmod(total, 112)
        if full:
            flat[:full * 112].view(full, 112).copy_(v.expand(full, 112))
        flat[full * 112:].copy_(v[:rest])
        return out
    reps = (total + 111) // 112
    out.copy_(v.repeat(reps)[:total].reshape(shape))
    return out


def zeros(n, dtype, strided=False, cols=1):
    shape = (n, cols) if cols > 1 else (n,)
    if not strided:
        return arena.take(shape, dtype).zero_()
    return arena.take((2 * n,) + shape[1:], dtype).zero_()[::2]


def as_bytes(t):
    """The same memory as uint8, so that gloo moves any element type."""
    t = t.contiguous()
    return t.view(torch.uint8) if t.numel() else torch.zeros(0, dtype=torch.uint8)


def from_bytes(b, like):
    if like.numel() == 0:
        return torch.zeros(like.shape, dtype=like.dtype)
    return b.view(like.dtype).reshape(like.shape)


def gloo_reduce_all(t, op):
    """gloo's all-reduce of t, in t's element type: bool through int32 (sum and product of
    truths are any and all), bfloat16 through float32, averages as float64 sums."""
    dtype = t.dtype
    if op == R.AVG:
        w = (t.double() if dtype == torch.float64 else t.float()).contiguous()
        dist.all_reduce(w, op=R.SUM, group=gloo)
        return (w / size).to(dtype)
    if dtype == torch.bool:
        w = t.int().contiguous()
        dist.all_reduce(w, op=op, group=gloo)
        return w != 0
    if dtype == torch.bfloat16:
        w = t.float().contiguous()
        dist.all_reduce(w, op=op, group=gloo)
        return w.to(dtype)
    w = t.clone().contiguous()
    dist.all_reduce(w, op=op, group=gloo)
    return w


def reducible(dtype, op):
    return op != R.AVG or dtype.is_floating_point


def t_all_reduce(dtype, n, strided, op):
    x = pattern(rank, n, dtype, 1, strided)
    if not reducible(dtype, op):
        expect_raises(lambda: dist.all_reduce(x, op=op), ["all_reduce", "AVG", "not supported"],
                      "AVG on integers")
        return
    want = gloo_reduce_all(pattern(rank, n, dtype, 1), op)
    dist.all_reduce(x, op=op)
    expect_equal(x.contiguous(), want, "all_reduce", AVG_TOL.get(dtype, 0) if op == R.AVG else 0)


def t_reduce(dtype, n, strided, op):
    root = 1 % size
    x = pattern(rank, n, dtype, 2, strided)
    if not reducible(dtype, op):
        expect_raises(lambda: dist.reduce(x, root, op=op), ["reduce", "AVG"], "AVG on integers")
        return
    want = gloo_reduce_all(pattern(rank, n, dtype, 2), op)
    dist.reduce(x, root, op=op)
    if rank == root:
        expect_equal(x.contiguous(), want, "reduce at the root",
                     AVG_TOL.get(dtype, 0) if op == R.AVG else 0)
    else:
        expect_equal(x.contiguous(), pattern(rank, n, dtype, 2), "reduce leaves others' input")


def t_broadcast(dtype, n, strided):
    root = size - 1
    x = pattern(rank, n, dtype, 3, strided)
    ref = as_bytes(pattern(rank, n, dtype, 3))
    if ref.numel():
        dist.broadcast(ref, root, group=gloo)
    dist.broadcast(x, root)
    expect_equal(x.contiguous(), from_bytes(ref, x), "broadcast")


def gloo_all_gather(t):
    """gloo's all_gather of t's bytes (gloo fails on empty tensors: those are built here)."""
    b = as_bytes(t)
    if b.numel() == 0:
        return [torch.zeros(t.shape, dtype=t.dtype) for _ in range(size)]
    out = [torch.empty_like(b) for _ in range(size)]
    dist.all_gather(out, b, group=gloo)
    return [from_bytes(o, t) for o in out]


def t_all_gather(dtype, n, strided):
    x = pattern(rank, n, dtype, 4, strided)
    out = [zeros(n, dtype, strided) for _ in range(size)]
    want = gloo_all_gather(pattern(rank, n, dtype, 4))
    dist.all_gather(out, x)
    for r in range(size):
        expect_equal(out[r].contiguous(), want[r], "all_gather block %d" % r)


def t_all_gather_into_tensor(dtype, n, strided):
    x = pattern(rank, n, dtype, 5, strided)
    out = zeros(size * n, dtype, strided)
    want = torch.cat(gloo_all_gather(pattern(rank, n, dtype, 5)))
    dist.all_gather_into_tensor(out, x)
    expect_equal(out.contiguous(), want, "all_gather_into_tensor")


def t_all_gather_coalesced(dtype, n, strided):
    m = n // 2 + 1
    xs = [pattern(rank, n, dtype, 6, strided), pattern(rank, m, dtype, 7)]
    out = [[zeros(n, dtype, strided), zeros(m, dtype)] for _ in range(size)]
    want0 = gloo_all_gather(pattern(rank, n, dtype, 6))
    want1 = gloo_all_gather(pattern(rank, m, dtype, 7))
    dist.all_gather_coalesced(out, xs)
    for r in range(size):
        expect_equal(out[r][0].contiguous(), want0[r], "all_gather_coalesced %d/0" % r)
        expect_equal(out[r][1].contiguous(), want1[r], "all_gather_coalesced %d/1" % r)


def t_gather(dtype, n, strided):
    root = size - 1
    x = pattern(rank, n, dtype, 8, strided)
    out = [zeros(n, dtype, strided) for _ in range(size)] if rank == root else None
    want = gloo_all_gather(pattern(rank, n, dtype, 8))
    dist.gather(x, out, dst=root)
    if rank == root:
        for r in range(size):
            expect_equal(out[r].contiguous(), want[r], "gather block %d" % r)


def t_scatter(dtype, n, strided):
    root = 0
    ins = [pattern(r, n, dtype, 9, strided) for r in range(size)] if rank == root else None
    out = zeros(n, dtype, strided)
    ref = as_bytes(zeros(n, dtype))
    if ref.numel():
        refs = [as_bytes(pattern(r, n, dtype, 9)) for r in range(size)] if rank == root else None
        dist.scatter(ref, refs, src=root, group=gloo)
    dist.scatter(out, ins, src=root)
    expect_equal(out.contiguous(), from_bytes(ref, out), "scatter")


def t_reduce_scatter(dtype, n, strided, op):
    ins = [pattern(rank, n, dtype, 10 + j, strided) for j in range(size)]
    out = zeros(n, dtype, strided)
    if not reducible(dtype, op):
        expect_raises(lambda: dist.reduce_scatter(out, ins, op=op), ["reduce_scatter", "AVG"],
                      "AVG on integers")
        return
    want = gloo_reduce_all(torch.cat([pattern(rank, n, dtype, 10 + j) for j in range(size)]), op)
    dist.reduce_scatter(out, ins, op=op)
    expect_equal(out.contiguous(), want[rank * n:(rank + 1) * n], "reduce_scatter",
                 AVG_TOL.get(dtype, 0) if op == R.AVG else 0)


def t_reduce_scatter_tensor(dtype, n, strided, op):
    x = pattern(rank, size * n, dtype, 11, strided)
    out = zeros(n, dtype, strided)
    if not reducible(dtype, op):
        expect_raises(lambda: dist.reduce_scatter_tensor(out, x, op=op),
                      ["reduce_scatter_tensor", "AVG"], "AVG on integers")
        return
    want = gloo_reduce_all(pattern(rank, size * n, dtype, 11), op)
    dist.reduce_scatter_tensor(out, x, op=op)
    expect_equal(out.contiguous(), want[rank * n:(rank + 1) * n], "reduce_scatter_tensor",
                 AVG_TOL.get(dtype, 0) if op == R.AVG else 0)


def gloo_all_to_all(x, out_like, out_splits, in_splits):
    """gloo's all_to_all_single on byte views: one row of bytes per row of x."""
    def rows(t):
        w = t.element_size() * (t.shape[1] if t.dim() > 1 else 1)
        if t.numel() == 0:
            return torch.zeros((t.shape[0], w), dtype=torch.uint8)
        return t.contiguous().view(torch.uint8).reshape(t.shape[0], w)
    bx, bo = rows(x), rows(out_like)
    dist.all_to_all_single(bo, bx, out_splits, in_splits, group=gloo)
    return from_bytes(bo, out_like)


def t_all_to_all_single(dtype, n, strided):
    x = pattern(rank, size * n, dtype, 12, strided)
    out = zeros(size * n, dtype, strided)
    want = gloo_all_to_all(pattern(rank, size * n, dtype, 12), out, None, None)
    dist.all_to_all_single(out, x)
    expect_equal(out.contiguous(), want, "all_to_all_single")


def t_all_to_all_uneven(dtype, n, strided):
    """Rows of 2 elements; rank r sends base + (r + 2j) % 3 rows to rank j."""
    base = n // (2 * size)
    ins = [base + (rank + 2 * j) % 3 for j in range(size)]
    outs = [base + (j + 2 * rank) % 3 for j in range(size)]
    x = pattern(rank, sum(ins), dtype, 13, strided, cols=2)
    out = zeros(sum(outs), dtype, strided, cols=2)
    want = gloo_all_to_all(pattern(rank, sum(ins), dtype, 13, cols=2), out, outs, ins)
    dist.all_to_all_single(out, x, outs, ins)
    expect_equal(out.contiguous(), want, "all_to_all_single with uneven splits")


def t_all_to_all(dtype, n, strided):
    """Lists: rank r sends base + (r + j) % 3 elements to rank j."""
    base = n // size
    sends = [base + (rank + j) % 3 for j in range(size)]
    recvs = [base + (j + rank) % 3 for j in range(size)]
    ins = [pattern(rank, sends[j], dtype, 14 + j, strided) for j in range(size)]
    outs = [zeros(recvs[j], dtype, strided) for j in range(size)]
    flat = torch.cat([pattern(rank, sends[j], dtype, 14 + j) for j in range(size)])
    want = gloo_all_to_all(flat, zeros(sum(recvs), dtype), recvs, sends)
    dist.all_to_all(outs, ins)
    got = torch.cat([o.contiguous() for o in outs])
    expect_equal(got, want, "all_to_all")


def ring():
    return (rank + 1) % size, (rank - 1) % size


def gloo_ring(x):
    """What the rank before this one sends it, moved by gloo."""
    dst, src = ring()
    b = as_bytes(x)
    got = torch.zeros_like(b)
    if b.numel():
        reqs = [dist.isend(b, dst, group=gloo), dist.irecv(got, src, group=gloo)]
        for q in reqs:
            q.wait()
    return from_bytes(got, x)


def t_send_recv(dtype, n, strided):
    dst, src = ring()
    x = pattern(rank, n, dtype, 15, strided)
    got = zeros(n, dtype, strided)
    want = gloo_ring(pattern(rank, n, dtype, 15))
    if rank % 2 == 0:
        dist.send(x, dst)
        dist.recv(got, src)
    else:
        dist.recv(got, src)
        dist.send(x, dst)
    expect_equal(got.contiguous(), want, "send/recv")


def t_isend_irecv(dtype, n, strided):
    dst, src = ring()
    x = pattern(rank, n, dtype, 16, strided)
    got = zeros(n, dtype, strided)
    want = gloo_ring(pattern(rank, n, dtype, 16))
    reqs = [dist.irecv(got, src), dist.isend(x, dst)]
    for q in reqs:
        q.wait()
    expect_equal(got.contiguous(), want, "isend/irecv")


def t_batch_isend_irecv(dtype, n, strided):
    dst, src = ring()
    x = pattern(rank, n, dtype, 17, strided)
    got = zeros(n, dtype, strided)
    want = gloo_ring(pattern(rank, n, dtype, 17))
    ops = [dist.P2POp(dist.isend, x, dst), dist.P2POp(dist.irecv, got, src)]
    for q in dist.batch_isend_irecv(ops):
        q.wait()
    expect_equal(got.contiguous(), want, "batch_isend_irecv")


def t_all_reduce_coalesced(dtype, n, strided, op):
    xs = [pattern(rank, n, dtype, 18, strided), pattern(rank, n // 2 + 1, dtype, 19)]
    if not reducible(dtype, op):
        expect_raises(lambda: dist.all_reduce_coalesced(xs, op=op), ["AVG"], "AVG on integers")
        return
    wants = [gloo_reduce_all(pattern(rank, n, dtype, 18), op),
             gloo_reduce_all(pattern(rank, n // 2 + 1, dtype, 19), op)]
    dist.all_reduce_coalesced(xs, op=op)
    tol = AVG_TOL.get(dtype, 0) if op == R.AVG else 0
    expect_equal(xs[0].contiguous(), wants[0], "all_reduce_coalesced 0", tol)
    expect_equal(xs[1].contiguous(), wants[1], "all_reduce_coalesced 1", tol)


def t_unsupported():
    """Combinations mesh cannot do raise a RuntimeError that says what is not supported."""
    i32 = torch.ones(4, dtype=torch.int32)
    expect_raises(lambda: dist.all_reduce(i32, op=R.BAND), ["all_reduce", "BAND", "not supported"],
                  "BAND on int32")
    expect_raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=R.BXOR),
                  ["BXOR", "not supported"], "BXOR on bool")
    expect_raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)),
                  ["all_reduce", "Short", "not supported"], "int16 reductions")
    try:
        expect_raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.complex64), op=R.MAX),
                      ["complex"], "MAX on complex")
    except ValueError as e:  # torch 2.x refuses it itself, before any backend sees it
        expect("complex" in str(e), "MAX on complex: %s" % e)
    if size > 1:
        expect_raises(lambda: dist.recv(torch.zeros(2)), ["any source", "not supported"],
                      "recv from any source")
    # bitwise operators on bool are any / all
    t = torch.tensor([rank == 0, True, False])
    dist.all_reduce(t, op=R.BOR)
    expect_equal(t, torch.tensor([True, True, False]), "BOR on bool")
    t = torch.tensor([rank == 0, True, False])
    dist.all_reduce(t, op=R.BAND)
    expect_equal(t, torch.tensor([size == 1, True, False]), "BAND on bool")


def t_other_types():
    """Types mesh moves as bytes (int16, complex) and complex sums, against patterns."""
    x = pattern(rank, 33, torch.int16, 20)
    dist.broadcast(x, 0)
    expect_equal(x, pattern(0, 33, torch.int16, 20), "broadcast int16")
    c = torch.complex(pattern(rank, 9, torch.float32, 21), pattern(rank, 9, torch.float32, 22))
    want = sum(torch.complex(pattern(r, 9, torch.float32, 21), pattern(r, 9, torch.float32, 22))
               for r in range(size))
    dist.all_reduce(c)
    expect_equal(c, want, "all_reduce complex64")


def t_uneven_all_gather():
    """all_gather with a different size on each rank (mesh's all-gatherv)."""
    x = pattern(rank, rank + 2, torch.float32, 23)
    out = [torch.zeros(r + 2) for r in range(size)]
    dist.all_gather(out, x)
    for r in range(size):
        expect_equal(out[r], pattern(r, r + 2, torch.float32, 23), "uneven all_gather %d" % r)


def body(checks, g):
    global rank, size, gloo
    run = checks.run

    def check(*args):
        arena.reset()
        run(*args)

    checks.run = check
    rank, size, gloo = dist.get_rank(), dist.get_world_size(), g
    big = 16 << 20
    if "--big" in sys.argv:
        big = int(sys.argv[sys.argv.index("--big") + 1])
    reduce_ops = [("all_reduce", t_all_reduce), ("reduce", t_reduce),
                  ("reduce_scatter_tensor", t_reduce_scatter_tensor)]
    moves = [("broadcast", t_broadcast), ("all_gather", t_all_gather),
             ("all_gather_into_tensor", t_all_gather_into_tensor),
             ("all_gather_coalesced", t_all_gather_coalesced), ("gather", t_gather),
             ("scatter", t_scatter), ("all_to_all_single", t_all_to_all_single),
             ("all_to_all_single uneven", t_all_to_all_uneven), ("all_to_all", t_all_to_all)]
    if size > 1:
        moves += [("send/recv", t_send_recv), ("isend/irecv", t_isend_irecv),
                  ("batch_isend_irecv", t_batch_isend_irecv)]
    for dtype in DTYPES:
        esize = torch.empty(0, dtype=dtype).element_size()
        sizes = [("0", 0, False), ("1", 1, False), ("1001", 1001, False),
                 ("1001 strided", 1001, True)]
        if big:
            sizes.append(("%dB" % big, big // esize, False))
        for label, n, strided in sizes:
            tag = "%s %s" % (name_of(dtype), label)
            # every operator on the small sizes; at the large one, those with code paths of
            # their own (a sum, a comparison, the division of an average)
            large = n * esize >= (1 << 20)
            for op in ([R.SUM, R.MAX, R.AVG] if large else OPS):
                for what, fn in reduce_ops:
                    checks.run("%s %s %s" % (what, op_name(op), tag), fn, dtype, n, strided, op)
            for op in ([R.SUM] if large else [R.SUM, R.MAX]):
                checks.run("reduce_scatter %s %s" % (op_name(op), tag), t_reduce_scatter, dtype,
                           n, strided, op)
                checks.run("all_reduce_coalesced %s %s" % (op_name(op), tag),
                           t_all_reduce_coalesced, dtype, n, strided, op)
            for what, fn in moves:
                checks.run("%s %s" % (what, tag), fn, dtype, n, strided)
    checks.run("barrier", lambda: dist.barrier())
    checks.run("unsupported combinations", t_unsupported)
    checks.run("int16 and complex", t_other_types)
    checks.run("uneven all_gather", t_uneven_all_gather)
    expect(True, "")


if __name__ == "__main__":
    harness.main("torch ops", body)
