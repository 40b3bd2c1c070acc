"""The dataset page: one self-contained HTML file for a run's report (``--html PATH`` on every
record command, ``xcompact report REPORT.json --html PATH`` for a report already written).

It holds totals, statuses, charts and top lists (pages/digest.py), so its size does not grow
with the number of conversations; styles and charts are inline and nothing is fetched, so it
opens offline, from file://, years later."""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import InvalidInputError
from .digest import FAILED_STATUSES, DatasetDigest
from .templating import environment, write_page

__all__ = ["read_report", "render_dataset_page", "write_page"]


def _pct(x: float) -> str:
    return f"{x:.1%}"


def _num(x: int | None) -> str:
    return "—" if x is None else f"{x:,}"


def headline(totals: dict[str, Any]) -> str:
    """One line of what the run did, from its totals."""
    parts = [", ".join(f"{n:,} {s.lower().replace('_', ' ')}" for s, n in sorted(totals["statuses"].items()))]
    if totals.get("tokens_before") is not None:
        parts.append(f"tokens {totals['tokens_before']:,} → {totals['tokens_after']:,}")
    parts.append(f"{totals['total_reclaimed_fraction']:.1%} of estimated length reclaimed")
    parts.append(f"{totals['failed']:,} failed")
    return "; ".join(p for p in parts if p)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _cell(x: Any) -> Any:
    """A number as the page writes numbers (1,234); anything else (a report read back) as it is."""
    return f"{x:,}" if _is_int(x) else x


def _measured(totals: dict[str, Any]) -> tuple[int, int]:
    """(over, measured): conversations over the threshold, and those measured against it."""
    statuses = totals["statuses"]
    over = int(statuses.get("OVER_THRESHOLD", 0))
    return over, over + int(statuses.get("UNDER_THRESHOLD", 0))


def _threshold(digest: DatasetDigest) -> str:
    return f"{digest.threshold:,} {digest.threshold_unit}" if digest.threshold is not None else "the threshold"


def check_headline(totals: dict[str, Any], digest: DatasetDigest) -> str:
    """One line of what a --check run found: a measurement against the threshold, no compaction."""
    over, measured = _measured(totals)
    plural = "s" if measured != 1 else ""
    parts = [f"threshold {_threshold(digest)}: {over:,} of {measured:,} conversation{plural} over"]
    largest = digest.largest_offenders()
    if largest and _is_int(largest[0][1]) and _is_int(largest[0][3]):
        parts.append(f"the largest {largest[0][1]:,} {largest[0][2]} ({largest[0][1] - largest[0][3]:,} over)")
    parts.append(f"{totals['failed']:,} failed")
    return "; ".join(parts)


def _check_cards(totals: dict[str, Any], digest: DatasetDigest) -> list[dict[str, Any]]:
    over, measured = _measured(totals)
    largest = digest.largest_offenders()
    cards = [
        dict(key="threshold", attr="check", label="threshold", value=_threshold(digest),
             sub="--check: measured, nothing written"),
        dict(key="over_threshold", attr="check", label="over the threshold", value=_num(over),
             sub=f"of {measured:,} measured" + (f"; the largest {largest[0][1]:,}"
                                                   if largest and _is_int(largest[0][1]) else "")),
        dict(key="conversations", label="conversations", value=_num(totals["conversations"]),
             sub=f"in {totals['files']:,} file{'s' if totals['files'] != 1 else ''}"),
        dict(key="failed", label="failed", value=_num(totals["failed"]),
             sub=f"{totals.get('file_errors', 0):,} unreadable files" if totals.get("file_errors") else ""),
        dict(key="warnings", label="warnings", value=_num(totals.get("warnings", 0)), sub=""),
    ]
    if totals.get("tokens_before") is not None:
        cards.append(dict(key="tokens_before", label="tokens measured", value=_num(totals["tokens_before"]), sub=""))
    return cards


def _cards(totals: dict[str, Any]) -> list[dict[str, Any]]:
    tokens = totals.get("tokens_before") is not None
    cards = [
        dict(key="conversations", label="conversations", value=_num(totals["conversations"]),
             sub=f"in {totals['files']:,} file{'s' if totals['files'] != 1 else ''}"),
        dict(key="failed", label="failed", value=_num(totals["failed"]),
             sub=f"{totals.get('file_errors', 0):,} unreadable files" if totals.get("file_errors") else ""),
        dict(key="warnings", label="warnings", value=_num(totals.get("warnings", 0)), sub=""),
    ]
    if tokens:
        cards += [dict(key="tokens_before", label="tokens before", value=_num(totals["tokens_before"]), sub=""),
                  dict(key="tokens_after", label="tokens after", value=_num(totals["tokens_after"]),
                       sub=(f"{1 - totals['tokens_after'] / totals['tokens_before']:.1%} fewer"
                            if totals["tokens_before"] else ""))]
    cards += [
        dict(key="total_reclaimed_fraction", label="length reclaimed", value=_pct(totals["total_reclaimed_fraction"]),
             sub=f"mean per conversation {_pct(totals['mean_reclaimed_fraction'])}"),
        dict(key="reclaimed_count", label="tool results reclaimed", value=_num(totals["reclaimed_count"]), sub=""),
    ]
    if totals.get("output_bytes") is not None:
        cards += [dict(key="input_bytes", label="bytes read", value=_num(totals["input_bytes"]), sub=""),
                  dict(key="output_bytes", label="bytes written", value=_num(totals["output_bytes"]), sub="")]
    return cards


