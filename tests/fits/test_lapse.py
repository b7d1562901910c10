"""METHOD §11: a uniform lapse rate beside every variant, fitted by EM."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from naive import naive_mean
from scipy import optimize, stats

import bayesobs
from bayesobs.cli import main
from bayesobs.fits.fitting import decode_params

RANGES = ((0.1, 0.5), (0.3, 0.7), (0.5, 0.9))


def _lapsing_static(seed, w_prior=0.5, sigma=0.03, lapse=0.08, n_per=100):
    """A static-Bayes observer who, on 8% of trials, answers uniformly at random."""
    rng = np.random.default_rng(seed)
    frames = []
    for s, (lo, hi) in enumerate(RANGES):
        x = rng.uniform(lo, hi, n_per)
        y = (1 - w_prior) * x + w_prior * x.mean() + rng.normal(0, sigma, n_per)
        lapsed = rng.random(n_per) < lapse
        y[lapsed] = rng.uniform(0.0, 1.5, lapsed.sum())
        frames.append(pd.DataFrame({"session": f"s{s}", "stimulus": x, "response": y}))
    return pd.concat(frames, ignore_index=True)


def _w(fits, variant="static"):
    return decode_params(fits.set_index("variant").loc[variant, "params"])


@pytest.mark.slow
def test_lapse_recovers_w_prior_where_the_plain_fit_misses():
    misses = 0
    for seed in range(3):
        df = _lapsing_static(seed)
        plain, _ = bayesobs.fit(df)
        lapsed, _ = bayesobs.fit(df, lapse=True)
        p = _w(lapsed)
        assert p["w_prior"] == pytest.approx(0.5, abs=0.05), (seed, p)
        assert p["lapse"] == pytest.approx(0.08, abs=0.04), (seed, p)
        assert p["sigma"] == pytest.approx(0.03, rel=0.2), (seed, p)
        misses += abs(_w(plain)["w_prior"] - 0.5) > 0.05
    assert misses >= 2  # the plain Gaussian fit is pulled away by the lapses


def _mixture_ll(name, p, lam, x, y, run, eps):
    """The §11 mixture on the response scale, with scipy's normal density."""
    log = "_log" in name
    m = naive_mean(name, p, x, run, eps)
    u = np.log(y + eps) if log else y
    dens = stats.norm.pdf(u, m, p["sigma"]) / ((y + eps) if log else 1.0)
    with np.errstate(divide="ignore"):  # an optimiser's trial point may underflow
        return float(np.sum(np.log((1 - lam) * dens + lam / (y.max() - y.min()))))


@pytest.mark.parametrize("name", ["static", "linear", "kalman", "static_log"])
def test_em_reaches_a_direct_maximisation_of_the_mixture(name):
    df = _lapsing_static(7)
    fits, _ = bayesobs.fit(df, lapse=True)
    row = fits.set_index("variant").loc[name]
    x, y = df["stimulus"].to_numpy(), df["response"].to_numpy()
    run = df["session"].to_numpy()
    eps = 1e-3 * x.max()
    p = decode_params(row["params"])
    # the reported LL is the mixture LL at the reported parameters
    lam = p.pop("lapse")
    assert row["loglik"] == pytest.approx(_mixture_ll(name, p, lam, x, y, run, eps), rel=1e-8)
    # and no multi-start optimiser over every parameter finds a higher one
    keys = [k for k in p if k != "sigma"]

    def negll(th):
        q = dict(zip(keys, th[: len(keys)], strict=True))
        if "rho" in q:
            q["rho"] = math.exp(q["rho"])
        q["sigma"] = math.exp(th[-2])
        val = _mixture_ll(name, q, th[-1], x, y, run, eps)
        return -val if np.isfinite(val) else 1e300

    rng = np.random.default_rng(0)
    best = -np.inf
    for _ in range(4):
        start = [
            math.log(p["rho"]) + rng.normal(0, 1) if k == "rho" else p[k] + rng.normal(0, 0.1)
            for k in keys
        ] + [math.log(p["sigma"]) + rng.normal(0, 0.3), rng.uniform(0.01, 0.19)]
        bounds = [
            (-18, 18) if k == "rho" else (0, 1) if k == "w_prior" else (None, None) for k in keys
        ]
        res = optimize.minimize(
            negll, start, method="L-BFGS-B", bounds=[*bounds, (-20, 5), (0, 0.2)]
        )
        best = max(best, -res.fun)
    assert row["loglik"] >= best - 1e-4 * abs(best)
    assert row["k"] == {"static": 3, "linear": 4, "kalman": 3, "static_log": 3}[name]


@pytest.mark.slow
def test_no_lapses_leave_the_fit_unchanged_up_to_k():
    rng = np.random.default_rng(3)
    x = rng.uniform(0.1, 0.9, 120)
    df = pd.DataFrame({"stimulus": x, "response": 0.8 * x + 0.1 + rng.normal(0, 0.02, 120)})
    plain, _ = bayesobs.fit(df)
    lapsed, _ = bayesobs.fit(df, lapse=True)
    a = plain.set_index("variant")
    b = lapsed.set_index("variant")
    # a lapse can only raise the likelihood, and by little where there are none
    assert (b["loglik"] >= a["loglik"] - 1e-9).all()
    assert (b["loglik"] - a["loglik"] < 2).all()
    assert (b["k"] == a["k"] + 1).all()
    assert all(decode_params(q)["lapse"] < 0.03 for q in b["params"])


def test_cli_lapse_flag(tmp_path):
    path = tmp_path / "t.csv"
    _lapsing_static(1).to_csv(path, index=False)
    assert main(["fit", str(path), "--lapse", "--out", str(tmp_path / "f")]) == 0
    fits = pd.read_csv(tmp_path / "f" / "fits.csv")
    assert all("lapse" in decode_params(p) for p in fits["params"])


# the reference rows are fitted with --lapse too: ~15 s of CPU, so the fast tier leaves them out
@pytest.mark.parametrize(
    "extra", [["--no-references"], pytest.param([], marks=pytest.mark.slow, id="references")]
)
def test_score_with_lapse_uses_the_lapse_fits(tmp_path, extra):
    path = tmp_path / "t.csv"
    _lapsing_static(2).to_csv(path, index=False)
    out = tmp_path / "s"
    argv = ["score", str(path), "--lapse", "--bootstrap", "0", "--no-probe", "--out", str(out)]
    assert main([*argv, *extra]) == 0
    fits = pd.read_csv(out / "fits.csv")
    p = decode_params(fits.set_index("variant").loc["static", "params"])
    assert p["lapse"] > 0.03 and p["w_prior"] == pytest.approx(0.5, abs=0.05)
