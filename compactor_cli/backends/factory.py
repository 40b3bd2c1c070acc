"""Build the summariser a ``BackendConfig`` names (apart from config.py: the backends import
their options from there, and this imports the backends)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from . import Backend
from .config import BackendConfig, OpenAIConfig, choose_backend_name

if TYPE_CHECKING:
    from .openai_backend import OpenAIBackend


def make_backend(config: BackendConfig | str | None, text_tokens: Any, max_summary_tokens: int) -> Backend:
    """The backend a ``BackendConfig`` names (or a name: "auto", "extractive", "openai").
    ``text_tokens`` counts the tokens of a text. Option problems (an input budget too small for
    the prompt) raise UsageError here, before any work."""
    if config is None or isinstance(config, str):
        name = choose_backend_name(config or "extractive")
        config = BackendConfig(name, OpenAIConfig(chosen_by=f"backend {name!r}") if name == "openai" else None)
    if config.name == "extractive":
        from .extractive import ExtractiveBackend

        return ExtractiveBackend(text_tokens)
    if config.name == "openai":
        from dataclasses import asdict

        from .openai_backend import OpenAIOptions

        options = asdict(config.openai or OpenAIConfig(chosen_by="backend 'openai'"))
        backend = _named_server_backend()(OpenAIOptions(**options), text_tokens)
        backend.check_budget(max_summary_tokens)
        return backend
    if config.name == "plugin" and config.plugin:
        return plugin_backend(config.plugin, text_tokens)
    raise UsageError(f"unknown backend {config.name!r}; choose extractive or openai")


@cache
def _named_server_backend() -> type[OpenAIBackend]:
    """OpenAIBackend whose failures to connect name the server and why the run uses it (the
    transport alone says "All connection attempts failed"). Made on first use: the openai
    backend's modules are imported only by a run that uses it."""
    from .config import server_host
    from .openai_backend import DEFAULT_ENDPOINT, OpenAIBackend

    class NamedServerBackend(OpenAIBackend):
        def _describe(self, exc: Any) -> str:
            text = super()._describe(exc)
            import openai

            if not isinstance(exc, openai.APIConnectionError):  # timeouts included
                return text
            try:
                host = server_host(self.base_url or DEFAULT_ENDPOINT)
            except ValueError:
                host = "the server of OPENAI_BASE_URL"
            why = self.opts.chosen_by or "--backend openai"
            return f"{text} (the model server at {host}, used because of {why})"

    return NamedServerBackend


def plugin_backend(spec: str, text_tokens: Any) -> Backend:
    """A summariser of the user's own: an object with ``summarize`` (async, SummaryRequest ->
    Answer), or a class or factory making one (given ``text_tokens`` when it takes it)."""
    import inspect

    from ..model.plugins import load_plugin, prints_to_stderr

    obj = load_plugin(spec, "xcompact.backends", "--backend")
    if inspect.isclass(obj) or not hasattr(obj, "summarize"):
        try:
            takes = "text_tokens" in inspect.signature(obj).parameters
            with prints_to_stderr():  # the plug-in's own code: what it writes to stdout is not data
                obj = obj(text_tokens=text_tokens) if takes else obj()
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"--backend {spec}: making it failed: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(obj, "summarize", None)):
        raise UsageError(f"--backend {spec}: a backend needs async summarize(request) -> Answer")
    return _Guarded(obj, spec)


def _wrong_field(answer: Any) -> str | None:
    """What is wrong with the bookkeeping fields of a plug-in's Answer, or None."""

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    calls = answer.calls
    if not is_int(calls) or calls < 0:
        return f"calls is {calls!r}, not a count (an int >= 0)"
    for name in ("cached", "repaired"):
        if not isinstance(getattr(answer, name), bool):
            return f"{name} is {type(getattr(answer, name)).__name__}, not bool"
    if answer.structured is not None and not isinstance(answer.structured, str):
        return f"structured is {type(answer.structured).__name__}, not str or None"
    usage = answer.usage
    if not isinstance(usage, dict) or not all(isinstance(k, str) and is_int(v) and v >= 0 for k, v in usage.items()):
        return "usage is not a dict of token counts (str -> int >= 0)"
    return None


class _Guarded:
    """A plug-in summariser whose failures are summary failures (BackendError naming it), not
    an unexpected error of the record: a raised exception, or an answer that is not an Answer."""

    def __init__(self, inner: Any, spec: str) -> None:
        self.inner, self.spec = inner, spec

    @property
    def name(self) -> str:
        return str(getattr(self.inner, "name", None) or self.spec)

    @property
    def model(self) -> str | None:
        model = getattr(self.inner, "model", None)
        return model if isinstance(model, str) else None

    async def summarize(self, request: Any) -> Any:
        from ..errors import BackendError
        from ..model.plugins import call_plugin
        from . import Answer

        try:  # print() and fd 1 go to stderr while the plug-in's code runs, step by step
            answer = await call_plugin(self.inner.summarize, request)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001  the plug-in's failure is this conversation's
            raise BackendError(f"backend {self.spec} raised {type(exc).__name__}: {str(exc)[:200]}") from None
        if not isinstance(answer, Answer):
            raise BackendError(f"backend {self.spec} returned {type(answer).__name__}, not an Answer "
                               "(from compactor_cli import Answer)")
        if not isinstance(answer.text, str):
            raise BackendError(f"backend {self.spec} returned an Answer whose text is {type(answer.text).__name__}, "
                               "not str")
        try:  # checked here: at the writer it would fail the record as if the input were at fault
            answer.text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise BackendError(f"backend {self.spec} returned a summary that cannot be written: a lone surrogate "
                               f"at character {exc.start} (not valid UTF-8)") from None
        wrong = _wrong_field(answer)
        if wrong:  # the tiers add and report these: a wrong type would fail the record as the input's fault
            raise BackendError(f"backend {self.spec} returned an Answer whose {wrong}")
        return answer

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if callable(close):
            await close()
