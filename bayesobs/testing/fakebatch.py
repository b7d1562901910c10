"""A local server that speaks OpenAI's Batch API and Anthropic's Message Batches, for tests.

It listens on 127.0.0.1 and implements the documented endpoints and file
formats of the Batch API:

``POST /v1/files``
    a multipart upload (``file``, ``purpose=batch``); returns a file object.
``GET /v1/files/{id}`` and ``GET /v1/files/{id}/content``
    the file object and its bytes (input, output and error files).
``POST /v1/batches``
    ``{input_file_id, endpoint, completion_window, metadata}``; returns the
    batch object, ``status: "validating"``.
``GET /v1/batches/{id}``
    the batch object: ``validating`` -> ``in_progress`` (``request_counts``
    rising) -> ``finalizing`` -> ``completed`` (or ``failed``, ``expired``,
    ``cancelled``), with ``output_file_id`` and ``error_file_id``.
``GET /v1/batches``
    the list (newest first; ``limit``, ``after``).
``POST /v1/batches/{id}/cancel``
    ``cancelling``, then ``cancelled`` with partial outputs.
``POST /v1/chat/completions``
    answered live by the same script (see :mod:`bayesobs.testing.fakeserver`), so one
    server serves a live run and a batch run the same way.

Anthropic's Message Batches (under :attr:`FakeBatchServer.root`, the base
URL without ``/v1`` that Anthropic's SDK takes):

``POST /v1/messages``
    a live Messages API request, answered by the same script
    (:func:`bayesobs.testing.fakeserver.messages_payload`).
``POST /v1/messages/batches``
    ``{"requests": [{"custom_id", "params"}]}``; a ``custom_id`` not matching
    ``^[a-zA-Z0-9_-]{1,64}$`` or repeated, or a request without ``params``,
    is refused (HTTP 400, ``invalid_request_error``); returns the batch,
    ``processing_status: "in_progress"``.
``GET /v1/messages/batches/{id}``
    ``in_progress`` for the fate's ``polls`` retrieves (``request_counts``:
    all ``processing``), then ``ended`` with final counts (``succeeded``,
    ``errored``, ``canceled``, ``expired``) and ``results_url``.
``GET /v1/messages/batches/{id}/results``
    the JSONL of ``{"custom_id", "result": {"type": "succeeded", "message"}}``
    (or ``errored`` with ``error``, ``canceled``, ``expired``), not in request
    order; HTTP 400 before the batch has ended.
``GET /v1/messages/batches``
    newest first (``limit``, ``after_id``, ``before_id``; ``has_more``,
    ``first_id``, ``last_id``).
``POST /v1/messages/batches/{id}/cancel``
    ``canceling``, then ``ended``: the requests run so far answered, the
    others ``canceled``.

A Message Batch's ``expired`` fate answers its first ``answered`` requests and
expires the others; ``failed`` errors every request (``api_error``); a
request without ``model``, ``max_tokens`` and ``messages`` errors with
``invalid_request_error``, and a script's answer with another status than 200
with the Messages API's error type for it.

Each input line is ``{"custom_id", "method": "POST", "url":
"/v1/chat/completions", "body"}``; a file with a malformed line, a repeated
``custom_id``, another endpoint or two models fails validation (``status:
"failed"``, ``errors.data`` naming the line), as the API does.  An output
line is ``{"id", "custom_id", "response": {"status_code", "request_id",
"body"}, "error": null}``; a request answered with an error status goes to the
error file in the same shape, and a request not run before the batch expired
(or was cancelled) goes there as ``"response": null, "error": {"code":
"batch_expired", "message"}``.

What happens to each batch is decided by ``fate`` (a function of the batch
number, 0, 1, ...): a :class:`Fate` says how many retrieves it stays
``in_progress`` and whether it completes, fails validation, or expires after
answering only its first ``answered`` requests (partial outputs).  Replies
come from the chat ``script`` (:data:`bayesobs.testing.fakeserver.Script`); an
answer with a status other than 200 is an error line.  :meth:`FakeBatchServer.forget`
makes a batch, or its results, answer 404 (a provider that lost them).
"""

from __future__ import annotations

