"""What a run shows while it works: the plan line, progress and the total line."""

from __future__ import annotations

import sys
import time

LINES = "lines"  # progress as plain lines on stderr (no terminal to redraw a bar on)
LINE_EVERY_S = 10.0  # a plain progress line at most this often


class LineBar:
    """A progress bar for a log file: one plain line on stderr now and then."""

    def __init__(self, total: int, desc: str, unit: str, every: float = LINE_EVERY_S):
        self.total, self.desc, self.unit, self.every = total, desc, unit, every
        self.n = 0
        self.postfix = ""
        self.t0 = time.perf_counter()
        self.last = self.t0
        self.closed = False
        self._line()

    def _line(self) -> None:
        now = time.perf_counter()
        self.last = now
        pct = 100 * self.n / self.total if self.total else 100.0
        extra = f", {self.postfix}" if self.postfix else ""
        print(
            f"{self.desc}: {self.n:,}/{self.total:,} {self.unit}(s) ({pct:.0f}%) "
            f"in {now - self.t0:.1f} s{extra}",
            file=sys.stderr,
            flush=True,
        )

    def update(self, n: int = 1) -> None:
        """Count ``n`` more; print a line when ``every`` seconds have passed since the last."""
        self.n += n
        if not self.closed and time.perf_counter() - self.last >= self.every:
            self._line()

    def set_postfix_str(self, s: str, refresh: bool = True) -> None:
        """Text shown after the count on the next line (``tqdm``'s interface)."""
        self.postfix = s

    def close(self) -> None:
        """Print the last line (once)."""
        if not self.closed:
            self._line()
            self.closed = True

    def __enter__(self) -> LineBar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def bar(progress, total: int, desc: str, unit: str):
    """A progress bar on stderr as ``progress`` asks, or None."""
    if progress == LINES:
        return LineBar(total, desc, unit)
    if progress:
        from tqdm.auto import tqdm  # start-up time: tqdm loads only when a bar is shown

        return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr)
    return None


def _count(value, default: int) -> int:
    """A whole count from a spec (the plan checks it later; here a fallback for the line)."""
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default
    )


def plan_counts(jobs: list[tuple[dict, dict]]) -> dict:
    """What a plan will hold, from the specs alone (before any stimulus is made)."""
    tasks, subjects, cells, trials, stimuli = [], set(), 0, 0, 0
    for spec, kw in jobs:
        tasks.append(str(spec.get("task")))
        subj = list(kw.get("subjects") or [])
        subjects.update(subj)
        runs = _count(kw.get("runs") if kw.get("runs") is not None else spec.get("runs", 1), 1)
        mods = kw.get("modalities") or spec.get("modalities") or ["one"]
        conds = kw.get("conditions") or spec.get("conditions") or ["base"]
        per = runs * len(mods) * len(conds) * len(subj)
        n = _count(kw.get("trials") if kw.get("trials") is not None else spec.get("trials"), 0)
        for sess in spec.get("sessions") or ():
            n_sess = n if kw.get("trials") is not None else _count(sess.get("trials"), n)
            cells += per
            trials += per * n_sess
            stimuli += runs * n_sess
    return {
        "tasks": list(dict.fromkeys(tasks)),
        "subjects": len(subjects),
        "cells": cells,
        "trials": trials,
        "stimuli": stimuli,
    }


def plan_line(jobs: list[tuple[dict, dict]]) -> str:
    """The first line of a run: the tasks, subjects, cells and trials it plans."""
    c = plan_counts(jobs)
    return (
        f"plan: {', '.join(c['tasks'])}; {c['subjects']} subject(s), {c['cells']:,} cell(s) "
        f"(subject x session x run x condition x modality), {c['trials']:,} trial(s); "
        "making the stimuli first"
    )


def total_line(report, seconds: float, planning: float) -> str:
    """The last line of a run: trials logged and the time, planning included."""
    return (
        f"total: {report.done:,} trial(s) logged ({report.skipped:,} already logged) in "
        f"{seconds:.1f} s (making stimuli {planning:.1f} s, trials {report.seconds:.1f} s)"
    )
