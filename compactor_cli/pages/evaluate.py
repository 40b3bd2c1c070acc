"""The eval page: one self-contained HTML file for an ``xcompact eval`` report (``eval --html
PATH``, or ``xcompact report EVAL.json --html PATH`` afterwards): each setting's retention by
kind of probe, tokens after against essential retention with the Pareto front marked, and each
setting's worst records (lowest essential retention), linked to their own pages when the run
wrote them (the compacted record as ``show`` draws it, with the probes it lost)."""

from __future__ import annotations

from typing import Any

import orjson

from ..evidence.probes import KINDS

ESSENTIAL_KEY = "essential"
#: Worst records listed per setting (and given a page by ``eval --html``).
WORST = 10


def _pct(found: int, probes: int) -> float | None:
    return 100 * found / probes if probes else None


def kind_shares(setting: dict[str, Any]) -> dict[str, float | None]:
    """Percent kept per kind, and ``essential``, of one setting's (or record's) figures in a report."""
    out: dict[str, float | None] = {}
    retention = setting.get("retention") or {}
    for kind in KINDS:
        r = retention.get(kind) or {}
        out[kind] = _pct(int(r.get("found", 0)), int(r.get("probes", 0)))
    ess = setting.get("essential")
    out[ESSENTIAL_KEY] = 100 * ess if isinstance(ess, (int, float)) else None
    return out


def pareto_front(points: list[tuple[str, int, float]]) -> list[str]:
    """The settings no other setting beats: none keeps as much or more for as few tokens or fewer
    (and strictly better on one)."""
    front = []
    for name, tokens, pct in points:
        beaten = any(t <= tokens and p >= pct and (t < tokens or p > pct) for n, t, p in points if n != name)
        if not beaten:
            front.append(name)
    return front


