"""Subgroups and asynchronous operations of the mesh backend (run under meshrun or torchrun with
2 ranks or more): one-rank groups, groups of non-contiguous ranks, a copy of the world, many
groups, operations of several groups in flight at once, Work.wait / is_completed /
get_future, and point-to-point calls that never block the caller. Gloo serves as the
reference and as the side channel that proves a call returned."""

import os
import threading
import time

import harness
from harness import dist, expect, expect_equal, torch

rank = size = 0


def pg_of(group=None):
    """The group's ProcessGroupMesh (torch 2.x wraps it in a ProcessGroup)."""
    import mesh_torch
    pg = mesh_torch.backend_of(group)
    expect(pg is not None, "the group has no mesh backend")
    return pg


def t_backend():
    expect(dist.get_backend() == "mesh", "the default group's backend is %s" % dist.get_backend())
    import mesh_torch
    expect(mesh_torch.is_mesh(), "mesh_torch.is_mesh()")
    expect(isinstance(pg_of(), mesh_torch.ProcessGroupMesh), "the group is a ProcessGroupMesh")
    # the name the process group reports (DDP's logging data, torch's messages), a subgroup's too
    for name, g in (("the world", dist.group.WORLD), ("a subgroup", dist.new_group([0]))):
        if g is not dist.GroupMember.NON_GROUP_MEMBER:
            expect(g.name() == "mesh", "%s is named %s" % (name, g.name()))


def t_transports(gloo):
    """Peers on this rank's node are reached over shared memory, the others over TCP."""
    nodes = [None] * size
    dist.all_gather_object(nodes, os.environ.get("MESH_NODE_ID", "n"), group=gloo)
    pg = pg_of()
    for peer in range(size):
        got = pg._peer_transport(peer)
        if peer == rank:
            continue
        want = "shm" if nodes[peer] == nodes[rank] else "tcp"
        expect(got == want, "transport to rank %d (%s, here %s): %s, want %s"
               % (peer, nodes[peer], nodes[rank], got, want))


def t_single(groups):
    """Each rank's own one-rank group: every collective is the identity, nothing hangs."""
    g = groups[rank]
    x = torch.arange(5.0) + rank
    dist.all_reduce(x, group=g)
    expect_equal(x, torch.arange(5.0) + rank, "all_reduce on one rank")
    dist.broadcast(x, rank, group=g)
    out = [torch.zeros(5)]
    dist.all_gather(out, x, group=g)
    expect_equal(out[0], x, "all_gather on one rank")
    y = torch.zeros(5)
    dist.reduce_scatter_tensor(y, x, group=g)
    expect_equal(y, x, "reduce_scatter_tensor on one rank")
    z = torch.zeros(5)
    dist.all_to_all_single(z, x, group=g)
    expect_equal(z, x, "all_to_all_single on one rank")
    dist.barrier(group=g)
    w = dist.all_reduce(x, group=g, async_op=True)
    w.wait()
    expect(w.is_completed(), "async work on one rank completes")


def t_subgroup(g, members):
    """Collectives on a group of the given (global) ranks."""
    if rank not in members:
        expect(g == dist.GroupMember.NON_GROUP_MEMBER, "a non-member gets NON_GROUP_MEMBER")
        return
    expect(dist.get_world_size(g) == len(members), "group size")
    expect(dist.get_rank(g) == members.index(rank), "group rank")
    x = torch.full((7,), float(rank + 1))
    dist.all_reduce(x, group=g)
    expect_equal(x, torch.full((7,), float(sum(m + 1 for m in members))), "all_reduce")
    root = members[-1]
    y = torch.full((3,), float(rank))
    dist.broadcast(y, root, group=g)
    expect_equal(y, torch.full((3,), float(root)), "broadcast from global rank %d" % root)
    out = [torch.zeros(2) for _ in members]
    dist.all_gather(out, torch.full((2,), float(rank)), group=g)
    for i, m in enumerate(members):
        expect_equal(out[i], torch.full((2,), float(m)), "all_gather block of rank %d" % m)
    z = torch.full((4,), float(rank))
    dist.reduce(z, root, op=dist.ReduceOp.MAX, group=g)
    if rank == root:
        expect_equal(z, torch.full((4,), float(max(members))), "reduce at global rank %d" % root)
    if len(members) > 1:
        i = members.index(rank)
        dst, src = members[(i + 1) % len(members)], members[(i - 1) % len(members)]
        got = torch.zeros(3)
        reqs = [dist.irecv(got, src, group=g), dist.isend(torch.full((3,), float(rank)), dst,
                                                          group=g)]
        for q in reqs:
            q.wait()
        expect_equal(got, torch.full((3,), float(src)), "isend/irecv by global ranks")


