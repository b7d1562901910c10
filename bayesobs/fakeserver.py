"""A local server that answers like an OpenAI-compatible chat API.

For tests, benchmarks and offline dry runs of a pipeline: it listens on
127.0.0.1 only, records every request body it receives, and answers through a
*script*: a function of (request body, request number) returning an
:class:`Answer` (status, reply text, headers, delay, and for misbehaviour
tests a raw body, a ``finish_reason`` or a byte-by-byte trickle).  The
default script answers ``"0.5"`` at once.  A client that hangs up is not an
error (no traceback).

Modes (:data:`MODES`, ``--mode`` of ``python -m bayesobs.fakeserver``) imitate
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
"""

from __future__ import annotations

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


Script = Callable[[dict, int], Answer]


class _QuietServer(ThreadingHTTPServer):
    """A client hanging up mid-request is normal here: no traceback, other errors in one line."""

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, socket.timeout)):
            return
        print(f"fakeserver: {type(exc).__name__}: {exc}", file=sys.stderr)


def constant(text: str = "0.5") -> Script:
    """A script that answers every request with ``text``."""
    return lambda body, n: Answer(text)


def openai_error(message: str, param: str | None, code: str | None, status: int = 400) -> Answer:
    """An error reply in OpenAI's documented shape (``{"error": {message, type, param, code}}``)."""
    err = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return Answer(None, status=status, body={"error": err})


def prompt_tokens(body: dict) -> int:
    """A rough prompt-token count of a request body (4 characters a token)."""
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


def llamacpp(text: str = "0.5") -> Script:
    """A script that answers like llama.cpp's server: ``max_completion_tokens`` is ignored.

    With ``max_tokens`` the reply is ``text`` within that budget; without it
    the reply runs on to the context limit (:data:`LLAMACPP_CONTEXT`).
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
    """A script for a server that knows only ``max_tokens`` (refuses ``max_completion_tokens``)."""

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
    """A script that answers ``text`` with its tokens' logprobs when asked (:func:`token_logprobs`)."""

    def script(body: dict, n: int) -> Answer:
        if not body.get("logprobs"):
            return Answer(text)
        return Answer(text, logprobs=token_logprobs(text, int(body.get("top_logprobs") or 0)))

    return script


MODES: dict[str, Callable[[str], Script]] = {
    "constant": constant,
    "reasoning": reasoning,
    "llamacpp": llamacpp,
    "legacy": legacy,
    "logprobs": logprobs,
}


def reply_body(ans: Answer, body: dict, n: int) -> dict | bytes:
    """The body the server sends for an :class:`Answer` to request ``body`` (number ``n``).

    A 200 answer is a chat completion in OpenAI's shape, another status an
    ``{"error": ...}`` object; ``ans.body`` replaces either.  The local batch
    server (:mod:`bayesobs.fakebatch`) writes the same bodies into its output
    and error files.
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


class FakeChatServer:
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
                ans = server.script(body, n)
                if ans.delay_s:
                    time.sleep(ans.delay_s)
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
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The server's OpenAI-compatible base URL (``http://127.0.0.1:PORT/v1``)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def main(argv: list[str] | None = None) -> int:
    """``python -m bayesobs.fakeserver [--reply TEXT] [--mode M] [--host H] [--port P]``: serve.

    Serves until interrupted; ``--mode`` is one of :data:`MODES`.

    Prints the URL first.  A port in use is one line on stderr and exit status 2.
    """
    import argparse

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
    args = ap.parse_args(argv)
    if not 0 <= args.port <= 65535:
        print(f"fakeserver: error: --port must be in 0..65535, not {args.port}", file=sys.stderr)
        return 2
    try:
        server = FakeChatServer(
            MODES[args.mode](args.reply), record=False, host=args.host, port=args.port
        )
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
