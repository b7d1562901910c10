"""A local server that answers like an OpenAI-compatible chat API.

For tests, benchmarks and offline dry runs of a pipeline: it listens on
127.0.0.1 only, records every request body it receives, and answers through a
*script*: a function of (request body, request number) returning an
:class:`Answer` (status, reply text, headers, delay, and for misbehaviour
tests a raw body, a ``finish_reason`` or a byte-by-byte trickle).  The
default script answers ``"0.5"`` at once.  A client that hangs up is not an
error (no traceback).

Modes (:data:`MODES`, ``--mode`` of ``python -m bayesobs.testing.fakeserver``) imitate
servers the runner must cope with:

``constant``
    Every request is answered with the reply text.
``reasoning``
    Like OpenAI's reasoning models (the o-series, GPT-5): ``max_tokens`` is
    refused with HTTP 400 (``code: unsupported_parameter``, ``param:
    max_tokens``) and a ``temperature`` other than 1 likewise
    (``code: unsupported_value``), in OpenAI's error JSON shape.  Each reply
    spends ``reasoning_tokens`` hidden tokens before its visible answer,
    reported in ``usage.completion_tokens_details.reasoning_tokens`` (and
    ``usage.prompt_tokens_details.cached_tokens``); a ``max_completion_tokens``
    budget too small for both returns empty content with ``finish_reason:
    "length"``, the budget all spent on reasoning.
``llamacpp``
    Like llama.cpp's server (llama-cpp-python 0.3.36): ``max_tokens`` is
    honoured, ``max_completion_tokens`` silently ignored, so the reply runs on
    to the context limit (``finish_reason: "length"``, thousands of tokens).
``legacy``
    Like servers (and older Azure API versions) that know only ``max_tokens``:
    ``max_completion_tokens`` is refused with HTTP 400 naming it in the message
    only (``param: null``).
``logprobs``
    A request with ``logprobs: true`` gets its reply's tokens (one per
    character) with ``top_logprobs`` alternatives, in OpenAI's shape
    (:func:`token_logprobs`).
``ratelimit``
    A token bucket of ``--rate`` requests a second (burst ``--burst``): a
    request beyond it gets HTTP 429 with a ``retry-after`` header (seconds
    until the next token) instead of an answer (:func:`rate_limited`); each
    answer takes ``--latency`` seconds.

Anthropic's Messages API.  ``POST /v1/messages`` (the SDK's path under a
base URL without ``/v1``: :attr:`FakeChatServer.root`) is answered by the
same script in the Messages shape: ``content`` blocks (a ``thinking`` block
first when the answer has one), ``stop_reason`` (``"max_tokens"`` for an
answer whose ``finish_reason`` is ``"length"``) and ``usage``
(``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``); an error
status gets Anthropic's error shape, ``{"type": "error", "error": {"type":
"overloaded_error", "message": ...}}``, its ``type`` following the status
(:data:`ANTHROPIC_ERROR_TYPES`).  :func:`messages_reasoning` imitates
extended thinking.
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Answer:
    """What the server sends back for one request.

    ``body`` replaces the chat-completion JSON (a dict is JSON-encoded,
    bytes are sent as they are: truncated JSON, an HTML page);
    ``trickle_s`` sends the body one byte at a time with that pause.
    """

    text: str | None = "0.5"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    finish_reason: str = "stop"
    body: dict | bytes | None = None
    content_type: str = "application/json"
    trickle_s: float = 0.0
    usage: dict | None = None  # replaces the default usage of a 200 reply
    logprobs: dict | None = None  # the choice's ``logprobs`` object (``{"content": [...]}``)
    thinking: str | None = None  # Messages API: a ``thinking`` block before the text
    error_type: str | None = None  # Messages API: the error's ``type`` (default: by status)


Script = Callable[[dict, int], Answer]


class _QuietServer(ThreadingHTTPServer):
    """A client hanging up mid-request is normal here: no traceback, other errors in one line."""

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, socket.timeout)):
            return
        print(f"fakeserver: {type(exc).__name__}: {exc}", file=sys.stderr)


def constant(text: str = "0.5") -> Script:
    """A script that answers every request with ``text``.

    Parameters
    ----------
    text : str
        The reply text (default ``"0.5"``).

    Returns
    -------
    Script
        A function of (request body, request number) returning an
        :class:`Answer`.
    """
    return lambda body, n: Answer(text)


def openai_error(message: str, param: str | None, code: str | None, status: int = 400) -> Answer:
    """An error reply in OpenAI's documented shape (``{"error": {message, type, param, code}}``).

    Parameters
    ----------
    message : str
        The error's message.
    param : str or None
        The request parameter it names (``param``).
    code : str or None
        Its ``code`` (``unsupported_parameter``, ``unsupported_value`` ...).
    status : int
        The HTTP status (default 400).

    Returns
    -------
    Answer
        An answer with no text whose ``body`` is the error object (``type``
        ``invalid_request_error``).
    """
    err = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return Answer(None, status=status, body={"error": err})


def prompt_tokens(body: dict) -> int:
    """A rough prompt-token count of a request body (4 characters a token).

    Parameters
    ----------
    body : dict
        A chat request body.

    Returns
    -------
    int
        The length of its ``messages`` as JSON, over 4 (at least 1).
    """
    return max(1, len(json.dumps(body.get("messages", []))) // 4)


def _usage(prompt: int, completion: int, reasoning: int, cached: int) -> dict:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def reasoning(
    text: str = "0.5", reasoning_tokens: int | Callable[[dict], int] = 200, cached_tokens: int = 0
) -> Script:
    """A script that answers like OpenAI's reasoning models (see the module's ``reasoning`` mode).

    Parameters
    ----------
    text : str
        The visible answer.
    reasoning_tokens : int or callable
        Hidden reasoning tokens each reply spends before its answer (a
        function of the request body: some questions take more thought).
    cached_tokens : int
        Reported as ``prompt_tokens_details.cached_tokens`` (at most the prompt).

    Returns
    -------
    Script
        A script that refuses ``max_tokens`` and a ``temperature`` other than
        1 (HTTP 400, OpenAI's shape), and answers ``text`` with the reasoning
        and cached tokens in its usage; a ``max_completion_tokens`` budget
        below reasoning plus answer gets empty content and ``finish_reason``
        ``"length"``.
    """

    def script(body: dict, n: int) -> Answer:
        if "max_tokens" in body:
            return openai_error(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "max_tokens",
                "unsupported_parameter",
            )
        if "temperature" in body and body["temperature"] != 1:
            return openai_error(
                f"Unsupported value: 'temperature' does not support {body['temperature']} with "
                "this model. Only the default (1) value is supported.",
                "temperature",
                "unsupported_value",
            )
        prompt = prompt_tokens(body)
        cached = min(cached_tokens, prompt)
        visible = max(1, len(text) // 4)
        thought = reasoning_tokens(body) if callable(reasoning_tokens) else reasoning_tokens
        budget = body.get("max_completion_tokens")
        if budget is not None and budget < thought + visible:  # all spent on reasoning
            return Answer("", finish_reason="length", usage=_usage(prompt, budget, budget, cached))
        used = thought + visible
        return Answer(text, usage=_usage(prompt, used, thought, cached))

    return script


LLAMACPP_CONTEXT = 4096  # tokens: where an unbounded llama.cpp reply stops
# seconds between the serving thread's checks for shutdown (the standard library's 0.5 s made
# every `with FakeChatServer(...)` wait up to half a second on exit)
POLL_S = 0.02


def llamacpp(text: str = "0.5") -> Script:
    """A script that answers like llama.cpp's server: ``max_completion_tokens`` is ignored.

    With ``max_tokens`` the reply is ``text`` within that budget; without it
    the reply runs on to the context limit (:data:`LLAMACPP_CONTEXT`).

    Parameters
    ----------
    text : str
        The reply text (its length over 4 is its token count).

    Returns
    -------
    Script
        A function of (request body, request number) returning an
        :class:`Answer`.
    """

    def script(body: dict, n: int) -> Answer:
        prompt = prompt_tokens(body)
        visible = max(1, len(text) // 4)
        limit = body.get("max_tokens")
        if limit is not None:
            used = min(visible, limit)
            return Answer(
                text if used == visible else "",
                finish_reason="stop" if used == visible else "length",
                usage={
                    "prompt_tokens": prompt,
                    "completion_tokens": used,
                    "total_tokens": prompt + used,
                },
            )
        used = max(1, LLAMACPP_CONTEXT - prompt)
        rambling = text + " " + "and then, considering it again, " * (used // 8)
        return Answer(
            rambling,
            finish_reason="length",
            usage={
                "prompt_tokens": prompt,
                "completion_tokens": used,
                "total_tokens": prompt + used,
            },
        )

    return script


def legacy(text: str = "0.5") -> Script:
    """A script for a server that knows only ``max_tokens`` (refuses ``max_completion_tokens``).

    Parameters
    ----------
    text : str
        The reply text.

    Returns
    -------
    Script
        A script that answers ``text``, or HTTP 400 (``param: null``, named in
        the message) to a body with ``max_completion_tokens``.
    """

    def script(body: dict, n: int) -> Answer:
        if "max_completion_tokens" in body:
            return openai_error(
                "Unrecognized request argument supplied: max_completion_tokens", None, None
            )
        return Answer(text)

    return script


def token_logprobs(text: str, top: int = 5) -> dict:
    """A ``logprobs`` object for ``text``, one token per character, in OpenAI's documented shape.

    A digit has its neighbours as alternatives (the sampled digit 0.6, the
    next 0.2, the one before 0.1, two apart 0.05 each); any other character
    itself (0.9) and a line break (0.05).  ``top`` alternatives are listed
    (``top_logprobs``).

    Parameters
    ----------
    text : str
        The reply text.
    top : int
        How many alternatives each token lists (at most 5 for a digit, 2
        otherwise).

    Returns
    -------
    dict
        ``{"content": [...]}``: per character its ``token``, ``logprob``,
        ``bytes`` and ``top_logprobs``.
    """

    def entry(tok: str, p: float) -> dict:
        return {"token": tok, "logprob": math.log(p), "bytes": list(tok.encode())}

    content = []
    for ch in text:
        if ch.isdigit():
            d = int(ch)
            alts = [(ch, 0.6), (str((d + 1) % 10), 0.2), (str((d - 1) % 10), 0.1)]
            alts += [(str((d + 2) % 10), 0.05), (str((d - 2) % 10), 0.05)]
        else:
            alts = [(ch, 0.9), ("\n" if ch != "\n" else " ", 0.05)]
        item = entry(ch, alts[0][1])
        item["top_logprobs"] = [entry(t, p) for t, p in alts[:top]]
        content.append(item)
    return {"content": content}


def logprobs(text: str = "0.5") -> Script:
    """A script that answers ``text`` with its tokens' logprobs when asked (:func:`token_logprobs`).

    Parameters
    ----------
    text : str
        The reply text.

    Returns
    -------
    Script
        A script that answers ``text``, with :func:`token_logprobs` of it
        (``top_logprobs`` of the request alternatives) when the request has
        ``logprobs: true``.
    """

    def script(body: dict, n: int) -> Answer:
        if not body.get("logprobs"):
            return Answer(text)
        return Answer(text, logprobs=token_logprobs(text, int(body.get("top_logprobs") or 0)))

    return script


class TokenBucket:
    """``rate`` requests a second with bursts of up to ``burst``; thread-safe.

    :meth:`take` returns 0 when a token was free (and takes it), else the
    seconds until the next one.
    """

    def __init__(
        self, rate: float, burst: float = 1.0, clock: Callable[[], float] = time.monotonic
    ):
        if not (math.isfinite(rate) and rate > 0 and math.isfinite(burst) and burst >= 1):
            raise ValueError(f"a token bucket needs rate > 0 and burst >= 1, not {rate}, {burst}")
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens = burst
        self.stamp = clock()
        self._lock = threading.Lock()

    def take(self) -> float:
        """Take a token (0.0), or the seconds until one is free (nothing taken).

        The bucket refills at ``rate`` tokens a second up to ``burst``.

        Returns
        -------
        float
            0.0 when a token was taken, else the seconds until one is free.
        """
        with self._lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= 1:
                self.tokens -= 1
                return 0.0
            return (1 - self.tokens) / self.rate


def rate_limited(script: Script, rate: float, burst: float = 1.0, latency_s: float = 0.0) -> Script:
    """``script`` behind a :class:`TokenBucket` of ``rate`` requests a second.

    A request beyond the rate gets HTTP 429 with ``retry-after`` (the
    seconds until the next token, to the millisecond) and no answer.

    Parameters
    ----------
    script : Script
        What answers the requests that get through.
    rate : float
        Requests a second (> 0, finite).
    burst : float
        The bucket's size (>= 1, finite).
    latency_s : float
        Seconds each answered request takes (unless its answer sets a delay).

    Returns
    -------
    Script
        The limited script; its ``counts["throttled"]`` counts the 429s sent.

    Raises
    ------
    ValueError
        When ``rate`` or ``burst`` is out of range.
    """
    bucket = TokenBucket(rate, burst)
    counts = {"throttled": 0}

    def limited(body: dict, n: int) -> Answer:
        wait = bucket.take()
        if wait > 0:
            counts["throttled"] += 1
            return Answer(
                "rate limit exceeded",
                status=429,
                headers={"retry-after": f"{max(wait, 0.001):.3f}"},
                error_type="rate_limit_error",
            )
        ans = script(body, n)
        if latency_s and not ans.delay_s:
            ans.delay_s = latency_s
        return ans

    limited.counts = counts  # type: ignore[attr-defined]
    return limited


def messages_reasoning(text: str = "0.5", thinking_tokens: int = 200) -> Script:
    """A Messages-API script imitating extended thinking.

    A request with ``thinking: {"type": "enabled", "budget_tokens": N}`` is
    refused with HTTP 400 (``invalid_request_error``) where the API refuses
    it: ``N`` under 1024, ``max_tokens`` not above ``N``, or a
    ``temperature`` other than 1 sent with it.  Otherwise the reply spends
    ``min(thinking_tokens, N)`` tokens on a ``thinking`` block first; a
    ``max_tokens`` too small for both ends with ``stop_reason:
    "max_tokens"`` and no text.

    Parameters
    ----------
    text : str
        The visible answer.
    thinking_tokens : int
        The tokens a reply spends thinking (at most the budget).

    Returns
    -------
    Script
        A script answering in the Messages API's terms (serve it at
        ``/v1/messages``); a request without thinking gets ``text`` at once.
    """

    def script(body: dict, n: int) -> Answer:
        thinking = body.get("thinking")
        budget = body.get("max_tokens")
        prompt = prompt_tokens(body)
        visible = max(1, len(text) // 4)
        if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
            return Answer(text, usage={"input_tokens": prompt, "output_tokens": visible})
        n_budget = thinking.get("budget_tokens")
        if not isinstance(n_budget, int) or n_budget < 1024:
            why = "thinking.budget_tokens: Input should be greater than or equal to 1024"
            return Answer(why, status=400)
        if not isinstance(budget, int) or budget <= n_budget:
            return Answer("`max_tokens` must be greater than `thinking.budget_tokens`", status=400)
        if "temperature" in body and body["temperature"] != 1:
            return Answer("`temperature` may only be set to 1 when thinking is enabled", status=400)
        thought = min(thinking_tokens, n_budget)
        if budget < thought + visible:  # all spent on thinking
            return Answer(
                "",
                finish_reason="length",
                thinking="Let me think. " * 4,
                usage={"input_tokens": prompt, "output_tokens": budget},
            )
        return Answer(
            text,
            thinking="Let me think. " * 4,
            usage={"input_tokens": prompt, "output_tokens": thought + visible},
        )

    return script


# Anthropic's error types by status (https://docs.anthropic.com/en/api/errors)
ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}  # finish_reason -> stop_reason


def messages_payload(ans: Answer, body: dict, n: int) -> dict:
    """The Messages API's body for an answer: a message, or an error in Anthropic's shape.

    Parameters
    ----------
    ans : Answer
        The script's answer.
    body : dict
        The request body (its ``model`` is echoed).
    n : int
        The request's number (in the message id and thinking signature).

    Returns
    -------
    dict
        For a 200 answer a ``message`` (``content`` blocks: a ``thinking``
        block when the answer has one, then the text; ``stop_reason`` mapped
        by :data:`STOP_REASONS`; ``usage`` with the answer's own over the
        defaults); otherwise ``{"type": "error", "error": {"type", "message"}}``
        with the type by status (:data:`ANTHROPIC_ERROR_TYPES`).
    """
    if ans.status != 200:
        kind = ans.error_type or ANTHROPIC_ERROR_TYPES.get(ans.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": ans.text or "error"}}
    content = []
    if ans.thinking is not None:
        content.append({"type": "thinking", "thinking": ans.thinking, "signature": f"sig-{n}"})
    if ans.text:
        content.append({"type": "text", "text": ans.text})
    usage = {
        "input_tokens": 10,
        "output_tokens": 2,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        **(ans.usage or {}),
    }
    return {
        "id": f"msg_{n:06d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake"),
        "content": content,
        "stop_reason": STOP_REASONS.get(ans.finish_reason, ans.finish_reason),
        "stop_sequence": None,
        "usage": usage,
    }


MODES: dict[str, Callable[[str], Script]] = {
    "constant": constant,
    "reasoning": reasoning,
    "llamacpp": llamacpp,
    "legacy": legacy,
    "logprobs": logprobs,
    "ratelimit": constant,  # behind a token bucket (--rate, --burst, --latency)
}


def reply_body(ans: Answer, body: dict, n: int) -> dict | bytes:
    """The body the server sends for an :class:`Answer` to request ``body`` (number ``n``).

    A 200 answer is a chat completion in OpenAI's shape, another status an
    ``{"error": ...}`` object; ``ans.body`` replaces either.  The local batch
    server (:mod:`bayesobs.testing.fakebatch`) writes the same bodies into its output
    and error files.

    Parameters
    ----------
    ans : Answer
        The script's answer.
    body : dict
        The request body (its ``model`` is echoed).
    n : int
        The request's number (in the completion id).

    Returns
    -------
    dict or bytes
        ``ans.body`` when set; else a ``chat.completion`` (one choice with
        the text, finish reason and logprobs, and usage) for status 200, or
        ``{"error": {"message", "type", "code"}}``.
    """
    if ans.body is not None:
        return ans.body
    if ans.status == 200:
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": ans.finish_reason,
                    "message": {"role": "assistant", "content": ans.text},
                    "logprobs": ans.logprobs,
                }
            ],
            "usage": ans.usage or {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }
    return {"error": {"message": ans.text or "error", "type": "fake", "code": ans.status}}


class LocalServer:
    """A local HTTP server's addresses and lifetime (``with``: served on a thread, then closed).

    Subclasses set ``_httpd`` (a ``ThreadingHTTPServer``) and ``_thread`` (its
    ``serve_forever`` thread) in their ``__init__``.
    """

    _httpd: ThreadingHTTPServer
    _thread: threading.Thread

    @property
    def url(self) -> str:
        """The server's OpenAI-compatible base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"{self.root}/v1"

    @property
    def root(self) -> str:
        """The base URL without ``/v1`` (``http://127.0.0.1:PORT``), as Anthropic's SDK takes it."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class FakeChatServer(LocalServer):
    """A local OpenAI-compatible chat server on 127.0.0.1 for tests and demos.

    Use as ``with FakeChatServer(script) as srv: ... srv.url ...``; ``script``
    decides each reply.
    """

    def __init__(
        self,
        script: Script | None = None,
        record: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        self.script = script or constant()
        self.record = record
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.paths: list[str] = []
        self.count = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real APIs

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0) or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                if not isinstance(body, dict):
                    body = {}
                with server._lock:
                    n = server.count
                    server.count += 1
                    if server.record:
                        server.requests.append(body)
                        server.headers.append(dict(self.headers))
                        server.paths.append(self.path)
                ans = server.script(body, n)
                if ans.delay_s:
                    time.sleep(ans.delay_s)
                if ans.body is None and self.path.rstrip("/").endswith("/messages"):
                    payload = messages_payload(ans, body, n)  # Anthropic's Messages API
                else:
                    payload = reply_body(ans, body, n)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(ans.status)
                    self.send_header("content-type", ans.content_type)
                    self.send_header("content-length", str(len(data)))
                    for k, v in ans.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    if ans.trickle_s:
                        self.wfile.flush()
                        for i in range(len(data)):
                            self.wfile.write(data[i : i + 1])
                            self.wfile.flush()
                            time.sleep(ans.trickle_s)
                    else:
                        self.wfile.write(data)
                except OSError:
                    self.close_connection = True  # the client gave up (time-out)

        self._httpd = _QuietServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True
        )


def main(argv: list[str] | None = None) -> int:
    """``python -m bayesobs.testing.fakeserver [--reply TEXT] [--mode M] [--host H] [--port P]``: serve.

    Serves until interrupted; ``--mode`` is one of :data:`MODES`
    (``ratelimit`` with ``--rate``, ``--burst`` and ``--latency``).
    Prints the URL first.

    Parameters
    ----------
    argv : list of str, optional
        The command-line arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 after an interrupt; 2, with one line on stderr, for a port out of
        0..65535, a bad rate, burst or latency, or an address that cannot be
        listened on.
    """
    ap = argparse.ArgumentParser(description="A local OpenAI-compatible chat server (127.0.0.1).")
    ap.add_argument("--reply", default="0.5", help="the reply to every request (default 0.5)")
    ap.add_argument(
        "--mode",
        choices=tuple(MODES),
        default="constant",
        help="how to answer (default constant; reasoning, llamacpp, legacy: see the module doc)",
    )
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    ap.add_argument(
        "--rate", type=float, default=20.0, help="ratelimit mode: requests a second (default 20)"
    )
    ap.add_argument(
        "--burst", type=float, default=1.0, help="ratelimit mode: bucket size (default 1)"
    )
    ap.add_argument(
        "--latency",
        type=float,
        default=0.0,
        help="ratelimit mode: seconds each answer takes (default 0)",
    )
    args = ap.parse_args(argv)
    if not 0 <= args.port <= 65535:
        print(f"fakeserver: error: --port must be in 0..65535, not {args.port}", file=sys.stderr)
        return 2
    script = MODES[args.mode](args.reply)
    if args.mode == "ratelimit":
        bad = not (math.isfinite(args.latency) and args.latency >= 0)
        try:
            script = rate_limited(script, args.rate, args.burst, 0.0 if bad else args.latency)
        except ValueError:
            bad = True
        if bad:
            print(
                "fakeserver: error: --rate must be > 0, --burst >= 1 and --latency >= 0 "
                f"(finite), not {args.rate}, {args.burst}, {args.latency}",
                file=sys.stderr,
            )
            return 2
    try:
        server = FakeChatServer(script, record=False, host=args.host, port=args.port)
    except OSError as exc:
        print(
            f"fakeserver: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 2
    with server as srv:
        print(srv.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
