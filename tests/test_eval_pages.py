"""`xcompact eval` (issue 29), where it shows: the eval page (--html) in a real browser, with the
report's numbers on its table and its charts; `show` marking the evidence a compacted record
lost; and what model backends asked of their server (--price's cost column)."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from browser import elements, render
from helpers import FIXTURES, ROOT

from compactor_cli.cli import cli
from compactor_cli.engine.evaluate import EvalRun, Usage, cost_of, parse_prices, report_of, table
from compactor_cli.evidence.evaluate import Evaluation
from compactor_cli.evidence.probes import KINDS
from compactor_cli.model.schema import schema_problems
from compactor_cli.pages.evaluate import pareto_front

MINI = FIXTURES / "real" / "psf__requests-5414.traj.json"
TAU = FIXTURES / "taubench_airline_5.jsonl"
CODEX = ROOT.parent / "shared" / "data" / "raw" / "codex"
TRIES = ["toolcall --keep 4", "toolcall --keep 4 --preview 2,2", "summarize"]


def xcompact(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def _svg_texts(dom: str, chart: str) -> list[str]:
    """The texts of one pygal chart of the rendered page (its id is chart-NAME)."""
    start = dom.index(f'id="chart-{chart}"')
    svg = dom[start:dom.index("</svg>", start)]
    return [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def _lost(figures: dict) -> dict[str, int]:
    return {k: v["probes"] - v["found"] for k, v in figures["retention"].items() if v["probes"] > v["found"]}


def _assert_eval_page_matches(tmp_path: Path, page: Path, doc: dict, shot: str) -> str:
    rendered = render(page, shot, height=2600)
    assert rendered.console == []
    dom = rendered.dom
    settings = doc["settings"]
    shown, kept = dict(elements(dom, "data-essential")), dict(elements(dom, "data-retention"))
    assert list(shown) == list(settings)  # every setting, in the order tried
    for name, s in settings.items():
        assert shown[name] == f"{100 * s['essential']:.1f}%"
        for kind in KINDS:
            r = s["retention"].get(kind)
            if r and r["probes"]:
                assert kept[f"{name}|{kind}"] == f"{100 * r['found'] / r['probes']:.0f}%"
        assert dict(elements(dom, "data-tokens-after"))[name] == f"{s['tokens_after']:,}"
    # the Pareto chart, as the browser drew it: each setting's point labelled with its figures
    texts = _svg_texts(dom, "pareto")
    for name, s in settings.items():
        assert f"{name}: {100 * s['essential']:.1f}%, {s['tokens_after']:,} tokens" in texts, texts
    points = [(n, s["tokens_after"], 100 * s["essential"]) for n, s in settings.items()]
    front = [n for n, t, p in points if not any(t2 <= t and p2 >= p and (t2, p2) != (t, p) for _, t2, p2 in points)]
    assert [v for v, _ in elements(dom, "data-front")] == front == pareto_front(points)
    assert any(f"{name} (on the front)" in texts for name in front)  # the legend says which points are on it
    # the retention chart: each setting's essential share printed on its bar
    bars = _svg_texts(dom, "retention")
    for s in settings.values():
        assert f"{100 * s['essential']:.0f}%" in bars
    return dom


@pytest.mark.browser
@pytest.mark.slow
def test_the_eval_page_shows_the_reports_numbers_in_a_browser(tmp_path):
    report, page = tmp_path / "eval.json", tmp_path / "eval.html"
    res = xcompact("eval", MINI, TAU, *[a for t in TRIES for a in ("--try", t)], "--report", report, "--html", page)
    assert res.returncode == 0, res.stderr
    doc = orjson.loads(report.read_bytes())
    assert schema_problems(doc, "eval") == []
    dom = _assert_eval_page_matches(tmp_path, page, doc, "eval-page-fixtures.png")
    # the worst records: each setting's lowest essential retention first, linked to its own page
    worst = elements(dom, "data-worst")
    assert {n for n, _ in worst} == set(TRIES)
    summarize = [(i["source"], i["settings"]["summarize"]) for i in doc["items"]
                 if i["settings"]["summarize"]["essential"] is not None]
    lowest = min(summarize, key=lambda r: r[1]["essential"])
    links = re.findall(r'<a href="(eval-records/3-\d+\.html)">([^<]*)</a>', dom)
    assert links[0] == ("eval-records/3-1.html", lowest[0])
    # its page: the compacted record, the probes it lost marked, as many as the report counts
    rec = render(tmp_path / links[0][0], "eval-record-page.png")
    assert rec.console == []
    lost = elements(rec.dom, "data-lost")
    assert {k: sum(1 for kind, _ in lost if kind == k) for k, _ in lost} == _lost(lowest[1])
    assert 'href="../eval.html"' in rec.dom and "Evidence lost under" in rec.dom
    # the same page drawn from the report afterwards (no record pages then: the records are named)
    res = xcompact("report", report, "--html", tmp_path / "again.html")
    assert res.returncode == 0, res.stderr
    again = (tmp_path / "again.html").read_text()
    assert 'data-essential="summarize"' in again and "eval-records/" not in again and lowest[0] in again


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.skipif(not CODEX.is_dir(), reason="the shared data set is not beside this checkout")
def test_the_eval_page_of_the_shared_codex_sessions(tmp_path):
    """The issue's run: three settings on the shared Codex sessions; the page in a browser."""
    report, page = tmp_path / "eval.json", tmp_path / "eval.html"
    res = xcompact("eval", *sorted(CODEX.glob("*.jsonl")), *[a for t in TRIES for a in ("--try", t)],
                   "--report", report, "--html", page)
    assert res.returncode == 0, res.stderr
    doc = orjson.loads(report.read_bytes())
    assert doc["settings"]["summarize"]["records"] >= 7
    _assert_eval_page_matches(tmp_path, page, doc, "eval-page-codex.png")
    assert len(list((tmp_path / "eval-records").glob("*.html"))) >= 3


