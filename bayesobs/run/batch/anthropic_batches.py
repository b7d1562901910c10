"""Anthropic's Message Batches: one ``client.messages.batches.create`` per batch, results as JSONL."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import anthropic
import httpx2

from ..subjects.anthropic_messages import reply_of
from .provider import BatchState, Outcome, SdkBatches, replied, result_lines

ANTHROPIC_MAX_REQUESTS = 100_000  # Message Batches: the API's limit per batch
ANTHROPIC_MAX_BYTES = 250 * 2**20  # under the API's 256 MB per batch
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # Message Batches' custom_id (fullmatch)
TAG_CHARS = 16  # the nonce's characters that tag a Message Batch's custom_ids
FIND_SKEW_S = 300.0  # a batch found by its size may be this much older than its log record
TRANSIENT_TYPES = ("api_error", "overloaded_error", "rate_limit_error", "timeout_error")


def tagged(cid: str, nonce: str) -> str:
    """The ``custom_id`` sent in a Message Batch: ``<cid>_<tag>``, the tag the nonce's first :data:`TAG_CHARS`."""
    wire = f"{cid}_{nonce[:TAG_CHARS]}"
    if not CUSTOM_ID.fullmatch(wire):
        raise ValueError(f"custom_id {wire!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
    return wire


def message_outcome(result: Any, batch_id: str | None = None) -> Outcome:
    """The :class:`~bayesobs.run.batch.provider.Outcome` of one Message Batch result's ``result``."""
    result = result if isinstance(result, dict) else {}
    kind = result.get("type")
    if kind == "succeeded":
        return replied(reply_of, result.get("message"), batch_id)
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
    """Trial ``custom_id`` -> outcome of a Message Batch's results; with ``nonce``, only those tagged with it."""
    out = {}
    for line in result_lines(data):
        cid, _, tag = line["custom_id"].rpartition("_")
        if not cid or (nonce is not None and tag != nonce[:TAG_CHARS]):
            continue
        out[cid] = message_outcome(line.get("result"), batch_id)
    return out


def parse_time(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 time (a string or a datetime; no zone: UTC), else None."""
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
    """Anthropic's Message Batches through the official SDK, for one ``anthropic:`` subject."""

    max_requests = ANTHROPIC_MAX_REQUESTS
    max_bytes = ANTHROPIC_MAX_BYTES
    api_name = "Message Batches"
    api_errors = (anthropic.APIStatusError, anthropic.APIConnectionError)

    @staticmethod
    def line(cid: str, body: dict) -> bytes:
        """One request of a batch, ``{"custom_id", "params"}``, as a compact JSON line."""
        return (
            json.dumps({"custom_id": cid, "params": body}, separators=(",", ":")) + "\n"
        ).encode()

    async def submit(self, lines: list[bytes], nonce: str) -> str:
        """Create the batch, every ``custom_id`` tagged with the nonce (:func:`tagged`); its id."""
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
        """A batch's state: ``completed`` the succeeded, ``failed`` the errored, canceled and expired (named in ``errors``)."""
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
        """A batch as retrieved (:meth:`state`)."""
        b = await self.call(
            f"polling {batch_id}", self.client.messages.batches.retrieve(batch_id), gone=True
        )
        return self.state(b)

    async def results(self, state: BatchState, nonce: str | None = None) -> dict[str, Outcome]:
        """``custom_id`` -> outcome of an ended batch (its ``results_url``), only those tagged with ``nonce``."""
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
        """The batch of a ``submitting`` record (``intent``) whose id never reached the log, if any."""
        intent = intent or {}
        since = parse_time(intent.get("time_utc"))
        size = intent.get("requests")
        if since is None or not isinstance(size, int):
            return None
        since -= FIND_SKEW_S
        known = set(intent.get("known_ids") or ())
        found = None
        async for b in self.listed(self.client.messages.batches.list(limit=100)):  # newest first
            created = parse_time(b.created_at)
            if created is not None and created < since:
                return found
            if b.id not in known and self.state(b).total == size:
                found = b.id
        return found
