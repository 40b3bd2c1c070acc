"""Golden cases, as black keeps them: ``tests/cases/<name>/`` holds ``args`` (the command line;
``{fixtures}`` and ``{cases}`` stand for those directories), the expected output
(``expected_output.jsonl`` / ``.json``, absent when the command writes nothing), the expected
report (``expected_report.json``) and ``expected_exit``. One parametrised test runs them all, so
any change of output bytes, report fields or exit code shows up as a diff to review.

After an intended change: ``XCOMPACT_REGEN_CASES=1 pytest tests/test_cases.py`` rewrites the
expected files; read the diff before committing it."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import orjson
import pytest
from helpers import FIXTURES

from compactor_cli.cli import cli

CASES = Path(__file__).resolve().parent / "cases"
REGEN = bool(os.environ.get("XCOMPACT_REGEN_CASES"))


def _argv(case: Path) -> list[str]:
    text = (case / "args").read_text().strip()
    return shlex.split(text.replace("{fixtures}", str(FIXTURES)).replace("{cases}", str(CASES)))


def _portable_report(raw: bytes) -> dict:
    """The report with machine-specific paths written as {fixtures}/{cases}."""
    text = raw.decode().replace(str(CASES), "{cases}").replace(str(FIXTURES), "{fixtures}")
    return orjson.loads(text)


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if (p / "args").exists()))
def test_golden_case(case, runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    case_dir = CASES / case
    argv = _argv(case_dir)
    inputs = [a for a in argv[1:] if os.path.exists(a)]
    writes = argv[0] != "validate" and "--check" not in argv and "--dry-run" not in argv
    suffix = Path(inputs[0]).suffix if inputs else ".jsonl"
    out = tmp_path / f"out{suffix}"
    res = runner.invoke(cli, [*argv, *(["-o", str(out)] if writes else []), "--report", "report.json", "-q"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    report = _portable_report((tmp_path / "report.json").read_bytes())
    expected_out = case_dir / f"expected_output{suffix}"
    if REGEN:
        (case_dir / "expected_exit").write_text(f"{res.exit_code}\n")
        (case_dir / "expected_report.json").write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
        if writes:
            expected_out.write_bytes(out.read_bytes())
        return
    assert res.stdout == ""  # -o and -q: nothing on stdout
    assert res.exit_code == int((case_dir / "expected_exit").read_text())
    assert report == orjson.loads((case_dir / "expected_report.json").read_bytes())
    if writes:
        assert out.read_bytes() == expected_out.read_bytes()
    else:
        assert not out.exists()


@pytest.mark.parametrize("case, original", [("restore_jsonl", "taubench_airline_5.jsonl"),
                                            ("restore_document", "claude_code_session.json")])
def test_restore_cases_give_back_the_fixture(case, original):
    """The chained cases close the loop: restore(compact(x)) and restore(summarize(x)) are x."""
    suffix = Path(original).suffix
    restored = (CASES / case / f"expected_output{suffix}").read_bytes()
    source = (FIXTURES / original).read_bytes()
    if suffix == ".jsonl":
        assert [orjson.loads(x) for x in restored.splitlines()] == [orjson.loads(x) for x in source.splitlines()]
    else:
        assert orjson.loads(restored) == orjson.loads(source)