@pytest.mark.browser
@pytest.mark.slow
def test_show_marks_the_evidence_a_summarized_record_lost(runner, tmp_path):
    out, report, page = tmp_path / "out.json", tmp_path / "eval.json", tmp_path / "view.html"
    assert runner.invoke(cli, ["summarize", str(MINI), "--backend", "extractive", "-o", str(out), "-q"]).exit_code == 0
    assert runner.invoke(cli, ["eval", str(MINI), str(out), "--report", str(report), "-q"]).exit_code == 0
    after = orjson.loads(report.read_bytes())["items"][0]["settings"]["after"]
    probes = sum(v["probes"] for v in after["retention"].values())
    lost = _lost(after)
    res = runner.invoke(cli, ["show", str(out)])
    assert res.exit_code == 0, res.stderr
    assert (f"== evidence lost: {sum(lost.values())} of the {probes} probes taken from what the compaction "
            "replaced are no longer sent ==") in res.stdout
    listed = re.findall(r"^  - \[(\w+)\] (.*)$", res.stdout, re.M)
    assert {k: sum(1 for kind, _ in listed if kind == k) for k, _ in listed} == lost
    assert [k for k, _ in listed] == sorted((k for k, _ in listed), key=KINDS.index)  # the essential kinds first
    assert any(kind == "commands" and "pip install pytest-httpbin" in text for kind, text in listed)
    assert not any(kind == "errors" for kind, _ in listed)  # the evidence section keeps the errors met
    assert runner.invoke(cli, ["show", str(out), "-o", str(page)]).exit_code == 0
    rendered = render(page, "show-lost-evidence.png")
    assert rendered.console == []
    shown = elements(rendered.dom, "data-lost")
    assert [(k, html.unescape(t.split(None, 1)[1])) for k, t in shown] == [(k, t.strip()) for k, t in listed]


