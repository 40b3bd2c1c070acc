"""Tier 1 with --preview 2,2 beside --keep 4 and a truncation to the same tokens (the last messages
that fit), on every real run of ../shared/data/raw; measured by evidence.evaluate, as xcompact eval is.

    python bench/bench_preview.py
"""
import glob
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_evidence import truncate
from compactor_cli import formats, reclaim_tool_results
from compactor_cli.evidence.evaluate import evaluate
from compactor_cli.evidence.probes import ESSENTIAL
from compactor_cli.model.conversation import PLACEHOLDER_TEMPLATE
from compactor_cli.model.tokens import counter_for
c = counter_for("o200k_base")
for name in ("codex", "claude-code", "mini-swe-agent", "swe-agent"):
    tot = {}
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "raw", name, "*"))):
        for _l, dump, _c in formats.read_file(path):
            outs = {"keep4": reclaim_tool_results(dump, keep=4, counter=c)[0]["messages"],
                    "preview": reclaim_tool_results(dump, keep=4, counter=c,
                                                    placeholder=PLACEHOLDER_TEMPLATE + "\n{preview:2,2}")[0]["messages"]}
            outs["truncate"] = truncate(dump, c.conversation(outs["preview"]), c)
            for k, ev in evaluate(dump["messages"], outs, c).items():
                t = tot.setdefault(k, [0, 0, 0, {}])
                t[0] += ev.tokens_after
                for kind, (f, n) in ev.retention.items():
                    r = t[3].setdefault(kind, [0, 0]); r[0] += f; r[1] += n
    for k, (tok, _, _, ret) in tot.items():
        ess = [sum(ret.get(x, [0, 0])[i] for x in ESSENTIAL) for i in (0, 1)]
        err = ret.get("errors", [0, 0])
        print(f"{name:15} {k:9} tokens {tok:>8,}  essential {100*ess[0]/max(1,ess[1]):5.1f}%  errors {100*err[0]/max(1,err[1]):5.1f}%")
