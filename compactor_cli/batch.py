"""The CLI's per-record step as a batch function: JSONL lines in, output lines and report items out.

This is what the command line runs for every record (``pipeline.process_record`` with the
command's transform), exposed for engines that hold records themselves: Ray Data, Hugging Face
``datasets``, Dask, a plain loop. For the same input line and the same options, the output bytes
are the CLI's, byte for byte; a record that fails is passed through unchanged with an
``INVALID_INPUT`` item, as the CLI does::

    from compactor_cli.batch import process_lines, report_for, settings_for

    settings = settings_for("toolcall", keep=4)            # the CLI's option names and defaults
    result = process_lines(open("data.jsonl", "rb"), settings, source="data.jsonl")
    result.outputs   # one per record: the bytes xcompact writes for it (None: the command writes nothing)
    result.items     # one per record: the report item ({"source", "line", "status", ...})
    report_for(settings, result.items).totals()              # the report's totals and exit_code

Options are defined once, by the command line's click options: ``settings_for`` takes the long
flag names (``--keep-recent`` is ``keep_recent``, ``--no-tokens`` is ``no_tokens``, ``compact
--model`` is ``model``), fills in the same defaults and checks values the same way (a bad value is
a ``UsageError`` with the CLI's message). A ``pyproject.toml`` or ``--config`` file is read by the
command line only.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .engine.settings import Settings
from .engine.step import Outcome, process_record, process_record_async
from .errors import UsageError
from .files.records import Record

#: Commands that run records through the per-record step (``extract`` prints one result instead).
COMMANDS = ("toolcall", "summarize", "compact", "restore", "validate")
#: Options of the command line that are about files and the run, not about a record.
RUN_OPTIONS = frozenset({"inputs", "output", "in_place", "report_path", "quiet", "jobs", "resume", "engine",
                         "address", "api_ready", "sidecar"})


# ---------------------------------------------------------------- options -> Settings


@dataclass(frozen=True)
class Configured:
    """A command's options as the per-record step needs them, and as the report records them."""

    command: str
    settings: Settings
    parameters: dict[str, Any]  # the report's "parameters"
    warnings: tuple[str, ...] = ()  # e.g. openai options ignored because no server was named


def _click_command(command: str) -> Any:
    from .cli import cli

    if command not in COMMANDS:
        raise UsageError(f"unknown command {command!r}; expected one of {', '.join(COMMANDS)}")
    return cli.commands[command]


def _flag_names(command: str) -> dict[str, Any]:
    """{option name as a Python identifier (the long flag without dashes): click parameter}."""
    import click

    names: dict[str, Any] = {}
    for param in _click_command(command).params:
        if not isinstance(param, click.Option) or param.name in RUN_OPTIONS or param.name is None \
                or not param.expose_value:
            continue
        longs = [o for o in param.opts if o.startswith("--")]
        names[(max(longs, key=len) if longs else param.opts[0]).lstrip("-").replace("-", "_")] = param
    return names


def option_defaults(command: str) -> dict[str, Any]:
    """The command's record options and their defaults, as ``settings_for`` takes them."""
    import click

    ctx = click.Context(_click_command(command))
    return {name: param.process_value(ctx, param.get_default(ctx)) for name, param in _flag_names(command).items()}


def configure(command: str, **options: Any) -> Configured:
    """``settings_for`` with the report's parameters and the warnings the CLI would print."""
    import click

    params = _flag_names(command)
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise UsageError(f"{command} has no option {', '.join(unknown)}; its options are {', '.join(sorted(params))}")
    ctx = click.Context(_click_command(command))
    values: dict[str, Any] = {}
    for name, param in params.items():
        try:
            values[param.name] = param.process_value(ctx, options[name] if name in options else param.get_default(ctx))
        except click.BadParameter as exc:
            raise UsageError(exc.format_message()) from None
    return build(command, values, explicit={params[n].name for n in options})


def settings_for(command: str, **options: Any) -> Settings:
    """The ``Settings`` the CLI builds for ``xcompact COMMAND`` with these options (long flag names,
    dashes as underscores; omitted ones take the CLI's defaults). Raises ``UsageError`` for a value
    or combination the CLI refuses."""
    return configure(command, **options).settings


