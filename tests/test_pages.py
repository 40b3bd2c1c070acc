"""The pages, in a real browser: the dataset page (--html, xcompact report) and the conversation
view (xcompact show). Headless Chromium loads each page from file://; the tests compare what it
rendered with the JSON report and with the dumps, require a silent console (no script error, no
failed load: nothing is fetched), and save a screenshot for a person to look at."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from browser import elements, render
from helpers import FIXTURES, ROOT, read_jsonl, tool_conv
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli import ORIGINALS_KEY
from compactor_cli.pages.digest import DatasetDigest

SHARED = ROOT.parent / "shared" / "data"
XCOMPACT = [sys.executable, "-m", "compactor_cli"]


def xcompact(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*XCOMPACT, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def _number(text: str) -> float:
    text = text.replace(",", "").strip()
    return float(text[:-1]) / 100 if text.endswith("%") else float(text)


def _page_totals(dom: str) -> dict[str, float]:
    return {key: _number(text) for key, text in elements(dom, "data-total")}


def _assert_page_matches_report(dom: str, report: dict) -> None:
    totals = report["totals"]
    shown = _page_totals(dom)
    assert shown.pop("exit_code") == report["exit_code"]
    assert shown, "the page shows no totals"
    for key, value in shown.items():
        expected = totals[key]
        if isinstance(expected, float):  # fractions are printed to 0.1%
            assert value == pytest.approx(expected, abs=0.0005), key
        else:
            assert value == expected, key
    if (report.get("parameters") or {}).get("check"):  # a measurement: no reclaimed length, no tokens after
        assert {"conversations", "failed", "warnings"} <= set(shown)
        assert not {"total_reclaimed_fraction", "reclaimed_count", "tokens_after"} & set(shown)
        if totals["tokens_before"] is not None:
            assert "tokens_before" in shown
    else:
        assert {"conversations", "failed", "warnings", "total_reclaimed_fraction"} <= set(shown)
        if totals["tokens_before"] is not None:
            assert {"tokens_before", "tokens_after"} <= set(shown)
    assert {s: int(_number(n)) for s, n in elements(dom, "data-status")} == totals["statuses"]


@pytest.mark.browser
@pytest.mark.slow
def test_the_dataset_page_shows_the_reports_totals_in_a_browser(tmp_path):
    inputs = [FIXTURES / "taubench_airline_5.jsonl", FIXTURES / "swe_agent_3.jsonl",
              FIXTURES / "formats" / "claude_code_tool_heavy.jsonl",
              FIXTURES / "formats" / "swe_agent_text_actions.traj"]
    res = xcompact("compact", *map(str, inputs), "--token-threshold", "3000", "--backend", "extractive",
                   "-o", str(tmp_path / "out"), "--report", str(tmp_path / "report.json"),
                   "--html", str(tmp_path / "page.html"))
    assert res.returncode == 0, res.stderr
    report = orjson.loads((tmp_path / "report.json").read_bytes())
    page = tmp_path / "page.html"
    rendered = render(page, "dataset-page-fixtures.png")
    assert rendered.console == []
    _assert_page_matches_report(rendered.dom, report)
    assert rendered.dom.count("<svg") >= 3  # statuses, reclaimed fraction, before/after (+ the largest)
    # the same page from the report afterwards (only the line naming the report differs)
    res = xcompact("report", str(tmp_path / "report.json"), "--html", str(tmp_path / "again.html"))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "again.html").read_bytes() == page.read_bytes()


@pytest.mark.browser
@pytest.mark.slow
def test_the_dataset_page_lists_failures_and_offenders_with_file_and_line(tmp_path):
    src = tmp_path / "mixed.jsonl"
    lines = [orjson.dumps(tool_conv(n_tools=8, size=3000)), b"{broken", orjson.dumps(tool_conv(n_tools=2, size=50))]
    src.write_bytes(b"\n".join(lines) + b"\n")
    res = xcompact("compact", str(src), "--check", "--token-threshold", "1000", "--report", str(tmp_path / "r.json"),
                   "--html", str(tmp_path / "check.html"), "-q")
    assert res.returncode == 1
    report = orjson.loads((tmp_path / "r.json").read_bytes())
    rendered = render(tmp_path / "check.html", "dataset-page-check.png")
    assert rendered.console == []
    _assert_page_matches_report(rendered.dom, report)
    counts = dict(elements(rendered.dom, "data-count"))
    statuses = report["totals"]["statuses"]
    assert statuses["OVER_THRESHOLD"] >= 1 and statuses["INVALID_INPUT"] == 1
    assert counts["offenders"] == f"({statuses['OVER_THRESHOLD']})" and counts["failures"] == "(1)"
    assert f"{src}:1" in rendered.dom and f"{src}:2" in rendered.dom  # the offender and the broken line
    assert "broken JSON" in rendered.dom


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "taubench_gpt-4o-airline.jsonl").exists(),
                    reason="the shared data set is not beside this checkout")
def test_the_dataset_page_of_the_real_transcripts(tmp_path):
    inputs = [SHARED / "taubench_gpt-4o-airline.jsonl", SHARED / "swe-agent.jsonl", SHARED / "raw" / "claude-code"]
    res = xcompact("compact", *map(str, inputs), "--token-threshold", "8000", "--backend", "extractive",
                   "-o", str(tmp_path / "out"), "--report", str(tmp_path / "report.json"),
                   "--html", str(tmp_path / "page.html"), "-q")
    assert res.returncode in (0, 1), res.stderr
    report = orjson.loads((tmp_path / "report.json").read_bytes())
    assert report["totals"]["conversations"] > 50
    rendered = render(tmp_path / "page.html", "dataset-page-real.png")
    assert rendered.console == []
    _assert_page_matches_report(rendered.dom, report)


def _placeholder_ids(dump: dict) -> set[str]:
    """The tool-call IDs whose results are placeholders, in the conversation and in its archive."""
    from compactor_cli.tiers.store import tool_slots

    return {s.cid for s in tool_slots(dump) if s.is_placeholder}


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("name, source, line, threshold", [
    ("tau-bench", FIXTURES / "taubench_airline_5.jsonl", 4, 2500),
    ("swe-agent", FIXTURES / "formats" / "swe_agent_function_calling.traj", None, 1500),
    ("claude-code", FIXTURES / "formats" / "claude_code_tool_heavy.jsonl", None, 600),
])
def test_show_renders_a_compacted_conversation_with_every_placeholder_and_the_summary(tmp_path, name, source, line,
                                                                                     threshold):
    out = tmp_path / ("out.jsonl" if name == "tau-bench" else "out.json")
    res = xcompact("compact", str(source), "--token-threshold", str(threshold), "--keep", "2", "--keep-recent", "6",
                   "--backend", "extractive", "-o", str(out), "-q")
    assert res.returncode == 0 or (res.returncode == 1 and "still over" in res.stderr), res.stderr
    dump = read_jsonl(out)[line - 1] if line else orjson.loads(out.read_bytes())
    assert dump["summarized_messages"] and dump[ORIGINALS_KEY]  # the run did both tiers
    page = tmp_path / "view.html"
    args = ["show", str(out), "-o", str(page)] + (["--line", str(line)] if line else [])
    res = xcompact(*args)
    assert res.returncode == 0, res.stderr
    rendered = render(page, f"show-{name}.png", height=2200)
    assert rendered.console == []
    shown = {value for value, _ in elements(rendered.dom, "data-placeholder")}
    assert shown == _placeholder_ids(dump)
    originals = dict(elements(rendered.dom, "data-original-of"))
    for cid in shown:  # each placeholder's original is on the page, folded beside it
        stored = dump[ORIGINALS_KEY].get(cid)
        if isinstance(stored, str) and stored.strip():
            assert stored.strip().replace("\r\n", "\n")[:200] in originals[cid]  # HTML reads CRLF as LF
    summaries = elements(rendered.dom, "data-summary")
    assert len(summaries) == 1 and "## overview" in summaries[0][1]
    assert len(elements(rendered.dom, "data-round")) == len(dump["summarized_messages"])
    tokens = [int(v) for v, _ in elements(rendered.dom, "data-tokens")]
    assert len(tokens) >= len(dump["messages"]) and all(t > 0 for t in tokens)


def test_show_as_text_marks_placeholders_and_summaries(tmp_path):
    out = tmp_path / "out.jsonl"
    assert xcompact("compact", str(FIXTURES / "taubench_airline_5.jsonl"), "--token-threshold", "3000", "--backend",
                    "extractive", "-o", str(out), "-q").returncode == 0
    dump = read_jsonl(out)[3]
    res = xcompact("show", str(out), "--line", "4")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("PLACEHOLDER (") == len(_placeholder_ids(dump))
    assert res.stdout.count("· SUMMARY") == 1
    assert f"{out}:4 · openai · {len(dump['messages'])} messages" in res.stdout
    first = xcompact("show", str(out))
    assert first.returncode == 0 and "--line N chooses" in first.stderr and f"{out}:1 ·" in first.stdout


@pytest.mark.browser
@pytest.mark.slow
def test_hostile_text_is_shown_never_run(tmp_path):
    """Content is text: a tool result holding a script, and file names with markup, never execute
    (the browser's console would say so) and are shown as written."""
    conv = tool_conv(n_tools=4, size=300)
    evil = '<script>console.log("ran")</script><img src=x onerror=console.log("ran2")>'
    conv["messages"][3]["content"] = evil + " x" * 400
    src = tmp_path / "<b>evil<b>.json"
    src.write_bytes(orjson.dumps(conv))
    out = tmp_path / "out.json"
    assert xcompact("toolcall", str(src), "--keep", "1", "-o", str(out), "--html", str(tmp_path / "d.html"),
                    "-q").returncode == 0
    assert xcompact("show", str(out), "-o", str(tmp_path / "v.html")).returncode == 0
    for page in ("d.html", "v.html"):
        rendered = render(tmp_path / page)
        assert rendered.console == [], page
    assert "&lt;script&gt;console.log" in (tmp_path / "v.html").read_text()
    assert "&lt;b&gt;evil&lt;b&gt;" in (tmp_path / "d.html").read_text()


@pytest.mark.browser
@pytest.mark.slow
def test_the_console_check_can_fail(tmp_path):
    """The browser helper does see a script error and a failed load (so a silent console means something)."""
    page = tmp_path / "bad.html"
    page.write_text('<p>x</p><script>undefinedFunction()</script><img src="https://example.com/x.png">')
    console = render(page).console
    assert any("undefinedFunction" in line for line in console)


@pytest.mark.browser
@pytest.mark.slow
def test_the_dataset_page_stays_small_for_100000_conversations(tmp_path):
    """Aggregates and top lists: once its lists are full (a few thousand conversations), the page
    does not grow: 100,000 conversations give the same size as 20,000."""
    def report(n: int) -> Path:
        rng = random.Random(n)
        items = []
        for i in range(n):
            before = rng.randint(1000, 200_000)
            after = int(before * rng.random())
            item = {"source": "data.jsonl", "line": i + 1, "status": "RECLAIMED" if i % 7 else "NOTHING_TO_CONDENSE",
                    "tokens_before": before, "tokens_after": after, "length_before": before * 4,
                    "length_after": after * 4, "reclaimed_fraction": 1 - after / before, "reclaimed_count": 3}
            if i % 100 == 3:
                item.update(status="INVALID_INPUT", error="broken JSON: unexpected character")
            if i % 50 == 1:
                item.update(warnings=["tool-call ID 'x' is used again"], warning_count=1)
            items.append(item)
        statuses: dict[str, int] = {}
        for item in items:
            statuses[item["status"]] = statuses.get(item["status"], 0) + 1
        doc = {"tool": "xcompact", "version": "0", "command": "toolcall", "parameters": {}, "items": items,
               "totals": {"files": 1, "conversations": n, "statuses": statuses,
                          "failed": statuses.get("INVALID_INPUT", 0), "reclaimed_count": 3 * n,
                          "mean_reclaimed_fraction": 0.5, "total_reclaimed_fraction": 0.5,
                          "tokens_before": sum(i["tokens_before"] for i in items),
                          "tokens_after": sum(i["tokens_after"] for i in items)},
               "exit_code": 1}
        path = tmp_path / f"r{n}.json"
        path.write_bytes(orjson.dumps(doc))
        return path

    sizes = {}
    for n in (20_000, 100_000):
        page = tmp_path / f"p{n}.html"
        res = xcompact("report", str(report(n)), "--html", str(page))
        assert res.returncode == 0, res.stderr
        sizes[n] = page.stat().st_size
    assert sizes[100_000] < 1.05 * sizes[20_000] and sizes[100_000] < 800_000, sizes
    rendered = render(tmp_path / "p100000.html", "dataset-page-100000.png")
    assert rendered.console == []
    assert _page_totals(rendered.dom)["conversations"] == 100_000
    assert "(1,000 of 99,000 drawn)" in rendered.dom  # the chart says it draws a sample (failures have no sizes)


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**6), st.integers(0, 10**6), st.sampled_from(["RECLAIMED", "VALID"])),
                min_size=1, max_size=60), st.randoms(use_true_random=False))
