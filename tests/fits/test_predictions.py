"""Predictions of interleaved fits (one row per level, METHOD §10) for the report's figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayesobs
from bayesobs.fits.fitting import decode_params
from bayesobs.fits.observers import VARIANT_NAMES, get_variant
from bayesobs.fits.observers.models import log_epsilon, predict_response
from bayesobs.fits.predictions import level_predictions, predictions


def _interleaved(seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(3):
        x = rng.uniform(0.4 + 0.2 * r, 1.0 + 0.2 * r, 90)
        lev = rng.choice(["0.3", "0.7"], 90)
        noise = np.where(lev == "0.3", 0.08, 0.03)
        y = 0.6 * x + 0.4 * x.mean() + rng.normal(0, noise)
        rows.append(pd.DataFrame({"session": f"s{r}", "stimulus": x, "response": y, "coh": lev}))
    return pd.concat(rows, ignore_index=True)


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_level_predictions_reproduce_the_joint_fit(variant):
    """The joint log-likelihood of fits.csv, recomputed from each trial's level prediction."""
    df = _interleaved()
    fits, _ = bayesobs.fit(df, interleaved="coh")
    rows = fits[fits["variant"] == variant].set_index("level")
    params = {lev: decode_params(p) for lev, p in rows["params"].items()}
    pred = predictions(df, fits, variants=(variant,))
    x, y = pred["stimulus"].to_numpy(), pred["response"].to_numpy()
    lev = pred["level"].to_numpy()
    assert set(lev) == {"coh=0.3", "coh=0.7"}
    eps = log_epsilon(x)
    log = get_variant(variant).log
    u, m = (
        (np.log(y + eps), np.log(pred[f"pred_{variant}"].to_numpy() + eps))
        if log
        else (
            y,
            pred[f"pred_{variant}"].to_numpy(),
        )
    )
    sigma = np.array([params[v]["sigma"] for v in lev])
    ll = stats.norm.logpdf(u, m, sigma).sum() - (np.log(y + eps).sum() if log else 0.0)
    assert ll == pytest.approx(rows["loglik"].iloc[0], rel=1e-6, abs=1e-6)


def test_one_level_is_the_plain_prediction():
    df = _interleaved()
    run = df["session"].to_numpy()
    x = df["stimulus"].to_numpy()
    for variant, p in (
        ("kalman_gain", {"rho": 0.3, "sigma": 0.1, "g": 0.9, "delta": 0.05}),
        ("kalman_log", {"rho": np.inf, "sigma": 0.1}),
    ):
        got = level_predictions(variant, {"a": p}, x, run, np.array(["a"] * len(x)))
        np.testing.assert_allclose(got, predict_response(variant, p, x, run), rtol=1e-9)


def test_interleaved_fits_from_a_csv_predict_per_level(tmp_path):
    """fits.csv read back (numbers as numbers, several rows per cell) gives predictions."""
    df = _interleaved().assign(subject=7)
    fits, _ = bayesobs.fit(df, interleaved="coh")
    fits.to_csv(tmp_path / "fits.csv", index=False)
    pred = predictions(df, pd.read_csv(tmp_path / "fits.csv"))
    assert pred["pred_static"].notna().all() and pred["pred_kalman"].notna().all()
