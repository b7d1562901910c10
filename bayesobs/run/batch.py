"""Batch APIs: a run or sweep through OpenAI's Batch API or Anthropic's Message Batches, in rounds.

``bayesobs run|sweep ... --batch`` asks every trial through the provider's
batch endpoint instead of one call at a time: the requests of a round are
written as a JSONL file (one ``{"custom_id", "method": "POST", "url":
"/v1/chat/completions", "body"}`` line each, the body exactly what the live
run would send: :meth:`~bayesobs.run.subjects.openai_chat.OpenAIChatSubject.payload`),
uploaded to ``/v1/files`` (``purpose=batch``), submitted to ``/v1/batches``
(``completion_window: "24h"``), polled, and the output and error files are
downloaded when the batch ends.

Rounds.  A rolling context carries the session's own earlier answers, so a
session's trial ``t + 1`` can only be asked once trial ``t`` is answered:
round ``t`` holds trial ``t`` of every such session (one batch per subject
and round, split at :data:`MAX_BATCH_REQUESTS` requests or
:data:`MAX_BATCH_BYTES`).  A session whose requests do not depend on its
answers (no context window, ``context_none``, and no trial asked from the
answer before it) has all its trials in the first round.  Polling starts
after :data:`POLL_FIRST_S` seconds and doubles up to ``--poll-max``
(:data:`POLL_MAX_S` by default).

The trials are logged by the live runner's own code
(:meth:`bayesobs.run.engine.Runner.run_session`, through
:class:`~bayesobs.run.store.ExperimentStore`), so the rows are those of a live
run with the same columns, plus ``batch_id``; ``latency_s`` is 0 (a batch
has no per-request timing) and ``attempts`` counts the batches a request
went in.  A reply in the response cache is replayed, not asked again, and
each batch reply is cached as a live one is.

Resumable.  ``batches.jsonl`` in the experiment folder (append-only, written
while the run holds the folder's lock) records each batch before it is
created (``submitting``: its round, subject and ``custom_id`` -> trial), its
id once created (``submitted``) and how it ended (``ended``).  A restarted
run collects the batches of trials not yet logged (waiting for those still
running) instead of asking again; a batch created just before a kill, whose
id never reached the log, is found by the ``bayesobs_nonce`` in its
``metadata``.  A request that failed (HTTP 429 or 5xx, an expired or
cancelled batch, a batch that failed validation, a reply without an answer)
goes into the next round, up to ``--max-attempts`` batches; a request that
cannot succeed (another 4xx) stops its session, as in a live run, and is
asked again when the run is resumed.  A batch, or its results, that the
provider no longer has (a 404: expired files, another project's key) is noted
(``lost`` in ``batches.jsonl``, ``batch_lost`` in ``runs.jsonl``, one line
on stderr) and its trials not logged go into the next batch.  Nothing is logged twice
(:meth:`~bayesobs.run.store.ExperimentStore.append` refuses a trial already
logged).

Providers are adapters (:func:`adapter` picks one per subject) with
``line(custom_id, body) -> bytes`` (one request as sent),
``submit(lines, nonce) -> batch id``, ``status(batch id) ->``
:class:`BatchState` and ``results(state, nonce) -> {custom_id: Outcome}``
(plus ``find(nonce, intent)``, and their ``max_requests``/``max_bytes``):
:class:`OpenAIBatches` for ``openai:`` subjects and
:class:`AnthropicBatches` for ``anthropic:`` subjects, whose requests are
``{"custom_id", "params"}`` with ``params`` the body the subject sends live
(:meth:`~bayesobs.run.subjects.anthropic_messages.AnthropicSubject.payload`),
sent as one ``client.messages.batches.create`` and read back by the
subject's own reply reader (:func:`message_outcome`).  Message Batches keep
no metadata: a batch's ``custom_id`` carry its nonce (:func:`tagged`), and
one whose id a kill kept from the log is found by its time and size.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import io
import json
import math
import re
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2
import openai

from ..errors import BayesobsInputError
from ..provenance import utc_now
from .engine import Runner, estimate, run_async
from .store import TRIAL_ID, AppendLog, ExperimentStore, LogWriteError
from .subjects import FatalSubjectError, Reply, Request, SubjectError
from .subjects.anthropic_messages import AnthropicSubject
from .subjects.anthropic_messages import reply_of as messages_reply_of
from .subjects.openai_chat import EmptyReply, public_url, redact, reply_of

ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
POLL_FIRST_S = 1.0  # the first poll, seconds after a round is submitted
POLL_MAX_S = 60.0  # --poll-max default: the longest wait between polls
MAX_BATCH_REQUESTS = 50_000  # the API's limit per batch
MAX_BATCH_BYTES = 190 * 2**20  # under the API's 200 MB per input file
BATCH_LOG = "batches.jsonl"
TERMINAL = ("completed", "failed", "expired", "cancelled", "ended")  # OpenAI's, and Anthropic's
NONCE_KEY = "bayesobs_nonce"  # batch metadata: finds a batch whose id a kill kept from the log
FIND_LIMIT = 1000  # batches listed when looking for one by its nonce
ANTHROPIC_MAX_REQUESTS = 100_000  # Message Batches: the API's limit per batch
ANTHROPIC_MAX_BYTES = 250 * 2**20  # under the API's 256 MB per batch
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # Message Batches' custom_id (fullmatch)
TAG_CHARS = 16  # the nonce's characters that tag a Message Batch's custom_ids
FIND_SKEW_S = 300.0  # a batch found by its size may be this much older than its log record
TRANSIENT_TYPES = ("api_error", "overloaded_error", "rate_limit_error", "timeout_error")


# ---------------------------------------------------------------- options
def check_poll_max(value: Any) -> float:
    """``--poll-max``: a finite number of seconds > 0, else one clear error.

    Parameters
    ----------
    value : object
        The option's value.

    Returns
    -------
    float
        ``value`` as seconds.

    Raises
    ------
    BayesobsInputError
        When ``value`` is not a finite number > 0 (a bool is not a number).
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise BayesobsInputError(f"--poll-max must be a positive number of seconds, not {value!r}")
    return float(value)


def check_batch_subjects(subjects: list[str]) -> None:
    """Every subject of a ``--batch`` run has a batch API (``openai:``, ``anthropic:``); else one clear error.

    Parameters
    ----------
    subjects : list of str
        The run's subject specs.

    Raises
    ------
    BayesobsInputError
        Naming the first subject that is neither ``openai:`` nor
        ``anthropic:``.
    """
    for s in subjects:
        if not str(s).startswith(("openai:", "anthropic:")):
            raise BayesobsInputError(
                f"--batch sends requests through OpenAI's Batch API or Anthropic's Message "
                f"Batches, which {s} does not have; run it without --batch"
            )


