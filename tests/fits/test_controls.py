"""The anchoring control (METHOD §12): exact fits, controls.csv, sim:anchor."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

import bayesobs
from bayesobs.cli import main
from bayesobs.fits.controls import CONTROL_COLUMNS, controls_table, fit_controls
from bayesobs.fits.fitting import fit_batch, fits_table
from bayesobs.trials import normalize_trials


def _anchor_trials(a=0.4, sigma=0.03, runs=3, T=30, seed=1, missing=0.1):
    """Trials of an anchoring observer (identity family), with missing responses."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(runs):
        x = rng.uniform(0.2 + 0.1 * r, 0.6 + 0.1 * r, T)
        prev = None
        for t in range(T):
            m = x[t] if prev is None else (1 - a) * x[t] + a * prev
            y = m + sigma * rng.standard_normal()
            if rng.uniform() < missing and t > 0:
                y = np.nan
            rows.append({"session": f"s{r}", "run": 0, "trial": t, "stimulus": x[t], "response": y})
            prev = None if np.isnan(y) else y
    return normalize_trials(pd.DataFrame(rows))


def _naive_loglik(trials, a, sigma, log):
    """A plain loop over runs and trials with scipy's normal density (and the Jacobian)."""
    eps = 1e-3 * trials["stimulus"].max()
    h = (lambda v: np.log(v + eps)) if log else (lambda v: v)
    ll = 0.0
    for _, g in trials.sort_values("trial").groupby(["session", "run"]):
        prev = np.nan
        for x, y in zip(g["stimulus"], g["response"], strict=True):
            if not np.isnan(y):
                m = h(x) if np.isnan(prev) else (1 - a) * h(x) + a * prev
                ll += stats.norm.logpdf(h(y), m, sigma)
                if log:
                    ll -= np.log(y + eps)
            prev = h(y) if not np.isnan(y) else np.nan
    return ll


@pytest.mark.parametrize("log", [False, True])
def test_anchor_loglik_and_optimum_match_scipy(log):
    trials = _anchor_trials()
    batch = fit_controls(trials)
    j = 1 if log else 0
    a, sigma = batch.a[0, 0, j], batch.sigma[0, 0, j]
    ll = batch.loglik[0, 0, j]
    assert ll == pytest.approx(_naive_loglik(trials, a, sigma, log), rel=1e-10, abs=1e-8)

    # the optimum: a bounded scalar search over a, sigma profiled by a second search
    def neg(a_):
        res = optimize.minimize_scalar(
            lambda ls: -_naive_loglik(trials, a_, np.exp(ls), log),
            bounds=(-8, 2),
            method="bounded",
            options={"xatol": 1e-9},
        )
        return res.fun

    res = optimize.minimize_scalar(
        neg, bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-8}
    )
    assert -res.fun <= ll + 1e-6
    assert a == pytest.approx(res.x, abs=1e-4)
    if not log:
        assert a == pytest.approx(0.4, abs=0.1)
    assert batch.n[0, 0, j] == trials["response"].notna().sum()


def test_anchor_clips_and_bootstrap_replicates_refit_exactly():
    # an observer that over-anchors negatively: a clipped at 0, the stimulus copied
    rng = np.random.default_rng(3)
    x = rng.uniform(1, 2, 60)
    trials = normalize_trials(
        pd.DataFrame({"stimulus": x, "response": x + 0.01 * rng.standard_normal(60)})
    )
    batch = fit_controls(trials)
    assert 0.0 <= batch.a[0, 0, 0] < 0.2
    # replicate b is the fit of the runs it drew, laid side by side
    many = _anchor_trials(runs=4)
    boot = fit_controls(many, bootstrap=5, seed=2)
    assert np.isfinite(boot.loglik).all()
    from bayesobs.bootstrap import run_draws

    draws = run_draws(many, 5, 2, "pooled")
    ((run_keys, draw),) = draws.values()
    b = 1
    picked = [run_keys[i] for i in np.asarray(draw)[b - 1]]
    frames = []
    for i, (s, r) in enumerate(picked):
        g = many[(many["session"] == s) & (many["run"] == r)].copy()
        g["session"] = f"copy{i}"
        frames.append(g)
    direct = fit_controls(normalize_trials(pd.concat(frames, ignore_index=True)))
    # identity family (the log twin's eps is the whole cell's, not the replicate's)
    assert boot.loglik[0, b, 0] == pytest.approx(direct.loglik[0, 0, 0], rel=1e-10)
    assert boot.a[0, b, 0] == pytest.approx(direct.a[0, 0, 0], rel=1e-10)


