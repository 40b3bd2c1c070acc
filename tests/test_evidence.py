"""Summaries worth continuing from (issue 27): the task verbatim, the evidence section, a
harness's reminders never taken for the user, custom tool calls counted and drawn, compact
using the room it is given. Real runs from fixtures/real (a mini-swe-agent trajectory, a Codex
rollout with apply_patch custom calls) and small hand-made dumps."""

from __future__ import annotations

import copy
import shlex

import orjson
import pytest
from helpers import FIXTURES, long_conv
from hypothesis import example, given, settings
from hypothesis import strategies as st

from compactor_cli import formats
from compactor_cli.backends.sections import split_evidence
from compactor_cli.cli import cli
from compactor_cli.evidence.extract import error_lines, evidence_of, exit_code, output_text, shell_words
from compactor_cli.evidence import harness
from compactor_cli.evidence.harness import task_index
from compactor_cli.evidence.probes import probes_of, retention, sent_text
from compactor_cli.evidence.section import GROUPS, item_key, parse_evidence, render_evidence
from compactor_cli.model.tokens import counter_for
from compactor_cli.status import Status
from compactor_cli.tiers.compact import compact_dump
from compactor_cli.tiers.options import (
    EVIDENCE_AUTO_MAX,
    EVIDENCE_SHARE,
    LONG_HEAD_TOKENS,
    Policy,
    evidence_room,
)
from compactor_cli.tiers.restore import restore_conversation
from compactor_cli.tiers.summarize import summarize_dump

REAL = FIXTURES / "real"
MINI = REAL / "psf__requests-5414.traj.json"
CODEX = REAL / "codex_rollout_apply_patch.jsonl"
REMINDER = "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."


NAMES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
         "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]


def conv(rounds: int = 8, size: int = 600) -> dict:
    """helpers.long_conv with user turns that differ in words, not only in digits (a harness's
    template repeated with other numbers is a harness's, not the user's)."""
    dump = long_conv(rounds=rounds, size=size)
    users = [m for m in dump["messages"] if m["role"] == "user"]
    for i, m in enumerate(users):
        m["content"] = f"Please look at the {NAMES[i % len(NAMES)]} module ({i}) and tell me what it does."
    return dump


def read(path) -> dict:
    ((_, dump, _),) = list(formats.read_file(str(path)))
    return dump


def call(cid: str, name: str, args: dict | str, custom: bool = False) -> dict:
    if custom:
        return {"id": cid, "type": "custom", "custom": {"name": name, "input": args}}
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": orjson.dumps(args).decode()}}


def turn(cid: str, name: str, args: dict | str, result: str, custom: bool = False) -> list[dict]:
    return [{"role": "assistant", "content": None, "tool_calls": [call(cid, name, args, custom)]},
            {"role": "tool", "tool_call_id": cid, "content": result}]


def groups(messages: list[dict]) -> dict[str, list[str]]:
    ev = evidence_of(messages)
    return {g: ev.items(g) for g in ev.groups}


# ---------------------------------------------------------------- what the evidence is

