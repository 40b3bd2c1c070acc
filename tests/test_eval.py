"""`xcompact eval` (issue 29): what a compaction keeps, measured on real runs, from the command
line as a user runs it; its figures are the library's (compactor_cli.evidence.evaluate), the
implementation bench/bench_evidence.py uses."""

from __future__ import annotations

import orjson
from helpers import FIXTURES
from hypothesis import given, settings
from strategies import conversations

from compactor_cli import formats
from compactor_cli.cli import cli
from compactor_cli.evidence.evaluate import evaluate
from compactor_cli.model.tokens import counter_for

MINI = FIXTURES / "real" / "psf__requests-5414.traj.json"
TAU = FIXTURES / "taubench_airline_5.jsonl"


def test_settings_tried_in_memory_are_compared_on_the_same_probes(runner, tmp_path):
    report = tmp_path / "eval.json"
    res = runner.invoke(cli, ["eval", str(MINI), "--try", "toolcall --keep 4", "--try", "summarize",
                              "--try", "compact --token-threshold 20000", "--report", str(report)])
    assert res.exit_code == 0, res.stderr
    assert res.stdout == ""  # data only on stdout: the table is for a person, on stderr
    assert "toolcall --keep 4" in res.stderr and "essential" in res.stderr
    doc = orjson.loads(report.read_bytes())
    assert doc["command"] == "eval" and list(doc["settings"]) == ["toolcall --keep 4", "summarize",
                                                                  "compact --token-threshold 20000"]
    probes = {name: sum(v["probes"] for v in s["retention"].values()) for name, s in doc["settings"].items()}
    assert len(set(probes.values())) == 1 and probes["summarize"] > 20  # the same probes for every setting
    summarize = doc["settings"]["summarize"]
    assert summarize["retention"]["files_modified"]["found"] == summarize["retention"]["files_modified"]["probes"]
    assert summarize["tokens_after"] < doc["settings"]["toolcall --keep 4"]["tokens_after"]
    assert set(summarize["tokens_by_category_before"]) >= {"system", "user", "tool_calls", "tool_results"}


def test_a_compaction_already_made_is_measured_as_the_library_measures_it(runner, tmp_path):
    out, report = tmp_path / "out.json", tmp_path / "eval.json"
    assert runner.invoke(cli, ["summarize", str(MINI), "-o", str(out), "-q"]).exit_code == 0
    res = runner.invoke(cli, ["eval", str(MINI), str(out), "--report", str(report)])
    assert res.exit_code == 0, res.stderr
    got = orjson.loads(report.read_bytes())["items"][0]["settings"]["after"]
    ((_, before, _),) = list(formats.read_file(str(MINI)))
    ((_, after, _),) = list(formats.read_file(str(out)))
    counter = counter_for("cl100k_base")
    want = evaluate(before["messages"], {"after": after["messages"]}, counter)["after"]
    assert got == want.as_dict()


def test_min_retention_gates_a_pipeline_and_names_the_records_below(runner, tmp_path):
    out = tmp_path / "out.json"
    assert runner.invoke(cli, ["summarize", str(MINI), "--no-evidence", "--no-keep-task", "--keep-user-tokens", "0",
                               "-o", str(out), "-q"]).exit_code == 0
    res = runner.invoke(cli, ["eval", str(MINI), str(out), "--min-retention", "essential=90"])
    assert res.exit_code == 1
    assert f"below the minimum: {MINI}: essential retention" in res.stderr
    assert runner.invoke(cli, ["eval", str(MINI), str(out), "--min-retention", "essential=10"]).exit_code == 0


def test_the_table_is_one_line_per_row_on_stderr(runner):
    res = runner.invoke(cli, ["eval", str(TAU), "--try", "toolcall --keep 4", "--try", "toolcall --keep 1"])
    assert res.exit_code == 0, res.stderr
    lines = res.stderr.splitlines()
    assert lines[0].startswith("setting") and "per 1k" in lines[0]
    assert [line.split("  ")[0] for line in lines[1:3]] == ["toolcall --keep 4", "toolcall --keep 1"]
    assert "\\n" not in res.stderr  # emit() escapes a newline inside one line: the table is not one line


