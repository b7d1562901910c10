"""``openai:<model>``: any OpenAI-compatible chat API through the official SDK.

Images go as base64 PNG data URLs.  The SDK's own retries are off; this
module retries 429s, 5xx answers, time-outs and connection errors with
capped exponential backoff and jitter (:func:`backoff`), generous enough for
day-long sweeps.  A ``Retry-After`` of up to :data:`MAX_RETRY_AFTER_S`
seconds is honoured; a larger, negative or unreadable one (a date in 2099,
``1e20``, ``soon``) is ignored in favour of the backoff schedule
(:func:`retry_after`).  The total wait of one request is bounded by
``max_wait_s`` (``--max-wait``, default 600 s): a retry that would wait
past it gives up, and the trial fails like one whose attempts ran out (it is
logged in ``runs.jsonl`` and redone on resume, never logged as an answer).
A 200 reply that holds no answer (an ``{"error": ...}`` body, no or empty
``choices``, ``content: null``, truncated JSON, an HTML page) is retried the
same way and never cached.  ``timeout_s`` bounds each whole request,
however slowly the server trickles.  Requests that can never succeed (401,
403, 404) stop the run at once.

The API key is read from the option (``--api-key-file`` or ``--api-key``)
or ``OPENAI_API_KEY`` and never written anywhere: not to the manifest, the
trial log, the cache or an error message.  A server that echoes the key in a
reply or an error (a proxy's debug page) has it replaced by ``[redacted]``
wherever the text is kept (:func:`redact`): ``raw_response``, the cache,
``runs.jsonl`` and stderr.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import json
import math
import os
import random
import time
from dataclasses import dataclass
from functools import lru_cache

import httpx
import openai

from .base import FatalSubjectError, Reply, Request, SubjectError
from .cache import ResponseCache, request_key


@dataclass
class ChatOptions:
    """Options of an OpenAI-compatible subject (everything but the key is logged)."""

    model: str
    base_url: str | None = None
    temperature: float = 0.7
    max_tokens: int = 64  # room for a number and a short note; search answers lead their reply
    reasoning_effort: str | None = None  # e.g. "minimal" or "none" where the API supports it
    timeout_s: float = 120.0
    max_attempts: int = 12
    backoff_s: float = 1.0
    backoff_cap_s: float = 300.0
    max_wait_s: float = 600.0  # total seconds one request may wait between its attempts

    def public(self) -> dict:
        """Every option (the key is not an option, so nothing secret)."""
        return {k: v for k, v in self.__dict__.items()}


@lru_cache(maxsize=8192)
def data_url(png: bytes) -> str:
    """``data:image/png;base64,...`` (cached: history images recur in every request)."""
    return "data:image/png;base64," + base64.b64encode(png).decode()


def to_messages(request: Request) -> list[dict]:
    """Chat messages of a request: system, then user/assistant turns."""
    msgs: list[dict] = [{"role": "system", "content": request.system}]
    for t in request.turns:
        pngs = t.pngs
        if t.role == "assistant" or not pngs:
            msgs.append({"role": t.role, "content": t.text or ""})
            continue
        parts = []
        if t.text is not None:
            parts.append({"type": "text", "text": t.text})
        # one image part per image, in the order shown
        parts += [{"type": "image_url", "image_url": {"url": data_url(p)}} for p in pngs]
        msgs.append({"role": "user", "content": parts})
    return msgs


MAX_RETRY_AFTER_S = 120.0  # a longer Retry-After is not believed: the backoff schedule is used
REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8  # shorter "keys" (a local server's placeholder) are not secrets


def retry_after(exc: Exception) -> float | None:
    """The wait a failed request's ``Retry-After`` header asks for, if it is to be believed.

    Returns
    -------
    float or None
        Seconds (a past HTTP date is 0); None when the header is absent,
        unreadable (``soon``, ``nan``), negative or beyond
        :data:`MAX_RETRY_AFTER_S` (``1e20``, a date in 2099): the caller then
        follows its backoff schedule.
    """
    resp = getattr(exc, "response", None)
    if resp is None:
        return None
    value = resp.headers.get("retry-after")
    if not value:
        return None
    try:
        delay = float(value)
    except ValueError:
        try:  # an HTTP date
            when = email.utils.parsedate_to_datetime(value)
        except (ValueError, TypeError, IndexError, OverflowError):
            return None  # unreadable ("soon"): fall back to backoff
        if when is None:
            return None
        delay = max(0.0, when.timestamp() - time.time())
    if not math.isfinite(delay) or not 0 <= delay <= MAX_RETRY_AFTER_S:
        return None
    return delay


def backoff(attempt: int, base_s: float, cap_s: float) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...): ``base * 2**(attempt-1)``, capped, jittered to 50-100 %."""
    return min(cap_s, base_s * 2 ** min(attempt - 1, 64)) * random.uniform(0.5, 1.0)


