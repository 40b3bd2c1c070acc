"""toolcall --fit TOKENS (issue 30): the least tier-1 compaction that brings each record to at
most TOKENS — results cleared from the oldest only as far as needed — and a record that cannot
fit is written compacted as far as tier 1 goes, counted STILL_OVER (exit 1), never dropped."""

from __future__ import annotations

import orjson
from helpers import FIXTURES, long_conv
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import conversations

from compactor_cli import reclaim_tool_results, restore_conversation
from compactor_cli.cli import cli
from compactor_cli.model.tokens import counter_for
from compactor_cli.tiers.fit import fit_tool_results

COUNTER = counter_for("cl100k_base")


def _reclaim(dump, keep, cut):
    return reclaim_tool_results(dump, keep=keep, counter=COUNTER, truncate_inputs=cut)


def _size(dump) -> int:
    return COUNTER.conversation(dump["messages"] if isinstance(dump, dict) else dump)


@settings(deadline=None)
@given(conversations(), st.integers(50, 3000))
def test_fit_is_the_least_clearing_that_fits(dump, limit):
    fitted = fit_tool_results(dump, limit, COUNTER, _reclaim)
    results = sum(1 for m in dump["messages"] if m.get("role") == "tool")
    assert fitted.tokens_after == _size(fitted.dump)
    if fitted.tokens_before <= limit:
        assert fitted.dump is dump and fitted.fits
        return
    if fitted.fits:
        assert fitted.tokens_after <= limit
        if fitted.truncate_inputs is None and fitted.keep < results:  # one result more kept would not fit
            assert _size(_reclaim(dump, fitted.keep + 1, None)[0]) > limit
    else:  # nothing tier 1 can do fits: the most it does
        assert fitted.keep == 0 and fitted.tokens_after > limit
        assert fitted.tokens_after <= _size(_reclaim(dump, 0, None)[0])
    restored, _ = restore_conversation(fitted.dump)
    assert restored == dump


def test_cli_fits_what_it_can_and_never_drops_a_record(runner, tmp_path):
    src = tmp_path / "in.jsonl"
    small = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    src.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in (long_conv(rounds=20, size=600), small,
                                                              long_conv(rounds=60, size=600))))
    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    res = runner.invoke(cli, ["toolcall", str(src), "--fit", "3000", "--encoding", "cl100k_base", "-o", str(out),
                              "--report", str(report)])
    doc = orjson.loads(report.read_bytes())
    statuses = [i["status"] for i in doc["items"]]
    assert statuses == ["RECLAIMED", "UNDER_THRESHOLD", "STILL_OVER"]
    assert res.exit_code == 1  # a record over --fit is a data problem the pipeline must see
    assert len(out.read_bytes().splitlines()) == 3  # every record written
    first, _, last = doc["items"]
    assert first["tokens_after"] <= 3000 < first["tokens_before"] and first["fit_keep"] >= 1
    assert last["tokens_after"] > 3000 and doc["parameters"]["fit"] == 3000
    assert "over --fit 3000" in res.stderr
    back = tmp_path / "back.jsonl"
    assert runner.invoke(cli, ["restore", str(out), "-o", str(back), "-q"]).exit_code == 0
    assert back.read_bytes() == src.read_bytes()


def test_fit_refuses_what_it_cannot_do(runner, tmp_path):
    src = FIXTURES / "taubench_airline_5.jsonl"
    for args, message in ((["--fit", "100", "--keep", "3"], "--fit chooses"),
                          (["--fit", "100", "--no-tokens"], "--fit counts tokens")):
        res = runner.invoke(cli, ["toolcall", str(src), *args, "-o", str(tmp_path / "o.jsonl")])
        assert res.exit_code == 2 and message in res.stderr, res.stderr


def test_real_runs_fit_or_are_counted(runner, tmp_path):
    src = FIXTURES / "taubench_airline_5.jsonl"
    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    runner.invoke(cli, ["toolcall", str(src), "--fit", "2500", "-o", str(out), "--report", str(report), "-q"])
    items = orjson.loads(report.read_bytes())["items"]
    assert len(out.read_bytes().splitlines()) == len(items) == 5
    assert {it["status"] for it in items} == {"RECLAIMED", "UNDER_THRESHOLD", "STILL_OVER"}
    for it in items:
        assert it["status"] in ("RECLAIMED", "UNDER_THRESHOLD", "STILL_OVER")
        assert (it["tokens_after"] <= 2500) == (it["status"] != "STILL_OVER")
