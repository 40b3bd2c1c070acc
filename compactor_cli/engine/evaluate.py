"""``xcompact eval``: measure what compactions keep, over files of conversations.

Two modes. A compaction already made: BEFORE and AFTER (files, or directories with the same
relative names), records matched by their order; AFTER may come from any tool, in any format
xcompact reads. Or settings tried in memory (``--try 'toolcall --keep 4'``), each run as the
command line runs it (the per-record step of the batch function), on the same records. Every
setting is measured by ``evidence.evaluate`` on the same probes."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..errors import InvalidInputError, UsageError
from ..evidence.evaluate import Evaluation, evaluate
from ..evidence.probes import ESSENTIAL, KINDS
from ..model.tokens import counter_for
from .configure import Configured, build
from .params import RUN_OPTIONS, click_command

TRY_COMMANDS = ("toolcall", "summarize", "compact")
AFTER = "after"  # the name of the one setting of the BEFORE AFTER mode


@dataclass
class Failure:
    where: str
    error: str


@dataclass
class EvalRun:
    """Per setting: the totals; per record: each setting's evaluation; the records that failed."""

    settings: list[str]
    totals: dict[str, Evaluation]
    items: list[tuple[str, dict[str, Evaluation]]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    skipped: list[Failure] = field(default_factory=list)  # nothing to measure there (no failure)


def try_settings(spec: str) -> Configured:
    """The settings of ``--try 'COMMAND OPTIONS'``, checked as the command line checks them."""
    import click
    from click.core import ParameterSource

    words = shlex.split(spec)
    if not words or words[0] not in TRY_COMMANDS:
        raise UsageError(f"--try {spec!r}: expected one of {', '.join(TRY_COMMANDS)} and its options, "
                         "e.g. --try 'toolcall --keep 4'")
    name = words[0]
    command = click_command(name)
    try:
        ctx = command.make_context(name, [*words[1:], "-"])
    except click.UsageError as exc:
        raise UsageError(f"--try {spec!r}: {exc.format_message()}") from None
    given = {p.name for p in command.params
             if p.name and ctx.get_parameter_source(p.name) is ParameterSource.COMMANDLINE}
    given.discard("inputs")  # the "-" given to click above: eval hands the records itself
    run_options = sorted(n for n in given if n in RUN_OPTIONS or n in ("dry_run", "check", "resume"))
    if run_options:
        raise UsageError(f"--try {spec!r}: {', '.join(run_options)} is about files and runs; eval runs each "
                         "setting in memory and writes nothing")
    return build(name, dict(ctx.params), given)


def _records(path: str, from_: str, failures: list[Failure]) -> list[tuple[str, dict | None]]:
    """(where, internal dump or None when it cannot be read) of each record of ``path``."""
    from ..formats import iter_records, parse_record

    out: list[tuple[str, dict | None]] = []
    try:
        for rec in iter_records(path, from_=from_):
            where = f"{rec.source}:{rec.line}" if rec.line is not None else rec.source
            try:
                dump, _codec = parse_record(rec.raw, from_, source=rec.source, line=rec.line)
            except InvalidInputError as exc:
                failures.append(Failure(where, str(exc)))
                out.append((where, None))
                continue
            out.append((where, dump))
    except InvalidInputError as exc:
        failures.append(Failure(path, str(exc)))
    return out


def _pairs(before: str, after: str) -> Iterator[tuple[str, str]]:
    """(before file, after file): the two files, or the same relative names under two directories."""
    if os.path.isdir(before) != os.path.isdir(after):
        raise UsageError(f"{before} and {after}: give two files, or two directories with the same relative names")
    if not os.path.isdir(before):
        yield before, after
        return
    for root, _dirs, files in sorted(os.walk(before)):
        for name in sorted(files):
            path = os.path.join(root, name)
            twin = os.path.join(after, os.path.relpath(path, before))
            if os.path.isfile(twin):
                yield path, twin


def _run_try(configured: Configured, dumps: list[dict]) -> list[list[dict] | str]:
    """Each dump compacted in memory with ``configured``'s settings, as the command line would
    write it, read back (a string: why the record failed)."""
    from .batch import process_lines

    lines = [orjson.dumps(d) + b"\n" for d in dumps]
    result = process_lines(lines, configured.settings, source="<eval>")
    out: list[list[dict] | str] = []
    for data, item in zip(result.outputs, result.items, strict=True):
        if data is None or item.get("status") in ("INVALID_INPUT", "FAILED"):
            out.append(str(item.get("error") or item.get("status")))
            continue
        obj = orjson.loads(data)
        out.append(obj["messages"] if isinstance(obj, dict) else obj)
    return out


def run_eval(inputs: list[str], tries: list[str], from_: str = "auto", encoding: str = "cl100k_base") -> EvalRun:
    """Measure ``tries`` on every record of ``inputs``, or (no tries) the compaction
    ``inputs[1]`` made of ``inputs[0]``."""
    counter = counter_for(encoding)
    if tries:
        configured = {spec: try_settings(spec) for spec in tries}
        names = list(tries)
    else:
        if len(inputs) != 2:
            raise UsageError("eval takes BEFORE AFTER (two files or directories), or INPUT... with --try")
        names = [AFTER]
    run = EvalRun(names, {n: Evaluation(records=0) for n in names})
    groups: list[list[tuple[str, dict | None, dict[str, list[dict] | str]]]] = []
    if tries:
        for path in inputs:
            recs = _records(path, from_, run.failures)
            good = [(w, d) for w, d in recs if d is not None]
            results = {spec: _run_try(configured[spec], [d for _, d in good]) for spec in tries}
            groups.append([(w, d, {spec: results[spec][k] for spec in tries}) for k, (w, d) in enumerate(good)])
    else:
        for before, after in _pairs(inputs[0], inputs[1]):
            b = _records(before, from_, run.failures)
            a = _records(after, "auto", run.failures)
            if len(a) != len(b):
                run.failures.append(Failure(after, f"{len(a)} records, but {before} has {len(b)}: records are "
                                                   "matched by their order"))
                continue
            groups.append([(w, d, {AFTER: ad["messages"] if ad is not None else "the compacted record cannot be read"})
                           for (w, d), (_, ad) in zip(b, a, strict=True) if d is not None])
    for group in groups:
        for where, dump, afters in group:
            assert dump is not None
            failed = [(n, m) for n, m in afters.items() if isinstance(m, str)]
            if failed:
                run.failures.append(Failure(where, "; ".join(m if n == AFTER else f"[{n}] {m}" for n, m in failed)))
                continue
            found = evaluate(dump["messages"], {n: m for n, m in afters.items() if not isinstance(m, str)},
                             counter.text, counter.conversation)
            run.items.append((where, found))
            for n, ev in found.items():
                run.totals[n].add(ev)
    return run


AGENT = "agent's own compaction"


def run_agent_eval(inputs: list[str], encoding: str = "cl100k_base") -> EvalRun:
    """What an agent's own compaction kept, from its log alone: a Claude Code session read whole
    (``--claude-code-history full``) against what the model had after its last compaction
    (``since-compaction``). A log with no compaction is skipped, with a note."""
    from ..formats import file_format, iter_records, parse_record

    counter = counter_for(encoding)
    run = EvalRun([AGENT], {AGENT: Evaluation(records=0)})
    for path in inputs:
        try:
            fmt = file_format(path)
            if fmt != "claude-code":
                raise InvalidInputError(f"not a Claude Code session log ({fmt or 'unknown format'}): the agent "
                                        "compactions eval reads are Claude Code's compact boundaries")
            (rec,) = list(iter_records(path))
            full, _ = parse_record(rec.raw, "claude-code", source=path, history="full")
            since, _ = parse_record(rec.raw, "claude-code", source=path, history="since-compaction")
        except (InvalidInputError, ValueError) as exc:
            run.failures.append(Failure(path, str(exc)))
            continue
        if full["messages"] == since["messages"]:
            run.skipped.append(Failure(path, "the session has no compaction to measure"))
            continue
        found = evaluate(full["messages"], {AGENT: since["messages"]}, counter.text, counter.conversation)
        run.items.append((path, found))
        run.totals[AGENT].add(found[AGENT])
    return run


def below(run: EvalRun, minimums: dict[str, float]) -> list[str]:
    """One line per record and setting whose retention of a kind is under its minimum."""
    out = []
    for where, found in run.items:
        for name, ev in found.items():
            for kind, pct in minimums.items():
                kinds = KINDS if kind == "all" else ESSENTIAL if kind == "essential" else (kind,)
                share = ev.share(kinds)
                if share is not None and 100 * share < pct:
                    label = "" if name in (AFTER, AGENT) else f" [{name}]"
                    out.append(f"{where}{label}: {kind} retention {100 * share:.1f}% < {pct:g}%")
    return out


def parse_minimums(values: tuple[str, ...] | list[str]) -> dict[str, float]:
    """``KIND=PCT`` options: the kinds of the probes, ``essential`` or ``all``."""
    out = {}
    for v in values:
        kind, sep, pct = v.partition("=")
        kind = kind.strip()
        if not sep or kind not in (*KINDS, "essential", "all"):
            raise UsageError(f"--min-retention {v!r}: expected KIND=PCT with KIND one of "
                             f"{', '.join((*KINDS, 'essential', 'all'))}")
        try:
            out[kind] = float(pct)
        except ValueError:
            raise UsageError(f"--min-retention {v!r}: {pct!r} is not a percentage") from None
    return out


def report_of(run: EvalRun, parameters: dict[str, Any]) -> dict[str, Any]:
    from ..version import __version__

    return {"tool": "xcompact", "command": "eval", "version": __version__, "parameters": parameters,
            "settings": {n: run.totals[n].as_dict() for n in run.settings},
            "items": [{"source": where, "settings": {n: ev.as_dict() for n, ev in found.items()}}
                      for where, found in run.items],
            "failures": [{"source": f.where, "error": f.error} for f in run.failures],
            "skipped": [{"source": f.where, "reason": f.error} for f in run.skipped]}


def table(run: EvalRun) -> str:
    """The totals as a terminal reads them at a glance."""
    heads = ["setting", "records", "tokens before → after", *KINDS, "essential", "per 1k"]
    rows = []
    for n in run.settings:
        t = run.totals[n]
        share = [f"{100 * f / p:.0f}%" if p else "–" for f, p in (t.retention.get(k, (0, 0)) for k in KINDS)]
        ratio = f" ({100 * t.tokens_after / t.tokens_before:.0f}%)" if t.tokens_before else ""
        rows.append([n, str(t.records), f"{t.tokens_before:,} → {t.tokens_after:,}{ratio}", *share,
                     f"{100 * t.essential:.1f}%" if t.essential is not None else "–", f"{t.per_1k_tokens:.1f}"])
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(len(heads))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [heads, *rows])
