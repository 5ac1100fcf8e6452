#!/usr/bin/env python3
"""Every command the documentation shows runs (tests/docs/readme.sh starts this).

README.md:
  - its C example (the ```c block with main) is compiled against the built library and run
    under tools/meshrun on 2 ranks; the lines it prints must be the README's output block (the
    plain ``` block after the commands that run it), in any order;
  - the commands of its ```sh blocks run in a scratch folder (tools/ and bench/ lead to the
    build tree; pkg-config finds a mesh.pc for the build tree), except ./quickstart.sh (one
    builds the tree this test runs in, the other is make check) and the build commands
    (autoreconf, configure, make), which would recurse into this build;
  - ./quickstart.sh bench: the mesh-bench command quickstart.sh runs is the one
    docs/performance.md shows, and it runs here with the message sizes cut to a few KiB.
docs/*.md and HACKING.md:
  - C examples with a main compile and run under meshrun on 2 ranks;
  - the mesh-plan commands run (exit 0, or 1 when nothing fits this machine);
  - every tool they name (in ```sh blocks and `inline code`) exists, and every option given to
    it appears in its --help (for scripts: in the script);
  - every relative link leads to a file of the tree, and its #anchor to a heading there.
Prints one line per check; exits 1 if any failed.
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

SRC = os.path.abspath(os.environ.get("top_srcdir", "."))
BUILD = os.path.abspath(os.environ.get("top_builddir", "."))
failures = []


def ok(what):
    print("ok: " + what)


def fail(what, detail=""):
    print("FAIL: " + what)
    if detail:
        print(detail.rstrip()[-3000:])
    failures.append(what)


def fenced_blocks(path):
    """(info string, text, first line number) of every fenced block of a markdown file."""
    out, cur, info, start = [], None, "", 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = re.match(r"^\s*```(.*)$", line)
            if cur is None and m:
                cur, info, start = [], m.group(1).strip(), n + 1
            elif cur is not None and re.match(r"^\s*```\s*$", line):
                out.append((info, "".join(cur), start))
                cur = None
            elif cur is not None:
                cur.append(line)
    return out


def prose(path):
    """The file's text outside fenced blocks, paragraphs joined into single lines."""
    keep, inside = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if re.match(r"^\s*```", line):
                inside = not inside
                keep.append("\n")
                continue
            keep.append("\n" if inside else line)
    return [p.replace("\n", " ") for p in "".join(keep).split("\n\n")]


def commands(text):
    """Commands of a shell block: continuation lines joined, comment-only lines dropped."""
    out, cur = [], ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        if cur.strip() and not cur.strip().startswith("#"):
            out.append(cur.strip())
        cur = ""
    return out


def strip_comment(cmd):
    """The command without its trailing '# comment' (the docs put no ' #' inside quotes)."""
    return re.sub(r"\s+#.*$", "", cmd)