@dataclass
class BatchOptions:
    """How a batch run polls and splits its requests (``--poll-max``)."""

    poll_max: float = POLL_MAX_S
    max_requests: int = MAX_BATCH_REQUESTS
    max_bytes: int = MAX_BATCH_BYTES

    def __post_init__(self) -> None:
        self.poll_max = check_poll_max(self.poll_max)


# ---------------------------------------------------------------- small pure parts
def trial_key(meta: dict) -> tuple:
    """A request's trial identity (the trial table's key) from its ``meta``.

    Parameters
    ----------
    meta : dict
        A request's meta, with the :data:`~bayesobs.run.store.TRIAL_ID` keys.

    Returns
    -------
    tuple
        The values of those keys, in order.
    """
    return tuple(meta[k] for k in TRIAL_ID)


def custom_id(key: tuple) -> str:
    """The ``custom_id`` of a trial: a hash of its identity (the same in every round).

    Parameters
    ----------
    key : tuple
        The trial's identity (:func:`trial_key`).

    Returns
    -------
    str
        ``t-`` and the first 32 hex digits of the SHA-256 of the key as JSON.
    """
    return "t-" + hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()[:32]


def independent(sess) -> bool:
    """Whether a session's requests do not depend on its answers (all in the first round).

    True without a context window (``context_none``) when no trial is asked
    from the answer before it (the decomposed scavenger hunt's steps are).

    Parameters
    ----------
    sess : Session
        A planned session (:class:`bayesobs.run.runner.Session`).

    Returns
    -------
    bool
        Whether all its trials may go in one round.
    """
    return sess.cond.context == 0 and not any(sess.task.follows(s) for s in sess.stimuli)


def rounds_needed(sessions: list, done: dict) -> int:
    """Rounds a batch run takes when every request succeeds.

    A session with a rolling context takes one round per trial from its
    first trial not logged; the others all fit in the first round.

    Parameters
    ----------
    sessions : list of Session
        The planned sessions.
    done : dict
        The trials already logged, by trial key.

    Returns
    -------
    int
        The largest number of rounds any session needs (0 when all is
        logged).
    """
    n = 0
    for s in sessions:
        todo = [t for t in range(len(s.stimuli)) if (*s.key, t) not in done]
        if todo:
            n = max(n, 1 if independent(s) else len(s.stimuli) - todo[0])
    return n


def poll_delays(poll_max: float, first: float = POLL_FIRST_S) -> Iterator[float]:
    """Seconds between polls: ``first`` (at most ``poll_max``), doubling up to ``poll_max``.

    Parameters
    ----------
    poll_max : float
        The longest wait, in seconds.
    first : float
        The first wait, in seconds.

    Yields
    ------
    float
        Seconds to wait before each poll (an endless sequence).
    """
    d = min(first, poll_max)
    while True:
        yield d
        d = min(d * 2, poll_max)


def chunks(lines: list[bytes], max_requests: int, max_bytes: int) -> list[list[bytes]]:
    """Input lines split into files of at most ``max_requests`` lines and ``max_bytes`` bytes.

    Parameters
    ----------
    lines : list of bytes
        The input lines, in order.
    max_requests : int
        The most lines a file may hold.
    max_bytes : int
        The most bytes a file may hold (a single larger line gets a file of
        its own).

    Returns
    -------
    list of list of bytes
        The files' lines, in order; empty for no lines.
    """
    out: list[list[bytes]] = []
    size = 0
    for line in lines:
        if not out or len(out[-1]) >= max_requests or (out[-1] and size + len(line) > max_bytes):
            out.append([])
            size = 0
        out[-1].append(line)
        size += len(line)
    return out


def input_line(cid: str, body: dict) -> bytes:
    """One line of a batch input file.

    Parameters
    ----------
    cid : str
        The request's ``custom_id``.
    body : dict
        The chat-completion body, as the live run would send it.

    Returns
    -------
    bytes
        ``{"custom_id", "method": "POST", "url": ENDPOINT, "body"}`` as
        compact JSON with a newline.
    """
    rec = {"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": body}
    return (json.dumps(rec, separators=(",", ":")) + "\n").encode()


@dataclass
class Outcome:
    """What a batch said about one request: ``ok`` (a reply), ``retry`` or ``fatal``."""

    kind: str
    message: str = ""
    text: str = ""
    finish: str | None = None
    usage: dict | None = None
    details: dict = field(default_factory=dict)
    batch_id: str | None = None


def outcome(line: dict, batch_id: str | None = None) -> Outcome:
    """The :class:`Outcome` of one line of an output or error file (OpenAI's documented shape).

    ``response.status_code`` 200 with a chat completion that holds an answer
    is ``ok``; 200 without an answer (:func:`~bayesobs.run.subjects.openai_chat.reply_of`),
    408, 409, 429 and 5xx, and an ``error`` without a response
    (``batch_expired``, ``batch_cancelled``) are ``retry``; other statuses
    ``fatal``.

    Parameters
    ----------
    line : dict
        One line of an output or error file.
    batch_id : str, optional
        The batch it came from (kept in the outcome).

    Returns
    -------
    Outcome
        ``ok`` with the reply's text, finish reason, usage and details, or
        ``retry``/``fatal`` with a message.
    """
    resp = line.get("response")
    if not isinstance(resp, dict):
        err = line.get("error") if isinstance(line.get("error"), dict) else {}
        what = f"{err.get('code') or 'error'}: {err.get('message') or 'no response'}"
        return Outcome("retry", message=what, batch_id=batch_id)
    status = resp.get("status_code")
    body = resp.get("body")
    if status == 200:
        try:
            text, finish, usage, details = reply_of(json.dumps(body).encode())
        except EmptyReply as exc:
            return Outcome("retry", message=f"reply without an answer: {exc}", batch_id=batch_id)
        return Outcome("ok", "", text, finish, usage, details, batch_id)
    err = body.get("error") if isinstance(body, dict) else None
    msg = err.get("message", err) if isinstance(err, dict) else err
    what = f"HTTP {status}: {str(msg or body)[:300]}"
    transient = isinstance(status, int) and (status in (408, 409, 429) or status >= 500)
    return Outcome("retry" if transient else "fatal", message=what, batch_id=batch_id)