def test_the_report_and_the_page_never_replace_an_input(runner, tmp_path):
    """eval reads its inputs only: a --report or --html path that is one of them is a usage
    error before anything runs, as it is for every command (the input is left as it was)."""
    data = tmp_path / "data.jsonl"
    data.write_bytes(TAU.read_bytes())
    after = tmp_path / "after.jsonl"
    assert runner.invoke(cli, ["toolcall", str(data), "--keep", "1", "-q", "-o", str(after)]).exit_code == 0
    kept = {p: p.read_bytes() for p in (data, after)}
    for args in (["eval", str(data), "--try", "toolcall --keep 4", "--html", str(data)],
                 ["eval", str(data), "--try", "toolcall --keep 4", "--report", str(data)],
                 ["eval", str(data), str(after), "--html", str(after)],
                 ["eval", str(data), str(after), "--report", str(tmp_path / "." / "after.jsonl")]):
        res = runner.invoke(cli, args)
        assert res.exit_code == 2, (args, res.stderr)
        assert "is the input" in res.stderr and "Traceback" not in res.stderr
        assert {p: p.read_bytes() for p in kept} == kept, args


def test_usage_errors_are_exit_2_with_one_line(runner, tmp_path):
    for args in (["eval", str(TAU)], ["eval", str(TAU), "--try", "toolcall -o x.jsonl"],
                 ["eval", str(TAU), "--try", "restore"], ["eval", str(TAU), "--try", "toolcall --keep -1"],
                 ["eval", str(TAU), "--try", "summarize", "--min-retention", "vibes=10"]):
        res = runner.invoke(cli, args)
        assert res.exit_code == 2, (args, res.stderr)
        assert "Traceback" not in res.stderr and "Error:" in res.stderr


def test_a_bad_record_is_named_and_the_rest_is_measured(runner, tmp_path):
    src = tmp_path / "in.jsonl"
    lines = TAU.read_bytes().splitlines(keepends=True)
    src.write_bytes(lines[0] + b'{"messages": [{"role": "robot"}]}\n' + lines[1])
    report = tmp_path / "eval.json"
    res = runner.invoke(cli, ["eval", str(src), "--try", "toolcall --keep 2", "--report", str(report)])
    assert res.exit_code == 1
    assert f"error: {src}:2:" in res.stderr and "unknown role" in res.stderr
    doc = orjson.loads(report.read_bytes())
    assert [i["source"] for i in doc["items"]] == [f"{src}:1", f"{src}:3"] and len(doc["failures"]) == 1


def test_records_are_matched_by_order_and_a_count_mismatch_is_an_error(runner, tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_bytes(TAU.read_bytes().splitlines(keepends=True)[0])
    res = runner.invoke(cli, ["eval", str(TAU), str(out)])
    assert res.exit_code == 1 and "records are matched by their order" in res.stderr


def test_the_agents_own_compaction_is_measured_from_its_log(runner, tmp_path):
    """A Claude Code session with a compact boundary: the whole log against what the model had
    after it; a session without one is skipped with a note, not failed."""
    report = tmp_path / "eval.json"
    session = FIXTURES / "formats" / "claude_code_session.jsonl"  # holds a compact boundary
    plain = FIXTURES / "formats" / "claude_code_tool_heavy.jsonl"
    res = runner.invoke(cli, ["eval", "--agent-compaction", str(session), str(plain), "--report", str(report)])
    assert res.exit_code == 0, res.stderr
    assert f"note: {plain}: the session has no compaction to measure" in res.stderr
    doc = orjson.loads(report.read_bytes())
    assert [i["source"] for i in doc["items"]] == [str(session)] and doc["failures"] == []
    agent = doc["settings"]["agent's own compaction"]
    assert agent["tokens_after"] < agent["tokens_before"]
    assert runner.invoke(cli, ["eval", "--agent-compaction", str(TAU)]).exit_code == 1  # not a Claude Code log


@settings(deadline=None)
@given(conversations())
def test_the_token_breakdown_sums_to_the_conversations_count(dump):
    """Issue 29: the categories of a record's tokens add up to its total in the chosen encoding."""
    from compactor_cli.evidence.evaluate import tokens_by_category
    from compactor_cli.model.tokens import counter_for

    counter = counter_for("o200k_base")
    by_category = tokens_by_category(dump["messages"], counter)
    assert sum(by_category.values()) == counter.conversation(dump["messages"])


def test_the_breakdown_of_real_runs_sums_to_the_report_tokens(runner, tmp_path):
    report = tmp_path / "r.json"
    res = runner.invoke(cli, ["eval", str(FIXTURES / "real" / "codex_rollout_apply_patch.jsonl"),
                              str(FIXTURES / "formats" / "claude_code_session.jsonl"),
                              "--try", "toolcall --keep 2", "--report", str(report), "-q"])
    assert res.exit_code == 0, res.stderr
    doc = orjson.loads(report.read_bytes())
    for item in doc["items"]:
        for figures in item["settings"].values():
            assert sum(figures["tokens_by_category_before"].values()) == figures["tokens_before"]
            assert sum(figures["tokens_by_category_after"].values()) == figures["tokens_after"]
