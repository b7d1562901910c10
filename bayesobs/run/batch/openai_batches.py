"""OpenAI's Batch API: JSONL input files, ``/v1/batches``, output and error files."""

from __future__ import annotations

import io
import json

import openai

from ..subjects.openai_chat import reply_of
from .options import MAX_BATCH_BYTES, MAX_BATCH_REQUESTS
from .provider import BatchState, Outcome, SdkBatches, replied, result_lines

ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
NONCE_KEY = "bayesobs_nonce"  # batch metadata: finds a batch whose id a kill kept from the log


def outcome(line: dict, batch_id: str | None = None) -> Outcome:
    """The :class:`~bayesobs.run.batch.provider.Outcome` of one line of an output or error file."""
    resp = line.get("response")
    if not isinstance(resp, dict):
        err = line.get("error") if isinstance(line.get("error"), dict) else {}
        what = f"{err.get('code') or 'error'}: {err.get('message') or 'no response'}"
        return Outcome("retry", message=what, batch_id=batch_id)
    status = resp.get("status_code")
    body = resp.get("body")
    if status == 200:
        return replied(reply_of, body, batch_id)
    err = body.get("error") if isinstance(body, dict) else None
    msg = err.get("message", err) if isinstance(err, dict) else err
    what = f"HTTP {status}: {str(msg or body)[:300]}"
    transient = isinstance(status, int) and (status in (408, 409, 429) or status >= 500)
    return Outcome("retry" if transient else "fatal", message=what, batch_id=batch_id)


class OpenAIBatches(SdkBatches):
    """OpenAI's Batch API through the official SDK, for one ``openai:`` subject."""

    max_requests = MAX_BATCH_REQUESTS
    max_bytes = MAX_BATCH_BYTES
    api_name = "Batch API"
    api_errors = (openai.APIStatusError, openai.APIConnectionError)

    @staticmethod
    def line(cid: str, body: dict) -> bytes:
        """One line of the input file: ``{"custom_id", "method", "url", "body"}`` as compact JSON."""
        rec = {"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": body}
        return (json.dumps(rec, separators=(",", ":")) + "\n").encode()

    async def submit(self, lines: list[bytes], nonce: str) -> str:
        """Upload the input file and create the batch, the nonce in its ``metadata``; its id."""
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
        """A batch as retrieved, its validation errors as ``code: message (line N)`` joined by ``;``."""
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
        """``custom_id`` -> outcome of an ended batch; an output line wins over an error line."""
        out: dict[str, Outcome] = {}
        for fid in (state.error_file_id, state.output_file_id):  # outputs win
            if fid:
                resp = await self.call(
                    f"downloading {fid} of {state.id}", self.client.files.content(fid), gone=True
                )
                out.update(
                    {ln["custom_id"]: outcome(ln, state.id) for ln in result_lines(resp.content)}
                )
        return out

    async def find(self, nonce: str, intent: dict | None = None) -> str | None:
        """The id of the batch whose metadata holds the nonce, among the newest listed; else None."""
        async for b in self.listed(self.client.batches.list(limit=100)):
            if (b.metadata or {}).get(NONCE_KEY) == nonce:
                return b.id
        return None
