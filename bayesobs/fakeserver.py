"""A local server that answers like an OpenAI-compatible chat API.

For tests, benchmarks and offline dry runs of a pipeline: it listens on
127.0.0.1 only, records every request body it receives, and answers through a
*script*: a function of (request body, request number) returning an
:class:`Answer` (status, reply text, headers, delay).  The default script
answers ``"0.5"`` at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Answer:
    text: str = "0.5"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


Script = Callable[[dict, int], Answer]


def constant(text: str = "0.5") -> Script:
    return lambda body, n: Answer(text)


class FakeChatServer:
    """``with FakeChatServer(script) as srv: ... srv.url ...``"""

    def __init__(self, script: Script | None = None, record: bool = True):
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
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    n = server.count
                    server.count += 1
                    if server.record:
                        server.requests.append(body)
                        server.headers.append(dict(self.headers))
                ans = server.script(body, n)
                if ans.delay_s:
                    time.sleep(ans.delay_s)
                if ans.status == 200:
                    payload = {
                        "id": f"chatcmpl-{n}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", "fake"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": ans.text}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
                    }  # fmt: skip
                else:
                    payload = {
                        "error": {
                            "message": ans.text or "error",
                            "type": "fake",
                            "code": ans.status,
                        }
                    }
                data = json.dumps(payload).encode()
                try:
                    self.send_response(ans.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in ans.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (time-out)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def main(argv: list[str] | None = None) -> int:
    """``python -m bayesobs.fakeserver [--reply TEXT]``: serve until interrupted; prints the URL."""
    import argparse

    ap = argparse.ArgumentParser(description="A local OpenAI-compatible chat server (127.0.0.1).")
    ap.add_argument("--reply", default="0.5", help="the reply to every request (default 0.5)")
    args = ap.parse_args(argv)
    with FakeChatServer(constant(args.reply), record=False) as srv:
        print(srv.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