def worst_rows(doc: dict[str, Any], n: int = WORST) -> dict[str, list[dict[str, Any]]]:
    """Per setting, its ``n`` records of lowest essential retention (ties: the earlier record), as
    ``EvalRun.worst`` keeps them for their pages."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name in doc.get("settings") or {}:
        rows = []
        for index, item in enumerate(doc.get("items") or ()):
            fig = (item.get("settings") or {}).get(name)
            if not isinstance(fig, dict) or not isinstance(fig.get("essential"), (int, float)):
                continue
            retention = fig.get("retention") or {}
            lost = {k: int(v.get("probes", 0)) - int(v.get("found", 0)) for k, v in retention.items()}
            rows.append({"where": item.get("source"), "essential": 100 * fig["essential"], "index": index,
                         "tokens_before": fig.get("tokens_before"), "tokens_after": fig.get("tokens_after"),
                         "lost": sum(lost.values()), "probes": sum(int(v.get("probes", 0)) for v in retention.values()),
                         "lost_kinds": ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in lost.items() if v)})
        rows.sort(key=lambda r: (r["essential"], r["index"]))
        out[name] = rows[:n]
    return out


def _usage_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"setting": name, **u} for name, s in (doc.get("settings") or {}).items() for u in s.get("usage") or ()]


def render_eval_page(doc: dict[str, Any], links: dict[tuple[str, str], str] | None = None,
                     source: str | None = None) -> str:
    """The page of an eval report ``doc``; ``links``: (record, setting) -> the href of its page."""
    from markupsafe import Markup

    from . import charts
    from .templating import environment

    settings = doc.get("settings") or {}
    names = list(settings)
    shares = {n: kind_shares(s) for n, s in settings.items()}
    kinds = [k for k in KINDS if any(shares[n][k] is not None for n in names)]
    svgs = []
    if names and kinds:
        svgs.append(charts.retention_bars([*kinds, ESSENTIAL_KEY],
                                          [(n, [shares[n][k] for k in [*kinds, ESSENTIAL_KEY]]) for n in names]))
    points = [(n, int(settings[n]["tokens_after"]), float(shares[n][ESSENTIAL_KEY] or 0)) for n in names
              if shares[n][ESSENTIAL_KEY] is not None]
    front = pareto_front(points)
    if points:
        befores = {settings[n]["tokens_before"] for n in names}
        svgs.append(charts.pareto(points, front, befores.pop() if len(befores) == 1 else None))
    records = max([int(s.get("records", 0)) for s in settings.values()] or [0])
    worst = worst_rows(doc)
    for name, rows in worst.items():
        for row in rows:
            row["href"] = (links or {}).get((str(row["where"]), name))
    parameters = doc.get("parameters") or {}
    shown = sorted((k, v if isinstance(v, str) else orjson.dumps(v).decode()) for k, v in parameters.items()
                   if v not in (None, [], {}, False))
    return environment().get_template("eval.html.j2").render(
        title=f"xcompact eval: {records:,} records, {len(names)} settings", version=doc.get("version") or "?",
        records=records, names=names, settings=settings, shares=shares, kinds=kinds, front=front,
        charts=[Markup(s) for s in svgs], worst=worst, usage=_usage_rows(doc), failures=doc.get("failures") or [],
        skipped=doc.get("skipped") or [], parameters=shown, source=source, essential_key=ESSENTIAL_KEY)


def write_eval_pages(path: str, doc: dict[str, Any], worst: dict[str, list[Any]], encoding: str) -> int:
    """Write the eval page to ``path`` and, beside it in ``STEM-records/``, the page of each
    record in ``worst`` (setting -> ``engine.evaluate.Candidate``, worst first): the compacted
    record as ``show`` draws it, with the probes it lost. Returns how many record pages."""
    import os
    import re

    from ..errors import OutputError
    from ..model.tokens import counter_for
    from .conversation import LostEvidence, render_html, view_of
    from .templating import write_page

    links: dict[tuple[str, str], str] = {}
    if path != "-" and any(worst.values()):
        folder = os.path.splitext(path)[0] + "-records"
        try:
            os.makedirs(folder, exist_ok=True)
            for old in os.listdir(folder):  # the pages of an earlier run (only ours: N-N.html)
                if re.fullmatch(r"\d+-\d+\.html", old):
                    os.unlink(os.path.join(folder, old))
        except OSError as exc:
            raise OutputError(f"cannot write the record pages in {folder}: {exc.strerror or exc}") from None
        counter = counter_for(encoding)
        version = doc.get("version") or "?"
        back = os.path.relpath(path, folder)
        for s, name in enumerate(doc.get("settings") or {}, 1):
            for rank, cand in enumerate(worst.get(name) or (), 1):
                view = view_of(cand.dump(), cand.where, cand.format, counter, counter.name)
                lost, probes = cand.lost()
                view.evidence = LostEvidence(lost, probes, setting=name)
                file = f"{s}-{rank}.html"
                write_page(os.path.join(folder, file), render_html(view, version, back=back))
                links[(cand.where, name)] = f"{os.path.basename(folder)}/{file}"
    write_page(path, render_eval_page(doc, links))
    return len(links)


def read_eval_report(path: str) -> dict[str, Any] | None:
    """The report of ``xcompact eval`` at ``path``, checked against schemas/eval.schema.json; None
    when the file is some other JSON (the caller reads it as a run report); InvalidInputError
    naming the file for an eval report that is not valid."""
    from ..errors import InvalidInputError
    from ..files.records import parse_json
    from ..model.schema import schema_problems

    try:
        with open(path, "rb") as fh:
            doc = parse_json(fh.read())
    except (OSError, InvalidInputError):
        return None  # the run report's reader says what is wrong with it
    if not isinstance(doc, dict) or doc.get("tool") != "xcompact" or doc.get("command") != "eval":
        return None
    problems = schema_problems(doc, "eval")
    if problems:
        raise InvalidInputError(f"{path}: not a valid xcompact eval report: {problems[0]}")
    return doc
