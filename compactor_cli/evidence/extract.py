"""The evidence of an agent run, read deterministically from its messages: files created,
modified, deleted (Edit/Write/MultiEdit, ``apply_patch`` ``*** Add/Update/Delete File:``,
SWE-agent ``edit``/``create``/``str_replace_editor``, shell redirects, ``sed -i``, ``tee``,
``rm``/``mv``/``cp``/``touch``, ``open(…, "w")`` in scripts) and read, commands with their exit
code, the distinctive error lines met (the line closing a traceback, pytest ``E``/``FAILED``,
``error:``/``fatal:``, shell errors), tests run and their result, and the IDs that
state-changing tools acted on.

The summary's ``## evidence`` section is rendered from it for every backend, so no model has to
remember a path (evidence/section.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..model.conversation import call_parts, content_text
from .error_lines import ERROR_LINE_WHOLE as ERROR_LINE_WHOLE
from .error_lines import error_lines as error_lines
from .error_lines import is_error_line as is_error_line
from .section import GROUPS
from .shell_words import shell_words

SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "run_shell_command", "execute_bash", "terminal",
                         "run_command", "execute_command", "local_shell", "container.exec", "shell_command"})
EDIT_TOOLS = frozenset({"edit", "multiedit", "write", "notebookedit", "edit_file", "write_file", "create_file",
                        "replace", "write_to_file", "apply_diff", "insert_content", "search_replace"})
READ_TOOLS = frozenset({"read", "read_file", "view_file", "notebookread", "open_file", "view"})
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor"})
_MUTATING = re.compile(r"(?i)^(update|create|book|cancel|delete|modify|send|transfer|add|remove|submit|set|"
                       r"change|exchange|return|refund|close|open_ticket|assign|approve|reject)")
_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.M)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_REDIRECT = re.compile(r"(?<![0-9&<>=-])>>?\s*([^\s;&|<>()'\"`]+|'[^']+'|\"[^\"]+\")")
_PY_OPEN = re.compile(r"""open\(\s*(?:r|f)?['"]([^'"\n]+)['"]\s*,\s*(?:mode\s*=\s*)?['"][wax]""")
_SEGMENT = re.compile(r"&&|\|\||;|\||\n")
_EXIT = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>|Process exited with code (-?\d+)|"
                   r"^Exit code:? (-?\d+)|\bexit (?:code|status):? (-?\d+)", re.M | re.I)
_TEST_CMD = re.compile(r"(?<![\w-])(py\.?test(?![\w-])|tox|nox|runtests\.py|manage\.py test|-m unittest|unittest|"
                       r"npm (?:run )?test|yarn test|pnpm test|cargo test|go test|mvn test|gradle\w* test|"
                       r"make (?:test|check)|jest|vitest|phpunit|rspec|ctest)\b")
_NOT_A_TEST = re.compile(r"\s*(?:cd \S+ && )?(?:pip3?|python3? -m pip|uv|apt(?:-get)?|grep|rg|cat|ls|find|which|"
                         r"git|echo|sed|head|tail)\b")
_TEST_RESULT = re.compile(r"^=+ (.*\b(?:passed|failed|error|errors|skipped|no tests ran)\b.*?) (?:in [\d.]+s.*)?=+\s*$"
                          r"|^(Ran \d+ tests? in [\d.]+s)|^(OK(?: \([^)]*\))?|FAILED \([^)]*\))\s*$"
                          r"|^(test result: \w+\. \d+ passed; \d+ failed[^\n]*)"
                          r"|^(Tests?:\s+\d+ (?:passed|failed)[^\n]*)", re.M)
# a search or comparison whose exit status 1 means "no match" or "they differ", not a failure
_NO_MATCH = re.compile(r"(?:^|[;&|(]\s*|\s)(?:e|f|z|rip)?grep\b|(?:^|[;&|(]\s*)(?:rg|ag|ack|diff|cmp|test)\b|\[\s")
_CWD = re.compile(r"<cwd>([^<\n]+)</cwd>")
_PATHLIKE = re.compile(r"^[\w.~/@+-][\w./@+~-]*$")
MAX_ERRORS_PER_OUTPUT = 3
#: An error line is listed up to this many characters: its start names the error and the place;
#: the rest (an assertion's operands, a repr) is in the tool result, stored when it is compacted.
ERROR_CHARS = 120
_WORDS = re.compile(r"[A-Za-z]{2,}")


@dataclass
class Evidence:
    """What a run did, as ordered groups of short items (most recent last)."""

    groups: dict[str, dict[str, str]] = field(default_factory=lambda: {g: {} for g in GROUPS})
    root: str | None = None

    def add(self, group: str, key: str, text: str | None = None) -> None:
        items = self.groups[group]
        items.pop(key, None)  # moved to the end: the latest mention is the one that counts
        items[key] = text if text is not None else key

    def items(self, group: str) -> list[str]:
        return list(self.groups[group].values())

    def __bool__(self) -> bool:
        return any(self.groups.values())


def _looks_like_path(p: str) -> bool:
    if not p or len(p) > 240 or not _PATHLIKE.match(p) or p.startswith("-") or p in (".", "..", "/dev/null"):
        return False
    if p.startswith("/dev/") or p.startswith("/proc/") or p.isdigit():
        return False
    last = p.rstrip("/").rsplit("/", 1)[-1]
    return "/" in p or bool(re.search(r"\.[A-Za-z][\w]{0,7}$", last))


def json_object(args: str) -> Any:
    """A call's arguments read as JSON (None when they are not JSON)."""
    if not args.lstrip().startswith("{"):
        return None
    try:
        return orjson.loads(args)
    except orjson.JSONDecodeError:
        return None


def shell_text(name: str, args: str) -> tuple[str | None, str | None]:
    """(shell command, apply_patch text) carried by a call."""
    low = name.lower()
    if low == "apply_patch":
        return None, args
    obj = json_object(args)
    if isinstance(obj, dict):
        cmd = obj.get("command", obj.get("cmd"))
        if isinstance(cmd, list) and all(isinstance(c, str) for c in cmd):
            if cmd and cmd[0] == "apply_patch":
                return None, cmd[1] if len(cmd) > 1 else ""
            if len(cmd) >= 3 and cmd[0] in ("bash", "sh", "zsh") and cmd[1] in ("-lc", "-c"):
                cmd = cmd[2]
            else:
                cmd = " ".join(cmd)
        if isinstance(cmd, str):
            if "*** Begin Patch" in cmd and "apply_patch" in cmd:
                return cmd, cmd[cmd.index("*** Begin Patch"):]
            return (cmd, None) if low in SHELL_TOOLS or "command" in obj or "cmd" in obj else (None, None)
        return None, None
    if low in SHELL_TOOLS and args.strip():
        return args, None
    return None, None


def _strip_heredocs(cmd: str) -> str:
    """The command without the bodies of its here-documents (code whose ``>`` is no redirect)."""
    lines = cmd.split("\n")
    out, ending = [], None
    for line in lines:
        if ending is not None:
            if line.strip() == ending:
                ending = None
            continue
        out.append(line)
        m = _HEREDOC.search(line)
        if m:
            ending = m.group(2)
    return "\n".join(out)


def _shell_effects(cmd: str, ev: Evidence, current: list[str]) -> None:
    """Files a shell command changes or reads (SWE-agent's ``open``/``create``/``edit`` too)."""
    body = _strip_heredocs(cmd)
    first = body.lstrip().split("\n", 1)[0]
    words = first.split()
    if words and words[0] in ("open", "create") and len(words) >= 2 and _looks_like_path(words[1].strip("\"'")):
        path = words[1].strip("\"'")
        current[:] = [path]
        if words[0] == "create":
            ev.add("Files changed", path, f"{path} (created)")
        else:
            ev.add("Files read", path)
        return
    if words and words[0] == "edit" and current:
        ev.add("Files changed", current[0])
        return
    for m in _PY_OPEN.finditer(cmd):
        if _looks_like_path(m.group(1)):
            ev.add("Files changed", m.group(1))
    for segment in _SEGMENT.split(body):
        seg = segment.strip()
        if not seg:
            continue
        for m in _REDIRECT.finditer(seg):
            target = m.group(1).strip("'\"")
            if _looks_like_path(target):
                ev.add("Files changed", target)
        toks = [t for t in shell_words(_REDIRECT.sub(" ", seg)) if t]
        while toks and (("=" in toks[0] and not toks[0].startswith("-")) or toks[0] in ("sudo", "env", "time", "cd")):
            toks = toks[2:] if toks[0] == "cd" else toks[1:]
        if not toks:
            continue
        prog, rest = toks[0].rsplit("/", 1)[-1], toks[1:]
        paths = [t for t in rest if not t.startswith("-") and _looks_like_path(t)]
        if (prog == "sed" and any(t.startswith("-i") or t == "--in-place" for t in rest)) or prog == "tee":
            for p in paths:
                ev.add("Files changed", p)
        elif prog in ("rm", "unlink"):
            for p in paths:
                ev.add("Files changed", p, f"{p} (deleted)")
        elif prog == "mv" and len(paths) >= 2:
            ev.add("Files changed", paths[0], f"{paths[0]} (moved to {paths[-1]})")
            ev.add("Files changed", paths[-1])
        elif prog in ("cp", "touch") and paths:
            ev.add("Files changed", paths[-1], f"{paths[-1]} (created)")
        elif prog in ("cat", "nl", "head", "tail", "less", "more", "bat", "sed", "view") and ">" not in seg:
            for p in paths:
                ev.add("Files read", p)


def _patch_effects(patch: str, ev: Evidence) -> None:
    for m in _PATCH_FILE.finditer(patch):
        if m.group(3):
            ev.add("Files changed", m.group(3).strip())
            continue
        kind, path = m.group(1), m.group(2).strip()
        ev.add("Files changed", path, {"Add": f"{path} (created)", "Delete": f"{path} (deleted)"}.get(kind, path))


def _tool_effects(name: str, args: str, ev: Evidence, current: list[str]) -> None:
    low = name.lower()
    obj = json_object(args)
    if not isinstance(obj, dict):
        return
    path = next((obj[k] for k in ("file_path", "path", "notebook_path", "filename", "target_file")
                 if isinstance(obj.get(k), str)), None)
    if low in EDITOR_TOOLS and path:
        sub = obj.get("command")
        if sub == "view":
            ev.add("Files read", path)
        elif sub == "create":
            ev.add("Files changed", path, f"{path} (created)")
        else:
            ev.add("Files changed", path)
        current[:] = [path]
    elif low in ("create", "create_file") and path:
        ev.add("Files changed", path, f"{path} (created)")
        current[:] = [path]
    elif low in EDIT_TOOLS and path:
        ev.add("Files changed", path)
    elif low in ("edit", "insert") and current:  # SWE-agent: edits the file open in its editor
        ev.add("Files changed", current[0])
    elif (low in READ_TOOLS or low == "open") and path:
        ev.add("Files read", path)
        current[:] = [path]
    elif _MUTATING.match(name) and low not in SHELL_TOOLS:
        ids = [f"{k}={v}" for k, v in obj.items() if isinstance(v, (str, int)) and not isinstance(v, bool)
               and (k == "id" or k.endswith("_id") or k.endswith("_ids"))][:3]
        if ids:
            ev.add("Acted on", f"{name} {' '.join(ids)}")


def output_text(content: Any) -> str:
    """A tool result's text; a Codex ``{"output": …, "metadata": {"exit_code": …}}`` result read
    as its output with the exit code first."""
    text = content_text(content)
    if text.startswith('{"output"'):
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
        if isinstance(obj, dict) and isinstance(obj.get("output"), str):
            meta = obj.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            return (f"Exit code: {code}\n" if isinstance(code, int) else "") + obj["output"]
    return text


#: what an ``_EXIT`` match contains, lowered: a text without any of them has none (issue 32: the
#: case-blind search of a tool output's head and tail was half of the evidence's time)
_EXIT_WORDS = ("<returncode>", "process exited with code", "exit code", "exit status")
#: The characters a case-blind match equates with an ASCII letter that ``str.lower`` does not
#: turn into it (the dotless i, the dotted capital I, the long s): the only three in Unicode
#: (``tests/test_line_tests.py`` checks every code point).
_FOLD_TO_ASCII = {"ı": "i", "İ": "i", "ſ": "s"}
_FOLD = str.maketrans(_FOLD_TO_ASCII)


def _exit_search(window: str) -> re.Match[str] | None:
    """``_EXIT.search(window)``, after a substring test on the window lowered (with the three
    characters ``str.lower`` leaves apart folded too, where there are any)."""
    low = window.lower()
    if not window.isascii() and any(map(window.__contains__, _FOLD_TO_ASCII)):
        low = window.translate(_FOLD).lower()
    if not any(map(low.__contains__, _EXIT_WORDS)):
        return None
    return _EXIT.search(window)


def exit_code(text: str) -> int | None:
    m = _exit_search(text[:4000]) or _exit_search(text[-2000:])
    if not m:
        return None
    return int(next(g for g in m.groups() if g is not None))


def _test_result(text: str, code: int | None) -> str:
    found = [next(g for g in m.groups() if g) for m in _TEST_RESULT.finditer(text[-6000:])]
    if found:
        return "; ".join(dict.fromkeys(" ".join(f.split()) for f in found[-2:]))
    return f"exit {code}" if code is not None else "no result shown"


def _short(cmd: str, n: int = 140) -> str:
    one = " ".join(cmd.split("\n", 1)[0].split())
    return one if len(one) <= n and "\n" not in cmd.strip() else one[: n - 1].rstrip() + "…"


def evidence_of(messages: list[dict[str, Any]], root: str | None = None) -> Evidence:
    """The evidence of ``messages`` (OpenAI-form messages of a dump, in order)."""
    ev = Evidence(root=root or project_root(messages))
    pending: dict[str, tuple[str, str | None]] = {}  # tool_call_id -> (tool name, shell command)
    current: list[str] = []  # SWE-agent's open file
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "assistant":
            for call in m.get("tool_calls") or ():
                parts = call_parts(call)
                if parts is None:
                    continue
                name, args = parts
                cmd, patch = shell_text(name, args)
                if patch is not None:
                    _patch_effects(patch, ev)
                if cmd is not None and patch is None:
                    _shell_effects(cmd, ev, current)
                elif cmd is None and patch is None:
                    _tool_effects(name, args, ev, current)
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    pending[call["id"]] = (name, cmd if patch is None else None)
        elif role == "tool":
            call_id = m.get("tool_call_id")
            name, cmd = pending.get(call_id if isinstance(call_id, str) else "", ("", None))
            text = output_text(m.get("content"))
            code = exit_code(text)
            for line in error_lines(text)[-MAX_ERRORS_PER_OUTPUT:]:
                if len(_WORDS.findall(line)) >= 2:  # "E ^" is pytest's caret, not an error
                    ev.add("Error met", line, line if len(line) <= ERROR_CHARS else line[:ERROR_CHARS - 1] + "…")
            if cmd is not None:
                if _TEST_CMD.search(_strip_heredocs(cmd)) and not _NOT_A_TEST.match(cmd):
                    ev.add("Test run", _short(cmd), f"`{_short(cmd)}` → {_test_result(text, code)}")
                elif code not in (None, 0) and not (code == 1 and _NO_MATCH.search(cmd)):
                    ev.add("Command failed", _short(cmd), f"`{_short(cmd)}` → exit {code}")
    if ev.root:
        _relative(ev, ev.root)
    for key in list(ev.groups["Files read"]):
        if key in ev.groups["Files changed"]:
            del ev.groups["Files read"][key]
    return ev


def project_root(messages: list[dict[str, Any]]) -> str | None:
    """The project's directory when the run names one: Codex's ``<cwd>``, SWE-bench's ``/testbed``."""
    for m in messages[:6]:
        if isinstance(m, dict) and m.get("role") in ("user", "developer", "system"):
            found = _CWD.search(content_text(m.get("content"))[:4000])
            if found:
                return found.group(1).strip().rstrip("/")
    for m in messages[:40]:
        if isinstance(m, dict) and "/testbed" in str(m.get("content") or "")[:20000]:
            return "/testbed"
    return None


def _relative(ev: Evidence, root: str) -> None:
    prefix = root.rstrip("/") + "/"
    for group in ("Files changed", "Files read"):
        fixed: dict[str, str] = {}
        for key, text in ev.groups[group].items():
            new_key = key[len(prefix):] if key.startswith(prefix) else key
            fixed.pop(new_key, None)
            fixed[new_key] = text.replace(prefix, "")
        ev.groups[group] = fixed
