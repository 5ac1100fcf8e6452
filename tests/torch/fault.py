"""Failures of the mesh backend, each in processes of its own that this script starts with
torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and watches:

  dead peer      a rank is killed during an all_reduce: every survivor raises a RuntimeError
                 naming it (in a subgroup with its global rank) well within the group timeout,
                 and later calls raise at once
  silent peer    a rank does not take part: the others raise within the group timeout,
                 naming it
  wait timeout   Work.wait(timeout) on a receive nobody matches raises, and the other groups
                 go on working
  re-init        destroy_process_group() and init_process_group() again, four times in one
                 process, over env://, tcp:// and file://
  exit           processes that exit without destroy_process_group, and with an operation still
                 in flight, end at once

Prints "ok NAME" / "FAIL NAME: why" lines and "torch faults: P passed, F failed"; exits non-zero
on any failure.
"""

import datetime
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ------------------------------------------------------------------ the ranks

def worker(scenario):
    import torch
    import torch.distributed as dist

    import mesh_torch  # noqa: F401

    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])

    def result(*words):
        print("RESULT", *words, flush=True)

    def timed_call(fn):
        t0 = time.time()
        try:
            fn()
            return "noerror %.2f" % (time.time() - t0)
        except RuntimeError as e:
            return "raised %.2f %s" % (time.time() - t0, " ".join(str(e).split()))

    if scenario == "dead":
        dist.init_process_group("mesh", timeout=datetime.timedelta(seconds=30))
        sub = dist.new_group([0, 2])
        dist.all_reduce(torch.ones(4))
        if rank in (0, 2):
            dist.all_reduce(torch.ones(4), group=sub)
        if rank == 2:
            time.sleep(1.0)
            os.kill(os.getpid(), signal.SIGKILL)
        group = sub if rank == 0 else None
        result("first", timed_call(lambda: dist.all_reduce(torch.ones(1 << 20), group=group)))
        result("second", timed_call(lambda: dist.all_reduce(torch.ones(4), group=group)))
    elif scenario == "silent":
        dist.init_process_group("mesh", timeout=datetime.timedelta(seconds=3))
        dist.all_reduce(torch.ones(4))
        if rank == 2:
            time.sleep(10)
            result("slept")
        else:
            result("first", timed_call(lambda: dist.all_reduce(torch.ones(4))))
    elif scenario == "wait_timeout":
        dist.init_process_group("mesh", timeout=datetime.timedelta(seconds=60))
        sub = dist.new_group([0, 1])
        if rank == 0:
            w = dist.irecv(torch.zeros(4), 1, group=sub)
            result("wait", timed_call(lambda: w.wait(datetime.timedelta(seconds=1))))
        x = torch.ones(4)
        dist.all_reduce(x)
        result("world", "ok" if x.sum().item() == 8 else "wrong")
    elif scenario == "reinit":
        tmp = os.environ["FAULT_TMP"]
        methods = ["env://", "tcp://127.0.0.1:%s" % os.environ["FAULT_PORT2"],
                   "file://" + os.path.join(tmp, "store"), "env://"]
        for i, method in enumerate(methods):
            dist.init_process_group("mesh", init_method=method, rank=rank, world_size=2,
                                    timeout=datetime.timedelta(seconds=30))
            x = torch.full((8,), float(rank + i))
            dist.all_reduce(x)
            g = dist.new_group([0, 1])
            y = torch.ones(3)
            dist.all_reduce(y, group=g)
            ok = x[0].item() == 1 + 2 * i and y[0].item() == 2
            dist.destroy_process_group()
            result("round", i, method.split(":")[0], "ok" if ok else "wrong")
    elif scenario == "exit":
        dist.init_process_group("mesh", timeout=datetime.timedelta(seconds=120))
        w = dist.all_reduce(torch.ones(4), async_op=True)
        w.wait()
        dist.barrier()
        if rank == 0:
            dist.irecv(torch.zeros(4), 1)  # never matched, never waited for
        result("done")
    sys.stdout.flush()


# ------------------------------------------------------------------ the driver

def launch(scenario, n, limit, extra_env=None):
    """Runs n ranks of a scenario; returns ({rank: [RESULT lines]}, {rank: exit status},
    seconds taken, {rank: output})."""
    env = dict(os.environ)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(n),
               MESH_LOG_LEVEL=env.get("MESH_LOG_LEVEL", "error"))
    env.update(extra_env or {})
    procs = []
    for r in range(n):
        e = dict(env, RANK=str(r), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker",
                                       scenario], env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    t0 = time.time()
    outs, codes = {}, {}
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1, limit - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += "\n(killed after %d s)" % limit
        outs[r] = out
        codes[r] = p.returncode
    results = {r: [l.split(" ", 1)[1] for l in outs[r].splitlines() if l.startswith("RESULT ")]
               for r in outs}
    return results, codes, time.time() - t0, outs


