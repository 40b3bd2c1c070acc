"""Write a JSONL dataset of generated agent transcripts of about the requested size.

Deterministic for a given seed. Conversations look like coding-agent runs: a system prompt,
user turns, assistant tool calls (some parallel), tool results from tiny to very large (file
views, shell logs, JSON), occasional non-ASCII text and reasoning fields.

    python bench/generate.py --size-mb 100 -o bench/data/agents_100mb.jsonl
"""

from __future__ import annotations

import argparse
import os
import random

import orjson

WORDS = ("the function returns a value when called with arguments from the request handler and "
         "logs an error if the file path does not exist in the repository tree während ünïcode "
         "テスト passes all checks").split()
TOOLS = ["read_file", "bash", "grep", "search_flights", "get_reservation_details", "list_dir", "edit"]


def text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def tool_output(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.5:
        return text(rng, rng.randint(5, 60))
    if kind < 0.9:
        lines = rng.randint(20, 200)
        return "\n".join(f"{i}: {text(rng, rng.randint(3, 12))}" for i in range(lines))
    return orjson.dumps([{"id": rng.randint(0, 10**6), "name": text(rng, 3), "price": rng.random() * 100}
                         for _ in range(rng.randint(50, 400))]).decode()


def conversation(rng: random.Random, idx: int) -> dict:
    messages: list[dict] = [{"role": "system", "content": "You are a coding agent. " + text(rng, 200)}]
    call = 0
    for _ in range(rng.randint(2, 12)):
        messages.append({"role": "user", "content": text(rng, rng.randint(5, 40))})
        for _ in range(rng.randint(1, 8)):
            n = 1 if rng.random() < 0.8 else rng.randint(2, 4)
            ids = [f"call_{idx}_{call + k}" for k in range(n)]
            call += n
            msg = {"role": "assistant", "content": text(rng, 10) if rng.random() < 0.3 else None,
                   "tool_calls": [{"id": cid, "type": "function",
                                   "function": {"name": rng.choice(TOOLS),
                                                "arguments": orjson.dumps({"path": f"src/m{rng.randint(0, 99)}.py"}).decode()}}
                                  for cid in ids]}
            if rng.random() < 0.2:
                msg["reasoning_content"] = text(rng, 30)
            messages.append(msg)
            for cid in ids:
                messages.append({"role": "tool", "tool_call_id": cid, "content": tool_output(rng)})
        messages.append({"role": "assistant", "content": text(rng, rng.randint(10, 80))})
    return {"messages": messages, "tokens_used": rng.randint(1000, 200000), "session": f"s{idx}"}


def generate(path: str, size_mb: float, seed: int = 7) -> int:
    rng = random.Random(seed)
    target = int(size_mb * 1024 * 1024)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    written = count = 0
    with open(path, "wb") as fh:
        while written < target:
            line = orjson.dumps(conversation(rng, count)) + b"\n"
            fh.write(line)
            written += len(line)
            count += 1
    return count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    n = generate(args.output, args.size_mb, args.seed)
    print(f"{args.output}: {n} conversations, {os.path.getsize(args.output) / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
