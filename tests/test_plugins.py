"""Strategies and summarisers of one's own (compact --strategy, --backend MODULE:ATTR, entry
points): the example of docs/plugins.md runs as written, and a plug-in's result goes through xcompact's
own checks, failing one conversation clearly and never the batch."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import FIXTURES, ROOT, read_jsonl

from compactor_cli import restore_conversation

TAU = FIXTURES / "taubench_airline_5.jsonl"


def xcompact(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={**os.environ, **(env or {})})


PLUGINS_DOC = ROOT / "docs" / "plugins.md"


def _readme_example() -> str:
    page = PLUGINS_DOC.read_text()
    return re.search(r"<!-- example: my_strategies.py -->\n```python\n(.*?)```", page, re.S).group(1)


def test_the_readme_strategy_runs_as_written(tmp_path):
    (tmp_path / "my_strategies.py").write_text(_readme_example())
    os.symlink(FIXTURES, tmp_path / "fixtures")
    page = PLUGINS_DOC.read_text()
    command = re.search(r"^(xcompact compact fixtures/\S+ --strategy my_strategies:KeepRecent .*)$", page,
                        re.M).group(1)
    res = xcompact(*command.split()[1:], "--report", "r.json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    report = orjson.loads((tmp_path / "r.json").read_bytes())
    outs = read_jsonl(tmp_path / "kept.jsonl")
    for item, out, src in zip(report["items"], outs, read_jsonl(TAU), strict=True):
        body = len(src["messages"]) - (src["messages"][0]["role"] == "system")
        if body > 40:
            assert item["status"] == "SUMMARIZED" and item["strategy"] == "my_strategies:KeepRecent"
            kept = out["messages"][1:]
            assert 1 <= len(kept) <= 20 and kept[0]["role"] == "user" and kept == src["messages"][-len(kept):]
            assert "Kept recent complete turns" in out["messages"][0]["content"]
            assert restore_conversation(out)[0] == src  # what it dropped comes back exactly
        else:
            assert item["status"] == "UNDER_THRESHOLD" and out == src
    assert {i["status"] for i in report["items"]} == {"SUMMARIZED", "UNDER_THRESHOLD"}


BAD = '''
from compactor_cli import CompactionResult

class Raises:
    def should_compact(self, request):
        return True
    def compact(self, request):
        if len(request.messages) > 30:
            raise RuntimeError("boom")
        return CompactionResult(messages=request.messages[-4:])

class Foreign:
    def should_compact(self, request):
        return True
    def compact(self, request):
        return CompactionResult(messages=[{"role": "user", "content": "made up"}])

class BreaksPairing:
    def should_compact(self, request):
        return True
    def compact(self, request):
        i = next(i for i, m in enumerate(request.messages) if m["role"] == "tool")
        return CompactionResult(messages=request.messages[i:])

class Empty:
    def should_compact(self, request):
        return True
    def compact(self, request):
        return CompactionResult(messages=[])

class NoUser:
    def should_compact(self, request):
        return True
    def compact(self, request):  # the messages after the last user message, from an assistant one
        msgs = request.messages
        i = len(msgs)
        while i > 0 and msgs[i - 1]["role"] != "user":
            i -= 1
        j = next((k for k in range(i, len(msgs)) if msgs[k]["role"] == "assistant"), len(msgs))
        return CompactionResult(messages=msgs[j:])
'''


@pytest.mark.parametrize("name, error", [
    ("Foreign", "not the conversation's last messages"),
    ("BreaksPairing", "break tool pairing"),
    ("Empty", "nonempty list of messages"),
    ("NoUser", "no user message"),
])
def test_a_bad_strategy_fails_each_conversation_clearly_and_writes_it_as_it_was(tmp_path, name, error):
    (tmp_path / "bad.py").write_text(BAD)
    res = xcompact("compact", str(TAU), "--strategy", f"bad:{name}", "-o", "out.jsonl", "--report", "r.json",
                   cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    report = orjson.loads((tmp_path / "r.json").read_bytes())
    failed = [i for i in report["items"] if i["status"] == "SUMMARIZE_FAILED"]
    assert failed and all(f"strategy bad:{name}" in i["error"] for i in failed)
    assert any(error in i["error"] for i in failed), failed[0]["error"]
    src_lines = TAU.read_bytes().splitlines()
    for item, line, src in zip(report["items"], (tmp_path / "out.jsonl").read_bytes().splitlines(), src_lines,
                               strict=True):
        if item["status"] == "SUMMARIZE_FAILED":
            assert line == src  # left exactly as it was


def test_an_exception_fails_one_conversation_never_the_batch(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    res = xcompact("compact", str(TAU), "--strategy", "bad:Raises", "-o", "out.jsonl", "--report", "r.json",
                   cwd=tmp_path)
    assert res.returncode == 1
    statuses = [i["status"] for i in orjson.loads((tmp_path / "r.json").read_bytes())["items"]]
    assert "SUMMARIZE_FAILED" in statuses and "SUMMARIZED" in statuses
    assert "strategy bad:Raises raised RuntimeError: boom" in res.stderr


@pytest.mark.parametrize("spec, message", [
    ("nosuchmodule:X", "cannot import nosuchmodule"),
    ("bad:Nope", "bad has no attribute Nope"),
    ("nosuchentrypoint", "no xcompact.strategies entry point"),
])
def test_a_strategy_that_cannot_be_loaded_is_a_usage_error_before_any_work(tmp_path, spec, message):
    (tmp_path / "bad.py").write_text(BAD)
    res = xcompact("compact", str(TAU), "--strategy", spec, "-o", "out.jsonl", cwd=tmp_path)
    assert res.returncode == 2 and message in res.stderr
    assert not (tmp_path / "out.jsonl").exists()


SUMMARISER = '''
from compactor_cli import Answer

SECTIONS = ("system_context", "overview", "key_facts", "user_preferences", "decisions", "pending_tasks",
            "open_questions", "tone_context")

class Counting:
    name = "counting"
    model = "by-hand"

    def __init__(self, text_tokens):
        self.text_tokens = text_tokens

    async def summarize(self, request):
        body = {s: "(none)" for s in SECTIONS}
        body["overview"] = f"- {len(request.head)} earlier messages"
        return Answer(text="\\n\\n".join(f"## {s}\\n{t}" for s, t in body.items()), calls=0)
'''


def _entry_point_site(tmp_path: Path) -> Path:
    """A distribution that registers both kinds of plug-in as entry points (as pip would install it)."""
    site = tmp_path / "site"
    info = site / "myplugins-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myplugins\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[xcompact.backends]\ncounting = summariser:Counting\n\n"
                                           "[xcompact.strategies]\nkeep-recent = my_strategies:KeepRecent\n")
    (site / "summariser.py").write_text(SUMMARISER)
    (site / "my_strategies.py").write_text(_readme_example())
    return site


@pytest.mark.parametrize("backend", ["summariser:Counting", "counting"])
def test_a_backend_of_ones_own_summarises_through_the_same_checks(tmp_path, backend):
    site = _entry_point_site(tmp_path)
    res = xcompact("summarize", str(TAU), "--backend", backend, "--keep-recent", "6", "-o", "out.jsonl",
                   "--report", "r.json", cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert res.returncode == 0, res.stderr
    report = orjson.loads((tmp_path / "r.json").read_bytes())
    summarised = [i for i in report["items"] if i["status"] == "SUMMARIZED"]
    assert summarised and all(i["backend"] == "counting" for i in summarised)
    assert report["parameters"]["backend"] == backend
    for out, src in zip(read_jsonl(tmp_path / "out.jsonl"), read_jsonl(TAU), strict=True):
        assert restore_conversation(out)[0] == src


def test_a_strategy_found_as_an_entry_point(tmp_path):
    site = _entry_point_site(tmp_path)
    res = xcompact("compact", str(TAU), "--strategy", "keep-recent", "-o", "out.jsonl", "--report", "r.json",
                   cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert res.returncode == 0, res.stderr
    assert "SUMMARIZED" in {i["status"] for i in orjson.loads((tmp_path / "r.json").read_bytes())["items"]}


def test_an_unknown_backend_name_is_a_usage_error(tmp_path):
    res = xcompact("summarize", str(TAU), "--backend", "nope", cwd=tmp_path)
    assert res.returncode == 2 and "xcompact.backends entry point" in res.stderr


EXITS = '''
class Exits:
    def should_compact(self, request):
        return True
    def compact(self, request):
        raise SystemExit(3)

class Down:
    async def summarize(self, request):
        raise RuntimeError("down")

class Text:
    async def summarize(self, request):
        return "## overview\\n- a str, not an Answer"
'''


def test_a_strategy_that_exits_fails_its_conversations_and_leaves_nothing_behind(tmp_path):
    (tmp_path / "ex.py").write_text(EXITS)
    res = xcompact("compact", str(TAU), "--strategy", "ex:Exits", "-o", "out.jsonl", "--report", "r.json",
                   cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    items = orjson.loads((tmp_path / "r.json").read_bytes())["items"]
    assert {i["status"] for i in items} == {"SUMMARIZE_FAILED"} and "raised SystemExit" in items[0]["error"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["ex.py", "out.jsonl", "r.json"]


@pytest.mark.parametrize("name, message", [("Down", "backend ex:Down raised RuntimeError: down"),
                                           ("Text", "backend ex:Text returned str, not an Answer")])
def test_a_failing_backend_is_a_summary_failure_naming_it(tmp_path, name, message):
    (tmp_path / "ex.py").write_text(EXITS)
    res = xcompact("summarize", str(TAU), "--backend", f"ex:{name}", "--keep-recent", "4", "-o", "out.jsonl",
                   "--report", "r.json", cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    items = orjson.loads((tmp_path / "r.json").read_bytes())["items"]
    failed = [i for i in items if i["status"] == "SUMMARIZE_FAILED"]
    assert failed and all(message in i["error"] for i in failed)
    assert not [i for i in items if i["status"] == "INVALID_INPUT"]


CHATTY = '''
print("importing chatty")
from compactor_cli import CompactionResult, Answer


class Chatty:
    def should_compact(self, request):
        print("deciding on", len(request.messages), "messages")
        return True

    async def compact(self, request):
        print("compacting")
        keep = [i for i, m in enumerate(request.messages) if m["role"] == "user"][-1]
        return CompactionResult(messages=request.messages[keep:])


class ChattyBackend:
    name = "chatty"

    async def summarize(self, request):
        print("summarising", len(request.head))
        return Answer("## overview\\n- chatty")
'''


@pytest.mark.parametrize("args", [["--strategy", "chatty:Chatty"],
                                  ["--backend", "chatty:ChattyBackend", "--token-threshold", "100"]])
def test_what_a_plugin_prints_goes_to_stderr_never_into_the_data(tmp_path, args):
    (tmp_path / "chatty.py").write_text(CHATTY)
    res = xcompact("compact", str(TAU), *args, "-o", "-", "--report", "r.json", cwd=tmp_path)
    assert res.returncode in (0, 1), res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == len(read_jsonl(TAU)) and all(orjson.loads(line) for line in lines)  # JSONL, nothing else
    assert "importing chatty" in res.stderr
    assert ("compacting" if "--strategy" in args else "summarising") in res.stderr
