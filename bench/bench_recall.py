"""Planted-fact recall of the summarisers on real transcripts.

1. Planted facts. Into the head (the part a summary replaces) of every conversation of the
   tau-bench, SWE-agent and Claude Code recordings in ../shared/data, plant six facts, one of
   each kind: a file path, a number with its unit, a preference, a decision, an open question,
   an identifier, in the words and places a user or a tool would put them (a sentence added to
   a user's or the assistant's message, a line inside a tool result; a new user turn when the
   head has none). Every fact has a needle: the words a useful summary must keep (``OPS-4821``,
   ``I prefer window seats over aisle seats``). Recall = share of needles found in the summary,
   per data set and per kind, for the extractive backend at ``--budget`` tokens. Seeded: the same
   figures on every machine.
2. Hand-picked facts (``--answers``). The recorded answers of a real model (fixtures/llm-answers)
   cannot hold planted facts, so both summarisers are compared on the facts a reader would want
   kept from the 9 recorded conversations (listed in GOLD below, picked by reading their heads):
   the model's summaries as the tier-2 driver would write them (replayed, tolerant reading and
   repair turn included) against the extractive backend at the same budget (600 tokens).

3. Routine output. The share of key_facts items that are routine tool output (``ls`` listings,
   pip/apt/git progress, bare "ERRORS:" headings) on the real conversations as they are, judged
   by ``routine`` below (written apart from the summariser's own filter).

    python bench/bench_recall.py [--data ../shared/data] [--budget 1024] [--keep-recent 16] [--answers]
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import re
import sys
import zlib
from collections import defaultdict

import orjson

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from compactor_cli.status import Status  # noqa: E402
from compactor_cli.tiers.cut import choose_cut_point  # noqa: E402
from compactor_cli.tiers.summarize import summarize_dump  # noqa: E402

DATA_SETS = ("taubench_gpt-4o-airline.jsonl", "swe-agent.jsonl", "spotter-claude-code.jsonl")
KINDS = ("path", "number", "preference", "decision", "open question", "identifier")
MIN_HEAD = 4  # a head of fewer messages is no place to hide six facts

THINGS = ["retry queue", "billing job", "seat map cache", "parser module", "export task", "loyalty sync", "audit log",
          "fare rules table"]
OPTIONS = ["Redis", "a cron schedule", "batch mode", "the v2 endpoint", "async workers", "a read replica"]
VERBS = ["migrate", "rebuild", "pause", "split", "archive", "shard"]
PAIRS = [("window seats", "aisle seats"), ("tabs", "spaces"), ("email updates", "phone calls"),
         ("morning flights", "evening flights"), ("small commits", "large commits"), ("pytest", "unittest")]
NEVER = ["change the payment method", "push to the main branch", "delete old backups", "upgrade the cabin class",
         "touch the database schema", "rename public functions"]
ALWAYS = ["keep the receipts as PDF", "run the linter before committing", "use the corporate card",
          "write a changelog entry", "book refundable fares", "add a regression test"]
FEATURES = ["partial refunds", "dry runs", "unicode names", "parallel uploads", "resumable transfers"]
PERIODS = ["hourly", "daily", "weekly", "on demand"]
FIRST = ["nora", "omar", "lena", "ivo", "maya", "theo"]
LAST = ["quist", "varga", "holm", "ferreira", "okafor", "lind"]


def _path(rng: random.Random) -> str:
    top = rng.choice(["config", "data", "deploy", "docs", "scripts", "/srv/app", "/var/exports"])
    mid = rng.choice(["staging", "archive", "overlays", "reports", "nightly"])
    stem = rng.choice(["settings", "ledger", "roster", "manifest", "baseline"])
    return f"{top}/{mid}/{stem}_{rng.randint(100, 999)}.{rng.choice(['yaml', 'csv', 'json', 'toml', 'md'])}"


def _code(rng: random.Random) -> str:
    while True:
        code = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6))
        if re.search(r"\d", code) and re.search(r"[A-Z]", code):
            return code


def fact(kind: str, rng: random.Random) -> tuple[str, str, str]:
    """(role, sentence, needle) of one fact of ``kind``, in one of the forms people and tools use."""
    form = rng.randrange(3)
    if kind == "path":
        p = _path(rng)
        return [("user", f"The file you need is {p}, please look there.", p),
                ("tool", f"Saved the export to {p}", p),
                ("tool", f"warning: settings in {p} override the defaults", p)][form]
    if kind == "number":
        n = rng.randint(1100, 98000)
        cur = rng.choice("$€£")
        return [("user", f"My budget for all of this is {cur}{n:,} at most.", f"{cur}{n:,}"),
                ("tool", f"Processed {n:,} records in {rng.randint(2, 90)}.{rng.randint(0, 9)} s", f"{n:,} records"),
                ("tool", f"Peak memory use: {n} MB", f"{n} MB")][form]
    if kind == "preference":
        a, b = rng.choice(PAIRS)
        x, y = rng.choice(NEVER), rng.choice(ALWAYS)
        return [("user", f"I prefer {a} over {b}, please stick to that.", f"I prefer {a} over {b}"),
                ("user", f"Please never {x} without asking me first.", f"never {x} without asking me first"),
                ("user", f"Always {y}, that is important to me.", f"Always {y}")][form]
    if kind == "decision":
        thing, opt, verb = rng.choice(THINGS), rng.choice(OPTIONS), rng.choice(VERBS)
        return [("assistant", f"I'll switch the {thing} to {opt} instead of the current setup.", f"switch the {thing} to {opt}"),
                ("assistant", f"We decided to {verb} the {thing} first.", f"decided to {verb} the {thing} first"),
                ("assistant", f"The plan is to {verb} the {thing} tonight.", f"plan is to {verb} the {thing} tonight")][form]
    if kind == "open question":
        thing = rng.choice(THINGS)
        o1, o2 = rng.sample(PERIODS, 2)
        feat = rng.choice(FEATURES)
        return [("assistant", f"Should the {thing} run {o1} or {o2}?", f"Should the {thing} run {o1} or {o2}"),
                ("user", f"Can you find out whether the {thing} supports {feat}?", f"whether the {thing} supports {feat}"),
                ("user", f"Do we know if the {thing} supports {feat}?", f"if the {thing} supports {feat}")][form]
    if kind == "identifier":
        ticket = f"{rng.choice(['OPS', 'INC', 'BILL', 'REQ'])}-{rng.randint(1000, 9999)}"
        code = _code(rng)
        cid = f"{rng.choice(FIRST)}_{rng.choice(LAST)}_{rng.randint(1000, 9999)}"
        return [("tool", f"ticket_id: {ticket}", ticket),
                ("user", f"My confirmation code is {code}.", code),
                ("tool", f'{{"customer_id": "{cid}", "status": "active"}}', cid)][form]
    raise ValueError(kind)


def _text_of(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(p.get("text", "") for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _append(m: dict, sentence: str, rng: random.Random, as_line: bool) -> None:
    """Add ``sentence`` to a message: a line inside a tool result, a sentence after a turn."""
    c = m.get("content")
    if isinstance(c, list):  # list-of-parts content: into its first text part
        part = next((p for p in c if isinstance(p, dict) and isinstance(p.get("text"), str)), None)
        if part is None:
            c.append({"type": "text", "text": sentence})
            return
        holder, key = part, "text"
    else:
        holder, key = m, "content"
    text = holder.get(key) or ""
    if as_line and "\n" in text:
        lines = text.split("\n")
        at = rng.randint(1, len(lines) - 1)
        holder[key] = "\n".join(lines[:at] + [sentence] + lines[at:])
    elif as_line:
        holder[key] = (text + "\n" + sentence) if text else sentence
    else:
        holder[key] = (text.rstrip() + " " + sentence) if text.strip() else sentence


def plant(dump: dict, seed: int, keep: int) -> tuple[dict, list[tuple[str, str]]] | None:
    """``dump`` with one fact of each kind planted in its head; (dump, [(kind, needle)]), or None
    when the head is too small."""
    rng = random.Random(seed)
    msgs = copy.deepcopy(dump["messages"])
    cut = choose_cut_point(msgs, keep)
    head = [i for i in cut.head if i != cut.forced_user]
    if len(head) < MIN_HEAD:
        return None
    planted, inserts = [], []
    for kind in KINDS:
        role, sentence, needle = fact(kind, rng)
        by_role = {r: [i for i in head if msgs[i].get("role") == r and (r != "tool" or _text_of(msgs[i]))]
                   for r in ("user", "assistant", "tool")}
        if by_role.get(role):
            _append(msgs[rng.choice(by_role[role])], sentence, rng, as_line=role == "tool")
        elif role == "tool" and by_role["user"]:
            _append(msgs[rng.choice(by_role["user"])], sentence, rng, as_line=False)
        else:  # a new user turn, before a message that is no tool result (tool pairing stays intact)
            spots = [i for i in head if msgs[i].get("role") != "tool"] or [head[0]]
            inserts.append((rng.choice(spots), {"role": "user", "content": sentence}))
        planted.append((kind, needle))
    for at, m in sorted(inserts, key=lambda x: -x[0]):
        msgs.insert(at, m)
    new = {**dump, "messages": msgs}
    cut = choose_cut_point(msgs, keep)
    head_text = "\n".join(_text_of(msgs[i]) for i in cut.head)
    rest = "\n".join(_text_of(m) for i, m in enumerate(msgs) if i not in set(cut.head))
    kept = [(k, n) for k, n in planted if n in head_text and n not in rest]
    return new, kept


def load(path: str) -> list[dict]:
    with open(path, "rb") as fh:
        return [orjson.loads(line) for line in fh if line.strip()]


def planted_recall(data: str, budget: int, keep: int, seeds: int) -> None:
    print(f"planted-fact recall, extractive backend, --max-summary-tokens {budget}, --keep-recent {keep}, "
          f"{seeds} plantings per conversation:")
    print(f"| data set | conversations | facts | {' | '.join(KINDS)} | all | mean summary tokens |")
    print("|---|---|---|" + "---|" * (len(KINDS) + 2))
    all_hits: dict[str, list[int]] = defaultdict(list)
    for name in DATA_SETS:
        path = os.path.join(data, name)
        if not os.path.exists(path):
            print(f"| {name} | (missing) |")
            continue
        hits: dict[str, list[int]] = defaultdict(list)
        n_conv, tokens = 0, []
        for line, dump, seed in ((ln, d, s) for ln, d in enumerate(load(path), 1) for s in range(seeds)):
            res = plant(dump, seed=zlib.crc32(f"{name}:{line}:{seed}".encode()), keep=keep)
            if res is None:
                continue
            planted_dump, facts = res
            out, status, details = summarize_dump(planted_dump, keep_recent=keep, max_summary_tokens=budget)
            if status is not Status.SUMMARIZED:
                print(f"  {name}:{line}: {status.value} {details.get('error')}", file=sys.stderr)
                continue
            n_conv += 1
            summary = out["messages"][0]["content"]
            tokens.append(details["summary_tokens"])
            for kind, needle in facts:
                hits[kind].append(needle in summary)
                all_hits[kind].append(needle in summary)
        n = sum(len(v) for v in hits.values())
        per = " | ".join(f"{100 * sum(hits[k]) / len(hits[k]):.0f}%" if hits[k] else "–" for k in KINDS)
        total = sum(sum(v) for v in hits.values()) / max(1, n)
        print(f"| {name} | {n_conv // seeds} | {n} | {per} | **{100 * total:.1f}%** | {sum(tokens) / max(1, len(tokens)):.0f} |")
    n = sum(len(v) for v in all_hits.values())
    per = " | ".join(f"{100 * sum(all_hits[k]) / len(all_hits[k]):.0f}%" if all_hits[k] else "–" for k in KINDS)
    print(f"| all | | {n} | {per} | **{100 * sum(sum(v) for v in all_hits.values()) / max(1, n):.1f}%** | |")


# What a reader continuing each recorded conversation needs from its head (read by hand; regular
# expressions, case-insensitive, so a paraphrase that keeps the fact counts). Keyed by
# (source file, line) of fixtures/llm-answers/index.json.
GOLD: dict[tuple[str, int], list[tuple[str, str]]] = {
    ("swe-agent.jsonl", 2): [("path", r"server\.py"), ("number", r"\be\W{0,3}=\W{0,3}5|exponent\W+(?:e\W+)?(?:of\W+)?5"),
                             ("identifier", r"crypto\.chal\.csaw\.io"), ("number", r"\b1337\b"),
                             ("decision", r"hastad|broadcast attack|chinese remainder|\bCRT\b")],
    ("swe-agent.jsonl", 3): [("path", r"eps1\.1_ones-and-zer0es"), ("path", r"eps1\.9_zer0-day"),
                             ("identifier", r"people always make the best exploits"), ("decision", r"base64"),
                             ("error", r"wrong flag")],
    ("swe-agent.jsonl", 5): [("path", r"flash_c8429a430278283c0e571baebca3d139\.img"), ("error", r"no such file")],
    ("swe-agent.jsonl", 6): [("path", r"networking\.pcap"), ("identifier", r"telnet"), ("number", r"\b59\b")],
    ("spotter-claude-code.jsonl", 3): [("path", r"transcript_renderer\.ex"), ("path", r"session_live\.ex"),
                                       ("path", r"subagent_live\.ex"), ("path", r"app\.js"),
                                       ("error", r"does not exist|no such file|no files found")],
    ("spotter-claude-code.jsonl", 8): [("path", r"data_case\.ex"), ("path", r"tmux\.ex"), ("path", r"session_registry\.ex"),
                                       ("error", r"EISDIR|illegal operation on a directory"),
                                       ("identifier", r"test_helper\.exs|ExUnit\.start")],
    ("taubench_gpt-4o-airline.jsonl", 11): [("identifier", r"mia_kim_4397"), ("identifier", r"H9ZU1C"),
                                            ("decision", r"cannot be cancell?ed|not be cancell?ed|24-hour|cancellation window"),
                                            ("identifier", r"HAT069"), ("number", r"\$\s?51\b|\b51\b"),
                                            ("preference", r"gift card"), ("preference", r"free allowance|no (?:extra )?bag"),
                                            ("preference", r"no (?:travel )?insurance")],
    ("taubench_gpt-4o-airline.jsonl", 12): [("identifier", r"ivan_muller_7015"), ("identifier", r"G72NSF"),
                                            ("identifier", r"ivan smith"), ("number", r"\$?\b375\b"),
                                            ("error", r"does not add up"),
                                            ("preference", r"more than \$?100|gift card and (?:the )?credit card"),
                                            ("preference", r"(?:don't|do not|no) (?:need )?insurance")],
    ("taubench_gpt-4o-airline.jsonl", 13): [("identifier", r"amelia_sanchez_4739"), ("identifier", r"3FRNFB"),
                                            ("path", r"MCO.{0,30}CLT"), ("preference", r"refund"),
                                            ("open question", r"reservation id")],
}


def answers_recall(policies: list[str]) -> None:
    """Hand-picked facts of the 9 recorded conversations: the replayed model against the extractive."""
    from chat_server import ChatServer, Replay

    from compactor_cli.backends.openai_backend import OpenAIBackend, OpenAIOptions
    from compactor_cli.model.tokens import TokenCounter

    fixtures = os.path.join(ROOT, "fixtures", "llm-answers")
    index = orjson.loads(open(os.path.join(fixtures, "index.json"), "rb").read())
    convs = load(os.path.join(fixtures, "conversations.jsonl"))
    recorded = load(os.path.join(fixtures, "qwen2.5-coder-0.5b.jsonl"))
    groups = [it["exchanges"] for it in index if it["exchanges"]]
    counter = TokenCounter()

    def recall(summaries: dict[int, str]) -> tuple[dict[str, list[bool]], int]:
        hits: dict[str, list[bool]] = defaultdict(list)
        for k, text in summaries.items():
            for kind, rx in GOLD[(index[k]["source"], index[k]["line"])]:
                hits[kind].append(bool(re.search(rx, text, re.I)))
        return hits, len(summaries)

    rows = []
    for policy in policies:
        replay = Replay(recorded, groups, repair=policy)
        summaries = {}
        with ChatServer(replay) as server:
            for k, (item, dump) in enumerate(zip(index, convs)):
                if not item["exchanges"]:
                    continue
                backend = OpenAIBackend(OpenAIOptions(model="local", base_url=server.base_url, summary_input_tokens=4000,
                                                      structured="markdown", retries=0), counter.text)
                out, status, _ = summarize_dump(dump, keep_recent=6, max_summary_tokens=600, backend=backend)
                if status is Status.SUMMARIZED:
                    summaries[k] = out["messages"][0]["content"].split("\n\n[Compaction note")[0]
        rows.append((f"model, replayed (repair answers: {policy})", *recall(summaries), summaries))
    extractive = {}
    for k, (item, dump) in enumerate(zip(index, convs)):
        if item["exchanges"]:
            out, status, _ = summarize_dump(dump, keep_recent=6, max_summary_tokens=600)
            extractive[k] = out["messages"][0]["content"].split("\n\n[Compaction note")[0]
    for name, _, _, done in list(rows):
        if len(done) < len(extractive):
            rows.append((f"extractive, the conversations of \"{name}\"", *recall({k: extractive[k] for k in done}), None))
    rows.append(("extractive, all 9", *recall(extractive), None))
    kinds = sorted({kind for facts in GOLD.values() for kind, _ in facts})
    print("\nhand-picked facts of the 9 recorded conversations (600-token summaries, --keep-recent 6):")
    print(f"| summaries | conversations | {' | '.join(kinds)} | all |")
    print("|---|---|" + "---|" * (len(kinds) + 1))
    for name, hits, n, _ in rows:
        per = " | ".join(f"{sum(hits[k])}/{len(hits[k])}" if hits[k] else "–" for k in kinds)
        total = sum(sum(v) for v in hits.values()) / max(1, sum(len(v) for v in hits.values()))
        print(f"| {name} | {n} | {per} | **{100 * total:.0f}%** |")


# A reader's judge of routine tool output, written apart from the summariser's own filter (token
# shapes rather than its patterns): `ls` listings, installer and download progress, bare report
# headings. Used to measure what share of key_facts items are such lines.
_PERMS = re.compile(r"(?:^|\s)[dlcbps-](?:[r-][w-][xsStT-]){3}[@+.]?\s")
_INSTALL = re.compile(r"(?i)\b(?:collecting|downloading|installing collected|requirement already satisfied|"
                      r"successfully installed|using cached|building wheel|unpacking|setting up|reading package lists|"
                      r"receiving objects|resolving deltas)\b")
_PROGRESS = re.compile(r"\d{1,3}%|[█━#=]{6,}|\bit/s\b|[kMG]B/s")
_BARE = re.compile(r"^[\W_]*[A-Z]{4,}S?[\W_]*$")


def routine(item: str) -> bool:
    """Is this key_facts item (``Tool x: <line>``) routine output rather than a fact?"""
    if not item.startswith("Tool "):
        return False
    line = item.split(": ", 1)[1] if ": " in item else item
    tokens = line.replace("…", " ").split()
    names = [t for t in tokens if re.fullmatch(r"[\w.@+-]+/?", t)]
    listing = len(tokens) >= 4 and len(names) == len(tokens) and "  " in line and not re.search(r"[a-z]{3,} [a-z]{3,}", line)
    return bool(_PERMS.search(line) or _INSTALL.search(line) or (_PROGRESS.search(line) and "%" in line and "|" in line)
                or _BARE.match(line) or listing)


def routine_share(data: str, budget: int, keep: int) -> None:
    print(f"\nroutine tool output among key_facts items, extractive backend, --max-summary-tokens {budget}, "
          f"--keep-recent {keep}, the real conversations as they are:")
    print("| data set | summaries | key_facts items | routine items | share |")
    print("|---|---|---|---|---|")
    for name in DATA_SETS:
        path = os.path.join(data, name)
        if not os.path.exists(path):
            continue
        n = items = bad = 0
        examples = []
        for dump in load(path):
            out, status, _ = summarize_dump(dump, keep_recent=keep, max_summary_tokens=budget)
            if status is not Status.SUMMARIZED:
                continue
            n += 1
            text = out["messages"][0]["content"]
            body = text[text.find("## key_facts"):].split("\n\n## ", 1)[0]
            for line in body.splitlines()[1:]:
                if line.startswith("- "):
                    items += 1
                    if routine(line[2:]):
                        bad += 1
                        examples.append(line[2:90])
        print(f"| {name} | {n} | {items} | {bad} | {100 * bad / max(1, items):.1f}% |")
        for e in examples[:3]:
            print(f"  e.g. {e}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    ap.add_argument("--budget", type=int, default=1024)
    ap.add_argument("--keep-recent", type=int, default=16)
    ap.add_argument("--seeds", type=int, default=5, help="plantings (different facts and places) per conversation")
    ap.add_argument("--answers", action="store_true", help="also compare with the recorded model answers")
    args = ap.parse_args()
    if os.path.isdir(args.data):
        planted_recall(args.data, args.budget, args.keep_recent, args.seeds)
        routine_share(args.data, args.budget, args.keep_recent)
    else:
        print(f"{args.data} not found: no planted-fact figures (the shared data set is not part of the project)")
    if args.answers:
        answers_recall(["again", "sections", "scripted"])


if __name__ == "__main__":
    main()