def render_dataset_page(command: str, parameters: dict[str, Any], version: str, totals: dict[str, Any],
                        exit_code: int, digest: DatasetDigest, source: str | None = None) -> str:
    """The page's HTML for a finished run (its report's head, totals and exit code, and the
    digest of its items)."""
    from markupsafe import Markup

    from . import charts

    check = bool(parameters.get("check"))  # a measurement: nothing was compacted, nothing reclaimed
    unit = "tokens" if totals.get("tokens_before") is not None else "characters"
    points = [] if check else digest.points()
    svgs = [charts.status_bars(totals["statuses"])] if totals["statuses"] else []
    if any(digest.fraction_bins) and not check:
        svgs.append(charts.fraction_histogram(digest.fraction_bins))
    if points:
        svgs.append(charts.before_after(points, unit, len(points), digest.sized))
    largest = digest.largest_first()
    if largest:
        svgs.append(charts.largest_bars(largest, unit))
    problems = [
        dict(id="failures", title="Failures", count=digest.failure_count, headers=["conversation", "status", "error"],
             rows=digest.failures),
        dict(id="warnings", title="Conversations with warnings", count=digest.warning_records,
             headers=["conversation", "first warning", "warnings"], rows=digest.warnings),
    ]
    lead = []
    if digest.offender_count or check:
        rows = [[where, _cell(size), _cell(size - threshold) if _is_int(size) and _is_int(threshold) else "",
                 unit_, _cell(threshold)] for where, size, unit_, threshold in digest.largest_offenders()]
        offenders = dict(id="offenders", title=f"Over the threshold of {_threshold(digest)}, largest first",
                         count=digest.offender_count, headers=["conversation", "size", "over by", "unit", "threshold"],
                         rows=rows)
        if check:  # what a check is for comes first
            lead.append(offenders)
        else:
            problems.insert(0, offenders)
    shown = {k: v for k, v in parameters.items() if v is not None}
    return environment(pct=_pct).get_template("dataset.html.j2").render(
        title=f"xcompact {command}: {totals['conversations']:,} conversations", command=command, version=version,
        exit_code=exit_code, source=source, summary=check_headline(totals, digest) if check else headline(totals),
        totals=totals, cards=_check_cards(totals, digest) if check else _cards(totals),
        statuses=sorted(totals["statuses"].items(), key=lambda kv: (-kv[1], kv[0])),
        failed_statuses=FAILED_STATUSES, charts=[Markup(svg) for svg in svgs], check=check,
        largest=largest, unit=unit, lead=lead, problems=problems,
        parameters=sorted((k, v if isinstance(v, str) else orjson.dumps(v).decode()) for k, v in shown.items()),
        notes=totals.get("notes") or [])


def read_report(path: str) -> tuple[dict[str, Any], DatasetDigest]:
    """A JSON report written by xcompact -> (its document without the items, their digest).
    InvalidInputError, naming the file and the problem, for anything else."""
    from ..files.records import parse_json
    from ..model.schema import schema_problems

    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read the report: {exc.strerror or exc}") from None
    if not raw.strip():
        raise InvalidInputError(f"{path}: empty file, not a JSON report; a run still going or killed leaves none: "
                                "run it to the end with --report PATH")
    try:
        doc = parse_json(raw)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}: not a JSON report ({exc}); a run still going or killed leaves none: "
                                "run it to the end with --report PATH") from None
    if not isinstance(doc, dict) or doc.get("tool") != "xcompact" or not isinstance(doc.get("items"), list) \
            or not isinstance(doc.get("totals"), dict) or "exit_code" not in doc:
        raise InvalidInputError(f"{path}: not an xcompact report (expected the JSON object that --report writes, "
                                "with tool, command, items, totals and exit_code)")
    problems = schema_problems({**doc, "items": []}, "report")
    if problems:
        raise InvalidInputError(f"{path}: not a valid xcompact report: {problems[0]}")
    digest = DatasetDigest()
    for n, item in enumerate(doc["items"], 1):
        if not isinstance(item, dict) or not isinstance(item.get("status"), str):
            raise InvalidInputError(f"{path}: item {n} of the report is not a report item (it has no status)")
        try:
            digest.add(item)
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:  # a field of another type
            raise InvalidInputError(f"{path}: item {n} of the report has a field of the wrong type ({exc}); "
                                    "was the report edited?") from None
    head = {k: v for k, v in doc.items() if k != "items"}
    return head, digest
