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

from conftest import FIXTURES

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
    proc = xcompact("toolcall", "-q", "--keep", "100", str(SESSION))
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