def test_show_marks_what_placeholders_lost_and_nothing_on_an_uncompacted_record(runner, tmp_path):
    out, report = tmp_path / "out.json", tmp_path / "eval.json"
    assert runner.invoke(cli, ["toolcall", str(MINI), "--keep", "4", "-o", str(out), "-q"]).exit_code == 0
    assert runner.invoke(cli, ["eval", str(MINI), str(out), "--report", str(report), "-q"]).exit_code == 0
    after = orjson.loads(report.read_bytes())["items"][0]["settings"]["after"]
    lost, probes = _lost(after), sum(v["probes"] for v in after["retention"].values())
    assert lost and set(lost) <= {"errors", "commands"}  # placeholders keep the calls, lose the results' errors
    res = runner.invoke(cli, ["show", str(out)])
    assert res.exit_code == 0, res.stderr
    assert f"== evidence lost: {sum(lost.values())} of the {probes} probes" in res.stdout
    assert len(re.findall(r"^  - \[errors\] ", res.stdout, re.M)) == lost["errors"]
    # tau-bench's results are data: nothing probed is said so, not "0 of 0"
    tau = tmp_path / "tau.jsonl"
    assert runner.invoke(cli, ["toolcall", str(TAU), "--keep", "1", "-o", str(tau), "-q"]).exit_code == 0
    res = runner.invoke(cli, ["show", str(tau), "--line", "4"])
    assert res.exit_code == 0 and "== evidence lost: none probed" in res.stdout
    plain = runner.invoke(cli, ["show", str(MINI)])
    assert plain.exit_code == 0 and "evidence lost" not in plain.stdout  # nothing stored: nothing to compare


def test_prices_and_the_cost_column():
    prices = parse_prices(["gpt-4o-mini=0.15/0.60", "big=2.5/10/1.25"])
    assert prices == {"gpt-4o-mini": (0.15, 0.60, None), "big": (2.5, 10.0, 1.25)}
    usage = Usage(calls=3, records=2, prompt_tokens=1_000_000, completion_tokens=500_000, cached_tokens=200_000)
    assert cost_of(usage, prices["gpt-4o-mini"]) == pytest.approx(0.45)  # cached at the prompt price
    assert cost_of(usage, prices["big"]) == pytest.approx((800_000 * 2.5 + 200_000 * 1.25 + 500_000 * 10) / 1e6)
    assert cost_of(Usage(calls=3), prices["big"]) is None  # the server reported no tokens: no cost
    assert cost_of(usage, None) is None
    for bad in ("gpt=0.15", "=1/2", "m=a/b", "m=1/2/3/4", "m=-1/2", "m=inf/1"):
        with pytest.raises(Exception, match="--price"):
            parse_prices([bad])


