"""Options pinned in ``[tool.xcompact]`` of pyproject.toml (in the working directory) or in a
file given with ``--config``; command-line flags win.

A pyproject.toml merely found in the working directory (a cloned repository, a dataset folder
someone else prepared) is trusted with less than a file the user names: it cannot set the
options of ``NEEDS_TRUST`` (they load code, choose where credentials or text are sent, or choose
which files are written); naming it with ``--config`` trusts it. ``in-place`` comes from the
command line only, whatever the file.

Keys are option names without the dashes (``token-threshold`` or ``token_threshold``).
``[tool.xcompact]`` applies to every command that has the option; ``[tool.xcompact.compact]``
(and so on) to one command only, and wins. A ``--config`` file may hold the same tables, or
the keys at top level with ``[compact]``-style tables."""

from __future__ import annotations

import os
from typing import Any

import click

COMMANDS = ("toolcall", "summarize", "compact", "restore", "validate", "extract")


def _load_toml(path: str) -> dict[str, Any]:
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef, unused-ignore]
        except ModuleNotFoundError:
            raise click.UsageError(f"reading {path} needs Python 3.11+ (or the tomli package)") from None
    try:
        with open(path, "rb") as fh:
            return dict(tomllib.load(fh))
    except OSError as exc:
        raise click.UsageError(f"cannot read config {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise click.UsageError(f"config {path} is not UTF-8 text (byte {exc.start}): is it the right file?") from None
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise click.UsageError(f"config {path} is not valid TOML: {exc}") from None


def find_config(explicit: str | None) -> tuple[str | None, dict[str, Any]]:
    """(path, the xcompact table) from --config, else ./pyproject.toml if it has [tool.xcompact]."""
    if explicit:
        data = _load_toml(explicit)
        table = data.get("tool", {}).get("xcompact", data) if isinstance(data.get("tool"), dict) else data
        if not isinstance(table, dict):
            raise click.UsageError(f"{explicit}: [tool] xcompact must be a table ([tool.xcompact]), "
                                   f"not {type(table).__name__}")
        return explicit, table
    if os.path.isfile("pyproject.toml"):
        tool = _load_toml("pyproject.toml").get("tool", {})
        table = tool.get("xcompact") if isinstance(tool, dict) else None
        if table is not None and not isinstance(table, dict):
            raise click.UsageError(f"{os.path.abspath('pyproject.toml')}: [tool] xcompact must be a table "
                                   f"([tool.xcompact]), not {type(table).__name__}")
        if isinstance(table, dict):
            return os.path.abspath("pyproject.toml"), table
    return None, {}


#: Options that change or remove users' files: never taken from a config file alone (a
#: pyproject.toml in the working directory must not rewrite the input of a command that asked
#: for stdout); the command line must say them.
DESTRUCTIVE = ("in_place",)

#: Options a config file merely found in the working directory may not set, by click parameter
#: name, with the values it may still give: they import code (a strategy or backend plug-in),
#: choose where credentials or text are sent (the server, the prompt file, a Ray cluster), or
#: choose which files are written (outputs, report, page, sidecar, the summary cache). The
#: command line or a file named with --config sets them.
NEEDS_TRUST: dict[str, tuple[Any, ...]] = {
    "strategy": (), "backend": ("auto", "extractive"), "base_url": (), "prompt_file": (), "engine": ("local",),
    "address": (), "output": (), "report_path": (), "html": (), "api_ready": (), "cache_dir": (),
}


def _checked(command: click.Command, values: dict[str, Any], source: str) -> dict[str, Any]:
    """Each config value converted by its option's own type, so a wrong type is a usage error
    naming the file and the key, never a traceback later."""
    ctx = click.Context(command)
    params = {p.name: p for p in command.params}
    for name, value in values.items():
        param = params[name]
        flag = getattr(param, "is_flag", False)
        try:
            if flag and not isinstance(value, bool):
                raise click.BadParameter(f"expected true or false, got {value!r}")
            if isinstance(value, (list, dict)) and not getattr(param, "multiple", False) and param.nargs == 1:
                raise click.BadParameter(f"expected one value, got {type(value).__name__} {value!r}")
            if isinstance(param.type, click.types.IntParamType) and isinstance(value, (bool, float)):
                raise click.BadParameter(f"expected an integer, got {value!r}")
            param.type_cast_value(ctx, value)
        except (click.BadParameter, TypeError, ValueError) as exc:
            message = exc.format_message() if isinstance(exc, click.BadParameter) else str(exc)
            raise click.UsageError(f"{source}: {name.replace('_', '-')} = {value!r}: {message}") from None
    return values


def default_map_for(command: click.Command, table: dict[str, Any], source: str) -> dict[str, Any]:
    """Click defaults for ``command``: shared keys it knows, then its own table."""
    names: dict[str, str] = {}
    for param in command.params:
        for opt in getattr(param, "opts", []):
            if opt.startswith("--"):
                names[opt[2:].replace("-", "_")] = param.name or ""
    result: dict[str, Any] = {}
    own = table.get(command.name or "", {})
    for key, value in table.items():
        if key in COMMANDS:
            continue
        norm = key.replace("-", "_")
        if norm in names:
            result[names[norm]] = value
    if not isinstance(own, dict):
        raise click.UsageError(f"{source}: [{command.name}] must be a table")
    for key, value in own.items():
        norm = key.replace("-", "_")
        if norm not in names:
            raise click.UsageError(f"{source}: {command.name} has no option {key!r} "
                                   f"(known: {', '.join(sorted(names))})")
        result[names[norm]] = value
    unknown = [k for k in table if k not in COMMANDS and not any(
        k.replace("-", "_") in _option_keys(c) for c in _all_commands(command))]
    if unknown:
        raise click.UsageError(f"{source}: unknown option {unknown[0]!r} in [tool.xcompact]")
    return _checked(command, result, source)


def _all_commands(command: click.Command) -> list[click.Command]:
    ctx = click.get_current_context(silent=True)
    group = ctx.find_root().command if ctx is not None else None
    if isinstance(group, click.Group):
        return list(group.commands.values())
    return [command]


def _option_keys(command: click.Command) -> set[str]:
    return {opt[2:].replace("-", "_") for p in command.params for opt in getattr(p, "opts", []) if opt.startswith("--")}


def load_config_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Eager --config: set the command's defaults before its other options are read."""
    source, table = find_config(value)
    if source is not None:
        defaults = default_map_for(ctx.command, table, source)
        for name in DESTRUCTIVE:  # checked in cli._run: refused unless the command line says it too
            if defaults.pop(name, False):
                ctx.meta.setdefault("xcompact_config_destructive", []).append((name, source))
        if value is None:  # found, not named: what needs trust never becomes a default (cli.launch refuses it)
            for name in [n for n in defaults if n in NEEDS_TRUST and defaults[n] not in NEEDS_TRUST[n]]:
                del defaults[name]
                ctx.meta.setdefault("xcompact_config_untrusted", []).append(name)
        ctx.default_map = {**(ctx.default_map or {}), **defaults}
    ctx.meta["xcompact_config"] = source
    return source


def untrusted_message(command: click.Command, names: list[str], source: str) -> str:
    """One line refusing the keys ``names`` of the found config ``source``, saying how to opt in."""
    flags = {p.name: max((o for o in getattr(p, "opts", []) if o.startswith("--")), key=len, default=p.name)
             for p in command.params}
    keys = ", ".join(str(flags.get(n) or n).lstrip("-") for n in names)
    return (f"{source} was found in the working directory, not named with --config, so it may not set {keys} "
            "(options that load code, choose where data is sent or which files are written); give "
            f"{'it' if len(names) == 1 else 'them'} on the command line, or trust the file with "
            f"--config {os.path.basename(source)}")