def test_the_digest_is_the_same_whatever_order_the_items_come_in(rows, rnd):
    """A local run, -j N, a Ray run and a report read back feed items in different orders."""
    from compactor_cli.pages import digest as digest_module

    items = [{"source": "f.jsonl", "line": i + 1, "status": s, "tokens_before": b, "tokens_after": min(a, b)}
             for i, (b, a, s) in enumerate(rows)]
    shuffled = list(items)
    rnd.shuffle(shuffled)
    old = digest_module.SAMPLE_POINTS
    digest_module.SAMPLE_POINTS = 10  # small, so that the sample is a real choice
    try:
        one, two = DatasetDigest(), DatasetDigest()
        for item in items:
            one.add(item)
        for item in shuffled:
            two.add(item)
    finally:
        digest_module.SAMPLE_POINTS = old
    assert one.points() == two.points()
    assert [r["before"] for r in one.largest_first()] == [r["before"] for r in two.largest_first()]
    assert one.largest_first()[0]["before"] == max(b for b, _, _ in rows)
    assert DatasetDigest.from_state(orjson.loads(orjson.dumps(one.state()))).points() == one.points()


@pytest.mark.parametrize("args, message", [
    (["report", "{d}/in.jsonl", "--html", "{d}/p.html"], "not a JSON report"),
    (["report", "{d}/o.json", "--html", "{d}/p.html"], "not an xcompact report"),
    (["report", "{d}/missing.json", "--html", "{d}/p.html"], "cannot read the report"),
    (["show", "{d}/in.jsonl", "--line", "9"], "there is no line 9"),
    (["report", "{d}/empty.jsonl", "--html", "{d}/p.html"], "empty.jsonl: empty file, not a JSON report"),
    # the file as a whole cannot be shown: named first, as every command names it
    (["show", "{d}/empty.jsonl"], "error: {d}/empty.jsonl: empty file"),
    (["show", "{d}/notjson.txt"], "error: {d}/notjson.txt: not JSON"),
    (["show", "{d}/sub"], "error: {d}/sub: is a directory"),
    (["toolcall", "{d}/in.jsonl", "--html", "{d}/in.jsonl", "-o", "{d}/o.jsonl"], "--html"),
    (["toolcall", "{d}/in.jsonl", "--report", "{d}/r.json", "--html", "{d}/r.json", "-o", "{d}/o.jsonl"],
     "--report and --html"),
])
def test_page_commands_refuse_with_one_line(tmp_path, args, message):
    shutil.copy(FIXTURES / "taubench_airline_5.jsonl", tmp_path / "in.jsonl")
    (tmp_path / "o.json").write_bytes(b'{"tool": "other", "items": []}')
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "notjson.txt").write_bytes(b"not json\n")
    (tmp_path / "sub").mkdir()
    before = (tmp_path / "in.jsonl").read_bytes()
    res = xcompact(*[a.format(d=tmp_path) for a in args])
    assert res.returncode in (1, 2) and message.format(d=tmp_path) in res.stderr and "Traceback" not in res.stderr
    assert (tmp_path / "in.jsonl").read_bytes() == before
    assert not (tmp_path / "p.html").exists()



