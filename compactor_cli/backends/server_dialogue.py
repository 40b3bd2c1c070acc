"""One chat completion against an OpenAI-compatible server, as OpenAIBackend asks for it.

Retries with exponential backoff that honour Retry-After (transient failures only: connection,
timeouts, 408/409/429, other 5xx); the structured-output dialect (``--structured auto`` asks one
request at a time until the server has answered, and steps down a rung when it refuses
``response_format`` or ignores it); the server's context window, learnt from its error; the anti-loop
penalty for an answer cut off at the token limit. Every text the server sends back is masked
(the API key, credentials in the base URL) before it is cut or kept, an answer that echoes a
secret is discarded, and one that holds lone surrogates is made writable."""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from typing import Any

from ..errors import BackendError
from ..model.secrets import contains_secret, mask_credentials, mask_secrets
from .config import OpenAIConfig
from .dialects import CONTEXT_ERROR, LADDER, NAMES_FORMAT, REJECT_STATUSES, is_json_mode, response_format, window_of
from .repair_turns import RepairTurns, Tally
from .sections import SECTIONS, read_answer

ECHOED_SECRET = "the server echoed the API key; answer discarded"
ANTI_LOOP_PENALTY = 0.5


@dataclass(frozen=True)
class OpenAIOptions(OpenAIConfig):
    """The run's openai options (config.OpenAIConfig, defined once) and what only tests tune."""

    backoff: float = 1.0  # seconds before the first retry; doubled each time (cap 30 s)


class _Rejected(Exception):
    """The server refused ``response_format`` in ``mode`` (``--structured auto``: the next rung)."""

    def __init__(self, mode: str, reason: str) -> None:
        super().__init__(reason)
        self.mode, self.reason = mode, reason


