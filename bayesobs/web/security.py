"""The defences of ``bayesobs serve``: connection and join limits, host names, headers, bodies, CSV."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
import socket
import time
from typing import ClassVar
from urllib.parse import urlsplit

import pandas as pd
from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import BayesobsInputError

LOG = logging.getLogger("bayesobs.web")
HEADER_TIMEOUT = 10.0  # s from a connection's (or a request's) first byte to its last
IDLE_TIMEOUT = 5  # s a kept-alive connection may wait for its next request (uvicorn's)
PER_ADDRESS = 64  # open connections per client address (a browser opens about 6)
MAX_CONNECTIONS = 900  # open connections in all, lowered to fit the descriptor limit
FD_RESERVE = 100  # descriptors kept for the log files, the stimuli and the event loop
# connections accepted in one go (asyncio accepts up to the backlog per wake-up, before any is
# refused): a few such batches are open at once, so they too must fit under the descriptor limit
BACKLOG = 128
MAX_HEADER = 8192  # bytes of a request's header block (h11's limit, and the scan's)
JOIN_BURST = 30  # new participants one address may add at once (a classroom behind one NAT)
JOIN_EVERY_S = 10.0  # ... and one more each this many seconds
CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
CHUNKED = re.compile(rb"\r\ntransfer-encoding:", re.IGNORECASE)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
BUSY = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
LOOPBACK_NAMES = frozenset({"localhost"})  # besides IP addresses, which are always accepted
MAX_BODY = 4096  # bytes of a request body: an answer is a few dozen
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self'; style-src 'self'; "
        b"script-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (not yet listening), or one clear error."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError) as exc:
        raise BayesobsInputError(f"--host {host!r} is not an address to listen on ({exc})") from exc
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        why = exc.strerror or str(exc)
        raise BayesobsInputError(
            f"cannot listen on {host}:{port}: {why} (another server there? choose --port)"
        ) from exc
    return sock


def raise_fd_limit() -> int:
    """Raise this process's open-file limit from its soft to its hard value where allowed."""
    try:
        import resource  # POSIX only
    except ImportError:
        return 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 65536)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


# what a client can make the server log once per connection: logged once, as one line
ONCE = {
    "socket.accept() out of system resource": "out of file descriptors: new connections wait "
    "(raise `ulimit -n`)",
    "Invalid HTTP request received.": "invalid HTTP requests received: closing those connections "
    "(not logged again)",
}


class _Once(logging.Filter):
    """Lets each :data:`ONCE` report through once, as its one line without a traceback."""

    def __init__(self):
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep other records; the first of each :data:`ONCE` kind, shortened; drop the rest."""
        kind = next((k for k in ONCE if str(record.msg).startswith(k)), None)
        if kind is None:
            return True
        if kind in self.seen:
            return False
        self.seen.add(kind)
        record.msg, record.args, record.exc_info, record.exc_text = ONCE[kind], (), None, None
        return True


def warn_once(key: str, msg: str, *args) -> None:
    """Log ``msg`` at warning level the first time ``key`` is seen in this process."""
    if key not in Guard.warned:
        Guard.warned.add(key)
        LOG.warning(msg, *args)


class Guard(asyncio.Protocol):
    """An HTTP protocol wrapper: per-address and total connection caps, a request time-out."""

    inner: type | None = None
    open_by: ClassVar[dict[str, int]] = {}
    warned: ClassVar[set[str]] = set()
    per_address = PER_ADDRESS
    max_connections = MAX_CONNECTIONS
    header_timeout = HEADER_TIMEOUT

    def __init__(self, *args, **kwargs):
        self.proto = self.inner(*args, **kwargs)
        self.loop = asyncio.get_running_loop()
        self.host: str | None = None
        self.transport = None
        self.timer: asyncio.TimerHandle | None = None
        self.head = b""  # the header bytes of the request being read, else b""
        self.reading = True  # a request's header is awaited (from connect, or its first byte)
        self.body_left = 0  # body bytes of the request read, still to come

    def connection_made(self, transport) -> None:
        """Count the connection, refuse it over a cap, else start its header clock."""
        peer = transport.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else "local"
        total = sum(self.open_by.values())
        if total >= self.max_connections:
            warn_once(
                "total", "%d connections open: refusing new ones (503) until some close", total
            )
            transport.write(BUSY)
            transport.close()
            return
        if self.open_by.get(host, 0) >= self.per_address:
            warn_once(
                "peer " + host,
                "%s holds %d connections: closing its new ones",
                host,
                self.per_address,
            )
            transport.abort()
            return
        self.host, self.transport = host, transport
        self.open_by[host] = self.open_by.get(host, 0) + 1
        self.timer = self.loop.call_later(self.header_timeout, self.expire)
        self.proto.connection_made(transport)

    def expire(self) -> None:
        """Close a connection whose request header did not arrive in time."""
        warn_once(
            "slow",
            "closing connections that send no whole request within %g s (slow or idle "
            "clients, e.g. from %s)",
            self.header_timeout,
            self.host,
        )
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        """Follow the requests' framing (header end, Content-Length body), then pass the bytes on."""
        self.track(data)
        self.proto.data_received(data)

    def track(self, data: bytes) -> None:
        """Start the request clock at a request's first byte; stop it once the header and body are in."""
        while data and self.timer is not False:
            if self.body_left:
                n = min(self.body_left, len(data))
                self.body_left -= n
                data = data[n:]
                if not self.body_left:  # the whole request is in
                    self.timer.cancel()
                continue
            if not self.reading:  # the next request's first byte
                self.reading = True
                self.timer = self.loop.call_later(self.header_timeout, self.expire)
            seen = len(self.head)
            self.head += data
            end = self.head.find(b"\r\n\r\n", max(0, seen - 3))
            if end < 0:
                if len(self.head) > MAX_HEADER:  # h11 refuses it; stop following
                    self.stop()
                return
            head, data = self.head[: end + 4], self.head[end + 4 :]
            self.head, self.reading = b"", False
            if CHUNKED.search(head):  # a chunked body (no browser here sends one): stop following
                self.stop()
                return
            m = CONTENT_LENGTH.search(head)
            self.body_left = int(m.group(1)) if m else 0
            if not self.body_left:  # the clock runs on through a body (4 KB at most here)
                self.timer.cancel()

    def stop(self) -> None:
        """Stop following this connection's framing (uvicorn's own limits still apply)."""
        if self.timer:
            self.timer.cancel()
        self.timer = False

    def connection_lost(self, exc) -> None:
        """Uncount the connection and pass the loss on."""
        if self.host is None:  # refused in connection_made
            return
        if self.timer:
            self.timer.cancel()
        left = self.open_by.get(self.host, 1) - 1
        if left > 0:
            self.open_by[self.host] = left
        else:
            self.open_by.pop(self.host, None)
        self.proto.connection_lost(exc)

    def eof_received(self):
        """Pass on."""
        return self.proto.eof_received()

    def pause_writing(self) -> None:
        """Pass on."""
        self.proto.pause_writing()

    def resume_writing(self) -> None:
        """Pass on."""
        self.proto.resume_writing()


