"""``xcompact eval``: measure what compactions keep, over files of conversations.

Two modes. A compaction already made: BEFORE and AFTER (files, or directories with the same
relative names), records matched by their order; AFTER may come from any tool, in any format
xcompact reads. Or settings tried in memory (``--try 'toolcall --keep 4'``), each run as the
command line runs it (the per-record step of the batch function), on the same records. Every
setting is measured by ``evidence.evaluate`` on the same probes."""

from __future__ import annotations

import heapq
import os
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..commands.compile import build, click_command
from ..commands.configure import Configured
from ..commands.options import RUN_OPTIONS
from ..errors import InvalidInputError, UsageError
from ..evidence.evaluate import Evaluation, evaluate, lost_probes
from ..evidence.probes import ESSENTIAL, KINDS, Probe
from ..model.tokens import counter_for

TRY_COMMANDS = ("toolcall", "summarize", "compact")
AFTER = "after"  # the name of the one setting of the BEFORE AFTER mode


@dataclass
class Failure:
    where: str
    error: str


@dataclass
class Usage:
    """What one backend of a setting asked of its server, summed over the records: the requests
    (``model_calls`` of the report items) and the tokens the server reported for them (the
    items' ``usage``: None while no item carries it)."""

    calls: int = 0
    records: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None

    def add_item(self, fields: Mapping[str, Any]) -> None:
        calls = fields.get("model_calls")
        self.calls += calls if isinstance(calls, int) else 0
        usage = fields.get("usage")
        if isinstance(usage, dict):
            for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    setattr(self, key, (getattr(self, key) or 0) + value)


@dataclass
class Candidate:
    """A record measured under one setting, kept while it is among the setting's worst (lowest
    essential retention): what its per-record page and its lost probes are made of."""

    where: str
    setting: str
    essential: float
    before: list[dict[str, Any]]
    afters: dict[str, list[dict[str, Any]]]  # every setting's messages: the probes are those of all
    after: dict[str, Any] | bytes  # the compacted record (internal dump, or the bytes a --try wrote)
    format: str

    def lost(self) -> tuple[list[Probe], int]:
        """(the probes this setting lost, the probes): ``evidence.evaluate``'s probes, the same figures."""
        return lost_probes(self.before, self.afters, self.afters[self.setting])

    def dump(self) -> dict[str, Any]:
        if isinstance(self.after, dict):
            return self.after
        from ..formats import parse_record

        dump, _codec = parse_record(self.after, "openai", source=self.where)
        return dump


