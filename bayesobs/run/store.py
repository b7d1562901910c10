"""The experiment folder: manifest, append-only trial log, stimuli, run history."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import socket
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..errors import BayesobsInputError
from ..jsonl import finite, read_records
from ..provenance import FORMAT_VERSION, provenance, read_manifest, utc_now
from ..trials import TRIAL_KEYS

TRIAL_ID = TRIAL_KEYS  # a trial's identity in the log: the trial table's key
SAVED_PNGS = 4096  # names of written PNGs a store remembers (see ExperimentStore.save_png)
# keys that name a file rather than say what it holds: the same spec reached by two names is one experiment
_PATH_KEYS = ("_path", "protocol")


class LogWriteError(BayesobsInputError):
    """A log or folder could not be written (full disk, read-only folder); what was logged is kept."""


def _dumps(rec: dict) -> bytes:
    """One strict-JSON line: NaN and infinities are written as null (other languages read the log)."""
    try:
        text = json.dumps(rec, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(finite(rec), separators=(",", ":"), allow_nan=False)
    return (text + "\n").encode()


def _write_error(path: Path, exc: OSError) -> LogWriteError:
    what = "the disk is full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
    return LogWriteError(f"cannot write {path}: {what}; everything logged before is kept")


def repair_tail(path: str | Path) -> bytes:
    """Cut a log back to its last complete line; return the fragment cut (empty if none)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise _write_error(path, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size == 0:
            return b""
        # find the last newline, reading backwards in blocks
        end, block = size, 1 << 16
        last_nl = -1
        while end > 0 and last_nl < 0:
            start = max(0, end - block)
            chunk = os.pread(fd, end - start, start)
            i = chunk.rfind(b"\n")
            if i >= 0:
                last_nl = start + i
            end = start
        keep = last_nl + 1
        if keep == size:
            return b""
        fragment = os.pread(fd, size - keep, keep)
        side = path.with_name(path.name + ".torn")
        with side.open("ab") as fh:
            fh.write(fragment + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.ftruncate(fd, keep)
        return fragment
    except OSError as exc:
        raise _write_error(path, exc) from None
    finally:
        os.close(fd)


class AppendLog:
    """An append-only JSON-lines log; opening it cuts a torn tail (see :func:`repair_tail`)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.torn = repair_tail(self.path)

    def read(self) -> tuple[list[dict], int]:
        """Records of the log and the number of unreadable lines skipped (see :func:`read_jsonl`)."""
        return read_jsonl(self.path)

    def append(self, rec: dict) -> None:
        """Append one record (see :func:`append_line`)."""
        append_line(self.path, rec)


def append_line(path: str | Path, rec: dict) -> None:
    """Append one JSON line with a single write under an exclusive ``flock``."""
    path = Path(path)
    data = _dumps(rec)
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise _write_error(path, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # a killed writer's torn fragment: never glue onto it
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as exc:
            try:
                os.ftruncate(fd, size)  # undo a partial record
            except OSError:
                pass
            raise _write_error(path, exc) from None
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> tuple[list[dict], int]:
    """Records of a JSONL log and the number of torn (unparseable) lines skipped."""
    records, _, torn = read_records(path)
    return records, torn


def trial_id(rec: dict, where: str) -> tuple:
    """A logged trial's key (:data:`TRIAL_ID` values); one clear error for a line that has none."""
    missing = [k for k in TRIAL_ID if k not in rec]
    if missing:
        raise BayesobsInputError(
            f"{where}: not a trial record: no {', '.join(missing)} (fix or remove that line; "
            "nothing else was read or written)"
        )
    key = tuple(rec[k] for k in TRIAL_ID)
    if any(isinstance(v, (list, dict)) for v in key):
        raise BayesobsInputError(f"{where}: not a trial record: its key holds a list or object")
    return key


def logged_trials(path: Path) -> tuple[dict[tuple, dict], int]:
    """The trials of a log by their key, and the number of unreadable lines skipped."""
    records, lines, unreadable = read_records(path)
    keyed = {trial_id(r, f"{path}: line {i}"): r for r, i in zip(records, lines, strict=True)}
    return keyed, unreadable


def unreadable_lines(path: Path) -> list[int]:
    """1-based numbers of the non-blank lines of a JSONL log that are not JSON objects."""
    _, lines, _ = read_records(path)
    good = set(lines)
    raw = Path(path).read_bytes().split(b"\n") if Path(path).exists() else []
    return [i for i, x in enumerate(raw, start=1) if x.strip() and i not in good]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class FolderLock:
    """An exclusive lock on an experiment folder for a writer's lifetime."""

    def __init__(self, folder: Path, command: str | None = None):
        self.path = Path(folder) / ".lock"
        self.reclaimed: dict | None = None
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _write_error(self.path, exc) from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._holder()
            os.close(self.fd)
            self.fd = -1
            raise BayesobsInputError(f"{folder} is in use by {holder_text(holder)}") from None
        old = self._holder()
        if old:
            self.reclaimed = old
            alive = old.get("host") == socket.gethostname() and _pid_alive(int(old.get("pid", 0)))
            state = "" if alive else " (that process is gone)"
            print(
                f"note: reclaimed a stale lock on {folder} left by pid {old.get('pid')} on {old.get('host')}{state}",
                file=sys.stderr,
            )
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": utc_now()}
        if command:
            me["command"] = command
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, json.dumps(me).encode(), 0)
        except OSError as exc:
            self.release()
            raise _write_error(self.path, exc) from None

    def _holder(self) -> dict:
        try:
            data = os.pread(self.fd, 4096, 0)
            rec = json.loads(data) if data.strip() else {}
        except (OSError, ValueError):
            return {}
        return rec if isinstance(rec, dict) else {}

    def release(self) -> None:
        """Clear the holder and free the lock (the file stays, empty)."""
        if self.fd < 0:
            return
        try:
            os.ftruncate(self.fd, 0)
        except OSError:
            pass
        os.close(self.fd)  # closing frees the flock
        self.fd = -1

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def holder_text(holder: dict) -> str:
    """Who holds a folder, from its lock record, and what to do (one line)."""
    if not holder:
        return "another process; wait for it to finish or use another folder"
    what = f"bayesobs {holder['command']}, " if holder.get("command") else ""
    return (
        f"pid {holder.get('pid')} on {holder.get('host')} ({what}since {holder.get('since')}); "
        "wait for it to finish or use another folder"
    )


def writable_folder(folder: str | Path) -> Path:
    """Create an experiment folder if needed; refuse a file or a read-only folder (one line)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise BayesobsInputError(f"{folder} is a file, not a folder; choose another --out")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _write_error(folder, exc) from None
    if not os.access(folder, os.W_OK):
        raise LogWriteError(f"cannot write {folder}: the folder is read-only")
    return folder


def lock_folder(folder: str | Path, command: str) -> FolderLock:
    """Create ``folder`` if needed and hold its :class:`FolderLock` for ``command``."""
    return FolderLock(writable_folder(folder), command)


def _identity(experiment: Any) -> Any:
    """An experiment record without the keys that name files (compared on resume)."""
    if isinstance(experiment, dict):
        return {k: _identity(v) for k, v in experiment.items() if k not in _PATH_KEYS}
    if isinstance(experiment, list):
        return [_identity(v) for v in experiment]
    return experiment


def _short(v: Any) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def experiment_diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    """The fields in which two experiment records differ, as ``path: old -> new`` lines."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in [*old, *(k for k in new if k not in old)]:
            where = f"{prefix}.{k}" if prefix else str(k)
            if k not in new:
                out.append(f"{where}: {_short(old[k])} -> (absent)")
            elif k not in old:
                out.append(f"{where}: (absent) -> {_short(new[k])}")
            else:
                out += experiment_diff(old[k], new[k], where)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            x
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for x in experiment_diff(a, b, f"{prefix}[{i}]")
        ]
    return [] if old == new else [f"{prefix or 'experiment'}: {_short(old)} -> {_short(new)}"]


