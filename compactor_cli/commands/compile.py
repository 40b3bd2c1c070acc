"""A command's option values compiled to what the run needs, for the command line and the batch
function alike, over the one declaration of the options (options.py) and the command's class
(registry.py): ``build`` (from click's values), ``configure``/``settings_for`` (from keywords),
``option_defaults``, and the click pieces (``options_of``, ``click_command``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click

from ..errors import UsageError
from .configure import Configured
from .options import RUN_OPTIONS, Decorator, Slot, apply_slots, slot_params
from .registry import command_class
from .settings import Settings


def _command_slots(command: str) -> list[Slot]:
    """A record command's options, in --help order (its class's ``slots``, registry.py)."""
    return command_class(command).slots()


def options_of(command: str, config: Decorator | None = None) -> Decorator:
    """A decorator adding ``command``'s options to a click command function (``config``: the
    command line's --config option, put in its slot)."""
    return apply_slots(_command_slots(command), config)


def click_command(command: str) -> click.Command:
    """A click command with ``command``'s options (no --config, no callback): for filling in
    defaults and checking values exactly as the command line does."""
    return click.Command(command, params=slot_params(_command_slots(command)))


def _flag_names(command: str) -> dict[str, Any]:
    """{option name as a Python identifier (the long flag without dashes): click parameter}."""
    names: dict[str, Any] = {}
    for param in click_command(command).params:
        if not isinstance(param, click.Option) or param.name in RUN_OPTIONS or param.name is None \
                or not param.expose_value:
            continue
        longs = [o for o in param.opts if o.startswith("--")]
        names[(max(longs, key=len) if longs else param.opts[0]).lstrip("-").replace("-", "_")] = param
    return names


def option_defaults(command: str) -> dict[str, Any]:
    """The command's record options and their defaults, as ``settings_for`` takes them."""
    ctx = click.Context(click_command(command))
    return {name: param.process_value(ctx, param.get_default(ctx)) for name, param in _flag_names(command).items()}


def configure(command: str, **options: Any) -> Configured:
    """``settings_for`` with the report's parameters and the warnings the CLI would print."""
    params = _flag_names(command)
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise UsageError(f"{command} has no option {', '.join(unknown)}; its options are {', '.join(sorted(params))}")
    ctx = click.Context(click_command(command))
    given = {name: value for name, value in options.items() if value is not None}  # None: the default
    values: dict[str, Any] = {}
    for name, param in params.items():
        if name in given:
            _check_kind(name, param, given[name])
        try:
            values[param.name] = param.process_value(ctx, given[name] if name in given else param.get_default(ctx))
        except click.BadParameter as exc:
            raise UsageError(exc.format_message()) from None
        except (TypeError, ValueError, AttributeError) as exc:  # a value click cannot even read
            raise UsageError(f"{name}: {given.get(name)!r} is not a value this option takes ({exc})") from None
    return build(command, values, explicit={params[n].name for n in given})


def _check_kind(name: str, param: Any, value: Any) -> None:
    """A keyword's value of the kind its option takes, before click converts it: click reads
    command-line text, so it would take 4.5 or True as the count 4 or 1 and "bash" for a list as
    its letters."""
    if getattr(param, "multiple", False):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
            raise UsageError(f"{name}: expected a list, got {type(value).__name__}")
        return
    if getattr(param, "nargs", 1) > 1 and not isinstance(value, (list, tuple)):
        raise UsageError(f"{name}: expected {param.nargs} values as a tuple, got {type(value).__name__} {value!r}")
    if getattr(param, "is_flag", False) and isinstance(param.type, click.types.BoolParamType):
        kind: tuple[type, ...] = (bool,)
    elif isinstance(param.type, click.types.IntParamType):
        kind = (int,)
    elif isinstance(param.type, click.types.FloatParamType):
        kind = (int, float)
    else:
        return
    if isinstance(value, bool) is not (kind == (bool,)) or not isinstance(value, kind):
        raise UsageError(f"{name}: expected {' or '.join(k.__name__ for k in kind)}, got {type(value).__name__} "
                         f"{value!r}")


def settings_for(command: str, **options: Any) -> Settings:
    """The ``Settings`` the CLI builds for ``xcompact COMMAND`` with these options (long flag names,
    dashes as underscores; omitted ones take the CLI's defaults). Raises ``UsageError`` for a value
    or combination the CLI refuses."""
    return configure(command, **options).settings


def build(command: str, values: dict[str, Any], explicit: Iterable[str] = (),
          config_file: str | None = None) -> Configured:
    """Settings and report parameters from click's parameter values (what the CLI passes: every
    option of the command, by its click parameter name, already converted). ``explicit``: the
    parameters the user gave (openai-only options given to the extractive backend are refused);
    ``config_file``: the config file the other values may come from (for the messages)."""
    from dataclasses import replace

    configured = command_class(command).build(values, set(explicit), config_file)
    history = values.get("claude_code_history") or "since-compaction"
    if history != "since-compaction":  # recorded only when not the default (journal keys, reports unchanged)
        configured = Configured(command, replace(configured.settings, claude_code_history=history),
                                {**configured.parameters, "claude_code_history": history}, configured.warnings)
    fmt = values.get("input_format") or "auto"
    if fmt == "auto":
        return configured

    return Configured(command, replace(configured.settings, input_format=fmt),
                      {**configured.parameters, "from": fmt}, configured.warnings)


