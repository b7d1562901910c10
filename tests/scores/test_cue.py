"""Cue combination against closed forms and a straightforward numpy/scipy reference."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

from bayesobs.scores import with_baseline
from bayesobs.scores.cue import CUE_COLUMNS, combine, cue_table, gls_text_weight
from bayesobs.trials import normalize_trials

TOL = 1e-9


def reference(x, c, yt, yi, ym, non_oracle="response"):
    """METHOD §4 written out directly with numpy and scipy."""

    def nrmse(p):
        return np.sqrt(np.mean((p - x) ** 2)) / np.sqrt(np.mean((c - x) ** 2))

    alpha = optimize.lsq_linear((yt - yi)[:, None], ym - yi, bounds=(0, 1)).x[0]
    if non_oracle == "response":
        vt, vi = np.var(yt, ddof=1), np.var(yi, ddof=1)
    else:
        vt, vi = np.var(yt - x, ddof=1), np.var(yi - x, ddof=1)
    w_non = (1 / vt) / (1 / vt + 1 / vi)
    cal_t = np.polyval(np.polyfit(yt, x, 1), yt)
    cal_i = np.polyval(np.polyfit(yi, x, 1), yi)
    sigma = np.cov(x - cal_t, x - cal_i)
    w = np.linalg.solve(sigma, np.ones(2))
    w = w / w.sum()
    out = {
        "nrmse_text": nrmse(yt),
        "nrmse_image": nrmse(yi),
        "nrmse_multimodal": nrmse(ym),
        "alpha_text": alpha,
        "w_text_non_oracle": w_non,
        "w_text_oracle": w[0],
        "nrmse_equal": nrmse((yt + yi) / 2),
        "nrmse_bayes_non_oracle": nrmse(w_non * yt + (1 - w_non) * yi),
        "nrmse_bayes_oracle": nrmse(w[0] * cal_t + w[1] * cal_i),
    }
    for k in ("equal", "bayes_non_oracle", "bayes_oracle"):
        out[f"rre_{k}"] = out[f"nrmse_{k}"] / out["nrmse_multimodal"]
    return out


def _table(rng, n_per=30, fuse=None, noise=(0.05, 0.12, 0.04), runs=1, subject="s"):
    rows = []
    for s, (lo, hi) in enumerate([(0.1, 0.5), (0.3, 0.7), (0.5, 0.9)]):
        for r in range(runs):
            x = rng.uniform(lo, hi, n_per)
            yt = x + rng.normal(0, noise[0], n_per) + 0.02
            yi = 0.8 * x + rng.normal(0, noise[1], n_per) + 0.1
            ym = fuse(x, rng) if fuse else 0.6 * yt + 0.4 * yi + rng.normal(0, noise[2], n_per)
            for mod, y in (("text", yt), ("image", yi), ("multimodal", ym)):
                rows.append(
                    pd.DataFrame(
                        {
                            "subject": subject,
                            "task": "t",
                            "modality": mod,
                            "condition": "base",
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
    return with_baseline(normalize_trials(pd.concat(rows)))


@pytest.mark.parametrize("non_oracle", ["response", "error"])
@pytest.mark.parametrize("seed", range(4))
def test_matches_straightforward_reference(seed, non_oracle):
    t = _table(np.random.default_rng(seed))
    cue, missing = cue_table(t, non_oracle=non_oracle)
    assert missing.empty and len(cue) == 1
    w = t.pivot_table(index=["session", "run", "trial"], columns="modality", values="response")
    st = t[t["modality"] == "text"].set_index(["session", "run", "trial"])
    ref = reference(
        st["stimulus"].to_numpy(),
        st["baseline"].to_numpy(),
        w["text"].to_numpy(),
        w["image"].to_numpy(),
        w["multimodal"].to_numpy(),
        non_oracle,
    )
    for col in CUE_COLUMNS:
        np.testing.assert_allclose(cue[col].iat[0], ref[col], rtol=TOL, err_msg=col)


def test_gls_weight_hand_computed_correlated_case():
    # Sigma = [[4, 1], [1, 9]]: Sigma^-1 1 is proportional to (9 - 1, 4 - 1) = (8, 3)
    np.testing.assert_allclose(gls_text_weight(4.0, 9.0, 1.0), 8 / 11, rtol=TOL)
    # independent cues: reliability weights
    np.testing.assert_allclose(gls_text_weight(4.0, 9.0, 0.0), (1 / 4) / (1 / 4 + 1 / 9), rtol=TOL)


def _population_moments(mu, s2, var_t, var_i, n=1e6):
    """Exact ``sum v v^T`` for y_T = x + e_T, y_I = x + e_I, y_M = (y_T + y_I) / 2, c = mu."""
    ex2 = s2 + mu * mu
    E = np.zeros((6, 6))
    m = [1.0, mu, mu, mu, mu, mu]
    for i in range(6):
        for j in range(6):
            E[i, j] = m[i] * m[j]
    for i in (1, 2, 3, 4):
        for j in (1, 2, 3, 4):
            E[i, j] = ex2
    E[2, 2] += var_t
    E[3, 3] += var_i
    E[4, 4] += (var_t + var_i) / 4
    E[2, 4] = E[4, 2] = ex2 + var_t / 2
    E[3, 4] = E[4, 3] = ex2 + var_i / 2
    return n * E


def test_oracle_weights_of_independent_cues_are_reliability_weights():
    """Well-calibrated cues (stimulus spread >> noise): GLS = reliability weights."""
    q = combine(_population_moments(mu=5.0, s2=1e6, var_t=1.0, var_i=4.0))
    np.testing.assert_allclose(q["w_text_oracle"], 4 / 5, rtol=1e-5)
    np.testing.assert_allclose(q["w_text_non_oracle"], (1e6 + 4) / (2e6 + 5), rtol=1e-9)


def test_linear_alpha_recovers_mixture_and_clips():
    rng = np.random.default_rng(1)
    t = _table(rng, fuse=None, noise=(0.05, 0.1, 0.0))
    cue, _ = cue_table(t)
    np.testing.assert_allclose(cue["alpha_text"].iat[0], 0.6, rtol=1e-9)
    t2 = t.copy()
    w = t2.pivot_table(index=["session", "trial"], columns="modality", values="response")
    over = (1.5 * w["text"] - 0.5 * w["image"]).rename("r")
    sel = t2["modality"] == "multimodal"
    t2.loc[sel, "response"] = over.loc[
        list(zip(t2.loc[sel, "session"], t2.loc[sel, "trial"], strict=True))
    ].to_numpy()
    assert cue_table(t2)[0]["alpha_text"].iat[0] == 1.0


def _fuser(weights):
    def fuse(x, rng):  # fresh percepts on multimodal trials
        pt = x + rng.normal(0, 0.05, len(x))
        pi = x + rng.normal(0, 0.15, len(x))
        return weights(pt, pi)

    return fuse


def _unbiased(rng, fuse, n_per=2000):
    rows = []
    for s, (lo, hi) in enumerate([(0.1, 0.5), (0.3, 0.7), (0.5, 0.9)]):
        x = rng.uniform(lo, hi, n_per)
        for mod, y in (
            ("text", x + rng.normal(0, 0.05, n_per)),
            ("image", x + rng.normal(0, 0.15, n_per)),
            ("multimodal", fuse(x, rng)),
        ):
            rows.append(
                pd.DataFrame(
                    {
                        "modality": mod,
                        "session": f"s{s}",
                        "trial": np.arange(n_per),
                        "stimulus": x,
                        "response": y,
                        "range_low": lo,
                        "range_high": hi,
                    }
                )
            )
    return with_baseline(normalize_trials(pd.concat(rows)))


def test_optimal_fuser_scores_rre_one_equal_weighter_lower():
    rng = np.random.default_rng(2)
    w = 0.15**2 / (0.05**2 + 0.15**2)
    optimal = cue_table(_unbiased(rng, _fuser(lambda a, b: w * a + (1 - w) * b)))[0]
    equal = cue_table(_unbiased(rng, _fuser(lambda a, b: (a + b) / 2)))[0]
    assert abs(optimal["rre_bayes_oracle"].iat[0] - 1) < 0.03
    assert equal["rre_bayes_oracle"].iat[0] < 0.75
    assert abs(optimal["w_text_oracle"].iat[0] - w) < 0.02


def test_missing_modality_is_reported_not_guessed():
    t = _table(np.random.default_rng(3))
    t = t[t["modality"] != "image"]
    cue, missing = cue_table(t)
    assert cue.empty
    assert "no image trials" in missing["reason"].iat[0]


def test_bootstrap_same_seed_same_numbers():
    t = _table(np.random.default_rng(4), runs=3)
    a, _ = cue_table(t, bootstrap=10, seed=5)
    b, _ = cue_table(t, bootstrap=10, seed=5)
    pd.testing.assert_frame_equal(a, b)
    # the interval columns are the 16th/84th percentiles of the replicates (METHOD §7)
    from bayesobs.scores.cue import cue_batch

    _, values, _ = cue_batch(t, 10, 5)
    reps = values["nrmse_multimodal"][:, 1:]
    np.testing.assert_allclose(a["nrmse_multimodal_lo"], np.percentile(reps, 16, axis=1))
    np.testing.assert_allclose(a["nrmse_multimodal_hi"], np.percentile(reps, 84, axis=1))
    assert (a["nrmse_multimodal_hi"] > a["nrmse_multimodal_lo"]).all()  # not degenerate


@pytest.mark.parametrize("seed", [0, 7])
def test_forest_predict_is_scikit_learns_random_forest_bit_for_bit(seed):
    """issue 32: the probe's forest, built tree by tree, equals RandomForestRegressor exactly.

    Ties (rounded features), several sizes, leaf sizes and tree counts, and a
    second fit with the same cached seeds; inputs with NaN take the forest itself.
    """
    from sklearn.ensemble import RandomForestRegressor

    from bayesobs.scores.cue import forest_predict

    rng = np.random.default_rng(seed)
    for n, features, trees, leaf, decimals in [
        (96, 2, 30, 3, 1),
        (96, 2, 30, 3, 2),
        (37, 3, 5, 1, 0),
    ]:
        X = np.round(rng.normal(size=(n, features)), decimals)
        y = np.round(X.sum(1) + rng.normal(size=n), 2)
        X_test = rng.normal(size=(24, features))
        want = (
            RandomForestRegressor(n_estimators=trees, min_samples_leaf=leaf, random_state=seed)
            .fit(X, y)
            .predict(X_test)
        )
        for _ in range(2):  # the second time from the cached seeds and bootstrap counts
            got = forest_predict(X, y, X_test, trees, seed, leaf)
            assert np.array_equal(got, want)
    X[0, 0] = np.nan  # scikit-learn's own path (missing values) for inputs that are not finite
    want = RandomForestRegressor(n_estimators=4, min_samples_leaf=1, random_state=seed)
    assert np.array_equal(forest_predict(X, y, X_test, 4, seed, 1), want.fit(X, y).predict(X_test))


def test_tree_grower_takes_the_estimator_when_the_builder_differs_or_fails(monkeypatch):
    """issue 32: scikit-learn's private tree builder is used only where it equals the estimator.

    With the installed scikit-learn the builder is chosen; a builder that
    gives other numbers (a changed default) or fails (a changed signature)
    leaves the forest on ``DecisionTreeRegressor``, with the same predictions.
    """
    from bayesobs.scores import cue

    cue._tree_grower.cache_clear()
    assert cue._tree_grower() is cue._builder_tree
    rng = np.random.default_rng(3)
    X = np.round(rng.normal(size=(50, 2)), 1)
    y = X.sum(1) + rng.normal(size=50)
    X_test = rng.normal(size=(10, 2))
    want = cue.forest_predict(X, y, X_test, 6, 2, 3)
    real = cue._builder_tree

    def shifted(*args):
        return real(*args) + 1e-12

    def broken(*args):
        raise TypeError("__cinit__() takes exactly 5 positional arguments (6 given)")

    try:
        for fake in (shifted, broken):
            monkeypatch.setattr(cue, "_builder_tree", fake)
            cue._tree_grower.cache_clear()
            assert cue._tree_grower() is cue._estimator_tree
            assert np.array_equal(cue.forest_predict(X, y, X_test, 6, 2, 3), want)
    finally:
        monkeypatch.undo()
        cue._tree_grower.cache_clear()
