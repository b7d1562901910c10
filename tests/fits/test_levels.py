"""METHOD §10: conditions interleaved trial by trial inside one sequence.

References are independent of the engine: Python loops for the filter,
``scipy.stats.norm.logpdf`` for the likelihood, a dense grid plus
Nelder-Mead for the Kalman noise ratios, L-BFGS-B for the closed forms.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

import bayesobs
from bayesobs.cli import main
from bayesobs.fits.fitting import decode_params

LEVELS = ("low", "high")


def loop_kalman_levels(z, lev, rho):
    """The §10 filter with an explicit loop: one noise ratio per level."""
    mu = np.empty(len(z))
    mu[0] = z[0]
    P = 1.0 / rho[lev[0]]
    for t in range(1, len(z)):
        r = rho[lev[t]]
        pm = P + 1.0
        K = r * pm / (r * pm + 1.0)
        P = (1.0 - K) * pm
        mu[t] = mu[t - 1] + K * (z[t] - mu[t - 1])
    return mu


def _design(rng, n_runs=3, T=80):
    rows = []
    for r in range(n_runs):
        lo = 0.2 + 0.2 * r
        x = rng.uniform(lo, lo + 0.4, T)
        lev = rng.integers(0, 2, T)
        rows.append(pd.DataFrame({"session": f"s{r}", "stimulus": x, "lev": lev}))
    return pd.concat(rows, ignore_index=True)


def _kalman_data(seed=0, rho=(0.05, 3.0), sigma=(0.04, 0.015)):
    rng = np.random.default_rng(seed)
    df = _design(rng)
    y = np.empty(len(df))
    for _, idx in df.groupby("session").indices.items():
        z = df["stimulus"].to_numpy()[idx]
        lev = df["lev"].to_numpy()[idx]
        mu = loop_kalman_levels(z, lev, rho)
        y[idx] = mu + rng.normal(0, np.array(sigma)[lev])
    df["response"] = y
    df["coherence"] = np.array(LEVELS)[df["lev"]]
    return df


def _profiled_kalman_ll(df, log_rho, gain=False):
    """Joint LL with sigma_c (and g_c, delta_c) profiled, from the loop filter."""
    rho = np.exp(np.asarray(log_rho, float))
    mu = np.empty(len(df))
    for _, idx in df.groupby("session", sort=False).indices.items():
        mu[idx] = loop_kalman_levels(df["stimulus"].to_numpy()[idx], df["lev"].to_numpy()[idx], rho)
    y = df["response"].to_numpy()
    ll = 0.0
    for c in (0, 1):
        m = df["lev"].to_numpy() == c
        pred = mu[m]
        if gain:
            A = np.column_stack([pred, np.ones(m.sum())])
            coef = np.linalg.lstsq(A, y[m], rcond=None)[0]
            if coef[0] < 0:  # g >= 0: the best constant
                coef = np.array([0.0, y[m].mean()])
            pred = A @ coef
        s = math.sqrt(np.mean((y[m] - pred) ** 2))
        ll += stats.norm.logpdf(y[m], pred, s).sum()
    return ll


def _brute_kalman(df, gain=False):
    """Dense grid over (log rho_low, log rho_high) in [-18, 18]^2, then Nelder-Mead."""
    axis = np.linspace(-18, 18, 73)
    best = (-np.inf, None)
    coarse = [(a, b) for a in axis[::3] for b in axis[::3]]
    for th in coarse:
        ll = _profiled_kalman_ll(df, th, gain)
        if ll > best[0]:
            best = (ll, th)
    # dense grid in the neighbourhood of the coarse optimum
    a0, b0 = best[1]
    for a in axis[np.abs(axis - a0) <= 3]:
        for b in axis[np.abs(axis - b0) <= 3]:
            ll = _profiled_kalman_ll(df, (a, b), gain)
            if ll > best[0]:
                best = (ll, (a, b))
    res = optimize.minimize(
        lambda th: -_profiled_kalman_ll(df, np.clip(th, -18, 18), gain),
        best[1],
        method="Nelder-Mead",
        options={"xatol": 1e-6, "fatol": 1e-10},
    )
    return max(best[0], -res.fun), np.clip(res.x, -18, 18)


def _rows(fits, variant):
    return fits[fits["variant"] == variant].set_index("level")


@pytest.mark.parametrize("variant", ["kalman", "kalman_gain"])
def test_kalman_levels_reach_the_brute_force_optimum(variant):
    df = _kalman_data()
    fits, _ = bayesobs.fit(df, interleaved="coherence")
    rows = _rows(fits, variant)
    ref_ll, _ = _brute_kalman(df, gain=variant == "kalman_gain")
    got = rows["loglik"].iat[0]
    assert got >= ref_ll - 1e-6 * abs(ref_ll), (got, ref_ll)
    # the joint LL is repeated on each level's row
    assert rows["loglik"].nunique() == 1 and rows["aic"].nunique() == 1
    # and equals the loop reference evaluated at the engine's own noise ratios
    th = [math.log(decode_params(rows.loc[f"coherence={lv}", "params"])["rho"]) for lv in LEVELS]
    np.testing.assert_allclose(
        got, _profiled_kalman_ll(df, th, variant == "kalman_gain"), rtol=1e-9
    )


def test_kalman_levels_recover_the_noise_ratios():
    df = _kalman_data(seed=3, rho=(0.05, 3.0))
    fits, _ = bayesobs.fit(df, interleaved="coherence")
    rows = _rows(fits, "kalman")
    rho = {lv: decode_params(rows.loc[f"coherence={lv}", "params"])["rho"] for lv in LEVELS}
    assert rho["low"] < 0.5 < 1.0 < rho["high"], rho
    sig = {lv: decode_params(rows.loc[f"coherence={lv}", "params"])["sigma"] for lv in LEVELS}
    assert sig["low"] == pytest.approx(0.04, rel=0.25) and sig["high"] == pytest.approx(
        0.015, rel=0.25
    )


def _static_data(seed=1, w=(0.2, 0.7), sigma=(0.03, 0.06)):
    rng = np.random.default_rng(seed)
    df = _design(rng)
    zbar = df.groupby("session")["stimulus"].transform("mean").to_numpy()
    lev = df["lev"].to_numpy()
    w = np.asarray(w)[lev]
    df["response"] = (1 - w) * df["stimulus"] + w * zbar + rng.normal(0, np.asarray(sigma)[lev])
    df["coherence"] = np.array(LEVELS)[lev]
    return df


def test_static_levels_match_a_direct_joint_maximisation():
    df = _static_data()
    fits, _ = bayesobs.fit(df, interleaved="coherence")
    rows = _rows(fits, "static")
    x, y, lev = df["stimulus"].to_numpy(), df["response"].to_numpy(), df["lev"].to_numpy()
    zbar = df.groupby("session")["stimulus"].transform("mean").to_numpy()

    def negll(th):
        w, s = np.array(th[:2])[lev], np.exp(np.array(th[2:]))[lev]
        return -stats.norm.logpdf(y, (1 - w) * x + w * zbar, s).sum()

    res = optimize.minimize(
        negll, [0.5, 0.5, -3, -3], method="L-BFGS-B", bounds=[(0, 1), (0, 1), (-20, 5), (-20, 5)]
    )
    assert rows["loglik"].iat[0] == pytest.approx(-res.fun, rel=1e-7)
    for c, lv in enumerate(LEVELS):
        p = decode_params(rows.loc[f"coherence={lv}", "params"])
        assert p["w_prior"] == pytest.approx(res.x[c], abs=1e-4)
    # recovery of the simulated per-level priors within 3 standard errors
    # (SE ~ sigma_c / (sqrt(n_c) sd(x - zbar)): 0.02 and 0.045 at this design)
    w = [decode_params(rows.loc[f"coherence={lv}", "params"])["w_prior"] for lv in LEVELS]
    assert w[0] == pytest.approx(0.2, abs=0.06) and w[1] == pytest.approx(0.7, abs=0.14)
    # k counts each level's parameters (w_prior_c, sigma_c)
    assert (rows["k"] == 4).all()
    assert (fits[fits["variant"] == "linear"]["k"] == 6).all()


def test_splitting_the_run_gives_other_answers_than_interleaving():
    """The old recipe (one cell per level) hands each filter half a sequence."""
    df = _kalman_data(seed=5)
    split, _ = bayesobs.fit(df.assign(condition=df["coherence"]))
    joint, _ = bayesobs.fit(df, interleaved="coherence")
    a = split[split["variant"] == "kalman"]["loglik"].sum()
    b = joint[joint["variant"] == "kalman"]["loglik"].iat[0]
    assert b > a + 5  # the true, interleaved sequence explains the data far better


def test_one_level_is_exactly_the_plain_fit():
    df = _static_data().assign(coherence="only")
    plain, _ = bayesobs.fit(df)
    inter, _ = bayesobs.fit(df, interleaved="coherence")
    np.testing.assert_allclose(inter["loglik"], plain["loglik"], rtol=1e-12)
    assert (inter["level"] == "coherence=only").all()


def test_evidence_is_the_joint_fits_on_every_level_row():
    _, ev = bayesobs.fit(_static_data(), interleaved="coherence")
    assert set(ev["level"]) == {"coherence=low", "coherence=high"}
    wide = ev.pivot_table(index="factor", columns="level", values="p")
    np.testing.assert_allclose(wide.iloc[:, 0], wide.iloc[:, 1], rtol=0)
    assert ev[ev["factor"] == "bayesian"]["p"].iat[0] > 0.9


def test_bootstrap_with_levels_is_seeded(tmp_path):
    df = _static_data()
    path = tmp_path / "t.csv"
    df.assign(run=df.index % 2).to_csv(path, index=False)
    args = ["fit", str(path), "--interleaved", "coherence", "--bootstrap", "5", "--out"]
    assert main([*args, str(tmp_path / "a")]) == 0
    assert main([*args, str(tmp_path / "b")]) == 0
    a = (tmp_path / "a" / "evidence.csv").read_text()
    assert a == (tmp_path / "b" / "evidence.csv").read_text()
    assert "p_lo" in a
    fits = pd.read_csv(tmp_path / "a" / "fits.csv")
    assert list(fits.columns[:14]) == [
        "subject",
        "task",
        "modality",
        "condition",
        "variant",
        "bayesian",
        "weber",
        "sequential",
        "gain",
        "n",
        "k",
        "loglik",
        "aic",
        "params",
    ]
    assert "level" in fits.columns


def test_bad_interleaved_column_is_one_line(tmp_path, capsys):
    path = tmp_path / "t.csv"
    _static_data().to_csv(path, index=False)
    assert main(["fit", str(path), "--interleaved", "nope", "--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert "--interleaved nope: no such column" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow  # about 4 s: a real data set fitted per level (the fast suite's 5-minute budget)
def test_qu_shi_coherence_is_interleaved(shared_data, tmp_path):
    """README recipe: the per-coherence w_prior of Qu & Shi experiment 2."""
    files = sorted(
        (shared_data / "qu_shi_precision_weighting" / "raw_psychopy_csv" / "experiment2").glob(
            "*.csv"
        )
    )
    out = tmp_path / "fit"
    args = [
        "fit",
        *map(str, files),
        "--out",
        str(out),
        "--map",
        "stimulus=TimeDur",
        "--map",
        "response=keyDuration / 1000",
        "--map",
        "subject=participant",
        "--interleaved",
        "Coherence1",
        "--where",
        "TrialType == 'Time'",
        "--missing-where",
        "keyDuration >= 9999",
    ]
    assert main(args) == 0
    fits = pd.read_csv(out / "fits.csv")
    st = fits[fits["variant"] == "static"].copy()
    st["w_prior"] = st["params"].map(lambda p: decode_params(p)["w_prior"])
    wide = st.pivot_table(index="subject", columns="level", values="w_prior")
    assert wide.shape == (22, 2)
    # lower motion coherence = noisier duration signal: a stronger prior in most subjects
    low, high = sorted(wide.columns, key=lambda c: float(c.split("=")[1]))
    assert (wide[low] > wide[high]).mean() >= 0.6


def test_posterior_refuses_what_it_does_not_model(tmp_path, capsys):
    path = tmp_path / "t.csv"
    _static_data().to_csv(path, index=False)
    out = str(tmp_path / "f")
    for extra in (["--interleaved", "coherence"], ["--lapse"]):
        assert main(["fit", str(path), "--method", "posterior", *extra, "--out", out]) == 2
        assert "--method posterior does not model" in capsys.readouterr().err


def test_score_with_interleaved_levels(tmp_path):
    path = tmp_path / "t.csv"
    df = _static_data()
    df.assign(run=df.index % 2).to_csv(path, index=False)
    out = tmp_path / "s"
    assert (
        main(
            [
                "score",
                str(path),
                "--interleaved",
                "coherence",
                "--bootstrap",
                "4",
                "--no-probe",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    fits = pd.read_csv(out / "fits.csv")
    assert set(fits["level"]) == {"coherence=low", "coherence=high"}
    direct, _ = bayesobs.fit(df.assign(run=df.index % 2), interleaved="coherence")
    np.testing.assert_allclose(fits["loglik"], direct["loglik"], rtol=1e-12)
    missing = pd.read_csv(out / "missing.csv")
    assert missing["reason"].str.contains("not defined with --interleaved coherence").any()
    assert pd.read_csv(out / "accuracy.csv")["nrmse"].notna().all()
