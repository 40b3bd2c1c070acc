"""The tiered policy of `xcompact compact`: thresholds, escalation, retries, statuses, --check."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from helpers import FIXTURES, long_conv, tool_conv
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import conversations

from compactor_cli import restore_conversation
from compactor_cli.backends.extractive import ExtractiveBackend
from compactor_cli.cli import cli
from compactor_cli.errors import UsageError
from compactor_cli.model.tokens import TokenCounter
from compactor_cli.status import Status
from compactor_cli.tiers.compact import ESCALATION_RATIO, Policy, compact_conversation, resolve_threshold

COUNTER = TokenCounter()
BACKEND = ExtractiveBackend(COUNTER.text)


def compact(dump, **kw):
    return asyncio.run(compact_conversation(dump, Policy(**kw), BACKEND, COUNTER))


def tokens(dump):
    return COUNTER.conversation(dump["messages"])


def test_thresholds_exclude_each_other_and_default_from_the_model():
    with pytest.raises(UsageError, match="cannot be used together"):
        resolve_threshold(1000, 10, None, None)
    assert resolve_threshold(None, None, "gpt-4o-2024-08-06", None)[0] == int(128_000 * 0.7)
    assert resolve_threshold(None, None, "my-local-model", 32_000)[0] == 22_400
    with pytest.raises(UsageError, match="--context-window"):
        resolve_threshold(None, None, "my-local-model", None)
    assert resolve_threshold(None, None, None, None)[0] == 192_000


def test_cli_rejects_both_thresholds(runner):
    res = runner.invoke(cli, ["compact", "--token-threshold", "5", "--message-threshold", "5",
                              str(FIXTURES / "airline_list.json")])
    assert res.exit_code == 2 and "cannot be used together" in res.stderr and res.stdout == ""


def test_under_threshold_is_left_alone():
    dump = long_conv()
    del dump["tokens_used"]
    new, status, fields = compact(dump, token_threshold=tokens(dump) + 1)
    assert status is Status.UNDER_THRESHOLD and new is dump and fields["rounds"] == []


def test_observed_tokens_used_is_the_measure():
    dump = long_conv()
    dump["tokens_used"] = 10
    _, status, fields = compact(dump, token_threshold=1000)
    assert status is Status.UNDER_THRESHOLD and fields["size_source"] == "observed"


def test_reclaim_alone_when_it_brings_the_estimate_under_the_ratio():
    dump = long_conv(rounds=20, size=2000)
    del dump["tokens_used"]
    before = tokens(dump)
    new, status, fields = compact(dump, token_threshold=int(before * 0.8))
    assert status is Status.RECLAIMED
    assert [r["tier"] for r in fields["rounds"]] == [1]
    assert fields["size_after"] <= int(before * 0.8) * ESCALATION_RATIO
    assert new["tokens_used"] is None and new["compaction_counter"]["toolcall_rounds"] == 1
    assert restore_conversation(new)[0] == dump


def test_escalates_to_a_summary_in_the_same_round_on_the_ratio():
    dump = long_conv(rounds=20)
    del dump["tokens_used"]
    new, status, fields = compact(dump, token_threshold=tokens(dump) // 4)
    assert status is Status.SUMMARIZED
    assert [(r["tier"], r.get("reason")) for r in fields["rounds"][:2]] == [(1, None), (2, "ratio")]
    summaries = sum(1 for r in fields["rounds"] if r.get("status") == "SUMMARIZED")
    assert new["compaction_counter"] == {"summary_rounds": summaries, "toolcall_rounds": 0}
    assert restore_conversation(new)[0] == dump


def test_escalates_when_the_tool_round_counter_reaches_escalation_rounds():
    dump = long_conv(rounds=20, size=2000)
    del dump["tokens_used"]
    threshold = int(tokens(dump) * 0.8)  # tier 1 alone would do
    dump["compaction_counter"] = {"toolcall_rounds": 1, "summary_rounds": 0}
    new, status, fields = compact(dump, token_threshold=threshold, escalation_rounds=2)
    assert status is Status.SUMMARIZED
    assert fields["rounds"][1]["reason"] == "escalation_rounds"
    _, status, _ = compact(dump, token_threshold=threshold, escalation_rounds=3)
    assert status is Status.RECLAIMED


def test_retries_halve_both_keep_counts_then_still_over():
    dump = long_conv(rounds=20)
    dump["messages"][-1]["content"] = "x " * 5000  # a huge recent message nothing can remove
    del dump["tokens_used"]
    new, status, fields = compact(dump, token_threshold=3000, keep=12, keep_recent=16, max_retries=2)
    assert status is Status.STILL_OVER
    tier1 = [r["keep"] for r in fields["rounds"] if r["tier"] == 1]
    tier2 = [r["keep_recent"] for r in fields["rounds"] if r["tier"] == 2]
    assert tier1 == [12, 6, 3] and tier2 == [16, 8, 4]
    assert fields["over_by"] == fields["size_after"] - 3000 > 0
    assert new is not dump and tokens(new) < tokens(dump)  # the best result is kept
    assert restore_conversation(new)[0] == dump


def test_message_threshold():
    dump = long_conv(rounds=20)
    new, status, fields = compact(dump, message_threshold=40, keep_recent=16)
    assert status is Status.SUMMARIZED and len(new["messages"]) <= 40
    assert fields["threshold_unit"] == "messages"


@settings(deadline=None)
@given(conversations(max_turns=30), st.integers(20, 800), st.integers(0, 6), st.integers(0, 8), st.booleans())
def test_restore_after_compact_gives_back_the_input(dump, threshold, keep, keep_recent, keep_originals):
    new, status, fields = compact(dump, token_threshold=threshold, keep=keep, keep_recent=keep_recent,
                                  keep_originals=keep_originals, max_retries=3)
    assert fields["tokens_after"] == tokens(new), "the report must count what is written"
    assert fields["tokens_before"] == tokens(dump)
    if keep_originals:
        assert restore_conversation(new)[0] == dump


@pytest.mark.parametrize("rounds, threshold, keep_recent", [(29, 100, 2), (28, 500, 16), (12, 300, 6)])
def test_originals_drop_reports_the_tokens_of_what_it_writes(rounds, threshold, keep_recent):
    """Each round frees the previous round's messages; a memo keyed by their addresses gave
    their counts to new messages allocated there."""
    dump = long_conv(rounds=rounds)
    del dump["tokens_used"]
    new, status, fields = compact(dump, token_threshold=threshold, keep=4, keep_recent=keep_recent,
                                  keep_originals=False, max_retries=3)
    assert status is Status.SUMMARIZED or status is Status.STILL_OVER
    assert fields["tokens_after"] == tokens(new)


def chatty(turns: int = 20) -> dict:
    """Two tiny messages, then long plain turns: no tool results for tier 1 to reclaim."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "ok"}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Tell me about topic {i}. " + "Some detail here. " * 40})
        messages.append({"role": "assistant", "content": f"Topic {i} is broad. " + "An explanation follows. " * 40})
    return {"messages": messages}


