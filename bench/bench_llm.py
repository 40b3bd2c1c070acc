"""Tier 2 with a real small model, default options: success rate on real agent runs.

Starts llama-cpp-python's server (tests/llm/setup.sh installs it and Qwen2.5-Coder-0.5B-Instruct)
on 127.0.0.1, then for each real data set beside the project (tau-bench, SWE-agent, Claude Code)
takes the first ``--runs`` conversations that have a head to summarise (``--min-head`` messages,
default 1) once tier 1 has run (``xcompact toolcall`` with its defaults, as ``compact`` does before it
summarises), and runs

    xcompact summarize --backend openai --base-url URL --model local --seed 0 --no-cache

with every other option at its default. Per data set: runs, SUMMARIZED, repaired, model calls per
summary, seconds per summary (wall time of the run / runs), and two checks of every output: tool
pairing (the project's own checks) and whether the same server takes the compacted messages as
a chat request (sent to a second instance with a 256-token context: its template and request
validation run, and it refuses only for length, so no prompt is evaluated). llama-cpp-python
0.3.36 refuses ``content: null`` in an assistant message with tool calls, which the OpenAI API
allows and the real inputs hold, so such content is sent as "" there, and the same check of the
inputs is reported beside.

    bash tests/llm/setup.sh > /tmp/llm.env && . /tmp/llm.env
    python bench/bench_llm.py [--data ../shared/data] [--runs 10] [--sets tau,swe,cc]
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
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from llm import server as llm  # noqa: E402

from compactor_cli.model.checks import check_pairing  # noqa: E402
from compactor_cli.tiers.cut import choose_cut_point  # noqa: E402
from compactor_cli.tiers.toolcall import reclaim_tool_results  # noqa: E402

SETS = {"tau": "taubench_gpt-4o-airline.jsonl", "swe": "swe-agent.jsonl", "cc": "spotter-claude-code.jsonl"}
MIN_HEAD = 1
OWNED = ("compacted_tool_results", "summarized_messages", "compaction_counter", "xcompact", "tokens_used")


def select(path: str, runs: int, smallest: bool = False, min_head: int = MIN_HEAD) -> list[bytes]:
    """The first ``runs`` lines whose conversation has a head of ``min_head``+ messages after tier 1
    (``smallest``: the ``runs`` such lines with the fewest head characters, in file order)."""
    found = []
    with open(path, "rb") as fh:
        for line in fh:
            dump = orjson.loads(line)
            reclaimed, _ = reclaim_tool_results(dump)
            messages = reclaimed["messages"]
            head = choose_cut_point(messages).head
            if len(head) >= min_head:
                size = sum(len(orjson.dumps(messages[i])) for i in head)
                found.append((size, len(found), line if line.endswith(b"\n") else line + b"\n"))
            if len(found) == runs and not smallest:
                break
    if smallest:
        found = sorted(sorted(found)[:runs], key=lambda f: f[1])
    return [line for _, _, line in found]


def xcompact(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, text=True)


def for_llama_cpp(messages: list[dict]) -> list[dict]:
    """llama-cpp-python 0.3.36 refuses ``content: null`` in an assistant message with tool calls
    (the OpenAI API allows it, and the real inputs have it): such content is sent as ""."""
    return [dict(m, content="") if m.get("content") is None else m for m in messages]


def accepted(check_url: str, messages: list[dict]) -> bool:
    """The server validates the request and applies its chat template; with a 256-token context it
    then refuses for length only (a request it cannot take fails before that, differently)."""
    status, body = llm.chat(check_url, {"model": "local", "messages": for_llama_cpp(messages), "max_tokens": 1,
                                        "temperature": 0}, timeout=120)
    text = orjson.dumps(body).decode()
    return status == 200 or (status == 400 and "context_length_exceeded" in text)


def acceptance(check_url: str, work: str, name: str) -> tuple[int, int]:
    """(outputs the server takes, inputs it takes) among the conversations a set summarised."""
    def lines(x: str) -> list[dict]:
        return [orjson.loads(v) for v in open(os.path.join(work, f"{name}.{x}"), "rb").read().splitlines()]

    items = orjson.loads(open(os.path.join(work, f"{name}.report.json"), "rb").read())["items"]
    done = [i for i, it in enumerate(items) if it["status"] == "SUMMARIZED"]
    outs, ins = lines("out.jsonl"), lines("t1.jsonl")
    return (sum(accepted(check_url, outs[i]["messages"]) for i in done),
            sum(accepted(check_url, ins[i]["messages"]) for i in done))


def run_set(name: str, path: str, runs: int, url: str, check_url: str, work: str, smallest: bool = False,
            min_head: int = MIN_HEAD) -> dict:
    lines = select(path, runs, smallest, min_head)
    src, t1, out, report = (os.path.join(work, f"{name}.{x}") for x in ("in.jsonl", "t1.jsonl", "out.jsonl", "report.json"))
    with open(src, "wb") as fh:
        fh.writelines(lines)
    res = xcompact("toolcall", "-q", src, "-o", t1)
    assert res.returncode == 0, res.stderr
    started = time.monotonic()
    res = xcompact("summarize", t1, "--backend", "openai", "--base-url", url, "--summary-model", "local", "--seed", "0",
                   "--no-cache", "-o", out, "--report", report)
    seconds = time.monotonic() - started
    doc = orjson.loads(open(report, "rb").read())
    items = doc["items"]
    outs = [orjson.loads(x) for x in open(out, "rb").read().splitlines()]
    summarized = [i for i, it in enumerate(items) if it["status"] == "SUMMARIZED"]
    pairing_ok = sum(1 for i in summarized
                     if not [p for p in check_pairing(outs[i]["messages"]) if "used again" not in p.message])
    accept_ok, accept_in = acceptance(check_url, work, name)
    calls = [items[i].get("model_calls", 0) for i in summarized]
    failures = [(it["line"], it["status"], it.get("error") or it.get("reason")) for it in items
                if it["status"] != "SUMMARIZED"]
    warnings = [x for x in res.stderr.splitlines() if "structured output" in x or "context window" in x]
    return {"set": name, "runs": len(items), "summarized": len(summarized),
            "repaired": sum(1 for i in summarized if items[i].get("repaired")),
            "calls_per_summary": sum(calls) / max(1, len(calls)), "seconds_per_summary": seconds / max(1, len(items)),
            "pairing_ok": pairing_ok, "accepted": accept_ok, "inputs_accepted": accept_in, "failures": failures,
            "warnings": warnings,
            "structured": sorted({str(items[i].get("structured")) for i in summarized}),
            "summary_tokens": [items[i].get("summary_tokens") for i in summarized], "exit": res.returncode}


def print_table(results: list[dict]) -> None:
    """The markdown table of bench/README.md. NOTHING_TO_CONDENSE (a head smaller than any summary
    of it) is not a failure; success is SUMMARIZED among the runs that are not that."""
    print("| data set | runs | SUMMARIZED | nothing to condense | failed | repaired | model calls / summary | "
          "s / run | pairing valid | accepted by the server (inputs) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        small = sum(1 for f in r["failures"] if f[1] == "NOTHING_TO_CONDENSE")
        failed = r["runs"] - r["summarized"] - small
        print(f"| {SETS[r['set']]} | {r['runs']} | {r['summarized']} | {small} | {failed} | {r['repaired']} | "
              f"{r['calls_per_summary']:.2f} | {r['seconds_per_summary']:.0f} | {r['pairing_ok']}/{r['summarized']} | "
              f"{r['accepted']}/{r['summarized']} ({r['inputs_accepted']}/{r['summarized']}) |")
    runs = sum(r["runs"] for r in results)
    ok = sum(r["summarized"] for r in results)
    small = sum(1 for r in results for f in r["failures"] if f[1] == "NOTHING_TO_CONDENSE")
    print(f"| all | {runs} | {ok} ({100 * ok / max(1, runs - small):.0f}% of {runs - small} with room for a summary) "
          f"| {small} | {runs - ok - small} | | | | | |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--sets", default="tau,swe,cc")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--work", help="keep the inputs, outputs and reports in this directory")
    ap.add_argument("--min-head", type=int, default=MIN_HEAD, help="messages a head needs to be measured")
    ap.add_argument("--n-ctx", type=int, default=8192, help="the server's context window (Qwen2.5-Coder takes 32768)")
    ap.add_argument("--smallest", default="", help="sets (e.g. cc) whose runs are those with the smallest heads")
    ap.add_argument("--table", nargs="+", metavar="JSON", help="only print the table of earlier --json files")
    ap.add_argument("--accept-only", action="store_true",
                    help="only check, in --work, which outputs (and inputs) the server takes as chat requests")
    args = ap.parse_args()
    if args.table:
        print_table([r for path in args.table for r in orjson.loads(open(path, "rb").read())])
        return
    if args.accept_only:
        with llm.start(n_ctx=256) as check:
            for key in args.sets.split(","):
                if os.path.exists(os.path.join(args.work, f"{key}.report.json")):
                    print(key, *acceptance(check.base_url, args.work, key))
        return
    results = []
    if args.work:
        os.makedirs(args.work, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, llm.start(n_ctx=args.n_ctx) as server, llm.start(n_ctx=256) as check:
        work = args.work or tmp
        for key in args.sets.split(","):
            r = run_set(key, os.path.join(args.data, SETS[key]), args.runs, server.base_url, check.base_url, work,
                        key in args.smallest.split(","), args.min_head)
            results.append(r)
            print(orjson.dumps(r).decode(), file=sys.stderr, flush=True)
    print_table(results)
    if args.json:
        with open(args.json, "wb") as fh:
            fh.write(orjson.dumps(results, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
