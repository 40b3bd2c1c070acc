"""Time `xcompact toolcall` on a generated JSONL against plain orjson load+dump of the same file.

The floor is measured in the same run: read each line, orjson.loads, orjson.dumps, write the
line to a file on the same disk. Each figure is the best of --repeat runs (wall time).

    python bench/bench_toolcall.py --size-mb 100
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import orjson

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from generate import generate  # noqa: E402


def orjson_floor(src: str, dst: str) -> None:
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        for line in fin:
            fout.write(orjson.dumps(orjson.loads(line)) + b"\n")


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def xcompact(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "compactor_cli", *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", default=None, help="existing JSONL to use instead of generating one")
    args = ap.parse_args()
    src = args.data or os.path.join(HERE, "data", f"agents_{args.size_mb:g}mb.jsonl")
    if not os.path.exists(src):
        generate(src, args.size_mb)
    size = os.path.getsize(src) / 2**20
    out = tempfile.mkdtemp(prefix="xcompact-bench-")
    dst = os.path.join(out, "out.jsonl")
    floor = best(lambda: orjson_floor(src, dst), args.repeat)
    startup = best(lambda: xcompact("--version"), args.repeat)
    rows = [("orjson load+dump (floor)", floor)]
    for label, extra in [("toolcall --no-tokens -j 1", ["--no-tokens", "-j", "1"]),
                         ("toolcall --originals drop --no-tokens -j 1", ["--no-tokens", "--originals", "drop", "-j", "1"]),
                         ("toolcall (with tokens) -j 1", ["-j", "1"]),
                         ("toolcall (with tokens) -j 2", ["-j", "2"])]:
        rows.append((label, best(lambda extra=extra: xcompact("toolcall", "-q", *extra, src, "-o", dst), args.repeat)))
    print(f"{src}: {size:.1f} MiB; best of {args.repeat}; interpreter start-up {startup:.2f}s (included below)")
    print(f"{'what':44} {'seconds':>8} {'MiB/s':>8} {'x floor':>8}")
    for label, t in rows:
        print(f"{label:44} {t:8.2f} {size / t:8.1f} {t / floor:8.2f}")


if __name__ == "__main__":
    main()