def t_interleaved(groups, evens, odds, dup):
    """Operations of several groups in flight at once, waited for in another order."""
    mine = evens if rank % 2 == 0 else odds
    members = [r for r in range(size) if r % 2 == rank % 2]
    a, b, c = torch.ones(1000), torch.ones(1000) * rank, torch.ones(1000) * 2
    wa = dist.all_reduce(a, group=mine, async_op=True)
    wb = dist.all_reduce(b, async_op=True)
    wc = dist.all_reduce(c, group=dup, async_op=True)
    ws = [dist.all_reduce(torch.ones(10) * i, group=groups[rank], async_op=True)
          for i in range(5)]
    for w in reversed([wa, wb, wc] + ws):
        w.wait()
    expect_equal(a, torch.full((1000,), float(len(members))), "all_reduce on the parity group")
    expect_equal(b, torch.full((1000,), float(sum(range(size)))), "all_reduce on the world")
    expect_equal(c, torch.full((1000,), 2.0 * size), "all_reduce on the copy of the world")


def t_many_groups():
    """Groups by the dozen, as tensor- and pipeline-parallel trainers make them."""
    groups = []
    for i in range(24):
        members = sorted({(i + k) % size for k in range(1 + i % size)})
        groups.append((members, dist.new_group(members)))
    for members, g in groups:
        if rank in members:
            x = torch.ones(3)
            dist.all_reduce(x, group=g)
            expect_equal(x, torch.full((3,), float(len(members))), "group %s" % members)
    for members, g in groups:
        if rank in members:
            dist.destroy_process_group(g)


