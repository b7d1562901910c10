"""``openai:<model>``: any OpenAI-compatible chat API through the official SDK."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import urllib.parse
from dataclasses import dataclass

import httpx
import openai

from ...chat import FatalSubjectError, Reply, Request, SubjectError
from ...errors import BayesobsInputError
from ...logprobs import MAX_TOP_LOGPROBS, compact
from ..imagecost import DEFAULT_IMAGE_DETAIL, IMAGE_DETAILS
from ..reasoning import DEFAULT_REASONING_BUDGET, TOKEN_PARAMS, reasoning_budget
from .cache import ResponseCache, request_key
from .retries import pause, retry_delay
from .turns import data_url

SAMPLING_PARAMS = ("temperature", "top_p")  # dropped, once, when a server refuses them
LOGPROB_PARAMS = ("logprobs", "top_logprobs")  # --logprobs; dropped together when refused


@dataclass
class ChatOptions:
    """Options of an OpenAI-compatible subject (everything but the key is logged)."""

    model: str
    base_url: str | None = None
    temperature: float = 0.7
    max_tokens: int = 64  # room for a number and a short note; search answers lead their reply
    reasoning_effort: str | None = None  # e.g. "minimal" or "none" where the API supports it
    reasoning_budget: int = DEFAULT_REASONING_BUDGET  # added to the reply budget with an effort
    token_param: str = "auto"  # "auto", "max_tokens" or "max_completion_tokens"
    timeout_s: float = 120.0
    max_attempts: int = 12
    backoff_s: float = 1.0
    backoff_cap_s: float = 300.0
    max_wait_s: float = 600.0  # total seconds one request may wait between its attempts
    logprobs: int | None = None  # --logprobs K: ask for the top K alternatives of each token
    image_detail: str = DEFAULT_IMAGE_DETAIL  # --image-detail: OpenAI's ``detail`` of image parts

    def public(self) -> dict:
        """Every option (the key is not an option, so nothing secret)."""
        return {k: v for k, v in self.__dict__.items()}


def to_messages(request: Request, detail: str = DEFAULT_IMAGE_DETAIL) -> list[dict]:
    """Chat messages of a request: system, then user/assistant turns (images with ``detail``)."""
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
        parts += [
            {"type": "image_url", "image_url": {"url": data_url(p), "detail": detail}} for p in pngs
        ]
        msgs.append({"role": "user", "content": parts})
    return msgs


def has_images(body: dict) -> bool:
    """Whether a chat-completion body shows any image (its ``detail`` then applies)."""
    return any(
        isinstance(m.get("content"), list)
        and any(p.get("type") == "image_url" for p in m["content"])
        for m in body.get("messages", ())
    )


REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8  # shorter "keys" (a local server's placeholder) are not secrets


# query parameters that carry a credential (``?api-key=...``): never written anywhere
_SECRET_PARAM = re.compile(
    r"(^|[_-])(api_?key|key|token|secret|pass(word|wd)?|auth\w*|sig(nature)?|credentials?)$",
    re.IGNORECASE,
)


def public_url(url: str | None) -> str | None:
    """``url`` without a user or password (``http://user:KEY@host``) or key-like query parameters."""
    if not url:
        return url
    parts = urllib.parse.urlsplit(url)
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if not _SECRET_PARAM.search(k)]
    query = parts.query if len(kept) == len(pairs) else urllib.parse.urlencode(kept)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=host, query=query))


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``[redacted]``."""
    if not secret or len(secret) < MIN_SECRET_CHARS or not isinstance(text, str):
        return text
    return text.replace(secret, REDACTED)


def _other(param: str) -> str:
    return "max_tokens" if param == "max_completion_tokens" else "max_completion_tokens"


class EmptyReply(Exception):
    """A 200 reply without an answer; retried like a 5xx, never cached."""


def token_details(usage: dict) -> dict:
    """``reasoning_tokens`` and ``cached_tokens`` of a reply's usage, where the API reports them."""
    out = {}
    for outer, key in (
        ("completion_tokens_details", "reasoning_tokens"),
        ("prompt_tokens_details", "cached_tokens"),
    ):
        inner = usage.get(outer)
        value = inner.get(key) if isinstance(inner, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            out[key] = value
    return out


def reply_of(raw: bytes) -> tuple[str, str | None, dict | None, dict]:
    """Text, ``finish_reason``, usage and token details of a chat completion body."""
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
    finish = choice.get("finish_reason")
    if content is None and isinstance(message, dict) and finish == "length":
        content = ""  # the whole budget went before a visible word (reasoning)
    if not isinstance(content, str):
        raise EmptyReply("no message content" if content is None else "content is not text")
    raw_usage = body.get("usage")
    usage = details = None
    if isinstance(raw_usage, dict):
        usage = {k: raw_usage.get(k) for k in ("prompt_tokens", "completion_tokens")}
        details = token_details(raw_usage)
    details = details or {}
    lp = choice.get("logprobs")
    tokens = compact(lp.get("content")) if isinstance(lp, dict) else None
    if tokens is not None:
        details["logprobs"] = tokens
    return content, finish, usage, details


def refused_param(exc: Exception, sent: dict) -> str | None:
    """The request parameter an HTTP 400 refuses, if it names one that was sent."""
    candidates = [k for k in (*TOKEN_PARAMS[1:], *SAMPLING_PARAMS, *LOGPROB_PARAMS) if k in sent]
    param = getattr(exc, "param", None)
    if param in candidates:
        return param
    message = str(getattr(exc, "message", "") or exc)
    # the first one named: "'max_tokens' is not supported ... Use 'max_completion_tokens'"
    named = [(message.find(k), k) for k in candidates if re.search(rf"\b{k}\b", message)]
    return min(named)[1] if named else None


def server_default(exc: Exception) -> float | None:
    """The default value a refusal names (``Only the default (1) value is supported``), if any."""
    m = re.search(r"default \((-?\d+(?:\.\d+)?)\)", str(getattr(exc, "message", "") or exc))
    return float(m.group(1)) if m else None


# kept with a cached reply (model: the one an inspect: subject's provider reported)
CACHED_DETAILS = ("reasoning_tokens", "cached_tokens", "logprobs", "model")


class CachedReplies:
    """The response cache of an API subject: its keys and replays (``openai:``, ``anthropic:``)."""

    cache: ResponseCache | None
    endpoint: str
    cache_scope: str

    def _replay(self, body: dict, request: Request) -> tuple[str | None, Reply | None]:
        """The cache key of a body and the cached reply, if any."""
        if self.cache is None:
            return None, None
        key = self.cache_key(body, request)
        hit = self.cache.get(key)
        if hit is None:
            return key, None
        details = {k: hit[k] for k in CACHED_DETAILS if k in hit}
        reply = Reply(
            text=hit["text"],
            usage=hit.get("usage"),
            cached=True,
            attempts=0,
            finish_reason=hit.get("finish_reason"),
            cached_from=hit.get("folder") or "an earlier run",
            extra=self.columns(body, details),
        )
        return key, reply

    def _answered(self, key, body, text, finish, usage, details, **reply) -> Reply:
        """A reply that holds an answer, cached under ``key`` (None: not cached), as the runner takes it."""
        if key is not None:
            self.cache.put(
                key,
                text,
                usage,
                finish_reason=finish,
                folder=self.folder,
                endpoint=self.endpoint,
                **details,
            )
        extra = self.columns(body, details)
        return Reply(text=text, usage=usage, finish_reason=finish, extra=extra, **reply)

    def cache_key(self, body: dict, request: Request) -> str:
        """Everything that determines the reply: endpoint, request body, trial identity, scope."""
        identity = {
            k: request.meta.get(k)
            for k in ("subject", "task", "modality", "condition", "session", "run", "trial", "seed")
        }
        return request_key(
            body, {**identity, "endpoint": self.endpoint, "cache_scope": self.cache_scope}
        )


class OpenAIChatSubject(CachedReplies):
    """A chat model behind an OpenAI-compatible endpoint."""

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
                raise BayesobsInputError(  # the user's to fix: exit 2, not a failed run
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
        self.endpoint = public_url(str(self.client.base_url).rstrip("/"))  # written: no key
        if options.token_param not in TOKEN_PARAMS:
            raise FatalSubjectError(
                f"token parameter must be one of {', '.join(TOKEN_PARAMS)}, not {options.token_param!r}"
            )
        # what the server takes, found out during the run and remembered for it
        self.token_param = (
            "max_completion_tokens" if options.token_param == "auto" else options.token_param
        )
        self.refused: set[str] = set()  # token parameters the server refused (HTTP 400)
        self.dropped: dict[str, float | None] = {}  # refused sampling parameter -> server default
        self.adaptations: list[dict] = []  # each change, for the terminal, runs.jsonl, manifest
        self.settled = False  # a first request has come back: the others need not wait
        self._overrun_switched = False
        self._probe: asyncio.Lock | None = None
        k = options.logprobs
        if k is not None and (isinstance(k, bool) or not 0 <= k <= MAX_TOP_LOGPROBS):
            raise FatalSubjectError(
                f"--logprobs must be an integer from 0 to {MAX_TOP_LOGPROBS} (the APIs' limit), not {k!r}"
            )
        self.logprobs_missing = False  # replies came without the logprobs asked for
        if options.image_detail not in IMAGE_DETAILS:
            raise FatalSubjectError(
                f"--image-detail must be one of {', '.join(IMAGE_DETAILS)}, not {options.image_detail!r}"
            )
        self.pacer = None  # set by the runner with --concurrency auto (bayesobs.run.concurrency)

    def _redact(self, text: str) -> str:
        return redact(text, self._secret)

    def budget(self, request: Request) -> int:
        """The reply budget: the visible answer's, plus the reasoning budget with an effort."""
        o = self.options
        # a task that lets the model reason sets its own reply budget (Request.max_tokens)
        visible = request.max_tokens if request.max_tokens is not None else o.max_tokens
        return visible + reasoning_budget(o.reasoning_effort, o.reasoning_budget)

    def payload(self, request: Request) -> dict:
        """The chat-completion request body of a request, as the server takes it now."""
        o = self.options
        body: dict = {"model": o.model, "messages": to_messages(request, o.image_detail)}
        if "temperature" not in self.dropped:
            body["temperature"] = o.temperature
        body[self.token_param] = self.budget(request)
        if o.reasoning_effort:
            body["reasoning_effort"] = o.reasoning_effort
        if o.logprobs is not None and "logprobs" not in self.dropped:
            body["logprobs"] = True
            body["top_logprobs"] = o.logprobs
        return body

    @property
    def temperature_effective(self) -> float | None:
        """The temperature replies are sampled at (a refused one: the server's default, if named)."""
        if "temperature" in self.dropped:
            return self.dropped["temperature"]
        return self.options.temperature

    def summary(self) -> dict:
        """The run's request choices, for the manifest."""
        o = self.options
        return {
            "token_param_option": o.token_param,
            "token_param": self.token_param,
            "dropped": sorted(self.dropped),
            "temperature_effective": self.temperature_effective,
            "reasoning_budget": reasoning_budget(o.reasoning_effort, o.reasoning_budget) or None,
            "logprobs": o.logprobs,
            "image_detail": o.image_detail,
            "logprobs_effective": (
                o.logprobs
                if o.logprobs is not None
                and "logprobs" not in self.dropped
                and not self.logprobs_missing
                else None
            ),
        }

    def columns(self, body: dict, details: dict) -> dict:
        """A reply's API columns of the trial row (``token_param``, ``image_detail``, token details)."""
        param = next((k for k in TOKEN_PARAMS[1:] if k in body), None)
        temperature = body.get("temperature", self.temperature_effective)
        return {
            "token_param": param,
            "temperature_effective": temperature,
            "image_detail": self.options.image_detail if has_images(body) else None,
            **details,
        }

    def _adapt(self, record: dict) -> None:
        self.adaptations.append({"subject": self.name, **record})

    def _refusal(self, param: str, exc: Exception) -> None:
        """Remember a parameter the server refused (HTTP 400) for the rest of the run."""
        if param in LOGPROB_PARAMS:
            if "logprobs" in self.dropped:
                return
            self.dropped["logprobs"] = None
            self._adapt(
                {
                    "dropped": "logprobs",
                    "note": f"the server refused {param} (HTTP 400): --logprobs "
                    f"{self.options.logprobs} is off for the rest of the run, which goes on "
                    "without answer distributions",
                }
            )
            return
        if param in SAMPLING_PARAMS:
            if param in self.dropped:
                return  # a concurrent request found out first
            self.dropped[param] = default = server_default(exc)
            value = getattr(self.options, param, None)
            applies = (
                f"the server's default, {default:g},"
                if default is not None
                else "the server's default"
            )
            self._adapt(
                {
                    "dropped": param,
                    "temperature_effective": self.temperature_effective,
                    "note": f"the server refused {param} {value:g} (HTTP 400): left out for the "
                    f"rest of the run ({applies} applies; logged as temperature_effective)",
                }
            )
            return
        self.refused.add(param)
        if self.token_param != param:
            return
        self.token_param = other = _other(param)
        self._adapt(
            {
                "token_param": other,
                "refused": param,
                "note": f"the server refused {param} (HTTP 400): the reply budget goes as {other} "
                "for the rest of the run",
            }
        )

    def _overrun(self, param: str, used: int, budget: int) -> bool:
        """A reply overran the budget sent: switch to the other token parameter (once a run)."""
        other = _other(param)
        if self.token_param != param:
            return True
        if self._overrun_switched or other in self.refused:
            return False
        self._overrun_switched = True
        self.token_param = other
        self._adapt(
            {
                "token_param": other,
                "ignored": param,
                "completion_tokens": used,
                "budget": budget,
                "note": f"a reply overran its budget ({used} completion tokens for {param} "
                f"{budget}): the server ignores {param}, so the budget goes as {other} for the "
                "rest of the run (that trial was asked again)",
            }
        )
        return True

    async def complete(self, request: Request) -> Reply:
        """Ask the model (or replay the cache), retrying transient failures."""
        if not self.settled:
            if self._probe is None:
                self._probe = asyncio.Lock()
            async with self._probe:
                if not self.settled:  # else settled while this one waited: go on at once
                    try:
                        reply = await self._complete(request)
                    except BaseException:
                        self.settled = True  # a failing server: the others need not queue
                        raise
                    self.settled = not reply.cached
                    return reply
        return await self._complete(request)

    async def _complete(self, request: Request) -> Reply:
        body = self.payload(request)
        key, hit = self._replay(body, request)
        if hit is not None:
            return hit
        retried: set[str] = set()  # what this request already changed: each once
        attempt = 0
        waited = 0.0  # seconds slept between attempts, bounded by max_wait_s
        while True:
            attempt += 1
            epoch = self.pacer.epoch if self.pacer is not None else 0
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
                text, finish, usage, details = reply_of(resp.content)
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
                if isinstance(exc, openai.RateLimitError) and self.pacer is not None:
                    self.pacer.throttled(epoch)  # --concurrency auto: fewer sessions at once
                if isinstance(exc, TimeoutError):
                    what = f"time-out: no complete reply within {self.options.timeout_s:g} s"
                elif isinstance(exc, EmptyReply):
                    what = f"reply without an answer: {exc}"
                else:
                    status = getattr(exc, "status_code", None)
                    what = f"{type(exc).__name__} ({status}): {exc}"
                delay = retry_delay(exc, what, attempt, waited, self.options, self._redact)
                await pause(delay)
                waited += delay
                continue
            except openai.BadRequestError as exc:
                param = refused_param(exc, body)
                if param is None or param in retried:  # this request cannot succeed
                    raise SubjectError(
                        self._redact(f"{type(exc).__name__} ({exc.status_code}): {exc}")
                    ) from None
                retried.add(param)  # the retry goes without it, once
                self._refusal(param, exc)
                body = self.payload(request)
                key, hit = self._replay(body, request)
                if hit is not None:
                    return hit
                continue
            except openai.APIStatusError as exc:  # other 4xx: this request cannot succeed
                raise SubjectError(
                    self._redact(f"{type(exc).__name__} ({exc.status_code}): {exc}")
                ) from None
            latency = time.perf_counter() - t0
            if self.pacer is not None:
                self.pacer.succeeded(epoch)
            param = next(k for k in TOKEN_PARAMS[1:] if k in body)
            used = (usage or {}).get("completion_tokens")
            if (
                self.options.token_param == "auto"
                and "overrun" not in retried
                and isinstance(used, int)
                and used > body[param]
                and self._overrun(param, used, body[param])
            ):  # the server ignored the budget: this reply is not kept, the trial asked again
                retried.add("overrun")
                body = self.payload(request)
                key, hit = self._replay(body, request)
                if hit is not None:
                    return hit
                continue
            text = self._redact(text)  # a key echoed by the server is kept nowhere
            if "logprobs" in body and "logprobs" not in details and not self.logprobs_missing:
                self.logprobs_missing = True
                self._adapt(
                    {
                        "logprobs_missing": True,
                        "note": f"the server returned no logprobs for --logprobs "
                        f"{self.options.logprobs}: the run goes on without answer distributions "
                        "for this subject",
                    }
                )
            return self._answered(
                key, body, text, finish, usage, details, latency_s=latency, attempts=attempt
            )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.close()
