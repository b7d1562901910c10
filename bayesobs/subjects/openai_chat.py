"""``openai:<model>``: any OpenAI-compatible chat API through the official SDK.

Images go as base64 PNG data URLs.  The SDK's own retries are off; this
module retries 429s (honouring ``Retry-After``), 5xx answers, time-outs and
connection errors with capped exponential backoff and jitter, generous
enough for day-long sweeps.  Requests that can never succeed (401, 403, 404)
stop the run at once.  The API key is read from the option or
``OPENAI_API_KEY`` and never written anywhere: not to the manifest, the trial
log, the cache or an error message.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import os
import random
import time
from dataclasses import dataclass
from functools import lru_cache

import openai
from openai.types.chat import ChatCompletion

from .base import FatalSubjectError, Reply, Request, SubjectError
from .cache import ResponseCache, request_key


@dataclass
class ChatOptions:
    """Options of an OpenAI-compatible subject (everything but the key is logged)."""

    model: str
    base_url: str | None = None
    temperature: float = 0.7
    max_tokens: int = 32
    reasoning_effort: str | None = None  # e.g. "minimal" or "none" where the API supports it
    timeout_s: float = 120.0
    max_attempts: int = 12
    backoff_s: float = 1.0
    backoff_cap_s: float = 300.0

    def public(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


@lru_cache(maxsize=8192)
def data_url(png: bytes) -> str:
    """``data:image/png;base64,...`` (cached: history images recur in every request)."""
    return "data:image/png;base64," + base64.b64encode(png).decode()


def to_messages(request: Request) -> list[dict]:
    """Chat messages of a request: system, then user/assistant turns."""
    msgs: list[dict] = [{"role": "system", "content": request.system}]
    for t in request.turns:
        if t.role == "assistant" or t.png is None:
            msgs.append({"role": t.role, "content": t.text or ""})
            continue
        parts = []
        if t.text is not None:
            parts.append({"type": "text", "text": t.text})
        parts.append({"type": "image_url", "image_url": {"url": data_url(t.png)}})
        msgs.append({"role": "user", "content": parts})
    return msgs


def _retry_after(exc: Exception) -> float | None:
    resp = getattr(exc, "response", None)
    if resp is None:
        return None
    value = resp.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time()) if when else None


class OpenAIChatSubject:
    """A chat model behind an OpenAI-compatible endpoint."""

    def __init__(
        self, options: ChatOptions, api_key: str | None = None, cache: ResponseCache | None = None
    ):
        self.options = options
        self.name = f"openai:{options.model}"
        base_url = options.base_url or os.environ.get("OPENAI_BASE_URL")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if base_url is None:
                raise FatalSubjectError("no API key: set OPENAI_API_KEY or pass --api-key")
            key = "not-needed"  # local servers (vLLM, Ollama, LM Studio) ignore it
        self._secret = key
        self.base_url = base_url
        self.client = openai.AsyncOpenAI(
            api_key=key, base_url=base_url, max_retries=0, timeout=options.timeout_s
        )
        self.cache = cache

    def _redact(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def payload(self, request: Request) -> dict:
        o = self.options
        body = {"model": o.model, "messages": to_messages(request), "temperature": o.temperature,
                "max_tokens": o.max_tokens}  # fmt: skip
        if o.reasoning_effort:
            body["reasoning_effort"] = o.reasoning_effort
        return body

    async def complete(self, request: Request) -> Reply:
        body = self.payload(request)
        identity = {
            k: request.meta.get(k)
            for k in ("subject", "task", "modality", "condition", "session", "run", "trial")
        }
        key = request_key(body, identity) if self.cache is not None else None
        if key is not None and (hit := self.cache.get(key)) is not None:
            return Reply(text=hit["text"], usage=hit.get("usage"), cached=True, attempts=0)
        attempt = 0
        while True:
            attempt += 1
            t0 = time.perf_counter()
            try:
                # the SDK's low-level post: the same request and error classes as
                # chat.completions.create, without its per-request deep walk of the
                # messages (16 ms per request with image history)
                resp = await self.client.post(
                    "/chat/completions", body=body, cast_to=ChatCompletion
                )
            except (
                openai.AuthenticationError,
                openai.PermissionDeniedError,
                openai.NotFoundError,
            ) as exc:
                raise FatalSubjectError(self._redact(f"{type(exc).__name__}: {exc}")) from None
            except (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                    openai.APIConnectionError, openai.ConflictError) as exc:  # fmt: skip
                status = getattr(exc, "status_code", None)
                if attempt >= self.options.max_attempts:
                    raise SubjectError(
                        self._redact(
                            f"gave up after {attempt} attempts: {type(exc).__name__} ({status}): {exc}"
                        )
                    ) from None
                delay = _retry_after(exc)
                if delay is None:
                    delay = min(
                        self.options.backoff_cap_s, self.options.backoff_s * 2 ** (attempt - 1)
                    )
                    delay *= random.uniform(0.5, 1.0)
                await asyncio.sleep(min(delay, self.options.backoff_cap_s))
                continue
            except openai.APIStatusError as exc:  # other 4xx: this request cannot succeed
                raise SubjectError(
                    self._redact(f"{type(exc).__name__} ({exc.status_code}): {exc}")
                ) from None
            latency = time.perf_counter() - t0
            text = (resp.choices[0].message.content or "") if resp.choices else ""
            usage = None
            if resp.usage is not None:
                usage = {
                    "prompt_tokens": resp.usage.prompt_tokens,
                    "completion_tokens": resp.usage.completion_tokens,
                }
            if key is not None:
                self.cache.put(key, text, usage)
            return Reply(text=text, latency_s=latency, usage=usage, attempts=attempt)

    async def aclose(self) -> None:
        await self.client.close()