class Driver:
    def __init__(self):
        self.passed = self.failed = 0

    def verdict(self, name, problems, outs=None):
        if not problems:
            self.passed += 1
            print("ok %s" % name, flush=True)
            return
        self.failed += 1
        print("FAIL %s: %s" % (name, "; ".join(problems)), flush=True)
        for r, out in sorted((outs or {}).items()):
            for line in out.splitlines()[-15:]:
                print("  [%d] %s" % (r, line))


def check_dead(d):
    res, codes, took, outs = launch("dead", 3, 60)
    p = []
    for r, want in ((0, ["rank 1 (global rank 2)", "global ranks [0, 2]"]), (1, ["rank 2"])):
        lines = res.get(r, [])
        first = [l for l in lines if l.startswith("first ")]
        second = [l for l in lines if l.startswith("second ")]
        if not first or not first[0].startswith("first raised"):
            p.append("rank %d did not raise: %s" % (r, lines))
            continue
        secs = float(first[0].split()[2])
        if secs >= 30:
            p.append("rank %d raised after %.1f s, beyond the 30 s timeout" % (r, secs))
        for w in want:
            if w not in first[0]:
                p.append("rank %d's error does not name %r: %s" % (r, w, first[0]))
        if not second or not second[0].startswith("second raised"):
            p.append("rank %d's next call did not raise: %s" % (r, second))
        elif float(second[0].split()[2]) > 1.0:
            p.append("rank %d's next call took %s s to raise" % (r, second[0].split()[2]))
        if codes.get(r) != 0:
            p.append("rank %d exited with %s" % (r, codes.get(r)))
    d.verdict("dead peer: every survivor raises naming it", p, outs if p else None)


def check_silent(d):
    """Each waiting rank names the rank it waits for; the one waiting on the silent rank 2
    names it (which one that is depends on the algorithm)."""
    res, codes, took, outs = launch("silent", 3, 60)
    p = []
    named = False
    for r in (0, 1):
        lines = res.get(r, [])
        if not lines or not lines[0].startswith("first raised"):
            p.append("rank %d did not raise: %s" % (r, lines))
            continue
        secs = float(lines[0].split()[2])
        if secs > 8:
            p.append("rank %d raised after %.1f s with a 3 s timeout" % (r, secs))
        if "waited 3.0 s" not in lines[0]:
            p.append("rank %d's error does not say it waited 3 s: %s" % (r, lines[0]))
        named = named or "rank 2" in lines[0].split("waited", 1)[-1]
    if not named:
        p.append("no error names rank 2")
    d.verdict("silent peer: the group timeout bounds the call", p, outs if p else None)


def check_wait_timeout(d):
    res, codes, took, outs = launch("wait_timeout", 2, 60)
    p = []
    wait = [l for l in res.get(0, []) if l.startswith("wait ")]
    if not wait or not wait[0].startswith("wait raised") or "timed out" not in wait[0]:
        p.append("Work.wait(1 s) did not raise a timeout: %s" % wait)
    elif float(wait[0].split()[2]) > 5:
        p.append("Work.wait(1 s) raised after %s s" % wait[0].split()[2])
    for r in (0, 1):
        if "world ok" not in res.get(r, []):
            p.append("rank %d: the world group after the timeout: %s" % (r, res.get(r)))
        if codes.get(r) != 0:
            p.append("rank %d exited with %s" % (r, codes.get(r)))
    d.verdict("Work.wait(timeout) raises; other groups go on", p, outs if p else None)


def check_reinit(d):
    with tempfile.TemporaryDirectory() as tmp:
        res, codes, took, outs = launch("reinit", 2, 120,
                                        {"FAULT_TMP": tmp, "FAULT_PORT2": str(free_port())})
    p = []
    for r in (0, 1):
        rounds = [l for l in res.get(r, []) if l.startswith("round ")]
        if len(rounds) != 4 or any(not l.endswith(" ok") for l in rounds):
            p.append("rank %d: %s" % (r, rounds))
        if codes.get(r) != 0:
            p.append("rank %d exited with %s" % (r, codes.get(r)))
    d.verdict("destroy_process_group and init again, 4 times (env, tcp, file)", p,
              outs if p else None)


def check_exit(d):
    res, codes, took, outs = launch("exit", 2, 60)
    p = []
    for r in (0, 1):
        if "done" not in res.get(r, []):
            p.append("rank %d did not finish: %s" % (r, res.get(r)))
        if codes.get(r) != 0:
            p.append("rank %d exited with %s" % (r, codes.get(r)))
    if took > 40:
        p.append("the processes took %.0f s to exit (group timeout 120 s)" % took)
    d.verdict("exit without destroy, with a receive in flight", p, outs if p else None)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
        return 0
    d = Driver()
    t0 = time.time()
    for check in (check_dead, check_silent, check_wait_timeout, check_reinit, check_exit):
        check(d)
    print("torch faults: %d passed, %d failed (%.1f s)" % (d.passed, d.failed, time.time() - t0))
    return 1 if d.failed else 0


if __name__ == "__main__":
    sys.exit(main())