@dataclass
class EvalRun:
    """Per setting: the totals; per record: each setting's evaluation; the records that failed."""

    settings: list[str]
    totals: dict[str, Evaluation]
    items: list[tuple[str, dict[str, Evaluation]]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    skipped: list[Failure] = field(default_factory=list)  # nothing to measure there (no failure)
    #: per setting, per (backend, model): what its model backend asked of the server
    usage: dict[str, dict[tuple[str, str | None], Usage]] = field(default_factory=dict)
    keep_worst: int = 0  # how many of each setting's worst records to keep (their pages)
    _worst: dict[str, list[tuple[tuple[float, int], int, Candidate]]] = field(default_factory=dict)

    def offer(self, cand: Candidate) -> None:
        """Keep ``cand`` if it is among its setting's ``keep_worst`` lowest essential retentions
        (ties: the earlier record; the order ``worst_rows`` lists the report's items in)."""
        if self.keep_worst <= 0:
            return
        heap = self._worst.setdefault(cand.setting, [])
        key = (-cand.essential, -len(self.items))  # the best kept (then the latest) on top, out first
        entry = (key, len(heap), cand)
        if len(heap) < self.keep_worst:
            heapq.heappush(heap, entry)
        elif key > heap[0][0]:
            heapq.heapreplace(heap, entry)

    def worst(self, setting: str) -> list[Candidate]:
        """The setting's kept worst records, worst first."""
        return [c for _, _, c in sorted(self._worst.get(setting, []), key=lambda e: (-e[0][0], -e[0][1]))]

    def add_measured(self, where: str, before: list[dict[str, Any]], afters: dict[str, list[dict[str, Any]]],
                     found: dict[str, Evaluation], written: dict[str, dict[str, Any] | bytes], fmt: str) -> None:
        """One record measured: its figures counted, and kept for a page if among the worst."""
        for name, ev in found.items():
            if ev.essential is not None and self.keep_worst:
                self.offer(Candidate(where, name, ev.essential, before, afters, written[name], fmt))
        self.items.append((where, found))
        for n, ev in found.items():
            self.totals[n].add(ev)

    def add_usage(self, setting: str, item: Mapping[str, Any]) -> None:
        """The model requests of one record's report item: its ``model_calls`` and the server's
        ``usage`` (compact sums its summary rounds' into the item's)."""
        backend = item.get("backend")
        if not isinstance(backend, str) or (backend == "extractive" and not item.get("model_calls")):
            return
        model = item.get("model") if isinstance(item.get("model"), str) else None
        usage = self.usage.setdefault(setting, {}).setdefault((backend, model), Usage())
        usage.add_item(item)
        usage.records += 1


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


def _records(path: str, from_: str, failures: list[Failure]) -> list[tuple[str, dict | None, str]]:
    """(where, internal dump or None when it cannot be read, its format) of each record of ``path``."""
    from ..formats import iter_records, parse_record

    out: list[tuple[str, dict | None, str]] = []
    try:
        for rec in iter_records(path, from_=from_):
            where = f"{rec.source}:{rec.line}" if rec.line is not None else rec.source
            try:
                dump, codec = parse_record(rec.raw, from_, source=rec.source, line=rec.line)
            except InvalidInputError as exc:
                failures.append(Failure(where, str(exc)))
                out.append((where, None, from_))
                continue
            out.append((where, dump, codec.format))
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


@dataclass
class Tried:
    """One record under one setting: its messages as compacted (a string: why it failed), the
    bytes the command line would have written, and its report item."""

    messages: list[dict] | str
    written: bytes | None
    item: Mapping[str, Any]


def _run_try(configured: Configured, dumps: list[dict]) -> list[Tried]:
    """Each dump compacted in memory with ``configured``'s settings, as the command line would
    write it, read back."""
    from .batch import process_lines

    lines = [orjson.dumps(d) + b"\n" for d in dumps]
    result = process_lines(lines, configured.settings, source="<eval>")
    out: list[Tried] = []
    for data, item in zip(result.outputs, result.items, strict=True):
        if data is None or item.get("status") in ("INVALID_INPUT", "FAILED"):
            out.append(Tried(str(item.get("error") or item.get("status")), None, item))
            continue
        obj = orjson.loads(data)
        out.append(Tried(obj["messages"] if isinstance(obj, dict) else obj, data, item))
    return out


def run_eval(inputs: list[str], tries: list[str], from_: str = "auto", encoding: str = "cl100k_base",
             keep_worst: int = 0) -> EvalRun:
    """Measure ``tries`` on every record of ``inputs``, or (no tries) the compaction
    ``inputs[1]`` made of ``inputs[0]``. ``keep_worst``: how many of each setting's records of
    lowest essential retention to keep for their pages (``EvalRun.worst``)."""
    counter = counter_for(encoding)
    if tries:
        configured = {spec: try_settings(spec) for spec in tries}
        names = list(tries)
    else:
        if len(inputs) != 2:
            raise UsageError("eval takes BEFORE AFTER (two files or directories), or INPUT... with --try")
        names = [AFTER]
    run = EvalRun(names, {n: Evaluation(records=0) for n in names}, keep_worst=keep_worst)
    # per record: where, its dump, and per setting what it became (messages or why it failed, the
    # record as written: bytes of a --try, the dump of AFTER), and the format of what was written
    groups: list[list[tuple[str, dict, dict[str, list[dict] | str], dict[str, dict | bytes | None], str]]] = []
    if tries:
        for path in inputs:
            good = [(w, d) for w, d, _ in _records(path, from_, run.failures) if d is not None]
            results = {spec: _run_try(configured[spec], [d for _, d in good]) for spec in tries}
            for spec in tries:
                for tried in results[spec]:
                    run.add_usage(spec, tried.item)
            groups.append([(w, d, {spec: results[spec][k].messages for spec in tries},
                            {spec: results[spec][k].written for spec in tries}, "openai")
                           for k, (w, d) in enumerate(good)])
    else:
        for before, after in _pairs(inputs[0], inputs[1]):
            b = _records(before, from_, run.failures)
            a = _records(after, "auto", run.failures)
            if len(a) != len(b):
                run.failures.append(Failure(after, f"{len(a)} records, but {before} has {len(b)}: records are "
                                                   "matched by their order"))
                continue
            groups.append([(w, d, {AFTER: ad["messages"] if ad is not None else "the compacted record cannot be read"},
                            {AFTER: ad}, afmt)
                           for (w, d, _), (_, ad, afmt) in zip(b, a, strict=True) if d is not None])
    for group in groups:
        for where, dump, afters, written, fmt in group:
            failed = [(n, m) for n, m in afters.items() if isinstance(m, str)]
            if failed:
                run.failures.append(Failure(where, "; ".join(m if n == AFTER else f"[{n}] {m}" for n, m in failed)))
                continue
            measured = {n: m for n, m in afters.items() if not isinstance(m, str)}
            found = evaluate(dump["messages"], measured, counter)
            run.add_measured(where, dump["messages"], measured, found,
                          {n: w for n, w in written.items() if w is not None}, fmt)
    return run


AGENT = "agent's own compaction"


def run_agent_eval(inputs: list[str], encoding: str = "cl100k_base", keep_worst: int = 0) -> EvalRun:
    """What an agent's own compaction kept, from its log alone: a Claude Code session read whole
    (``--claude-code-history full``) against what the model had after its last compaction
    (``since-compaction``). A log with no compaction is skipped, with a note."""
    from ..formats import file_format, iter_records, parse_record

    counter = counter_for(encoding)
    run = EvalRun([AGENT], {AGENT: Evaluation(records=0)}, keep_worst=keep_worst)
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
        found = evaluate(full["messages"], {AGENT: since["messages"]}, counter)
        run.add_measured(path, full["messages"], {AGENT: since["messages"]}, found, {AGENT: since}, "claude-code")
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


def parse_prices(values: tuple[str, ...] | list[str]) -> dict[str, tuple[float, float, float | None]]:
    """``MODEL=IN/OUT[/CACHED]`` options: USD per million prompt, completion (and cached prompt)
    tokens of a model, as its backend names it in the report (``model``)."""
    out: dict[str, tuple[float, float, float | None]] = {}
    for v in values:
        model, sep, prices = v.rpartition("=")
        parts = prices.split("/")
        try:
            if not sep or not model.strip() or len(parts) not in (2, 3):
                raise ValueError
            numbers = [float(x) for x in parts]
            if any(not (x >= 0 and x != float("inf")) for x in numbers):
                raise ValueError
        except ValueError:
            raise UsageError(f"--price {v!r}: expected MODEL=IN/OUT (USD per million prompt and completion "
                             "tokens, e.g. gpt-4o-mini=0.15/0.60), or MODEL=IN/OUT/CACHED") from None
        out[model.strip()] = (numbers[0], numbers[1], numbers[2] if len(numbers) == 3 else None)
    return out


def cost_of(usage: Usage, price: tuple[float, float, float | None] | None) -> float | None:
    """USD of ``usage`` at ``price`` (per million tokens; cached prompt tokens at the cached price,
    or at the prompt price when none is given); None without a price or without the server's counts."""
    if price is None or usage.prompt_tokens is None or usage.completion_tokens is None:
        return None
    cached = min(usage.cached_tokens or 0, usage.prompt_tokens)
    prompt_price, completion_price, cached_price = price
    return ((usage.prompt_tokens - cached) * prompt_price + cached * (prompt_price if cached_price is None
                                                                       else cached_price)
            + usage.completion_tokens * completion_price) / 1_000_000


def usage_rows(run: EvalRun, setting: str, prices: dict[str, tuple[float, float, float | None]] | None = None
               ) -> list[dict[str, Any]]:
    """The report's ``usage`` of a setting: one entry per backend and model that made requests."""
    rows = []
    for (backend, model), u in sorted(run.usage.get(setting, {}).items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        row: dict[str, Any] = {"backend": backend, "model": model, "records": u.records, "calls": u.calls,
                               "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                               "cached_tokens": u.cached_tokens}
        if prices:
            cost = cost_of(u, prices.get(model or backend))
            row["cost_usd"] = round(cost, 6) if cost is not None else None
        rows.append(row)
    return rows


def report_of(run: EvalRun, parameters: dict[str, Any],
              prices: dict[str, tuple[float, float, float | None]] | None = None) -> dict[str, Any]:
    from ..version import __version__

    settings = {}
    for n in run.settings:
        settings[n] = run.totals[n].as_dict()
        if run.usage.get(n):
            settings[n]["usage"] = usage_rows(run, n, prices)
    return {"tool": "xcompact", "command": "eval", "version": __version__, "parameters": parameters,
            "settings": settings,
            "items": [{"source": where, "settings": {n: ev.as_dict() for n, ev in found.items()}}
                      for where, found in run.items],
            "failures": [{"source": f.where, "error": f.error} for f in run.failures],
            "skipped": [{"source": f.where, "reason": f.error} for f in run.skipped]}


def _tokens(u: Usage) -> str:
    if u.prompt_tokens is None and u.completion_tokens is None:
        return "not reported"
    return f"{u.prompt_tokens or 0:,}/{u.completion_tokens or 0:,}/{u.cached_tokens or 0:,}"


def table(run: EvalRun, prices: dict[str, tuple[float, float, float | None]] | None = None) -> str:
    """The totals as a terminal reads them at a glance; with a model backend, its requests, the
    tokens its server reported (prompt/completion/cached) and, priced (``--price``), their cost."""
    heads = ["setting", "records", "tokens before → after", *KINDS, "essential", "per 1k"]
    used = any(run.usage.get(n) for n in run.settings)
    if used:
        heads += ["model calls", "prompt/completion/cached"] + (["cost"] if prices else [])
    rows = []
    for n in run.settings:
        t = run.totals[n]
        share = [f"{100 * f / p:.0f}%" if p else "–" for f, p in (t.retention.get(k, (0, 0)) for k in KINDS)]
        ratio = f" ({100 * t.tokens_after / t.tokens_before:.0f}%)" if t.tokens_before else ""
        row = [n, str(t.records), f"{t.tokens_before:,} → {t.tokens_after:,}{ratio}", *share,
               f"{100 * t.essential:.1f}%" if t.essential is not None else "–", f"{t.per_1k_tokens:.1f}"]
        if used:
            usages = list(run.usage.get(n, {}).items())
            row += ["; ".join(f"{u.calls:,}" for _, u in usages) or "–",
                    "; ".join(_tokens(u) for _, u in usages) or "–"]
            if prices:
                costs = [cost_of(u, prices.get(model or backend)) for (backend, model), u in usages]
                row.append("; ".join(f"${c:,.4f}" if c is not None else "unpriced" for c in costs) or "–")
        rows.append(row)
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(len(heads))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [heads, *rows])
