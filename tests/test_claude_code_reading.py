"""Claude Code logs read as the model had them (issue 16): a rewound branch (two turns under
one parentUuid) is not merged into the conversation; the reading starts at the last
compact_boundary by default with the earlier part carried (restore gives it back); an option
reads the whole file; is_error on tool results survives. Through the real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import FIXTURES

SESSION = FIXTURES / "formats" / "claude_code_session.jsonl"


def xcompact(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, timeout=120, **kw)


def _events() -> list[dict]:
    return [orjson.loads(ln) for ln in SESSION.read_bytes().splitlines() if ln.strip()]


def _write(tmp_path: Path, events: list[dict], name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


def _texts(dump: dict) -> str:
    return orjson.dumps(dump["messages"]).decode()


def _event(kind: str, uuid: str, parent: str, content, mid: str | None = None) -> dict:
    base = {"parentUuid": parent, "isSidechain": False, "userType": "external", "sessionId": "s", "type": kind,
            "uuid": uuid, "timestamp": "2026-02-12T10:00:00.000Z"}
    msg = {"role": kind, "content": content}
    if mid:
        msg.update(id=mid, type="message", model="claude")
    return {**base, "message": msg}


def _with_rewind(kind: str) -> list[dict]:
    """A branch left by the user: an edited prompt (kind "prompt") or a regenerated reply
    (kind "reply"), written before the branch the session continued on."""
    events = _events()
    at = next(i for i, e in enumerate(events) if e.get("uuid") == "u4")
    if kind == "prompt":  # u4 (parent a10) was first asked as ABANDONED-PROMPT, then rewound
        branch = [_event("user", "u4x", "a10", "ABANDONED-PROMPT please"),
                  _event("assistant", "a4x", "u4x", [{"type": "text", "text": "ABANDONED-REPLY"}], "msg_x1")]
    else:  # the reply to u3 was regenerated: a8 (msg_01C) is the second reply
        at = next(i for i, e in enumerate(events) if e.get("uuid") == "a8")
        branch = [_event("assistant", "a8x", "u3", [{"type": "text", "text": "ABANDONED-REPLY"}], "msg_x2")]
    return events[:at] + branch + events[at:]


@pytest.mark.parametrize("kind", ["prompt", "reply"])
def test_a_rewound_branch_is_not_merged_into_the_conversation(tmp_path, kind):
    src = _write(tmp_path, _with_rewind(kind))
    plain = orjson.loads(xcompact("toolcall", "-q", "--keep", "100", str(_write(tmp_path, _events(), "p.jsonl")))
                         .stdout)
    proc = xcompact("toolcall", "--keep", "100", str(src), "--report", str(tmp_path / "rep.json"))
    assert proc.returncode == 0, proc.stderr
    dump = orjson.loads(proc.stdout)
    notes = orjson.loads((tmp_path / "rep.json").read_bytes())["items"][0]["conversion_notes"]
    assert "ABANDONED" not in _texts(dump)
    assert dump["messages"] == plain["messages"]  # exactly the branch the session continued on
    assert dump["source"]["rewound_branches"][0]["events"] == (2 if kind == "prompt" else 1)
    assert any("rewound" in n for n in notes)  # noted per record


def test_parallel_tool_calls_are_not_taken_for_a_rewind(tmp_path):
    proc = xcompact("toolcall", "-q", "--keep", "100", "--claude-code-history", "full", str(SESSION))
    dump = orjson.loads(proc.stdout)
    assert "rewound_branches" not in dump["source"]
    assert sum(len(m.get("tool_calls") or ()) for m in dump["messages"]) >= 3


@pytest.mark.parametrize("kind", ["prompt", "reply"])
def test_a_rewound_branch_is_not_merged_when_converting_to_anthropic(tmp_path, kind):
    src = _write(tmp_path, _with_rewind(kind))
    proc = xcompact("convert", "-q", "--to", "anthropic", str(src))
    assert proc.returncode == 0, proc.stderr
    assert b"ABANDONED" not in proc.stdout
    assert orjson.loads(proc.stdout)["source"]["rewound_branches"]


# ---------------------------------------------------------------- since the last compact_boundary

def _run_json(*args: str) -> dict:
    proc = xcompact(*args)
    assert proc.returncode == 0, proc.stderr
    return orjson.loads(proc.stdout)


def test_a_log_is_read_from_its_last_compact_boundary_by_default(tmp_path):
    """The whole file was read across Claude Code's own compaction: a context the model never had."""
    since = _run_json("toolcall", "-q", "--keep", "100", str(SESSION))
    full = _run_json("toolcall", "-q", "--keep", "100", "--claude-code-history", "full", str(SESSION))
    assert since["messages"][0]["content"].startswith("This session is being continued")
    assert len(since["messages"]) < len(full["messages"])
    before = since["source"]["before_compaction"]
    assert before["messages"] + since["messages"] == full["messages"]  # nothing lost, carried
    assert before["boundary_line"] == 18


