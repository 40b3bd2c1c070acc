"""Decimals a double does not hold survive every rewrite exactly (orjson would write
0.30000000000000001 as 0.3 and refuse 1e309 as "broken JSON"): toolcall, summarize, convert and
restore, through the real CLI; values compared as decimals, not doubles."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactor_cli.files.records import dump_bytes, lossless_problems, parse_exact, parse_json
from compactor_cli.model.exact_numbers import ExactFloat

ODD = ["0.30000000000000001", "0.1000000000000000000000001", "1.7976931348623157e309", "-1e400",
       "123456789.123456789", "2.50000000000000000000", "1e-400"]  # the last two: 2.5, and below a double's range


def xcompact(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, timeout=120)


def decimals(raw: bytes):
    return [json.loads(line, parse_float=Decimal, parse_int=Decimal) for line in raw.splitlines() if line.strip()]


def _record(numbers: list[str]) -> bytes:
    meta = ",".join(f'"n{i}":{t}' for i, t in enumerate(numbers))
    turns = []
    for i in range(3):
        turns.append(f'{{"role":"user","content":"step {i} {"u" * 300}"}}')
        turns.append(f'{{"role":"assistant","content":null,"tool_calls":[{{"id":"c{i}","type":"function",'
                     f'"function":{{"name":"run","arguments":"{{\\"x\\":{numbers[0]}}}"}}}}]}}')
        turns.append(f'{{"role":"tool","tool_call_id":"c{i}","content":"{"out " * 200}"}}')
    turns.append('{"role":"assistant","content":"done"}')
    return (f'{{"messages":[{{"role":"system","content":"sys","metadata":{{{meta}}}}},' + ",".join(turns)
            + f'],"usage":{{"cost":{numbers[-1]}}}}}\n').encode()


@pytest.mark.parametrize("command", [["toolcall", "--keep", "0"], ["summarize", "--backend", "extractive",
                                                                    "--keep-recent", "2"]])
def test_toolcall_and_summarize_keep_every_decimal_as_written_and_restore_gives_them_back(tmp_path, command):
    raw = _record(ODD)
    src, out, back = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "back.jsonl"
    src.write_bytes(raw)
    proc = xcompact(*command, "-q", str(src), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    written = out.read_bytes()
    assert written != raw  # it was compacted
    for text in ODD[:-2]:
        assert text.encode() in written  # the number as read, not the double's repr
    assert b"2.5," in written and b"1e-400" in written  # the same value (trailing zeros), and not 0.0
    proc = xcompact("restore", "-q", str(out), "-o", str(back))
    assert proc.returncode == 0, proc.stderr
    assert decimals(back.read_bytes()) == decimals(raw)


def test_convert_keeps_decimals_a_double_does_not_hold(tmp_path):
    raw = _record(ODD)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_bytes(raw)
    proc = xcompact("convert", "-q", str(src), "--to", "anthropic", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    written = out.read_bytes()
    assert b'"input":{"x":0.30000000000000001}' in written  # a tool call's arguments, as an object
    assert b'"usage":{"cost":1e-400}' in written


def test_a_number_beyond_a_double_is_read_not_called_broken_json():
    with pytest.raises(Exception, match="beyond the range of a double"):
        parse_json(b'{"x": 1e309}')
    value = parse_exact(b'{"x": 1e309}')["x"]
    assert isinstance(value, ExactFloat) and value.text == "1e309"


def test_decimals_a_double_holds_take_the_fast_path():
    """Numbers written by Python, JavaScript or orjson (the shortest form) are doubles exactly."""
    raw = b'{"a": 0.1, "b": 1733112345.1234567, "c": 2.5e-07, "d": 123456789012345.6, "e": "1234567890123456789"}'
    assert lossless_problems(raw, parse_json(raw)) == (False, [])
    assert lossless_problems(b'{"a": 0.30000000000000001}', parse_json(b'{"a": 0.30000000000000001}'))[0]


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.decimals(allow_nan=False, allow_infinity=False, places=None).map(str)
                .filter(lambda t: "E" not in t or "e" not in t), min_size=1, max_size=6),
       st.sampled_from(["jsonl", "json"]))
def test_any_decimal_is_written_back_with_its_value(texts, form):
    texts = [t.replace("E", "e") for t in texts]
    texts = [t if any(c in t for c in ".e") else t + ".0" for t in texts]  # decimals, not integers
    raw = ("[" + ",".join(texts) + "]").encode()
    back = dump_bytes(parse_exact(raw), form, exact=True)
    assert json.loads(back, parse_float=Decimal) == [Decimal(t) for t in texts]


# ---------------------------------------------------------------- found by attacking the exact path

MESSAGES = ('[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c0",'
            '"type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c0",'
            '"content":[{"type":"text","text":"' + "x" * 800 + '","score":NUM}]},{"role":"assistant","content":"done"}]')


@pytest.mark.parametrize("number", ["0.30000000000000001", "1e400", "123456789012345678901234567890"])
def test_a_repeated_key_is_refused_beside_a_number_only_the_exact_reader_holds(tmp_path, number):
    src = tmp_path / "in.jsonl"
    src.write_bytes(('{"dup":1,"dup":2,"x":' + number + ',"messages":' + MESSAGES.replace("NUM", "1") + "}\n").encode())
    proc = xcompact("toolcall", "--keep", "0", str(src), "-o", str(tmp_path / "out.jsonl"))
    assert proc.returncode == 1 and b"the key 'dup' appears twice" in proc.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == src.read_bytes()


def test_nan_beside_a_number_beyond_a_double_is_still_broken_json(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(('{"x":1e400,"y":NaN,"messages":' + MESSAGES.replace("NUM", "1") + "}\n").encode())
    proc = xcompact("toolcall", "--keep", "0", str(src), "-o", str(tmp_path / "out.jsonl"))
    assert proc.returncode == 1 and b"broken JSON: NaN is not a JSON value" in proc.stderr
    assert b"Traceback" not in proc.stderr


@pytest.mark.parametrize("number", ["0.30000000000000001", "1e400", "123456789012345678901234567890"])
def test_extract_prints_the_number_as_stored(tmp_path, number):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_bytes(('{"messages":' + MESSAGES.replace("NUM", number) + "}\n").encode())
    assert xcompact("toolcall", "--keep", "0", "-q", str(src), "-o", str(out)).returncode == 0
    proc = xcompact("extract", "c0", str(out))
    assert proc.returncode == 0 and f'"score":{number}'.encode() in proc.stdout


def test_a_claude_code_log_keeps_its_numbers(tmp_path):
    from helpers import FIXTURES

    src, out = tmp_path / "s.jsonl", tmp_path / "out.jsonl"
    raw = (FIXTURES / "formats" / "claude_code_session.jsonl").read_bytes()
    assert raw.count(b'"path":"src"}') == 1
    src.write_bytes(raw.replace(b'"path":"src"}', b'"path":"src","n":0.30000000000000001}'))
    assert xcompact("toolcall", "--keep", "0", "-q", str(src), "-o", str(out)).returncode == 0
    assert b'\\"n\\":0.30000000000000001' in out.read_bytes()


def test_an_integer_beyond_64_bits_in_an_anthropic_tool_input_is_compacted_and_restored(tmp_path):
    record = ('{"model":"claude-3","max_tokens":100,"messages":[{"role":"user","content":"hi"},'
              '{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":'
              '{"x":123456789012345678901234567890,"y":0.30000000000000001}}]},{"role":"user","content":'
              '[{"type":"tool_result","tool_use_id":"t1","content":"' + "y" * 800 + '"}]},'
              '{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}\n')
    src, out, back = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "back.jsonl"
    src.write_text(record)
    proc = xcompact("toolcall", "--keep", "0", str(src), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert b'"input":{"x":123456789012345678901234567890,"y":0.30000000000000001}' in out.read_bytes()
    assert xcompact("restore", "-q", str(out), "-o", str(back)).returncode == 0
    assert decimals(back.read_bytes()) == decimals(src.read_bytes())