class ExperimentStore:
    """An experiment folder, created on first use and resumed afterwards."""

    def __init__(self, folder: str | Path, experiment: dict[str, Any], lock: bool = False):
        self.folder = Path(folder)
        self.experiment = experiment
        self.trials_path = self.folder / "trials.jsonl"
        self.stimuli = self.folder / "stimuli"
        self.manifest = self.folder / "manifest.json"
        self.requests: dict[str, dict] = {}  # API subject -> request choices (manifest "requests")
        # PNGs this store has written: the same image recurs on many trials (every subject,
        # every condition), so its name is not hashed again each time (least recently used out)
        self._saved: OrderedDict[bytes, str] = OrderedDict()
        writable_folder(self.folder)
        try:
            self.stimuli.mkdir(exist_ok=True)
        except OSError as exc:
            raise _write_error(self.folder, exc) from None
        self._lock = FolderLock(self.folder, experiment.get("command")) if lock else None
        try:
            self._check_manifest()
            self._trials = AppendLog(self.trials_path)
            self._runs = AppendLog(self.folder / "runs.jsonl")
        except BaseException:
            self.close()
            raise
        try:
            self.done, self.unreadable = logged_trials(self.trials_path)
        except BayesobsInputError:
            self.close()
            raise
        # 1-based numbers of the lines skipped (a corrupt middle line): said on resume
        self.unreadable_lines = unreadable_lines(self.trials_path) if self.unreadable else []
        self.torn = 1 if self._trials.torn else 0  # a torn last line was cut: that trial is redone
        self.torn_logs = [log.path.name for log in (self._trials, self._runs) if log.torn]

    def _check_manifest(self) -> None:
        if self.manifest.exists():
            old = read_manifest(self.manifest)  # a JSON object, or one clear error
            if old.get("format_version") != FORMAT_VERSION:
                raise BayesobsInputError(
                    f"{self.manifest}: format version {old.get('format_version')} is not {FORMAT_VERSION}"
                )
            new = json.loads(json.dumps(self.experiment))
            if _identity(old.get("experiment")) != _identity(new):
                diff = experiment_diff(_identity(old.get("experiment")), _identity(new))
                shown = "; ".join(diff[:6]) + (
                    f"; and {len(diff) - 6} more" if len(diff) > 6 else ""
                )
                raise BayesobsInputError(
                    f"{self.folder} holds a different experiment (its manifest.json differs from this "
                    f"command in {shown}); use another --out folder"
                )
        elif self.trials_path.exists() and self.trials_path.stat().st_size:
            raise BayesobsInputError(
                f"{self.folder} has trials.jsonl but no manifest.json, so its experiment is unknown; "
                "use another --out folder"
            )

    def _write_manifest(self) -> None:
        if self.manifest.exists():
            return
        tmp = self.manifest.with_suffix(".json.part")
        try:
            # the request choices of API subjects, found out by the run (not compared on resume)
            notes = {"requests": self.requests} if self.requests else {}
            record = provenance(experiment=self.experiment, **notes)
            tmp.write_text(json.dumps(record, indent=2) + "\n")
            tmp.replace(self.manifest)
        except OSError as exc:
            raise _write_error(self.manifest, exc) from None

    def log_run(self, **event) -> None:
        """Append an event to ``runs.jsonl``."""
        self._runs.append({"time_utc": utc_now(), **event})

    def append(self, record: dict) -> None:
        """Log one finished trial (never twice); the first trial writes the manifest."""
        key = tuple(record[k] for k in TRIAL_ID)
        if key in self.done:
            raise RuntimeError(f"trial {key} is already logged")
        self._write_manifest()
        self._trials.append(record)
        self.done[key] = record

    def save_png(self, png: bytes) -> str:
        """Store a PNG by content hash; returns its path relative to the folder."""
        name = self._saved.get(png)
        if name is not None:
            self._saved.move_to_end(png)
            return name
        try:
            name = self._saved[png] = save_png(self.folder, png)
        except OSError as exc:
            raise _write_error(self.stimuli, exc) from None
        if len(self._saved) > SAVED_PNGS:
            self._saved.popitem(last=False)
        return name

    def close(self) -> None:
        """Free the folder lock (if held)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> ExperimentStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
