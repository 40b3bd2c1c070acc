"""Round 4 (issue 28): "restored exactly" is byte-exact for the common serialisations.

A record xcompact rewrites records the style its input was written in (``xcompact.style``:
separators, ensure_ascii, indent, the line's end); restore, once everything is back, writes
that style, so ``cmp`` of a restored file with the input holds for Python's ``json.dumps``
default (the bundled fixture and the shared data set), ``ensure_ascii`` on and off, compact
lines, indented documents with or without a final newline, CRLF lines."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from helpers import FIXTURES, tool_conv

from compactor_cli.cli import cli

EXACT_INPUTS = ["taubench_airline_5.jsonl", "swe_agent_3.jsonl", "exact/spotter_claude_code.jsonl",
                "exact/swe_agent.jsonl", "exact/taubench_airline.jsonl"]
COMMANDS = {
    "toolcall": ["toolcall", "--keep", "2"],
    "summarize": ["summarize", "--backend", "extractive", "--keep-recent", "4"],
    # low enough to change every file: some conversations stay over it (exit 1), the best result is written
    "compact": ["compact", "--token-threshold", "2000", "--backend", "extractive"],
}


def _run(runner, args: list[str], codes: tuple[int, ...] = (0,)) -> None:
    res = runner.invoke(cli, args)
    assert res.exit_code in codes, res.output


def _round_trip(runner, tmp_path: Path, src: Path, command: list[str], suffix: str = ".jsonl") -> bytes:
    out, back = tmp_path / f"out{suffix}", tmp_path / f"back{suffix}"
    _run(runner, [*command, "-q", str(src), "-o", str(out)], (0, 1) if command[0] == "compact" else (0,))
    assert out.read_bytes() != src.read_bytes()  # the command rewrote something
    _run(runner, ["restore", "-q", str(out), "-o", str(back)])
    return back.read_bytes()


@pytest.mark.parametrize("name", EXACT_INPUTS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_restore_gives_back_the_bytes_of_the_fixtures_and_the_shared_lines(runner, tmp_path, name, command):
    src = FIXTURES / name
    assert _round_trip(runner, tmp_path, src, COMMANDS[command]) == src.read_bytes()


def test_the_quick_start_round_trip_is_cmp_identical(runner, tmp_path):
    src = FIXTURES / "taubench_airline_5.jsonl"
    _run(runner, ["toolcall", "-q", str(src), "--keep", "4", "-o", str(tmp_path / "out.jsonl")])
    _run(runner, ["restore", "-q", str(tmp_path / "out.jsonl"), "-o", str(tmp_path / "back.jsonl")])
    assert (tmp_path / "back.jsonl").read_bytes() == src.read_bytes()


def test_two_passes_then_restore_give_back_the_first_input(runner, tmp_path):
    src = FIXTURES / "taubench_airline_5.jsonl"
    _run(runner, ["toolcall", "-q", str(src), "--keep", "2", "-o", str(tmp_path / "a.jsonl")])
    _run(runner, ["compact", "-q", str(tmp_path / "a.jsonl"), "--token-threshold", "3000", "--backend", "extractive",
                  "-o", str(tmp_path / "b.jsonl")])
    _run(runner, ["restore", "-q", str(tmp_path / "b.jsonl"), "-o", str(tmp_path / "c.jsonl")])
    assert (tmp_path / "c.jsonl").read_bytes() == src.read_bytes()


def test_restore_in_parallel_gives_the_same_bytes(runner, tmp_path):
    src = FIXTURES / "exact" / "taubench_airline.jsonl"
    _run(runner, ["toolcall", "-q", str(src), "--keep", "1", "-o", str(tmp_path / "out.jsonl")])
    _run(runner, ["restore", "-q", "-j", "2", str(tmp_path / "out.jsonl"), "-o", str(tmp_path / "back.jsonl")])
    assert (tmp_path / "back.jsonl").read_bytes() == src.read_bytes()


def _conv() -> dict:
    conv = tool_conv(4, size=200)
    conv["messages"][1]["content"] = "Grüße, 東京 — naïve café ✓"
    conv["messages"][3]["content"] = "résultat: 12.5 € " + "x" * 200
    conv["score"] = 1.5e-07
    conv["big"] = 2**70
    return conv


LINE_STYLES = {
    "json.dumps default": dict(),
    "ensure_ascii=False": dict(ensure_ascii=False),
    "compact, ensure_ascii": dict(separators=(",", ":")),
}


@pytest.mark.parametrize("style", sorted(LINE_STYLES))
@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_each_common_line_style_comes_back(runner, tmp_path, style, eol):
    src = tmp_path / "in.jsonl"
    lines = [json.dumps(_conv(), **LINE_STYLES[style]), json.dumps(tool_conv(3), **LINE_STYLES[style])]
    src.write_bytes("".join(line + eol for line in lines).encode())
    assert _round_trip(runner, tmp_path, src, ["toolcall", "--keep", "1"]) == src.read_bytes()


DOC_STYLES = {
    "indent=2": dict(indent=2),
    "indent=2, ensure_ascii=False": dict(indent=2, ensure_ascii=False),
    "indent=4": dict(indent=4),
    "tabs": dict(indent="\t", ensure_ascii=False),
    "one line": dict(),
}


@pytest.mark.parametrize("style", sorted(DOC_STYLES))
@pytest.mark.parametrize("end", ["", "\n"])
def test_each_common_document_style_comes_back(runner, tmp_path, style, end):
    src = tmp_path / "in.json"
    src.write_bytes((json.dumps(_conv(), **DOC_STYLES[style]) + end).encode())
    assert _round_trip(runner, tmp_path, src, ["toolcall", "--keep", "1"], ".json") == src.read_bytes()


def test_a_bare_list_document_comes_back(runner, tmp_path):
    src = tmp_path / "in.json"
    src.write_bytes(json.dumps(_conv()["messages"], indent=2).encode())
    assert _round_trip(runner, tmp_path, src, ["toolcall", "--keep", "1"], ".json") == src.read_bytes()


def test_the_style_is_recorded_in_the_bookkeeping_and_only_when_not_our_own(runner, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes((json.dumps(tool_conv(3)) + "\n" + orjson.dumps(tool_conv(3)).decode() + "\n").encode())
    _run(runner, ["toolcall", "-q", str(src), "--keep", "1", "-o", str(tmp_path / "out.jsonl")])
    first, second = (orjson.loads(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines())
    assert first["xcompact"]["style"] == {"separators": [", ", ": "], "ensure_ascii": True, "indent": None,
                                          "end": "\n"}
    assert "style" not in second.get("xcompact", {})  # xcompact's own form: nothing to record


def test_the_library_restore_gives_a_clean_dump(runner, tmp_path):
    from compactor_cli import restore_conversation

    src = tmp_path / "in.jsonl"
    src.write_bytes((json.dumps(tool_conv(3)) + "\n").encode())
    _run(runner, ["toolcall", "-q", str(src), "--keep", "1", "-o", str(tmp_path / "out.jsonl")])
    dump, restored = restore_conversation(orjson.loads((tmp_path / "out.jsonl").read_bytes()))
    assert restored == 2 and dump == tool_conv(3)


@pytest.mark.parametrize("style", [{"separators": ["x", ":"], "ensure_ascii": True, "indent": None, "end": "\n"},
                                   {"separators": [",", ":"], "ensure_ascii": "yes", "indent": None, "end": "\n"},
                                   {"separators": [",", ":"], "ensure_ascii": True, "indent": None, "end": "}{"},
                                   "python"])
def test_a_damaged_style_is_refused_with_one_line(runner, tmp_path, style):
    conv = tool_conv(3)
    src = tmp_path / "in.jsonl"
    src.write_bytes((json.dumps(conv) + "\n").encode())
    _run(runner, ["toolcall", "-q", str(src), "--keep", "1", "-o", str(tmp_path / "out.jsonl")])
    out = orjson.loads((tmp_path / "out.jsonl").read_bytes())
    out["xcompact"]["style"] = style
    (tmp_path / "out.jsonl").write_bytes(orjson.dumps(out) + b"\n")
    res = runner.invoke(cli, ["restore", "-q", str(tmp_path / "out.jsonl"), "-o", str(tmp_path / "back.jsonl")])
    assert res.exit_code == 1
    errors = [line for line in res.output.splitlines() if "error" in line]
    assert len(errors) == 1 and "xcompact.style" in errors[0] and "Traceback" not in res.output
    assert (tmp_path / "back.jsonl").read_bytes() == (tmp_path / "out.jsonl").read_bytes()  # left as it was


def test_a_partial_restore_keeps_the_style_for_later(runner, tmp_path):
    """A placeholder whose original is gone stays; the rest comes back, in the input's style."""
    src = tmp_path / "in.jsonl"
    src.write_bytes((json.dumps(tool_conv(3)) + "\n").encode())
    _run(runner, ["toolcall", "-q", str(src), "--keep", "1", "-o", str(tmp_path / "out.jsonl")])
    out = orjson.loads((tmp_path / "out.jsonl").read_bytes())
    out["compacted_tool_results"].pop("call_0")
    (tmp_path / "out.jsonl").write_bytes(orjson.dumps(out) + b"\n")
    _run(runner, ["restore", "-q", str(tmp_path / "out.jsonl"), "-o", str(tmp_path / "back.jsonl")])
    back = (tmp_path / "back.jsonl").read_bytes()
    messages = orjson.loads(back)["messages"]
    assert messages[6] == tool_conv(3)["messages"][6]  # call_1 back
    assert "call_0" in messages[3]["content"] and messages[3] != tool_conv(3)["messages"][3]
    assert back.startswith(b'{"messages": [{"role": "system", ')


