"""Stopping a run (issues 47, 48): Ctrl-C and SIGTERM stop it at once, noted, nothing lost."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pandas as pd
import pytest

from bayesobs.cli import main
from bayesobs.magnitude.subject import SimSubject

KEY = ["subject", "task", "modality", "condition", "session", "run", "trial"]


def _rows(folder: Path) -> list[dict]:
    p = folder / "trials.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def _events(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "runs.jsonl").read_text().splitlines() if x.strip()]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_simulated_sweep_at_once_and_is_noted(tmp_path, monkeypatch, capsys, sig):
    """The signal arrives during the 30th trial of 2,352: the run stops there, not at 100%."""
    calls = []
    answer = SimSubject.complete

    async def complete(self, request):
        calls.append(1)
        if len(calls) == 30:
            os.kill(os.getpid(), sig)  # as if the user pressed Ctrl-C (or a scheduler stopped it)
        return await answer(self, request)

    def unhandled(signum, frame):  # SIGTERM's default would end pytest itself
        raise SystemExit(f"signal {signum} not handled by the run")

    monkeypatch.setattr(SimSubject, "complete", complete)
    before = signal.signal(signal.SIGTERM, unhandled)
    # Python's own Ctrl-C handler, as a terminal's process starts with (not one an earlier test left)
    before_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    out = tmp_path / "o"
    args = ["sweep", "tasks/bayesbench.toml", "--subject", "sim:bayesian", "--trials", "8"]
    try:
        code = main([*args, "--out", str(out), "--no-progress"])
    finally:
        signal.signal(signal.SIGTERM, before)
        signal.signal(signal.SIGINT, before_int)
    err = capsys.readouterr().err
    assert code == 130 and "interrupted; everything logged so far is kept" in err
    assert "Traceback" not in err
    logged = _rows(out)
    assert 0 < len(logged) < 200  # stopped within a round of the concurrent sessions, not 2,352
    events = _events(out)
    assert events[-1]["event"] == "stopped" and events[-1]["logged"] == len(logged)
    monkeypatch.setattr(SimSubject, "complete", answer)
    assert main([*args, "--out", str(out), "--no-progress"]) == 0  # resumed: nothing lost
    rows = pd.DataFrame(_rows(out))
    assert len(rows) == 2352 and not rows.duplicated(KEY).any()
