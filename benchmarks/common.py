"""Shared benchmark pieces: the BayesBench-scale data set and timing a CLI command."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

from bayesobs.fits.synthetic import simulated_trials


def bayesbench_scale(out: Path):
    """Write the BayesBench-scale synthetic trials (9 subjects, 783 cells, 93,960 trials)."""
    trials = simulated_trials(n_subjects=9, trials_per_session=40, seed=0)
    path = out / "bayesbench_scale.parquet"
    trials.to_parquet(path, index=False)
    return trials, path


def time_cli(*args: str) -> tuple[float, float]:
    """Wall seconds and the child's peak resident memory (MiB) of ``bayesobs ARGS``."""
    exe = Path(sys.executable).with_name("bayesobs")
    t0 = time.perf_counter()
    subprocess.run([str(exe), *args], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