@pytest.mark.slow
@pytest.mark.parametrize("command", [["toolcall", "--keep", "0"], ["toolcall", "--keep", "0", "-j", "2"],
                                     ["compact", "--backend", "extractive", "--token-threshold", "100"]])
def test_restore_gives_back_the_part_before_the_compaction(tmp_path, command):
    out = tmp_path / "out.jsonl"
    proc = xcompact(*command, "-q", str(SESSION), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    back = _run_json("restore", "-q", str(out))
    full = _run_json("toolcall", "-q", "--keep", "100", "--claude-code-history", "full", str(SESSION))
    assert back["messages"] == full["messages"]
    assert back["source"] == full["source"]


def test_token_counts_are_those_of_what_the_model_had(tmp_path):
    def tokens(*extra: str) -> int:
        rep = tmp_path / "r.json"
        proc = xcompact("toolcall", "-q", "--keep", "100", *extra, str(SESSION), "-o", str(tmp_path / "o.jsonl"),
                        "--report", str(rep))
        assert proc.returncode == 0, proc.stderr
        return orjson.loads(rep.read_bytes())["items"][0]["tokens_before"]

    assert tokens() < tokens("--claude-code-history", "full")


@pytest.mark.parametrize("history", ["since-compaction", "full"])
def test_is_error_on_a_tool_result_survives(tmp_path, history):
    """is_error on tool results was dropped."""
    events = _events()
    for e in events:
        for b in (e.get("message") or {}).get("content") or ():
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") == "toolu_test":
                b["is_error"] = True
    src = _write(tmp_path, events)
    dump_path = tmp_path / "dump.jsonl"
    proc = xcompact("toolcall", "-q", "--keep", "100", "--claude-code-history", history, str(src), "-o", str(dump_path))
    assert proc.returncode == 0, proc.stderr
    dump = orjson.loads(dump_path.read_bytes())
    msgs = dump["messages"] + dump["source"].get("before_compaction", {}).get("messages", [])
    marked = [m for m in msgs if m.get("is_error")]
    assert [m["tool_call_id"] for m in marked] == ["toolu_test"]
    back = _run_json("convert", "-q", "--to", "anthropic", "--claude-code-history", "full", str(dump_path))
    blocks = [b for m in back["messages"] if isinstance(m["content"], list) for b in m["content"]]
    if history == "full":
        assert [b.get("tool_use_id") for b in blocks if b.get("is_error")] == ["toolu_test"]


@pytest.mark.parametrize("to", ["openai", "anthropic", "responses"])
def test_convert_reads_since_the_compaction_and_carries_the_rest(tmp_path, to):
    since = _run_json("convert", "-q", "--to", to, str(SESSION))
    full = _run_json("convert", "-q", "--to", to, "--claude-code-history", "full", str(SESSION))
    body = "input" if to == "responses" else "messages"
    assert len(since[body]) < len(full[body])
    assert since["source"]["before_compaction"]["messages"]
    assert b"toolu_grep" in orjson.dumps(since)  # an early call, carried
