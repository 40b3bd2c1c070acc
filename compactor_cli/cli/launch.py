"""From click's values to the engine and back to an exit code: the typed options are built
once here (commands.configure) and handed on; what the engine raises becomes a one-line error and
an exit code. Progress goes to stderr, only for a person watching a terminal."""

from __future__ import annotations

import re
import sys
from typing import Any

import click

from ..engine.report import EXIT_FAILED, EXIT_STDOUT_CLOSED
from ..errors import OutputError, UsageError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _config_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from .config_file import load_config_callback

    return load_config_callback(ctx, param, value)


#: --config: the command line's alone (the batch function reads no file); the commands' option
#: lists (commands/options.py) leave a slot for it.
config_option = click.option("--config", metavar="FILE", is_eager=True, expose_value=False, callback=_config_callback,
                             help="TOML file of option defaults ([tool.xcompact] tables), trusted with every option "
                                  "but --in-place [default: ./pyproject.toml, which may not set the options that "
                                  "load code, choose the server or prompt file, or the files written].")


#: What a terminal would act on or break a line at: C0 controls but tab, DEL, C1 controls, and
#: the Unicode line and paragraph separators (a file name or a data value could otherwise recolour
#: the terminal, move its cursor or forge a log line of its own).
_TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def terminal_safe(text: str) -> str:
    """``text`` with what a terminal would act on written as escapes (``\\x1b``, ``\\n``)."""
    if not _TERMINAL_UNSAFE.search(text):
        return text
    return _TERMINAL_UNSAFE.sub(lambda m: {"\n": "\\n", "\r": "\\r"}.get(m.group(), f"\\x{ord(m.group()):02x}"
                                if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}"), text)


def emit(line: str) -> None:
    """One line on stderr, made safe for a terminal: every progress, warning, error and summary
    line goes through here."""
    click.echo(terminal_safe(line), err=True)


class _Bar:
    """A tqdm bar over bytes (rate, ETA) that also counts conversations."""

    def __init__(self, total: int, desc: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total or None, desc=terminal_safe(desc), unit="B", unit_scale=True, unit_divisor=1024,
                        file=sys.stderr, leave=False, dynamic_ncols=True)
        self.conversations = 0

    def update(self, nbytes: int) -> None:
        self.conversations += 1
        self.bar.update(nbytes)
        if self.conversations % 50 == 0:
            self.bar.set_postfix_str(f"{self.conversations} conv", refresh=False)

    def close(self) -> None:
        self.bar.close()


def progress_for(quiet: bool) -> Any:
    """Progress on stderr, only for a person watching a terminal."""
    if quiet or not sys.stderr.isatty():
        return None
    return _Bar


def run(settings: Any, io: dict[str, Any], parameters: dict[str, Any]) -> None:
    """A record command's options, typed, to the engine (local or Ray)."""
    from ..commands.settings import RunIO

    ctx = click.get_current_context()
    for name, source in ctx.meta.get("xcompact_config_destructive", []):
        if not io.get(name):
            flag = "--" + name.replace("_", "-")
            raise click.UsageError(f"{source} sets {name.replace('_', '-')} = true: {flag} rewrites inputs, so it is "
                                   f"never taken from a config file; give {flag} on the command line (or remove "
                                   "it from the file)")
    announce_server(settings)
    if io.get("engine") == "ray":
        _run_ray(settings, io, parameters)
    if io.get("address"):
        raise click.UsageError("--address names a Ray cluster: use it with --engine ray")
    run_io(settings, RunIO(inputs=tuple(io["inputs"]), output=io.get("output"), in_place=io.get("in_place", False),
                           report_path=io.get("report_path"), html=io.get("html"), quiet=io.get("quiet", False),
                           warnings=io.get("warnings") or "all", jobs=io.get("jobs") or 0,
                           resume=io.get("resume", False),
                           parameters={**parameters, "config": ctx.meta.get("xcompact_config")},
                           api_ready=io.get("api_ready"), sidecar=io.get("sidecar")))


def run_io(settings: Any, io: Any) -> None:
    """Run on this machine and exit with the run's code; map what the engine raises to exit codes."""
    from ..engine.executors import WorkerDiedError
    from ..engine.local import run_command, silence_stdout
    from ..engine.report import ReportError
    from ..files.sinks import OutputLocked, StdoutClosed

    try:
        code = run_command(settings, io, emit, progress_for(io.quiet))
    except StdoutClosed:  # the report went to stdout and its reader left
        silence_stdout()
        sys.exit(EXIT_STDOUT_CLOSED)
    except (UsageError, OutputError) as exc:
        # a state conflict (another run's report or output) or a dead worker: exit 1, not usage
        if isinstance(exc, (ReportError, OutputLocked, WorkerDiedError)):
            emit(f"error: {exc}")
            sys.exit(EXIT_FAILED)
        raise click.UsageError(str(exc)) from None
    except OSError as exc:  # outside any one input (e.g. the tokenizer's cache under a full disk or ulimit -f)
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        emit(f"error: a file this run needs cannot be read or written: {exc.strerror or exc}{where}; "
              "free space or raise the limit and run again")
        sys.exit(EXIT_FAILED)
    sys.exit(code)


def _run_ray(settings: Any, io: dict[str, Any], parameters: dict[str, Any]) -> None:
    """--engine ray: the same records through the same step on a Ray cluster (compactor_cli.ray)."""
    for name, flag, why in (("in_place", "--in-place", "object stores and Ray workers cannot rename over an input; "
                             "write to -o DIR"),
                            ("resume", "--resume", "a Ray run is not journaled; run it again (its output "
                             "directory must be new or empty)"),
                            ("jobs", "-j/--jobs", "Ray schedules its own workers (size the cluster instead)"),
                            ("api_ready", "--api-ready", "its sidecar follows one local input's records; run locally"),
                            ("sidecar", "--sidecar", "its lines follow one local input's records; run locally")):
        if io.get(name) and _explicit(name):
            raise click.UsageError(f"{flag} does not apply to --engine ray: {why}")
    try:
        from ..engine.ray import run_cli
    except ImportError as exc:
        raise click.UsageError(f"--engine ray needs Ray Data and pyarrow: pip install 'xcompact[ray]' ({exc})") \
            from None
    ctx = click.get_current_context()
    parameters = {**parameters, "config": ctx.meta.get("xcompact_config"), "engine": "ray"}
    try:
        code = run_cli(settings, inputs=list(io["inputs"]), output=io.get("output"), report_path=io.get("report_path"),
                       address=io.get("address"), quiet=io.get("quiet", False), parameters=parameters, emit=emit,
                       warnings=io.get("warnings") or "all", html=io.get("html"))
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    except OutputError as exc:
        emit(f"error: {exc}")
        sys.exit(EXIT_FAILED)
    sys.exit(code)


def announce_server(settings: Any) -> None:
    """Once per run that sends conversations to a model server, before anything is sent: to
    which host (no user-info, no key) and why, even with -q (it says where the data goes)."""
    backend = getattr(settings, "backend", None)
    if backend is None or backend.name != "openai" or backend.openai is None:
        return
    from ..backends.config import BadServerURL, server_host, server_url
    from ..backends.openai_backend import NEEDS_KEY, lacks_key

    if lacks_key(backend.openai):  # refused before it is said to be sending anything
        raise click.UsageError(NEEDS_KEY)
    try:
        host = server_host(server_url(backend.openai.base_url))
    except BadServerURL as exc:  # checked when the options were built; never quoted
        raise click.UsageError(f"the model server's URL is not usable ({exc})") from None
    emit(f"xcompact: sending conversations to summarise to the model server at {host} "
         f"({backend.openai.chosen_by or '--backend openai'})")


def _refuse_untrusted_config() -> None:
    """Keys that need trust, from a config file found in the working directory (cli/config_file.py
    kept them out of the defaults): refused unless the command line gives the option itself."""
    from .config_file import untrusted_message

    ctx = click.get_current_context()
    names = [n for n in ctx.meta.get("xcompact_config_untrusted", []) if not _explicit(n)]
    if names:
        source = ctx.meta.get("xcompact_config") or "pyproject.toml"
        raise click.UsageError(untrusted_message(ctx.command, names, source))


def _explicit(name: str) -> bool:
    """Was option ``name`` given on the command line (not a default or a config value)?"""
    source = click.get_current_context().get_parameter_source(name)
    return source is click.core.ParameterSource.COMMANDLINE


def configured(command: str, kw: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(batch.Configured, the run's io options). Record options become Settings through the
    same function the library uses (batch.build), so they are defined once."""
    from ..commands.compile import build
    from ..commands.options import RUN_OPTIONS

    _refuse_untrusted_config()
    io = {k: v for k, v in kw.items() if k in RUN_OPTIONS}
    values = {k: v for k, v in kw.items() if k not in RUN_OPTIONS}
    io["strict"] = values.get("strict", False)
    explicit = {k for k in values if _explicit(k)}
    try:  # refuses --check with --dry-run first
        configured = build(command, values, explicit,
                           config_file=click.get_current_context().meta.get("xcompact_config"))
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    if values.get("check") or values.get("dry_run"):
        from ..commands.registry import command_class

        flags = command_class(command).writes_nothing_with
        if io.get("in_place") or io.get("output"):
            raise click.UsageError(f"{flags} nothing: drop -o/--in-place")
        if io.get("resume"):
            raise click.UsageError(f"{flags} nothing to resume: drop --resume")
        if io.get("api_ready"):
            raise click.UsageError(f"{flags} nothing: drop --api-ready (a dry run reports the sizes of the "
                                   "records as they would be written)")
    if not io.get("quiet") and io.get("warnings") != "none":
        for text in configured.warnings:
            emit(f"warning: {text}")
    return configured, io


def command(name: str, kw: dict[str, Any]) -> None:
    """What every record command does with its keyword arguments."""
    settings_and_parameters, io = configured(name, kw)
    run(settings_and_parameters.settings, io, settings_and_parameters.parameters)


