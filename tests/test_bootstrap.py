"""Session-run resampling: the paper's pooled draws, stratified draws, refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesobs.api import fit
from bayesobs.bootstrap import check_resample, group_rng, run_draws
from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError
from bayesobs.fits.fitting import fit_batch
from bayesobs.fits.observers.variants import VARIANT_NAMES
from bayesobs.scores import score
from bayesobs.trials import normalize_trials

RANGES = ((0.1, 0.5), (0.3, 0.7), (0.5, 0.9))


def static_runs(runs=3, n_per=20, w=0.4, sigma=0.02, seed=0, conditions=("base", "steer_verbal")):
    """Static observers (plain numpy): response = (1 - w) x + w * run mean + noise."""
    rng = np.random.default_rng(seed)
    frames = []
    for cond in conditions:
        for s, (lo, hi) in enumerate(RANGES):
            for r in range(runs):
                x = rng.uniform(lo, hi, n_per)
                y = (1 - w) * x + w * x.mean() + rng.normal(0, sigma, n_per)
                frames.append(
                    pd.DataFrame(
                        {
                            "subject": "s",
                            "task": "line_ratio",
                            "modality": "image",
                            "condition": cond,
                            "session": f"s{s}",
                            "run": r,
                            "trial": np.arange(n_per),
                            "stimulus": x,
                            "response": y,
                            "range_low": lo,
                            "range_high": hi,
                        }
                    )
                )
    return normalize_trials(pd.concat(frames, ignore_index=True))


def test_pooled_draws_are_the_papers_and_the_default():
    """Pooled = every run of the group drawn uniformly, the stream seeded by (seed, group)."""
    t = static_runs(runs=2)
    B, seed = 7, 11
    default = run_draws(t, B, seed)
    pooled = run_draws(t, B, seed, resample="pooled")
    assert default.keys() == pooled.keys()
    for key, (run_keys, idx) in default.items():
        ref = group_rng(seed, key).integers(0, len(run_keys), size=(B, len(run_keys)))
        np.testing.assert_array_equal(idx, ref)
        np.testing.assert_array_equal(pooled[key][1], ref)
    a = score(t, bootstrap=5, seed=3, probe=False)
    b = score(t, bootstrap=5, seed=3, probe=False, resample="pooled")
    pd.testing.assert_frame_equal(a.bcs, b.bcs)
    pd.testing.assert_frame_equal(a.accuracy, b.accuracy)


def test_stratified_draws_stay_within_session_type():
    t = static_runs(runs=3)
    B = 200
    strat = run_draws(t, B, 0, resample="stratified")
    pooled = run_draws(t, B, 0)
    for key, (run_keys, idx) in strat.items():
        sessions = np.array([k[0] for k in run_keys])
        drawn = sessions[idx]  # session type of every drawn run
        assert (drawn == sessions[None, :]).all()  # position i keeps its session type
        for s in np.unique(sessions):  # and every run of that type gets drawn
            pos = np.flatnonzero(sessions == s)
            assert set(np.unique(idx[:, pos])) == set(pos)
        # the pooled scheme does mix session types (the check above can fail)
        assert (sessions[pooled[key][1]] != sessions[None, :]).any()


def test_stratified_fits_use_the_drawn_runs():
    """Replicate b of fit_batch(resample='stratified') = the closed-form static fit of its runs."""
    t = static_runs(runs=2, conditions=("base",))
    B, seed = 4, 5
    batch = fit_batch(t, bootstrap=B, seed=seed, resample="stratified")
    run_keys, idx = run_draws(t, B, seed, resample="stratified")[("s", "line_ratio", "base")]
    w = batch.params["w_prior"][0, :, VARIANT_NAMES.index("static")]
    for b in range(B):
        num = den = 0.0
        for k in idx[b]:
            sess, run = run_keys[k]
            d = t[(t["session"] == sess) & (t["run"] == run)]
            x, y = d["stimulus"].to_numpy(), d["response"].to_numpy()
            num += ((y - x) * (x.mean() - x)).sum()
            den += ((x.mean() - x) ** 2).sum()
        assert w[b + 1] == pytest.approx(min(max(num / den, 0.0), 1.0), rel=1e-9)


def test_stratified_refuses_a_single_run_per_session_type():
    t = static_runs(runs=1)
    with pytest.raises(BayesobsInputError, match=r"at least 2 runs of every session type"):
        run_draws(t, 3, 0, resample="stratified")
    with pytest.raises(BayesobsInputError, match=r"2 of 2 .*group\(s\) have fewer"):
        score(t, bootstrap=3, resample="stratified", probe=False)
    run_draws(t, 0, 0, resample="stratified")  # nothing to draw: nothing to refuse


def test_resample_must_be_pooled_or_stratified():
    t = static_runs(runs=2)
    for call in (
        lambda: check_resample("strata"),
        lambda: run_draws(t, 3, 0, resample="strata"),
        lambda: score(t, bootstrap=0, resample="strata"),
        lambda: fit_batch(t, bootstrap=2, resample="Pooled"),
        lambda: fit(t, bootstrap=0, resample="x"),
    ):
        with pytest.raises(BayesobsInputError, match="resample must be 'pooled' or 'stratified'"):
            call()


def test_cli_resample_option(tmp_path, capsys):
    one = tmp_path / "one.csv"
    static_runs(runs=1).to_csv(one, index=False)
    two = tmp_path / "two.csv"
    static_runs(runs=2).to_csv(two, index=False)
    for cmd in ("score", "fit"):
        code = main(
            [
                cmd,
                str(one),
                "--out",
                str(tmp_path / cmd),
                "--bootstrap",
                "3",
                "--resample",
                "stratified",
                "--no-progress",
            ]
        )
        err = capsys.readouterr().err
        assert code == 2, cmd
        assert err.startswith("bayesobs: error: --resample stratified needs at least 2 runs")
        assert "Traceback" not in err
    with pytest.raises(SystemExit) as exc:
        main(["score", str(two), "--out", str(tmp_path / "x"), "--resample", "strata"])
    assert exc.value.code == 2
    assert "invalid choice: 'strata'" in capsys.readouterr().err
    out = tmp_path / "fit2"
    assert (
        main(["fit", str(two), "--out", str(out), "--bootstrap", "3", "--resample", "stratified"])
        == 0
    )
    assert "p_mean" in pd.read_csv(out / "evidence.csv")
    assert '"resample": "stratified"' in (out / "fit_manifest.json").read_text()
    out = tmp_path / "score2"
    assert (
        main(
            [
                "score",
                str(two),
                "--out",
                str(out),
                "--bootstrap",
                "3",
                "--resample",
                "stratified",
                "--no-probe",
            ]
        )
        == 0
    )
    assert "stratified resampling" in capsys.readouterr().out
    missing = pd.read_csv(out / "missing.csv")
    assert not missing["reason"].str.contains("runs per session type").any()