def run(cmd, cwd, env=None, timeout=300):
    """Runs a shell command line; on timeout its whole process group is killed (exit 124)."""
    p = subprocess.Popen(["bash", "-c", cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return 124, out + "\n(killed after %d s)" % timeout


def sanitizers():
    """The -fsanitize flags a program needs to load the library of a sanitized build (CI's
    ASan/UBSan pass, where the sanitizer's runtime must come first): mesh.pc gives them."""
    lib = os.path.join(BUILD, "libmesh", ".libs", "libmesh.so")
    rc, out = run("ldd %s" % shlex.quote(lib), BUILD)
    names = [n for n, lib in (("address", "libasan"), ("undefined", "libubsan"),
                              ("thread", "libtsan")) if rc == 0 and lib in out]
    return "-fsanitize=" + ",".join(names) if names else ""


def scratch_env(tmp):
    """A folder where tools/ and bench/ are the build tree's and pkg-config finds mesh."""
    for d in ("tools", "bench"):
        os.symlink(os.path.join(BUILD, d), os.path.join(tmp, d))
    libdir = os.path.join(BUILD, "libmesh", ".libs")
    san = sanitizers()
    with open(os.path.join(tmp, "mesh.pc"), "w") as f:
        f.write("Name: mesh\nDescription: mesh in its build tree\nVersion: 0\n"
                "Libs: %s -L%s -Wl,-rpath,%s -lmesh\nCflags: %s -I%s -I%s\n"
                % (san, libdir, libdir, san, os.path.join(SRC, "include"),
                   os.path.join(BUILD, "include")))
    # the test suite's own variables (MESH_TEST_RANKS, MESH_TEST_SANITIZED) are no knob of the
    # library, which warns of them: a reader's run has none
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_TEST_")}
    env["PKG_CONFIG_PATH"] = tmp
    env.setdefault("MESH_TIMEOUT", "60")
    return env


def c_example(path, code, start, tmp, env, expect=None):
    name = "example_%s_%d" % (os.path.basename(path).replace(".", "_"), start)
    with open(os.path.join(tmp, name + ".c"), "w") as f:
        f.write(code)
    where = "%s:%d" % (os.path.relpath(path, SRC), start)
    cc = os.environ.get("CC", "cc")
    rc, out = run("%s -std=c11 -Wall -Werror %s.c -o %s $(pkg-config --cflags --libs mesh)"
                  % (cc, name, name), tmp, env)
    if rc != 0:
        fail("the C example at %s compiles" % where, out)
        return
    ok("the C example at %s compiles" % where)
    rc, out = run("tools/meshrun -n 2 --timeout 120 ./%s" % name, tmp, env)
    if rc != 0:
        fail("the C example at %s runs on 2 ranks (exit %d)" % (where, rc), out)
        return
    ok("the C example at %s runs on 2 ranks" % where)
    if expect is not None:
        got = sorted(l for l in out.splitlines() if l.strip())
        if got != sorted(expect):
            fail("the C example at %s prints what the README says" % where,
                 "expected (any order):\n%s\ngot:\n%s" % ("\n".join(expect), out))
        else:
            ok("the C example at %s prints what the README says" % where)


SKIP_BUILD = re.compile(r"^(autoreconf|\./configure|\./autogen\.sh|make\b|sudo|apt-get)")


def quickstart_bench_command():
    """The mesh-bench command of quickstart.sh's bench job, joined into one line."""
    with open(os.path.join(SRC, "quickstart.sh"), encoding="utf-8") as f:
        text = f.read()
    body = text[text.index("\nbench)"):]
    cmd = next(c for c in commands(body) if c.startswith("tools/meshrun"))
    return cmd.split(" | tee")[0]


def normalise_bench(cmd):
    cmd = re.sub(r"--timeout \d+ ", "", cmd)
    cmd = re.sub(r'"\$out(/[^"]*)?"', r"bench-results\1", cmd)
    return " ".join(cmd.split())


def quickstart_bench(tmp, env):
    qs = quickstart_bench_command()
    shown = None
    for info, text, _ in fenced_blocks(os.path.join(SRC, "docs", "performance.md")):
        for c in commands(text) if info == "sh" else []:
            if "--axes all" in c and "--plot" in c:
                shown = c
    if shown is None or normalise_bench(shown) != normalise_bench(qs):
        fail("docs/performance.md shows the command ./quickstart.sh bench runs",
             "quickstart.sh: %s\ndocs:          %s" % (qs, shown))
    else:
        ok("docs/performance.md shows the command ./quickstart.sh bench runs")
    prog, _, args = qs.partition(" bench/mesh-bench ")
    for flag, small in (("-e", "2k"), ("-n", "1"), ("-w", "1")):
        args = re.sub(r"(^|\s)%s \S+" % flag, r"\1%s %s" % (flag, small), args)
    out_dir = os.path.join(tmp, "bench-results")
    os.mkdir(out_dir)
    cmd = re.sub(r'"\$out(/[^"]*)?"', lambda m: shlex.quote(out_dir + (m.group(1) or "")),
                 prog + " bench/mesh-bench " + args)
    if "$" in cmd:
        fail("quickstart.sh's bench command uses only $out", cmd)
        return
    rc, out = run(cmd, tmp, env, timeout=600)
    wrong = re.findall(r"^# wrong elements: (\d+)", out, re.M)
    files = all(os.path.isfile(os.path.join(out_dir, f)) and
                os.path.getsize(os.path.join(out_dir, f)) > 0
                for f in ("mesh-bench.csv", "mesh-bench.json"))
    if rc != 0 or not wrong or any(w != "0" for w in wrong) or not files:
        fail("./quickstart.sh bench's mesh-bench command at reduced sizes (exit %d)" % rc,
             cmd + "\n" + out)
    else:
        ok("./quickstart.sh bench's mesh-bench command at reduced sizes: %s"
           % " ".join(cmd.split()))


def readme(tmp, env):
    path = os.path.join(SRC, "README.md")
    blocks = fenced_blocks(path)
    example = [(t, s) for i, t, s in blocks if i == "c" and "int main" in t]
    if len(example) != 1:
        fail("README.md has one C example with a main (found %d)" % len(example))
        return
    expect, ran_example = None, False
    for k, (info, text, start) in enumerate(blocks):
        if info != "sh":
            continue
        for cmd in commands(text):
            bare = strip_comment(cmd)
            if bare.startswith("./quickstart.sh bench"):
                quickstart_bench(tmp, env)
                continue
            if bare.startswith("./quickstart.sh") or SKIP_BUILD.match(bare):
                print("not run: %s (builds or checks the tree this test runs in)" % bare)
                continue
            if "allreduce" in bare and not ran_example:
                # the example is saved where the README says before its commands run
                with open(os.path.join(tmp, "allreduce.c"), "w") as f:
                    f.write(example[0][0])
                ran_example = True
            rc, out = run(bare, tmp, env)
            if rc != 0:
                fail("README.md:%d: %s (exit %d)" % (start, bare, rc), out)
                continue
            ok("README.md:%d: %s" % (start, bare))
            nxt = blocks[k + 1] if k + 1 < len(blocks) else None
            if "meshrun" in bare and nxt and nxt[0] == "" and nxt[2] > start:
                expect = [l for l in nxt[1].splitlines() if l.strip()]
                got = sorted(l for l in out.splitlines() if l.strip())
                if got != sorted(expect):
                    fail("README.md:%d prints what the README shows" % start,
                         "expected (any order):\n%s\ngot:\n%s" % ("\n".join(expect), out))
                else:
                    ok("README.md:%d prints what the README shows" % start)
    if not ran_example:
        fail("README.md's commands build and run its C example")
    c_example(path, example[0][0], example[0][1], tmp, env, expect)


# Tools the docs name: how to reach them, and where their options are listed.
def tool_path(name):
    base = name.split("/")[-1]
    for folder in ("tools", "bench", "tests/mutants"):
        rel = os.path.join(folder, base)
        if name.count("/") and not name.startswith(folder + "/"):
            continue
        for root in (BUILD, SRC):
            p = os.path.join(root, rel)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    return None


def configured_out(name):
    """A program of the tree that configure left out (mesh-train without OpenBLAS): the build's
    Makefile names it."""
    base = name.split("/")[-1]
    try:
        with open(os.path.join(BUILD, "Makefile"), encoding="utf-8", errors="replace") as f:
            return re.search(r"[\s/]%s\$\(EXEEXT\)" % re.escape(base), f.read()) is not None
    except OSError:
        return False


help_cache = {}


def options_of(name, path):
    if name in help_cache:
        return help_cache[name]
    with open(path, "rb") as f:
        head = f.read(4096)
    if head.startswith(b"#!") and b"libtool" not in head:
        # a script's options are in its text (scripts may start work when given --help)
        texts = [open(path, encoding="utf-8", errors="replace").read()]
        for lib in re.findall(r"\.\s+\S*?/?([\w-]+\.sh)", texts[0]):
            p = os.path.join(os.path.dirname(path), lib)
            if os.path.isfile(p):
                texts.append(open(p, encoding="utf-8", errors="replace").read())
        text = "\n".join(texts)
    else:
        text = ""
        helps = [["--help"]]
        if name.endswith("mesh-info"):
            helps += [["--grid", "--help"], ["--pp", "1f1b", "--help"]]
        for h in helps:
            try:
                p = subprocess.run([path] + h, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   timeout=60, text=True)
                text += p.stdout
            except subprocess.TimeoutExpired:
                pass
    help_cache[name] = text
    return text


TOOL = re.compile(r"(?:^|\s|\()((?:tools/|bench/|tests/mutants/)?(?:meshrun|mesh-info|mesh-plan|"
                  r"mesh-bench|mesh-train|cp-bench|expert-bench|zero-bench|[\w-]+\.sh))(?=\s|$)")


def check_options(where, cmd):
    """Splits a command line into the tools it runs and checks each one's long options."""
    tokens = cmd.replace("[", " ").replace("]", " ").split()
    segments, cur = [], None
    for t in tokens:
        m = TOOL.fullmatch(" " + t) if "/" in t or t.startswith(("mesh", "cp-", "expert-",
                                                                 "zero-")) else None
        if m and (cur is None or tool_path(t) or configured_out(t)):
            cur = [t, []]
            segments.append(cur)
        elif t == "|":
            cur = None
        elif cur is not None:
            cur[1].append(t)
    checked = 0
    for name, args in segments:
        path = tool_path(name)
        if path is None:
            if name.endswith(".sh") and "/" not in name:
                continue  # a file name in prose, not a tool of this tree
            if configured_out(name):
                print("not checked: %s: %s is not built here" % (where, name))
                continue
            fail("%s: %s exists" % (where, name))
            continue
        text = options_of(name, path)
        for a in args:
            flag = a.split("=")[0].rstrip(",.;:)")
            if not re.fullmatch(r"--[a-z][a-z0-9-]*", flag):
                continue
            if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), text):
                fail("%s: %s has option %s" % (where, name, flag))
            checked += 1
    return checked


