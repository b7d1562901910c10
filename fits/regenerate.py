"""Regenerate the reference fits of the bundled example run.

    python fits/regenerate.py OUT_DIR        # `make fits` writes into fits/

The example run is the whole BayesBench protocol (tasks/bayesbench.toml) on
sim:bayesian and sim:antibayes, 20 trials per session run, simulated-subject
seed 0; it is scored with a 30-replicate session-run bootstrap, seed 0 (the
random-forest probe is left out: its numbers depend on the scikit-learn
version).  tests/test_reference_fits.py regenerates it and compares.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import bayesobs

ROOT = Path(__file__).resolve().parents[1]
SUBJECTS = ["sim:bayesian", "sim:antibayes"]
TRIALS = 20
BOOTSTRAP = 30
TABLES = ("fits", "evidence", "accuracy", "cue", "bcs", "bcs_tasks", "bayesbench", "summary")


def regenerate(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        bayesobs.sweep(ROOT / "tasks" / "bayesbench.toml", SUBJECTS, run, trials=TRIALS)
        res = bayesobs.score(bayesobs.read_trials(run), bootstrap=BOOTSTRAP, seed=0, probe=False)
    for name in TABLES:
        getattr(res, name).to_csv(out / f"{name}.csv", index=False)


if __name__ == "__main__":
    regenerate(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "fits"))
