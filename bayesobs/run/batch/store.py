"""The stand-in store a batch run collects an independent session's requests with."""

from __future__ import annotations

from ..store import TRIAL_ID

BATCH_LOG = "batches.jsonl"  # the folder's record of batches (see bayesobs.run.batch)


class ShadowStore:
    """A store where nothing is written: trials are only noted, so a session runs to its end."""

    def __init__(self, done: dict):
        self.done = dict(done)

    def append(self, record: dict) -> None:
        """Note a (placeholder) trial by its trial key so the session goes on."""
        self.done[tuple(record[k] for k in TRIAL_ID)] = record

    def save_png(self, png: bytes) -> str:
        """No image is written here (the real pass writes it)."""
        return "stimuli/(pending).png"

    def log_run(self, **event) -> None:
        """Nothing is logged here."""
