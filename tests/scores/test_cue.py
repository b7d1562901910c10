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


@pytest.mark.parametrize("seed", range(3))
def test_forest_probe_recovers_a_known_combination_and_what_a_linear_one_misses(seed):
    """issue 50: the probe's forest, out of fold, against closed forms (300 trials).

    ``y_M = 0.7 y_T + 0.3 y_I + N(0, 0.05)`` with uniform cues: R^2 within 0.03
    of the ceiling ``var(signal) / var(y_M)`` and the predictions' slopes on
    the cues 0.7 and 0.3 within 0.05.  ``y_M = max(y_T, y_I) + N(0, 0.02)``:
    within 0.02 of its ceiling, where the best linear combination explains
    ``3/4`` of the variance (its out-of-fold R^2 here at most 0.8).
    """
    from sklearn.model_selection import KFold

    from bayesobs.scores.cue import forest_predict

    rng = np.random.default_rng(seed)
    n = 300
    X = rng.uniform(0, 1, (n, 2))
    ones = np.column_stack([X, np.ones(n)])
    cases = [
        (0.7 * X[:, 0] + 0.3 * X[:, 1] + rng.normal(0, 0.05, n), (0.49 + 0.09) / 12, 0.05),
        (X.max(1) + rng.normal(0, 0.02, n), 1 / 18, 0.02),  # var of the max of two U(0, 1)
    ]
    r2 = []
    for y, signal, noise in cases:
        forest, linear = np.empty(n), np.empty(n)
        for train, test in KFold(5, shuffle=True, random_state=seed).split(X):
            forest[test] = forest_predict(X[train], y[train], X[test], seed=seed)
            linear[test] = ones[test] @ np.linalg.lstsq(ones[train], y[train], rcond=None)[0]
        ss = ((y - y.mean()) ** 2).sum()
        ceiling = signal / (signal + noise**2)
        r2.append((1 - ((y - forest) ** 2).sum() / ss, 1 - ((y - linear) ** 2).sum() / ss, ceiling))
        if len(r2) == 1:
            slopes = np.linalg.lstsq(ones, forest, rcond=None)[0][:2]
            np.testing.assert_allclose(slopes, [0.7, 0.3], atol=0.05)
    (lin_forest, _, lin_ceiling), (max_forest, max_linear, max_ceiling) = r2
    assert lin_ceiling - 0.03 <= lin_forest <= lin_ceiling + 0.01
    assert max_ceiling - 0.02 <= max_forest <= max_ceiling + 0.01
    assert max_linear <= 0.8


def test_forest_agrees_with_scikit_learns_random_forest_within_the_spread_over_seeds():
    """issue 50: the probe's forest and ``RandomForestRegressor`` (same settings) are one model.

    96 training rows (a fold at BayesBench scale) of a non-linear target; over
    20 seeds each, the mean prediction of each of 50 test points differs by
    at most 4 standard errors of the difference (seed spread), and the mean
    squared error against the true function by at most 10%.
    """
    from sklearn.ensemble import RandomForestRegressor

    from bayesobs.scores.cue import PROBE_TREES, forest_predict

    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, (96, 2))
    truth = lambda X: np.sin(3 * X[:, 0]) + X[:, 1] ** 2  # noqa: E731
    y = truth(X) + rng.normal(0, 0.1, len(X))
    X_test = rng.uniform(0.05, 0.95, (50, 2))
    ours = np.array([forest_predict(X, y, X_test, seed=s) for s in range(20)])
    theirs = np.array(
        [
            RandomForestRegressor(PROBE_TREES, min_samples_leaf=3, random_state=s)
            .fit(X, y)
            .predict(X_test)
            for s in range(20)
        ]
    )
    se = np.sqrt((ours.var(0, ddof=1) + theirs.var(0, ddof=1)) / 20)
    assert (np.abs(ours.mean(0) - theirs.mean(0)) <= 4 * se).all()
    mse = [((p - truth(X_test)) ** 2).mean() for p in (ours, theirs)]
    assert abs(mse[0] / mse[1] - 1) <= 0.1


