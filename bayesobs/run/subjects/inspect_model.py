"""``inspect:PROVIDER/MODEL``: any model inspect_ai reaches, through its public model API.

Retries: inspect's own retry loop is off (``GenerateConfig(max_retries=0)``); a failure
that the provider's :meth:`ModelAPI.should_retry` calls transient is retried by the
runner's backoff (``--max-attempts``, ``--max-wait``, a believable ``Retry-After``), as
for ``openai:``, so waits are not doubled.  A provider SDK's own short retries inside
one attempt (the OpenAI SDK's two) stay as the provider set them.
"""

from __future__ import annotations

import asyncio
import re
import time

from ...chat import FatalSubjectError, Reply, Request, SubjectError
from ...errors import BayesobsInputError
from ...logprobs import compact
from ..reasoning import reasoning_budget
from .cache import ResponseCache
from .openai_chat import (
    CachedReplies,
    ChatOptions,
    EmptyReply,
    public_url,
    redact,
    to_messages,
)
from .retries import pause, retry_delay
from .turns import inspect_messages

FINISH_REASONS = {"max_tokens": "length", "model_length": "length"}  # inspect's StopReason
CONFIG_KEYS = (
    "temperature",
    "max_tokens",
    "reasoning_effort",
    "reasoning_tokens",
    "logprobs",
    "top_logprobs",
)


def one_line(exc: BaseException) -> str:
    """An exception's message as one plain line (inspect's console markup and layout dropped)."""
    text = getattr(exc, "provider_message", None) or str(exc)
    # inspect's console markup ([bold]...[/bold]); other brackets (pip extras) kept
    text = re.sub(r"\[/?(bold|italic|dim|underline|red|green|blue|yellow)\]|\[/\]", "", text)
    return " ".join(text.split()) or type(exc).__name__