import argparse
import datetime as dt
import email.parser
import email.policy
import hashlib
import itertools
import json
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from .fakeserver import (
    ANTHROPIC_ERROR_TYPES,
    POLL_S,
    Answer,
    LocalServer,
    Script,
    constant,
    messages_payload,
    reply_body,
)

ENDPOINT = "/v1/chat/completions"
EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
CANCELLED_MESSAGE = "This request could not be executed before the batch was cancelled."
MESSAGES = "/v1/messages"
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # Message Batches' custom_id
JSON = "application/json"


@dataclass(frozen=True)
class Fate:
    """What becomes of one batch on the local server.

    Parameters
    ----------
    outcome : {"completed", "expired", "failed"}
        ``failed``: validation fails (``errors.data``), nothing is run.
    polls : int
        Retrieves that see it ``in_progress`` (its counts rising) before it
        is ``finalizing`` and then done.
    answered : int or None
        With ``expired``: the first ``answered`` requests have outputs, the
        others ``batch_expired`` error lines (None: all of them answered).
    """

    outcome: str = "completed"
    polls: int = 1
    answered: int | None = None


def always(fate: Fate) -> Callable[[int], Fate]:
    """A ``fate`` function giving every batch the same :class:`Fate`.

    Parameters
    ----------
    fate : Fate
        The fate of every batch.

    Returns
    -------
    callable
        Batch number -> ``fate``.
    """
    return lambda n: fate


def hashed(low: float = 0.0, high: float = 1.0, digits: int = 3) -> Script:
    """A script answering a number in ``[low, high]`` that is a hash of the whole request.

    Deterministic: a live server and a batch server with this script give
    the same reply to the same request, and a request whose context differs
    (another earlier answer) gets another reply, so the comparison of a
    batch run with a live run checks the context too.

    Parameters
    ----------
    low, high : float
        The range of the answers.
    digits : int
        Decimals of the answer.

    Returns
    -------
    Script
        A script whose answer is ``low + u * (high - low)``, ``u`` in [0, 1)
        from the SHA-256 of the request's ``messages`` (as sorted JSON).
    """

    def script(body: dict, n: int) -> Answer:
        blob = json.dumps(body.get("messages", []), sort_keys=True).encode()
        u = int.from_bytes(hashlib.sha256(blob).digest()[:8], "little") / 2.0**64
        return Answer(f"{low + u * (high - low):.{digits}f}")

    return script


class QuietServer(ThreadingHTTPServer):
    """A client hanging up is normal here: no traceback, other errors in one line."""

    def handle_error(self, request, client_address):
        """Say an unexpected error in one line; a hang-up not at all.

        Parameters
        ----------
        request : socket
            The client's connection.
        client_address : tuple
            The client's address.

        Returns
        -------
        None
        """
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        print(f"fakebatch: {type(exc).__name__}: {exc}", file=sys.stderr)


def _error(message: str, status: int = 400, code: str | None = None) -> tuple[int, dict]:
    return status, {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    }


def _anthropic_error(message: str, status: int = 400) -> tuple[int, dict]:
    kind = ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    return status, {"type": "error", "error": {"type": kind, "message": message}}


def _errored(kind: str, message: str) -> dict:
    """An ``errored`` Message Batch result (the error response of the Messages API)."""
    return {
        "type": "errored",
        "error": {"type": "error", "error": {"type": kind, "message": message}},
    }


def _counts(**n: int) -> dict:
    """A Message Batch's ``request_counts``."""
    keys = ("processing", "succeeded", "errored", "canceled", "expired")
    return {k: n.get(k, 0) for k in keys}


def rfc3339(t: float) -> str:
    """An RFC 3339 UTC time of seconds since the epoch.

    Parameters
    ----------
    t : float
        Seconds since the epoch.

    Returns
    -------
    str
        E.g. ``2026-01-02T03:04:05.678901Z``.
    """
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat().replace("+00:00", "Z")