def test_cue_probe_of_a_known_linear_observer():
    """issue 50: ``cue_probe`` of a simulated observer whose cue weights are known.

    ``y_M = 0.6 y_T + 0.4 y_I`` exactly: the linear combiner's out-of-fold
    R^2 is 1 (to 1e-9) and the forest's above 0.9; with ``N(0, 0.04)`` added,
    both within 0.08 of the ceiling ``var(0.6 y_T + 0.4 y_I) / var(y_M)``.
    The same seed gives the same table; one subject's rows alone give that
    subject's row (to 0.005: ties between splits are broken in another order).
    """
    from bayesobs.scores.cue import cue_probe, paired_trials

    rng = np.random.default_rng(9)
    exact = _table(rng, n_per=40, noise=(0.05, 0.12, 0.0), subject="a")
    noisy = _table(rng, n_per=40, noise=(0.05, 0.12, 0.04), subject="b")
    both = pd.concat([exact, noisy], ignore_index=True)
    r2, skipped = cue_probe(both, seed=3)
    assert skipped.empty and list(r2["subject"]) == ["a", "b"]
    assert abs(r2["r2_linear"].iat[0] - 1) < 1e-9 and r2["r2_random_forest"].iat[0] > 0.9
    p = paired_trials(noisy)[0]
    signal = np.var(0.6 * p["y_text"] + 0.4 * p["y_image"])
    ceiling = signal / (signal + 0.04**2)
    for model in ("linear", "random_forest"):
        assert abs(r2[f"r2_{model}"].iat[1] - ceiling) < 0.08
    pd.testing.assert_frame_equal(cue_probe(both, seed=3)[0], r2)
    alone = cue_probe(noisy, seed=3)[0]
    # up to the splitter's order among equally good splits (shared by the groups fitted together)
    pd.testing.assert_frame_equal(alone, r2.iloc[[1]].reset_index(drop=True), atol=0.005)


def test_forests_grown_together_equal_each_group_grown_alone():
    """issue 50: the probe's trees of many groups grown at once equal each group's tree alone.

    Eleven groups (more than one shared fit holds) of different sizes and
    scales, two of 4 rows (bootstrap samples with fewer distinct rows than a
    leaf), some with features apart from the others' and test points beyond
    them (where a split on a response could separate groups), against
    ``DecisionTreeRegressor`` fitted to each group alone with the same
    bootstrap counts as sample weights: equal to 1e-9 of each group's
    response range.  One feature, so that no tie between features' splits
    leaves the choice to the splitter's random order.
    """
    from sklearn.tree import DecisionTreeRegressor

    from bayesobs.scores.cue import _forests

    rng = np.random.default_rng(2)
    blocks, want = [], []
    sizes = [(60, 1, 0), (4, 1, 0), (90, 1000, 30), (30, 0.01, 0), (4, 5, 0)] + [(40, 3, 9)] * 6
    for i, (n, scale, shift) in enumerate(sizes):
        X = rng.normal(size=(n, 1)) + shift * (i % 3)
        y = scale * (np.sin(2 * X[:, 0]) + rng.normal(0, 0.3, n)) - 7 * scale
        X_test = np.vstack([rng.normal(size=(8, 1)) + shift * (i % 3), [[X.max() + 3 * shift]]])
        blocks.append((X, y, X_test, np.random.RandomState(100 + i)))
        boot, pred = np.random.RandomState(100 + i), np.zeros(9)
        for rows in boot.randint(0, n, (12, n)):
            w = np.bincount(rows, minlength=n).astype(float)
            pred += DecisionTreeRegressor(min_samples_leaf=3).fit(X, y, w).predict(X_test)
        want.append(pred / 12)
    got = _forests(blocks, np.random.RandomState(0), trees=12)
    for g, w, (_, y, _, _) in zip(got, want, blocks, strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-9 * np.ptp(y))