async def pause(seconds: float) -> None:
    """Wait between attempts (one place, so tests can count the waits instead of sleeping)."""
    await asyncio.sleep(seconds)


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``[redacted]``.

    Keys shorter than :data:`MIN_SECRET_CHARS` are left alone: they are no
    secrets (``not-needed`` for a local server is not passed here) and
    replacing them would garble replies.
    """
    if not secret or len(secret) < MIN_SECRET_CHARS or not isinstance(text, str):
        return text
    return text.replace(secret, REDACTED)


class EmptyReply(Exception):
    """A 200 reply without an answer; retried like a 5xx, never cached."""


def reply_of(raw: bytes) -> tuple[str, str | None, dict | None]:
    """Text, ``finish_reason`` and usage of a chat completion body.

    Raises :class:`EmptyReply` (with the reason) for a body that holds no
    answer: not JSON, an ``error`` object, no or empty ``choices``, no
    message or ``content: null``.
    """
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        head = raw[:40].decode("utf-8", "replace").strip()
        raise EmptyReply(f"body is not JSON ({head!r}...)") from None
    if not isinstance(body, dict):
        raise EmptyReply("body is not a JSON object")
    if body.get("error"):
        err = body["error"]
        msg = err.get("message", err) if isinstance(err, dict) else err
        raise EmptyReply(f"error in a 200 reply: {str(msg)[:200]}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise EmptyReply("no choices" if choices is None else "empty choices")
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise EmptyReply("no message content" if content is None else "content is not text")
    usage = body.get("usage")
    if isinstance(usage, dict):
        usage = {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens")}
    else:
        usage = None
    return content, choice.get("finish_reason"), usage


class OpenAIChatSubject:
    """A chat model behind an OpenAI-compatible endpoint.

    Parameters
    ----------
    options : ChatOptions
        Model, endpoint and request parameters.
    api_key : str, optional
        The key (default ``OPENAI_API_KEY``); never written anywhere.
    cache : ResponseCache, optional
        Where replies that hold an answer are kept.
    cache_scope : str
        ``"global"``, or the experiment folder that alone may replay a cached reply.
    folder : str, optional
        The experiment folder, recorded with each cached reply.
    """

    def __init__(
        self,
        options: ChatOptions,
        api_key: str | None = None,
        cache: ResponseCache | None = None,
        cache_scope: str = "global",
        folder: str | None = None,
    ):
        self.options = options
        self.name = f"openai:{options.model}"
        base_url = options.base_url or os.environ.get("OPENAI_BASE_URL")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        self._secret = key  # redacted wherever a reply or an error is kept
        if not key:
            if base_url is None:
                raise FatalSubjectError(
                    "no API key: set OPENAI_API_KEY or pass --api-key-file (or --api-key)"
                )
            key = "not-needed"  # local servers (vLLM, Ollama, LM Studio) ignore it
        self.base_url = base_url
        self.client = openai.AsyncOpenAI(
            api_key=key, base_url=base_url, max_retries=0, timeout=options.timeout_s
        )
        self.cache = cache
        # "global", or the experiment folder whose replies may be replayed (``--cache-scope folder``)
        self.cache_scope = cache_scope
        self.folder = folder  # the experiment folder, recorded with each cached reply
        self.endpoint = str(self.client.base_url).rstrip("/")

    def _redact(self, text: str) -> str:
        return redact(text, self._secret)

    def payload(self, request: Request) -> dict:
        """The chat-completion request body of a request (the task's ``max_tokens`` if it sets one)."""
        o = self.options
        # a task that lets the model reason sets its own reply budget (Request.max_tokens)
        max_tokens = request.max_tokens if request.max_tokens is not None else o.max_tokens
        body = {
            "model": o.model,
            "messages": to_messages(request),
            "temperature": o.temperature,
            "max_tokens": max_tokens,
        }
        if o.reasoning_effort:
            body["reasoning_effort"] = o.reasoning_effort
        return body

    def cache_key(self, body: dict, request: Request) -> str:
        """Everything that determines the reply: endpoint, request body, trial identity, scope."""
        identity = {
            k: request.meta.get(k)
            for k in ("subject", "task", "modality", "condition", "session", "run", "trial", "seed")
        }
        return request_key(
            body, {**identity, "endpoint": self.endpoint, "cache_scope": self.cache_scope}
        )

    async def complete(self, request: Request) -> Reply:
        """Ask the model (or replay the cache), retrying transient failures."""
        body = self.payload(request)
        key = self.cache_key(body, request) if self.cache is not None else None
        if key is not None and (hit := self.cache.get(key)) is not None:
            return Reply(
                text=hit["text"],
                usage=hit.get("usage"),
                cached=True,
                attempts=0,
                finish_reason=hit.get("finish_reason"),
                cached_from=hit.get("folder") or "an earlier run",
            )
        attempt = 0
        waited = 0.0  # seconds slept between attempts, bounded by max_wait_s
        while True:
            attempt += 1
            t0 = time.perf_counter()
            try:
                # the SDK's low-level post: the same request and error classes as
                # chat.completions.create, without its per-request deep walk of the
                # messages (16 ms per request with image history); the raw body is
                # checked here, and the whole request is bounded by the time-out
                async with asyncio.timeout(self.options.timeout_s):
                    resp = await self.client.post(
                        "/chat/completions", body=body, cast_to=httpx.Response
                    )
                text, finish, usage = reply_of(resp.content)
            except (
                openai.AuthenticationError,
                openai.PermissionDeniedError,
                openai.NotFoundError,
            ) as exc:
                raise FatalSubjectError(self._redact(f"{type(exc).__name__}: {exc}")) from None
            except (
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APITimeoutError,
                openai.APIConnectionError,
                openai.ConflictError,
                TimeoutError,
                EmptyReply,
            ) as exc:
                if isinstance(exc, TimeoutError):
                    what = f"time-out: no complete reply within {self.options.timeout_s:g} s"
                elif isinstance(exc, EmptyReply):
                    what = f"reply without an answer: {exc}"
                else:
                    status = getattr(exc, "status_code", None)
                    what = f"{type(exc).__name__} ({status}): {exc}"
                if attempt >= self.options.max_attempts:
                    raise SubjectError(
                        self._redact(f"gave up after {attempt} attempts: {what}")
                    ) from None
                delay = retry_after(exc)
                if delay is None:
                    delay = backoff(attempt, self.options.backoff_s, self.options.backoff_cap_s)
                delay = min(delay, self.options.backoff_cap_s)
                if waited + delay > self.options.max_wait_s:
                    raise SubjectError(
                        self._redact(
                            f"gave up after {attempt} attempts and {waited:.0f} s of waiting "
                            f"(the next wait of {delay:.0f} s would pass --max-wait "
                            f"{self.options.max_wait_s:g}): {what}"
                        )
                    ) from None
                await pause(delay)
                waited += delay
                continue
            except openai.APIStatusError as exc:  # other 4xx: this request cannot succeed
                raise SubjectError(
                    self._redact(f"{type(exc).__name__} ({exc.status_code}): {exc}")
                ) from None
            latency = time.perf_counter() - t0
            text = self._redact(text)  # a key echoed by the server is kept nowhere
            if key is not None:
                self.cache.put(
                    key,
                    text,
                    usage,
                    finish_reason=finish,
                    folder=self.folder,
                    endpoint=self.endpoint,
                )
            return Reply(
                text=text, latency_s=latency, usage=usage, attempts=attempt, finish_reason=finish
            )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.close()
