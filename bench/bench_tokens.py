"""tiktoken's own encode time over the texts xcompact counts, to compare with the cost that
`toolcall` pays with token counting (bench_toolcall.py: with tokens minus --no-tokens).

    python bench/bench_tokens.py --size-mb 100
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import orjson

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from generate import generate  # noqa: E402


def texts_of(path: str) -> list[str]:
    out: list[str] = []
    for line in open(path, "rb"):
        for m in orjson.loads(line)["messages"]:
            out.append(m["role"])
            c = m.get("content")
            if isinstance(c, str):
                out.append(c)
            elif isinstance(c, list):
                out.extend(p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
            for key in ("name", "reasoning", "reasoning_content"):
                if isinstance(m.get(key), str):
                    out.append(m[key])
            for call in m.get("tool_calls") or ():
                out.append(call["function"]["name"])
                out.append(call["function"]["arguments"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=100)
    args = ap.parse_args()
    src = os.path.join(HERE, "data", f"agents_{args.size_mb:g}mb.jsonl")
    if not os.path.exists(src):
        generate(src, args.size_mb)
    from compactor_cli.model.tokens import load_encoding

    enc, _ = load_encoding("cl100k_base")
    texts = texts_of(src)
    t = time.perf_counter()
    n = sum(len(enc.encode_ordinary(s)) for s in texts)
    dt = time.perf_counter() - t
    print(f"{len(texts)} texts, {sum(map(len, texts)) / 2**20:.1f} M chars, {n:,} tokens: "
          f"quicktok encode_ordinary {dt:.2f}s")


if __name__ == "__main__":
    main()