def multipart_fields(content_type: str, data: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a ``multipart/form-data`` body: name -> (filename, bytes).

    Parameters
    ----------
    content_type : str
        The request's ``content-type`` header, with its boundary.
    data : bytes
        The request body.

    Returns
    -------
    dict
        Field name -> (filename or None, payload bytes); empty when the body
        is not multipart.
    """
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + data)
    out: dict[str, tuple[str | None, bytes]] = {}
    if not msg.is_multipart():
        return out
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            out[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return out


def check_input(data: bytes, endpoint: str) -> tuple[list[dict], list[dict]]:
    """The lines of a batch input file and its validation errors (OpenAI's ``errors.data`` items).

    Parameters
    ----------
    data : bytes
        The input file (JSONL).
    endpoint : str
        The batch's endpoint; every line's ``url`` must be it and its
        ``method`` ``POST``.

    Returns
    -------
    lines : list of dict
        The valid request lines, in file order.
    errors : list of dict
        ``code``, ``message`` and ``line`` (1-based; None for the whole file)
        of each problem: a line not JSON or without a body, a missing or
        repeated ``custom_id``, another endpoint, more than one model, an
        empty file.
    """
    lines, errors, seen, models = [], [], set(), set()
    for i, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except ValueError:
            errors.append({"code": "invalid_json_line", "message": "not JSON", "line": i})
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("body"), dict):
            errors.append({"code": "invalid_request", "message": "no body", "line": i})
            continue
        cid = rec.get("custom_id")
        if not isinstance(cid, str) or cid in seen:
            errors.append(
                {"code": "duplicate_custom_id", "message": f"custom_id {cid!r}", "line": i}
            )
            continue
        if rec.get("method") != "POST" or rec.get("url") != endpoint:
            errors.append(
                {"code": "mismatched_endpoint", "message": f"url {rec.get('url')!r}", "line": i}
            )
            continue
        seen.add(cid)
        models.add(rec["body"].get("model"))
        lines.append(rec)
    if len(models) > 1:
        errors.append({"code": "mismatched_model", "message": "one model per batch", "line": None})
    if not lines and not errors:
        errors.append({"code": "empty_file", "message": "no requests", "line": None})
    return lines, errors


class FakeBatchServer(LocalServer):
    """A local Batch API (and chat) server on 127.0.0.1: ``with FakeBatchServer(...) as srv``.

    Parameters
    ----------
    script : Script, optional
        Replies to chat requests, live or in a batch (default ``"0.5"``).
    fate : callable, optional
        Batch number -> :class:`Fate` (default: every batch completes after
        one ``in_progress`` retrieve).

    Attributes
    ----------
    batches : dict
        Batch id -> its state (the object as served, plus its input lines).
    created : list of str
        Batch ids in the order created.
    chat_requests : int
        Live chat requests answered.
    batch_requests : int
        Requests answered inside batches.
    """

    def __init__(
        self,
        script: Script | None = None,
        fate: Callable[[int], Fate] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        self.script = script or constant()
        self.fate = fate or always(Fate())
        self.files: dict[str, dict] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.created: list[str] = []
        self.chat_requests = 0
        self.batch_requests = 0
        self.polls = 0
        self.forgotten: set[str] = set()  # batch ids, and "<id>/results", answered with 404
        self._n = itertools.count()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, payload: dict | bytes, ctype="application/json"):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", ctype)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    self.close_connection = True

            def do_GET(self):
                url = urlsplit(self.path)
                with server._lock:
                    status, payload, ctype = server.get(url.path, parse_qs(url.query))
                self._send(status, payload, ctype)

            def do_POST(self):
                length = int(self.headers.get("content-length", 0) or 0)
                data = self.rfile.read(length)
                path = urlsplit(self.path).path
                if path == ENDPOINT:
                    status, payload = server.chat(data)
                elif path == MESSAGES:
                    status, payload = server.messages(data)
                else:
                    with server._lock:
                        status, payload = server.post(
                            path, data, self.headers.get("content-type", "")
                        )
                self._send(status, payload)

        self._httpd = QuietServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True
        )

    # ------------------------------------------------------------ routes
    def chat(self, data: bytes) -> tuple[int, dict | bytes]:
        """A live chat completion, answered by the script.

        Parameters
        ----------
        data : bytes
            The request body (JSON; anything else reads as ``{}``).

        Returns
        -------
        status : int
            The answer's HTTP status.
        payload : dict or bytes
            :func:`bayesobs.testing.fakeserver.reply_body` of the answer.
        """
        try:
            body = json.loads(data or b"{}")
        except ValueError:
            body = {}
        with self._lock:
            n = next(self._n)
            self.chat_requests += 1
        ans = self.script(body if isinstance(body, dict) else {}, n)
        return ans.status, reply_body(ans, body, n)

    def post(self, path: str, data: bytes, content_type: str) -> tuple[int, dict]:
        """``POST /v1/files``, ``/v1/batches`` and ``/v1/batches/{id}/cancel``.

        Also routes ``POST /v1/messages/batches`` and its ``/{id}/cancel`` to
        :meth:`create_messages` and :meth:`cancel_messages`.

        Parameters
        ----------
        path : str
            The request path.
        data : bytes
            The request body (multipart for a file upload, else JSON).
        content_type : str
            The request's ``content-type`` header.

        Returns
        -------
        status : int
            The HTTP status.
        payload : dict
            The JSON body: the object asked for, or an error in the API's shape.
        """
        if path == "/v1/files":
            fields = multipart_fields(content_type, data)
            if "file" not in fields:
                return _error("no file in the upload")
            purpose = fields.get("purpose", (None, b""))[1].decode()
            return 200, self.add_file(fields["file"][1], fields["file"][0] or "upload", purpose)
        parts = path.strip("/").split("/")
        if parts[:3] == ["v1", "messages", "batches"]:
            if len(parts) == 3:
                try:
                    req = json.loads(data)
                except ValueError:
                    return _anthropic_error("body is not JSON")
                return self.create_messages(req if isinstance(req, dict) else {})
            if len(parts) == 5 and parts[4] == "cancel":
                return self.cancel_messages(parts[3])
            return _anthropic_error(f"no route POST {path}", 404)
        if path == "/v1/batches":
            try:
                req = json.loads(data)
            except ValueError:
                return _error("body is not JSON")
            return self.create(req if isinstance(req, dict) else {})
        if len(parts) == 4 and parts[:2] == ["v1", "batches"] and parts[3] == "cancel":
            b = self.batches.get(parts[2])
            if b is None:
                return _error(f"No batch found with id '{parts[2]}'.", 404)
            if b["status"] in ("validating", "in_progress", "finalizing"):
                b["status"] = "cancelling"
                b["cancelling_at"] = int(time.time())
            return 200, self.public(b)
        return _error(f"no route POST {path}", 404)

    def get(self, path: str, query: dict) -> tuple[int, dict | bytes, str]:
        """``GET`` of files, their content, a batch, the list of batches (of both APIs).

        Each retrieve of a batch advances it one step (:meth:`advance`,
        :meth:`advance_messages`).

        Parameters
        ----------
        path : str
            The request path.
        query : dict
            The parsed query string (name -> list of values).

        Returns
        -------
        status : int
            The HTTP status.
        payload : dict or bytes
            The JSON object, or a file's (results') bytes.
        content_type : str
            The response's content type.
        """
        parts = path.strip("/").split("/")
        if parts[:3] == ["v1", "messages", "batches"]:
            return self.get_messages(parts, query)
        if parts[:2] == ["v1", "files"] and len(parts) in (3, 4):
            fid = parts[2]
            # a result file is named <batch id>_output.jsonl or <batch id>_error.jsonl
            owner = self.files.get(fid, {}).get("filename", "").rpartition("_")[0]
            if fid not in self.files or f"{owner}/results" in self.forgotten:
                return (*_error(f"No such File object: {fid}", 404), "application/json")
            if len(parts) == 4 and parts[3] == "content":
                return 200, self.contents[fid], "application/octet-stream"
            return 200, self.files[fid], "application/json"
        if parts == ["v1", "batches"]:
            limit = int(query.get("limit", ["20"])[0])
            ids = self.created[::-1]
            if "after" in query and query["after"][0] in ids:
                ids = ids[ids.index(query["after"][0]) + 1 :]
            page = [self.public(self.batches[i]) for i in ids[:limit]]
            return (
                200,
                {
                    "object": "list",
                    "data": page,
                    "first_id": page[0]["id"] if page else None,
                    "last_id": page[-1]["id"] if page else None,
                    "has_more": len(ids) > limit,
                },
                "application/json",
            )
        if parts[:2] == ["v1", "batches"] and len(parts) == 3:
            b = self.batches.get(parts[2])
            if b is None or parts[2] in self.forgotten:
                return (*_error(f"No batch found with id '{parts[2]}'.", 404), "application/json")
            self.polls += 1
            self.advance(b)
            return 200, self.public(b), "application/json"
        return (*_error(f"no route GET {path}", 404), "application/json")

    def forget(self, batch_id: str, results: bool = False) -> None:
        """Answer 404 for a batch from now on (a provider that lost it, or another project's key).

        Parameters
        ----------
        batch_id : str
            The batch (either API).
        results : bool, default False
            Forget only its results (OpenAI: its output and error files; Anthropic: its
            ``results`` route), as when they expired.
        """
        with self._lock:
            self.forgotten.add(f"{batch_id}/results" if results else batch_id)

    # ------------------------------------------------------------ state
    def add_file(self, data: bytes, filename: str, purpose: str) -> dict:
        """Store a file; returns its file object.

        Parameters
        ----------
        data : bytes
            The file's content.
        filename : str
            Its name.
        purpose : str
            Its purpose (``batch``, ``batch_output``, ``batch_error``).

        Returns
        -------
        dict
            The file object (``id`` ``file-NNNNNN``, ``bytes``, ``filename``,
            ``purpose``, ``status: "processed"`` ...).
        """
        fid = f"file-{len(self.files) + 1:06d}"
        self.files[fid] = {
            "id": fid,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }
        self.contents[fid] = data
        return self.files[fid]

    def create(self, req: dict) -> tuple[int, dict]:
        """``POST /v1/batches``: a new batch in ``validating``.

        Parameters
        ----------
        req : dict
            The request body: ``input_file_id`` (an uploaded file),
            ``endpoint`` (:data:`ENDPOINT`), ``completion_window`` (``24h``) and
            optional ``metadata``.

        Returns
        -------
        status : int
            200, or 400/404 for an unknown file, another endpoint or window.
        payload : dict
            The new batch object, or the error.
        """
        fid = req.get("input_file_id")
        if fid not in self.files:
            return _error(f"No such File object: {fid}", 404)
        if req.get("endpoint") != ENDPOINT:
            return _error(f"endpoint must be {ENDPOINT}")
        if req.get("completion_window") != "24h":
            return _error("completion_window must be 24h")
        n = len(self.created)
        bid = f"batch_{n + 1:06d}"
        now = int(time.time())
        self.batches[bid] = {
            "id": bid,
            "object": "batch",
            "endpoint": ENDPOINT,
            "errors": None,
            "input_file_id": fid,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + 86400,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": req.get("metadata") or None,
            "_fate": self.fate(n),
            "_polls": 0,
        }
        self.created.append(bid)
        return 200, self.public(self.batches[bid])

    @staticmethod
    def public(b: dict) -> dict:
        """The batch object as served (without the server's own notes).

        Parameters
        ----------
        b : dict
            A batch's state.

        Returns
        -------
        dict
            Its keys that do not start with ``_``.
        """
        return {k: v for k, v in b.items() if not k.startswith("_")}

    def advance(self, b: dict) -> None:
        """One retrieve's worth of progress of a batch.

        ``validating`` checks the input (:func:`check_input`) and fails or
        starts; ``in_progress`` raises the counts for ``fate.polls`` retrieves,
        then is ``finalizing``; ``finalizing``/``cancelling`` runs the requests
        (:meth:`finish`) and ends ``completed``, ``expired`` or ``cancelled``.

        Parameters
        ----------
        b : dict
            A batch's state (changed in place).
        """
        fate: Fate = b["_fate"]
        now = int(time.time())
        if b["status"] == "validating":
            lines, errors = check_input(self.contents[b["input_file_id"]], ENDPOINT)
            if errors or fate.outcome == "failed":
                errors = errors or [
                    {"code": "token_limit_exceeded", "message": "enqueued token limit reached"}
                ]
                b.update(
                    status="failed",
                    failed_at=now,
                    errors={"object": "list", "data": errors},
                )
                return
            b["_lines"] = lines
            b["request_counts"] = {"total": len(lines), "completed": 0, "failed": 0}
            b.update(status="in_progress", in_progress_at=now)
            return
        if b["status"] == "in_progress":
            b["_polls"] += 1
            total = b["request_counts"]["total"]
            if b["_polls"] <= fate.polls:
                b["request_counts"]["completed"] = total * b["_polls"] // (fate.polls + 1)
                return
            b.update(status="finalizing", finalizing_at=now)
            return
        if b["status"] in ("finalizing", "cancelling"):
            cancelled = b["status"] == "cancelling"
            if cancelled:
                run = b["request_counts"]["completed"]
            elif fate.outcome == "expired":
                run = len(b["_lines"]) if fate.answered is None else fate.answered
            else:
                run = len(b["_lines"])
            self.finish(b, run, "batch_cancelled" if cancelled else "batch_expired")
            if cancelled:
                b.update(status="cancelled", cancelled_at=now)
            elif fate.outcome == "expired":
                b.update(status="expired", expired_at=now)
            else:
                b.update(status="completed", completed_at=now)

    def finish(self, b: dict, run: int, code: str) -> None:
        """Answer the first ``run`` requests; write the output and error files.

        Answers go to the output file (status 200) or the error file; the
        requests not run go to the error file with ``code``.

        Parameters
        ----------
        b : dict
            A batch's state (its files and counts are set in place).
        run : int
            How many requests, from the first, are run.
        code : str
            The error code of the others (``batch_expired``, ``batch_cancelled``).
        """
        out, err = [], []
        for i, line in enumerate(b["_lines"]):
            rid = f"batch_req_{b['id']}_{i}"
            if i >= run:
                message = EXPIRED_MESSAGE if code == "batch_expired" else CANCELLED_MESSAGE
                err.append(
                    {
                        "id": rid,
                        "custom_id": line["custom_id"],
                        "response": None,
                        "error": {"code": code, "message": message},
                    }
                )
                continue
            n = next(self._n)
            self.batch_requests += 1
            ans = self.script(line["body"], n)
            body = reply_body(ans, line["body"], n)
            if isinstance(body, bytes):  # a raw (broken) body: the API would log it as text
                body = {"raw": body.decode("utf-8", "replace")}
            rec = {
                "id": rid,
                "custom_id": line["custom_id"],
                "response": {"status_code": ans.status, "request_id": f"req_{n}", "body": body},
                "error": None,
            }
            (out if ans.status == 200 else err).append(rec)
        b["request_counts"] = {
            "total": len(b["_lines"]),
            "completed": len(out),
            "failed": len(err),
        }

        def store(recs: list[dict], name: str) -> str | None:
            if not recs:
                return None
            data = "".join(json.dumps(r) + "\n" for r in recs).encode()
            return self.add_file(data, f"{b['id']}_{name}.jsonl", f"batch_{name}")["id"]

        b["output_file_id"] = store(out, "output")
        b["error_file_id"] = store(err, "error")

    # ------------------------------------------------------------ Anthropic's Message Batches
    def messages(self, data: bytes) -> tuple[int, dict | bytes]:
        """A live Messages API request (``POST /v1/messages``), answered by the script.

        Parameters
        ----------
        data : bytes
            The request body (JSON; anything else reads as ``{}``).

        Returns
        -------
        status : int
            The answer's HTTP status.
        payload : dict or bytes
            :func:`bayesobs.testing.fakeserver.messages_payload` of the answer, or its
            own ``body``.
        """
        try:
            body = json.loads(data or b"{}")
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        with self._lock:
            n = next(self._n)
            self.chat_requests += 1
        ans = self.script(body, n)
        return ans.status, ans.body if ans.body is not None else messages_payload(ans, body, n)

    def create_messages(self, req: dict) -> tuple[int, dict]:
        """``POST /v1/messages/batches``: a new Message Batch, ``in_progress``.

        Parameters
        ----------
        req : dict
            The request body, ``{"requests": [{"custom_id", "params"}, ...]}``.

        Returns
        -------
        status : int
            200, or 400 for no requests, a bad or repeated ``custom_id`` or a
            request without ``params``.
        payload : dict
            The new batch, or Anthropic's error object.
        """
        requests = req.get("requests")
        if not isinstance(requests, list) or not requests:
            return _anthropic_error("requests: a non-empty list is required")
        seen: set[str] = set()
        for i, r in enumerate(requests):
            cid = r.get("custom_id") if isinstance(r, dict) else None
            if not isinstance(cid, str) or not CUSTOM_ID.fullmatch(cid):
                return _anthropic_error(
                    f"requests.{i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
                )
            if cid in seen:
                return _anthropic_error(f"requests.{i}.custom_id: duplicate custom_id {cid!r}")
            if not isinstance(r.get("params"), dict):
                return _anthropic_error(f"requests.{i}.params: Field required")
            seen.add(cid)
        n = len(self.created)
        bid = f"msgbatch_{n + 1:06d}"
        now = time.time()
        self.batches[bid] = {
            "id": bid,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": _counts(processing=len(requests)),
            "ended_at": None,
            "created_at": rfc3339(now),
            "expires_at": rfc3339(now + 86400),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": None,
            "_fate": self.fate(n),
            "_polls": 0,
            "_run": 0,  # requests run so far (a cancelled batch keeps their results)
            "_requests": requests,
        }
        self.created.append(bid)
        return 200, self.public(self.batches[bid])

    def advance_messages(self, b: dict) -> None:
        """One retrieve's worth of progress of a Message Batch.

        ``in_progress`` runs a share of the requests for ``fate.polls``
        retrieves, then ends (:meth:`end_messages`; the unanswered ones
        ``expired`` with an ``expired`` fate); ``canceling`` ends with the
        others ``canceled``.

        Parameters
        ----------
        b : dict
            A Message Batch's state (changed in place).
        """
        fate: Fate = b["_fate"]
        total = len(b["_requests"])
        if b["processing_status"] == "in_progress":
            b["_polls"] += 1
            if b["_polls"] <= fate.polls:
                b["_run"] = total * b["_polls"] // (fate.polls + 1)
                return
            if fate.outcome == "expired" and fate.answered is not None:
                b["_run"] = fate.answered
            else:
                b["_run"] = total
            self.end_messages(b, "expired" if fate.outcome == "expired" else None)
        elif b["processing_status"] == "canceling":
            self.end_messages(b, "canceled")

    def end_messages(self, b: dict, unrun: str | None) -> None:
        """End a Message Batch: its first ``_run`` requests answered, the others ``unrun``.

        A ``failed`` fate errors every request run (``api_error``).  The results
        are stored in reverse request order.

        Parameters
        ----------
        b : dict
            A Message Batch's state (its results, counts and ``results_url`` are
            set in place).
        unrun : str or None
            The result type of the requests not run (``expired``, ``canceled``);
            None runs them all.
        """
        fate: Fate = b["_fate"]
        lines = []
        counts = _counts()
        for i, r in enumerate(b["_requests"]):
            if unrun is not None and i >= b["_run"]:
                result = {"type": unrun}
            elif fate.outcome == "failed":
                result = _errored("api_error", "Internal server error")
            else:
                result = self.run_message(r["params"])
            counts[result["type"]] += 1
            lines.append({"custom_id": r["custom_id"], "result": result})
        lines.reverse()  # results are not in request order (as documented)
        b["_results"] = "".join(json.dumps(x) + "\n" for x in lines).encode()
        b.update(
            processing_status="ended",
            request_counts=counts,
            ended_at=rfc3339(time.time()),
            results_url=f"{self.root}/v1/messages/batches/{b['id']}/results",
        )

    def run_message(self, params: dict) -> dict:
        """The result of one request of a Message Batch: the script's answer, or an error.

        Parameters
        ----------
        params : dict
            The request's Messages API body; ``model``, ``max_tokens`` and
            ``messages`` are required.

        Returns
        -------
        dict
            ``{"type": "succeeded", "message": ...}``, or ``{"type": "errored",
            "error": ...}`` for a malformed request or a non-200 answer.
        """
        if (
            not isinstance(params.get("model"), str)
            or not isinstance(params.get("max_tokens"), int)
            or not isinstance(params.get("messages"), list)
        ):
            return _errored("invalid_request_error", "model, max_tokens and messages are required")
        n = next(self._n)
        self.batch_requests += 1
        ans = self.script(params, n)
        if ans.status != 200:
            kind = ans.error_type or ANTHROPIC_ERROR_TYPES.get(ans.status, "api_error")
            return _errored(kind, ans.text or "error")
        message = ans.body if ans.body is not None else messages_payload(ans, params, n)
        return {"type": "succeeded", "message": message}

    def get_messages(self, parts: list[str], query: dict) -> tuple[int, dict | bytes, str]:
        """``GET /v1/messages/batches[/{id}[/results]]``.

        Parameters
        ----------
        parts : list of str
            The path's segments (``v1``, ``messages``, ``batches`` ...).
        query : dict
            The parsed query string (``limit`` 1..1000, ``after_id``,
            ``before_id``).

        Returns
        -------
        status : int
            The HTTP status (400 for results before the batch ended, 404 for an
            unknown batch).
        payload : dict or bytes
            The list, the batch (advanced one step) or the results' JSONL.
        content_type : str
            The response's content type.
        """
        if len(parts) == 3:  # the list, newest first
            try:
                limit = int(query.get("limit", ["20"])[0])
            except ValueError:
                limit = 0
            if not 1 <= limit <= 1000:
                return (*_anthropic_error("limit: must be in 1..1000"), JSON)
            ids = [i for i in self.created[::-1] if i.startswith("msgbatch_")]
            if "after_id" in query and query["after_id"][0] in ids:
                ids = ids[ids.index(query["after_id"][0]) + 1 :]
            elif "before_id" in query and query["before_id"][0] in ids:
                ids = ids[: ids.index(query["before_id"][0])][-limit:]
            page = [self.public(self.batches[i]) for i in ids[:limit]]
            body = {
                "data": page,
                "has_more": len(ids) > limit,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
            }
            return 200, body, JSON
        b = self.batches.get(parts[3])
        gone = "/".join(parts[3:]) in self.forgotten  # the batch, or its results
        if b is None or gone or len(parts) > 5 or (len(parts) == 5 and parts[4] != "results"):
            return (*_anthropic_error(f"No such batch or route: {'/'.join(parts)}", 404), JSON)
        if len(parts) == 5:
            if b["processing_status"] != "ended":
                return (*_anthropic_error(f"Batch {b['id']} has not ended"), JSON)
            return 200, b["_results"], "application/binary"
        self.polls += 1
        self.advance_messages(b)
        return 200, self.public(b), JSON

    def cancel_messages(self, bid: str) -> tuple[int, dict]:
        """``POST /v1/messages/batches/{id}/cancel``: ``canceling``, ended at the next retrieve.

        Parameters
        ----------
        bid : str
            The batch id.

        Returns
        -------
        status : int
            The HTTP status.
        payload : dict
            The JSON body: the object asked for, or an error in the API's shape.
        """
        b = self.batches.get(bid)
        if b is None:
            return _anthropic_error(f"No such batch: {bid}", 404)
        if b["processing_status"] == "in_progress":
            b.update(processing_status="canceling", cancel_initiated_at=rfc3339(time.time()))
        return 200, self.public(b)


def main(argv: list[str] | None = None) -> int:
    """``python -m bayesobs.testing.fakebatch [--reply TEXT|--hashed] [--polls N] [--port P]``: serve.

    Prints the URL first, then serves until interrupted.

    Parameters
    ----------
    argv : list of str, optional
        The command-line arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 after an interrupt; 2, with one line on stderr, for a port out of
        0..65535, a negative ``--polls`` or an address that cannot be
        listened on.
    """
    ap = argparse.ArgumentParser(description="A local OpenAI Batch API server (127.0.0.1).")
    ap.add_argument("--reply", default="0.5", help="the reply to every request (default 0.5)")
    ap.add_argument(
        "--hashed", action="store_true", help="reply a number in [0, 1] hashed from the request"
    )
    ap.add_argument(
        "--polls", type=int, default=1, help="retrieves a batch stays in_progress (default 1)"
    )
    ap.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    args = ap.parse_args(argv)
    if not 0 <= args.port <= 65535 or args.polls < 0:
        print("fakebatch: error: --port must be in 0..65535 and --polls >= 0", file=sys.stderr)
        return 2
    script = hashed() if args.hashed else constant(args.reply)
    try:
        server = FakeBatchServer(script, always(Fate(polls=args.polls)), port=args.port)
    except OSError as exc:
        print(f"fakebatch: error: cannot listen: {exc.strerror or exc}", file=sys.stderr)
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