def test_file_changes_of_every_kind_of_edit_are_found():
    msgs = [{"role": "user", "content": "fix it"}]
    msgs += turn("a", "apply_patch", "*** Begin Patch\n*** Add File: src/new.py\n+x\n*** Update File: src/old.py\n"
                 "@@\n-a\n+b\n*** Delete File: src/gone.py\n*** End Patch", "Done", custom=True)
    msgs += turn("b", "Edit", {"file_path": "/repo/app.py", "old_string": "a", "new_string": "b"}, "ok")
    msgs += turn("c", "Write", {"file_path": "/repo/notes.md", "content": "x > y"}, "ok")
    msgs += turn("d", "bash", {"command": "sed -i 's/a/b/' lib/util.py && echo done > out.log"}, "")
    msgs += turn("e", "bash", {"command": "cat > gen.py << 'EOF'\nif a > b:\n    print(1)\nEOF"}, "")
    msgs += turn("f", "shell", {"command": ["bash", "-lc", "rm tmp.txt && mv a.cfg b.cfg | tee copy.txt"]}, "")
    patch = "*** Begin Patch\n*** Update File: docs/x.md\n@@\n*** End Patch"
    msgs += turn("g", "shell", {"command": ["apply_patch", patch]}, '{"output":"Success","metadata":{"exit_code":0}}')
    msgs += turn("h", "bash", {"command": "python - <<'PY'\nopen('data/out.json', 'w').write('1')\nPY"}, "")
    msgs += turn("i", "bash", {"command": "cat setup.py && nl -ba src/old.py | sed -n '1,5p'"}, "x")
    changed = groups(msgs)["Files changed"]
    assert changed[:3] == ["src/new.py (created)", "src/old.py", "src/gone.py (deleted)"]
    for path in ("/repo/app.py", "/repo/notes.md", "lib/util.py", "out.log", "gen.py", "tmp.txt (deleted)",
                 "a.cfg (moved to b.cfg)", "b.cfg", "copy.txt", "docs/x.md", "data/out.json"):
        assert path in changed, (path, changed)
    assert "b" not in " ".join(changed).split(", ")  # `if a > b:` inside a here-document is code, not a redirect
    assert groups(msgs)["Files read"] == ["setup.py"]  # src/old.py was changed: listed there, not here


def test_errors_exit_codes_and_tests_are_read_from_outputs():
    out = ("<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File \"x.py\", line 3\n"
           "    raise ValueError('bad')\nValueError: bad input for parse_url\n</output>")
    assert exit_code(out) == 1 and error_lines(out) == ["ValueError: bad input for parse_url"]
    pytest_out = ("E       AssertionError: assert 1 == 2\nFAILED tests/test_a.py::test_b - AssertionError\n"
                  "===== 1 failed, 3 passed in 0.21s =====")
    assert error_lines(pytest_out)[:2] == ["E AssertionError: assert 1 == 2",
                                            "FAILED tests/test_a.py::test_b - AssertionError"]
    listing = "  12\t    raise ValueError('x')\n13: except KeyError:\n    def error(self):"
    assert error_lines(listing) == []  # a file's lines are code, not errors met
    codex = '{"output":"fatal: not a git repository","metadata":{"exit_code":128,"duration_seconds":0.1}}'
    assert exit_code(output_text(codex)) == 128 and error_lines(output_text(codex)) == ["fatal: not a git repository"]
    msgs = [{"role": "user", "content": "run the tests"}]
    msgs += turn("t", "bash", {"command": "cd /testbed && python -m pytest tests/test_a.py"}, pytest_out)
    msgs += turn("u", "bash", {"command": "pip install pytest-httpbin"}, "<returncode>0</returncode>")
    msgs += turn("v", "bash", {"command": "make build"}, "<returncode>2</returncode>\nmake: *** [all] Error 2")
    g = groups(msgs)
    assert g["Test run"] == ["`cd /testbed && python -m pytest tests/test_a.py` → 1 failed, 3 passed"]
    assert g["Command failed"] == ["`make build` → exit 2"]


def test_a_search_that_finds_nothing_is_not_a_failed_command_and_a_caret_is_not_an_error():
    msgs = [{"role": "user", "content": "find it"}]
    msgs += turn("a", "bash", {"command": "rg -n 'def parse' src && sed -n '1,5p' src/a.py"}, "<returncode>1</returncode>")
    msgs += turn("b", "bash", {"command": "grep -rn TODO ."}, "<returncode>1</returncode>")
    msgs += turn("c", "bash", {"command": "rg -n x --badflag"}, "<returncode>2</returncode>\nerror: bad flag given")
    msgs += turn("d", "bash", {"command": "python -m pytest -q"},
                 "E     ^\nE   SyntaxError: f-string expression part cannot include a backslash\n" + "x" * 300)
    g = groups(msgs)
    assert g["Command failed"] == ["`rg -n x --badflag` → exit 2"]  # exit 1 of a search: no match, not a failure
    assert "E ^" not in g["Error met"]
    assert "E SyntaxError: f-string expression part cannot include a backslash" in g["Error met"]


