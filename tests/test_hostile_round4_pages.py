"""Round 4 (issue 28): the dataset page of a ``--check`` run is a measurement, not a compaction.

It leads with the threshold and the conversations over it, largest first; it says nothing of
"fewer" tokens or length "reclaimed" (a check writes nothing and reclaims nothing)."""

from __future__ import annotations

import re

import orjson
from helpers import tool_conv

from compactor_cli.cli import cli


def _check_page(runner, tmp_path, sizes: list[int], threshold: int = 1000) -> tuple[str, dict]:
    src = tmp_path / "mixed.jsonl"
    convs = [tool_conv(n_tools=4, size=size) for size in sizes]
    for conv in convs:
        del conv["tokens_used"]  # counted, not taken from the record
    lines = [orjson.dumps(conv) for conv in convs] + [b"{broken"]
    src.write_bytes(b"\n".join(lines) + b"\n")
    res = runner.invoke(cli, ["compact", str(src), "--check", "--token-threshold", str(threshold),
                              "--report", str(tmp_path / "r.json"), "--html", str(tmp_path / "check.html"), "-q"])
    assert res.exit_code == 1, res.output
    return (tmp_path / "check.html").read_text(), orjson.loads((tmp_path / "r.json").read_bytes())


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_a_check_page_says_nothing_of_a_compaction(runner, tmp_path):
    html, _ = _check_page(runner, tmp_path, [2000, 50, 5000])
    text = _text(html)
    assert "fewer" not in text
    assert "reclaimed" not in text.lower()
    assert 'data-total="total_reclaimed_fraction"' not in html and 'data-total="reclaimed_count"' not in html


def test_a_check_page_leads_with_the_threshold_and_the_offenders_largest_first(runner, tmp_path):
    html, report = _check_page(runner, tmp_path, [2000, 50, 5000, 3000])
    text = _text(html)
    # the headline: the threshold, how many are over it, of how many
    header = _text(html.split("</header>")[0])
    assert "threshold 1,000 tokens" in header and "3 of 4 conversations over" in header
    # the offenders come first, before the totals and charts
    assert html.index('id="offenders"') < html.index('id="totals"') < html.index('id="charts"')
    offenders = html.split('id="offenders"')[1].split("</section>")[0]
    wheres = re.findall(r'class="where">([^<]+)<', offenders)
    sizes = {f"{item['source']}:{item['line']}": item["size_before"] for item in report["items"]
             if item["status"] == "OVER_THRESHOLD"}
    assert [w for w in wheres] == sorted(sizes, key=lambda w: -sizes[w])  # largest first
    assert "over by" in _text(offenders)
    assert f"{max(sizes.values()) - 1000:,}" in _text(offenders)
    assert "1 failed" in text


def test_a_check_page_lists_the_largest_offenders_when_there_are_more_than_it_shows(tmp_path):
    from compactor_cli.pages import digest as digest_mod
    from compactor_cli.pages.digest import DatasetDigest

    d = DatasetDigest()
    n = digest_mod.LISTED + 50
    for i in range(n):
        d.add({"source": "f.jsonl", "line": i + 1, "status": "OVER_THRESHOLD", "size_before": 1000 + (i * 7919) % n,
               "threshold": 1000, "threshold_unit": "tokens"})
    shown = d.largest_offenders()
    assert len(shown) == digest_mod.LISTED and d.offender_count == n
    assert [row[1] for row in shown] == sorted((1000 + (i * 7919) % n for i in range(n)), reverse=True)[:len(shown)]


def test_a_compaction_page_is_unchanged_in_kind(runner, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(orjson.dumps(tool_conv(n_tools=6, size=2000)) + b"\n")
    res = runner.invoke(cli, ["toolcall", str(src), "--keep", "1", "-o", str(tmp_path / "out.jsonl"),
                              "--html", str(tmp_path / "page.html"), "-q"])
    assert res.exit_code == 0, res.output
    html = (tmp_path / "page.html").read_text()
    assert "fewer" in html and 'data-total="total_reclaimed_fraction"' in html
    assert 'id="offenders"' not in html
