"""Superseded reads (``--dedup-reads``): an earlier read of a file that a later read repeats.

Agents re-read files: in one OpenCode store 46% of the Read tool's bytes were re-reads, but only
8% of the repeated reads were of the same range. So a read is superseded only by a later read of
the same file, the same range (the call's other arguments, or the same shell command, in the
same working directory) and the same content; a different range or a file changed in between
gives another content, and is left alone. The later read stays as it is: the earlier one
becomes a placeholder naming it, its original stored as every cleared result's.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

from ..evidence.extract import EDITOR_TOOLS, READ_TOOLS, json_object, output_text, shell_text
from ..evidence.shell_words import shell_words
from .store import answered_calls

#: Programs whose output is a file's content (or a range of its lines).
_READERS = frozenset({"cat", "nl", "head", "tail", "sed", "bat"})
#: What makes a shell command more than one read: sequencing, redirects, substitutions.
_NOT_ONE_READ = re.compile(r";|&&|\|\||[<>`]|\$\(|\n")
_PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "target_file")
#: Codex's exec_command headers, which differ between two runs of the same command.
_RUN_HEADER = re.compile(r"\A(?:Chunk ID: [^\n]*\n)?(?:Wall time: [^\n]*\n)?")

ReadKey = tuple[str, str]


def read_key(name: str, arguments: str) -> ReadKey | None:
    """(path, range) of a call that reads one file, or None: a Read-like tool's path and its
    other arguments, or one ``cat``/``nl``/``head``/``tail``/``sed -n`` command (possibly piped
    into another of them) with its working directory."""
    low = name.lower()
    obj = json_object(arguments)
    if isinstance(obj, dict) and (low in READ_TOOLS or (low in EDITOR_TOOLS and obj.get("command") == "view")):
        key = next((k for k in _PATH_KEYS if isinstance(obj.get(k), str)), None)
        if key is None:
            return None
        rest = {k: v for k, v in obj.items() if k != key}
        return obj[key], orjson.dumps(rest, option=orjson.OPT_SORT_KEYS).decode()
    cmd, _patch = shell_text(name, arguments)
    if cmd is None:
        return None
    path = _one_read(cmd)
    if path is None:
        return None
    workdir = obj.get("workdir") if isinstance(obj, dict) else None
    return path, " ".join(cmd.split()) + (f" @ {workdir}" if isinstance(workdir, str) else "")


def _one_read(cmd: str) -> str | None:
    """The one file a shell command reads, when all it does is read it."""
    if _NOT_ONE_READ.search(cmd.strip()):
        return None
    paths: list[str] = []
    for segment in cmd.split("|"):
        toks = shell_words(segment.strip())
        program = toks[0].rsplit("/", 1)[-1] if toks else ""
        if program not in _READERS:
            return None
        if program == "sed" and any(t.startswith("-i") or t == "--in-place" for t in toks[1:]):
            return None
        args = [t for t in toks[1:] if not t.startswith("-")]
        if program == "sed" and args:
            args = args[1:]  # the script
        elif program in ("head", "tail"):
            args = [t for t in args if not t.isdigit()]  # head -n 20 FILE
        paths.extend(args)
    return paths[0] if len(paths) == 1 else None


def content_digest(content: Any) -> bytes:
    """What two reads must share to be the same: the output (a Codex result's exit code and
    output, without the headers that differ between runs), hashed."""
    text = _RUN_HEADER.sub("", output_text(content))
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def superseded_reads(messages: list[dict], call_name: Any) -> dict[int, tuple[int, str]]:
    """Index of each tool result that a later result repeats (same file, range and content) ->
    (the index of the last such result, the file's path). ``call_name(call)`` names a call's tool."""
    last: dict[tuple[str, str, bytes], int] = {}
    groups: dict[tuple[str, str, bytes], list[int]] = {}
    for i, (mi, ci) in sorted(answered_calls(messages).items()):
        call = messages[mi]["tool_calls"][ci]
        fn = call.get("function") if isinstance(call, dict) else None
        name = call_name(call)
        if name is None or not isinstance(fn, dict) or not isinstance(fn.get("arguments"), str):
            continue
        key = read_key(name, fn["arguments"])
        content = messages[i].get("content")
        if key is None or not isinstance(content, (str, list)) or not content:
            continue
        full = (key[0], key[1], content_digest(content))
        last[full] = i
        groups.setdefault(full, []).append(i)
    return {i: (last[k], k[0]) for k, members in groups.items() if len(members) > 1 for i in members[:-1]}


def superseded_template(later_id: str, path: str) -> str:
    """The placeholder template of a superseded read: it names the later read (by its call's
    ID, which the model sees) and the file, braces escaped for the template syntax."""
    shown = " ".join((path if len(path) <= 200 else path[:199] + "…").split())

    def literal(text: str) -> str:
        return text.replace("{", "{{").replace("}", "}}")

    return (f"[Superseded read: the later read of {literal(shown)} (tool call {literal(later_id)}) returned the "
            "same content. Original stored by xcompact, ID: {id}]")