@pytest.mark.slow
def test_a_resumed_run_draws_the_same_page_as_an_uninterrupted_one(tmp_path):
    """--html with --resume: the page's aggregates are checkpointed with the report's totals."""
    from helpers import killed_run

    sys.path.insert(0, str(ROOT / "bench"))
    from generate import generate

    generate(str(tmp_path / "data.jsonl"), 4)
    args = ["toolcall", "in.jsonl", "--keep", "2", "-j", "1", "-q", "-o", "out.jsonl", "--report", "report.json",
            "--html", "page.html"]
    for name in ("killed", "whole"):
        (tmp_path / name).mkdir()
        shutil.copy(tmp_path / "data.jsonl", tmp_path / name / "in.jsonl")
    killed_run(args, min_offset=(tmp_path / "data.jsonl").stat().st_size // 3, cwd=tmp_path / "killed")
    assert not (tmp_path / "killed" / "page.html").exists()
    resumed = xcompact(*args, "--resume", cwd=tmp_path / "killed")
    whole = xcompact(*args, cwd=tmp_path / "whole")
    assert resumed.returncode == whole.returncode == 0, resumed.stderr + whole.stderr
    assert (tmp_path / "killed" / "report.json").read_bytes() == (tmp_path / "whole" / "report.json").read_bytes()
    assert (tmp_path / "killed" / "page.html").read_bytes() == (tmp_path / "whole" / "page.html").read_bytes()


def test_a_file_name_that_is_not_utf8_runs_and_draws_its_pages(tmp_path):
    import os

    name = os.fsdecode(b"b\x80d.jsonl")
    src = tmp_path / name
    shutil.copy(FIXTURES / "taubench_airline_5.jsonl", src)
    res = xcompact("toolcall", str(src), "--keep", "1", "-o", str(tmp_path / "out.jsonl"), "--html",
                   str(tmp_path / "d.html"), "--report", str(tmp_path / "r.json"), "-q")
    assert res.returncode == 0, res.stderr
    report = orjson.loads((tmp_path / "r.json").read_bytes())  # JSON text: the name's odd byte as U+FFFD
    assert {i["source"] for i in report["items"]} == {str(tmp_path / "b\ufffdd.jsonl")}
    res = xcompact("show", str(src), "--line", "2", "-o", str(tmp_path / "v.html"))
    assert res.returncode == 0, res.stderr
    for page in ("d.html", "v.html"):
        assert "b?d.jsonl" in (tmp_path / page).read_text() or "b\ufffdd.jsonl" in (tmp_path / page).read_text()