def read_results(data: bytes, batch_id: str | None = None) -> dict[str, Outcome]:
    """``custom_id`` -> :class:`Outcome` of an output or error file (unreadable lines skipped).

    Parameters
    ----------
    data : bytes
        The file's content (JSONL).
    batch_id : str, optional
        The batch it came from.

    Returns
    -------
    dict of str to Outcome
        ``custom_id`` -> :class:`Outcome`.
    """
    out = {}
    for raw in data.split(b"\n"):
        try:
            line = json.loads(raw) if raw.strip() else None
        except ValueError:
            continue
        if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
            out[line["custom_id"]] = outcome(line, batch_id)
    return out


# ---------------------------------------------------------------- the provider adapter
@dataclass
class BatchState:
    """A batch as last polled: status, ``request_counts`` and its files."""

    id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: str = ""
    results_url: str | None = None


class BatchGone(Exception):
    """A batch, or its results, that the provider no longer has (HTTP 404): asked again."""


class SdkBatches:
    """What both providers' batch adapters share: the SDK client and its calls' errors.

    Subclasses set ``api_name`` (for messages) and ``api_errors`` (the SDK's
    status and connection errors).
    """

    api_name: str
    api_errors: tuple[type[Exception], ...]

    def __init__(self, subject):
        self.client = subject.client.with_options(max_retries=5, timeout=600.0)
        self.secret = subject.client.api_key

    async def call(self, what: str, coro, gone: bool = False):
        """Await an SDK call; an API error stops the run in one line (the key redacted).

        Parameters
        ----------
        what : str
            What the call does, for the message (``"creating the batch"`` ...).
        coro : awaitable
            The SDK call.
        gone : bool, default False
            The call is about a batch created earlier: a 404 means the provider
            lost it (expired files, another project's key), :class:`BatchGone`.

        Returns
        -------
        object
            The call's result.

        Raises
        ------
        FatalSubjectError
            On the SDK's status or connection errors (a 404/405 with a hint to
            run without ``--batch``).
        BatchGone
            With ``gone``, on a 404.
        """
        try:
            return await coro
        except self.api_errors as exc:
            status = getattr(exc, "status_code", None)
            if gone and status == 404:
                raise BatchGone(f"{what} answered 404") from None
            hint = (
                f" (does {public_url(str(self.client.base_url))} serve the {self.api_name}? run without --batch)"
                if status in (404, 405)
                else ""
            )
            text = f"{self.api_name}: {what} failed: {type(exc).__name__}"
            text += f" ({status})" if status else ""
            raise FatalSubjectError(redact(f"{text}: {exc}{hint}", self.secret)) from None


class OpenAIBatches(SdkBatches):
    """OpenAI's Batch API through the official SDK, for one ``openai:`` subject.

    Parameters
    ----------
    subject : OpenAIChatSubject
        Its client (endpoint and key) is used, with the SDK's own retries on
        for these few calls.
    """

    max_requests = MAX_BATCH_REQUESTS
    max_bytes = MAX_BATCH_BYTES
    api_name = "Batch API"
    api_errors = (openai.APIStatusError, openai.APIConnectionError)

    @staticmethod
    def line(cid: str, body: dict) -> bytes:
        """One line of the input file (:func:`input_line`).

        Parameters
        ----------
        cid : str
            The request's ``custom_id``.
        body : dict
            The chat-completion body.

        Returns
        -------
        bytes
            The JSON line.
        """
        return input_line(cid, body)

    async def submit(self, lines: list[bytes], nonce: str) -> str:
        """Upload the input file and create the batch; returns its id.

        Parameters
        ----------
        lines : list of bytes
            The input lines (:meth:`line`).
        nonce : str
            The batch's nonce, stored in its ``metadata`` (:data:`NONCE_KEY`) and
            in the uploaded file's name.

        Returns
        -------
        str
            The batch id.

        Raises
        ------
        FatalSubjectError
            When the upload or the creation fails.
        """
        f = await self.call(
            "uploading the input file",
            self.client.files.create(
                file=(f"bayesobs-{nonce}.jsonl", io.BytesIO(b"".join(lines))), purpose="batch"
            ),
        )
        b = await self.call(
            "creating the batch",
            self.client.batches.create(
                input_file_id=f.id,
                endpoint=ENDPOINT,
                completion_window=COMPLETION_WINDOW,
                metadata={NONCE_KEY: nonce},
            ),
        )
        return b.id

    async def status(self, batch_id: str) -> BatchState:
        """Retrieve a batch.

        Parameters
        ----------
        batch_id : str
            The batch id.

        Returns
        -------
        BatchState
            Its status, request counts, output and error file ids and any
            validation errors (``code: message (line N)``, joined by ``;``).

        Raises
        ------
        FatalSubjectError
            When the retrieve fails.
        """
        b = await self.call(
            f"polling {batch_id}", self.client.batches.retrieve(batch_id), gone=True
        )
        counts = b.request_counts
        errors = "; ".join(
            f"{e.code}: {e.message}" + (f" (line {e.line})" if e.line else "")
            for e in ((b.errors.data or []) if b.errors else [])
        )
        return BatchState(
            b.id,
            b.status,
            counts.total if counts else 0,
            counts.completed if counts else 0,
            counts.failed if counts else 0,
            b.output_file_id,
            b.error_file_id,
            errors,
        )

    async def results(self, state: BatchState, nonce: str | None = None) -> dict[str, Outcome]:
        """``custom_id`` -> :class:`Outcome` of an ended batch (output and error files).

        An output line wins over an error line of the same ``custom_id``.

        Parameters
        ----------
        state : BatchState
            The ended batch.
        nonce : str, optional
            Not used (OpenAI's ``custom_id`` carry no tag).

        Returns
        -------
        dict of str to Outcome
            ``custom_id`` -> :class:`Outcome`.

        Raises
        ------
        FatalSubjectError
            When a download fails.
        """
        out: dict[str, Outcome] = {}
        for fid in (state.error_file_id, state.output_file_id):  # outputs win
            if fid:
                resp = await self.call(
                    f"downloading {fid} of {state.id}", self.client.files.content(fid), gone=True
                )
                out.update(read_results(resp.content, state.id))
        return out

    async def find(self, nonce: str, intent: dict | None = None) -> str | None:
        """The id of a batch created with this nonce (its id never logged), if any.

        Parameters
        ----------
        nonce : str
            The nonce of the ``submitting`` record.
        intent : dict, optional
            The record (not needed: the nonce is in the batch's metadata).

        Returns
        -------
        str or None
            The id of the batch whose metadata holds the nonce, among the newest
            :data:`FIND_LIMIT` or so; None when there is none.
        """
        seen = 0
        page = await self.call("listing batches", self.client.batches.list(limit=100))
        while True:
            for b in page.data:
                if (b.metadata or {}).get(NONCE_KEY) == nonce:
                    return b.id
            seen += len(page.data)
            if not page.has_next_page() or seen >= FIND_LIMIT:
                return None
            page = await self.call("listing batches", page.get_next_page())


