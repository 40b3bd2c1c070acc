"""A command's option values as the run needs them: ``Settings`` for every record, the report's
``parameters``, and the warnings the command line prints. One compiler for the CLI and the
batch function, over the one declaration of the options (``params``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..backends.config import BackendConfig, OpenAIConfig, choose_backend_name
from ..errors import UsageError
from .options import COMMANDS, OPENAI_ONLY, RUN_OPTIONS, click_command
from .settings import Settings


@dataclass(frozen=True)
class Configured:
    """A command's options as the per-record step needs them, and as the report records them."""

    command: str
    settings: Settings
    parameters: dict[str, Any]  # the report's "parameters"
    warnings: tuple[str, ...] = ()  # e.g. openai options ignored because no server was named


def _flag_names(command: str) -> dict[str, Any]:
    """{option name as a Python identifier (the long flag without dashes): click parameter}."""
    import click

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
    import click

    ctx = click.Context(click_command(command))
    return {name: param.process_value(ctx, param.get_default(ctx)) for name, param in _flag_names(command).items()}


def configure(command: str, **options: Any) -> Configured:
    """``settings_for`` with the report's parameters and the warnings the CLI would print."""
    import click

    params = _flag_names(command)
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise UsageError(f"{command} has no option {', '.join(unknown)}; its options are {', '.join(sorted(params))}")
    ctx = click.Context(click_command(command))
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


def _chosen_by(v: dict[str, Any], explicit: set[str], config_file: str | None) -> str:
    """Why the run sends to a model server, as its messages say it: the flag the user gave, or
    the key of the config file the user named (a found one cannot choose: cli/config_file.py)."""
    if v["backend"] == "openai":
        if "backend" in explicit or not config_file:
            return "--backend openai"
        return f"backend = openai in {config_file}"
    return "--base-url" if "base_url" in explicit or not config_file else f"base-url in {config_file}"


def _unused_environment(v: dict[str, Any]) -> list[str]:
    """``auto`` chose the offline summariser although the environment holds a key or a server:
    one line saying they are not used, and how to use them."""
    import os

    names = [n for n in ("OPENAI_API_KEY", "OPENAI_BASE_URL") if os.environ.get(n)]
    if v["backend"] != "auto" or not names:
        return []
    what = " and ".join(names) + (" are" if len(names) > 1 else " is")
    return [f"{what} set but not used: --backend auto summarises offline (extractive) unless a server is named; "
            "give --backend openai to send conversations to a model server"]


def _backend(values: dict[str, Any], explicit: set[str], dry_run: bool = False,
             config_file: str | None = None) -> tuple[BackendConfig | None, dict[str, Any], list[str]]:
    """The summariser backend as a typed object, the parameters the report records, warnings.
    openai-only options given to the extractive backend are a usage error (``--backend
    extractive``) or a warning (``auto`` found no server). ``config_file``: the config file the
    values not in ``explicit`` may come from (named in the messages that say why a server is used)."""
    from ..backends.config import BadServerURL, server_url
    from ..model.paths import default_cache_dir
    from ..model.secrets import redact_url

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
            warnings.append(f"{flags} ignored: no server named (--backend openai or --base-url), so the "
                            "offline extractive summariser is used")
        warnings.extend(_unused_environment(v))
    params: dict[str, Any] = {"backend": chosen}
    if chosen not in ("openai", "extractive"):  # a plug-in: made here once, so a bad name fails before any work
        given = [n for n in OPENAI_ONLY if n in explicit]
        if given:
            raise UsageError(f"{', '.join('--' + n.replace('_', '-') for n in given)} apply only to the openai "
                             "backend; a plug-in backend takes its own settings")
        from ..backends.factory import plugin_backend

        plugin_backend(chosen, len)
        return BackendConfig("plugin", plugin=chosen), params, warnings
    if chosen != "openai":
        return BackendConfig("extractive"), params, warnings
    if not v["base_url"]:
        try:
            server_url(None)  # OPENAI_BASE_URL, else OpenAI's API
        except BadServerURL as exc:  # never quoted: it may hold credentials
            raise UsageError(f"OPENAI_BASE_URL is not a usable server URL ({exc}); correct it, unset it or give "
                             "--base-url") from None
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
                          cache_dir=None if v["no_cache"] else (v["cache_dir"] or default_cache_dir()),
                          chosen_by=_chosen_by(v, explicit, config_file))
    params.update(summary_model=v["summary_model"], base_url=redact_url(v["base_url"]), temperature=v["temperature"],
                  timeout=v["timeout"], retries=v["retries"], concurrency=v["concurrency"], prompt_file=prompt_file,
                  summary_input_tokens=v["summary_input_tokens"], structured=v["structured"], seed=v["seed"],
                  cache=not v["no_cache"])
    return BackendConfig("openai", config), params, warnings