def test_a_long_error_line_is_listed_by_its_start():
    line = "E   assert 'nozzle' in '{" + "\\n 100," * 40 + "}'"
    msgs = [{"role": "user", "content": "run"}] + turn("a", "bash", {"command": "pytest"}, line)
    (listed,) = groups(msgs)["Error met"]
    assert len(listed) <= 120 and listed.endswith("…") and listed.startswith("E assert 'nozzle' in")


def test_created_files_are_listed_apart_and_read_back_as_created():
    msgs = [{"role": "user", "content": "add them"}]
    msgs += turn("a", "apply_patch", "*** Begin Patch\n*** Add File: src/a.py\n+x\n*** Update File: src/b.py\n"
                 "@@\n-a\n+b\n*** Add File: tests/test_a.py\n+y\n*** End Patch", "Done", custom=True)
    counter = counter_for("cl100k_base")
    ev = evidence_of(msgs)
    body = render_evidence({g: ev.items(g) for g in ev.groups}, 500, counter.text)
    assert body.splitlines() == ["- Files created: tests/test_a.py, src/a.py", "- Files changed: src/b.py"]
    back = parse_evidence(body)["Files changed"]
    assert sorted(back) == sorted(ev.items("Files changed"))  # an anchored round reads them as they were


def test_a_long_heads_evidence_grows_beyond_its_share_and_a_budget_of_ones_own_caps_it():
    """Auto: the evidence's 3/4 of the summary's budget grows in proportion to a head over
    150,000 tokens (a 70-file session's paths do not fit 768 tokens); the sections keep their
    part. --evidence-tokens N caps it."""
    counter = counter_for("cl100k_base")
    msgs = [{"role": "user", "content": "Please build the whole package for me."}]
    for i in range(150):
        patch = f"*** Begin Patch\n*** Add File: pkg/module_number_{i}/implementation_{i}.py\n+x\n*** End Patch"
        msgs += turn(f"c{i}", "apply_patch", patch, "Done " + "output line\n" * 600, custom=True)
    msgs.append({"role": "user", "content": "Thanks, now document it."})
    dump = {"messages": msgs}
    head_tokens = counter.conversation(msgs)
    assert head_tokens > LONG_HEAD_TOKENS * 1.2  # long enough to grow
    auto, status, details = summarize_dump(dump, keep_recent=2)
    assert status is Status.SUMMARIZED
    assert 1024 * EVIDENCE_SHARE < details["evidence_tokens"] <= min(
        evidence_room(1024, head_tokens, None)[0], EVIDENCE_AUTO_MAX)
    assert details["summary_tokens"] > 1024  # the growth adds to the budget ...
    assert "## key_facts" in auto["messages"][0]["content"]  # ... never takes the sections' part
    capped, _, capped_details = summarize_dump(dump, keep_recent=2, evidence_tokens=300)
    assert capped_details["evidence_tokens"] <= 300 and capped_details["summary_tokens"] <= 1024
    assert restore_conversation(auto)[0] == dump and restore_conversation(capped)[0] == dump


def test_state_changing_tools_name_the_ids_they_acted_on():
    msgs = [{"role": "user", "content": "cancel it"}]
    msgs += turn("a", "get_reservation_details", {"reservation_id": "H9ZU1C"}, "{}")
    msgs += turn("b", "cancel_reservation", {"reservation_id": "H9ZU1C"}, "{}")
    assert groups(msgs)["Acted on"] == ["cancel_reservation reservation_id=H9ZU1C"]


def test_paths_are_relative_to_the_project_the_run_names():
    msgs = [{"role": "user", "content": "<environment_context>\n  <cwd>/home/me/proj</cwd>\n</environment_context>"},
            {"role": "user", "content": "add a test"}]
    msgs += turn("a", "Edit", {"file_path": "/home/me/proj/src/a.py"}, "ok")
    assert groups(msgs)["Files changed"] == ["src/a.py"]


# ---------------------------------------------------------------- the task and the harness

def test_the_task_is_the_first_user_message_that_is_the_user_speaking():
    msgs = [{"role": "system", "content": "s"},
            {"role": "user", "content": "<environment_context><cwd>/x</cwd></environment_context>"},
            {"role": "user", "content": "Fix the flaky upload test."},
            {"role": "user", "content": REMINDER}, {"role": "user", "content": REMINDER.replace("2", "3")}]
    assert task_index(msgs) == 2


