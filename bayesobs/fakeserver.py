"""A local server that answers like an OpenAI-compatible chat API.

For tests, benchmarks and offline dry runs of a pipeline: it listens on
127.0.0.1 only, records every request body it receives, and answers through a
*script*: a function of (request body, request number) returning an
:class:`Answer` (status, reply text, headers, delay, and for misbehaviour
tests a raw body, a ``finish_reason`` or a byte-by-byte trickle).  The
default script answers ``"0.5"`` at once.  A client that hangs up is not an
error (no traceback).
"""

from __future__ import annotations

import json
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
                if ans.body is not None:
                    payload = ans.body
                elif ans.status == 200:
                    payload = {
                        "id": f"chatcmpl-{n}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", "fake"),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": ans.finish_reason,
                                "message": {"role": "assistant", "content": ans.text},
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
                    }
                else:
                    payload = {
                        "error": {
                            "message": ans.text or "error",
                            "type": "fake",
                            "code": ans.status,
                        }
                    }
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
    """``python -m bayesobs.fakeserver [--reply TEXT] [--host H] [--port P]``: serve until interrupted.

    Prints the URL first.  A port in use is one line on stderr and exit status 2.
    """
    import argparse

    ap = argparse.ArgumentParser(description="A local OpenAI-compatible chat server (127.0.0.1).")
    ap.add_argument("--reply", default="0.5", help="the reply to every request (default 0.5)")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    args = ap.parse_args(argv)
    if not 0 <= args.port <= 65535:
        print(f"fakeserver: error: --port must be in 0..65535, not {args.port}", file=sys.stderr)
        return 2
    try:
        server = FakeChatServer(constant(args.reply), record=False, host=args.host, port=args.port)
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
