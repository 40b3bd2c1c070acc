"""Per-file counts of what a format reader read, beside the same counts taken from the source:
``python -m compactor_cli.formats.survey PATH... [--from F]`` (the numbers the issue asks for:
message and tool-result counts match the source, pairing intact).

Columns: format, records, messages, tool calls (read / in the source), tool results (read, of
which synthetic for unanswered calls / in the source), results turned into user messages
(orphans), pairing problems left (repeated IDs aside)."""

from __future__ import annotations

import sys
from typing import Any

import orjson


def source_counts(path: str, fmt: str) -> tuple[int | None, int | None]:
    """(tool calls, tool results) counted in the source file itself, or None when not defined."""
    raw = open(path, "rb").read()
    if fmt == "claude-code":
        events = [orjson.loads(x) for x in raw.splitlines() if x.strip()]
        main = [e for e in events if e.get("type") in ("user", "assistant") and not e.get("isSidechain")] or \
            [e for e in events if e.get("type") in ("user", "assistant")]
        blocks = [b for e in main if isinstance(e["message"].get("content"), list) for b in e["message"]["content"]
                  if isinstance(b, dict)]
        return (sum(b.get("type") == "tool_use" for b in blocks), sum(b.get("type") == "tool_result" for b in blocks))
    if fmt == "codex":
        items = [e["payload"] for e in (orjson.loads(x) for x in raw.splitlines() if x.strip())
                 if e.get("type") == "response_item"]
        return (sum(i.get("type") in ("function_call", "custom_tool_call", "local_shell_call") for i in items),
                sum(str(i.get("type")).endswith("_output") for i in items))
    if fmt == "swe-agent":
        h = orjson.loads(raw)["history"]
        calls = sum(len(m.get("tool_calls") or ()) for m in h) or sum(
            1 for m in h if m.get("role") == "assistant" and str(m.get("action") or "").strip())
        return calls, None  # text actions: results are the following observations
    return None, None


def survey(path: str, from_: str = "auto") -> dict[str, Any]:
    from ..model.checks import check_conversation
    from . import read_file

    row: dict[str, Any] = {"file": path, "format": None, "records": 0, "messages": 0, "calls": 0, "results": 0,
                           "synthetic": 0, "orphans": 0, "problems": 0}
    for _, dump, codec in read_file(path, from_):
        row["format"] = codec.format
        row["records"] += 1
        msgs = dump["messages"]
        row["messages"] += len(msgs)
        row["calls"] += sum(len(m.get("tool_calls") or ()) for m in msgs)
        row["results"] += sum(m.get("role") == "tool" for m in msgs)
        src = dump.get("source") or {}
        row["synthetic"] += len(src.get("unanswered") or ())
        row["orphans"] += len(src.get("orphan_results") or ())
        row["problems"] += sum(1 for p in check_conversation(dump) if "used again" not in p.message)
    if row["format"] in ("claude-code", "codex", "swe-agent"):
        row["source_calls"], row["source_results"] = source_counts(path, row["format"])
    return row


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    from_ = "auto"
    if "--from" in args:
        k = args.index("--from")
        from_ = args[k + 1]
        del args[k:k + 2]
    print("file\tformat\trecords\tmessages\tcalls(read/source)\tresults(read,synthetic/source)\torphans\tproblems")
    for path in args:
        r = survey(path, from_)
        sc = r.get("source_calls")
        sr = r.get("source_results")
        print(f"{path}\t{r['format']}\t{r['records']}\t{r['messages']}\t{r['calls']}/{'-' if sc is None else sc}\t"
              f"{r['results']},{r['synthetic']}/{'-' if sr is None else sr}\t{r['orphans']}\t{r['problems']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
