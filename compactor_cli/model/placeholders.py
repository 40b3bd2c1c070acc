"""Placeholder templates (``--placeholder TEXT``): the text a compacted tool result becomes.

xun's placeholder (``conversation.PLACEHOLDER_TEMPLATE``) is the default and is always
recognised. A template of the user's own has the fields ``{id}`` (the key ``extract`` takes:
the tool-call ID, or ``ID#2`` for a reused one), ``{tool}`` (the name of the tool its call
named, ``unknown`` when no call names it), ``{lines}``, ``{chars}`` and ``{tokens}`` (of the
original content), ``{preview}`` or ``{preview:HEAD,TAIL}`` (its first and last lines and the
lines that carry its outcome: exit codes, the line closing a traceback, test failures) —
enough to write SWE-agent's "Old environment output: ({lines} lines
omitted)" or LangChain's "[cleared]", as long as ``{id}`` is in it: a placeholder that does not
name what it stands for cannot be fetched back, nor recognised, so such a template is refused.
A dump compacted with a template of its own records it in ``xcompact.placeholder_templates``,
so restore, extract, later runs and pages recognise its placeholders without being told.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The fields a template may use.
FIELDS = ("id", "tool", "lines", "chars", "tokens", "preview")
#: ``{preview}`` without its spec: the first and last this many lines of the result.
DEFAULT_PREVIEW = (5, 5)
UNKNOWN_TOOL = "unknown"
_NUMBER = r"[0-9]+"
#: What a key adds to the ID it names (``#k`` for the k-th result with that ID, ``~n`` an alias).
_KEY_SUFFIX = r"(?:#[0-9]+)?(?:~[0-9]+)?"


class TemplateError(ValueError):
    """A template that cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class PlaceholderTemplate:
    """A parsed template: render a placeholder, or tell whether a text is one naming an ID."""

    text: str
    fields: frozenset[str] = field(default=frozenset(), compare=False)
    pieces: tuple[tuple[str, str | None], ...] = field(default=(), compare=False, repr=False)
    preview_lines: tuple[int, int] = field(default=DEFAULT_PREVIEW, compare=False)  # {preview:HEAD,TAIL}

    @property
    def needs_tokens(self) -> bool:
        return "tokens" in self.fields

    def render(self, key: str, tool: str | None, text: Callable[[], str], chars: Callable[[], int],
               tokens: Callable[[], int], preview: Callable[[int, int], str] | None = None) -> str:
        """The placeholder for one result; ``text``, ``chars``, ``tokens`` and ``preview`` (of its
        original content: its first and last lines and the lines that carry its outcome) are
        called only when the template uses them."""
        values: dict[str, Any] = {"id": key, "tool": tool if tool else UNKNOWN_TOOL}
        if "preview" in self.fields:
            values["preview"] = preview(*self.preview_lines) if preview is not None else ""
        if "lines" in self.fields:
            values["lines"] = len(text().splitlines())
        if "chars" in self.fields:
            values["chars"] = chars()
        if "tokens" in self.fields:
            values["tokens"] = tokens()
        return "".join(lit + (str(values[name]) if name else "") for lit, name in self.pieces)

    def names(self, content: Any, cid: str) -> bool:
        """``content`` is a placeholder of this template naming ``cid`` or one of its keys."""
        if not isinstance(content, str):
            return False
        first, last = self.pieces[0][0], self.pieces[-1][0]  # parse_template ends the pieces with text
        if not (content.startswith(first) and content.endswith(last)) or cid not in content:
            return False
        return re.fullmatch(self._pattern(re.escape(cid) + _KEY_SUFFIX), content, re.DOTALL) is not None

    def _pattern(self, key_pattern: str) -> str:
        parts: list[str] = []
        seen_id = False
        for lit, name in self.pieces:
            parts.append(re.escape(lit))
            if name == "id":
                parts.append(f"(?P<key>{key_pattern})" if not seen_id else "(?P=key)")
                seen_id = True
            elif name in ("tool", "preview"):
                parts.append(".*?")
            elif name is not None:
                parts.append(_NUMBER)
        return "".join(parts)


def _formatter_parse(text: str) -> Any:
    import string  # only a template of the user's own is parsed

    return string.Formatter().parse(text)


