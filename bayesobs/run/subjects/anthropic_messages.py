"""``anthropic:<model>``: Claude through Anthropic's Messages API and its official SDK."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from functools import lru_cache

import anthropic
import httpx2

from ...chat import FatalSubjectError, Reply, Request, SubjectError
from ...errors import BayesobsInputError
from ..reasoning import reasoning_budget
from .cache import ResponseCache
from .openai_chat import (
    CachedReplies,
    ChatOptions,
    EmptyReply,
    public_url,
    redact,
)
from .retries import pause, retry_delay

MIN_THINKING_BUDGET = 1024  # the API's least budget_tokens
EMPTY_ANSWER = "(no answer)"  # an earlier empty answer, as the API refuses empty assistant turns
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "refusal": "content_filter",
}
FATAL_CODES = ("enforced_spend_limit_reached",)  # a 429 that no wait can cure


@lru_cache(maxsize=8192)
def b64(png: bytes) -> str:
    """Base64 of a PNG (cached: history images recur in every request)."""
    return base64.b64encode(png).decode()


def image_block(png: bytes) -> dict:
    """An image content block of a PNG, base64-encoded."""
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": b64(png)},
    }


def to_messages(request: Request) -> list[dict]:
    """Messages API turns of a request (the system prompt goes apart, as ``system``)."""
    msgs: list[dict] = []
    for t in request.turns:
        if t.role == "assistant":
            msgs.append({"role": "assistant", "content": t.text or EMPTY_ANSWER})
            continue
        pngs = t.pngs
        if not pngs:
            msgs.append({"role": "user", "content": t.text or ""})
            continue
        blocks: list[dict] = []
        if t.text is not None:
            blocks.append({"type": "text", "text": t.text})
        blocks += [image_block(p) for p in pngs]
        msgs.append({"role": "user", "content": blocks})
    return msgs


def reply_of(raw: bytes) -> tuple[str, str | None, dict | None, dict]:
    """Text, ``finish_reason``, usage and token details of a Messages API body."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        head = raw[:40].decode("utf-8", "replace").strip()
        raise EmptyReply(f"body is not JSON ({head!r}...)") from None
    if not isinstance(body, dict):
        raise EmptyReply("body is not a JSON object")
    if body.get("type") == "error" or body.get("error"):
        err = body.get("error")
        msg = err.get("message", err) if isinstance(err, dict) else err
        raise EmptyReply(f"error in a 200 reply: {str(msg)[:200]}")
    content = body.get("content")
    if not isinstance(content, list):
        raise EmptyReply("no content" if content is None else "content is not a list")
    blocks = [b for b in content if isinstance(b, dict)]
    texts = [b.get("text") for b in blocks if b.get("type") == "text"]
    if any(not isinstance(t, str) for t in texts):
        raise EmptyReply("a text block without text")
    text = "".join(texts)
    stop = body.get("stop_reason")
    finish = FINISH_REASONS.get(stop, stop)
    raw_usage = body.get("usage")
    usage = None
    details: dict = {}
    if isinstance(raw_usage, dict):

        def count(key: str) -> int:
            value = raw_usage.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        out = raw_usage.get("output_tokens")
        usage = {
            "prompt_tokens": count("input_tokens")
            + count("cache_creation_input_tokens")
            + count("cache_read_input_tokens"),
            "completion_tokens": out,
        }
        if isinstance(raw_usage.get("cache_read_input_tokens"), int):
            details["cached_tokens"] = raw_usage["cache_read_input_tokens"]
        thought = any(b.get("type") in ("thinking", "redacted_thinking") for b in blocks)
        if thought and not texts and isinstance(out, int) and out > 0:
            details["reasoning_tokens"] = out  # every output token went to thinking
    return text, finish, usage, details


