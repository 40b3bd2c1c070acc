"""Tier 1 with --preview 2,2 beside --keep 4 and a truncation to the same tokens (the system message
and the last messages that fit), on every real run of ../shared/data/raw; measured by
evidence.evaluate, as ``xcompact eval`` is (issue 30).

    python bench/bench_preview.py
"""

from __future__ import annotations

import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_evidence import truncate  # noqa: E402

from compactor_cli import formats, reclaim_tool_results  # noqa: E402
from compactor_cli.evidence.evaluate import Evaluation, evaluate  # noqa: E402
from compactor_cli.model.conversation import PLACEHOLDER_TEMPLATE  # noqa: E402
from compactor_cli.model.tokens import counter_for  # noqa: E402

RAW = os.path.join(HERE, "..", "..", "shared", "data", "raw")
PREVIEW = PLACEHOLDER_TEMPLATE + "\n{preview:2,2}"


def main() -> None:
    counter = counter_for("o200k_base")
    for name in ("codex", "claude-code", "mini-swe-agent", "swe-agent"):
        totals: dict[str, Evaluation] = {}
        for path in sorted(glob.glob(os.path.join(RAW, name, "*"))):
            for _line, dump, _codec in formats.read_file(path):
                outs = {"keep4": reclaim_tool_results(dump, keep=4, counter=counter)[0]["messages"],
                        "preview": reclaim_tool_results(dump, keep=4, counter=counter,
                                                        placeholder=PREVIEW)[0]["messages"]}
                outs["truncate"] = truncate(dump, counter.conversation(outs["preview"]), counter)
                for method, ev in evaluate(dump["messages"], outs, counter).items():
                    if method in totals:
                        totals[method].add(ev)
                    else:
                        totals[method] = ev
        for method, ev in totals.items():
            found, probes = ev.retention.get("errors", (0, 0))
            errors = 100 * found / probes if probes else 0.0
            print(f"{name:15} {method:9} tokens {ev.tokens_after:>9,}  essential {100 * (ev.essential or 0):5.1f}%"
                  f"  errors {errors:5.1f}%")


if __name__ == "__main__":
    main()