def _backend(values: dict[str, Any], explicit: set[str], dry_run: bool = False) -> tuple[Any, dict[str, Any], list[str]]:
    """The summariser backend as a typed object, the parameters the report records, warnings.
    openai-only options given to the extractive backend are a usage error (``--backend
    extractive``) or a warning (``auto`` found no server)."""
    from .engine.settings import BackendConfig, OpenAIConfig, choose_backend_name
    from .model.paths import default_cache_dir
    from .model.secrets import redact_url
    from .options import OPENAI_ONLY

    v = values
    warnings: list[str] = []
    chosen = "extractive" if dry_run else choose_backend_name(v["backend"], v["base_url"])
    if chosen == "extractive" and not dry_run:
        given = [n for n in OPENAI_ONLY if n in explicit]
        if given:
            flags = ", ".join("--" + n.replace("_", "-") for n in given)
            if v["backend"] == "extractive":
                verb = "apply" if len(given) > 1 else "applies"
                raise UsageError(f"{flags} {verb} only to the openai backend; drop it or use --backend openai")
            warnings.append(f"{flags} ignored: no OPENAI_API_KEY, OPENAI_BASE_URL or --base-url, so the "
                            "offline extractive summariser is used")
    params: dict[str, Any] = {"backend": chosen}
    if chosen != "openai":
        return BackendConfig("extractive"), params, warnings
    instructions = None
    prompt_file = v["prompt_file"]
    if prompt_file:
        try:
            with open(prompt_file, encoding="utf-8") as fh:
                instructions = fh.read().strip() or None
        except UnicodeDecodeError as exc:
            raise UsageError(f"--prompt-file {prompt_file} is not UTF-8 text (byte {exc.start}); "
                             "save it as UTF-8") from None
        except OSError as exc:
            raise UsageError(f"cannot read --prompt-file {prompt_file}: {exc.strerror}") from None
    config = OpenAIConfig(model=v["summary_model"], base_url=v["base_url"], temperature=v["temperature"],
                          timeout=v["timeout"], retries=v["retries"], concurrency=v["concurrency"],
                          instructions=instructions, summary_input_tokens=v["summary_input_tokens"],
                          structured=v["structured"], seed=v["seed"],
                          cache_dir=None if v["no_cache"] else (v["cache_dir"] or default_cache_dir()))
    params.update(summary_model=v["summary_model"], base_url=redact_url(v["base_url"]), temperature=v["temperature"],
                  timeout=v["timeout"], retries=v["retries"], concurrency=v["concurrency"], prompt_file=prompt_file,
                  summary_input_tokens=v["summary_input_tokens"], structured=v["structured"], seed=v["seed"],
                  cache=not v["no_cache"])
    return BackendConfig("openai", config), params, warnings


def build(command: str, values: dict[str, Any], explicit: Iterable[str] = ()) -> Configured:
    """Settings and report parameters from click's parameter values (what the CLI passes: every
    option of the command, by its click parameter name, already converted). ``explicit``: the
    parameters the user gave (openai-only options given to the extractive backend are refused)."""
    from dataclasses import replace

    configured = _build(command, values, explicit)
    history = values.get("claude_code_history") or "since-compaction"
    if history != "since-compaction":  # recorded only when not the default (journal keys, reports unchanged)
        configured = Configured(command, replace(configured.settings, claude_code_history=history),
                                {**configured.parameters, "claude_code_history": history}, configured.warnings)
    fmt = values.get("input_format") or "auto"
    if fmt == "auto":
        return configured

    return Configured(command, replace(configured.settings, input_format=fmt),
                      {**configured.parameters, "from": fmt}, configured.warnings)


