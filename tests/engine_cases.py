"""Hostile records and the option sets every engine (the batch function, Ray, Hugging Face
datasets) is compared on against the CLI, with the CLI runs they are compared to: shared by
tests/test_batch.py, test_ray.py, test_objstore.py and test_hf_recipe.py."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from helpers import ROOT, tool_conv

from compactor_cli.cli import cli

SHARED = ROOT.parent / "shared" / "data"
#: Small blocks so a few MB make many blocks and the 300 KB record is larger than one.
BLOCK = 64 * 1024


def _conv_with(i: int, **extra) -> dict:
    conv = tool_conv(n_tools=4, size=300 + 40 * i)
    conv.update(extra)
    return conv


def hostile_lines(big_bytes: int = 300_000) -> list[bytes]:
    """JSONL lines that the obvious Arrow/pandas integrations corrupt, plus records the CLI
    refuses (passed through unchanged). The last line has no line end."""
    sep = "\u2028 \u2029 \u0085"
    raw_seps = _conv_with(0)
    raw_seps["messages"][3]["content"] = f"line one{sep}line two " + "y" * 400  # a compacted tool result
    raw_seps["messages"][1]["content"] = f"user text with raw separators{sep}"  # kept
    mixed = _conv_with(1)
    mixed["messages"][1]["content"] = [{"type": "text", "text": "parts, not a string"}]
    mixed["messages"][6]["content"] = [{"type": "text", "text": "tool output as parts " + "z" * 500}]
    extra_keys = _conv_with(2, dataset_id="ds-7", meta={"split": "train", "turns": [41, None, 7]})
    extra_keys["messages"][2]["x_trace"] = {"span": "abc", "depth": 3}
    extra_keys["messages"][0]["weight"] = None
    floats = _conv_with(3, score=0.12345678901234566, eps=1e-12, big=1e300, neg=-0.0, ints_and_nulls=[41, None, 0])
    floats["messages"][5]["logprob"] = -0.30000000000000004
    unchanged_floats = {"messages": [{"role": "user", "content": "hi"}], "score": 0.12345678901234566, "eps": 1e-12,
                        "n": [41, None]}
    stored = _conv_with(4, compacted_tool_results={"old_call_1": "earlier original", "old_call_2": [
        {"type": "text", "text": "parts"}]})
    big = _conv_with(5)
    big["messages"][3]["content"] = "B" * big_bytes  # a record larger than a small block size
    lines = [orjson.dumps(c) + b"\n" for c in (raw_seps, mixed, extra_keys, floats, unchanged_floats, stored, big)]
    lines += [
        b"\n",  # blank: not a record (line numbers still count it)
        b'{"messages": [{"role": "user", "content": "broken"\n',  # broken JSON
        b'{"messages": [{"role": "robot", "content": "x"}]}\n',  # unknown role
        b'"just a string"\n',  # not an object or list
        b'{"messages": [{"role": "user", "content": "\xff\xfe bad utf-8"}]}\n',  # invalid UTF-8
        # integers beyond 64 bits: the lossless path
        b'{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": null, "tool_calls": '
        b'[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", '
        b'"tool_call_id": "c1", "content": "' + b"r" * 600 + b'"}, {"role": "assistant", "content": "ok"}], '
        b'"id": 123456789012345678901234567890}\n',
        b'{"messages": [], "k": 1, "k": 2}\n',  # a repeated key
        b'   \t \n',
        orjson.dumps(_conv_with(6, note="pretty spaced input keeps its bytes when unchanged"),
                     option=orjson.OPT_INDENT_2).replace(b"\n", b" ") + b"\n",
    ]
    lines.append(orjson.dumps(_conv_with(7)))  # no line end
    return lines


def write_hostile(path: Path, big_bytes: int = 300_000) -> Path:
    path.write_bytes(b"".join(hostile_lines(big_bytes)))
    return path


#: Commands and option sets the engines are compared on (argv after the command name).
CASES = [
    ("toolcall", ["--keep", "1"], {"keep": 1}),
    ("toolcall", ["--keep", "0", "--originals", "drop", "--no-tokens", "--strict"],
     {"keep": 0, "originals": "drop", "no_tokens": True, "strict": True}),
    ("compact", ["--token-threshold", "60", "--backend", "extractive", "--keep", "1", "--keep-recent", "2"],
     {"token_threshold": 60, "backend": "extractive", "keep": 1, "keep_recent": 2}),
    ("summarize", ["--backend", "extractive", "--keep-recent", "3"], {"backend": "extractive", "keep_recent": 3}),
    ("toolcall", ["--keep", "0", "--placeholder", "Old output ({lines} lines, {tool}) {id}", "--clear-tool-inputs",
                  "--exclude-tools", "calculate"],
     {"keep": 0, "placeholder": "Old output ({lines} lines, {tool}) {id}", "clear_tool_inputs": True,
      "exclude_tools": ["calculate"]}),
    ("toolcall", ["--keep", "1", "--preview", "2,2", "--max-result-tokens", "400", "--dedup-reads",
                  "--truncate-inputs", "40", "--images", "keep-last", "1", "--thinking", "keep-last", "0"],
     {"keep": 1, "preview": "2,2", "max_result_tokens": 400, "dedup_reads": True, "truncate_inputs": 40,
      "images": ["keep-last", 1], "thinking": ["keep-last", 0]}),
    ("toolcall", ["--fit", "300"], {"fit": 300}),
    ("restore", [], {}),
    ("validate", ["--strict"], {"strict": True}),
    ("compact", ["--check", "--message-threshold", "8"], {"check": True, "message_threshold": 8}),
]
CASE_IDS = [" ".join([c, *a]) for c, a, _ in CASES]


def cli_run(runner, command: str, args: list[str], src: Path, tmp: Path) -> tuple[bytes | None, dict, int]:
    """(output bytes or None, report, exit code) of ``xcompact COMMAND SRC ARGS``."""
    out, rep = tmp / f"cli-{command}.jsonl", tmp / f"cli-{command}-report.json"
    writes = command != "validate" and "--check" not in args
    argv = [command, str(src), *args, "-q", "--report", str(rep)] + (["-o", str(out)] if writes else [])
    res = runner.invoke(cli, argv)
    assert res.exit_code in (0, 1), res.output
    return (out.read_bytes() if writes else None), json.loads(rep.read_text()), res.exit_code


def restore_input(runner, tmp: Path) -> Path:
    """restore is compared on toolcall's output of the hostile file (something to give back)."""
    src = write_hostile(tmp / "hostile.jsonl")
    out = tmp / "toolcall-out.jsonl"
    assert runner.invoke(cli, ["toolcall", str(src), "--keep", "1", "-q", "-o", str(out)]).exit_code == 1
    return out


