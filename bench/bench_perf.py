"""Every path against its physical limit, side by side in one run (issue "performance to the floor").

    python bench/bench_perf.py --size-mb 400 --tau-mb 100

Rows, each with its target:
1. toolcall --no-tokens -j 1 against the floor (orjson load + dump of the same file, line by
   line, written to disk, in process), target <= 1.2x;
2. -j 2 against -j 1 on the same file, --no-tokens and with tokens, target >= 1.8x;
3. the real tau-bench file replicated to --tau-mb: default toolcall against --no-tokens plus
   the tokenizer's own time to encode the distinct texts once (cl100k_base, the encoding auto picks for
   model-less dumps), target <= 1.3x --no-tokens + encode;
4. start-up on a one-line file, --no-tokens (target <= 0.25 s) and with tokens (<= 0.5 s), for
   every encoding (best of 5);
5. openai backend (see bench_summarize.py: --concurrency 16 and 1 against the ideal);
6. peak RSS of the largest process at two sizes (flat in input size).
Wall times, best of --repeat; ratios only compare figures of this run.

Real shapes (issue 32), each against its own floor (orjson load+dump of the same file, in
process), tier 1 ``-j 1`` and ``-j 2``, with and without tokens; beside the floor, its own speed-up
on the file's two halves in two processes started together (what the machine gives two processes)
and xcompact's start-up (a run on the file's first line). The bound on ``-j 2``'s speed-up, in
brackets, is what the ``-j 1`` run would take with its start-up serial and the rest at the floor's
two-process speed-up; start-up over the floor is what it adds to any ``-j 1`` ratio:

    python bench/bench_perf.py --shapes              # the shapes table only, ~50 MiB each
    python bench/bench_perf.py --quick               # the same, ~32 MiB each, best of 2: under 2 minutes
    python bench/bench_perf.py --shapes --tree /tmp/before --tree .   # two trees, their runs alternated
    python bench/bench_perf.py --tier2 --tree /tmp/before --tree .    # tier 2 (extractive), MB/s per core
    python bench/bench_perf.py --tier2-distinct --tree /tmp/before --tree .  # the same, no line repeated
    python bench/bench_perf.py --shapes --tree .+pure --tree .        # this tree without and with its C parts

tau: tau-bench airline (200 runs of ~45 short messages); cc: the Claude Code sessions of
../shared/data/raw; codex: the Codex CLI rollouts; mini: the mini-swe-agent runs; gen: the
generated agent runs. The logs are converted once to OpenAI JSONL (``xcompact convert --to
openai``, one record per line), then every shape's lines are repeated to the size asked.
Targets: ``--no-tokens -j 1`` <= 1.5x floor, tokens ``-j 1`` <= 2.5x floor, ``-j 2`` >= 1.9x ``-j 1``.
"""

from __future__ import annotations

import argparse
import compileall
import glob
import os
import resource
import subprocess
import sys
import tempfile
import time

import orjson

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_scale import peak_rss_mib  # noqa: E402
from bench_toolcall import orjson_floor  # noqa: E402
from generate import generate  # noqa: E402

TAU = os.path.join(ROOT, "..", "shared", "data", "taubench_gpt-4o-airline.jsonl")
RAW = os.path.join(ROOT, "..", "shared", "data", "raw")
SHAPES = ("tau", "cc", "codex", "mini", "gen")
_RAW_DIRS = {"cc": "claude-code", "codex": "codex", "mini": "mini-swe-agent"}
#: The source tree xcompact runs from (--tree): this one unless told.
TREE: str | None = None
#: A --tree ending so runs that tree with XCOMPACT_PURE_PYTHON=1: its Python instead of its C parts.
PURE = "+pure"


def dataset(size_mb: float) -> str:
    path = os.path.join(HERE, "data", f"agents_{size_mb:g}mb.jsonl")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        generate(path, size_mb)
    return path