def _build(command: str, values: dict[str, Any], explicit: Iterable[str] = ()) -> Configured:
    v = values
    explicit = set(explicit)
    strict = v.get("strict", False)
    if command == "toolcall":
        tokens = not v["no_tokens"]
        settings = Settings("toolcall", keep=v["keep"], keep_originals=v["originals"] == "keep", strict=strict,
                            count_tokens=tokens, encoding=v["encoding"])
        return Configured(command, settings, dict(keep=v["keep"], originals=v["originals"], strict=strict,
                                                  encoding=v["encoding"], tokens=tokens))
    if command == "restore":
        tokens = not v["no_tokens"]
        return Configured(command, Settings("restore", strict=strict, count_tokens=tokens, encoding=v["encoding"]),
                          dict(strict=strict, encoding=v["encoding"], tokens=tokens))
    if command == "validate":
        return Configured(command, Settings("validate", strict=strict, count_tokens=False, write_output=False),
                          dict(strict=strict))
    if command == "summarize":
        from .tiers.summarize import SummarizeOptions

        backend, params, warnings = _backend(v, explicit)
        keep_originals = v["originals"] == "keep"
        summary = SummarizeOptions(keep_recent=v["keep_recent"], max_summary_tokens=v["max_summary_tokens"],
                                   preserve_system=v["preserve_system"], keep_originals=keep_originals)
        params.update(keep_recent=v["keep_recent"], max_summary_tokens=v["max_summary_tokens"],
                      preserve_system=v["preserve_system"], originals=v["originals"], strict=strict,
                      encoding=v["encoding"])
        return Configured(command, Settings("summarize", keep_originals=keep_originals, strict=strict,
                                            encoding=v["encoding"], summary=summary, backend=backend),
                          params, tuple(warnings))
    if command == "compact":
        from .tiers.compact import Policy, resolve_threshold

        v = dict(v)
        if v.get("summary_model") is None:  # as nagents: the conversation's own model unless told
            v["summary_model"] = v["conversation_model"]
        check, dry_run = v["check"], v["dry_run"]
        if check and dry_run:
            raise UsageError("--check and --dry-run cannot be used together: --check only measures, "
                             "--dry-run runs the policy without writing")
        token_threshold, message_threshold, source = resolve_threshold(
            v["token_threshold"], v["message_threshold"], v["conversation_model"], v["context_window"])
        backend, params, warnings = (None, {}, []) if check else _backend(v, explicit, dry_run=dry_run)
        keep_originals = v["originals"] == "keep"
        policy = Policy(token_threshold=token_threshold, message_threshold=message_threshold, keep=v["keep"],
                        keep_recent=v["keep_recent"], escalation_rounds=v["escalation_rounds"],
                        max_retries=v["max_retries"], max_summary_tokens=v["max_summary_tokens"],
                        preserve_system=v["preserve_system"], keep_originals=keep_originals)
        params.update(token_threshold=token_threshold, message_threshold=message_threshold, keep=v["keep"],
                      keep_recent=v["keep_recent"], escalation_rounds=v["escalation_rounds"],
                      max_retries=v["max_retries"], max_summary_tokens=v["max_summary_tokens"],
                      preserve_system=v["preserve_system"], keep_originals=keep_originals, threshold_source=source,
                      model=v["conversation_model"], context_window=v["context_window"], check=check,
                      dry_run=dry_run, originals=v["originals"], strict=strict, encoding=v["encoding"])
        settings = Settings("compact", keep=v["keep"], keep_originals=keep_originals, strict=strict,
                            encoding=v["encoding"], write_output=not (check or dry_run), policy=policy, check=check,
                            backend=backend)
        return Configured(command, settings, params, tuple(warnings))
    raise UsageError(f"unknown command {command!r}; expected one of {', '.join(COMMANDS)}")


# ---------------------------------------------------------------- records -> outcomes


class Processor:
    """The per-record step for one ``Settings``: the vocabulary, the transform and (for the tiers
    that may call a model) an event loop are made once and reused for every record."""

    def __init__(self, settings: Settings) -> None:
        from .engine.executors import MODEL_COMMANDS, make_counter, make_transform

        self.settings = settings
        self.counter = make_counter(settings)
        self.transform, self.backend = make_transform(settings, self.counter)
        self.is_async = settings.command in MODEL_COMMANDS
        self.window = 1
        if self.backend is not None and getattr(self.backend, "name", None) == "openai" and settings.backend \
                and settings.backend.openai:
            self.window = 2 * (settings.backend.openai.concurrency or 4)  # as the CLI: a bounded window in flight
        self._loop: asyncio.AbstractEventLoop | None = None

    def notes(self) -> list[str]:
        """What the CLI adds to the report's notes for this run (and prints as a warning)."""
        notes = []
        if self.counter is not None and not self.counter.exact:
            notes.append(f"token counts approximate: {self.settings.encoding} unavailable, cl100k_base used")
        if self.backend is not None:
            notes.append(f"backend: {self.backend.name}" + (f", model {self.backend.model}" if self.backend.model else ""))
        return notes

    def outcomes(self, records: Sequence[Record]) -> list[Outcome]:
        """One Outcome per record, in order (the same bytes as the CLI for any batching)."""
        if not self.is_async:
            return [process_record(r, self.transform, self.settings, self.counter) for r in records]
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        out: list[Outcome] = []
        for i in range(0, len(records), self.window):
            chunk = records[i:i + self.window]

            async def run(chunk: Sequence[Record] = chunk) -> list[Outcome]:
                return list(await asyncio.gather(*(process_record_async(r, self.transform, self.settings, self.counter)
                                                   for r in chunk)))

            out.extend(self._loop.run_until_complete(run()))
        return out

    def close(self) -> None:
        if self._loop is not None:
            if self.backend is not None and hasattr(self.backend, "aclose"):
                self._loop.run_until_complete(self.backend.aclose())
            self._loop.close()
            self._loop = None


_PROCESSORS: OrderedDict[str, Processor] = OrderedDict()


