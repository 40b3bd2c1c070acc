"""The lossless check's compiled quick answer (files/_exact.c, issue 32) never changes what
``lossless_problems`` says: where it answers "nothing lost", the exact reader finds nothing
(no integer beyond 64 bits, no decimal a double changes, no repeated key), and the answer with
the extension equals the answer without it, on generated records written in several styles and
on the fixtures' real ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactor_cli.errors import InvalidInputError
from compactor_cli.files import records
from compactor_cli.files.exact import ExactReader
from compactor_cli.files.records import lossless_problems, parse_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_the_compiled_check_is_built() -> None:
    assert records._EXACT is not None, (
        "compactor_cli.files._exact is not in the installed package: the wheel was built without a C "
        "compiler, or XCOMPACT_PURE_PYTHON is set")


def _python_answer(raw: bytes, parsed: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[bool, list[str]]:
    with monkeypatch.context() as m:
        m.setattr(records, "_EXACT", None)
        return lossless_problems(raw, parsed)


def _exact_finds_nothing(raw: bytes) -> bool:
    reader = ExactReader()
    reader.loads(raw)
    return reader.big_ints == 0 and reader.inexact_floats == 0 and not reader.duplicates


# Numbers as a record may write them: short and long, exponents of 1-4 digits, beyond 64 bits.
_NUMBER_TEXT = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.from_regex(r"-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,20})?([eE][-+]?[0-9]{1,4})?", fullmatch=True),
    st.sampled_from(["0.30000000000000001", "1e-400", "1E5", "1.50", "-0", "123456789012345", "1234567890123456",
                     "18446744073709551615", "18446744073709551616", "9223372036854775808", "1e99", "1e100",
                     "9.377835337406812", "8.218518222254189e-3"]),  # 16 digits a double does not hold
)
# Strings that look like structure: colons, quotes, backslashes, digits, escapes written out.
_TEXT = st.text(alphabet=st.sampled_from(list(':"\\,[]{}0123456789eE+-. aé\u2028\U0001f600')), max_size=30)


@st.composite
def _json_text(draw: st.DrawFn, depth: int = 0) -> str:
    """A JSON text, built as text so that repeated keys, exact number spellings, escapes and
    spacing are the record's own."""
    kind = draw(st.integers(0, 5 if depth < 4 else 2))
    if kind == 0:
        return draw(_NUMBER_TEXT)
    if kind == 1:
        value = draw(_TEXT)
        return json.dumps(value, ensure_ascii=draw(st.booleans()))
    if kind == 2:
        return draw(st.sampled_from(["true", "false", "null"]))
    space = draw(st.sampled_from(["", " ", "\n  "]))
    if kind == 3:
        items = draw(st.lists(_json_text(depth + 1), max_size=4))
        return "[" + ("," + space).join(items) + "]"
    keys = draw(st.lists(st.sampled_from(["a", "b", "role", "c:d", 'q"', "\\", "a"]), max_size=5))
    if draw(st.booleans()) and keys:
        keys.append(keys[0])  # a repeated key
    members = []
    for key in keys:
        written = json.dumps(key)
        if key == "a" and draw(st.booleans()):
            written = '"\\u0061"'  # the same key, spelt otherwise
        members.append(written + ":" + space + draw(_json_text(depth + 1)))
    return "{" + ("," + space).join(members) + "}"


@st.composite
def _record(draw: st.DrawFn) -> bytes:
    body = draw(_json_text(1))
    text = '{"messages":' + body + "}" if draw(st.booleans()) else "{" + f'"x": {body}' + "}"
    return text.encode() + draw(st.sampled_from([b"", b"\n"]))


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_record())
def test_the_quick_answer_is_the_pythons(raw: bytes) -> None:
    try:
        parsed = parse_json(raw)
    except Exception:  # noqa: BLE001  a number beyond a double: the record loop reads it exactly first
        return
    with pytest.MonkeyPatch.context() as mp:
        assert lossless_problems(raw, parsed) == _python_answer(raw, parsed, mp)
    if records._surely_lossless(raw, parsed):
        assert _exact_finds_nothing(raw)


@pytest.mark.parametrize("raw, sure", [
    (b'{"a":1,"b":[1.5,{"c":"x:y"}]}\n', True),
    (b'{"a": 1, "a": 2}', False),  # a repeated key: one colon more than members
    (b'{"a":1,"\\u0061":2}', False),  # the same key spelt otherwise
    (b'{"a":12345678901234567}', False),  # 17 digits
    (b'{"a":"12345678901234567"}', True),  # the same digits in a string
    (b'{"a":1e300}', False),
    (b'{"a":"\\":\\\\"}', True),  # an escaped quote, a colon and a backslash inside a string
    (b'{"a":"x\\\\","b":1}', True),  # a string ending in an escaped backslash
    (b'{"a":0.30000000000000001}', False),
    (b'{"a":-1.25e-07}', True),
])
def test_cases(raw: bytes, sure: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = parse_json(raw)
    assert records._surely_lossless(raw, parsed) is sure
    assert lossless_problems(raw, parsed) == _python_answer(raw, parsed, monkeypatch)


def test_what_it_gives_back() -> None:
    compiled = records._EXACT
    assert compiled is not None
    assert compiled.scan(b'{"a":"unterminated') is None
    assert compiled.scan(b'{"a":"ends in a backslash\\') is None
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    assert compiled.members({"a": deep}) is NotImplemented  # beyond its depth: the Python decides
    raw = b'{"a":' + b"[" * 300 + b"1" + b"]" * 300 + b"}"
    with pytest.raises(InvalidInputError, match="flatten"):
        lossless_problems(raw, orjson.loads(raw))  # orjson cannot write it again: said as before

    class Sub(dict):  # type: ignore[type-arg]
        pass

    assert compiled.members({"a": Sub()}) is NotImplemented
    assert compiled.members([{"a": 1, "b": {"c": [{}, {"d": 2}]}}]) == 4


def test_on_the_fixtures_real_records(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = sure = 0
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        for raw in path.read_bytes().splitlines(keepends=True):
            try:
                parsed = parse_json(raw)
            except Exception:  # noqa: BLE001  broken lines are other tests' business
                continue
            seen += 1
            answer = lossless_problems(raw, parsed)
            assert answer == _python_answer(raw, parsed, monkeypatch), (path.name, raw[:80])
            sure += records._surely_lossless(raw, parsed)
    assert seen > 100 and sure > seen // 2