def uvicorn_config(app, **kwargs):
    """A ``uvicorn.Config`` serving ``app`` through :class:`Guard`, with time-outs and size limits."""
    import uvicorn  # start-up time: the ASGI server loads only for serve
    from uvicorn.protocols.http.h11_impl import H11Protocol

    limit = raise_fd_limit()
    guard = type(
        "GuardedH11",
        (Guard,),
        {
            "inner": H11Protocol,
            "max_connections": min(MAX_CONNECTIONS, limit - FD_RESERVE - 4 * BACKLOG),
        },
    )
    for name in ("asyncio", "uvicorn.error"):
        if not any(isinstance(f, _Once) for f in logging.getLogger(name).filters):
            logging.getLogger(name).addFilter(_Once())
    return uvicorn.Config(
        app,
        http=guard,
        timeout_keep_alive=IDLE_TIMEOUT,
        h11_max_incomplete_event_size=MAX_HEADER,
        backlog=BACKLOG,
        **kwargs,
    )


class JoinLimit:
    """New participants per client address: a token bucket of :data:`JOIN_BURST`, refilled every :data:`JOIN_EVERY_S` s."""

    def __init__(self, burst: int = JOIN_BURST, every_s: float = JOIN_EVERY_S):
        self.burst, self.every = burst, every_s
        self.buckets: dict[str, tuple[float, float]] = {}  # address -> (tokens, when)

    def wait(self, address: str) -> float:
        """Seconds until ``address`` may add a participant; 0 when it may now (and it is counted)."""
        now = time.monotonic()
        if len(self.buckets) > 10000:  # forget the addresses whose buckets are full again
            full = [
                a for a, (n, t) in self.buckets.items() if n + (now - t) / self.every >= self.burst
            ]
            for a in full:
                del self.buckets[a]
        tokens, then = self.buckets.get(address, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) / self.every)
        if tokens < 1:
            self.buckets[address] = (tokens, now)
            return (1 - tokens) * self.every
        self.buckets[address] = (tokens - 1, now)
        return 0.0


def spreadsheet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every text cell a spreadsheet would read as a formula prefixed with ``'``."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(_safe_cell)
    return out


def _safe_cell(v):
    """One cell, neutralised (see :func:`spreadsheet_safe`)."""
    if isinstance(v, str) and v.startswith(FORMULA_START) and not NUMBER.match(v):
        return "'" + v
    return v


class SecurityHeaders:
    """ASGI wrapper: only the served host names; CSP, no framing, no sniffing, no referrer."""

    def __init__(self, app, hosts=None):
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope, receive, send):
        """Check the Host header, then add the security headers to every HTTP response."""
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        if self.hosts is not None:
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if not host_allowed(host, self.hosts):
                refused = JSONResponse(
                    {
                        "error": f"unknown host name {host[:100]!r}: this server answers only its own"
                    },
                    status_code=421,
                )
                return await refused(scope, receive, send_with_headers)
        await self.app(scope, receive, send_with_headers)


def host_allowed(host: str, names: set[str]) -> bool:
    """Whether a ``Host`` header (port, trailing dot ignored) is an IP literal or one of ``names``."""
    host = host.strip().lower()
    if host.startswith("["):  # [v6] or [v6]:port
        name = host[1 : host.find("]")] if "]" in host else host
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    name = name.rstrip(".")
    if not name:
        return False
    if name in names:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _no_constant(name: str):
    """Refuse ``NaN`` and ``Infinity``, which JSON does not have."""
    raise ValueError(f"{name} is not a number in JSON")


async def read_json(request: Request):
    """The request's JSON object; None if it is not one; a Response to send back if refused."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return JSONResponse({"error": "send JSON (content-type application/json)"}, status_code=415)
    origin = request.headers.get("origin")  # host only: behind a TLS proxy the scheme differs
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        return JSONResponse({"error": "cross-origin request refused"}, status_code=403)
    too_big = JSONResponse({"error": f"request body over {MAX_BODY} bytes"}, status_code=413)
    try:
        if int(request.headers.get("content-length") or 0) > MAX_BODY:
            return too_big
    except ValueError:
        return JSONResponse({"error": "bad content-length"}, status_code=400)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            return too_big
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep
        return None
    return body if isinstance(body, dict) else None
