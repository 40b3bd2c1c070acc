"""Commands as classes in an explicit registry (issue 31): the engine asks a command's class,
never its name, so a new command is one class and one registry line — shown here with a command
the package does not have, run by the batch function and the engine unchanged."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import compactor_cli
from compactor_cli.batch import process_lines, report_for
from compactor_cli.commands import options as opt
from compactor_cli.commands import registry
from compactor_cli.commands.base import Command
from compactor_cli.commands.configure import Configured
from compactor_cli.commands.settings import Settings
from compactor_cli.status import Status

PACKAGE = Path(compactor_cli.__file__).resolve().parent


def test_no_module_dispatches_on_a_command_name():
    dispatch = re.compile(r"command\s*(==|!=|in \(|not in)")
    found = [f"{p.relative_to(PACKAGE)}:{n}: {line.strip()}" for p in sorted(PACKAGE.rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if dispatch.search(line)]
    assert found == []


class CountUsers(Command):
    """A command the package does not have: counts each conversation's user messages, writes nothing."""

    name = "count-users"
    help = "Count the user messages of each conversation."
    light = True

    @classmethod
    def slots(cls) -> list[opt.Slot]:
        return [opt.inputs, opt.from_format, opt.cc_history, opt.report, opt.quiet, opt.strict, opt.CONFIG]

    @classmethod
    def build(cls, values: dict[str, Any], explicit: set[str], config_file: str | None) -> Configured:
        return Configured(cls.name, Settings(cls.name, strict=values["strict"], count_tokens=False,
                                             write_output=False), {"strict": values["strict"]})

    @classmethod
    def transform(cls, settings: Settings, counter: Any) -> tuple[Any, Any]:
        def count(dump: dict, settings: Settings) -> tuple[dict, Status, dict[str, Any]]:
            users = sum(1 for m in dump["messages"] if m.get("role") == "user")
            return dump, Status.VALID, {"user_messages": users}

        return count, None


def test_a_new_command_is_one_class_and_one_registry_line(monkeypatch):
    monkeypatch.setitem(registry.COMMANDS, CountUsers.name, CountUsers)  # the one line
    lines = [orjson.dumps({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                        {"role": "user", "content": "c"}]}),
             b'{"messages": 3}']
    result = process_lines(lines, "count-users")
    assert result.outputs == [None, None]  # writes nothing
    good, bad = result.items
    assert good["status"] == "VALID" and good["user_messages"] == 2
    assert bad["status"] == "INVALID_INPUT"  # the engine's own checks, for any command
    report = report_for("count-users", result.items)
    assert report.exit_code == 1 and "2 conversations" in report.summary()


def test_the_cli_is_built_from_the_registry():
    from compactor_cli.cli import cli

    for name, command in registry.COMMANDS.items():
        if command.batch:
            res = CliRunner().invoke(cli, [name, "--help"])
            assert res.exit_code == 0 and " ".join(command.help.split()[:6]) in " ".join(res.stdout.split())


def test_an_unknown_command_names_the_ones_there_are():
    from compactor_cli.errors import UsageError

    with pytest.raises(UsageError, match="unknown command 'nope'; expected one of toolcall, summarize"):
        process_lines([b'{"messages": []}'], "nope")
