"""The experiment folder: manifest, append-only trial log, stimuli, run history.

```
DIR/manifest.json   written once: spec, subjects, seeds, versions, git revision, format version
DIR/runs.jsonl      one line per invocation (start, end, what happened), appended
DIR/trials.jsonl    one line per trial, appended and flushed as each trial completes
DIR/stimuli/        PNGs named by content hash
```

Nothing is rewritten in place.  Each trial record is written with a single
``write`` on a file opened for appending, so a killed process leaves whole
lines; should a line be torn anyway (power loss), the reader skips it and the
runner redoes that trial.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .errors import BayesobsInputError
from .provenance import FORMAT_VERSION, provenance, utc_now

TRIAL_ID = ("subject", "task", "modality", "condition", "session", "run", "trial")


def _dumps(rec: dict) -> bytes:
    return (json.dumps(rec, separators=(",", ":"), allow_nan=True) + "\n").encode()


def append_line(path: Path, rec: dict) -> None:
    """Append one JSON line with a single write, flushed to the OS."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, _dumps(rec))
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> tuple[list[dict], int]:
    """Records of a JSONL log and the number of torn (unparseable) lines skipped."""
    if not path.exists():
        return [], 0
    out, torn = [], 0
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            torn += 1
    return out, torn


class ExperimentStore:
    """An experiment folder, created on first use and resumed afterwards."""

    def __init__(self, folder: str | Path, experiment: dict[str, Any]):
        self.folder = Path(folder)
        self.trials_path = self.folder / "trials.jsonl"
        self.stimuli = self.folder / "stimuli"
        manifest = self.folder / "manifest.json"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.stimuli.mkdir(exist_ok=True)
        if manifest.exists():
            old = json.loads(manifest.read_text())
            if old.get("format_version") != FORMAT_VERSION:
                raise BayesobsInputError(
                    f"{manifest}: format version {old.get('format_version')} is not {FORMAT_VERSION}"
                )
            if old.get("experiment") != json.loads(json.dumps(experiment)):
                raise BayesobsInputError(
                    f"{self.folder} holds a different experiment (its manifest.json differs from this "
                    "command's spec, subjects or seeds); use another --out folder"
                )
        else:
            tmp = manifest.with_suffix(".json.part")
            tmp.write_text(json.dumps(provenance(experiment=experiment), indent=2) + "\n")
            tmp.replace(manifest)
        self.done, self.torn = self._load()

    def _load(self) -> tuple[dict[tuple, dict], int]:
        records, torn = read_jsonl(self.trials_path)
        if self.trials_path.exists() and self.trials_path.stat().st_size:
            with self.trials_path.open("rb") as fh:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":  # a torn last line: start the next record on a fresh line
                    with self.trials_path.open("ab") as out:
                        out.write(b"\n")
        return {tuple(r[k] for k in TRIAL_ID): r for r in records}, torn

    def log_run(self, **event) -> None:
        append_line(self.folder / "runs.jsonl", {"time_utc": utc_now(), **event})

    def append(self, record: dict) -> None:
        """Log one finished trial (never twice)."""
        key = tuple(record[k] for k in TRIAL_ID)
        if key in self.done:
            raise RuntimeError(f"trial {key} is already logged")
        append_line(self.trials_path, record)
        self.done[key] = record

    def save_png(self, png: bytes) -> str:
        """Store a PNG by content hash; returns its path relative to the folder."""
        return save_png(self.folder, png)


def save_png(folder: Path, png: bytes) -> str:
    """Write ``folder/stimuli/<content hash>.png`` once; returns the relative path."""
    name = hashlib.sha256(png).hexdigest()[:20] + ".png"
    path = Path(folder) / "stimuli" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".png.part")
        tmp.write_bytes(png)
        tmp.replace(path)
    return f"stimuli/{name}"
