"""Runs that share one stimulus set: ``static_gain`` is not identified through rounding (issue 49.4).

When every run of a cell shows the same stimuli, the per-run stimulus means ``zbar_r`` differ
only by rounding, so ``zbar_r`` is the constant column and the prior term of the gain variants
has no effect; the fit must equal the linear observer's span (``a z + d``), not a huge gain on
rounding noise. Reference: ordinary least squares (numpy) of the response on the stimulus.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

import bayesobs
from bayesobs.trials import parse_mapping


def _ols_loglik(x, y) -> float:
    """Gaussian log-likelihood of the least-squares line ``y ~ a x + b`` (sigma profiled)."""
    X = np.column_stack([x, np.ones_like(x)])
    rss = float(np.sum((y - X @ np.linalg.lstsq(X, y, rcond=None)[0]) ** 2))
    return -0.5 * len(y) * (np.log(2 * np.pi * rss / len(y)) + 1)


def _check(trials: pd.DataFrame) -> list[str]:
    fits, _ = bayesobs.fit(trials)
    bad = []
    for subject, f in fits.groupby("subject"):
        t = trials[trials["subject"] == subject]
        ll = dict(zip(f["variant"], f["loglik"], strict=True))
        ref = {
            "static_gain": _ols_loglik(
                t["stimulus"].to_numpy(float), t["response"].to_numpy(float)
            ),
            "static_log_gain": ll["linear_log"],  # the same span on the log scale
        }
        for variant, reference in ref.items():
            p = json.loads(f.loc[f["variant"] == variant, "params"].iloc[0])
            if ll[variant] > reference + 1e-6 or p["w_prior"] != 0 or not p["g"] < 1e3:
                bad.append(f"{subject} {variant}: {p}, loglik {ll[variant]:.3f} > {reference:.3f}")
    return bad


def test_synthetic_runs_with_one_stimulus_set_collapse_to_the_linear_span():
    rng = np.random.default_rng(3)
    rows = []
    for s in range(6):
        x = rng.uniform(5, 60, 150).round(1)
        for run in (1, 2):  # the same stimuli, reshuffled: per-run means equal to rounding
            xs = rng.permutation(x)
            y = 0.7 * xs + 4 + rng.normal(0, 3, len(xs))
            rows.append(
                pd.DataFrame({"subject": f"s{s}", "run": run, "stimulus": xs, "response": y})
            )
    trials = pd.concat(rows, ignore_index=True)
    means = trials.groupby(["subject", "run"])["stimulus"].mean().groupby("subject").agg(np.ptp)
    assert (means < 1e-12).all()  # the premise: equal to rounding
    assert not _check(trials), _check(trials)


def test_vul_halves_as_runs_do_not_fit_a_gain_on_rounding(shared_data):
    folder = shared_data / "vul_numerosity_estimation" / "numexpt"
    trials = bayesobs.read_trials(
        sorted(folder.glob("*.csv")),
        mapping=parse_mapping(
            ["stimulus=num_dots", "response=answer1", "subject=@file", "task='numerosity'"]
        ),
    )
    assert trials.groupby("subject")["run"].nunique().eq(2).all()  # two 150-trial halves
    bad = _check(trials)
    assert not bad, f"{len(bad)} of 48 fits:\n" + "\n".join(bad)