# ---------------------------------------------------------------- Anthropic's Message Batches
def message_request(cid: str, body: dict) -> bytes:
    """One request of a Message Batch, ``{"custom_id", "params"}``, as a JSON line.

    Parameters
    ----------
    cid : str
        The request's ``custom_id``.
    body : dict
        The Messages API body, as the live run would send it.

    Returns
    -------
    bytes
        Compact JSON with a newline.
    """
    return (json.dumps({"custom_id": cid, "params": body}, separators=(",", ":")) + "\n").encode()


def tagged(cid: str, nonce: str) -> str:
    """The ``custom_id`` sent in a Message Batch: the trial's, tagged with the batch's nonce.

    Message Batches keep no metadata, so the tag is what shows that a result
    belongs to the batch this run created (a batch found again by its size
    after a kill, :meth:`AnthropicBatches.find`).  It matches the API's
    ``^[a-zA-Z0-9_-]{1,64}$``.

    Parameters
    ----------
    cid : str
        The trial's :func:`custom_id`.
    nonce : str
        The batch's nonce (its first :data:`TAG_CHARS` characters are used).

    Returns
    -------
    str
        ``<cid>_<tag>``.

    Raises
    ------
    ValueError
        When the result does not match the API's pattern.
    """
    wire = f"{cid}_{nonce[:TAG_CHARS]}"
    if not CUSTOM_ID.fullmatch(wire):
        raise ValueError(f"custom_id {wire!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
    return wire


def message_outcome(result: Any, batch_id: str | None = None) -> Outcome:
    """The :class:`Outcome` of one Message Batch result (Anthropic's documented shape).

    ``succeeded`` with a message that holds an answer is ``ok`` (read by the
    ``anthropic:`` subject's own :func:`~bayesobs.run.subjects.anthropic_messages.reply_of`);
    a message without one, ``errored`` with a transient error type
    (:data:`TRANSIENT_TYPES`), ``canceled`` and ``expired`` are ``retry``;
    another error type (``invalid_request_error``: the request cannot
    succeed) is ``fatal``.

    Parameters
    ----------
    result : dict
        A result's ``result`` object (anything else reads as no result).
    batch_id : str, optional
        The batch it came from.

    Returns
    -------
    Outcome
        ``ok`` with the reply, or ``retry``/``fatal`` with a message.
    """
    result = result if isinstance(result, dict) else {}
    kind = result.get("type")
    if kind == "succeeded":
        try:
            text, finish, usage, details = messages_reply_of(
                json.dumps(result.get("message")).encode()
            )
        except EmptyReply as exc:
            return Outcome("retry", message=f"reply without an answer: {exc}", batch_id=batch_id)
        return Outcome("ok", "", text, finish, usage, details, batch_id)
    if kind == "errored":
        outer = result.get("error") if isinstance(result.get("error"), dict) else {}
        err = outer.get("error") if isinstance(outer.get("error"), dict) else outer
        etype = err.get("type")
        what = f"errored, {etype or 'error'}: {str(err.get('message') or '')[:300]}"
        fatal = isinstance(etype, str) and etype not in TRANSIENT_TYPES
        return Outcome("fatal" if fatal else "retry", message=what, batch_id=batch_id)
    return Outcome("retry", message=f"{kind or 'no result'}: not run", batch_id=batch_id)


def read_message_results(
    data: bytes, batch_id: str | None = None, nonce: str | None = None
) -> dict[str, Outcome]:
    """``custom_id`` -> :class:`Outcome` of a Message Batch's results (JSONL).

    A tagged ``custom_id`` (:func:`tagged`) is read back as the trial's; with
    ``nonce``, a result whose tag is another batch's is left out.
    Unreadable lines are skipped.

    Parameters
    ----------
    data : bytes
        The results (JSONL).
    batch_id : str, optional
        The batch they came from.
    nonce : str, optional
        The batch's nonce; when given, only results tagged with it are read.

    Returns
    -------
    dict of str to Outcome
        ``custom_id`` -> :class:`Outcome`.
    """
    out = {}
    for raw in data.split(b"\n"):
        try:
            line = json.loads(raw) if raw.strip() else None
        except ValueError:
            continue
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            continue
        cid, _, tag = line["custom_id"].rpartition("_")
        if not cid or (nonce is not None and tag != nonce[:TAG_CHARS]):
            continue
        out[cid] = message_outcome(line.get("result"), batch_id)
    return out


def parse_time(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 time (a string or a datetime), else None.

    A time without a zone is taken as UTC.

    Parameters
    ----------
    value : str or datetime
        The time (``Z`` allowed for UTC).

    Returns
    -------
    float or None
        Seconds since the epoch; None for anything unreadable.
    """
    if isinstance(value, dt.datetime):
        t = value
    elif isinstance(value, str):
        try:
            t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.timestamp()


class AnthropicBatches(SdkBatches):
    """Anthropic's Message Batches through the official SDK, for one ``anthropic:`` subject.

    A batch is ``client.messages.batches.create(requests=[{custom_id,
    params}])``, each ``params`` exactly the body the subject sends live
    (:meth:`~bayesobs.run.subjects.anthropic_messages.AnthropicSubject.payload`);
    ``processing_status`` goes ``in_progress`` (or ``canceling``) ->
    ``ended``, when ``request_counts`` (``processing``, ``succeeded``,
    ``errored``, ``canceled``, ``expired``) are final and the JSONL at
    ``results_url`` holds one ``{custom_id, result}`` per request.

    Parameters
    ----------
    subject : AnthropicSubject
        Its client (endpoint and key) is used, with the SDK's own retries on
        for these few calls.
    """

    max_requests = ANTHROPIC_MAX_REQUESTS
    max_bytes = ANTHROPIC_MAX_BYTES
    api_name = "Message Batches"
    api_errors = (anthropic.APIStatusError, anthropic.APIConnectionError)

    @staticmethod
    def line(cid: str, body: dict) -> bytes:
        """One request of a batch (:func:`message_request`).

        Parameters
        ----------
        cid : str
            The request's ``custom_id``.
        body : dict
            The Messages API body.

        Returns
        -------
        bytes
            The JSON line.
        """
        return message_request(cid, body)

    async def submit(self, lines: list[bytes], nonce: str) -> str:
        """Create the batch, its ``custom_id`` tagged with the nonce; returns its id.

        Parameters
        ----------
        lines : list of bytes
            The requests (:meth:`line`).
        nonce : str
            The batch's nonce, tagged onto every ``custom_id`` (:func:`tagged`).

        Returns
        -------
        str
            The batch id.

        Raises
        ------
        FatalSubjectError
            When the creation fails.
        """
        requests = []
        for raw in lines:
            rec = json.loads(raw)
            requests.append({"custom_id": tagged(rec["custom_id"], nonce), "params": rec["params"]})
        b = await self.call(
            "creating the batch", self.client.messages.batches.create(requests=requests)
        )
        return b.id

    @staticmethod
    def state(b) -> BatchState:
        """A :class:`BatchState` of a Message Batch object.

        Parameters
        ----------
        b : MessageBatch
            The SDK's batch object.

        Returns
        -------
        BatchState
            ``processing_status`` as the status; ``total`` all requests,
            ``completed`` the succeeded ones, ``failed`` the errored, canceled and
            expired ones (named in ``errors``); and ``results_url``.
        """
        c = b.request_counts
        failed = {"errored": c.errored, "canceled": c.canceled, "expired": c.expired}
        return BatchState(
            b.id,
            b.processing_status,
            c.processing + c.succeeded + sum(failed.values()),
            c.succeeded,
            sum(failed.values()),
            errors=", ".join(f"{n} {k}" for k, n in failed.items() if n),
            results_url=b.results_url,
        )

    async def status(self, batch_id: str) -> BatchState:
        """Retrieve a batch.

        Parameters
        ----------
        batch_id : str
            The batch id.

        Returns
        -------
        BatchState
            See :meth:`state`.

        Raises
        ------
        FatalSubjectError
            When the retrieve fails.
        """
        b = await self.call(
            f"polling {batch_id}", self.client.messages.batches.retrieve(batch_id), gone=True
        )
        return self.state(b)

    async def results(self, state: BatchState, nonce: str | None = None) -> dict[str, Outcome]:
        """``custom_id`` -> :class:`Outcome` of an ended batch (its ``results_url``).

        Parameters
        ----------
        state : BatchState
            The ended batch (no ``results_url``: no results).
        nonce : str, optional
            The batch's nonce: only results tagged with it are read.

        Returns
        -------
        dict of str to Outcome
            ``custom_id`` -> :class:`Outcome`.

        Raises
        ------
        FatalSubjectError
            When the download fails.
        """
        if not state.results_url:
            return {}
        resp = await self.call(
            f"downloading the results of {state.id}",
            self.client.get(
                state.results_url,
                cast_to=httpx2.Response,
                options={"headers": {"Accept": "application/binary"}},
            ),
            gone=True,
        )
        return read_message_results(resp.content, state.id, nonce)

    async def find(self, nonce: str, intent: dict | None = None) -> str | None:
        """The id of the batch of a ``submitting`` record whose id never reached the log, if any.

        Message Batches keep no metadata: the batch is the oldest one created
        since the record (less :data:`FIND_SKEW_S`), with as many requests,
        whose id is not already in the log (``intent["known_ids"]``).  Its
        results are read only under the nonce's tag, so a wrong guess asks
        its trials again but logs nothing wrong.

        Parameters
        ----------
        nonce : str
            The nonce of the ``submitting`` record.
        intent : dict, optional
            The record: its ``time_utc``, ``requests`` (the batch's size) and
            ``known_ids`` (batch ids already in the log).

        Returns
        -------
        str or None
            The batch id, or None (also when the record lacks a time or a size).
        """
        intent = intent or {}
        since = parse_time(intent.get("time_utc"))
        size = intent.get("requests")
        if since is None or not isinstance(size, int):
            return None
        since -= FIND_SKEW_S
        known = set(intent.get("known_ids") or ())
        found = None
        seen = 0
        page = await self.call("listing batches", self.client.messages.batches.list(limit=100))
        while True:
            for b in page.data:  # newest first
                created = parse_time(b.created_at)
                if created is not None and created < since:
                    return found
                if b.id not in known and self.state(b).total == size:
                    found = b.id
            seen += len(page.data)
            if not page.has_next_page() or seen >= FIND_LIMIT:
                return found
            page = await self.call("listing batches", page.get_next_page())


def adapter(subject):
    """The batch API of a subject: :class:`AnthropicBatches` or :class:`OpenAIBatches`.

    Parameters
    ----------
    subject : OpenAIChatSubject or AnthropicSubject
        An API subject.

    Returns
    -------
    OpenAIBatches or AnthropicBatches
        The adapter, using the subject's client.
    """
    if isinstance(subject, AnthropicSubject):
        return AnthropicBatches(subject)
    return OpenAIBatches(subject)


# ---------------------------------------------------------------- the engine
class Pending(Exception):
    """A trial whose reply is not known yet: its session waits for the next round."""

    def __init__(self, key: tuple, body: dict):
        super().__init__(key)
        self.key = key
        self.body = body


@dataclass
class Submitted:
    """A batch of this folder: its round, subject and ``custom_id`` -> trial."""

    batch_id: str
    round: int
    subject: str
    ids: dict[str, tuple]
    state: BatchState | None = None
    nonce: str | None = None


class ShadowStore:
    """A stand-in store for collecting requests: nothing is written, trials are only noted."""

    def __init__(self, done: dict):
        self.done = dict(done)
        self.requests: dict[str, dict] = {}

    def append(self, record: dict) -> None:
        """Note a (placeholder) trial so the session goes on.

        Parameters
        ----------
        record : dict
            The trial row; only its trial key is read.
        """
        self.done[tuple(record[k] for k in TRIAL_ID)] = record

    def save_png(self, png: bytes) -> str:
        """No image is written here (the real pass writes it).

        Parameters
        ----------
        png : bytes
            The image (not written).

        Returns
        -------
        str
            ``stimuli/(pending).png``.
        """
        return "stimuli/(pending).png"

    def log_run(self, **event) -> None:
        """Nothing is logged here.

        Parameters
        ----------
        **event
            The event (ignored).
        """


class BatchSubject:
    """What the runner asks during a batch run: replies from batches, or the request noted.

    A trial whose reply is known (a batch result or the response cache)
    gets it; otherwise :class:`Pending` is raised (the session waits for the
    next round) or, with ``collect``, the request is noted and a placeholder
    returned (a session whose requests do not depend on its answers).
    """

    def __init__(self, engine: BatchRun, subject, collect: list | None = None):
        self.engine = engine
        self.subject = subject
        self.collect = collect

    async def complete(self, request: Request) -> Reply:
        """The reply of a trial, if known.

        Parameters
        ----------
        request : Request
            The trial's request.

        Returns
        -------
        Reply
            The batch's reply (:meth:`BatchRun.reply`), the response cache's, or,
            when collecting, an empty placeholder.

        Raises
        ------
        SubjectError
            When the trial's batch outcome is not ``ok`` (it cannot succeed, or
            its attempts ran out).
        Pending
            When the reply is not known yet and requests are not being collected.
        """
        key = trial_key(request.meta)
        body = self.subject.payload(request)
        out = self.engine.results.get(key)
        if out is not None:
            if out.kind != "ok":
                raise SubjectError(out.message)
            return self.engine.reply(self.subject, request, body, out)
        hit = self.engine.cached(self.subject, request, body)
        if hit is not None:
            return hit
        if self.collect is not None:
            self.collect.append((key, body))
            return Reply(text="")
        raise Pending(key, body)


class BatchRun:
    """Runs sessions through batch APIs in rounds into a store (see the module doc).

    Parameters
    ----------
    store : ExperimentStore
        The experiment folder, held with its lock.
    subjects : dict
        ``openai:`` subject objects by name.
    options : BatchOptions
        Polling and splitting.
    progress : bool
        A progress bar (else one line per poll on stderr).
    """

    def __init__(self, store: ExperimentStore, subjects: dict, options: BatchOptions, progress):

        self.store = store
        self.subjects = subjects
        self.options = options
        self.progress = progress
        self.log = AppendLog(store.folder / BATCH_LOG)
        self.providers = {name: adapter(s) for name, s in subjects.items()}
        self.results: dict[tuple, Outcome] = {}
        self.failures: Counter = Counter()  # trial -> batches it failed in (this run)
        self.inflight: dict[str, Submitted] = {}
        self.round = 0
        self.submitted = 0  # batches created by this run
        self.runner = Runner(
            store, {n: BatchSubject(self, s) for n, s in subjects.items()}, progress=False
        )
        self.report = self.runner.report
        self.finished: set[tuple] = set()
        self.stopped: set[tuple] = set()
        self.bar = None
        self.planned = 0

    # ------------------------------------------------------------ replies
    def reply(self, subject, request: Request, body: dict, out: Outcome) -> Reply:
        """A batch reply as the runner takes it, cached as a live reply would be.

        Parameters
        ----------
        subject : OpenAIChatSubject or AnthropicSubject
            The subject the request is for.
        request : Request
            The trial's request.
        body : dict
            The request body sent in the batch.
        out : Outcome
            The batch's ``ok`` outcome.

        Returns
        -------
        Reply
            The (redacted) text, usage, finish reason, ``attempts`` (batches the
            request went in) and the row's API columns with ``batch_id``.
        """
        text = redact(out.text, subject.client.api_key)
        if subject.cache is not None:
            key = subject.cache_key(body, request)
            if subject.cache.get(key) is None:
                subject.cache.put(
                    key,
                    text,
                    out.usage,
                    finish_reason=out.finish,
                    folder=subject.folder,
                    endpoint=subject.endpoint,
                    **out.details,
                )
        return Reply(
            text=text,
            usage=out.usage,
            attempts=self.failures[trial_key(request.meta)] + 1,
            finish_reason=out.finish,
            extra={**self.columns(subject, body, out.details), "batch_id": out.batch_id},
        )

    @staticmethod
    def columns(subject, body: dict, details: dict) -> dict:
        """The API columns of a row, as the subject logs them live (its ``columns``).

        Parameters
        ----------
        subject : OpenAIChatSubject or AnthropicSubject
            The subject.
        body : dict
            The request body.
        details : dict
            The reply's token details.

        Returns
        -------
        dict
            The subject's ``columns(body, details)``.
        """
        return subject.columns(body, details)

    def cached(self, subject, request: Request, body: dict) -> Reply | None:
        """The response cache's reply to a request, if it has one.

        Parameters
        ----------
        subject : OpenAIChatSubject or AnthropicSubject
            The subject.
        request : Request
            The trial's request.
        body : dict
            The request body (part of the cache key).

        Returns
        -------
        Reply or None
            The replayed reply (``cached``, no attempts), or None without a
            cache or a hit.
        """
        if subject.cache is None:
            return None
        hit = subject.cache.get(subject.cache_key(body, request))
        if hit is None:
            return None
        details = {k: hit[k] for k in ("reasoning_tokens", "cached_tokens", "logprobs") if k in hit}
        return Reply(
            text=hit["text"],
            usage=hit.get("usage"),
            cached=True,
            attempts=0,
            finish_reason=hit.get("finish_reason"),
            cached_from=hit.get("folder") or "an earlier run",
            extra=self.columns(subject, body, details),
        )

    # ------------------------------------------------------------ the log of batches
    def note(self, **rec) -> None:
        """Append a record to ``batches.jsonl``.

        Parameters
        ----------
        **rec
            The record's fields; ``time_utc`` is added first.
        """
        self.log.append({"time_utc": utc_now(), **rec})

    async def recover(self) -> None:
        """Take up the batches of earlier runs whose trials are not all logged."""
        records, _ = self.log.read()
        intents = {r["nonce"]: r for r in records if r.get("event") == "submitting"}
        ids = {r["nonce"]: r["batch_id"] for r in records if r.get("event") == "submitted"}
        ended = {r["batch_id"] for r in records if r.get("event") == "ended"}
        lost = {r["batch_id"] for r in records if r.get("event") == "lost"}
        known = set(ids.values())
        for nonce, rec in intents.items():
            self.round = max(self.round, int(rec.get("round", 0)))
            name = rec.get("subject")
            if name not in self.providers:
                continue
            keys = {cid: tuple(k) for cid, k in rec.get("ids", {}).items()}
            if all(k in self.store.done for k in keys.values()):
                continue
            bid = ids.get(nonce)
            if bid is None:
                bid = await self.providers[name].find(nonce, {**rec, "known_ids": sorted(known)})
                if bid is None:
                    continue  # never created: its trials are asked again
                known.add(bid)
                self.note(event="submitted", nonce=nonce, batch_id=bid, round=rec["round"])
            sub = Submitted(bid, int(rec["round"]), name, keys, nonce=nonce)
            if bid in lost:  # noted when it was lost: its trials are asked again
                continue
            if bid in ended:  # collect its replies again (errors were handled then)
                provider = self.providers[name]
                try:
                    state = await provider.status(bid)
                    outs = await provider.results(state, nonce)
                except BatchGone as exc:
                    self.lost(sub, exc)
                    continue
                self.absorb(sub, state, outs, errors=False)
            else:
                self.inflight[bid] = sub

    # ------------------------------------------------------------ one round
    async def advance(self, sessions: list) -> dict:
        """Log every trial whose reply is known; the first request each session waits on.

        Each session not finished or stopped is run by the live runner through
        :class:`BatchSubject`; a session that fails (other than fatally) is
        stopped and reported, as in a live run.

        Parameters
        ----------
        sessions : list of Session
            The planned sessions.

        Returns
        -------
        dict
            Session key -> (session, :class:`Pending`) of each session that waits
            on a reply.

        Raises
        ------
        FatalSubjectError
            A subject's error that stops the run.
        LogWriteError
            The folder cannot be written.
        """
        pending = {}
        for sess in sessions:
            if sess.key in self.finished or sess.key in self.stopped:
                continue
            try:
                await self.runner.run_session(sess, self.bar)
                self.finished.add(sess.key)
            except Pending as p:
                pending[sess.key] = (sess, p)
            except (FatalSubjectError, LogWriteError):
                raise
            except Exception as exc:
                label = "/".join(map(str, sess.key))
                msg = str(exc) if isinstance(exc, SubjectError) else f"{type(exc).__name__}: {exc}"
                self.report.failed_sessions.append(f"{label}: {msg}")
                self.store.log_run(event="session_failed", session=label, error=msg)
                self.stopped.add(sess.key)
        return pending

    async def requests(self, sess, first: Pending) -> list[tuple[tuple, dict]]:
        """The requests a waiting session puts in this round: one, or all for an independent one.

        Parameters
        ----------
        sess : Session
            A waiting session.
        first : Pending
            The request it waits on.

        Returns
        -------
        list of tuple
            (trial key, request body) of each request; for an independent session
            every trial without a known reply, collected by running it against a
            :class:`ShadowStore`.
        """
        if not independent(sess):
            return [(first.key, first.body)]
        noted: list[tuple[tuple, dict]] = []
        runner = self.runner
        keep = runner.store, runner.subjects, runner.report
        runner.store = ShadowStore(self.store.done)
        runner.subjects = {
            n: BatchSubject(self, s, collect=noted) for n, s in self.subjects.items()
        }
        runner.report = type(keep[2])()
        try:
            await runner.run_session(sess, None)
        finally:
            runner.store, runner.subjects, runner.report = keep
        return noted

    async def submit(self, pending: dict) -> None:
        """Submit the waiting requests not already in a batch: one batch per subject (split if large).

        Each batch is noted in ``batches.jsonl`` as ``submitting`` before it is
        created and as ``submitted`` with its id after.

        Parameters
        ----------
        pending : dict
            The waiting sessions (:meth:`advance`).
        """
        flying = {k for sub in self.inflight.values() for k in sub.ids.values()}
        by_subject: dict[str, dict[str, tuple[tuple, dict]]] = {}
        for sess, first in pending.values():
            for key, body in await self.requests(sess, first):
                if key in flying or key in self.results:
                    continue
                by_subject.setdefault(sess.subject, {})[custom_id(key)] = (key, body)
        if not by_subject:
            return
        self.round += 1
        for name, reqs in by_subject.items():
            provider = self.providers[name]
            lines = [provider.line(cid, body) for cid, (_, body) in reqs.items()]
            cids = list(reqs)
            start = 0
            most = min(self.options.max_requests, provider.max_requests)
            for part in chunks(lines, most, min(self.options.max_bytes, provider.max_bytes)):
                ids = {cid: reqs[cid][0] for cid in cids[start : start + len(part)]}
                start += len(part)
                nonce = uuid.uuid4().hex
                self.note(
                    event="submitting",
                    nonce=nonce,
                    round=self.round,
                    subject=name,
                    requests=len(part),
                    ids={cid: list(k) for cid, k in ids.items()},
                )
                bid = await provider.submit(part, nonce)
                self.note(event="submitted", nonce=nonce, batch_id=bid, round=self.round)
                self.inflight[bid] = Submitted(bid, self.round, name, ids, nonce=nonce)
                self.submitted += 1

    def absorb(
        self, sub: Submitted, state: BatchState, outs: dict[str, Outcome], errors: bool = True
    ) -> tuple[int, int]:
        """Take an ended batch's replies; count failures (``errors``: from this run's batches).

        Returns the numbers of requests to retry and of those that cannot succeed.

        Parameters
        ----------
        sub : Submitted
            The batch as submitted.
        state : BatchState
            Its ended state.
        outs : dict of str to Outcome
            Its results by ``custom_id``; a request without one is a ``retry``.
        errors : bool
            Whether failures count (False for a batch of an earlier run collected
            again: only its replies are taken).

        Returns
        -------
        retry, fatal : int
            Requests to retry, and those that cannot succeed (including those
            whose ``max_attempts`` batches ran out).
        """
        retry = fatal = 0
        why = f"batch {state.id} {state.status}" + (f" ({state.errors})" if state.errors else "")
        for cid, key in sub.ids.items():
            if key in self.store.done or (key in self.results and self.results[key].kind == "ok"):
                continue
            out = outs.get(cid) or Outcome("retry", message=f"{why}: no reply", batch_id=state.id)
            if out.kind == "ok":
                self.results[key] = out
            elif not errors:
                continue
            elif out.kind == "fatal":
                self.results[key] = out
                fatal += 1
            else:
                self.failures[key] += 1
                n = self.failures[key]
                limit = self.subjects[sub.subject].options.max_attempts
                if n >= limit:
                    self.results[key] = Outcome(
                        "fatal", message=f"gave up after {n} batches: {out.message}"
                    )
                    fatal += 1
                else:
                    retry += 1
        return retry, fatal

    def lost(self, sub: Submitted, exc: BatchGone) -> None:
        """Note a batch the provider lost (``batches.jsonl``, ``runs.jsonl``, one line on stderr).

        Its trials not logged go into the next batch (a try, as an expired batch's).

        Parameters
        ----------
        sub : Submitted
            The batch.
        exc : BatchGone
            What answered 404.
        """
        todo = sum(k not in self.store.done for k in sub.ids.values())
        self.note(event="lost", batch_id=sub.batch_id, round=sub.round, error=str(exc))
        self.store.log_run(
            event="batch_lost",
            batch_id=sub.batch_id,
            subject=sub.subject,
            round=sub.round,
            requests=todo,
            error=str(exc),
        )
        api = self.providers[sub.subject].api_name
        print(
            f"note: {api}: batch {sub.batch_id} is gone ({exc}: expired, or made with another "
            f"key); its {todo} request(s) not logged are asked again in the next batch",
            file=sys.stderr,
        )
        self.absorb(sub, BatchState(sub.batch_id, "lost", errors=str(exc)), {})

    async def wait(self) -> None:
        """Poll the batches in flight until every one has ended, collecting each as it ends."""
        delays = poll_delays(self.options.poll_max)
        states: dict[str, BatchState] = {}  # the batches of this wait, ended ones too
        while self.inflight:
            await asyncio.sleep(next(delays))
            for bid, sub in list(self.inflight.items()):
                provider = self.providers[sub.subject]
                try:
                    sub.state = states[bid] = state = await provider.status(bid)
                    if state.status not in TERMINAL:
                        continue
                    outs = await provider.results(state, sub.nonce)
                except BatchGone as exc:
                    self.lost(sub, exc)
                    del self.inflight[bid]
                    continue
                retry, fatal = self.absorb(sub, state, outs)
                self.note(
                    event="ended",
                    batch_id=bid,
                    round=sub.round,
                    status=state.status,
                    request_counts={
                        "total": state.total,
                        "completed": state.completed,
                        "failed": state.failed,
                    },
                    errors=state.errors or None,
                    retry=retry,
                    failed=fatal,
                )
                del self.inflight[bid]
            self.show(list(states.values()))

    def show(self, states: list[BatchState]) -> None:
        """The round and the batches' status and request counts (bar, or one line on stderr).

        Parameters
        ----------
        states : list of BatchState
            The batches of this wait.
        """
        total = sum(s.total for s in states)
        done = sum(s.completed for s in states)
        failed = sum(s.failed for s in states)
        status = ",".join(sorted({s.status for s in states}))
        text = (
            f"round {self.round}/{self.planned}: {len(states)} batch(es) {status}, "
            f"{done}/{total} requests done, {failed} failed"
        )
        if self.bar is not None:
            self.bar.set_description(f"round {self.round}/{self.planned}")
            self.bar.set_postfix_str(f"{status} {done}/{total} done {failed} failed")
        else:
            print(f"batch: {text}", file=sys.stderr)

    # ------------------------------------------------------------ the whole run
    async def run(self, sessions: list, chat: dict | None = None) -> None:
        """Rounds until every session is logged or stopped.

        Batches of earlier runs are taken up first (:meth:`recover`); then each
        round logs what is known, submits what waits and polls until its batches
        end.

        Parameters
        ----------
        sessions : list of Session
            The planned sessions.
        chat : dict, optional
            The chat options, for the cost estimate said on stderr.
        """
        t0 = time.perf_counter()
        await self.recover()
        done0 = dict(self.store.done)
        skipped = sum(1 for s in sessions for t in range(len(s.stimuli)) if (*s.key, t) in done0)
        est = estimate(sessions, done0, chat)
        rounds = rounds_needed(sessions, done0)
        self.planned = self.round + rounds
        if est["calls"]:
            dependent = sum(1 for s in sessions if not independent(s))
            print(
                f"batch: {est['calls']} request(s) in {rounds} round(s) "
                f"({dependent} session(s) with a rolling context ask one trial per round; "
                f"{len(sessions) - dependent} without one ask all theirs in the first round); "
                f"estimated saving 50% of the live price: about {est['input_tokens'] // 2:,} of "
                f"{est['input_tokens']:,} input tokens and up to {est['output_tokens'] // 2:,} of "
                f"{est['output_tokens']:,} output tokens"
                + (
                    f"; {len(self.inflight)} batch(es) of an earlier run collected first"
                    if self.inflight
                    else ""
                ),
                file=sys.stderr,
            )
        if self.progress and est["calls"]:
            from tqdm.auto import tqdm  # start-up time: tqdm loads only when a bar is shown

            self.bar = tqdm(total=est["calls"], unit="trial", desc="round 0", file=sys.stderr)
        try:
            while True:
                pending = await self.advance(sessions)
                if not pending and not self.inflight:
                    break
                await self.submit(pending)
                if not self.inflight:  # nothing could be submitted: should not happen
                    raise RuntimeError("batch run: trials wait but no batch is in flight")
                self.planned = max(self.planned, self.round)
                await self.wait()
        finally:
            if self.bar is not None:
                self.bar.close()
        self.report.skipped = skipped
        self.report.seconds = time.perf_counter() - t0


def execute_batch(
    sessions: list,
    store: ExperimentStore,
    subjects: dict,
    options: BatchOptions,
    chat: dict | None = None,
    progress: bool = False,
):
    """Run sessions through batch APIs into ``store``; logs the invocation in ``runs.jsonl``.

    The subjects' clients are closed at the end; a run that stops is logged
    as ``stopped`` and its error raised again.

    Parameters
    ----------
    sessions : list of Session
        The planned sessions.
    store : ExperimentStore
        The experiment folder, held with its lock.
    subjects : dict
        API subjects (``openai:``, ``anthropic:``) by name.
    options : BatchOptions
        Polling and splitting.
    chat : dict, optional
        The chat options, for the cost estimate.
    progress : bool
        A progress bar (else one line per poll on stderr).

    Returns
    -------
    RunReport
        The run's :class:`~bayesobs.run.engine.RunReport`.
    """
    store.log_run(event="start", sessions=len(sessions), batch=True)
    engine = BatchRun(store, subjects, options, progress)

    async def go():
        try:
            await engine.run(sessions, chat)
        finally:
            for subj in subjects.values():
                await subj.aclose()

    try:
        run_async(go)
    except BaseException as exc:
        try:
            store.log_run(
                event="stopped", error=f"{type(exc).__name__}: {exc}", logged=engine.report.done
            )
        except LogWriteError:
            pass
        raise
    report = engine.report
    store.log_run(
        event="end",
        logged=report.done,
        resumed=report.skipped,
        cached=report.cached,
        cached_from=dict(report.cached_from),
        unparsed=report.unparsed,
        failed_sessions=report.failed_sessions,
        seconds=round(report.seconds, 3),
        batch_rounds=engine.round,
        batches=engine.submitted,
    )
    return report
