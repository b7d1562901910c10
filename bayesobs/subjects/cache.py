"""A persistent, append-only response cache for API subjects.

Keys hash the full request (model, parameters, messages with images) *and*
the trial's identity (subject, task, modality, condition, session, run,
trial), so a re-run of the same trial does not pay twice while repeated runs
and different trials stay independent samples.  Credentials are never part of
a key or an entry.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..provenance import utc_now
from ..store import append_line, read_jsonl


def default_cache_dir() -> Path:
    root = os.environ.get("BAYESOBS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "bayesobs"
    )
    return Path(root)


def request_key(payload: dict, identity: dict) -> str:
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
        records, _ = read_jsonl(self.path)
        self.entries = {r["key"]: r for r in records if "key" in r}

    def get(self, key: str) -> dict | None:
        return self.entries.get(key)

    def put(self, key: str, text: str, usage: dict | None) -> None:
        rec = {"key": key, "text": text, "usage": usage, "time_utc": utc_now()}
        append_line(self.path, rec)
        self.entries[key] = rec