class AnthropicSubject(CachedReplies):
    """A Claude model behind Anthropic's Messages API."""

    def __init__(
        self,
        options: ChatOptions,
        api_key: str | None = None,
        cache: ResponseCache | None = None,
        cache_scope: str = "global",
        folder: str | None = None,
    ):
        self.options = options
        self.name = f"anthropic:{options.model}"
        if options.logprobs is not None:
            raise BayesobsInputError(
                f"--logprobs: {self.name}: Anthropic's Messages API returns no logprobs"
            )
        budget = reasoning_budget(options.reasoning_effort, options.reasoning_budget)
        if budget and budget < MIN_THINKING_BUDGET:
            raise BayesobsInputError(
                f"--reasoning-budget {budget}: {self.name}: extended thinking needs at least "
                f"{MIN_THINKING_BUDGET} tokens"
            )
        base_url = options.base_url or os.environ.get("ANTHROPIC_BASE_URL")
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        self._secret = key
        if not key:
            if base_url is None:
                raise BayesobsInputError(  # the user's to fix: exit 2, not a failed run
                    "no API key: set ANTHROPIC_API_KEY or pass --api-key-file (or --api-key)"
                )
            key = "not-needed"  # a local server
        self.client = anthropic.AsyncAnthropic(
            api_key=key, base_url=base_url, max_retries=0, timeout=options.timeout_s
        )
        self.endpoint = public_url(str(self.client.base_url).rstrip("/"))  # written: no key
        self.cache = cache
        self.cache_scope = cache_scope
        self.folder = folder
        self.adaptations: list[dict] = []  # the runner's report hook; the Messages API needs none
        self.pacer = None  # set by the runner with --concurrency auto (bayesobs.run.concurrency)

    def _redact(self, text: str) -> str:
        return redact(text, self._secret)

    @property
    def thinking_budget(self) -> int:
        """Tokens of extended thinking each request allows (0: no thinking)."""
        o = self.options
        return reasoning_budget(o.reasoning_effort, o.reasoning_budget)

    def budget(self, request: Request) -> int:
        """``max_tokens``: the visible answer's budget plus the thinking budget."""
        o = self.options
        visible = request.max_tokens if request.max_tokens is not None else o.max_tokens
        return visible + self.thinking_budget

    def payload(self, request: Request) -> dict:
        """The Messages API request body of a request."""
        o = self.options
        body: dict = {
            "model": o.model,
            "max_tokens": self.budget(request),
            "system": request.system,
            "messages": to_messages(request),
        }
        if self.thinking_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        else:
            body["temperature"] = o.temperature
        return body

    @property
    def temperature_effective(self) -> float:
        """The temperature replies are sampled at (1 with extended thinking: the API's only one)."""
        return 1.0 if self.thinking_budget else self.options.temperature

    def summary(self) -> dict:
        """The run's request choices, for the manifest."""
        return {
            "api": "anthropic-messages",
            "token_param": "max_tokens",
            "temperature_effective": self.temperature_effective,
            "thinking_budget": self.thinking_budget or None,
            "image_detail": None,
        }

    def columns(self, body: dict, details: dict) -> dict:
        """A reply's API columns of the trial row (the same for every body of a run)."""
        return {
            "token_param": "max_tokens",
            "temperature_effective": self.temperature_effective,
            "image_detail": None,
            **details,
        }

    def _fatal(self, exc: Exception) -> bool:
        if isinstance(
            exc,
            (
                anthropic.AuthenticationError,
                anthropic.PermissionDeniedError,
                anthropic.NotFoundError,
                anthropic.PaymentRequiredError,
            ),
        ):
            return True
        return (
            isinstance(exc, anthropic.RateLimitError)
            and getattr(exc, "error_code", None) in FATAL_CODES
        )

    def _describe(self, exc: Exception) -> str:
        if isinstance(exc, TimeoutError):
            return f"time-out: no complete reply within {self.options.timeout_s:g} s"
        if isinstance(exc, EmptyReply):
            return f"reply without an answer: {exc}"
        status = getattr(exc, "status_code", None)
        kind = getattr(exc, "type", None)
        where = f"{status}, {kind}" if kind else f"{status}"
        return f"{type(exc).__name__} ({where}): {exc}"

    async def complete(self, request: Request) -> Reply:
        """Ask the model (or replay the cache), retrying transient failures."""
        body = self.payload(request)
        key, hit = self._replay(body, request)
        if hit is not None:
            return hit
        attempt = 0
        waited = 0.0
        while True:
            attempt += 1
            epoch = self.pacer.epoch if self.pacer is not None else 0
            t0 = time.perf_counter()
            try:
                # the SDK's low-level post: its error classes and headers, the raw body checked here
                async with asyncio.timeout(self.options.timeout_s):
                    resp = await self.client.post(
                        "/v1/messages", body=body, cast_to=httpx2.Response
                    )
                text, finish, usage, details = reply_of(resp.content)
            except anthropic.APIStatusError as exc:
                if self._fatal(exc):
                    raise FatalSubjectError(self._redact(self._describe(exc))) from None
                if not isinstance(
                    exc,
                    (
                        anthropic.RateLimitError,
                        anthropic.InternalServerError,
                        anthropic.ConflictError,
                    ),
                ):  # invalid_request_error and other 4xx: this request cannot succeed
                    raise SubjectError(self._redact(self._describe(exc))) from None
                if isinstance(exc, anthropic.RateLimitError) and self.pacer is not None:
                    self.pacer.throttled(epoch)
                waited = await self._wait(exc, attempt, waited)
                continue
            except (anthropic.APIConnectionError, TimeoutError, EmptyReply) as exc:
                waited = await self._wait(exc, attempt, waited)
                continue
            latency = time.perf_counter() - t0
            if self.pacer is not None:
                self.pacer.succeeded(epoch)
            text = self._redact(text)
            return self._answered(
                key, body, text, finish, usage, details, latency_s=latency, attempts=attempt
            )

    async def _wait(self, exc: Exception, attempt: int, waited: float) -> float:
        """Sleep before the next attempt; the new total wait.  Raises when attempts or time run out."""
        delay = retry_delay(exc, self._describe(exc), attempt, waited, self.options, self._redact)
        await pause(delay)
        return waited + delay

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.close()
