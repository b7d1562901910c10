"""A persistent, append-only response cache for API subjects.

Keys hash the full request (model, parameters, messages with images), the
endpoint *and* the trial's identity (subject, task, modality, condition,
session, run, trial, seed), so a re-run of the same trial does not pay twice
while repeated runs, different trials and other servers stay independent
samples.  With ``--cache-scope folder`` (the default) the key also holds the
experiment folder, so a new ``--out`` folder draws fresh samples; ``global``
shares replies across folders.  Credentials are never part of a key or an
entry.  Only replies that hold an answer are cached.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ...provenance import utc_now
from ..store import AppendLog


def default_cache_dir() -> Path:
    """``$BAYESOBS_CACHE``, else ``$XDG_CACHE_HOME/bayesobs`` (default ``~/.cache/bayesobs``).

    Returns
    -------
    Path
        The cache folder (not created here).
    """
    root = os.environ.get("BAYESOBS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "bayesobs"
    )
    return Path(root)


def request_key(payload: dict, identity: dict) -> str:
    """The cache key of a request body and the trial's identity (a SHA-256 hex digest).

    Parameters
    ----------
    payload : dict
        The request body as sent (model, parameters, messages with images);
        credentials are not in it.
    identity : dict
        The trial's identity (subject, task, modality, condition, session,
        run, trial, seed; the endpoint and, with ``--cache-scope folder``,
        the experiment folder).

    Returns
    -------
    str
        The SHA-256 hex digest of both, serialised as JSON with sorted keys.
    """
    blob = json.dumps(
        {"request": payload, "identity": identity}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """``responses.jsonl`` in a cache folder, loaded once and appended to.

    Several runs may share one cache: each record is appended under a lock on
    a line of its own (:func:`bayesobs.run.store.append_line`), so a run that
    outlives a killed one never glues its record onto the fragment the killed
    one left; :attr:`unreadable` counts such fragments (skipped).
    """

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
        """The cached entry of a key, or None.

        Parameters
        ----------
        key : str
            A :func:`request_key`.

        Returns
        -------
        dict or None
            The cached record (``key``, ``text``, ``usage``, the ``info`` fields
            and ``time_utc``), or None when the key was never cached.
        """
        return self.entries.get(key)

    def put(self, key: str, text: str, usage: dict | None, **info) -> None:
        """Append a reply (``info``: e.g. ``finish_reason``, ``folder``, ``endpoint``).

        The record is appended to ``responses.jsonl`` under the log's lock and
        kept in memory for later :meth:`get` calls.

        Parameters
        ----------
        key : str
            A :func:`request_key`.
        text : str
            The reply text.
        usage : dict or None
            The API's token usage of the call, if it reported one.
        **info
            Further fields stored with the record.
        """
        rec = {"key": key, "text": text, "usage": usage, **info, "time_utc": utc_now()}
        self.log.append(rec)
        self.entries[key] = rec
