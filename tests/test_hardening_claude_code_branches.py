"""Issue 28: a Claude Code log whose abandoned branch (left by a rewind) holds a
compact_boundary is read along the live branch, the ancestry of the session's last event; the
abandoned branch's boundary neither cuts the conversation nor is listed as the live one's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from compactor_cli.formats.claude_code import read_claude_code, read_claude_code_anthropic

SUMMARY = "This session is being continued from a previous conversation that ran out of context. Summary: ..."


def _event(kind: str, uuid: str, parent: str | None, content, mid: str | None = None) -> dict:
    base = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/repo", "sessionId": "s1",
            "version": "1.0.80", "type": kind, "uuid": uuid, "timestamp": "2026-02-12T10:00:00.000Z"}
    msg: dict = {"role": kind, "content": content}
    if mid:
        msg.update(id=mid, type="message", model="claude-sonnet-4-5")
    return {**base, "message": msg}


def _boundary(uuid: str, logical_parent: str) -> dict:
    """As Claude Code writes it: parentUuid null, the conversation's last event in logicalParentUuid."""
    return {"parentUuid": None, "logicalParentUuid": logical_parent, "isSidechain": False, "userType": "external",
            "cwd": "/repo", "sessionId": "s1", "version": "1.0.80", "type": "system", "subtype": "compact_boundary",
            "content": "Conversation compacted", "isMeta": False, "timestamp": "2026-02-12T10:05:00.000Z",
            "uuid": uuid, "level": "info", "compactMetadata": {"trigger": "manual", "preTokens": 48000}}


def _text(t: str) -> list[dict]:
    return [{"type": "text", "text": t}]


def _head() -> list[dict]:
    return [_event("user", "u1", None, "Fix the date parser"),
            _event("assistant", "a1", "u1", _text("LIVE-1 I'll look at it."), "msg_a1")]


def _abandoned(fork_at: str, boundary_parent: str) -> list[dict]:
    """A branch the user left: a prompt, a reply, a /compact, the session's summary and one
    more exchange; then the user rewound to ``fork_at``."""
    branch = [_event("user", "u2x", fork_at, "ABANDONED-PROMPT try the other module"),
              _event("assistant", "a2x", "u2x", _text("ABANDONED-REPLY one"), "msg_a2x")]
    if boundary_parent == fork_at:  # compacted right at the fork, then went on
        branch = []
    branch += [_boundary("cbx", boundary_parent),
               _event("user", "sx", "cbx", SUMMARY + " ABANDONED-SUMMARY"),
               _event("user", "u3x", "sx", "ABANDONED-PROMPT go on"),
               _event("assistant", "a3x", "u3x", _text("ABANDONED-REPLY two"), "msg_a3x")]
    return branch


def _live() -> list[dict]:
    return [_event("user", "u2", "a1", "LIVE-2 look at parse_date instead"),
            _event("assistant", "a2", "u2", _text("LIVE-3 done"), "msg_a2")]


def _lines(events: list[dict]) -> list[tuple[int, dict]]:
    return list(enumerate(events, 1))


CASES = {"boundary inside the abandoned branch": ("a1", "a2x"), "boundary at the fork": ("a1", "a1")}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("history", ["since-compaction", "full"])
def test_a_boundary_on_an_abandoned_branch_is_not_followed(case, history):
    events = _head() + _abandoned(*CASES[case]) + _live()
    dump, notes = read_claude_code(_lines(events), "s.jsonl", history=history)
    texts = orjson.dumps(dump["messages"]).decode()
    assert "ABANDONED" not in texts
    assert [m["role"] for m in dump["messages"]] == ["user", "assistant", "user", "assistant"]
    assert dump["messages"][0]["content"] == "Fix the date parser"  # not cut at the abandoned boundary
    assert "before_compaction" not in dump["source"]
    assert "compact_boundaries" not in dump["source"]  # the live branch was never compacted
    assert dump["source"]["rewound_branches"]
    assert any("rewound" in n for n in notes)


@pytest.mark.parametrize("case", list(CASES))
def test_the_anthropic_reading_does_not_follow_it_either(case):
    events = _head() + _abandoned(*CASES[case]) + _live()
    request, _ = read_claude_code_anthropic(_lines(events), "s.jsonl")
    assert "ABANDONED" not in orjson.dumps(request["messages"]).decode()
    assert "compact_boundaries" not in request["source"]
    assert len(request["messages"]) == 4


def test_the_live_branch_s_own_boundary_still_starts_the_conversation():
    """Abandoned branch with a boundary, then the live branch compacted later: the live one counts."""
    events = (_head() + _abandoned("a1", "a2x") + _live()
              + [_boundary("cb", "a2"), _event("user", "s", "cb", SUMMARY + " LIVE-SUMMARY"),
                 _event("user", "u4", "s", "LIVE-4 and the tests"),
                 _event("assistant", "a4", "u4", _text("LIVE-5 added"), "msg_a4")])
    dump, _ = read_claude_code(_lines(events), "s.jsonl")
    assert "ABANDONED" not in orjson.dumps(dump).decode()
    assert dump["messages"][0]["content"].endswith("LIVE-SUMMARY")
    assert dump["source"]["before_compaction"]["messages"][0]["content"] == "Fix the date parser"
    assert len(dump["source"]["before_compaction"]["messages"]) == 4
    assert [b["line"] for b in dump["source"]["compact_boundaries"]] == [len(_head() + _abandoned("a1", "a2x")
                                                                             + _live()) + 1]


def test_through_the_cli(tmp_path: Path):
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in _head() + _abandoned("a1", "a2x") + _live()))
    proc = subprocess.run([sys.executable, "-m", "compactor_cli", "toolcall", "-q", "--keep", "100", str(path)],
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    dump = orjson.loads(proc.stdout)
    assert b"ABANDONED" not in proc.stdout
    assert dump["messages"][0]["content"] == "Fix the date parser"
