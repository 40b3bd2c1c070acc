"""Tier-2 timings.

1. The extractive backend on the bundled real transcripts (fixtures/, and ../shared/data when
   it is there): wall time per conversation of `xcompact summarize --backend extractive`.
   Then one generated conversation of --long messages (default 100,000), so a step that grows
   faster than the conversation shows (the open-question scan once took 271 s there).
2. The openai backend on N generated conversations against a local chat-completions server
   (tests/chat_server.py) answering after a fixed latency, at --concurrency 1 and 16, against
   the ideal N x latency / concurrency.

3. ``--replay``: the openai backend against the recorded answers of a real small model
   (fixtures/llm-answers: Qwen2.5-Coder-0.5B-Instruct behind llama.cpp, 23 requests of 10
   conversations), replayed by a loopback server with the recording's options: the share of
   conversations that end SUMMARIZED with the eight sections, model calls per summary, repair
   turns. The recording holds no answers to repair turns; each row says what answers them
   (tests/chat_server.py, ``Replay``): ``none`` (no repair possible: tolerant reading alone),
   ``again`` (the model repeats its answer), ``nearest`` (its recorded answer to the most similar
   other request), ``sections`` (its own recorded text for exactly the sections asked for),
   ``scripted`` (the asked-for sections, scripted: the upper bound). ``--before DIR`` adds the
   same run of an older source tree (e.g. ``git archive <commit> | tar -x -C DIR``).

    python bench/bench_summarize.py [--n 200] [--latency 0.1] [--long 100000] [--skip-extractive]
    python bench/bench_summarize.py --replay [--before DIR]
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

import orjson

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))


def xcompact(*args: str, env: dict | None = None) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "compactor_cli", *args], check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    return time.perf_counter() - t


def count_records(path: str) -> int:
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip()) if path.endswith(".jsonl") else 1


def small_conversation(i: int) -> dict:
    messages = [{"role": "system", "content": "You are a support agent."}]
    for r in range(12):
        messages.append({"role": "user", "content": f"Conversation {i}, question {r}: where is order A{i}{r}?"})
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}_{r}", "type": "function", "function": {"name": "lookup", "arguments": f'{{"o": "A{i}{r}"}}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}_{r}", "content": f"order A{i}{r}: shipped " + "x" * 400})
        messages.append({"role": "assistant", "content": f"Order A{i}{r} has shipped."})
    return {"messages": messages}


def long_conversation(n: int) -> dict:
    """One support conversation of ``n`` messages after its system prompt: questions, lookups,
    answers that end with a question (so every message takes part in the open-question scan)."""
    messages = [{"role": "system", "content": "You are a support agent."}]
    for i in range(n):
        r = i % 4
        if r == 0:
            messages.append({"role": "user", "content": f"Can you check order A{i}? I prefer email updates."})
        elif r == 1:
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": f'{{"o": "A{i}"}}'}}]})
        elif r == 2:
            messages.append({"role": "tool", "tool_call_id": f"c{i - 1}", "content": f"order A{i}: shipped, 3 items, $12.50"})
        else:
            messages.append({"role": "assistant", "content": f"Order A{i} has shipped. I will check the next one. Anything else?"})
    return {"messages": messages}


def replay(before: str | None) -> None:
    """Success rate of the openai backend on the recorded real answers."""
    from chat_server import ChatServer, Replay, markdown_only

    fixtures = os.path.join(ROOT, "fixtures", "llm-answers")
    with open(os.path.join(fixtures, "qwen2.5-coder-0.5b.jsonl"), "rb") as fh:
        recording = [orjson.loads(line) for line in fh]
    with open(os.path.join(fixtures, "index.json"), "rb") as fh:
        groups = [item["exchanges"] for item in orjson.loads(fh.read()) if item["exchanges"]]
    src = os.path.join(fixtures, "conversations.jsonl")
    tmp = tempfile.mkdtemp(prefix="xcompact-replay-")
    runs = [("before: " + os.path.basename(os.path.abspath(before)), before, "again", False)] if before else []
    runs += [("tolerant reading alone (a repair turn gets no answer)", None, "none", False),
             ("repair answered by the same recorded answer", None, "again", False),
             ("repair answered by the recorded answer to the most similar other request", None, "nearest", False),
             ("repair answered by the model's own recorded text for the asked sections", None, "sections", False),
             ("repair answered by the asked sections, scripted (upper bound)", None, "scripted", False),
             ("as above, --structured auto, server rejects response_format", None, "scripted", True)]
    print("openai backend on the recorded answers of Qwen2.5-Coder-0.5B (llama.cpp), 9 conversations with a head:")
    print("| run | SUMMARIZED | share | requests | repair turns | model calls per summary |")
    print("|---|---|---|---|---|---|")
    for name, tree, policy, reject in runs:
        rep = Replay(recording, groups, repair=policy)
        report = os.path.join(tmp, "report.json")
        env = {"PYTHONPATH": os.path.abspath(tree)} if tree else {}
        with ChatServer(markdown_only(rep) if reject else rep) as server:
            args = ["summarize", "-q", "--backend", "openai", "--base-url", server.base_url, "--summary-model", "local",
                    "--keep-recent", "6", "--summary-input-tokens", "4000", "--max-summary-tokens", "600",
                    "--concurrency", "1", "--no-cache", src, "-o", os.path.join(tmp, "out.jsonl"), "--report", report]
            if not reject:
                args[1:1] = ["--structured", "markdown"]
            subprocess.run([sys.executable, "-m", "compactor_cli", *args], check=False, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env={**os.environ, **env}, cwd=os.path.abspath(tree) if tree else None)
            n_requests = len(server.requests)
        with open(report, "rb") as fh:
            items = orjson.loads(fh.read())["items"]
        done = [i for i in items if i["status"] == "SUMMARIZED"]
        with_head = [i for i in items if i["status"] != "NOTHING_TO_CONDENSE"]
        calls = sum(i["model_calls"] for i in done) / max(1, len(done))
        print(f"| {name} | {len(done)}/{len(with_head)} | {100 * len(done) / len(with_head):.0f}% | {n_requests} | "
              f"{rep.repairs} | {calls:.2f} |")
        assert rep.unmatched == 0, "a request the recording does not hold"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--long", type=int, default=100_000, help="messages of the one long conversation (0: skip)")
    ap.add_argument("--skip-extractive", action="store_true")
    ap.add_argument("--replay", action="store_true", help="only the success rate on the recorded real answers")
    ap.add_argument("--before", help="with --replay: an older source tree to compare with")
    args = ap.parse_args()
    if args.replay:
        replay(args.before)
        return
    tmp = tempfile.mkdtemp(prefix="xcompact-bench-")

    files = sorted(glob.glob(os.path.join(ROOT, "fixtures", "*.json*")))
    shared = sorted(glob.glob(os.path.join(ROOT, "..", "shared", "data", "*.jsonl")))
    if not args.skip_extractive:
        print("extractive backend (wall time per conversation, start-up included):")
    for path in [] if args.skip_extractive else files + shared:
        n = count_records(path)
        dt = xcompact("summarize", "-q", "--backend", "extractive", path, "-o", os.path.join(tmp, "o" + os.path.splitext(path)[1]))
        print(f"  {os.path.relpath(path, ROOT):45} {n:4} conversations {dt:7.2f}s  {1000 * dt / n:7.1f} ms/conversation")
    if not args.skip_extractive and args.long:
        path = os.path.join(tmp, "long.json")
        with open(path, "wb") as fh:
            fh.write(orjson.dumps(long_conversation(args.long)))
        dt = xcompact("summarize", "-q", "--backend", "extractive", path, "-o", os.path.join(tmp, "long-out.json"))
        print(f"  one conversation of {args.long:,} messages ({os.path.getsize(path) / 2**20:.1f} MiB) {dt:7.2f}s")

    from chat_server import ChatServer

    src = os.path.join(tmp, "small.jsonl")
    with open(src, "wb") as fh:
        for i in range(args.n):
            fh.write(orjson.dumps(small_conversation(i)) + b"\n")
    print(f"openai backend, {args.n} conversations, server latency {args.latency * 1000:.0f} ms:")
    with ChatServer(latency=args.latency) as server:
        for conc in (1, 16):
            dt = xcompact("summarize", "-q", "--backend", "openai", "--base-url", server.base_url, "--no-cache",
                          "--keep-recent", "8", "--concurrency", str(conc), src, "-o", os.path.join(tmp, "s.jsonl"))
            ideal = args.n * args.latency / conc
            print(f"  --concurrency {conc:2}: {dt:6.2f}s  ideal {ideal:5.2f}s  ratio {dt / ideal:5.2f}")
        print(f"  requests served: {len(server.requests)}, most in flight: {server.max_in_flight}")


if __name__ == "__main__":
    main()