def test_a_mini_swe_agent_run_keeps_its_task_verbatim_and_restores_exactly():
    dump = read(MINI)
    task = next(m for m in dump["messages"] if m["role"] == "user")
    assert "<pr_description>" in task["content"]
    new, status, details = summarize_dump(dump)
    assert status is Status.SUMMARIZED and details["task_kept"] is True
    assert new["messages"][1] == task  # first after the system message, byte for byte the same
    system = new["messages"][0]["content"]
    assert "Latest request: Please always provide" not in system and "User: Please always provide" not in system
    assert "non-Latin script" not in system  # an English task: no language note
    _, evidence = split_evidence(system[system.index("## system_context"):])
    assert evidence is not None and "requests/models.py" in evidence and "- Error met: " in evidence
    assert restore_conversation(new)[0] == dump


def test_the_task_kept_verbatim_restores_beside_a_force_kept_user_message():
    dump = conv(rounds=12)
    dump["messages"].append({"role": "user", "content": "And now the last module, please."})
    dump["messages"] += turn("z", "read_file", {"path": "src/z.py"}, "z" * 500)
    for user_tokens in (0, 60, 2000):
        new, status, details = summarize_dump(dump, keep_recent=2, keep_user_tokens=user_tokens)
        assert status is Status.SUMMARIZED and details["task_kept"] and details["forced_user"]
        users = [m["content"] for m in new["messages"] if m["role"] == "user"]
        assert users[0] == dump["messages"][1]["content"] and users[-1] == "And now the last module, please."
        # the later ones kept: the latest first, while they fit (about 20 tokens each)
        assert details["user_kept"] == len(users) - 2 == {0: 0, 60: 2, 2000: 11}[user_tokens]
        assert users[1:-1] == [m["content"] for m in dump["messages"] if m["role"] == "user"][1:-1][-len(users) + 2:] \
            if len(users) > 2 else True
        assert restore_conversation(new)[0] == dump


def test_no_keep_task_summarises_the_task_as_before():
    dump = read(MINI)
    new, status, details = summarize_dump(dump, keep_task=False, evidence=False)
    assert status is Status.SUMMARIZED and not details["task_kept"] and details["evidence_tokens"] == 0
    assert "## evidence" not in new["messages"][0]["content"]
    assert restore_conversation(new)[0] == dump


def test_a_language_note_needs_letters_of_another_script():
    english = conv(rounds=8)
    english["messages"][6]["content"] += " \u200b… – “quoted” — café ✓"
    new, _, _ = summarize_dump(english, keep_recent=4, keep_user_tokens=0)
    assert "non-Latin script" not in new["messages"][0]["content"]
    chinese = conv(rounds=8)
    chinese["messages"][6]["content"] = ("请检查这个模块的状态命令为什么在没有登录的时候也会失败，"
                                         "然后修复它。谢谢你的帮助。")
    new, _, _ = summarize_dump(chinese, keep_recent=4, keep_user_tokens=0)  # its words summarised, not kept
    assert "non-Latin script" in new["messages"][0]["content"]


def test_routine_harness_lines_are_no_facts():
    dump = conv(rounds=8)
    for m in dump["messages"]:
        if m["role"] == "tool":
            m["content"] = ("Chunk ID: 3de34f\nWall time: 0.0001 seconds\nProcess exited with code 0\n"
                            "Output:\n  Preparing editable metadata (pyproject.toml) ... done\n" + m["content"])
    new, _, _ = summarize_dump(dump, keep_recent=4)
    text = new["messages"][0]["content"]
    assert "Wall time" not in text and "Chunk ID" not in text and "Preparing editable" not in text


# ---------------------------------------------------------------- custom tool calls