def slug(heading):
    """GitHub's anchor of a heading."""
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


def anchors(path):
    out = set()
    inside = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if re.match(r"^\s*```", line):
                inside = not inside
            elif not inside and line.startswith("#"):
                out.add(slug(line.lstrip("#")))
    return out


def check_links(path):
    rel, n = os.path.relpath(path, SRC), 0
    for para in prose(path):
        for target in re.findall(r"\]\(([^)\s]+)\)", para):
            if re.match(r"^[a-z]+:", target):
                continue
            n += 1
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(dest):
                fail("%s: the link %s leads to a file" % (rel, target))
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                fail("%s: the link %s leads to a heading" % (rel, target))
    return n


def run_plans(tmp, env):
    """The guides' mesh-plan commands run (no ranks, a fraction of a second each): exit 0, or 1
    when nothing fits the machine (--from-topo plans for the node it runs on); 2 is a usage
    error (an option or a preset the tool does not know). Those that read a CSV of an earlier
    bench run (--calibrate, --compare) are left out."""
    docs = os.path.join(SRC, "docs")
    for f in sorted(os.listdir(docs)):
        if not f.endswith(".md"):
            continue
        for info, text, start in fenced_blocks(os.path.join(docs, f)):
            for cmd in commands(text) if info == "sh" else []:
                bare = strip_comment(cmd)
                if not bare.startswith("tools/mesh-plan ") or re.search(r"--calibrate|--compare",
                                                                        bare):
                    continue
                rc, out = run(bare, tmp, env, timeout=120)
                if rc not in (0, 1):
                    fail("docs/%s:%d: %s (exit %d)" % (f, start, bare, rc), out)
                else:
                    ok("docs/%s:%d: %s (exit %d)" % (f, start, " ".join(bare.split()), rc))


