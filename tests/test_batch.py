"""The batch function (compactor_cli.batch): lines in, the CLI's bytes and report items out.

Every engine (Ray, Hugging Face datasets, a loop) relies on it giving, for the same line and the
same options, exactly what ``xcompact`` writes and reports, bad records included."""

from __future__ import annotations

import json

import orjson
import pytest
from engine_cases import CASE_IDS, CASES, cli_run, hostile_lines, input_for
from helpers import FIXTURES, tool_conv

from compactor_cli.batch import configure, option_defaults, process_lines, report_for, settings_for
from compactor_cli.errors import UsageError

# ---------------------------------------------------------------- the batch function


@pytest.mark.parametrize("command,args,options", CASES, ids=CASE_IDS)
def test_batch_gives_the_cli_bytes_items_totals_and_exit_code(runner, tmp_path, command, args, options):
    src = input_for(command, runner, tmp_path)
    expected, report, code = cli_run(runner, command, args, src, tmp_path)
    configured = configure(command, **options)
    items, outputs = [], []
    lines = src.read_bytes().split(b"\n")
    lines = [line + b"\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    first = 1
    for i in range(0, len(lines), 3):  # in small batches, as an engine calls it
        res = process_lines(lines[i:i + 3], configured.settings, source=str(src), first_line=first)
        first += len(lines[i:i + 3])
        items += res.items
        outputs += res.lines
    if expected is None:
        assert outputs == []
    else:
        assert b"".join(outputs) == expected
    assert items == report["items"]
    rep = report_for(configured, items, report_path=str(tmp_path / "batch-report.json"))
    assert rep.totals() == report["totals"] and rep.exit_code == report["exit_code"] == code
    assert json.loads((tmp_path / "batch-report.json").read_text())["parameters"] == report["parameters"]


def test_bad_records_pass_through_unchanged_and_blank_lines_are_not_records():
    lines = [b'{"messages": [{"role": "robot"}]}\n', b"\n", b"not json\n", "   "]
    res = process_lines(lines, "toolcall", source="x.jsonl", first_line=10)
    assert res.outputs == [lines[0], lines[2]]
    assert [(i["line"], i["status"]) for i in res.items] == [(10, "INVALID_INPUT"), (12, "INVALID_INPUT")]
    assert res.items[1]["error"].startswith("broken JSON")


def test_str_lines_without_line_ends_as_datasets_gives_them():
    src = hostile_lines()
    texts = [line.decode("utf-8", "replace").rstrip("\n") for line in src if b"\xff" not in line]
    as_bytes = process_lines([t.encode() + b"\n" for t in texts], "toolcall", keep=1)
    as_text = process_lines(texts, "toolcall", keep=1)
    def no_error(items):  # broken JSON is reported at "line 1 column N" without the line end, "line 2" with it
        return [{k: v for k, v in i.items() if k not in ("error", "input_bytes", "output_bytes")} for i in items]

    assert no_error(as_text.items) == no_error(as_bytes.items)
    # the sizes are of what was given (one newline less) and of what is given back
    assert [i.get("input_bytes", 1) - 1 for i in as_bytes.items] == [i.get("input_bytes", 0) for i in as_text.items]
    assert [i.get("output_bytes", len(o)) for i, o in zip(as_bytes.items, as_bytes.outputs)] == \
        [len(o) for o in as_bytes.outputs]
    assert as_text.texts() == [o.decode()[:-1] for o in as_bytes.outputs]
    assert as_bytes.texts(keep_linebreaks=True) == [o.decode() for o in as_bytes.outputs]
    assert any("\u2028" in t for t in as_text.texts())  # a raw separator is not a line end


def test_u2028_inside_a_string_survives_a_rewrite_raw():
    conv = tool_conv(n_tools=3)
    conv["messages"][3]["content"] = "a\u2028b " + "x" * 500
    res = process_lines([orjson.dumps(conv)], "toolcall", keep=1)
    out = res.outputs[0]
    assert res.items[0]["status"] == "RECLAIMED" and out.count(b"\n") == 1 and "\u2028".encode() in out
    assert orjson.loads(out)["compacted_tool_results"]["call_0"] == "a\u2028b " + "x" * 500


def test_options_are_the_clis_names_defaults_and_checks():
    assert option_defaults("toolcall") == {"input_format": "auto", "claude_code_history": "since-compaction",
                                           "strict": False, "keep": 12, "originals": "keep",
                                           "encoding": "auto", "no_tokens": False, "dry_run": False,
                                           "exclude_tools": (), "keep_turns": None, "clear_at_least": None,
                                           "trigger": None, "clear_tool_inputs": False, "placeholder": None,
                                           "preview": None, "max_result_tokens": None, "truncate_inputs": None,
                                           "dedup_reads": False, "images": None, "thinking": None,
                                           "fit": None}
    assert set(option_defaults("compact")) >= {"model", "summary_model", "token_threshold", "keep_recent", "check"}
    assert settings_for("compact", model="gpt-4o").policy.token_threshold == 89600  # 70% of gpt-4o's window
    with pytest.raises(UsageError, match="'--keep': -1 is not in the range"):
        settings_for("toolcall", keep=-1)
    with pytest.raises(UsageError, match="has no option kep"):
        settings_for("toolcall", kep=3)
    with pytest.raises(UsageError, match="--temperature applies only to the openai backend"):
        settings_for("summarize", backend="extractive", temperature=0.5)
    with pytest.raises(UsageError, match="cannot be used together"):
        settings_for("compact", check=True, dry_run=True)
    assert "ignored" in configure("summarize", temperature=0.5).warnings[0]


def test_the_real_transcripts_come_out_as_the_cli_writes_them(runner, tmp_path):
    src = FIXTURES / "taubench_airline_5.jsonl"
    expected, report, _ = cli_run(runner, "toolcall", ["--keep", "4"], src, tmp_path)
    res = process_lines(src.read_bytes().splitlines(keepends=True), "toolcall", keep=4, source=str(src))
    assert b"".join(res.lines) == expected and res.items == report["items"]


def test_the_local_engine_never_imports_ray_or_pyarrow(tmp_path):
    """`ray` is an optional dependency: a local run (and the batch function) loads neither."""
    import subprocess
    import sys

    probe = ("import sys\nfrom compactor_cli.cli import main\nfrom compactor_cli.batch import process_lines\n"
             "process_lines([b'{\"messages\": []}'], 'toolcall')\n"
             "sys.argv = ['xcompact', 'toolcall', sys.argv[1], '-q', '-o', sys.argv[2]]\n"
             "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'pyarrow', 'pandas')))\n")
    res = subprocess.run([sys.executable, "-c", probe, str(FIXTURES / "taubench_airline_5.jsonl"),
                          str(tmp_path / "o.jsonl")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_texts_give_back_a_passed_through_line_as_it_was_given():
    """A str line with a lone surrogate (json.dumps(..., ensure_ascii=False) makes one) fails its
    record and is passed through; texts() gives that str back, not a UnicodeDecodeError that
    loses the batch. Bytes that are not UTF-8 come back as surrogate escapes of the same bytes."""
    lone = json.dumps({"messages": [{"role": "user", "content": "a\ud800b"}]}, ensure_ascii=False)
    raw = b'{"messages": [{"role": "user", "content": "x"}]}\xff\n'
    good = json.dumps({"messages": [{"role": "user", "content": "fine"}]})
    res = process_lines([lone, raw, good], "toolcall", keep=4)
    assert [i["status"] for i in res.items] == ["INVALID_INPUT", "INVALID_INPUT", "NOTHING_TO_CONDENSE"]
    texts = res.texts()
    assert texts[0] == lone and texts[2] == good
    assert texts[1].encode("utf-8", "surrogateescape") == raw[:-1]


@pytest.mark.parametrize("kwargs", [{"first_line": "1"}, {"first_line": None}, {"first_line": 0},
                                    {"first_line": 1.5}, {"first_line": True}, {"source": None},
                                    {"source": b"x.jsonl"}])
def test_process_lines_refuses_what_would_misname_the_records(kwargs):
    with pytest.raises(UsageError, match=r"first_line|source"):
        process_lines([b'{"messages": []}\n'], "toolcall", **kwargs)


@pytest.mark.parametrize("command, options", [
    ("toolcall", {"keep": 4.5}), ("toolcall", {"keep": True}), ("toolcall", {"keep": []}), ("toolcall", {"keep": "abc"}),
    ("toolcall", {"strict": []}), ("toolcall", {"clear_tool_inputs": 1}), ("toolcall", {"exclude_tools": "bash"}),
    ("toolcall", {"images": "keep-last 1"}), ("compact", {"token_threshold": 1000.0}),
])
def test_a_value_of_the_wrong_kind_is_a_usage_error_not_a_coercion(command, options):
    """click reads command-line text: given Python values it would take 4.5 or True as the count
    4 or 1, and "bash" for a list as its letters. The batch function refuses them."""
    with pytest.raises(UsageError, match=next(iter(options))):
        settings_for(command, **options)


def test_none_is_the_default():
    """An option given as None takes the CLI's default (it made every record fail before)."""
    assert settings_for("toolcall", keep=None, encoding=None, dedup_reads=None) == settings_for("toolcall")
    assert settings_for("summarize", backend=None) == settings_for("summarize")
    res = process_lines([orjson.dumps(tool_conv(n_tools=20)) + b"\n"], "toolcall", keep=None)
    assert res.items[0]["status"] == "RECLAIMED"


def test_files_by_path_and_lines_of_the_wrong_kind(tmp_path):
    """read_lines, write_lines, load_conversations and formats.read_file take a str or a
    pathlib.Path; anything else, and lines that are not bytes, are UsageErrors before any file
    is made (str lines were an AttributeError, a path of None wrote to stdout)."""
    from pathlib import Path

    from compactor_cli import formats, load_conversations
    from compactor_cli.batch import read_lines, write_lines

    src = Path(FIXTURES) / "taubench_airline_5.jsonl"
    lines = list(read_lines(src))
    assert len(lines) == 5 == len(list(load_conversations(src))) == len(list(formats.read_file(src)))
    assert write_lines(tmp_path / "copy.jsonl", lines) == src.stat().st_size
    assert (tmp_path / "copy.jsonl").read_bytes() == src.read_bytes()
    for path, given, what in ((tmp_path / "o.jsonl", ["a str line\n"], "not bytes"),
                              (tmp_path / "o.jsonl", b"one bytes object", "iterable"),
                              (None, [b"x\n"], "file name")):
        with pytest.raises(UsageError, match=what):
            write_lines(path, given)
    for reader in (read_lines, load_conversations, formats.read_file):
        with pytest.raises(UsageError, match="file name"):
            list(reader(5))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.jsonl"]  # nothing left behind


def test_read_file_names_the_line_of_the_record_it_cannot_read(tmp_path):
    from compactor_cli import formats
    from compactor_cli.errors import InvalidInputError

    (tmp_path / "m.jsonl").write_bytes(b'{"messages": [{"role": "user", "content": "a"}]}\n\n{broken\n')
    with pytest.raises(InvalidInputError, match=r"^line 3: broken JSON"):
        list(formats.read_file(tmp_path / "m.jsonl"))