def processor_for(settings: Settings) -> Processor:
    """A Processor for these settings, kept for reuse in this process (a worker of Ray, Dask or
    ``datasets.map(num_proc=...)`` loads the vocabulary once, not once per batch)."""
    key = repr(settings)  # the option objects of the tiers are not all hashable; their repr is their value
    proc = _PROCESSORS.get(key)
    if proc is None or proc.settings != settings:
        proc = _PROCESSORS[key] = Processor(settings)
        while len(_PROCESSORS) > 4:
            _PROCESSORS.popitem(last=False)[1].close()
    else:
        _PROCESSORS.move_to_end(key)
    return proc


# ---------------------------------------------------------------- the batch function


@dataclass
class BatchResult:
    """One entry per record (blank lines are not records: the CLI skips them too)."""

    outputs: list[bytes | None] = field(default_factory=list)  # the CLI's bytes, "\n" included; None: nothing written
    items: list[dict[str, Any]] = field(default_factory=list)  # report items, in order

    @property
    def lines(self) -> list[bytes]:
        """The output lines to write, in order (what the CLI writes for these lines)."""
        return [o for o in self.outputs if o is not None]

    def texts(self, keep_linebreaks: bool = False) -> list[str | None]:
        """The outputs as ``str`` (a ``datasets`` text column): without their line end, or with it
        (``keep_linebreaks=True``, as ``load_dataset("text", keep_linebreaks=True)`` gives lines)."""
        texts: list[str | None] = []
        for o in self.outputs:
            if o is None:
                texts.append(None)
            else:
                text = o.decode("utf-8")
                texts.append(text if keep_linebreaks or not text.endswith("\n") else text[:-1])
        return texts


def process_lines(lines: Iterable[bytes | str], settings: Settings | str, *, source: str = "<lines>",
                  first_line: int = 1, **options: Any) -> BatchResult:
    """Run JSONL lines through the CLI's per-record step.

    ``lines``: one conversation per line, ``bytes`` or ``str``; blank lines are skipped (and
    counted for line numbers). Each line is the record's bytes, as the CLI reads it from a JSONL
    file: give lines with their ``\\n`` and ``b"".join(result.lines)`` is the CLI's output file
    (a record the command leaves unchanged is passed through as given, so a last line without
    ``\\n`` stays without one; a rewritten record always ends with ``\\n``). Lines given without
    their ends (``datasets``' default): use ``result.texts()``, which drops the line ends.
    ``settings``: from ``settings_for``, or a command name with its options as keywords.
    ``source`` and ``first_line`` (the line number of ``lines[0]``) name the records in the
    report items, as the CLI names them ``file:line``."""
    if isinstance(lines, (str, bytes, bytearray, memoryview)):
        raise UsageError("process_lines takes an iterable of lines (a list of str or bytes), not one "
                         f"{type(lines).__name__}: wrap a single line as [line]")
    if isinstance(settings, str):
        settings = settings_for(settings, **options)
    elif options:
        raise UsageError("give options either through settings_for or here, with a command name")
    elif not isinstance(settings, Settings):
        raise UsageError(f"settings: expected a Settings from settings_for or a command name, got "
                         f"{type(settings).__name__}")
    records: list[Record] = []
    line_no = first_line - 1
    for line in lines:
        line_no += 1
        if not isinstance(line, (str, bytes, bytearray, memoryview)):
            raise UsageError(f"line {line_no}: expected str or bytes, got {type(line).__name__}")
        raw = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else bytes(line)
        if not raw.strip():
            continue
        records.append(Record(source, line_no, raw, "jsonl"))
    outcomes = processor_for(settings).outcomes(records)
    return BatchResult([output_of(settings, o) for o in outcomes], [o.item for o in outcomes])


def output_of(settings: Settings, outcome: Outcome) -> bytes | None:
    """What the CLI writes for an outcome: nothing at all for a command that writes nothing
    (validate, compact --check / --dry-run), even for a record that failed."""
    return outcome.out if settings.write_output else None


def report_for(settings: Settings | Configured | str, items: Iterable[dict[str, Any]], *,
               parameters: dict[str, Any] | None = None, files: int = 1, report_path: str | None = None) -> Any:
    """A ``report.Report`` over items (from one or many batches, in input order): ``totals()``,
    ``exit_code``, ``summary()``; with ``report_path`` the report JSON is written there, the
    same document as ``xcompact ... --report`` (give the Configured or ``parameters`` for its
    ``parameters``)."""
    from .engine.report import Report

    if isinstance(settings, Configured):
        command, parameters = settings.command, settings.parameters if parameters is None else parameters
    else:
        command = settings if isinstance(settings, str) else settings.command
    report = Report(command=command, parameters=parameters or {}, report_path=report_path)
    report.files = files
    if not isinstance(settings, str):
        for note in processor_for(settings if isinstance(settings, Settings) else settings.settings).notes():
            report.note(note)
    try:
        for item in items:
            report.add(item)
    except BaseException:
        report.abort()
        raise
    report.close()
    return report