def test_controls_table_columns_and_delta_aic():
    trials = _anchor_trials(a=0.5, sigma=0.01, runs=3, T=40, missing=0.0)
    fits = fits_table(fit_batch(trials))
    table = controls_table(fit_controls(trials), fits)
    assert list(table.columns[: len(CONTROL_COLUMNS)]) == list(CONTROL_COLUMNS)
    assert list(table["control"]) == ["anchor", "anchor_log"]
    best = fits["aic"].min()
    assert table["delta_aic"].to_numpy() == pytest.approx(table["aic"].to_numpy() - best)
    assert (table["k"] == 2).all()
    # the anchoring observer is better explained by the control than by any of the ten
    assert table.loc[table["control"] == "anchor", "delta_aic"].iat[0] < -10


def test_fit_and_score_write_controls_csv(tmp_path):
    trials = _anchor_trials(runs=3, T=20)
    path = tmp_path / "t.csv"
    trials.to_csv(path, index=False)
    assert main(["fit", str(path), "--out", str(tmp_path / "f"), "--no-progress"]) == 0
    c = pd.read_csv(tmp_path / "f" / "controls.csv")
    assert list(c.columns[: len(CONTROL_COLUMNS)]) == list(CONTROL_COLUMNS)
    assert len(c) == 2
    assert (
        main(
            [
                "score",
                str(path),
                "--out",
                str(tmp_path / "s"),
                "--bootstrap",
                "0",
                "--no-probe",
                "--no-progress",
            ]
        )
        == 0
    )
    s = pd.read_csv(tmp_path / "s" / "controls.csv")
    pd.testing.assert_frame_equal(c, s)
    # never a factor: evidence has the four factors only
    ev = pd.read_csv(tmp_path / "s" / "evidence.csv")
    assert set(ev["factor"]) == {"bayesian", "weber", "sequential", "gain"}


def test_sim_anchor_is_identified_and_sim_kalman_is_not(tmp_path):
    """120 trials (3 sessions x 40) of line_ratio in text: the control catches sim:anchor only."""
    out = tmp_path / "o"
    assert (
        main(
            [
                "run",
                "line_ratio",
                "--subject",
                "sim:anchor",
                "--subject",
                "sim:kalman",
                "--modality",
                "text",
                "--condition",
                "base",
                "--trials",
                "40",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    trials = normalize_trials(bayesobs.read_trials(out))
    table = controls_table(fit_controls(trials), fits_table(fit_batch(trials)))
    anchor = table[table["control"] == "anchor"].set_index("subject")
    assert anchor.loc["sim:anchor", "n"] == 120
    assert anchor.loc["sim:anchor", "delta_aic"] < -10
    assert anchor.loc["sim:kalman", "delta_aic"] > -10  # not identified
    assert anchor.loc["sim:anchor", "beats_kalman"]


def test_a_strongly_sequential_kalman_observer_is_not_anchoring():
    """A model-simulated Kalman observer (rho = 0.5, 120 trials) keeps the Kalman variants ahead."""
    from bayesobs.fits.observers import simulate

    rng = np.random.default_rng(5)
    frames = []
    for s, (lo, hi) in enumerate([(0.1, 0.5), (0.3, 0.7), (0.5, 0.9)]):
        x = rng.uniform(lo, hi, 40)
        y = simulate("kalman", {"rho": 0.5, "sigma": 0.02}, x, rng=rng)
        frames.append(
            pd.DataFrame({"session": f"s{s}", "trial": np.arange(40), "stimulus": x, "response": y})
        )
    trials = normalize_trials(pd.concat(frames, ignore_index=True))
    table = controls_table(fit_controls(trials), fits_table(fit_batch(trials)))
    row = table[table["control"] == "anchor"].iloc[0]
    assert row["delta_aic_kalman"] > 10 and not row["beats_kalman"]


def test_report_shows_the_context_none_control_and_anchoring(tmp_path):
    from bayesobs.report.html import sequential_control_table

    out = tmp_path / "o"
    argv = ["run", "line_ratio", "--subject", "sim:anchor", "--modality", "text"]
    argv += ["--condition", "base", "--condition", "context_none", "--trials", "40"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    assert main(["report", str(out), "--out", str(tmp_path / "rep"), "--bootstrap", "0"]) == 0
    page = (tmp_path / "rep" / "index.html").read_text()
    assert "In-context learning control" in page
    assert "Anchoring control" in page and "sim:anchor / line_ratio / text / base" in page
    ev = pd.read_csv(next((tmp_path / "rep").rglob("evidence.csv")))
    t = sequential_control_table(ev)
    assert list(t.columns) == ["subject", "task", "modality", "base", "context_none"]
    assert len(t) == 1
