"""The README's Hugging Face ``datasets`` recipe, run as written (num_proc=2): its output file and
report are the CLI's, byte for byte, on hostile records. And why the recipe is needed: the JSON
loader does not give the records back."""

from __future__ import annotations

import json
import re

import orjson
import pytest
from engine_cases import hostile_lines
from helpers import ROOT

from compactor_cli.cli import cli

pytestmark = [pytest.mark.ray, pytest.mark.slow]  # needs datasets, from the ray-test extra


def recipe() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- hf-recipe -->\n```python\n(.*?)```", text, re.S)
    assert match, "the README lost its datasets recipe"
    return match.group(1)


@pytest.fixture
def hf(monkeypatch, tmp_path):
    """datasets offline, its cache in the test's directory."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    return pytest.importorskip("datasets")


def data_file(path) -> None:
    # the text loader decodes UTF-8 strictly: the invalid-UTF-8 record cannot go through it (README)
    path.write_bytes(b"".join(line for line in hostile_lines() if b"\xff" not in line))


def test_the_readme_recipe_gives_the_cli_bytes_and_report(hf, runner, tmp_path):
    data_file(tmp_path / "data.jsonl")
    res = runner.invoke(cli, ["toolcall", "data.jsonl", "--keep", "4", "-q", "-o", "cli.jsonl", "--report",
                              "cli-report.json"])
    assert res.exit_code == 1  # the hostile file has bad records
    exec(compile(recipe(), "README.md:hf-recipe", "exec"), {"__name__": "recipe"})
    assert (tmp_path / "compacted.jsonl").read_bytes() == (tmp_path / "cli.jsonl").read_bytes()
    ours, theirs = (json.loads((tmp_path / n).read_text()) for n in ("report.json", "cli-report.json"))
    assert ours["items"] == theirs["items"]
    assert ours["totals"] == theirs["totals"] and ours["exit_code"] == theirs["exit_code"] == 1
    assert ours["parameters"] == theirs["parameters"]  # "config": null in both (no config file read)


def test_the_json_loader_does_not_give_the_records_back(hf, tmp_path):
    """What the recipe avoids: schema inference adds keys and loses the float 1e-12."""
    records = [{"messages": [{"role": "user", "content": "a"}], "eps": 1e-12, "x": 0.5},
               {"messages": [{"role": "user", "content": "b", "name": "n"}], "eps": 0.12345678901234566}]
    (tmp_path / "mixed.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    ds = hf.load_dataset("json", data_files=str(tmp_path / "mixed.jsonl"), split="train")
    back = [dict(row) for row in ds]
    assert back[0]["eps"] != 1e-12 and back[1]["eps"] != 0.12345678901234566  # floats re-encoded (0.0, 0.123456789)
    assert "x" in back[1] and "x" not in records[1]  # a key the record never had