def test_codex_apply_patch_custom_calls_are_counted_summarised_and_drawn(runner, tmp_path):
    dump = read(CODEX)
    counter = counter_for("cl100k_base")
    patch_msgs = [m for m in dump["messages"]
                  if any(c.get("type") == "custom" for c in m.get("tool_calls") or ())]
    assert patch_msgs
    without = copy.deepcopy(patch_msgs[0])
    without["tool_calls"][0]["custom"]["input"] = ""
    assert counter.message(patch_msgs[0]) > counter.message(without) + 1000  # the patch's tokens count
    new, status, _ = summarize_dump(dump, keep_recent=4)
    assert status is Status.SUMMARIZED
    created = next(line for line in new["messages"][0]["content"].splitlines() if line.startswith("- Files created: "))
    assert "specs/005-orchestrator-architecture/tasks.md" in created.split(": ", 1)[1].split(", ")
    res = runner.invoke(cli, ["show", str(CODEX)])
    assert res.exit_code == 0 and "-> apply_patch(*** Begin Patch" in res.stdout and "?()" not in res.stdout
    # the patch's lines stay indented inside the message's block, not at the left margin
    assert "\n       *** Update File:" in res.stdout or "\n       *** Add File:" in res.stdout


# ---------------------------------------------------------------- rounds, budgets, compact

def test_a_second_round_keeps_the_first_rounds_evidence():
    dump = read(MINI)
    first, status, _ = summarize_dump(dump, keep_recent=60, max_summary_tokens=2048)
    assert status is Status.SUMMARIZED
    second, status, _ = summarize_dump(first, keep_recent=16, max_summary_tokens=2048)
    assert status is Status.SUMMARIZED
    body1 = split_evidence(first["messages"][0]["content"])[1]
    body2 = split_evidence(second["messages"][0]["content"])[1]
    assert body1 and body2 and second["messages"][0]["content"].count("## evidence") == 1
    g1, g2 = parse_evidence(body1), parse_evidence(body2)
    for group, items in g1.items():
        for item in items:  # still true: nothing later says otherwise about the same thing
            assert item in g2[group] or any(i.split(" (")[0] == item.split(" (")[0] for i in g2[group]), (group, item)
    assert restore_conversation(second)[0] == dump