def test_a_summary_that_would_not_be_smaller_takes_the_next_round():
    """keep_recent 40 leaves a head of two tiny messages: its summary cannot be smaller. That is
    not a server failure: the next round halves keep_recent and the summary succeeds."""
    dump = chatty()
    new, status, fields = compact(dump, token_threshold=tokens(dump) // 3, keep_recent=40, max_retries=2)
    tier2 = [r for r in fields["rounds"] if r["tier"] == 2]
    assert tier2[0]["status"] == "NOTHING_TO_CONDENSE" and tier2[0]["reason_kind"] == "not_smaller"
    assert "not smaller" in tier2[0]["reason"]
    assert tier2[1]["keep_recent"] == 20 and tier2[1]["status"] == "SUMMARIZED"
    assert status in (Status.SUMMARIZED, Status.STILL_OVER) and status is not Status.SUMMARIZE_FAILED
    assert restore_conversation(new)[0] == dump


def test_a_server_failure_does_not_take_the_next_round():
    from compactor_cli.errors import BackendError

    class Down:
        name, model = "down", None

        async def summarize(self, request):
            raise BackendError("HTTP 503 from the server")

    dump = chatty()
    new, status, fields = asyncio.run(compact_conversation(dump, Policy(token_threshold=tokens(dump) // 3,
                                                                        keep_recent=4), Down(), COUNTER))
    assert status is Status.SUMMARIZE_FAILED and "503" in fields["error"]
    # the failed summary's round, then the fallback ladder: every tool output cleared, the extractive summary
    assert [r["tier"] for r in fields["rounds"]] == [1, 2, 1, 2] and "reason_kind" not in fields["rounds"][1]
    assert [r.get("fallback", "")[:17] for r in fields["rounds"]] == ["", "", "the summary faile", "the summary faile"]
    assert fields["rounds"][2]["keep"] == 0 and fields["rounds"][3]["status"] == "SUMMARIZED"
    assert fields["size_after"] <= tokens(dump) // 3 and "summary failed" not in str(new["messages"][0]["content"])
    assert restore_conversation(new)[0] == dump  # nothing lost on the way down


# ---- CLI: --check, --dry-run, the report
def test_check_names_each_offender_with_its_size_and_threshold_also_with_q(tmp_path):
    """The CI gate's result: one stderr line per conversation over its threshold (file:line,
    tokens, threshold), with and without -q; the report's items are the same offenders."""
    import subprocess
    import sys

    src = FIXTURES / "taubench_airline_5.jsonl"
    report = tmp_path / "r.json"
    for quiet in ([], ["-q"]):
        res = subprocess.run([sys.executable, "-m", "compactor_cli", "compact", "--check", "--token-threshold", "4000",
                              str(src), "--report", str(report), *quiet], capture_output=True, text=True)
        assert res.returncode == 1 and res.stdout == ""
        doc = orjson.loads(report.read_bytes())
        over = [i for i in doc["items"] if i["status"] == "OVER_THRESHOLD"]
        assert over, "the fixture must have offenders at this threshold"
        lines = [ln for ln in res.stderr.splitlines() if ln.startswith("over threshold: ")]
        assert lines == [f"over threshold: {src}:{i['line']}: {i['size_before']} tokens > 4000" for i in over]
        if quiet:
            assert all(ln.startswith("over threshold: ") for ln in res.stderr.splitlines())
        else:
            assert f"{len(over)} over threshold" in res.stderr.splitlines()[-1]



def test_check_writes_nothing_and_exits_1_when_over(runner, tmp_path):
    src = FIXTURES / "taubench_airline_5.jsonl"
    res = runner.invoke(cli, ["compact", "--check", "--token-threshold", "2000", str(src), "--report",
                              str(tmp_path / "r.json")])
    assert res.exit_code == 1 and res.stdout == ""
    doc = orjson.loads((tmp_path / "r.json").read_bytes())
    assert doc["totals"]["statuses"] == {"OVER_THRESHOLD": 4, "UNDER_THRESHOLD": 1}
    assert all(i["over_by"] > 0 for i in doc["items"] if i["status"] == "OVER_THRESHOLD")
    res = runner.invoke(cli, ["compact", "--check", "--token-threshold", "100000", str(src)])
    assert res.exit_code == 0 and res.stdout == ""


def test_dry_run_reports_rounds_and_writes_nothing(runner, tmp_path):
    res = runner.invoke(cli, ["compact", "--dry-run", "--token-threshold", "3000", str(FIXTURES / "taubench_airline_5.jsonl"),
                              "--report", str(tmp_path / "r.json")], env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert res.exit_code == 0 and res.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    res = runner.invoke(cli, ["compact", "--dry-run", str(FIXTURES / "airline_list.json"), "-o", str(tmp_path / "o.json")])
    assert res.exit_code == 2 and "write nothing" in res.stderr
    doc = orjson.loads((tmp_path / "r.json").read_bytes())
    assert doc["parameters"]["dry_run"] and doc["parameters"]["backend"] == "extractive"
    assert any(i["rounds"] for i in doc["items"])


def test_compact_output_is_stable_on_a_second_run(runner, tmp_path):
    out1, out2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    args = ["compact", "-q", "--token-threshold", "3500", "--backend", "extractive"]
    assert runner.invoke(cli, args + [str(FIXTURES / "taubench_airline_5.jsonl"), "-o", str(out1)]).exit_code == 0
    res = runner.invoke(cli, args + [str(out1), "-o", str(out2), "--report", str(tmp_path / "r.json")])
    assert res.exit_code == 0
    doc = orjson.loads((tmp_path / "r.json").read_bytes())
    assert set(doc["totals"]["statuses"]) == {"UNDER_THRESHOLD"}
    assert out2.read_bytes() == out1.read_bytes()


def test_small_tool_conversation_reclaims(runner, tmp_path):
    src = tmp_path / "c.json"
    conv = tool_conv(n_tools=20, size=2000)
    del conv["tokens_used"]
    src.write_bytes(orjson.dumps(conv))
    threshold = int(tokens(conv) * 0.8)
    res = runner.invoke(cli, ["compact", "--token-threshold", str(threshold), str(src), "--report", str(tmp_path / "r.json")])
    assert res.exit_code == 0
    item = orjson.loads((tmp_path / "r.json").read_bytes())["items"][0]
    assert item["status"] == "RECLAIMED" and item["reclaimed_count"] == 8


def test_library_entry_points_work_on_plain_dicts():
    from compactor_cli import Policy as P
    from compactor_cli import compact_dump, summarize_dump

    dump = long_conv(rounds=20)
    del dump["tokens_used"]
    new, status, details = summarize_dump(dump, keep_recent=6)
    assert status is Status.SUMMARIZED and details["backend"] == "extractive"
    new, status, details = compact_dump(dump, P(token_threshold=tokens(dump) // 3))
    assert status in (Status.SUMMARIZED, Status.STILL_OVER) and details["rounds"]
    assert restore_conversation(new)[0] == dump


@pytest.mark.parametrize("command", [["compact", "--token-threshold", "3500"], ["summarize", "--keep-recent", "4"],
                                     ["toolcall", "--keep", "0"]])
def test_a_bare_list_comes_back_as_the_same_list(runner, tmp_path, command):
    out = tmp_path / "o.json"
    src = FIXTURES / "airline_list.json"
    res = runner.invoke(cli, [*command, "-q", "--backend", "extractive", str(src), "-o", str(out)]
                        if command[0] != "toolcall" else [*command, "-q", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.stderr
    assert orjson.loads(out.read_bytes())["xcompact"]["input_form"] == "list"
    back = runner.invoke(cli, ["restore", "-q", str(out)])
    assert orjson.loads(back.stdout_bytes) == orjson.loads(src.read_bytes())


@pytest.mark.parametrize("argv", [
    ["compact", "--token-threshold", "3500", "--backend", "extractive"],
    ["compact", "--check", "--token-threshold", "2500"],
    ["summarize", "--backend", "extractive", "--keep-recent", "6"],
    ["restore"],
    ["validate"],
])
def test_every_command_writes_a_report_valid_against_the_schema(runner, tmp_path, argv):
    import jsonschema

    from compactor_cli.model.schema import load_schema

    report = tmp_path / "r.json"
    out = [] if argv[0] == "validate" or "--check" in argv else ["-o", str(tmp_path / "out")]
    runner.invoke(cli, [*argv, "-q", str(FIXTURES / "taubench_airline_5.jsonl"), str(FIXTURES / "bad" / "mixed.jsonl"),
                        *out, "--report", str(report)])
    doc = orjson.loads(report.read_bytes())
    jsonschema.validate(doc, load_schema("report"))
    assert doc["command"] == argv[0] and doc["totals"]["conversations"] == 10


def test_the_report_schema_knows_every_status():
    from compactor_cli.model.schema import load_schema

    assert set(load_schema("report")["$defs"]["status"]["enum"]) == {s.value for s in Status}
