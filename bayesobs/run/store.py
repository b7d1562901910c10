"""The experiment folder: manifest, append-only trial log, stimuli, run history.

```
DIR/manifest.json   written once, with the first trial: spec, subjects, seeds, versions, git revision
DIR/runs.jsonl      one line per invocation (start, end, what happened), appended
DIR/trials.jsonl    one line per trial, appended and flushed as each trial completes
DIR/stimuli/        PNGs named by content hash
DIR/.lock           the pid and host of the run holding the folder
```

Nothing is rewritten in place.  Every append-only log (``trials.jsonl``,
``runs.jsonl``, the response cache, the web app's ``participants.jsonl``) is
written through one :class:`AppendLog`: each record is a single ``write``
under an exclusive ``flock``, a write cut short (a full disk) is undone at
once, and on open a torn last line (a SIGKILL or power loss mid-write) is cut
back to the last complete line and kept in ``<log>.torn``.  A writer that
already holds a log open (a run sharing the response cache with one that was
killed) checks the file's last byte under the lock and starts a new line if
it is not a newline, so its record is never glued onto the fragment; the
fragment stays on a line of its own, which readers skip and count.

One writer at a time holds a folder (:class:`FolderLock`): ``run``,
``sweep``, ``serve`` (for the server's lifetime), ``rescore`` (while it
writes into the folder) and ``score`` (its ``--out``); a second one is refused
naming the holder.
"""

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
    """Cut a log back to its last complete line; return the fragment cut (empty if none).

    The fragment is appended to ``<path>.torn`` (with a newline) before the
    log is truncated, so nothing is lost.  The log is held under an
    exclusive ``flock`` meanwhile.

    Parameters
    ----------
    path : str or Path
        The log; a missing file has nothing to cut.

    Returns
    -------
    bytes
        The bytes after the last newline that were cut (empty when the log
        ends in a newline, is empty or is missing).

    Raises
    ------
    LogWriteError
        When the log or its ``.torn`` file cannot be opened or written.
    """
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
    """An append-only JSON-lines log; opening it cuts a torn tail (see :func:`repair_tail`).

    Parameters
    ----------
    path : str or Path
        The log file (created on the first append).

    Attributes
    ----------
    torn : bytes
        The fragment cut from the end on open (empty when the log was whole).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.torn = repair_tail(self.path)

    def read(self) -> tuple[list[dict], int]:
        """Records of the log and the number of unreadable lines skipped (see :func:`read_jsonl`).

        Returns
        -------
        records : list of dict
            The readable records, in file order.
        unreadable : int
            Lines skipped that are not JSON objects.
        """
        return read_jsonl(self.path)

    def append(self, rec: dict) -> None:
        """Append one record (see :func:`append_line`).

        Parameters
        ----------
        rec : dict
            The record; NaN and infinities are written as null.

        Raises
        ------
        LogWriteError
            When the log cannot be written (what was logged before is kept).
        """
        append_line(self.path, rec)


def append_line(path: str | Path, rec: dict) -> None:
    """Append one JSON line with a single write under an exclusive ``flock``.

    If the log does not end in a newline (another writer was killed
    mid-record after this one opened the log), the record starts on a new
    line, leaving the fragment on a line of its own.  A write cut short (a
    full disk) is undone, so the log never ends in a fragment.

    Parameters
    ----------
    path : str or Path
        The log (created if missing).
    rec : dict
        The record; written as strict JSON, NaN and infinities as null.

    Raises
    ------
    LogWriteError
        When the log cannot be opened or written (what was logged before is
        kept).
    """
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
    """Records of a JSONL log and the number of torn (unparseable) lines skipped.

    Parameters
    ----------
    path : Path
        The log; a missing file reads as empty.

    Returns
    -------
    records : list of dict
        The readable records, in file order.
    torn : int
        Lines skipped that are not JSON objects.
    """
    records, _, torn = read_records(path)
    return records, torn


def trial_id(rec: dict, where: str) -> tuple:
    """A logged trial's key (:data:`TRIAL_ID` values); one clear error for a line that has none.

    Parameters
    ----------
    rec : dict
        A record of ``trials.jsonl``.
    where : str
        The file and line, for the message (``.../trials.jsonl: line 7``).

    Returns
    -------
    tuple
        The record's :data:`TRIAL_ID` values.

    Raises
    ------
    BayesobsInputError
        When a key is missing or not a plain value (a list, an object).
    """
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
    """The trials of a log by their key, and the number of unreadable lines skipped.

    Parameters
    ----------
    path : Path
        ``trials.jsonl``; a missing file reads as empty.

    Returns
    -------
    done : dict
        :func:`trial_id` -> record (the last one of a key).
    unreadable : int
        Lines skipped that are not JSON objects.

    Raises
    ------
    BayesobsInputError
        A line without a trial key (:func:`trial_id`), naming the file and line.
    """
    records, lines, unreadable = read_records(path)
    keyed = {trial_id(r, f"{path}: line {i}"): r for r, i in zip(records, lines, strict=True)}
    return keyed, unreadable


def unreadable_lines(path: Path) -> list[int]:
    """1-based numbers of the non-blank lines of a JSONL log that are not JSON objects.

    Parameters
    ----------
    path : Path
        The log; a missing file has none.

    Returns
    -------
    list of int
        The line numbers, ascending.
    """
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
    """An exclusive lock on an experiment folder for a writer's lifetime.

    ``DIR/.lock`` holds the holder's pid, host, command and start time.  The
    lock is an ``flock`` on that file, so the kernel frees it when the holder
    dies; a lock file left by a dead process is reclaimed with a note on
    stderr.  Every writer of a folder holds it (``run``, ``sweep``, ``serve``,
    ``rescore``); a second one is refused with one line naming the first.
    Use as a context manager or call :meth:`release`.

    Parameters
    ----------
    folder : Path
        The experiment folder (must exist).
    command : str, optional
        What holds the folder (``"run"``, ``"serve"`` ...), named to a
        writer that is refused.
    """

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
    """Who holds a folder, from its lock record, and what to do (one line).

    Parameters
    ----------
    holder : dict
        The lock record (``pid``, ``host``, ``since`` and optionally
        ``command``); empty when unknown.

    Returns
    -------
    str
        E.g. ``pid 12 on box (bayesobs run, since ...); wait for it to finish
        or use another folder``.
    """
    if not holder:
        return "another process; wait for it to finish or use another folder"
    what = f"bayesobs {holder['command']}, " if holder.get("command") else ""
    return (
        f"pid {holder.get('pid')} on {holder.get('host')} ({what}since {holder.get('since')}); "
        "wait for it to finish or use another folder"
    )


def writable_folder(folder: str | Path) -> Path:
    """Create an experiment folder if needed; refuse a file or a read-only folder (one line).

    Parameters
    ----------
    folder : str or Path
        The experiment folder (created with its parents).

    Returns
    -------
    Path
        ``folder``.

    Raises
    ------
    BayesobsInputError
        When ``folder`` is a file.
    LogWriteError
        When it cannot be created or is read-only.
    """
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
    """Create ``folder`` if needed and hold its :class:`FolderLock` for ``command``.

    ``bayesobs serve`` holds it for the server's lifetime, so no run, sweep,
    rescore or second server writes into a folder that participants are
    answering in.

    Parameters
    ----------
    folder : str or Path
        The experiment folder.
    command : str
        What holds it (``"serve"``, ``"run"`` ...), named to a writer that is
        refused.

    Returns
    -------
    FolderLock
        The held lock; release it (or use it as a context manager).

    Raises
    ------
    BayesobsInputError
        When another process holds the folder (naming it), or the folder is a
        file.
    LogWriteError
        When the folder or its lock file cannot be written.
    """
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
    """The fields in which two experiment records differ, as ``path: old -> new`` lines.

    Dicts are compared key by key and lists of equal length item by item;
    anything else differs as a whole.  Values are shown as JSON, cut to 40
    characters.

    Parameters
    ----------
    old, new : object
        The two records (JSON-like).
    prefix : str
        The path of the records within the outer record (``""`` at the top).

    Returns
    -------
    list of str
        One line per differing field (``(absent)`` for a missing key); empty
        when the records are equal.
    """
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
    """An experiment folder, created on first use and resumed afterwards.

    Parameters
    ----------
    folder : str or Path
        The experiment folder.
    experiment : dict
        What identifies the experiment (spec, subjects, settings); stored in
        ``manifest.json`` with the first trial and compared on resume.
    lock : bool
        Hold :class:`FolderLock` until :meth:`close` (the runner does; two
        runs on one folder would log trials twice).
    """

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
        """Append an event to ``runs.jsonl``.

        Parameters
        ----------
        **event
            The event's fields; ``time_utc`` is added first.

        Raises
        ------
        LogWriteError
            When the log cannot be written.
        """
        self._runs.append({"time_utc": utc_now(), **event})

    def append(self, record: dict) -> None:
        """Log one finished trial (never twice); the first trial writes the manifest.

        Parameters
        ----------
        record : dict
            The trial row, with the :data:`TRIAL_ID` keys.

        Raises
        ------
        RuntimeError
            When the trial is already logged (a bug in the caller, not bad input).
        LogWriteError
            When the manifest or the log cannot be written.
        """
        key = tuple(record[k] for k in TRIAL_ID)
        if key in self.done:
            raise RuntimeError(f"trial {key} is already logged")
        self._write_manifest()
        self._trials.append(record)
        self.done[key] = record

    def save_png(self, png: bytes) -> str:
        """Store a PNG by content hash; returns its path relative to the folder.

        Parameters
        ----------
        png : bytes
            A PNG file's bytes.

        Returns
        -------
        str
            ``stimuli/<hash>.png`` (see :func:`save_png`).

        Raises
        ------
        LogWriteError
            When the file cannot be written.
        """
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
    """Write ``folder/stimuli/<content hash>.png`` once; returns the relative path.

    The name is the first 20 hex digits of the bytes' SHA-256; the file is
    written through a ``.part`` file and renamed, and left alone when it
    exists.

    Parameters
    ----------
    folder : Path
        The experiment folder.
    png : bytes
        A PNG file's bytes.

    Returns
    -------
    str
        ``stimuli/<hash>.png``, relative to ``folder``.
    """
    name = hashlib.sha256(png).hexdigest()[:20] + ".png"
    path = Path(folder) / "stimuli" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".png.part")
        tmp.write_bytes(png)
        tmp.replace(path)
    return f"stimuli/{name}"