@pytest.mark.parametrize("budget", [64, 96, 300, 1024])
def test_summary_with_evidence_stays_within_the_budget(budget):
    """A budget of the user's own for the evidence keeps the summary within --max-summary-tokens;
    auto lets a long head's evidence add to it, by no more than it grants (0.5% of the head)."""
    counter = counter_for("cl100k_base")
    dump = read(MINI)
    for evidence_tokens in (evidence_room(budget, 0, None)[1] // 2, None):
        new, status, details = summarize_dump(dump, max_summary_tokens=budget, evidence_tokens=evidence_tokens)
        if status is not Status.SUMMARIZED:
            continue
        text = new["messages"][0]["content"]
        summary = text[text.index("## system_context"):text.index("\n\n[Compaction note")]
        assert counter.text(summary) == details["summary_tokens"]
        assert ("## evidence" in summary) == (details["evidence_tokens"] > 0)
        if evidence_tokens is not None:
            assert details["summary_tokens"] <= budget
            assert details["evidence_tokens"] <= evidence_tokens
        else:
            most, share = evidence_room(budget, counter.conversation(dump["messages"]), None)
            assert details["summary_tokens"] <= budget + most - share


def test_compact_uses_the_room_under_the_threshold():
    dump = conv(rounds=60, size=1500)
    counter = counter_for("cl100k_base")
    before = counter.conversation(dump["messages"])
    threshold = before // 3
    fit, status, details = compact_dump(dump, Policy(token_threshold=threshold))
    assert status is Status.SUMMARIZED
    after = counter.conversation(fit["messages"])
    assert 0.7 * threshold <= after <= threshold, (after, threshold)
    tier2 = next(r for r in details["rounds"] if r["tier"] == 2)
    assert tier2["keep_recent_fit"] is True and tier2["keep_recent"] > 16
    fixed, _, _ = compact_dump(dump, Policy(token_threshold=threshold, keep_recent=16))
    assert counter.conversation(fixed["messages"]) < 0.5 * after  # xun's fixed keep cuts far deeper
    assert restore_conversation(fit)[0] == dump


# ---------------------------------------------------------------- probes

def test_probes_are_found_only_in_what_a_model_is_sent():
    dump = read(MINI)
    messages = dump["messages"]
    probes = probes_of(messages[1:60])
    kinds = {p.kind for p in probes}
    assert {"task", "files_modified", "errors", "commands"} <= kinds
    whole = retention(probes, sent_text(messages))
    assert all(found == total for found, total in whole.values())  # everything is in the uncompacted run
    new, _, _ = summarize_dump(dump, keep_task=False, evidence=False)
    stored_only = {"messages": new["messages"][:1]}  # the archive holds the head; it is bookkeeping, not sent
    kept = retention(probes, sent_text(stored_only["messages"]))
    assert sum(f for f, _ in kept.values()) < sum(t for _, t in kept.values())


# ---------------------------------------------------------------- a model's summary checked

SAME = ("The conversation is about setting up a testing environment for the Spotter project, including checking "
        "for test files and importing the necessary modules.")


def test_an_answer_whose_sections_repeat_one_another_is_replaced_by_the_extractive_sections(runner, tmp_path):
    from chat_server import ChatServer, Reply, summary_text

    from compactor_cli.backends.sections import SECTIONS
    from compactor_cli.tiers.self_check import repeated_sections

    src = tmp_path / "in.jsonl"
    src.write_bytes(orjson.dumps(conv(rounds=12)) + b"\n")
    parrot = "\n\n".join(f"## {s}\n{SAME}" for s in SECTIONS)
    assert repeated_sections(parrot) == list(SECTIONS) and repeated_sections(summary_text()) == []
    for answer, repeats in ((parrot, True), (summary_text(), False)):
        out, report = tmp_path / "out.jsonl", tmp_path / "report.json"
        with ChatServer(lambda req, answer=answer: Reply(content=answer)) as server:
            res = runner.invoke(cli, ["summarize", "--backend", "openai", "--base-url", server.base_url, "--summary-model", "m",
                                      "--structured", "markdown", "--no-cache", "--keep-recent", "6", str(src),
                                      "-o", str(out), "--report", str(report)])
        assert res.exit_code == 0, res.stderr
        item = orjson.loads(report.read_bytes())["items"][0]
        written = orjson.loads(out.read_bytes().splitlines()[0])["messages"][0]["content"]
        assert item["status"] == "SUMMARIZED"
        if repeats:
            assert item["fallback"] == "extractive" and "repeat one another" in item["self_check"]
            assert SAME not in written and "earlier messages:" in written  # the extractive overview's counts
        else:
            assert "fallback" not in item and "overview of the planted facts" in written


def test_the_degenerate_recorded_answers_of_the_small_model_are_caught():
    """Of the 0.5B model's 22 readable recorded answers, those that copy sentences across most
    sections are caught; an answer that merely says (none) in several sections is not."""
    from compactor_cli.backends.sections import SECTIONS, read_answer, render_sections
    from compactor_cli.tiers.self_check import repeated_sections

    caught = readable = 0
    for line in (FIXTURES / "llm-answers" / "qwen2.5-coder-0.5b.jsonl").read_bytes().splitlines():
        ex = orjson.loads(line)
        choices = (ex.get("response") or {}).get("choices") or []
        if not choices:
            continue
        reading = read_answer(choices[0]["message"]["content"])
        if reading.sections:
            readable += 1
            caught += bool(repeated_sections(render_sections({s: reading.sections.get(s, "(none)") for s in SECTIONS})))
    assert readable == 22 and caught == 4
    assert repeated_sections(render_sections(dict.fromkeys(SECTIONS, "(none)"))) == []


def test_a_pending_task_is_one_no_later_action_took_up():
    msgs = [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Please fix the failing export job in the billing module."}]
    msgs.append({"role": "assistant", "content": "Next, I will run the export tests to see them fail.",
                 "tool_calls": [call("a", "bash", {"command": "pytest tests/test_export.py"})]})
    msgs.append({"role": "tool", "tool_call_id": "a", "content": "collected 40 items\n" + "test ok\n" * 600 + "1 failed"})
    msgs.append({"role": "assistant", "content": "Fixed the rounding. Remaining: update the changelog later."})
    msgs += [{"role": "user", "content": f"Thanks, {w} looks fine."} for w in ("that", "this", "it")]
    new, status, _ = summarize_dump({"messages": msgs}, keep_recent=1, keep_user_tokens=0)
    assert status is Status.SUMMARIZED
    pending = new["messages"][0]["content"].split("## pending_tasks\n", 1)[1].split("\n\n", 1)[0]
    assert "update the changelog" in pending and "run the export tests" not in pending


# ---------------------------------------------------------------- the section, as a property

_PATHS = st.from_regex(r"[a-z][a-z0-9_]{0,6}(/[a-z0-9_.-]{1,8}){0,3}\.(py|md|json)", fullmatch=True)
#: paths a file system allows and a reader of the section must not split: the separator, quotes,
#: a line break, non-ASCII
_ODD_PATHS = st.one_of(_PATHS, st.lists(st.sampled_from(["a", "b/", ", ", ",", '"', "'", " ", "\n", "é", "📄", ".md",
                                                          "\\", "- x: "]),
                                        min_size=1, max_size=8).map("".join).filter(lambda p: p.strip() == p and p))
_ITEMS = {
    "Files changed": st.tuples(_ODD_PATHS, st.sampled_from(["", " (created)", " (deleted)"])).map("".join),
    "Files read": _ODD_PATHS,
    "Error met": st.from_regex(r"[A-Za-z]+Error: [a-z ]{2,30}[a-z]", fullmatch=True),
    "Test run": _PATHS.map(lambda p: f"`pytest {p}` → exit 1"),
    "Command failed": _PATHS.map(lambda p: f"`make {p}` → exit 2"),
    "Acted on": st.from_regex(r"cancel_[a-z]{1,8} id=[A-Z0-9]{6}", fullmatch=True),
}


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries({g: st.lists(_ITEMS[g], max_size=12, unique_by=lambda i, g=g: item_key(g, i))
                              for g in GROUPS}), st.integers(min_value=0, max_value=400))
def test_the_section_keeps_its_budget_and_reads_back_what_it_listed(groups, budget):
    """Whatever the items and the budget: the body fits the budget, and reading it back (an
    anchored round) gives each group's listed items, no other and none altered."""
    counter = counter_for("cl100k_base")
    body = render_evidence(groups, budget, counter.text)
    assert counter.text(body) <= budget
    back = parse_evidence(body)
    for g in GROUPS:
        assert set(back[g]) <= set(groups[g]), (g, back[g], groups[g])
        listed = [i for i in groups[g] if i in back[g]]
        assert sorted(back[g]) == sorted(listed)


_SHELL_ALPHABET = st.sampled_from(list("ab-=/.>|;&$*~# \t\r\n\x0b\x0c\x1c\x85\xa0\u2028\u3000'\"\\") + ["cd", "sed -i"])


@settings(max_examples=3000, deadline=None)
@given(st.lists(_SHELL_ALPHABET, max_size=30).map("".join))
def test_shell_words_are_shlex_words(segment):
    """The shortcut for a command without quoting gives shlex's words (its whitespace is four
    characters, not str.split's), and shlex's own reading, or the fallback, where there is quoting."""
    try:
        expected = shlex.split(segment, comments=False)
    except ValueError:
        expected = segment.split()
    assert shell_words(segment) == expected


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(list("ab \t\n\u00a0\u3000\u2028\u0663") + ["1", "22", " " * 50, "\n" * 30, "x1 2y"]),
                max_size=120).map("".join))
@example(" " * 250 + "the task " * 10)  # the head folds to nothing: the whole text is folded
@example("1" * 230 + "\n" * 20 + " the task" * 10)
def test_a_harness_key_from_a_texts_head_is_the_key_of_the_whole_text(text: str) -> None:
    """_key folds only a long text's first characters when they make 60 (issue 32): the same key
    as folding the whole text, whatever whitespace and digit runs cross the cut."""
    import re

    assert harness._key(text) == re.sub(r"\d+", "#", " ".join(text.split()))[:60]
