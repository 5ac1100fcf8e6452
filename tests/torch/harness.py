"""Harness of the mesh backend's tests.

Ranks come from tools/meshrun (MESH_RANK, MESH_SIZE, MESH_ADDR, MESH_LOCAL_RANK, ...), which this
module turns into torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK,
LOCAL_WORLD_SIZE), or from torchrun itself. Checks run on every rank in the same order; after
each, the ranks agree on the verdict over a gloo group, so every rank prints the same "ok NAME" /
"FAIL NAME" line count and the summary "NAME: P passed, F failed" closes the run. The exit
status is non-zero when any check failed on any rank.
"""

import datetime
import os
import sys
import time
import traceback
import warnings


def torchrun_env():
    """Fills torchrun's variables from meshrun's (simulated nodes included: MESH_ADDR is rank
    0's address as the other nodes reach it)."""
    env = os.environ
    if "RANK" in env or "MESH_RANK" not in env:
        return
    host, port = env["MESH_ADDR"].rsplit(":", 1)
    env["RANK"] = env["MESH_RANK"]
    env["WORLD_SIZE"] = env["MESH_SIZE"]
    env["LOCAL_RANK"] = env.get("MESH_LOCAL_RANK", "0")
    env["LOCAL_WORLD_SIZE"] = env.get("MESH_LOCAL_SIZE", "1")
    env["MASTER_ADDR"] = host
    env["MASTER_PORT"] = port
    # meshrun's simulated nodes are network namespaces reached through their eth0; gloo (the
    # reference) would otherwise pick the address its host name resolves to, a loopback one
    if not host.startswith("127.") and os.path.exists("/sys/class/net/eth0"):
        env.setdefault("GLOO_SOCKET_IFNAME", "eth0")


torchrun_env()
# the *_coalesced calls warn of their coming deprecation on every call
warnings.filterwarnings("ignore", message=".*will be deprecated.*")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import mesh_torch  # noqa: E402,F401  (registers "mesh")


def init(timeout_s=60.0):
    """The default group on mesh, and a gloo group of the same ranks as the reference. Each
    rank computes with one thread: the ranks share the machine's cores."""
    torch.set_num_threads(1)
    dist.init_process_group("mesh", timeout=datetime.timedelta(seconds=timeout_s))
    gloo = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
    return gloo


class Checks:
    """Runs named checks on every rank and keeps the count."""

    def __init__(self, title, gloo):
        self.title = title
        self.gloo = gloo
        self.rank = dist.get_rank()
        self.passed = 0
        self.failed = 0
        self.start = time.time()

    def run(self, name, fn, *args, **kwargs):
        err = None
        t0 = time.time()
        try:
            fn(*args, **kwargs)
        except Exception as e:  # a failed check is reported, the run goes on
            err = "%s: %s" % (type(e).__name__, e)
            if os.environ.get("MESH_TEST_VERBOSE"):
                traceback.print_exc()
        flag = torch.tensor([0 if err is None else 1], dtype=torch.int32)
        dist.all_reduce(flag, group=self.gloo)
        if err is not None:
            print("FAIL %s (rank %d): %s" % (name, self.rank, err), flush=True)
        if flag.item() == 0:
            self.passed += 1
            if self.rank == 0:
                print("ok %s (%.3f s)" % (name, time.time() - t0), flush=True)
        else:
            self.failed += 1
            if self.rank == 0 and err is None:
                print("FAIL %s (on another rank)" % name, flush=True)

    def finish(self):
        """Prints the summary on rank 0 and returns the exit status."""
        if self.rank == 0:
            print(
                "%s: %d passed, %d failed (%d ranks, %.1f s)"
                % (self.title, self.passed, self.failed, dist.get_world_size(),
                   time.time() - self.start),
                flush=True,
            )
        return 1 if self.failed else 0


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_equal(got, want, what, tol=0.0):
    """Tensors equal in type, shape and value (within tol for floating point)."""
    if got.dtype != want.dtype or got.shape != want.shape:
        raise AssertionError("%s: got %s %s, want %s %s"
                             % (what, got.dtype, tuple(got.shape), want.dtype, tuple(want.shape)))
    if tol == 0.0:
        if torch.equal(got, want):
            return
    elif torch.allclose(got.double() if got.dtype == torch.float64 else got.float(),
                        want.double() if want.dtype == torch.float64 else want.float(),
                        rtol=tol, atol=tol):
        return
    diff = (got.double() - want.double()).abs() if got.dtype != torch.bool else (got != want).double()
    idx = int(diff.argmax()) if diff.numel() else 0
    raise AssertionError("%s: differs at %d of %d: got %s, want %s"
                         % (what, idx, got.numel(), got.reshape(-1)[idx].item(),
                            want.reshape(-1)[idx].item()))


def expect_raises(fn, words, what):
    """fn raises a RuntimeError whose message holds every word of words."""
    try:
        fn()
    except RuntimeError as e:
        msg = str(e)
        missing = [w for w in words if w not in msg]
        if missing:
            raise AssertionError("%s: the error does not say %s: %s" % (what, missing, msg))
        return msg
    raise AssertionError("%s: no RuntimeError" % what)


def main(title, body, timeout_s=60.0):
    """init, body(checks, gloo), summary, tear-down; exits with the status."""
    gloo = init(timeout_s)
    checks = Checks(title, gloo)
    body(checks, gloo)
    status = checks.finish()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.exit(status)