class InspectSubject(CachedReplies):
    """A model behind any of inspect_ai's providers (``get_model(...).generate``).

    Parameters
    ----------
    spec : str
        ``PROVIDER/MODEL`` as inspect names it (``openai/gpt-4o``, ``mockllm/model``).
    options : ChatOptions
        The chat options (``base_url`` goes to ``get_model``).
    api_key : str, optional
        The key (default: the provider's own environment variable); never written.
    cache : ResponseCache, optional
        The response cache.
    cache_scope : str, default "global"
        ``"global"`` or the folder whose replies may be replayed.
    folder : str, optional
        The experiment folder, recorded with each cached reply.

    Raises
    ------
    BayesobsInputError
        A malformed spec, or inspect's own message for an unknown provider, a
        missing provider package or a missing key (before any call).
    """

    def __init__(
        self,
        spec: str,
        options: ChatOptions,
        api_key: str | None = None,
        cache: ResponseCache | None = None,
        cache_scope: str = "global",
        folder: str | None = None,
    ):
        provider, _, model = spec.partition("/")
        self.name = f"inspect:{spec}"
        if not provider or not model:
            raise BayesobsInputError(
                f"subject {self.name!r}: use inspect:PROVIDER/MODEL, e.g. inspect:openai/gpt-4o"
            )
        from inspect_ai.model import GenerateConfig, get_model  # start-up time, as above

        self.options, self.provider, self._secret = options, provider, api_key
        base = {k: v for k, v in self.payload(None).items() if k in CONFIG_KEYS}
        try:  # inspect checks the provider, its package and its key here, before any call
            self.config = GenerateConfig(**base, max_retries=0)
            self.model = get_model(spec, base_url=options.base_url, api_key=api_key, memoize=False)
        except Exception as exc:
            raise BayesobsInputError(
                f"subject {self.name!r}: {self._redact(one_line(exc))}"
            ) from None
        self.endpoint = public_url(self.model.api.base_url) or self.name  # written: no key
        self.cache, self.cache_scope, self.folder = cache, cache_scope, folder
        self.adaptations: list[dict] = []  # the runner's report hook
        self.logprobs_missing = False
        self.pacer = None  # set by the runner with --concurrency auto

    def _redact(self, text: str) -> str:
        return redact(text, self._secret)

    def budget(self, request: Request | None) -> int:
        """The reply budget: the visible answer's, plus the reasoning budget with an effort."""
        o = self.options
        visible = (
            o.max_tokens if request is None or request.max_tokens is None else request.max_tokens
        )
        return visible + reasoning_budget(o.reasoning_effort, o.reasoning_budget)

    def payload(self, request: Request | None) -> dict:
        """What is sent: the OpenAI-shaped messages and the generate options (the cache key's body)."""
        o = self.options
        body: dict = {"model": self.name, "temperature": o.temperature}
        if request is not None:
            body["messages"] = to_messages(request, o.image_detail)
        body["max_tokens"] = self.budget(request)
        if o.reasoning_effort:
            body["reasoning_effort"] = o.reasoning_effort
            body["reasoning_tokens"] = (
                reasoning_budget(o.reasoning_effort, o.reasoning_budget) or None
            )
        if o.logprobs is not None:
            body["logprobs"] = True
            body["top_logprobs"] = o.logprobs
        return body

    def summary(self) -> dict:
        """The run's request choices, for the manifest."""
        o = self.options
        return {
            "api": "inspect",
            "provider": self.provider,
            "token_param": "max_tokens",
            "temperature_effective": o.temperature,
            "logprobs": o.logprobs,
            "logprobs_effective": None if self.logprobs_missing else o.logprobs,
            "image_detail": o.image_detail,
        }

    def columns(self, body: dict, details: dict) -> dict:
        """A reply's API columns of the trial row, with the provider and the model inspect reports."""
        images = any(isinstance(m["content"], list) for m in body.get("messages", ()))
        return {
            "token_param": "max_tokens",
            "temperature_effective": self.options.temperature,
            "image_detail": self.options.image_detail if images else None,
            "provider": self.provider,
            **details,
        }

    async def complete(self, request: Request) -> Reply:
        """Ask the model (or replay the cache), retrying what the provider calls transient."""
        body = self.payload(request)
        key, hit = self._replay(body, request)
        if hit is not None:
            return hit
        config = self.config.merge({"max_tokens": body["max_tokens"]})
        messages = inspect_messages(request, self.options.image_detail)
        attempt, waited = 0, 0.0
        while True:
            attempt += 1
            epoch = self.pacer.epoch if self.pacer is not None else 0
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(self.options.timeout_s):
                    out = await self.model.generate(messages, config=config)
                if out.error and not out.completion:
                    raise EmptyReply(f"error in the reply: {out.error}")
            except Exception as exc:
                # inspect's retry loop (off) wraps a retryable error (tenacity): the error itself
                last = getattr(exc, "last_attempt", None)
                exc = (last.exception() if last is not None else None) or exc
                what = self._redact(self._describe(exc))
                decision = self.model.api.should_retry(exc) if isinstance(exc, Exception) else False
                transient = isinstance(exc, (TimeoutError, EmptyReply)) or bool(decision)
                if not transient:
                    status = getattr(exc, "status_code", None)
                    fatal = status in (401, 403, 404) or self.model.api.is_auth_failure(exc)
                    raise (FatalSubjectError if fatal else SubjectError)(what) from None
                if getattr(decision, "kind", None) == "rate_limit" and self.pacer is not None:
                    self.pacer.throttled(epoch)
                delay = retry_delay(exc, what, attempt, waited, self.options, self._redact)
                await pause(delay)
                waited += delay
                continue
            if self.pacer is not None:
                self.pacer.succeeded(epoch)
            text, finish, usage, details = self._reply_of(out, body)
            return self._answered(
                key,
                body,
                text,
                finish,
                usage,
                details,
                latency_s=time.perf_counter() - t0,
                attempts=attempt,
            )

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, TimeoutError):
            return f"time-out: no complete reply within {self.options.timeout_s:g} s"
        return f"{type(exc).__name__}: {one_line(exc)}"

    def _reply_of(self, out, body: dict) -> tuple[str, str | None, dict | None, dict]:
        """Text, ``finish_reason``, usage and token details of an inspect ``ModelOutput``."""
        choice = out.choices[0] if out.choices else None
        stop = choice.stop_reason if choice is not None else None
        u = out.usage
        usage, details = None, {"model": out.model}
        if u is not None:
            cached, written = u.input_tokens_cache_read or 0, u.input_tokens_cache_write or 0
            usage = {"prompt_tokens": u.input_tokens + cached + written}
            usage["completion_tokens"] = u.output_tokens
            if u.reasoning_tokens is not None:  # the columns in openai:'s order
                details["reasoning_tokens"] = u.reasoning_tokens
            if u.input_tokens_cache_read is not None:
                details["cached_tokens"] = u.input_tokens_cache_read
        lp = choice.logprobs if choice is not None else None
        tokens = compact([t.model_dump() for t in lp.content]) if lp is not None else None
        if tokens is not None:
            details["logprobs"] = tokens
        elif "logprobs" in body and not self.logprobs_missing:
            self.logprobs_missing = True
            self.adaptations.append(
                {
                    "subject": self.name,
                    "logprobs_missing": True,
                    "note": f"the provider returned no logprobs for --logprobs "
                    f"{self.options.logprobs}: the run goes on without answer distributions "
                    "for this subject",
                }
            )
        text = self._redact(out.completion or "")
        return text, FINISH_REASONS.get(stop, stop), usage, details

    async def aclose(self) -> None:
        """Close the provider's client."""
        await self.model.api.aclose()