def tau_dataset(size_mb: float) -> str | None:
    if not os.path.exists(TAU):
        return None
    path = os.path.join(HERE, "data", f"tau_{size_mb:g}mb.jsonl")
    if not os.path.exists(path):
        one = open(TAU, "rb").read()
        with open(path, "wb") as fh:
            for _ in range(max(1, int(size_mb * 2**20 // len(one)))):
                fh.write(one)
    return path


def shape_source(shape: str) -> str | None:
    """One copy of a real shape as OpenAI JSONL (one conversation per line), made once."""
    if shape == "tau":
        return TAU if os.path.exists(TAU) else None
    path = os.path.join(HERE, "data", f"real_{shape}.jsonl")
    if os.path.exists(path):
        return path
    files = sorted(glob.glob(os.path.join(RAW, _RAW_DIRS[shape], "*")))
    if not files:
        return None
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, open(path + ".tmp", "wb") as fh:
        for n, f in enumerate(files):
            out = os.path.join(tmp, f"{n}.json")  # one document: the converted conversation
            subprocess.run([sys.executable, "-m", "compactor_cli", "convert", f, "--to", "openai", "-q", "-o", out],
                           check=True, cwd=ROOT)
            fh.write(orjson.dumps(orjson.loads(open(out, "rb").read())) + b"\n")
    os.replace(path + ".tmp", path)
    return path


def shape_dataset(shape: str, size_mb: float) -> str | None:
    """The shape's lines repeated to about ``size_mb`` MiB (at least once)."""
    if shape == "gen":
        return dataset(size_mb)
    if shape == "tau":
        return tau_dataset(size_mb)
    one = shape_source(shape)
    if one is None:
        return None
    path = os.path.join(HERE, "data", f"{shape}_{size_mb:g}mb.jsonl")
    if not os.path.exists(path):
        data = open(one, "rb").read()
        with open(path, "wb") as fh:
            for _ in range(max(1, round(size_mb * 2**20 / len(data)))):
                fh.write(data)
    return path


def run(*args: str) -> float:
    """Wall seconds of one xcompact run."""
    return run_cpu(*args)[0]


def run_cpu(*args: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, its worker processes included) of one xcompact run."""
    env = None
    tree, pure = (TREE[:-len(PURE)], True) if TREE and TREE.endswith(PURE) else (TREE, False)
    if tree:
        env = {**os.environ, "PYTHONPATH": tree + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if pure:  # the tree without its compiled parts (model/compiled.py)
        env = {**(env or os.environ), "XCOMPACT_PURE_PYTHON": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "compactor_cli", *args], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, env=env, cwd=tree or None)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        raise SystemExit(r.stderr.decode()[-2000:])
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def best(repeat: int, *args: str) -> float:
    return min(run(*args) for _ in range(repeat))


def best_cpu(repeat: int, *args: str) -> tuple[float, float]:
    """The least wall time and the least CPU time of ``repeat`` runs."""
    runs = [run_cpu(*args) for _ in range(repeat)]
    return min(w for w, _ in runs), min(c for _, c in runs)


def _fresh(out: str) -> None:
    """No output left from the run before: truncating a large file whose pages are still dirty
    cost the floor 0.15 s at 100 MB (it writes without fsync), and every run gets a new file."""
    if os.path.exists(out):
        os.unlink(out)


def _floor_cpu(src: str, out: str) -> tuple[float, float]:
    _fresh(out)
    w, c = time.perf_counter(), time.process_time()
    orjson_floor(src, out)
    return time.perf_counter() - w, time.process_time() - c


def distinct_encode_seconds(path: str) -> float:
    from compactor_cli.model.tokens import load_encoding

    enc, _ = load_encoding("cl100k_base")
    texts: set[str] = set()
    with open(path, "rb") as fh:
        for line in fh:
            for m in orjson.loads(line)["messages"]:
                for s in (m.get("content"), m.get("role"), m.get("name"), m.get("reasoning")):
                    if isinstance(s, str):
                        texts.add(s)
                for part in m.get("content") if isinstance(m.get("content"), list) else ():
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        texts.add(part["text"])
                for call in m.get("tool_calls") or ():
                    fn = call.get("function") or {}
                    for s in (fn.get("name"), fn.get("arguments")):
                        if isinstance(s, str):
                            texts.add(s)
    t = time.perf_counter()
    for s in texts:
        enc.encode_ordinary(s)
    return time.perf_counter() - t


def _floor_range(src: str, lo: int, hi: int, dst: str) -> None:
    """The floor on the lines of ``src`` in [lo, hi) (a line-aligned byte range)."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        fin.seek(lo)
        pos = lo
        while pos < hi:
            line = fin.readline()
            if not line:
                break
            pos += len(line)
            fout.write(orjson.dumps(orjson.loads(line)) + b"\n")


def floor_two_processes(src: str, out: str) -> float:
    """Wall seconds of the floor on the file's two halves in two processes started together:
    what this machine gives two processes at once. On a VM whose two vCPUs are shared (or are one
    core's hyperthreads) this is well under 2x the one-process floor, and no ``-j 2`` can beat it."""
    import multiprocessing

    size = os.path.getsize(src)
    with open(src, "rb") as fh:
        fh.seek(size // 2)
        fh.readline()
        mid = fh.tell()
    ctx = multiprocessing.get_context("fork")
    t = time.perf_counter()
    procs = [ctx.Process(target=_floor_range, args=(src, lo, hi, f"{out}.{k}"))
             for k, (lo, hi) in enumerate(((0, mid), (mid, size)))]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    wall = time.perf_counter() - t
    for k in range(2):
        if os.path.exists(f"{out}.{k}"):
            os.unlink(f"{out}.{k}")
    if any(proc.exitcode for proc in procs):
        raise SystemExit("the two-process floor failed")
    return wall


def _records_and_floor(src: str, repeat: int, out: str) -> tuple[int, float, float]:
    """The file's record count and its floor, best of ``repeat``: wall and CPU seconds."""
    with open(src, "rb") as fh:
        records = sum(1 for _ in fh)
    floors = [_floor_cpu(src, out) for _ in range(repeat)]
    return records, min(w for w, _ in floors), min(c for _, c in floors)


def shapes_table(shapes: list[str], size_mb: float, repeat: int, tmp: str, tokens: bool = True,
                 trees: list[str | None] | None = None) -> None:
    """One row per real shape (and per source tree): floor, tier 1 -j 1 and -j 2, without and
    with tokens. Each cell is wall seconds and, after the slash, CPU seconds (user + system,
    workers included): on a machine other jobs share, the CPU ratio to the floor's CPU is the
    steadier figure. With several trees, their runs alternate (best of ``repeat`` each), so a
    change in the machine's load falls on all of them alike."""
    global TREE
    trees = trees or [TREE]
    out = os.path.join(tmp, "out.jsonl")
    print("\n| shape | tree | MiB | records | floor wall/cpu | floor, 2 processes: speed-up | start-up (× floor) "
          "| --no-tokens -j 1 | × floor (wall/cpu) | -j 2 | speed-up (bound) | tokens -j 1 | × floor (wall/cpu) "
          "| -j 2 | speed-up (bound) |\n" + "|---" * 15 + "|", flush=True)
    first = os.path.join(tmp, "first.jsonl")
    for shape in shapes:
        src = shape_dataset(shape, size_mb)
        if src is None:
            print(f"| {shape} | (no data) |")
            continue
        mib = os.path.getsize(src) / 2**20
        records, floor, floor_cpu = _records_and_floor(src, repeat, out)
        floor2 = min(floor_two_processes(src, out) for _ in range(repeat))
        with open(src, "rb") as fin, open(first, "wb") as fout:
            fout.write(fin.readline())
        starts: dict[int, list[float]] = {k: [] for k in range(len(trees))}
        for _ in range(max(repeat, 3)):
            for k, tree in enumerate(trees):
                TREE = tree
                starts[k].append(run("toolcall", "--no-tokens", "-j", "1", "-q", first, "-o", out))
        cells: dict[int, list[str]] = {k: [] for k in range(len(trees))}
        for flags in (["--no-tokens"], []) if tokens else (["--no-tokens"],):
            runs: dict[tuple[int, str], list[tuple[float, float]]] = {}
            for _ in range(repeat):
                for k, tree in enumerate(trees):
                    TREE = tree
                    for jobs in ("1", "2"):
                        _fresh(out)
                        runs.setdefault((k, jobs), []).append(
                            run_cpu("toolcall", *flags, "-j", jobs, "-q", src, "-o", out))
            for k in range(len(trees)):
                j1, c1 = (min(x[i] for x in runs[(k, "1")]) for i in (0, 1))
                j2, c2 = (min(x[i] for x in runs[(k, "2")]) for i in (0, 1))
                start = min(starts[k])
                # the bound on -j 2: start-up (serial), the rest at the floor's own two-process speed-up
                bound = j1 / (start + max(j1 - start, 0.0) * floor2 / floor)
                cells[k].append(f"{j1:.2f}/{c1:.2f} s | **{j1 / floor:.2f}x** / {c1 / floor_cpu:.2f}x "
                                f"| {j2:.2f}/{c2:.2f} s | **{j1 / j2:.2f}x** ({bound:.2f}x)")
        for k, tree in enumerate(trees):
            if not tokens:
                cells[k].append("– | – | – | –")
            start = min(starts[k])
            print(f"| {shape} | {tree or 'this'} | {mib:.0f} | {records} | {floor:.2f}/{floor_cpu:.2f} s | "
                  f"{floor / floor2:.2f}x | {start:.2f} s ({start / floor:.2f}x) | " + " | ".join(cells[k]) + " |",
                  flush=True)


def tier2_table(shapes: list[str], repeat: int, tmp: str, trees: list[str | None] | None = None,
                size_mb: float = 16) -> None:
    """Tier 2 with the extractive summariser (``summarize``, its defaults: tokens counted) on each
    real shape's lines repeated to ``size_mb`` (past the 4 MiB under which ``-j`` runs one
    process), beside tier 1 with tokens on the same file. MB/s per core is the file's size over
    the run's CPU seconds (start-up included). The repeated lines let the token memo count each
    distinct text once, as on the shapes table; the summariser's own work is per record."""
    global TREE
    trees = trees or [TREE]
    out = os.path.join(tmp, "out.jsonl")
    print("\n| shape | tree | MB | records | floor wall/cpu | toolcall -j 1 | summarize -j 1 | MB/s per core | "
          "summarize -j 2 | speed-up |\n" + "|---" * 10 + "|", flush=True)
    for shape in shapes:
        src = shape_dataset(shape, size_mb)
        if src is None:
            print(f"| {shape} | (no data) |")
            continue
        mb = os.path.getsize(src) / 1e6
        records, floor, floor_cpu = _records_and_floor(src, repeat, out)
        runs: dict[tuple[int, str], list[tuple[float, float]]] = {}
        for _ in range(repeat):
            for k, tree in enumerate(trees):
                TREE = tree
                runs.setdefault((k, "t1"), []).append(run_cpu("toolcall", "-j", "1", "-q", src, "-o", out))
                for jobs in ("1", "2"):
                    runs.setdefault((k, jobs), []).append(run_cpu("summarize", "-j", jobs, "-q", src, "-o", out))
        for k, tree in enumerate(trees):
            t1, t1c = (min(x[i] for x in runs[(k, "t1")]) for i in (0, 1))
            j1, c1 = (min(x[i] for x in runs[(k, "1")]) for i in (0, 1))
            j2, c2 = (min(x[i] for x in runs[(k, "2")]) for i in (0, 1))
            print(f"| {shape} | {tree or 'this'} | {mb:.1f} | {records} | {floor:.2f}/{floor_cpu:.2f} s | "
                  f"{t1:.2f}/{t1c:.2f} s | {j1:.2f}/{c1:.2f} s | **{mb / c1:.1f}** | {j2:.2f}/{c2:.2f} s | "
                  f"{j1 / j2:.2f}x |", flush=True)


def tier2_distinct_table(shapes: list[str], repeat: int, tmp: str, trees: list[str | None] | None = None) -> None:
    """Tier 2 (extractive) on one copy of each real shape, no line repeated: a real dataset's
    records are distinct, so no record gets the help of the token memo or of anything else a run
    learns from the records before it. The file is a few MB, so MB/s here is of the work on the
    records: the file's size over the run's CPU seconds minus those of a run on its first record
    cut to two messages (start-up, imports, the tokenizer's build), best of ``repeat`` each."""
    global TREE
    trees = trees or [TREE]
    out = os.path.join(tmp, "out.jsonl")
    first = os.path.join(tmp, "first.jsonl")
    print("\n| shape | tree | MB | records | summarize -j 1 CPU | start-up | MB/s of the records' work |\n"
          + "|---" * 7 + "|", flush=True)
    for shape in shapes:
        src = dataset(16) if shape == "gen" else shape_source(shape)
        if src is None:
            print(f"| {shape} | (no data) |")
            continue
        with open(src, "rb") as fh, open(first, "wb") as one:
            head = orjson.loads(fh.readline())  # start-up: the first record cut to its first two messages
            one.write(orjson.dumps({**head, "messages": head["messages"][:2]}) + b"\n")
            records = 1 + sum(1 for _ in fh)
        mb = os.path.getsize(src) / 1e6
        cpu: dict[tuple[int, str], list[float]] = {}
        for _ in range(repeat):
            for k, tree in enumerate(trees):
                TREE = tree
                cpu.setdefault((k, "all"), []).append(run_cpu("summarize", "-j", "1", "-q", src, "-o", out)[1])
                cpu.setdefault((k, "one"), []).append(run_cpu("summarize", "-j", "1", "-q", first, "-o", out)[1])
        for k, tree in enumerate(trees):
            whole, one_cpu = min(cpu[(k, "all")]), min(cpu[(k, "one")])
            print(f"| {shape} | {tree or 'this'} | {mb:.1f} | {records} | {whole:.2f} s | {one_cpu:.2f} s | "
                  f"**{mb / max(whole - one_cpu, 1e-3):.1f}** |", flush=True)


def main() -> None:
    global TREE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=400)
    ap.add_argument("--tau-mb", type=float, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-tokens", action="store_true", help="skip the slow runs with token counting")
    ap.add_argument("--shapes", nargs="?", const=",".join(SHAPES), default=None,
                    help=f"only the real-shapes table, for these shapes (default: {','.join(SHAPES)})")
    ap.add_argument("--shape-mb", type=float, default=50, help="size of each shape's file (--shapes)")
    ap.add_argument("--quick", action="store_true", help="the shapes table at 32 MiB each, best of 2 (< 2 min)")
    ap.add_argument("--tier2", nargs="?", const=",".join(SHAPES), default=None,
                    help="only the tier-2 table (summarize, extractive) on one copy of each real shape")
    ap.add_argument("--tier2-distinct", nargs="?", const=",".join(SHAPES), default=None,
                    help="only tier 2 (summarize, extractive) on one copy of each real shape, no line repeated: "
                         "MB/s of the work on the records")
    ap.add_argument("--tree", action="append", default=None,
                    help="run xcompact from this source tree (PYTHONPATH), e.g. a worktree; twice or more "
                         "(--shapes): the trees' runs alternate, one row each ('.' is this one; '.+pure' this "
                         "one with XCOMPACT_PURE_PYTHON=1, without its C parts)")
    args = ap.parse_args()
    trees = [os.path.abspath(t.removesuffix(PURE)) + (PURE if t.endswith(PURE) else "") for t in args.tree] \
        if args.tree else [None]
    TREE = trees[0]
    for tree in trees:  # as pip installs it: bytecode compiled (PYTHONDONTWRITEBYTECODE would else
        # leave each run compiling every module of a fresh tree, and a tree's changed modules)
        compileall.compile_dir(os.path.join((tree or ROOT).removesuffix(PURE), "compactor_cli"), quiet=1)
    tmp = tempfile.mkdtemp(prefix="xcompact-bench-")
    if args.tier2_distinct is not None:
        print(f"{os.cpu_count()} cores; best of {args.repeat}; xcompact from {', '.join(t or ROOT for t in trees)}",
              flush=True)
        tier2_distinct_table(args.tier2_distinct.split(","), args.repeat, tmp, trees)
        return
    if args.tier2 is not None:
        print(f"{os.cpu_count()} cores; best of {args.repeat}; xcompact from {', '.join(t or ROOT for t in trees)}",
              flush=True)
        tier2_table(args.tier2.split(","), args.repeat, tmp, trees)
        return
    if args.quick or args.shapes is not None:
        shapes = (args.shapes or ",".join(SHAPES)).split(",")
        size, repeat = (32.0, 2) if args.quick else (args.shape_mb, args.repeat)
        print(f"{os.cpu_count()} cores; best of {repeat}; xcompact from {', '.join(t or ROOT for t in trees)}",
              flush=True)
        shapes_table(shapes, size, repeat, tmp, tokens=not args.skip_tokens, trees=trees)
        return
    out, rep = os.path.join(tmp, "out.jsonl"), os.path.join(tmp, "r.json")
    src = dataset(args.size_mb)
    size = os.path.getsize(src) / 2**20
    print(f"{src}: {size:.0f} MiB; {os.cpu_count()} cores; best of {args.repeat}", flush=True)
    rows: list[tuple[str, str, str]] = []

    floor = min(_timed(lambda: orjson_floor(src, out)) for _ in range(args.repeat))
    j1 = best(args.repeat, "toolcall", "--no-tokens", "-j", "1", "-q", src, "-o", out, "--report", rep)
    j2 = best(args.repeat, "toolcall", "--no-tokens", "-j", "2", "-q", src, "-o", out, "--report", rep)
    rows.append(("1. floor: orjson load+dump", f"{floor:.2f} s", ""))
    rows.append(("1. toolcall --no-tokens -j 1", f"{j1:.2f} s", f"{j1 / floor:.2f}x floor (target <= 1.2)"))
    rows.append(("2. toolcall --no-tokens -j 2", f"{j2:.2f} s", f"{j1 / j2:.2f}x -j 1 (target >= 1.8)"))
    if not args.skip_tokens:
        t1 = best(1, "toolcall", "-j", "1", "-q", src, "-o", out)
        t2 = best(1, "toolcall", "-j", "2", "-q", src, "-o", out)
        rows.append(("2. toolcall (tokens) -j 1", f"{t1:.2f} s", ""))
        rows.append(("2. toolcall (tokens) -j 2", f"{t2:.2f} s", f"{t1 / t2:.2f}x -j 1 (target >= 1.8)"))

    tau = tau_dataset(args.tau_mb)
    if tau and not args.skip_tokens:
        nt = best(args.repeat, "toolcall", "--no-tokens", "-j", "1", "-q", tau, "-o", out)
        wt = best(args.repeat, "toolcall", "-j", "1", "-q", tau, "-o", out)
        enc = distinct_encode_seconds(tau)
        bound = 1.3 * nt + enc
        rows.append((f"3. tau-bench x{os.path.getsize(tau) / 2**20:.0f} MiB --no-tokens -j 1", f"{nt:.2f} s", ""))
        rows.append(("3. quicktok cl100k_base: distinct texts encoded once", f"{enc:.2f} s", ""))
        rows.append(("3. tau-bench toolcall (tokens) -j 1", f"{wt:.2f} s",
                     f"{wt / (nt + enc):.2f}x (--no-tokens + encode); target <= {bound:.2f} s"))

    one = os.path.join(tmp, "one.json")
    with open(src, "rb") as fh:
        open(one, "wb").write(fh.readline())
    s0 = best(5, "toolcall", "--no-tokens", "-q", one, "-o", out)
    py = min(_timed(lambda: subprocess.run([sys.executable, "-c", "pass"])) for _ in range(5))
    rows.append(("4. start-up: python -c pass", f"{py:.3f} s", ""))
    rows.append(("4. start-up: toolcall one-line --no-tokens", f"{s0:.3f} s", "target <= 0.25 s"))
    for encoding in ("cl100k_base", "o200k_base", "llama3", "qwen"):  # the vocabularies differ in size
        s1 = best(5, "toolcall", "--encoding", encoding, "-q", one, "-o", out)
        rows.append((f"4. start-up: toolcall one-line (tokens, {encoding})", f"{s1:.3f} s", "target <= 0.5 s"))

    for mb in (args.size_mb / 4, args.size_mb):
        path = dataset(mb)
        for argv in (["toolcall", "--no-tokens", "-j", "1"], ["toolcall", "-j", "2"]):
            if "--no-tokens" not in argv and args.skip_tokens:
                continue
            rss = peak_rss_mib(*argv, "-q", path, "-o", out)
            rows.append((f"6. peak RSS {os.path.getsize(path) / 2**20:.0f} MiB {' '.join(argv)}", f"{rss:.0f} MiB", ""))

    print(f"\n| {'row':55} | {'figure':>10} | ratio |\n|---|---|---|")
    for label, fig, ratio in rows:
        print(f"| {label:55} | {fig:>10} | {ratio} |")
    print("\n5. openai backend: python bench/bench_summarize.py --n 200 --skip-extractive")
    os.unlink(out)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
