"""Read the README and the documentation pages as the tests that run their examples need them.

``page("human-data.md")`` is a page of ``docs/`` (``page("README.md")`` the README),
``section(text, "Fitting someone else's export")`` the text under a heading of any level up
to the next heading of the same or a higher level, ``fenced_blocks(text)`` its fenced code
blocks and ``commands(block)`` the shell lines of a block with their continuations
(a trailing backslash, or an indented line after a command) joined. ``checkout(tmp)`` lays out
a user's working folder (the repo's ``tasks/``, with ``../shared`` beside it) and
``shell_argv(line, cwd)`` is the argument list bash makes of a line there (quotes, globs),
so a test runs a command as a user who copied it would.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SHARED = ROOT.parent / "shared"  # the project's shared folder, beside a checkout


def page(name: str) -> str:
    """The text of ``README.md`` or of the page ``docs/<name>``."""
    return (ROOT / name if name == "README.md" else DOCS / name).read_text()


def pages() -> list[str]:
    """README.md and every page of docs/ (sub-folders included), as names for :func:`page`."""
    return ["README.md"] + sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, title) of every heading outside fenced blocks."""
    out, fenced = [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"(#{1,6}) (.*)", line)):
            out.append((i, len(m.group(1)), m.group(2).strip()))
    return out


def section(text: str, title: str) -> str:
    """The text under the heading ``title`` (any level) up to the next of its level or higher."""
    lines = text.splitlines()
    heads = _headings(lines)
    found = [(i, lev) for i, lev, t in heads if t == title]
    assert len(found) == 1, f"heading {title!r}: found {len(found)} times"
    start, level = found[0]
    end = next((i for i, lev, _ in heads if i > start and lev <= level), len(lines))
    return "\n".join(lines[start + 1 : end])


def fenced_blocks(text: str, lang: str | None = None) -> list[str]:
    """The fenced code blocks of ``text``; with ``lang``, only those whose info string it is."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)
    return [body for info, body in blocks if lang is None or info == lang]


def commands(block: str, prefix: str = "bayesobs ") -> list[str]:
    """The lines of a block that start with ``prefix``, continuations joined, comments cut."""
    joined = re.sub(r"\\\n\s*", " ", block)
    out, previous = [], False
    for raw in joined.splitlines():
        line = re.sub(r"\s+#.*$", "", raw).strip()
        if previous and raw[:1].isspace() and line:  # an indented usage line goes on
            out[-1] += " " + " ".join(line.split())
        elif previous := line.startswith(prefix):
            out.append(" ".join(line.split()))
    return out


def checkout(tmp: Path) -> Path:
    """``tmp/checkout``, a user's checkout root (``tasks/`` of the repo), ``../shared`` beside it."""
    root = tmp / "checkout"
    root.mkdir()
    (root / "tasks").symlink_to(ROOT / "tasks")
    if SHARED.is_dir():
        (tmp / "shared").symlink_to(SHARED)
    return root


def shell_argv(line: str, cwd: Path) -> list[str]:
    """The arguments bash makes of the command ``line`` typed in ``cwd`` (quotes, globs)."""
    done = subprocess.run(
        ["bash", "-c", 'printf "%s\\0" ' + line], cwd=cwd, capture_output=True, text=True
    )
    assert done.returncode == 0, f"bash cannot read {line!r}: {done.stderr}"
    return done.stdout.split("\0")[:-1]