def parse_template(text: str) -> PlaceholderTemplate:
    """A template checked: only the known fields, no format specs, ``{id}`` in it, and some
    text of its own (a bare ``{id}`` could not be told from a result that is just its ID)."""
    if not isinstance(text, str):
        raise TemplateError(f"a placeholder template is text, got {type(text).__name__}")
    pieces: list[tuple[str, str | None]] = []
    preview = DEFAULT_PREVIEW
    try:
        parsed = list(_formatter_parse(text))
    except ValueError as exc:
        raise TemplateError(f"placeholder template {text!r}: {exc} (write a literal brace as {{{{ or }}}})") from None
    for lit, name, spec, conversion in parsed:
        if name is not None and name not in FIELDS:
            shown = "{" + name + "}"
            raise TemplateError(f"placeholder template {text!r}: unknown field {shown}; the fields are "
                                + ", ".join("{" + f + "}" for f in FIELDS))
        if name == "preview" and spec and not conversion:
            m = re.fullmatch(r"(\d{1,4}),(\d{1,4})", spec)
            if m is None:
                raise TemplateError(f"placeholder template {text!r}: {{preview:{spec}}}: expected "
                                    "{preview:HEAD,TAIL}, two numbers of lines")
            preview = (int(m.group(1)), int(m.group(2)))
        elif spec or conversion:
            raise TemplateError(f"placeholder template {text!r}: {{{name}}} takes no format spec or conversion")
        pieces.append((lit, name))
    names = {n for _, n in pieces if n is not None}
    if "id" not in names:
        raise TemplateError(f"placeholder template {text!r} does not name the result: put {{id}} in it (the key "
                            "extract takes), so the model and restore can find the original")
    if not "".join(lit for lit, _ in pieces).strip():
        raise TemplateError(f"placeholder template {text!r} needs some text besides its fields, so a placeholder "
                            "can be told from a tool result")
    if pieces[-1][1] is not None:
        pieces.append(("", None))
    return PlaceholderTemplate(text, frozenset(names), tuple(pieces), preview)


_parsed: dict[str, PlaceholderTemplate] = {}


def template(text: str) -> PlaceholderTemplate:
    """``parse_template``, once per text."""
    t = _parsed.get(text)
    if t is None:
        t = _parsed[text] = parse_template(text)
    return t


#: What a cleared call's arguments become (--clear-tool-inputs): JSON, so the call stays valid
#: for servers that parse arguments, naming the store key of its result.
_INPUT_HEAD = '{"compacted":"[Arguments compacted, ID: '


def input_placeholder(key: str) -> str:
    import json  # json, not orjson: an ID may hold a lone surrogate (imported here: start-up is every run)

    return json.dumps({"compacted": f"[Arguments compacted, ID: {key}]"}, ensure_ascii=False, separators=(",", ":"))


def is_input_placeholder(arguments: Any) -> bool:
    return isinstance(arguments, str) and arguments.startswith(_INPUT_HEAD)


def cleared_input(value: Any) -> bool:
    """A native call's input object that is a cleared input's placeholder, parsed."""
    return (isinstance(value, dict) and len(value) == 1 and isinstance(value.get("compacted"), str)
            and value["compacted"].startswith("[Arguments compacted, ID: "))


#: What a cut argument value ends with (--truncate-inputs): how much was cut and the store key
#: of the call's whole arguments.
_CUT_MARK = "; the arguments are stored by xcompact, ID: "


def truncated_arguments(arguments: str, limit: int, key: str) -> str | None:
    """A call's arguments with every string value over ``limit`` characters cut to its first
    ``limit``, followed by a marker naming ``key`` (still JSON, so the call stays valid and legible);
    arguments that are not JSON are cut as text. None when nothing is cut or nothing is saved."""
    import json

    mark = f"…[{{}} more characters{_CUT_MARK}{key}]"
    try:
        value = json.loads(arguments)
    except ValueError:
        value = None
    if isinstance(value, (dict, list)):
        cut = [False]

        def walk(v: Any) -> Any:
            if isinstance(v, str) and len(v) > limit:
                cut[0] = True
                return v[:limit] + mark.format(len(v) - limit)
            if isinstance(v, dict):
                return {k: walk(x) for k, x in v.items()}
            if isinstance(v, list):
                return [walk(x) for x in v]
            return v

        new_value = walk(value)
        if not cut[0]:
            return None
        out = json.dumps(new_value, ensure_ascii=False, separators=(",", ":"))
    elif len(arguments) > limit:
        out = arguments[:limit] + mark.format(len(arguments) - limit)
    else:
        return None
    return out if len(out) < len(arguments) else None


def is_truncated_input(arguments: Any, key: str | None = None) -> bool:
    """``arguments`` (text, or a native input object) were cut by --truncate-inputs (naming ``key``)."""
    if not isinstance(arguments, str):
        import json

        try:
            arguments = json.dumps(arguments, ensure_ascii=False)
        except (TypeError, ValueError):
            return False
    return (_CUT_MARK + (key + "]" if key is not None else "")) in arguments