def input_for(command: str, runner, tmp: Path) -> Path:
    return restore_input(runner, tmp) if command == "restore" else write_hostile(tmp / "hostile.jsonl")


def two_inputs(runner, tmp: Path, command: str) -> Path:
    """A directory with the hostile file and (when there) 3 MB of real tau-bench transcripts."""
    d = tmp / "in"
    d.mkdir()
    src = input_for(command, runner, tmp)
    (d / "a_hostile.jsonl").write_bytes(src.read_bytes())
    real = SHARED / "taubench_gpt-4o-airline.jsonl"
    if not real.exists():
        real = ROOT / "fixtures" / "taubench_airline_5.jsonl"
    (d / "sub").mkdir()
    (d / "sub" / "b_real.jsonl").write_bytes(real.read_bytes())
    return d


def cli_dir_run(runner, command: str, args: list[str], src: Path, tmp: Path):
    """(output directory, report, exit code) of ``xcompact COMMAND SRC ARGS`` over a directory."""
    out, rep = tmp / "cli-out", tmp / "cli-report.json"
    writes = command != "validate" and "--check" not in args
    res = runner.invoke(cli, [command, str(src), *args, "-q", "--report", str(rep)] +
                        (["-o", str(out)] if writes else []))
    assert res.exit_code in (0, 1), res.output
    return out, json.loads(rep.read_text()), res.exit_code
