"""`xcompact report` reads a file someone may have edited (issue 28): a field of the wrong type
anywhere in a report is one error line naming the file and exit 1, never a traceback."""

from __future__ import annotations

import copy
import json

import orjson
import pytest
from helpers import FIXTURES

from compactor_cli.cli import cli

WRONG = [None, "x", -1, 1e308, [], {}, True, 2**70, "\x1b[31m", 0.5]


def _paths(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:2]):
            yield from _paths(v, (*path, i))
    if path:
        yield path


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from click.testing import CliRunner

    tmp = tmp_path_factory.mktemp("rep")
    res = CliRunner().invoke(cli, ["toolcall", str(FIXTURES / "taubench_airline_5.jsonl"), "-o", str(tmp / "o.jsonl"),
                                   "--report", str(tmp / "r.json"), "-q"])
    assert res.exit_code == 0
    return orjson.loads((tmp / "r.json").read_bytes())


@pytest.mark.slow
def test_every_field_of_a_report_given_a_wrong_type_is_one_error_line(report, runner, tmp_path):
    bad = tmp_path / "bad.json"
    checked = 0
    for path in _paths(report):
        for value in WRONG:
            doc = copy.deepcopy(report)
            node = doc
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            bad.write_text(json.dumps(doc))  # the standard writer: integers beyond 64 bits too
            res = runner.invoke(cli, ["report", str(bad), "--html", str(tmp_path / "p.html")])
            assert res.exception is None or isinstance(res.exception, SystemExit), (path, value, res.exception)
            assert res.exit_code in (0, 1), (path, value)
            if res.exit_code == 1:
                assert str(bad) in res.stderr and res.stderr.count("\n") == 1, res.stderr
            checked += 1
    assert checked > 500
