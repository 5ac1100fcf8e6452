"""PyTorch's own distributed test suite on the mesh backend.

Runs DistributedTest._DistTestBase of torch/testing/_internal/distributed/distributed_test.py
(shipped with torch) the way PyTorch's test_distributed_spawn.py runs it for gloo: each test in
WORLD_SIZE fresh processes (default 3; a test of the list file may name more), started with the
spawn method, initialised through a file:// store with BACKEND=mesh. The suite declares which
backends can run each test; mesh joins the sets of third-party ("plugin") backends and of
DDP-capable ones, and, like nccl and ucc, that of backends without receives from any source.
Tests for other backends (gloo, nccl) or for GPUs skip themselves. Every test that runs must pass.

    dist_suite.py [--exact] [-k NAME]... [--tests FILE] [--list] [--out FILE]

-k selects the tests whose names hold NAME (with --exact: are NAME). --tests runs the tests a
file names, one a line ("#" starts a comment), each optionally followed by the number of ranks
it runs on when that is more than WORLD_SIZE.

Prints one line per test ("ok", "FAIL", "skip: reason"), then
"distributed_test.py on mesh: P passed, F failed, S skipped"; --out writes the names of the
tests that ran and passed to FILE. Exits non-zero when any test failed.
"""

import os
import sys
import time
import types
import unittest

os.environ.setdefault("BACKEND", "mesh")
os.environ.setdefault("WORLD_SIZE", "3")
os.environ.setdefault("OMP_NUM_THREADS", "1")

try:
    import expecttest  # noqa: F401
except ImportError:
    # common_utils imports expecttest (not packaged by Debian) for its inline-expectation
    # tests, which the distributed suite does not use: a stand-in with what it touches
    stub = types.ModuleType("expecttest")
    stub.ACCEPT = False

    class _ExpectTestCase(unittest.TestCase):
        longMessage = True

        def assertExpectedInline(self, actual, expect, skip=0):
            self.assertEqual(actual, expect)

    stub.TestCase = _ExpectTestCase
    sys.modules["expecttest"] = stub

import torch  # noqa: E402

import mesh_torch  # noqa: E402,F401  (registers "mesh"; spawned ranks import this file too)
from torch.testing._internal import common_distributed  # noqa: E402

BACKEND = os.environ["BACKEND"]
WORLD_SIZE = int(os.environ["WORLD_SIZE"])
_cases = common_distributed.DistTestCases
_cases.backend_feature["plugin"].add(BACKEND)
_cases.backend_feature["ddp"].add(BACKEND)
_cases.skip_collective["sendrecv anysource"].add(BACKEND)

# Each rank of the suite turns on DDP's experimental ReplicatedTensor interop, whose module
# (torch.distributed._shard) fails to import on Python 3.11 in torch 1.13 (a dataclass with a
# mutable default), for every backend alike; DDP's default, off, is kept.
try:
    from torch.nn.parallel import _replicated_tensor_ddp_utils as _rt

    _rt._set_ddp_with_replicated_tensor = lambda value: None
except ImportError:
    pass

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    # the ranks of this test; the suite and its spawned ranks read WORLD_SIZE
    ranks = WORLD_SIZE

    def setUp(self):
        os.environ["WORLD_SIZE"] = str(self.ranks)
        super().setUp()
        self._spawn_processes()


def read_tests(path):
    """The (name, ranks) of the tests a list file names."""
    tests = []
    with open(path) as f:
        for line in f:
            fields = line.split("#", 1)[0].split()
            if fields:
                tests.append((fields[0], max(WORLD_SIZE, int(fields[1])) if len(fields) > 1
                              else WORLD_SIZE))
    return tests


class LineResult(unittest.TextTestResult):
    """One line per test, flushed at once (the suite runs for a while)."""

    def __init__(self, stream, descriptions, verbosity):
        super().__init__(stream, descriptions, 0)
        self.out = stream
        self.ran = []
        self.t0 = 0.0

    def name(self, test):
        return test.id().rsplit(".", 1)[-1]

    def startTest(self, test):
        self.t0 = time.time()
        super().startTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.ran.append(self.name(test))
        self.out.write("ok %s (%.1f s)\n" % (self.name(test), time.time() - self.t0))
        self.out.flush()

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.out.write("FAIL %s\n%s\n" % (self.name(test), self._exc_info_to_string(err, test)))
        self.out.flush()

    def addError(self, test, err):
        super().addError(test, err)
        self.out.write("FAIL %s (error)\n%s\n" % (self.name(test),
                                                    self._exc_info_to_string(err, test)))
        self.out.flush()

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.out.write("skip %s: %s\n" % (self.name(test), reason.strip().splitlines()[0]))
        self.out.flush()

    def printErrors(self):
        pass


def main(argv):
    patterns, out, listing, exact, listed = [], None, False, False, None
    i = 0
    while i < len(argv):
        if argv[i] == "-k" and i + 1 < len(argv):
            patterns.append(argv[i + 1])
            i += 1
        elif argv[i] == "--tests" and i + 1 < len(argv):
            listed = read_tests(argv[i + 1])
            i += 1
        elif argv[i] == "--out" and i + 1 < len(argv):
            out = argv[i + 1]
            i += 1
        elif argv[i] == "--list":
            listing = True
        elif argv[i] == "--exact":
            exact = True
        else:
            sys.stderr.write(__doc__)
            return 2
        i += 1
    loader = unittest.TestLoader()
    names = loader.getTestCaseNames(TestDistBackendWithSpawn)
    ranks = {}
    if listed is not None:
        patterns, exact = patterns + [n for n, _ in listed], True
        ranks = dict(listed)
    if patterns:
        unknown = [p for p in patterns if exact and p not in names]
        if unknown:
            sys.stderr.write("no such tests in the suite: %s\n" % " ".join(unknown))
            return 2
        names = [n for n in names if any(p == n if exact else p in n for p in patterns)]
    if listing:
        print("\n".join(names))
        return 0
    tests = []
    for n in names:
        test = TestDistBackendWithSpawn(n)
        test.ranks = ranks.get(n, WORLD_SIZE)
        tests.append(test)
    more = sorted(set(t.ranks for t in tests if t.ranks != WORLD_SIZE))
    t0 = time.time()
    runner = unittest.TextTestRunner(stream=sys.stdout, resultclass=LineResult, verbosity=0)
    result = runner.run(unittest.TestSuite(tests))
    failed = len(result.failures) + len(result.errors)
    if out:
        with open(out, "w") as f:
            f.write("\n".join(result.ran) + "\n")
    extra = "".join("; %d for %d tests" % (r, sum(t.ranks == r for t in tests)) for r in more)
    print("distributed_test.py on %s (torch %s): %d passed, %d failed, %d skipped "
          "(%d ranks%s, %.0f s)" % (BACKEND, torch.__version__, len(result.ran), failed,
                                    len(result.skipped), WORLD_SIZE, extra, time.time() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
