"""Round 4 (issue 28): a wrong ``--from`` between formats is an error naming the format the
record looks like, never an empty conversation with a green check, 20 identical lines or
"broken JSON"."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from helpers import FIXTURES

from compactor_cli.cli import cli
from compactor_cli.errors import InvalidInputError
from compactor_cli.formats import read_file

FIX = FIXTURES / "formats"
LOGS = ("claude-code", "codex", "swe-agent", "mini-swe-agent", "sharegpt")
SAMPLES = {
    "claude-code": ["claude_code_session.jsonl", "claude_code_tool_heavy.jsonl"],
    "codex": ["codex_rollout.jsonl"],
    "swe-agent": ["swe_agent_function_calling.traj", "swe_agent_text_actions.traj"],
    "mini-swe-agent": ["mini_swe_agent.traj.json", "mini_swe_agent_text.traj.json"],
    "sharegpt": ["sharegpt.jsonl"],
}
PAIRS = [(actual, sample, wrong) for actual, samples in SAMPLES.items() for sample in samples
         for wrong in LOGS if wrong != actual]


def run(runner, *args):
    res = runner.invoke(cli, [str(a) for a in args])
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize(("actual", "sample", "wrong"), PAIRS)
def test_wrong_from_between_log_formats_is_an_error_naming_the_format(runner, tmp_path, actual, sample, wrong):
    code, _out, err = run(runner, "validate", "--from", wrong, FIX / sample)
    assert code == 1, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert errors, err
    assert f"use --from {actual} or --from auto" in errors[0], err
    assert "this looks like" in errors[0]
    assert len(errors) <= 2, err  # one line for the file (and a count of the records that failed the same way)
    assert "Traceback" not in err


@pytest.mark.parametrize(("actual", "sample", "wrong"), PAIRS)
def test_wrong_from_compact_check_fails_too(runner, tmp_path, actual, sample, wrong):
    code, _out, err = run(runner, "compact", "--check", "--from", wrong, FIX / sample)
    assert code == 1, err
    assert f"use --from {actual} or --from auto" in err


@pytest.mark.parametrize(("actual", "sample", "wrong"), [p for p in PAIRS if p[2] in ("claude-code", "codex")])
def test_wrong_from_library_raises(actual, sample, wrong):
    with pytest.raises(InvalidInputError, match=f"use --from {actual} or --from auto"):
        list(read_file(str(FIX / sample), wrong))


def test_rest_of_batch_goes_on(runner, tmp_path):
    out = tmp_path / "out"
    code, _o, err = run(runner, "toolcall", "--no-tokens", "--from", "codex", FIX / "claude_code_session.jsonl",
                        FIX / "codex_rollout.jsonl", "-o", out)
    assert code == 1, err
    assert (out / "codex_rollout.jsonl").exists()
    assert orjson.loads((out / "codex_rollout.jsonl").read_bytes())["messages"]
    assert "claude_code_session.jsonl" in err and "use --from claude-code or --from auto" in err
    assert "1 failed" in err


def test_real_log_with_nothing_said_stays_readable(tmp_path):
    """A Claude Code file holding only bookkeeping lines is a Claude Code file: not refused."""
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps({"type": "summary", "summary": "x", "leafUuid": "u1"}) + "\n"
                 + json.dumps({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}) + "\n")
    [(_, dump, codec)] = list(read_file(str(p), "claude-code"))
    assert dump["messages"] == [] and codec.format == "claude-code"


# ---------------------------------------------------------------- point 2: hints


def _openai_jsonl(path: Path, n: int = 25) -> None:
    recs = [{"messages": [{"role": "user", "content": f"hi {i}"},
                          {"role": "assistant", "content": None, "tool_calls": [
                              {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
                          {"role": "tool", "tool_call_id": "c1", "content": "a b"}]} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_from_anthropic_on_openai_messages_one_clear_line(runner, tmp_path):
    p = tmp_path / "oa.jsonl"
    _openai_jsonl(p)
    code, _o, err = run(runner, "validate", "--from", "anthropic", p)
    assert code == 1
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert "this looks like OpenAI chat-completions messages" in errors[0]
    assert "use --from openai or --from auto" in errors[0]
    assert len(errors) <= 2, err
    assert "25 failed" in err


def test_from_swe_agent_on_mini_swe_agent(runner):
    code, _o, err = run(runner, "validate", "--from", "swe-agent", FIX / "mini_swe_agent.traj.json")
    assert code == 1
    assert "this looks like a mini-swe-agent trajectory" in err
    assert "use --from mini-swe-agent or --from auto" in err


@pytest.mark.parametrize("sample", ["swe_agent_text_actions.traj", "mini_swe_agent.traj.json"])
def test_from_claude_code_on_pretty_printed_trajectory(runner, tmp_path, sample):
    p = tmp_path / "t.jsonl"
    p.write_bytes((FIX / sample).read_bytes())
    code, _o, err = run(runner, "validate", "--from", "claude-code", p)
    assert code == 1
    assert "broken JSON" not in err, err
    assert "this looks like" in err and "or --from auto" in err
    assert len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1


def test_auto_still_reads_every_sample(runner):
    for samples in SAMPLES.values():
        for s in samples:
            code, _o, err = run(runner, "validate", FIX / s)
            assert code == 0, (s, err)
