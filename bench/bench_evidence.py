"""Evidence retention: what a compaction keeps of what a continuing agent needs, per token.

For every real conversation, the probes (``compactor_cli.evidence.probes``: the task's
requirements, the user's later words, files modified, errors met, commands, decisions) are taken
mechanically from the part the classic tier-2 cut replaces (everything before the last
``--keep-recent`` messages, the task included), and looked for in what a model is sent after
each compaction: message contents and tool calls, never xcompact's bookkeeping keys. Methods:

- ``tier1``: ``toolcall`` at its defaults (keep 12);
- ``tier2-before``: ``summarize`` as it was (``--no-keep-task --no-evidence --keep-user-tokens 0``);
- ``tier2``: ``summarize`` at its defaults (the task and the user's later words verbatim, the
  evidence section); ``tier2-2048`` the same with ``--max-summary-tokens 2048``;
- ``compact-half``: ``compact --token-threshold`` half the conversation's tokens;
- ``truncate``: the system message and the most recent messages that fit in the tokens
  ``tier2`` wrote (the baseline with the same budget).

Data: the tuning sets (``../shared/data``'s tau-bench, SWE-agent and Claude Code files, which the
extraction was developed on) and the held-out runs (``raw/mini-swe-agent`` and ``raw/codex``,
minus the two mini-swe-agent runs and the Codex rollout looked at while writing it), reported
apart. Also: routine and boilerplate items among the summaries' items, and language notes on
English-only transcripts.

    python bench/bench_evidence.py [--data ../shared/data] [--json out.json]

With ``--llm N`` (the real model server installed: ``bash tests/llm/setup.sh > /tmp/llm.env && .
/tmp/llm.env``), the first N runs of each data set are also summarised by Qwen2.5-Coder-0.5B
through the CLI as a user runs it (``xcompact summarize --backend openai --base-url URL --model
local --seed 0 --no-cache``, every other option at its default): method ``tier2-model``. Its
probes are scored by exact strings too, which a model's paraphrase cannot meet: the task, the
user's words and the evidence section are xcompact's, deterministic; the rest undercounts.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
from collections import defaultdict
from typing import Any

import orjson

from compactor_cli import formats
from compactor_cli.evidence.evaluate import evaluate
from compactor_cli.evidence.probes import ESSENTIAL, KINDS
from compactor_cli.model.tokens import counter_for
from compactor_cli.status import Status
from compactor_cli.tiers.compact import compact_dump
from compactor_cli.tiers.cut import choose_cut_point
from compactor_cli.tiers.options import Policy
from compactor_cli.tiers.summarize import summarize_dump
from compactor_cli.tiers.toolcall import reclaim_tool_results

HERE = os.path.dirname(os.path.abspath(__file__))
TUNING = ("taubench_gpt-4o-airline.jsonl", "swe-agent.jsonl", "spotter-claude-code.jsonl")
SEEN = ("django__django-14349", "django__django-14238", "rollout-2025-11-12T17-48-11")  # looked at while writing
METHODS = ("tier1", "tier2-before", "tier2", "tier2-2048", "compact-half", "truncate")
KEEP_RECENT = 16
# routine and boilerplate, judged apart from the summariser's own filters
_ROUTINE = re.compile(r"(?:Wall time|Chunk ID|Original token count|Process exited with code|Preparing (?:editable )?"
                      r"metadata|Requirement already satisfied|Collecting |Downloading |Successfully installed|"
                      r"Installing collected|^total \d+|[drwx-]{10}\s+\d|Please always provide EXACTLY ONE action|"
                      r"#!/usr/bin/env|THOUGHT:|```|<returncode>|<output>|No tool calls found)")


def load(data: str) -> dict[str, list[tuple[str, dict]]]:
    """Data set name -> (where, dump) of each conversation."""
    sets: dict[str, list[tuple[str, dict]]] = {}
    for name in TUNING:
        path = os.path.join(data, name)
        if os.path.exists(path):
            with open(path, "rb") as fh:
                sets[name] = [(f"{name}:{i + 1}", orjson.loads(line)) for i, line in enumerate(fh) if line.strip()]
    for label, pattern in (("held-out mini-swe-agent", "raw/mini-swe-agent/*.traj.json"),
                           ("held-out codex", "raw/codex/*.jsonl"),
                           ("held-out claude-code", "raw/claude-code/*.jsonl")):
        runs = []
        for path in sorted(glob.glob(os.path.join(data, pattern))):
            if any(s in path for s in SEEN):
                continue
            for _line, dump, _codec in formats.read_file(path):
                runs.append((os.path.basename(path), dump))
        sets[label] = runs
    return sets


def truncate(dump: dict, budget: int, count: Any) -> list[dict]:
    """The system message and the most recent messages that fit in ``budget`` tokens."""
    messages = dump["messages"]
    system = messages[:1] if messages and messages[0].get("role") == "system" else []
    used = count.conversation(system)
    kept: list[dict] = []
    for m in reversed(messages[len(system):]):
        n = count.message(m)
        if used + n > budget:
            break
        kept.insert(0, m)
        used += n
    return system + kept


def run_one(dump: dict, extra: dict[str, list[dict]] | None = None) -> dict[str, Any] | None:
    """Every method on one conversation, measured by ``evidence.evaluate`` (the implementation
    ``xcompact eval`` uses): the probes of the part any method replaced."""
    counter = counter_for("cl100k_base")
    messages = dump["messages"]
    if len(choose_cut_point(messages, KEEP_RECENT, keep_task=False).head) < 4:
        return None
    before = counter.conversation(messages)
    outs: dict[str, list[dict]] = {}
    notes: dict[str, Any] = {}
    outs["tier1"] = reclaim_tool_results(dump, keep=12)[0]["messages"]
    new, status, det = summarize_dump(dump, keep_task=False, evidence=False, keep_user_tokens=0)
    outs["tier2-before"] = new["messages"]
    new, status, det = summarize_dump(dump)
    outs["tier2"] = new["messages"]
    notes["tier2_status"] = status.value
    notes["summary_tokens"] = det.get("summary_tokens") if status is Status.SUMMARIZED else None
    notes["evidence_tokens"] = det.get("evidence_tokens")
    notes["summary_text"] = new["messages"][0].get("content") if status is Status.SUMMARIZED else ""
    outs["tier2-2048"] = summarize_dump(dump, max_summary_tokens=2048)[0]["messages"]
    outs["compact-half"] = compact_dump(dump, Policy(token_threshold=max(1, before // 2)))[0]["messages"]
    outs["truncate"] = truncate(dump, counter.conversation(outs["tier2"]), counter)
    outs.update(extra or {})
    found = evaluate(messages, outs, counter)
    probes = sum(t for _, t in found["tier1"].retention.values())
    if not probes:
        return None
    result: dict[str, Any] = {"probes": probes, "tokens_before": before, **notes, "methods": {}}
    for method, ev in found.items():
        result["methods"][method] = {"retention": ev.retention, "tokens": ev.tokens_after}
    return result


def summary_items(text: str) -> list[str]:
    body = text[text.find("## system_context"):] if "## system_context" in text else ""
    body = body.split("\n\n[Compaction note", 1)[0].split("\n\n## evidence\n", 1)[0]
    return [line[2:] for line in body.splitlines() if line.startswith("- ")]


def english_only(dump: dict) -> bool:
    users = " ".join(str(m.get("content")) for m in dump["messages"] if m.get("role") == "user")
    letters = [c for c in users if c.isalpha()]
    return sum(1 for c in letters if ord(c) > 0x24F) < 5


def head_tokens(dump: dict) -> int:
    """Tokens of the part the classic cut replaces (what the model is asked to read)."""
    cut = choose_cut_point(dump["messages"], KEEP_RECENT, keep_task=False)
    count = counter_for("cl100k_base")
    return sum(count.message(dump["messages"][i]) for i in cut.head)


def model_outputs(convs: list[tuple[str, dict]], n: int, base_url: str | None, work: str,
                  smallest: bool = False) -> dict[int, tuple[dict, dict]]:
    """(output dump, report item) of the first ``n`` runs with a head (or the ``n`` with the
    smallest heads, in file order), summarised by the model server; outputs already in ``work``
    (an earlier run's) are read, not made again."""
    import subprocess

    chosen = [(k, d) for k, (_, d) in enumerate(convs)
              if len(choose_cut_point(d["messages"], KEEP_RECENT, keep_task=False).head) >= 4]
    if smallest:
        keep = {k for k, _ in sorted(chosen, key=lambda kd: head_tokens(kd[1]))[:n]}
        chosen = [(k, d) for k, d in chosen if k in keep]
    chosen = chosen[:n]
    if not chosen:
        return {}
    os.makedirs(work, exist_ok=True)
    src, out, report = (os.path.join(work, f) for f in ("in.jsonl", "out.jsonl", "report.json"))
    if not (os.path.exists(out) and os.path.exists(report)):
        if base_url is None:
            raise SystemExit(f"{work}: no model outputs there, and no server")
        with open(src, "wb") as fh:
            fh.writelines(orjson.dumps(d) + b"\n" for _, d in chosen)
        subprocess.run(["xcompact", "summarize", "--backend", "openai", "--base-url", base_url,
                        "--summary-model", "local", "--seed", "0", "--no-cache", src, "-o", out, "--report", report],
                       check=False)
    with open(out, "rb") as fh:
        outs = [orjson.loads(line) for line in fh if line.strip()]
    with open(report, "rb") as fh:
        items = orjson.loads(fh.read())["items"]
    return {k: (o, it) for (k, _), o, it in zip(chosen, outs, items, strict=True)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    ap.add_argument("--json", help="write the per-conversation figures here")
    ap.add_argument("--llm", type=int, default=0, metavar="N", help="also the real 0.5B model on N runs per data set")
    ap.add_argument("--llm-work", help="where the model's inputs and outputs go (kept: a later run with the same "
                    "sets reads them instead of asking the model again) [default: bench/data/llm-evidence]")
    ap.add_argument("--llm-smallest", action="store_true",
                    help="with --llm: the N runs with the smallest heads instead of the first N (a CPU model reads "
                         "about 100 tokens a second)")
    ap.add_argument("--n-ctx", type=int, default=32768, help="with --llm: the model server's context window")
    ap.add_argument("--sets", default="", help="only the data sets whose names contain one of these (comma separated)")
    args = ap.parse_args()
    sets = load(args.data)
    if args.sets:
        sets = {k: v for k, v in sets.items() if any(x in k for x in args.sets.split(","))}
    model: dict[str, dict[int, tuple[dict, dict]]] = {}
    if args.llm:
        import contextlib

        work = args.llm_work or os.path.join(HERE, "data", "llm-evidence")
        slug = {name: re.sub(r"[^\w.-]+", "-", name) for name in sets}
        have = all(os.path.exists(os.path.join(work, slug[n], "report.json")) for n in sets)
        sys.path.insert(0, os.path.join(HERE, "..", "tests"))
        from llm import server as llm

        with contextlib.nullcontext(None) if have else llm.start(n_ctx=args.n_ctx) as server:
            for name, convs in sets.items():
                model[name] = model_outputs(convs, args.llm, server.base_url if server else None,
                                            os.path.join(work, slug[name]), args.llm_smallest)
                items = [it for _, it in model[name].values()]
                done = sum(it["status"] == "SUMMARIZED" for it in items)
                own = sum(it["status"] == "SUMMARIZED" and "fallback" not in it for it in items)
                print(f"{name}: summarised {done} of {len(items)} runs with a head: {own} with the model's own "
                      f"sections, {done - own} with the offline sections after its answer could not be used "
                      f"({'; '.join(it.get('self_check', '') for it in items if 'fallback' in it) or '-'})",
                      file=sys.stderr, flush=True)
    methods = METHODS + (("tier2-model",) if args.llm else ())
    everything: dict[str, list[dict]] = {}
    print("retention of probes from the part any method replaced (compactor_cli.evidence.evaluate, as xcompact eval); "
          "essential = task + user + files_modified + errors")
    print("| data set | runs | method | " + " | ".join(KINDS) + " | essential | tokens after/before | "
          "probes kept per 1k tokens |")
    print("|---|---|---|" + "---|" * (len(KINDS) + 3))
    routine_rows = []
    for name, convs in sets.items():
        results = []
        items = bad = lang = english = 0
        extra_tokens = []
        for k, (where, dump) in enumerate(convs):
            if args.llm and k not in model.get(name, {}):
                continue  # with --llm: the runs the model summarised, every method on the same runs
            extra = {"tier2-model": model[name][k][0]["messages"]} if args.llm else None
            r = run_one(dump, extra)
            if r is None:
                continue
            r["where"] = where
            if args.llm:
                item = model[name][k][1]
                r["methods"]["tier2-model"].update(status=item["status"], fallback=item.get("fallback"))
            results.append(r)
            text = r.pop("summary_text")
            for it in summary_items(text):
                items += 1
                bad += bool(_ROUTINE.search(it))
            if english_only(dump):
                english += 1
                lang += "non-Latin script" in text
            if r["summary_tokens"] is not None:
                extra_tokens.append(r["summary_tokens"])
        everything[name] = results
        for method in methods:
            found: dict[str, list[int]] = defaultdict(lambda: [0, 0])
            toks = before = 0
            for r in results:
                for kind, (f, t) in r["methods"][method]["retention"].items():
                    found[kind][0] += f
                    found[kind][1] += t
                toks += r["methods"][method]["tokens"]
                before += r["tokens_before"]
            cells = [f"{100 * found[k][0] / found[k][1]:.0f}%" if found[k][1] else "–" for k in KINDS]
            ess_f = sum(found[k][0] for k in ESSENTIAL)
            ess_t = sum(found[k][1] for k in ESSENTIAL)
            kept = sum(v[0] for v in found.values())
            print(f"| {name} | {len(results)} | {method} | " + " | ".join(cells)
                  + f" | {100 * ess_f / max(1, ess_t):.1f}% | {100 * toks / max(1, before):.0f}% | "
                  f"{1000 * kept / max(1, toks):.1f} |")
        mean_extra = sum(extra_tokens) / max(1, len(extra_tokens))
        routine_rows.append((name, len(results), items, bad, mean_extra, lang, english))
    print("\nsummaries (tier2): routine or boilerplate items (judged by this script's own pattern), mean tokens "
          "of summary + evidence + note (beyond the system prompt, the task and the kept messages)")
    print("| data set | runs | items | routine/boilerplate | share | mean summary tokens | language notes on "
          "English-only runs |")
    print("|---|---|---|---|---|---|---|")
    for name, n, items, bad, mean_extra, lang, english in routine_rows:
        print(f"| {name} | {n} | {items} | {bad} | {100 * bad / max(1, items):.1f}% | {mean_extra:.0f} | "
              f"{lang} of {english} |")
    if args.json:
        with open(args.json, "wb") as fh:
            fh.write(orjson.dumps(everything, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    sys.exit(main())
