"""Provenance of outputs: package versions, git revision, UTC times."""

from __future__ import annotations

import datetime as _dt
import json
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .errors import BayesobsInputError
from .jsonl import finite

FORMAT_VERSION = 1
_PACKAGES = ("bayesobs", "numpy", "scipy", "pandas", "pyarrow")


def utc_now() -> str:
    """Current UTC time, ISO 8601 with a ``Z``."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def git_revision(path: Path | None = None) -> str | None:
    """The git revision of the source tree holding ``path`` (or of bayesobs)."""
    here = Path(path) if path is not None else Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    rev = out.stdout.strip()
    if out.returncode != 0 or not rev:
        return None
    dirty = subprocess.run(
        ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        timeout=5,
        check=False,
    ).stdout.strip()
    return rev + ("-dirty" if dirty else "")


def versions() -> dict[str, str]:
    """Installed versions of bayesobs and its scientific dependencies."""
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in _PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def provenance(**extra) -> dict:
    """A provenance record: format version, versions, git revision, UTC time."""
    return {
        "format_version": FORMAT_VERSION,
        "created_utc": utc_now(),
        "git_revision": git_revision(),
        "versions": versions(),
        **extra,
    }


def write_manifest(path: str | Path, command: str, **fields) -> Path:
    """Write ``provenance(command=command, **fields)`` to ``path`` atomically, as strict JSON."""
    path = Path(path)
    record = finite(provenance(command=command, **fields))
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(record, indent=2, allow_nan=False, default=str) + "\n")
    tmp.replace(path)
    return path


def read_manifest(path: str | Path) -> dict:
    """A manifest (``manifest.json``, ``score_manifest.json``...) as a dict."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BayesobsInputError(f"{path}: not a manifest (not valid JSON: {reason})") from None
    if not isinstance(data, dict):
        kind = {list: "an array", str: "a string", bool: "true/false", type(None): "null"}.get(
            type(data), "a number"
        )
        raise BayesobsInputError(f"{path}: not a manifest (a JSON object was expected, not {kind})")
    return data


def adaptive_subjects(paths) -> dict[str, dict]:
    """Subject -> the adaptive rule and stops of the experiment folders among ``paths`` that ran one."""
    out = {}
    for path in map(Path, paths):
        manifest = path / "manifest.json"
        if path.is_dir() and manifest.exists():
            record = read_manifest(manifest)
            rule = record.get("experiment", {}).get("adaptive")
            if rule:
                stops = record.get("adaptive", {}).get("stops", [])
                for subject in record["experiment"].get("subjects", []):
                    out[subject] = {**rule, "stops": len(stops)}
    return out