def guides():
    files = [os.path.join(SRC, "README.md"), os.path.join(SRC, "HACKING.md")]
    docs = os.path.join(SRC, "docs")
    files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    for path in files:
        rel = os.path.relpath(path, SRC)
        n, before = 0, len(failures)
        for info, text, start in fenced_blocks(path):
            if info == "sh":
                for cmd in commands(text):
                    n += check_options("%s:%d" % (rel, start), strip_comment(cmd))
        for para in prose(path):
            for span in re.findall(r"`([^`]+)`", para):
                if TOOL.search(" " + span):
                    n += check_options("%s: `%s`" % (rel, span[:60]), span)
        if len(failures) == before:
            ok("%s: the tools it names exist, with the %d options given to them" % (rel, n))
        before = len(failures)
        links = check_links(path)
        if len(failures) == before:
            ok("%s: its %d links lead somewhere" % (rel, links))


def main():
    if shutil.which("pkg-config") is None:
        print("no pkg-config (the README builds its example with it): skipped")
        return 77
    tmp = tempfile.mkdtemp(prefix="mesh-docs-", dir=os.environ.get("TMPDIR") or None)
    try:
        env = scratch_env(tmp)
        readme(tmp, env)
        for path in sorted(os.listdir(os.path.join(SRC, "docs"))) + ["../HACKING.md"]:
            full = os.path.normpath(os.path.join(SRC, "docs", path))
            if not full.endswith(".md"):
                continue
            for info, text, start in fenced_blocks(full):
                if info == "c" and "int main" in text:
                    c_example(full, text, start, tmp, env)
        run_plans(tmp, env)
        guides()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failed; the docs and the tree disagree" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
