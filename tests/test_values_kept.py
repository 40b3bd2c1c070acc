"""Values are never dropped or changed silently (issue 16): Responses instructions given as a
list survive summarize + restore; convert keeps integers beyond 64 bits exactly; what a
conversion cannot carry (message name, audio, metadata, image detail) is noted per record and
--strict fails the record. Through the real CLI."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from native_dumps import RESPONSES


def xcompact(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, timeout=120, **kw)


def _responses_with_instructions(instructions) -> dict:
    r = copy.deepcopy(RESPONSES)
    r["instructions"] = instructions
    for i in range(8):
        r["input"] += [{"role": "user", "content": f"question {i} " + "w" * 300},
                       {"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": "answer " + "v" * 300}]}]
    return r


@pytest.mark.parametrize("instructions", [
    [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be careful."}]}],
    [{"type": "input_text", "text": "part one"}, {"type": "input_text", "text": "part two"}],
    {"odd": "object"},
], ids=["message-list", "parts", "object"])
@pytest.mark.parametrize("form", ["jsonl", "json"])
def test_responses_instructions_that_are_not_text_survive_summarize_and_restore(tmp_path, instructions, form):
    """They came back null after summarize + restore."""
    rec = _responses_with_instructions(instructions)
    src = tmp_path / f"r.{form}"
    src.write_bytes(orjson.dumps(rec) + b"\n")
    summ, back = tmp_path / f"s.{form}", tmp_path / f"b.{form}"
    proc = xcompact("summarize", "-q", "--backend", "extractive", "--keep-recent", "4", str(src), "-o", str(summ))
    assert proc.returncode == 0, proc.stderr
    s = orjson.loads(summ.read_bytes())
    assert s["instructions"] == instructions  # kept as they were; the summary goes before the input
    assert s["input"][0]["role"] == "developer"
    proc = xcompact("restore", "-q", str(summ), "-o", str(back))
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(back.read_bytes()) == rec


BIG = [123456789012345678901234567890, -99999999999999999999, 2**64, -(2**63) - 1]


@pytest.mark.parametrize("to", ["openai", "anthropic", "responses"])
@pytest.mark.parametrize("form", ["jsonl", "json"])
def test_convert_keeps_integers_beyond_64_bits_exactly(tmp_path, to, form):
    """convert to the same format turned them into floats."""
    if to == "openai":
        rec = {"messages": [{"role": "user", "content": "hi", "n": BIG[0]}], "id": BIG[1], "seeds": BIG[2:]}
    elif to == "anthropic":
        rec = {"system": "s", "messages": [{"role": "user", "content": "hi"}], "id": BIG[1], "seeds": BIG[2:]}
    else:
        rec = {"input": [{"role": "user", "content": "hi"}], "id": BIG[1], "seeds": BIG[2:]}
    src = tmp_path / f"r.{form}"
    src.write_text(json.dumps(rec) + "\n")
    proc = xcompact("convert", "-q", "--to", to, str(src))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["id"] == BIG[1] and got["seeds"] == BIG[2:]
    assert b"e+" not in proc.stdout
    if to == "openai":
        assert got["messages"][0]["n"] == BIG[0]


DROPPED = {
    "name": {"messages": [{"role": "user", "name": "bob", "content": "hi"}, {"role": "assistant", "content": "ok"}]},
    "audio": {"messages": [{"role": "user", "content": "hi"},
                           {"role": "assistant", "content": "ok", "audio": {"id": "audio_1"}}]},
    "metadata": {"messages": [{"role": "user", "content": "hi", "metadata": {"k": 1}},
                              {"role": "assistant", "content": "ok"}]},
    "detail": {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "high"}}]},
        {"role": "assistant", "content": "ok"}]},
}


@pytest.mark.parametrize(("what", "to"), [(w, t) for w in DROPPED for t in ("anthropic", "responses")
                                           if (w, t) != ("detail", "responses")])  # carried: see below
def test_what_a_conversion_drops_is_noted_and_strict_fails_it(tmp_path, what, to):
    """OpenAI -> Anthropic/Responses dropped name, image detail, metadata, audio with no note,
    and --strict let it pass."""
    src = tmp_path / "r.jsonl"
    src.write_bytes(orjson.dumps(DROPPED[what]) + b"\n" + orjson.dumps({"messages": [
        {"role": "user", "content": "plain"}, {"role": "assistant", "content": "ok"}]}) + b"\n")
    rep = tmp_path / "rep.json"
    proc = xcompact("convert", "--to", to, str(src), "--report", str(rep))
    assert proc.returncode == 0, proc.stderr
    item = orjson.loads(rep.read_bytes())["items"][0]
    assert any(what in n for n in item.get("notes", [])), item
    assert f"r.jsonl:1: not carried over" in proc.stderr.decode()
    strict = xcompact("convert", "--strict", "--to", to, str(src), "-o", str(tmp_path / "o.jsonl"))
    assert strict.returncode == 1, strict.stderr
    lines = (tmp_path / "o.jsonl").read_bytes().splitlines()
    assert lines[0] == src.read_bytes().splitlines()[0]  # the failed record, unchanged
    assert len(lines) == 2


def test_image_detail_is_carried_to_responses(tmp_path):
    src = tmp_path / "r.jsonl"
    src.write_bytes(orjson.dumps(DROPPED["detail"]) + b"\n")
    proc = xcompact("convert", "-q", "--to", "responses", str(src))
    assert proc.returncode == 0, proc.stderr
    part = orjson.loads(proc.stdout)["input"][0]["content"][0]
    assert part == {"type": "input_image", "image_url": "https://x/a.png", "detail": "high"}


FORMATS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "formats"


@pytest.mark.parametrize("message", ["", "Summary so far: counted lines."])
def test_a_codex_compacted_line_keeps_its_replacement_history(tmp_path, message):
    """A compacted line's replacement_history summary was dropped."""
    lines = (FORMATS_DIR / "codex_rollout.jsonl").read_bytes().splitlines()
    history = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "count the lines"}]},
               {"type": "message", "role": "user", "content": [
                   {"type": "input_text", "text": "SUMMARY: app.py has 120 lines; test fixed to 4."}]}]
    compacted = {"timestamp": "2026-01-01T00:00:00Z", "type": "compacted",
                 "payload": {"message": message, "replacement_history": history}}
    at = next(i for i, ln in enumerate(lines) if b'"compacted"' in ln)
    lines[at] = orjson.dumps(compacted)
    src = tmp_path / "rollout.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    proc = xcompact("toolcall", "-q", "--keep", "100", str(src))
    assert proc.returncode == 0, proc.stderr
    dump = orjson.loads(proc.stdout)
    texts = [m.get("content") for m in dump["messages"] if isinstance(m.get("content"), str)]
    assert any("SUMMARY: app.py has 120 lines" in t and "count the lines" in t and message in t for t in texts)
    assert dump["source"]["compactions"][0]["replacement_items"] == 2