def build(command: str, values: dict[str, Any], explicit: Iterable[str] = (),
          config_file: str | None = None) -> Configured:
    """Settings and report parameters from click's parameter values (what the CLI passes: every
    option of the command, by its click parameter name, already converted). ``explicit``: the
    parameters the user gave (openai-only options given to the extractive backend are refused);
    ``config_file``: the config file the other values may come from (for the messages)."""
    from dataclasses import replace

    configured = _build(command, values, explicit, config_file)
    history = values.get("claude_code_history") or "since-compaction"
    if history != "since-compaction":  # recorded only when not the default (journal keys, reports unchanged)
        configured = Configured(command, replace(configured.settings, claude_code_history=history),
                                {**configured.parameters, "claude_code_history": history}, configured.warnings)
    fmt = values.get("input_format") or "auto"
    if fmt == "auto":
        return configured

    return Configured(command, replace(configured.settings, input_format=fmt),
                      {**configured.parameters, "from": fmt}, configured.warnings)


def _tier1_controls(command: str, values: dict[str, Any], explicit: set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The values with tier 1's controls settled, and the report parameters they add (only the
    controls given, so a run without them reports what it always did)."""
    from ..tiers.options import DEFAULT_KEEP

    v = dict(values)
    if v.get("preview") is not None:  # a placeholder that keeps a preview: the template's {preview} field
        from ..model.conversation import PLACEHOLDER_TEMPLATE

        head, tail = v["preview"]
        base = v["placeholder"] if v["placeholder"] is not None else PLACEHOLDER_TEMPLATE
        if "{preview" in base:
            raise UsageError("--preview and a --placeholder with {preview} say the same: give one of them")
        v["placeholder"] = base + "\n{preview:" + f"{head},{tail}" + "}"
    if v.get("fit") is not None and ("keep" in explicit or v["keep_turns"] is not None):
        raise UsageError("--fit chooses how many tool results to keep: drop --keep and --keep-turns")
    if v["keep_turns"] is not None and "keep" not in explicit and v["keep"] == DEFAULT_KEEP:
        v["keep"] = 0  # --keep-turns alone: counted in turns only
    if command == "toolcall" and v["no_tokens"]:
        given = [flag for flag, name in (("--trigger", "trigger"), ("--clear-at-least", "clear_at_least"),
                                         ("--max-result-tokens", "max_result_tokens"), ("--fit", "fit"))
                 if v.get(name) is not None]
        if v["placeholder"] is not None and "{tokens}" in v["placeholder"]:
            given.append("--placeholder with {tokens}")
        if given:
            raise UsageError(f"{' and '.join(given)} count{'s' if len(given) == 1 else ''} tokens: drop --no-tokens")
    names = (("exclude_tools", "keep_turns", "clear_at_least", "placeholder", "clear_tool_inputs", "preview",
              "max_result_tokens", "dedup_reads", "truncate_inputs", "images", "thinking")
             + (("trigger", "fit") if command == "toolcall" else ()))
    controls = {n: (list(v[n]) if n in ("exclude_tools", "preview", "images", "thinking") else v[n]) for n in names
                if v.get(n) not in (None, (), False)}
    return v, controls


def _old_model_spelling(values: dict[str, Any], explicit: set[str]) -> tuple[dict[str, Any], list[str]]:
    """summarize's --model, the old spelling of --summary-model: taken, with a warning."""
    if values.get("model") is None:
        return values, []
    if values.get("summary_model") is not None:
        raise UsageError("--model and --summary-model both name the summariser's model in summarize: "
                         "give --summary-model only")
    explicit.add("summary_model")
    return ({**values, "summary_model": values["model"]},
            ["summarize --model is now --summary-model (the same name as in compact); --model still works "
             "for now"])


def _kept(value: tuple[str, int] | None) -> int | None:
    """N of ``--images keep-last N`` / ``--thinking keep-last N``."""
    return None if value is None else int(value[1])


