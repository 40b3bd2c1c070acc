"""Dataset-scale benchmark: throughput against the orjson floor, -j 1 against -j 2, token
counting against tiktoken's own encode time, and peak RSS against file size.

    python bench/bench_scale.py --size-mb 500 --rss-sizes 100,1000

All figures come from one run on one machine; ratios compare against the floor measured in
that same run (plain orjson load+dump of the same file, line by line, written to disk).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_tokens import texts_of  # noqa: E402
from bench_toolcall import orjson_floor  # noqa: E402
from generate import generate  # noqa: E402

RSS_PROBE = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
             "stderr=subprocess.DEVNULL); print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def dataset(size_mb: float) -> str:
    path = os.path.join(HERE, "data", f"agents_{size_mb:g}mb.jsonl")
    if not os.path.exists(path):
        t = time.perf_counter()
        n = generate(path, size_mb)
        print(f"generated {path}: {n} conversations in {time.perf_counter() - t:.0f}s", flush=True)
    return path


def timed(*args: str) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "compactor_cli", *args], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if r.returncode not in (0, 1):
        raise SystemExit(r.stderr.decode()[-2000:])
    return time.perf_counter() - t


def peak_rss_mib(*args: str) -> float:
    out = subprocess.run([sys.executable, "-c", RSS_PROBE, sys.executable, "-m", "compactor_cli", *args],
                         capture_output=True, text=True, check=True).stdout.split()
    return int(out[1]) / 1024  # Linux reports KiB; the largest single process of the run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=500)
    ap.add_argument("--rss-sizes", default="100,1000", help="MB sizes for the peak-RSS runs")
    ap.add_argument("--skip-tokens", action="store_true", help="skip the slow runs with token counting")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="xcompact-bench-")
    out = os.path.join(tmp, "out.jsonl")
    src = dataset(args.size_mb)
    size = os.path.getsize(src) / 2**20
    print(f"\n{src}: {size:.0f} MiB, {os.cpu_count()} cores", flush=True)

    t = time.perf_counter()
    orjson_floor(src, out)
    floor = time.perf_counter() - t
    rows = [("orjson load+dump (floor)", floor)]
    runs = [("toolcall --no-tokens -j 1", ["toolcall", "--no-tokens", "-j", "1"]),
            ("toolcall --no-tokens -j 2", ["toolcall", "--no-tokens", "-j", "2"])]
    if not args.skip_tokens:
        runs += [("toolcall (tokens) -j 1", ["toolcall", "-j", "1"]),
                 ("toolcall (tokens) -j 2", ["toolcall", "-j", "2"]),
                 ("compact --backend extractive -j 1", ["compact", "--backend", "extractive", "-j", "1"]),
                 ("compact --backend extractive -j 2", ["compact", "--backend", "extractive", "-j", "2"])]
    results = {}
    for label, argv in runs:
        results[label] = timed(*argv, "-q", src, "-o", out, "--report", os.path.join(tmp, "r.json"))
        rows.append((label, results[label]))
        print(f"  {label}: {results[label]:.1f}s", flush=True)
    print(f"\n{'what':38} {'seconds':>8} {'MiB/s':>8} {'x floor':>8}")
    for label, secs in rows:
        print(f"{label:38} {secs:8.2f} {size / secs:8.1f} {secs / floor:8.2f}")
    for a, b in [("toolcall --no-tokens -j 1", "toolcall --no-tokens -j 2"),
                 ("toolcall (tokens) -j 1", "toolcall (tokens) -j 2"),
                 ("compact --backend extractive -j 1", "compact --backend extractive -j 2")]:
        if a in results and b in results:
            print(f"speed-up -j 2 over -j 1, {a[:-5]}: {results[a] / results[b]:.2f}x")
    if not args.skip_tokens:
        from compactor_cli.model.tokens import load_encoding

        enc, _ = load_encoding("cl100k_base")
        texts = texts_of(src)
        t = time.perf_counter()
        for s in texts:
            enc.encode_ordinary(s)
        encode = time.perf_counter() - t
        added = results["toolcall (tokens) -j 1"] - results["toolcall --no-tokens -j 1"]
        print(f"token counting adds {added:.1f}s at -j 1; tiktoken's own encode of the same texts: {encode:.1f}s "
              f"(ratio {added / encode:.2f})")

    print("\npeak RSS (largest single process) against file size:")
    for mb in (float(x) for x in args.rss_sizes.split(",") if x):
        path = dataset(mb)
        fsize = os.path.getsize(path) / 2**20
        for argv in (["toolcall", "--no-tokens", "-j", "1"], ["toolcall", "-j", "2"],
                     ["compact", "--backend", "extractive", "-j", "2"]):
            rss = peak_rss_mib(*argv, "-q", path, "-o", out)
            print(f"  {fsize:6.0f} MiB file  {' '.join(argv):40} peak RSS {rss:6.0f} MiB", flush=True)
    os.unlink(out)


if __name__ == "__main__":
    main()