def t_async(gloo):
    """is_completed turns true without a wait; wait and the future give the results."""
    x = torch.ones(1 << 16) * (rank + 1)
    w = dist.all_reduce(x, async_op=True)
    deadline = time.time() + 60
    while not w.is_completed() and time.time() < deadline:
        time.sleep(0.001)
    expect(w.is_completed(), "is_completed() without wait")
    w.wait()
    want = torch.full((1 << 16,), float(sum(range(1, size + 1))))
    expect_equal(x, want, "all_reduce result")
    fut = w.get_future()
    expect(fut.done(), "the future is done")
    value = fut.value()
    expect(isinstance(value, list) and len(value) == 1, "the future's value is the tensor list")
    expect_equal(value[0], want, "the future's tensor")
    # a callback chained on the future runs once the operation completes
    y = torch.ones(4)
    fut2 = dist.all_reduce(y, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    expect_equal(fut2.wait(), torch.full((4,), 2.0 * size), "then() on the future")
    # after a long run of blocking calls, which the callers finish themselves, a lone
    # asynchronous operation that nobody waits on through Work.wait still completes soon
    t0 = time.time()
    while True:  # the same number of calls on every rank, about 1.5 s of them
        go = torch.tensor([1.0 if time.time() - t0 < 1.5 else 0.0])
        dist.all_reduce(go, op=dist.ReduceOp.MIN)
        if go.item() == 0:
            break
    v = torch.ones(2)
    fut3 = dist.all_reduce(v, async_op=True).get_future()
    t0 = time.time()
    while not fut3.done() and time.time() - t0 < 60:
        time.sleep(0.0002)
    took = time.time() - t0
    expect(fut3.done() and took < 0.5,
           "a lone async all_reduce after blocking ones done in %.3f s (at most 0.5 s)" % took)
    expect_equal(v, torch.full((2,), float(size)), "its result")
    # many in flight, waited for from another thread through their futures
    works = [dist.all_reduce(torch.ones(100) * i, async_op=True) for i in range(16)]
    results = []
    th = threading.Thread(target=lambda: results.extend(w.get_future().wait()[0][0].item()
                                                        for w in works))
    th.start()
    th.join(60)
    expect(not th.is_alive(), "futures complete without a wait on the issuing thread")
    expect(results == [float(i * size) for i in range(16)], "results of 16 operations")
    # the result() of a finished work is its output
    z = torch.ones(3)
    w = dist.broadcast(z, 0, async_op=True)
    w.wait()
    expect_equal(w.result()[0], torch.ones(3), "Work.result()")


def t_p2p_never_blocks(gloo):
    """isend and irecv return before the peer posts its side: the sender passes a gloo barrier
    that the receiver enters before posting its receive (a blocking isend would deadlock), and
    the same the other way round."""
    big = 8 << 20
    peer = rank ^ 1
    if peer >= size:
        dist.barrier(group=gloo)
        dist.barrier(group=gloo)
        return
    data = torch.full((big // 4,), float(rank))
    got = torch.zeros(big // 4)
    if rank % 2 == 0:
        w = dist.isend(data, peer)
        dist.barrier(group=gloo)
        w.wait()
        r = dist.irecv(got, peer)
        dist.barrier(group=gloo)
        r.wait()
    else:
        dist.barrier(group=gloo)
        r = dist.irecv(got, peer)
        r.wait()
        dist.barrier(group=gloo)
        w = dist.isend(data, peer)
        w.wait()
    expect_equal(got, torch.full((big // 4,), float(peer)), "message from rank %d" % peer)


def t_tags():
    """Messages match by tag: a receiver takes them in another order than they were sent."""
    peer = rank ^ 1
    if peer >= size:
        return
    if rank % 2 == 0:
        works = [dist.isend(torch.full((4,), 7.0), peer, tag=7),
                 dist.isend(torch.full((9,), 3.0), peer, tag=3)]
        for w in works:
            w.wait()
    else:
        three, seven = torch.zeros(9), torch.zeros(4)
        works = [dist.irecv(three, peer, tag=3), dist.irecv(seven, peer, tag=7)]
        for w in works:
            w.wait()
        expect_equal(three, torch.full((9,), 3.0), "the message of tag 3")
        expect_equal(seven, torch.full((4,), 7.0), "the message of tag 7")


def t_object_collectives():
    """broadcast_object_list and all_gather_object: uint8 and int64 tensors underneath."""
    objs = [{"rank": rank, "list": list(range(rank))}]
    dist.broadcast_object_list(objs, src=size - 1)
    expect(objs[0]["rank"] == size - 1, "broadcast_object_list")
    out = [None] * size
    dist.all_gather_object(out, ("r", rank))
    expect(out == [("r", r) for r in range(size)], "all_gather_object")


def body(checks, gloo):
    global rank, size
    rank, size = dist.get_rank(), dist.get_world_size()
    checks.run("backend", t_backend)
    checks.run("transports by node", t_transports, gloo)
    singles = [dist.new_group([r]) for r in range(size)]
    checks.run("one-rank groups", t_single, singles)
    evens = dist.new_group([r for r in range(size) if r % 2 == 0])
    odds = dist.new_group([r for r in range(size) if r % 2 == 1]) if size > 1 else None
    ends = dist.new_group([0, size - 1]) if size > 1 else None
    dup = dist.new_group(list(range(size)))
    checks.run("group of even ranks", t_subgroup, evens, [r for r in range(size) if r % 2 == 0])
    if size > 1:
        checks.run("group of odd ranks", t_subgroup, odds, [r for r in range(size) if r % 2])
        checks.run("group of the first and last ranks", t_subgroup, ends, [0, size - 1])
    checks.run("copy of the world", t_subgroup, dup, list(range(size)))
    if size > 1:
        checks.run("groups in flight together", t_interleaved, singles, evens, odds, dup)
    checks.run("24 groups created and destroyed", t_many_groups)
    checks.run("async work and futures", t_async, gloo)
    if size > 1:
        checks.run("point-to-point never blocks", t_p2p_never_blocks, gloo)
        checks.run("messages match by tag", t_tags)
    checks.run("object collectives", t_object_collectives)


if __name__ == "__main__":
    harness.main("torch groups", body)
