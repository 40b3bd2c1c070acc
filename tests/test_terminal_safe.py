"""Control characters from file names and data never reach the terminal (issue 28): every stderr
line goes through one sink that writes them as escapes, so a name or a value can neither
recolour the terminal nor forge a log line of its own."""

from __future__ import annotations

import subprocess
import sys

from compactor_cli.cli.launch import terminal_safe


def test_escapes_what_a_terminal_acts_on_and_keeps_the_rest():
    assert terminal_safe("plain text, tabs\tand ünïcode") == "plain text, tabs\tand ünïcode"
    assert terminal_safe("a\x1b[31mb\nc\rd\x85e\u2028f\x7f") == "a\\x1b[31mb\\nc\\rd\\x85e\\u2028f\\x7f"


def test_a_hostile_file_name_and_value_stay_on_one_escaped_line(tmp_path):
    name = tmp_path / "evil\x1b[31m\nforged: all good.jsonl"
    name.write_bytes(b'{"messages": [{"role": "r\\u001b[2Jobot", "content": "x"}]}\n')
    missing = tmp_path / "gone\x1b]0;title\x07.jsonl"
    proc = subprocess.run([sys.executable, "-m", "compactor_cli", "toolcall", str(name), str(missing),
                           "-o", str(tmp_path / "out")], capture_output=True, timeout=120)
    err = proc.stderr.decode()
    assert proc.returncode == 1
    assert "\x1b" not in err and "\x07" not in err
    lines = err.splitlines()
    assert not any(line.startswith("forged") for line in lines)
    assert any("evil\\x1b[31m\\nforged: all good.jsonl:1" in line and "r\\x1b[2Jobot" in line for line in lines)
    assert any("gone\\x1b]0;title\\x07.jsonl" in line for line in lines)