def _build(command: str, values: dict[str, Any], explicit: Iterable[str] = (),
           config_file: str | None = None) -> Configured:
    v = values
    explicit = set(explicit)
    strict = v.get("strict", False)
    if command in ("toolcall", "compact"):
        v, controls = _tier1_controls(command, v, explicit)
    if command == "toolcall":
        tokens = not v["no_tokens"]
        settings = Settings("toolcall", keep=v["keep"], keep_originals=v["originals"] == "keep", strict=strict,
                            count_tokens=tokens, encoding=v["encoding"], write_output=not v["dry_run"],
                            dry_run=v["dry_run"], exclude_tools=v["exclude_tools"], keep_turns=v["keep_turns"],
                            clear_at_least=v["clear_at_least"], trigger=v["trigger"],
                            placeholder=v["placeholder"], clear_tool_inputs=v["clear_tool_inputs"],
                            max_result_tokens=v["max_result_tokens"], dedup_reads=v["dedup_reads"],
                            truncate_inputs=v["truncate_inputs"], images_keep=_kept(v["images"]),
                            thinking_keep=_kept(v["thinking"]), fit=v["fit"])
        return Configured(command, settings, dict(keep=v["keep"], originals=v["originals"], strict=strict,
                                                  encoding=v["encoding"], tokens=tokens, dry_run=v["dry_run"],
                                                  **controls))
    if command == "restore":
        tokens = not v["no_tokens"]
        return Configured(command, Settings("restore", strict=strict, count_tokens=tokens, encoding=v["encoding"]),
                          dict(strict=strict, encoding=v["encoding"], tokens=tokens))
    if command == "validate":
        return Configured(command, Settings("validate", strict=strict, count_tokens=False, write_output=False),
                          dict(strict=strict))
    if command == "summarize":
        from ..tiers.options import SummarizeOptions

        v, renamed = _old_model_spelling(v, explicit)
        dry_run = v["dry_run"]
        backend, params, warnings = _backend(v, explicit, dry_run=dry_run, config_file=config_file)
        keep_originals = v["originals"] == "keep"
        summary = SummarizeOptions(keep_recent=v["keep_recent"], max_summary_tokens=v["max_summary_tokens"],
                                   preserve_system=v["preserve_system"], keep_originals=keep_originals,
                                   keep_task=v["keep_task"], evidence=v["evidence"],
                                   keep_user_tokens=v["keep_user_tokens"])
        params.update(keep_recent=v["keep_recent"], max_summary_tokens=v["max_summary_tokens"],
                      preserve_system=v["preserve_system"], keep_task=v["keep_task"], evidence=v["evidence"],
                      keep_user_tokens=v["keep_user_tokens"], originals=v["originals"], strict=strict,
                      encoding=v["encoding"], dry_run=dry_run)
        return Configured(command, Settings("summarize", keep_originals=keep_originals, strict=strict,
                                            encoding=v["encoding"], summary=summary, backend=backend,
                                            write_output=not dry_run, dry_run=dry_run),
                          params, tuple(renamed + warnings))
    if command == "compact":
        from ..tiers.compact import resolve_threshold
        from ..tiers.options import DEFAULT_KEEP_RECENT, Policy

        v = dict(v)
        if v.get("summary_model") is None:  # as nagents: the conversation's own model unless told
            v["summary_model"] = v["conversation_model"]
        check, dry_run = v["check"], v["dry_run"]
        if check and dry_run:
            raise UsageError("--check and --dry-run cannot be used together: --check only measures, "
                             "--dry-run runs the policy without writing")
        if v["strategy"] is not None:
            if check:
                raise UsageError("--strategy and --check cannot be used together: --check measures against the "
                                 "threshold, a strategy decides for itself")
            from ..tiers.strategy import load_strategy

            load_strategy(v["strategy"])  # a name that cannot be loaded fails here, before any work
            controls["strategy"] = v["strategy"]
        token_threshold, message_threshold, source = resolve_threshold(
            v["token_threshold"], v["message_threshold"], v["conversation_model"], v["context_window"])
        backend, params, warnings = ((None, {}, []) if check
                                     else _backend(v, explicit, dry_run=dry_run, config_file=config_file))
        keep_originals = v["originals"] == "keep"
        # --keep-recent left at its default: as many recent messages as fit under the threshold
        fit = "keep_recent" not in explicit and v["keep_recent"] == DEFAULT_KEEP_RECENT
        policy = Policy(token_threshold=token_threshold, message_threshold=message_threshold, keep=v["keep"],
                        keep_recent=None if fit else v["keep_recent"], escalation_rounds=v["escalation_rounds"],
                        max_retries=v["max_retries"], max_summary_tokens=v["max_summary_tokens"],
                        preserve_system=v["preserve_system"], keep_originals=keep_originals,
                        exclude_tools=v["exclude_tools"], keep_turns=v["keep_turns"],
                        clear_at_least=v["clear_at_least"], placeholder=v["placeholder"],
                        clear_tool_inputs=v["clear_tool_inputs"], max_result_tokens=v["max_result_tokens"],
                        dedup_reads=v["dedup_reads"], truncate_inputs=v["truncate_inputs"],
                        images_keep=_kept(v["images"]), thinking_keep=_kept(v["thinking"]),
                        keep_task=v["keep_task"], evidence=v["evidence"],
                        keep_user_tokens=v["keep_user_tokens"])
        params.update(controls)
        params.update(token_threshold=token_threshold, message_threshold=message_threshold, keep=v["keep"],
                      keep_recent="fit" if fit else v["keep_recent"], escalation_rounds=v["escalation_rounds"],
                      max_retries=v["max_retries"], max_summary_tokens=v["max_summary_tokens"],
                      preserve_system=v["preserve_system"], keep_task=v["keep_task"], evidence=v["evidence"],
                      keep_user_tokens=v["keep_user_tokens"], keep_originals=keep_originals, threshold_source=source,
                      model=v["conversation_model"], context_window=v["context_window"], check=check,
                      dry_run=dry_run, originals=v["originals"], strict=strict, encoding=v["encoding"])
        settings = Settings("compact", keep=v["keep"], keep_originals=keep_originals, strict=strict,
                            encoding=v["encoding"], conversation_model=v["conversation_model"],
                            write_output=not (check or dry_run), policy=policy, check=check,
                            backend=backend, dry_run=dry_run, strategy=v["strategy"])
        return Configured(command, settings, params, tuple(warnings))
    raise UsageError(f"unknown command {command!r}; expected one of {', '.join(COMMANDS)}")