# ---- a log's model stays in its written dump (issue 28: "counts that disagree")

def _mini_swe_agent(tmp_path: Path, model: str) -> Path:
    traj = json.loads((FIXTURES / "formats" / "mini_swe_agent.traj.json").read_bytes())
    traj.setdefault("info", {}).setdefault("config", {})["model"] = {"model_name": model}
    src = tmp_path / "run.traj.json"
    src.write_text(json.dumps(traj, indent=2))
    return src


def _claude_code(tmp_path: Path, model: str) -> Path:
    lines = (FIXTURES / "formats" / "claude_code_tool_heavy.jsonl").read_bytes().splitlines()
    out = []
    for line in lines:
        event = json.loads(line)
        if isinstance(event.get("message"), dict) and "model" in event["message"]:
            event["message"]["model"] = model
        out.append(json.dumps(event))
    src = tmp_path / "session.jsonl"
    src.write_text("\n".join(out) + "\n")
    return src


def _item(path: Path) -> dict:
    return orjson.loads(path.read_bytes())["items"][0]


@pytest.mark.parametrize("make", [_mini_swe_agent, _claude_code])
def test_a_second_pass_over_a_logs_output_counts_as_the_first_pass_reported(runner, tmp_path, make):
    src = make(tmp_path, "gpt-4o")  # o200k_base: not the default vocabulary
    out = tmp_path / f"out{''.join(src.suffixes[-1:])}"
    _run(runner, ["toolcall", "-q", "--keep", "1", str(src), "-o", str(out), "--report", str(tmp_path / "r1.json")])
    first = _item(tmp_path / "r1.json")
    assert first["encoding"] == "o200k_base"
    _run(runner, ["toolcall", "-q", "--keep", "1", str(out), "-o", str(tmp_path / f"again{out.suffix}"),
                  "--report", str(tmp_path / "r2.json")])
    second = _item(tmp_path / "r2.json")
    assert second["encoding"] == first["encoding"]
    assert second["tokens_before"] == first["tokens_after"]
    res = runner.invoke(cli, ["compact", "--check", "--token-threshold", "100000", str(out),
                              "--report", str(tmp_path / "r3.json")])
    assert res.exit_code == 0, res.output
    assert _item(tmp_path / "r3.json")["tokens_before"] == first["tokens_after"]
    written = orjson.loads(out.read_bytes().splitlines()[0] if out.suffix == ".jsonl" else out.read_bytes())
    assert written["model"] == "gpt-4o"


def test_a_log_without_a_model_gets_none_written(runner, tmp_path):
    src = FIXTURES / "formats" / "swe_agent_text_actions.traj"
    _run(runner, ["toolcall", "-q", "--keep", "1", str(src), "-o", str(tmp_path / "out.json")])
    assert "model" not in orjson.loads((tmp_path / "out.json").read_bytes())
