"""A persistent, append-only response cache for API subjects."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ...provenance import utc_now
from ..store import AppendLog


def default_cache_dir() -> Path:
    """``$BAYESOBS_CACHE``, else ``$XDG_CACHE_HOME/bayesobs`` (default ``~/.cache/bayesobs``)."""
    root = os.environ.get("BAYESOBS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "bayesobs"
    )
    return Path(root)


def request_key(payload: dict, identity: dict) -> str:
    """The cache key of a request body and the trial's identity (a SHA-256 hex digest)."""
    blob = json.dumps(
        {"request": payload, "identity": identity}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """``responses.jsonl`` in a cache folder, loaded once and appended to."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "responses.jsonl"
        self.log = AppendLog(self.path)
        # lines that are not records: fragments of writers killed mid-record while another
        # run held the cache (each left on a line of its own by the appender); skipped
        records, self.unreadable = self.log.read()
        # an empty text without a finish_reason is an entry of an older version, which cached
        # error bodies as blank answers: never replayed
        self.entries = {
            r["key"]: r
            for r in records
            if "key" in r and isinstance(r.get("text"), str) and (r["text"] or "finish_reason" in r)
        }

    def get(self, key: str) -> dict | None:
        """The cached entry of a key, or None."""
        return self.entries.get(key)

    def put(self, key: str, text: str, usage: dict | None, **info) -> None:
        """Append a reply (``info``: e.g. ``finish_reason``, ``folder``, ``endpoint``)."""
        rec = {"key": key, "text": text, "usage": usage, **info, "time_utc": utc_now()}
        self.log.append(rec)
        self.entries[key] = rec