class _Window(Exception):
    """The request did not fit the server's context window, which the error named."""

    def __init__(self, tokens: int) -> None:
        super().__init__(tokens)
        self.tokens = tokens


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class ServerDialogue(RepairTurns):
    """The model calls of OpenAIBackend (``_complete``, which the repair turns use too) and what the
    run learns of its server. OpenAIBackend sets the configuration and calls ``_start_dialogue``."""

    opts: OpenAIOptions
    model: str
    base_url: str | None
    timeout: float
    concurrency: int
    structured: str
    warnings: list[str]
    _key: str
    _secrets: tuple[str, ...]

    def _start_dialogue(self) -> None:
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None
        self._said_surrogates = False
        self._mode = LADDER[0] if self.structured == "auto" else self.structured  # auto: negotiated
        self._stopped: str | None = None  # why the run stopped sending
        self._learnt_window = False  # input_tokens came from the server's error
        self._refused: set[str] = set()  # structured modes the server refused in this run
        self._no_penalty = False  # the server refused frequency_penalty: never sent again this run
        self._agreed = False  # the server answered a request (auto: the dialect is settled)
        self._first: asyncio.Lock | None = None  # one structured request at a time until then

    def _mask(self, text: str) -> str:
        """Every string that leaves the backend goes through here, before any truncation."""
        return mask_credentials(mask_secrets(text, self._secrets))

    def _writable(self, text: str) -> str:
        """A lone surrogate (a JSON answer's "\\ud800" escape) is valid JSON but no UTF-8 file
        can hold it: written as U+FFFD, said once per run, so the answer does not fail the
        record at the writer, where it would be blamed on the input."""
        safe = writable_text(text)
        if safe is not text and not self._said_surrogates:
            self._said_surrogates = True
            self.warnings.append("the server's answer held lone surrogates (\\ud800-\\udfff escapes, which no "
                                 "UTF-8 file can hold); they are written as U+FFFD")
        return safe

    def _get_client(self) -> Any:
        if self._client is None:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(api_key=self._key or "not-needed", base_url=self.base_url,
                                       timeout=self.timeout, max_retries=0)
            self._sem = asyncio.Semaphore(max(1, self.concurrency))
        return self._client

    async def _complete(self, messages: list[dict[str, Any]], max_tokens: int, mode: str,
                        tally: Tally, fields: tuple[str, ...] = SECTIONS) -> tuple[str, str | None]:
        """(text, finish reason) of one chat completion. An answer cut off at the token limit is
        most often a loop (a small model at temperature 0 repeating a sentence until max_tokens):
        it is asked again once, and every later request of this conversation, with
        ANTI_LOOP_PENALTY, before any repair turn sees it."""
        text, finish = await self._request(messages, max_tokens, mode, tally, fields)
        if finish == "length" and not tally.looped and not self._no_penalty:
            tally.looped = True
            again, finish_again = await self._request(messages, max_tokens, mode, tally, fields)
            if not self._no_penalty:  # the server took the penalty: its answer stands
                return again, finish_again
        return text, finish

    async def _request(self, messages: list[dict[str, Any]], max_tokens: int, mode: str,
                       tally: Tally, fields: tuple[str, ...] = SECTIONS) -> tuple[str, str | None]:
        """One chat completion with retries for transient failures. Returns (text, finish
        reason); counts requests in ``tally``. A JSON mode sends its ``response_format`` (with
        ``fields``, the sections asked for); a refusal of it raises _Rejected (auto) or
        BackendError at once, never retried."""
        import openai

        try:
            client = self._get_client()
        except Exception as exc:  # noqa: BLE001  a URL the transport refuses though it parses
            raise BackendError(self._mask(f"the openai client cannot use the server URL ({type(exc).__name__})")) \
                from None
        assert self._sem is not None
        kwargs: dict[str, Any] = dict(model=self.model, temperature=self.opts.temperature, max_tokens=max_tokens,
                                      messages=messages)
        if self.opts.seed is not None:
            kwargs["seed"] = self.opts.seed
        if is_json_mode(mode):
            kwargs["response_format"] = response_format(mode, fields, max_tokens)
        if tally.looped and not self._no_penalty:
            kwargs["frequency_penalty"] = ANTI_LOOP_PENALTY
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self._negotiation(mode), self._sem:
                    if mode in self._refused:  # the server refused this mode while the request waited
                        raise _Rejected(mode, "")
                    if self._stopped is not None:
                        raise BackendError(self._stopped)
                    tally.calls += 1
                    # the client's timeout bounds each socket read; this bounds the whole answer, so
                    # a server that drips bytes cannot hold a request past --timeout
                    resp = await asyncio.wait_for(client.chat.completions.create(**kwargs), self.timeout)
                tally.add_usage(getattr(resp, "usage", None))  # billed even when the answer is refused below
                choices = getattr(resp, "choices", None)
                if not choices:
                    raise BackendError("the server's answer has no choices")
                text = choices[0].message.content
                if not text or not text.strip():
                    raise BackendError("the model returned an empty summary")
                text = self._writable(text)
                if contains_secret(text, self._secrets):
                    raise BackendError(ECHOED_SECRET)
                finish = getattr(choices[0], "finish_reason", None)
                if is_json_mode(mode) and finish != "length" and read_answer(text).form != "json":
                    self._ignored(mode)  # a 200 that did not honour response_format: read as it is
                self._agreed = True
                return text, finish
            except (BackendError, _Rejected):
                raise
            except openai.APIStatusError as exc:
                reason, wait = self._describe(exc), _retry_after(exc)
                window = window_of(reason) if CONTEXT_ERROR.search(reason) else None
                if window is not None and (window < self.input_tokens or self._built_larger(messages, max_tokens,
                                                                                             window)):
                    raise _Window(window) from None
                if (is_json_mode(mode) and exc.status_code in REJECT_STATUSES and NAMES_FORMAT.search(reason)
                        and not CONTEXT_ERROR.search(reason)):
                    if self.structured == "auto":
                        raise _Rejected(mode, reason) from None
                    raise BackendError(f"{reason} (the server does not take --structured {mode}: use --structured "
                                       "auto to negotiate what it takes)") from None
                if ("frequency_penalty" in kwargs and exc.status_code in REJECT_STATUSES
                        and "frequency_penalty" in reason):  # e.g. reasoning models: sent without it
                    self._no_penalty = True
                    del kwargs["frequency_penalty"]
                    continue
                retryable = exc.status_code in (408, 409, 429) or exc.status_code >= 500
            except openai.APIConnectionError as exc:  # timeouts included
                retryable, reason, wait = True, self._describe(exc), None
            except asyncio.TimeoutError:
                retryable, wait = True, None
                reason = f"no complete answer within the {self.timeout:g} s timeout (--timeout)"
            except Exception as exc:  # noqa: BLE001  malformed answers (JSON, shape) from the server
                retryable, reason, wait = True, f"malformed answer from the server ({type(exc).__name__})", None
            if not retryable or attempt > self.opts.retries:
                tries = f" after {attempt} attempts" if attempt > 1 else ""
                raise BackendError(self._mask(f"{reason}{tries}"))
            await asyncio.sleep(min(60.0, wait) if wait is not None
                                else min(30.0, self.opts.backoff * 2 ** (attempt - 1)))

    @contextlib.asynccontextmanager
    async def _negotiation(self, mode: str) -> Any:
        """``--structured auto``: until the server has answered once, requests asking for
        structured output go one at a time, so a refusal costs one request per run, not one per
        conversation in flight."""
        if self.structured != "auto" or self._agreed or not is_json_mode(mode):
            yield
            return
        if self._first is None:
            self._first = asyncio.Lock()
        lock = self._first
        await lock.acquire()
        held = True
        try:
            if self._agreed:  # settled while this one waited: the rest go concurrently
                lock.release()
                held = False
            yield
        finally:
            if held:
                lock.release()

    def _step_down(self, mode: str, why: str) -> None:
        """``--structured auto``: the run leaves ``mode``, saying so once. A refusal of json_schema
        that names json_object as what the server takes (llama-cpp-python: "Input should be 'text'
        or 'json_object'") goes to json_object; any other refusal goes straight to markdown."""
        if self._mode != mode or mode == LADDER[-1]:
            return  # another conversation already moved the run on
        self._refused.add(mode)
        target = "json_object" if mode == "json_schema" and "json_object" in why else "markdown"
        self._mode = target
        self.warnings.append(self._mask(f"the server rejected structured output as {mode} ({why}); --structured "
                                        f"auto asks for {target} for the rest of this run"))

    def _ignored(self, mode: str) -> None:
        if self.structured == "auto" and self._mode == mode:
            target = "json_object" if mode == "json_schema" else "markdown"
            self._mode = target
            self.warnings.append(f"the server answered without honouring response_format {mode}; --structured auto "
                                 f"asks for {target} for the rest of this run")

    def _built_larger(self, messages: list[dict[str, Any]], max_tokens: int, window: int) -> bool:
        """Was this request built for more than ``window``, by our own count? Then it was built
        before another conversation of the run taught it the window (the request waited for the
        server's dialect to be settled meanwhile): it is chunked again, not failed. A request our
        count says fits is the server counting otherwise: that one fails as it is."""
        return sum(self.count(str(m.get("content") or "")) for m in messages) + max_tokens > window

    def _learn_window(self, tokens: int) -> None:
        """The server named a context window smaller than the input budget: chunk to it."""
        if tokens < self.input_tokens:
            self.input_tokens, self._learnt_window = tokens, True
            self.warnings.append(f"the server's context window is {tokens} tokens, less than the input budget; "
                                 f"requests are chunked to fit it (--summary-input-tokens {tokens} says so up front)")

    def _describe(self, exc: Any) -> str:
        status = getattr(exc, "status_code", None)
        body = getattr(exc, "body", None)
        detail = ""
        if isinstance(body, dict):
            detail = str((body.get("error") or {}).get("message") if isinstance(body.get("error"), dict)
                         else body.get("message") or "")
        elif isinstance(body, str):
            detail = body
        elif status is None and exc.__cause__ is not None:  # connection errors: what the transport said
            detail = str(exc.__cause__)
        what = f"server error {status}" if status else type(exc).__name__.replace("Error", " error").lower().strip()
        # masked first: a cut must not leave the start of a key behind; one line (servers send
        # multi-line validation errors, llama-cpp-python among them)
        detail = " ".join(self._mask(detail).split())[:200]
        return self._mask(f"{what}: {detail}" if detail else what)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def writable_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD; ``text`` itself when it has none."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text)
    return text
