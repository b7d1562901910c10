"""What both batch providers share: outcomes, batch states, result files and the SDK's calls."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

from ..subjects import FatalSubjectError
from ..subjects.openai_chat import EmptyReply, public_url, redact

TERMINAL = ("completed", "failed", "expired", "cancelled", "ended")  # OpenAI's, and Anthropic's
FIND_LIMIT = 1000  # batches listed when looking for one by its nonce


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


def replied(read: Callable, message, batch_id: str | None) -> Outcome:
    """``ok`` with a reply read by its subject's own reader (``reply_of``); ``retry`` without an answer."""
    try:
        text, finish, usage, details = read(json.dumps(message).encode())
    except EmptyReply as exc:
        return Outcome("retry", message=f"reply without an answer: {exc}", batch_id=batch_id)
    return Outcome("ok", "", text, finish, usage, details, batch_id)


def result_lines(data: bytes) -> Iterator[dict]:
    """The lines of a JSONL result file that have a string ``custom_id`` (unreadable ones skipped)."""
    for raw in data.split(b"\n"):
        try:
            line = json.loads(raw) if raw.strip() else None
        except ValueError:
            continue
        if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
            yield line


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
    """A provider's SDK client, its calls' errors and its listings."""

    api_name: str
    api_errors: tuple[type[Exception], ...]

    def __init__(self, subject):
        self.client = subject.client.with_options(max_retries=5, timeout=600.0)
        self.secret = subject.client.api_key

    async def call(self, what: str, coro, gone: bool = False):
        """Await an SDK call; an API error stops the run in one line (the key redacted), a 404 with ``gone`` is :class:`BatchGone`."""
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

    async def listed(self, first) -> AsyncIterator:
        """The batches of a listing (``first``: its first page), page by page, up to :data:`FIND_LIMIT` or so."""
        page = await self.call("listing batches", first)
        seen = 0
        while True:
            for b in page.data:
                yield b
            seen += len(page.data)
            if not page.has_next_page() or seen >= FIND_LIMIT:
                return
            page = await self.call("listing batches", page.get_next_page())