def test_usage_is_summed_from_the_items_per_backend_and_priced():
    """What the items of a model backend carry (model_calls, and the server's usage per item)
    summed per setting, backend and model; the table's columns and the report's usage, valid
    against the schema."""
    run = EvalRun(["summarize", "toolcall"], {"summarize": Evaluation(records=0), "toolcall": Evaluation(records=0)})
    items = [
        {"status": "SUMMARIZED", "backend": "openai", "model": "m", "model_calls": 2,
         "usage": {"prompt_tokens": 1200, "completion_tokens": 300, "cached_tokens": 1000}},
        {"status": "SUMMARIZED", "backend": "openai", "model": "m", "model_calls": 1,
         "usage": {"prompt_tokens": 800, "completion_tokens": 100}},
        {"status": "SUMMARIZE_FAILED", "backend": "openai", "model": "m", "model_calls": 4},
        {"status": "SUMMARIZED", "rounds": [{"tier": 1}, {"tier": 2}], "backend": "openai", "model": "m",
         "model_calls": 1, "usage": {"prompt_tokens": 10, "completion_tokens": 5}},  # compact's item
        {"status": "SUMMARIZED", "backend": "extractive", "model": None, "model_calls": 0},
    ]
    for item in items:
        run.add_usage("summarize", item)
    run.add_usage("toolcall", {"status": "RECLAIMED"})
    (key, u), = run.usage["summarize"].items()
    assert key == ("openai", "m") and (u.calls, u.records) == (8, 4)
    assert (u.prompt_tokens, u.completion_tokens, u.cached_tokens) == (2010, 405, 1000)
    prices = parse_prices(["m=1/2/0.5"])
    text = table(run, prices)
    head, row, plain = text.splitlines()
    assert "model calls" in head and "prompt/completion/cached" in head and "cost" in head
    cost = (1010 * 1 + 1000 * 0.5 + 405 * 2) / 1e6
    assert "2,010/405/1,000" in row and f"${cost:,.4f}" in row and " 8 " in row
    assert plain.split()[0] == "toolcall"
    doc = report_of(run, {"price": {"m": [1, 2, 0.5]}}, prices)
    (entry,) = doc["settings"]["summarize"]["usage"]
    assert entry == {"backend": "openai", "model": "m", "records": 4, "calls": 8, "prompt_tokens": 2010,
                     "completion_tokens": 405, "cached_tokens": 1000, "cost_usd": round(cost, 6)}
    assert "usage" not in doc["settings"]["toolcall"]
    assert schema_problems(doc, "eval") == []
    assert "cost" not in table(run).splitlines()[0]  # no --price: no cost column


def test_a_model_backend_tried_reports_its_requests(runner, tmp_path):
    """A --try with the openai backend against a local scripted server: its requests are counted
    (the items' model_calls) and priced; unpriced, the cost says so."""
    from chat_server import ChatServer, good

    report = tmp_path / "eval.json"
    with ChatServer(good) as server:
        spec = f"summarize --backend openai --base-url {server.base_url} --model test-model --no-cache --keep-recent 6"
        res = runner.invoke(cli, ["eval", str(MINI), "--try", spec, "--try", "toolcall --keep 4", "--report",
                                  str(report), "--price", "other=1/1"])
        sent = len(server.requests)
    assert res.exit_code == 0, res.stderr
    doc = orjson.loads(report.read_bytes())
    (usage,) = doc["settings"][spec]["usage"]
    assert usage["backend"] == "openai" and usage["model"] == "test-model" and usage["calls"] == sent >= 1
    assert usage["cost_usd"] is None and "unpriced" in res.stderr
    assert "usage" not in doc["settings"]["toolcall --keep 4"]
    assert schema_problems(doc, "eval") == []


def test_bad_prices_are_usage_errors(runner):
    res = runner.invoke(cli, ["eval", str(MINI), "--try", "summarize", "--price", "gpt-4o=cheap"])
    assert res.exit_code == 2 and "--price 'gpt-4o=cheap'" in res.stderr and "Traceback" not in res.stderr



def test_the_record_pages_replace_an_earlier_runs_and_a_folder_that_cannot_be_is_one_line(runner, tmp_path):
    page, folder = tmp_path / "e.html", tmp_path / "e-records"
    folder.write_text("a file where the folder goes")
    res = runner.invoke(cli, ["eval", str(MINI), "--try", "summarize", "--html", str(page), "-q"])
    assert res.exit_code == 1 and f"error: cannot write the record pages in {folder}" in res.stderr
    assert "Traceback" not in res.stderr
    folder.unlink()
    folder.mkdir()
    (folder / "9-9.html").write_text("an earlier run's page")
    (folder / "notes.txt").write_text("someone's notes")
    assert runner.invoke(cli, ["eval", str(MINI), "--try", "summarize", "--html", str(page), "-q"]).exit_code == 0
    assert sorted(p.name for p in folder.iterdir()) == ["1-1.html", "notes.txt"]
    assert 'href="e-records/1-1.html"' in page.read_text()
