"""The pieces a command's ``build`` makes its settings from: ``Configured`` (the settings, the
report's ``parameters`` and the warnings the command line prints), tier 1's controls settled,
the summariser backend chosen. compile.py runs the build of the command asked for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .options import OPENAI_ONLY
from .settings import Settings

if TYPE_CHECKING:
    from ..backends.config import BackendConfig


@dataclass(frozen=True)
class Configured:
    """A command's options as the per-record step needs them, and as the report records them."""

    command: str
    settings: Settings
    parameters: dict[str, Any]  # the report's "parameters"
    warnings: tuple[str, ...] = ()  # e.g. openai options ignored because no server was named


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


def backend_settings(values: dict[str, Any], explicit: set[str], dry_run: bool = False,
             config_file: str | None = None) -> tuple[BackendConfig | None, dict[str, Any], list[str]]:
    """The summariser backend as a typed object, the parameters the report records, warnings.
    openai-only options given to the extractive backend are a usage error (``--backend
    extractive``) or a warning (``auto`` found no server). ``config_file``: the config file the
    values not in ``explicit`` may come from (named in the messages that say why a server is used)."""
    from ..backends.config import BackendConfig, BadServerURL, OpenAIConfig, choose_backend_name, server_url
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


def tier1_controls(values: dict[str, Any], explicit: set[str], counts_tokens: bool = True,
                   extra: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    """The values with tier 1's controls settled, and the report parameters they add (only the
    controls given, so a run without them reports what it always did). ``counts_tokens``: False
    with --no-tokens (the controls that count tokens are refused); ``extra``: the command's own
    controls reported with them (toolcall's --trigger and --fit)."""
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
    if not counts_tokens:
        given = [flag for flag, name in (("--trigger", "trigger"), ("--clear-at-least", "clear_at_least"),
                                         ("--max-result-tokens", "max_result_tokens"), ("--fit", "fit"))
                 if v.get(name) is not None]
        if v["placeholder"] is not None and "{tokens}" in v["placeholder"]:
            given.append("--placeholder with {tokens}")
        if given:
            raise UsageError(f"{' and '.join(given)} count{'s' if len(given) == 1 else ''} tokens: drop --no-tokens")
    names = (("exclude_tools", "keep_turns", "clear_at_least", "placeholder", "clear_tool_inputs", "preview",
              "max_result_tokens", "dedup_reads", "truncate_inputs", "images", "thinking")
             + extra)
    controls = {n: (list(v[n]) if n in ("exclude_tools", "preview", "images", "thinking") else v[n]) for n in names
                if v.get(n) not in (None, (), False)}
    return v, controls


def old_model_spelling(values: dict[str, Any], explicit: set[str]) -> tuple[dict[str, Any], list[str]]:
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


def kept_last(value: tuple[str, int] | None) -> int | None:
    """N of ``--images keep-last N`` / ``--thinking keep-last N``."""
    return None if value is None else int(value[1])
