"""Cue combination (METHOD §4): reference combiners, NRMSE and RRE.

Per ``(subject, task, condition)`` the text, image and multimodal trials are
paired by ``(session, run, trial)``.  Every reference combiner is linear in
``v = (1, x, y_T, y_I, y_M, c)`` (``c`` the range-midpoint baseline), so all of
them, and all their errors, are closed-form functions of the moment matrix
``M = sum v v^T`` over the paired trials.  Moments add over session runs, so a
bootstrap replicate's ``M`` is a count-weighted sum of its runs' moments and
every replicate is computed at once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..bootstrap import add_interval, run_draws, unit_draws
from ..fits.fitting import CONSTANT_REASON

ONE, X, T, IMG, MM, C = range(6)
NON_ORACLE = ("response", "error")
CUE_COLUMNS = (
    "nrmse_text",
    "nrmse_image",
    "nrmse_multimodal",
    "alpha_text",
    "w_text_non_oracle",
    "w_text_oracle",
    "nrmse_equal",
    "nrmse_bayes_non_oracle",
    "nrmse_bayes_oracle",
    "rre_equal",
    "rre_bayes_non_oracle",
    "rre_bayes_oracle",
)
GROUP = ("subject", "task", "condition")


def _e(i: int, shape) -> np.ndarray:
    out = np.zeros((*shape, 6))
    out[..., i] = 1.0
    return out


def _quad(M, a, b):
    """``a^T M b`` over leading dimensions."""
    return np.einsum("...i,...ij,...j->...", a, M, b)


def _cov(M, a, b):
    """Sample covariance (ddof 1) of the linear forms ``a.v`` and ``b.v``."""
    n = M[..., ONE, ONE]
    s = M[..., ONE, :]
    sa = np.einsum("...i,...i->...", a, s)
    sb = np.einsum("...i,...i->...", b, s)
    return (_quad(M, a, b) - sa * sb / n) / (n - 1)


def gls_text_weight(s_tt, s_ii, s_ti):
    """Text weight of ``Sigma^-1 1 / (1^T Sigma^-1 1)`` for a 2x2 covariance.

    ``Sigma = [[s_tt, s_ti], [s_ti, s_ii]]``; 0.5 where it is degenerate.

    Parameters
    ----------
    s_tt : array_like
        Variance of the text estimate's error.
    s_ii : array_like
        Variance of the image estimate's error.
    s_ti : array_like
        Their covariance; the three broadcast together.

    Returns
    -------
    numpy.ndarray
        The text weight (the image weight is one minus it); 0.5 where
        ``s_tt + s_ii - 2 s_ti <= 0``.
    """
    s_tt, s_ii, s_ti = (np.asarray(a, dtype=float) for a in (s_tt, s_ii, s_ti))
    den = s_tt + s_ii - 2 * s_ti
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (s_ii - s_ti) / den, 0.5)


def combine(M: np.ndarray, non_oracle: str = "response") -> dict[str, np.ndarray]:
    """All cue-combination quantities from paired-trial moment matrices.

    Parameters
    ----------
    M : array, shape (..., 6, 6)
        ``sum v v^T`` with ``v = (1, x, y_text, y_image, y_multimodal, c)``.
    non_oracle : {"response", "error"}
        Variances behind the non-oracle weights: of the responses (the
        paper's Table 1, default) or of the errors ``y - x``.

    Returns
    -------
    dict
        The :data:`CUE_COLUMNS` quantities, each of shape ``M.shape[:-2]``.
    """
    if non_oracle not in NON_ORACLE:
        raise ValueError(f"non_oracle must be one of {NON_ORACLE}, got {non_oracle!r}")
    M = np.asarray(M, dtype=float)
    lead = M.shape[:-2]
    e = {i: _e(i, lead) for i in range(6)}
    x = e[X]
    with np.errstate(invalid="ignore", divide="ignore"):
        base = _quad(M, e[C] - x, e[C] - x)  # SSE of the baseline

        def nrmse(beta):  # beta.v = prediction; error = (beta - e_X).v
            d = beta - x
            return np.sqrt(_quad(M, d, d) / base)

        out = {
            "nrmse_text": nrmse(e[T]),
            "nrmse_image": nrmse(e[IMG]),
            "nrmse_multimodal": nrmse(e[MM]),
        }
        # equal weighting
        equal = 0.5 * e[T] + 0.5 * e[IMG]
        # linear regression: y_M - y_I = alpha (y_T - y_I), alpha in [0, 1]
        d, r = e[T] - e[IMG], e[MM] - e[IMG]
        sdd = _quad(M, d, d)
        alpha = np.clip(np.where(sdd > 0, _quad(M, d, r) / sdd, 0.5), 0.0, 1.0)
        # Bayes non-oracle: reliability weights from sample variances
        if non_oracle == "response":
            vt, vi = _cov(M, e[T], e[T]), _cov(M, e[IMG], e[IMG])
        else:
            vt, vi = _cov(M, e[T] - x, e[T] - x), _cov(M, e[IMG] - x, e[IMG] - x)
        w_non = np.where(vt + vi > 0, vi / (vt + vi), 0.5)  # (1/vt) / (1/vt + 1/vi)
        # Bayes oracle: calibrate x ~ a y + c per modality, GLS weights on
        # the calibrated estimates from the residual covariance
        n = M[..., ONE, ONE]
        mx = M[..., ONE, X] / n

        def calibrated(i):
            vy = _cov(M, e[i], e[i])
            a = np.where(vy > 0, _cov(M, x, e[i]) / vy, 0.0)
            c0 = mx - a * M[..., ONE, i] / n
            return a[..., None] * e[i] + c0[..., None] * e[ONE]

        cal_t, cal_i = calibrated(T), calibrated(IMG)
        s_tt = _cov(M, x - cal_t, x - cal_t)
        s_ii = _cov(M, x - cal_i, x - cal_i)
        s_ti = _cov(M, x - cal_t, x - cal_i)
        w_or = gls_text_weight(s_tt, s_ii, s_ti)
        lin = alpha[..., None] * e[T] + (1 - alpha[..., None]) * e[IMG]
        non = w_non[..., None] * e[T] + (1 - w_non[..., None]) * e[IMG]
        ora = w_or[..., None] * cal_t + (1 - w_or[..., None]) * cal_i
        out.update(
            alpha_text=alpha,
            w_text_non_oracle=w_non,
            w_text_oracle=w_or,
            nrmse_equal=nrmse(equal),
            nrmse_bayes_non_oracle=nrmse(non),
            nrmse_bayes_oracle=nrmse(ora),
            nrmse_linear=nrmse(lin),
        )
        for name in ("equal", "bayes_non_oracle", "bayes_oracle"):
            out[f"rre_{name}"] = out[f"nrmse_{name}"] / out["nrmse_multimodal"]
    return out


def paired_trials(trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Text, image and multimodal responses paired by ``(session, run, trial)``.

    Returns
    -------
    paired : DataFrame
        One row per paired trial with ``stimulus, baseline, y_text, y_image,
        y_multimodal``; only trials with all three responses observed.
    missing : DataFrame
        ``subject, task, condition, reason`` for groups that cannot be paired.

    Parameters
    ----------
    trials : DataFrame
        A trial table with a ``baseline`` column
        (:func:`bayesobs.scores.with_baseline`).
    """
    keys = [*GROUP, "session", "run", "trial"]
    need = ("text", "image", "multimodal")
    wide = trials.pivot_table(
        index=keys, columns="modality", values=["stimulus", "response", "baseline"], aggfunc="first"
    )
    missing = []
    have = trials.groupby(list(GROUP))["modality"].agg(set)
    ok_groups = []
    for g, mods in have.items():
        lack = [m for m in need if m not in mods]
        if lack:
            if "multimodal" in mods or len(mods) > 1:
                missing.append(
                    (*g, f"no {' or '.join(lack)} trials: cue combination needs all three")
                )
            continue
        ok_groups.append(g)
    cols = pd.MultiIndex.from_product([["stimulus", "response", "baseline"], need])
    wide = wide.reindex(columns=cols)
    wide = wide[wide.index.droplevel(["session", "run", "trial"]).isin(ok_groups)]
    st = wide["stimulus"].to_numpy()
    complete = ~np.isnan(wide["response"].to_numpy()).any(axis=1) & ~np.isnan(st).any(axis=1)
    spread = np.nanmax(st, axis=1) - np.nanmin(st, axis=1) if len(st) else np.zeros(0)
    bad = complete & (spread > 1e-9 * np.nanmax(np.abs(st), axis=1) if len(st) else complete)
    paired = pd.DataFrame(
        {
            "stimulus": wide[("stimulus", "text")].to_numpy(),
            "baseline": wide[("baseline", "text")].to_numpy(),
            "y_text": wide[("response", "text")].to_numpy(),
            "y_image": wide[("response", "image")].to_numpy(),
            "y_multimodal": wide[("response", "multimodal")].to_numpy(),
        },
        index=wide.index,
    ).reset_index()
    bad_groups = set(map(tuple, paired.loc[bad, list(GROUP)].to_numpy()))
    for g in sorted(bad_groups):
        missing.append((*g, "stimuli differ across modalities for the same (session, run, trial)"))
    paired = paired[complete & ~bad]
    if len(bad_groups):
        paired = paired[~paired[list(GROUP)].apply(tuple, axis=1).isin(bad_groups)]
    present = set(map(tuple, paired[list(GROUP)].drop_duplicates().to_numpy().tolist()))
    for g in ok_groups:
        if g not in bad_groups and tuple(g) not in present:
            missing.append((*g, "no trial has all three responses observed"))
    return paired.reset_index(drop=True), pd.DataFrame(missing, columns=[*GROUP, "reason"])


def cue_batch(
    trials: pd.DataFrame,
    bootstrap: int = 0,
    seed: int = 0,
    non_oracle: str = "response",
    resample: str = "pooled",
    paired: tuple[pd.DataFrame, pd.DataFrame] | None = None,
) -> tuple[pd.DataFrame, dict[str, np.ndarray], pd.DataFrame]:
    """Cue-combination quantities of every group and bootstrap replicate.

    Parameters
    ----------
    trials : DataFrame
        A trial table with a ``baseline`` column
        (:func:`bayesobs.scores.with_baseline`).
    bootstrap : int
        Number of bootstrap replicates ``B`` (0: the full data only).
    seed : int
        Seed of the bootstrap draws.
    non_oracle : {"response", "error"}
        Variances behind the non-oracle weights (see :func:`combine`).
    resample : {"pooled", "stratified"}
        The bootstrap scheme (:func:`bayesobs.bootstrap.run_draws`).
    paired : tuple of DataFrame, optional
        :func:`paired_trials` of ``trials`` when the caller has it.

    Returns
    -------
    groups : DataFrame
        ``subject, task, condition`` of each group that could be paired.
    values : dict of str to numpy.ndarray
        The :func:`combine` quantities, each of shape ``(groups, 1 + B)``
        (replicate 0 is the full data); empty when nothing could be paired.
    missing : DataFrame
        ``subject, task, condition, reason`` of the groups left out.
    """
    paired, missing = paired_trials(trials) if paired is None else paired
    B = int(bootstrap)
    if paired.empty:
        return pd.DataFrame(columns=list(GROUP)), {}, missing
    units = paired.groupby([*GROUP, "session", "run"], sort=True)
    unit_id = units.ngroup().to_numpy()
    ukeys = units.size().reset_index()[[*GROUP, "session", "run"]]
    groups = ukeys[list(GROUP)].drop_duplicates().reset_index(drop=True)
    unit_group = ukeys.groupby(list(GROUP), sort=True).ngroup().to_numpy()
    # centre by each group's mean stimulus for precision (all forms are shift-equivariant)
    centre = paired.groupby(list(GROUP), sort=True)["stimulus"].transform("mean").to_numpy()
    v = np.column_stack(
        [
            np.ones(len(paired)),
            *(
                paired[c].to_numpy() - centre
                for c in ("stimulus", "y_text", "y_image", "y_multimodal", "baseline")
            ),
        ]
    )
    outer = (v[:, :, None] * v[:, None, :]).reshape(len(v), 36)
    Mu = np.zeros((len(ukeys), 36))
    np.add.at(Mu, unit_id, outer)
    draws = run_draws(trials, B, seed, resample) if B > 0 else {}
    W = unit_draws(
        groups, unit_group, ukeys["session"].to_numpy(), ukeys["run"].to_numpy(), draws, B
    )
    M = np.asarray(W @ Mu).reshape(len(groups), 1 + B, 6, 6)
    return groups, combine(M, non_oracle), missing


def cue_frame(groups: pd.DataFrame, values: dict[str, np.ndarray]) -> pd.DataFrame:
    """``cue.csv`` rows from :func:`cue_batch` output (``_mean/_lo/_hi`` with replicates).

    Parameters
    ----------
    groups : DataFrame
        The groups of :func:`cue_batch`.
    values : dict of str to numpy.ndarray
        Its ``(groups, 1 + B)`` arrays.

    Returns
    -------
    DataFrame
        The group keys, the :data:`CUE_COLUMNS` of the full data and, with
        replicates, ``COL_mean, COL_lo, COL_hi`` of each.
    """
    out = groups.copy()
    vals = {c: values[c] if len(groups) else np.empty((0, 1)) for c in CUE_COLUMNS}
    for col in CUE_COLUMNS:  # the contract columns first, then the intervals
        out[col] = vals[col][:, 0]
    for col in CUE_COLUMNS:
        if vals[col].shape[1] > 1:
            add_interval(out, col, vals[col][:, 1:])
    return out


def cue_table(
    trials: pd.DataFrame, bootstrap: int = 0, seed: int = 0, non_oracle: str = "response"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``cue.csv`` rows (DESIGN contract) plus ``_mean, _lo, _hi`` with a bootstrap.

    Parameters
    ----------
    trials : DataFrame
        A trial table with a ``baseline`` column
        (:func:`bayesobs.scores.with_baseline`).
    bootstrap : int
        Number of bootstrap replicates (0: no intervals).
    seed : int
        Seed of the bootstrap draws.
    non_oracle : {"response", "error"}
        Variances behind the non-oracle weights (see :func:`combine`).

    Returns
    -------
    cue : DataFrame
        The rows of :func:`cue_frame`.
    missing : DataFrame
        ``subject, task, condition, reason`` of the groups left out.
    """
    groups, values, missing = cue_batch(trials, bootstrap, seed, non_oracle)
    return cue_frame(groups, values), missing


# ------------------------------------------------------------- the cue probe
PROBE_MODELS = ("random_forest", "linear", "bayes_non_oracle", "bayes_oracle")
PROBE_TREES = (
    30  # the paper's forest has 100: out-of-fold R^2 within 0.01 at BayesBench scale, 3x cheaper
)


# _forests grows the trees of up to _STACK groups (folds of groups) in one DecisionTreeRegressor
# fit: the group a feature, the responses rescaled to [0, 1] and lifted by _LIFT per group, so a
# split between groups gains far more than any split inside one (at most a quarter of its
# weight) and each group's rows get their own subtree, as its tree alone would be grown (up to
# near-ties, ~1e-7 of the gain).  The fit is public API; a tree's checks cost more than its
# growth at these sizes (30 trees x 5 folds x 27 groups at BayesBench scale).
_STACK, _LIFT = 8, 1e3


def forest_predict(
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_test: np.ndarray,
    trees: int = PROBE_TREES,
    seed: int = 0,
    min_samples_leaf: int = 3,
) -> np.ndarray:
    """A random forest's predictions: the mean of ``trees`` regression trees on bootstrap samples.

    Breiman's forest as scikit-learn's ``RandomForestRegressor`` grows it
    (bootstrap counts as sample weights, every feature a candidate at each
    split, squared error, leaves of at least ``min_samples_leaf`` distinct
    rows, no depth limit), each tree a ``DecisionTreeRegressor``.

    Parameters
    ----------
    X_train : numpy.ndarray
        ``(n, features)`` training features.
    y_train : numpy.ndarray
        ``(n,)`` training targets.
    X_test : numpy.ndarray
        ``(m, features)`` features to predict.
    trees : int
        Number of trees.
    seed : int
        Seed of the bootstrap samples and the trees' splitters.
    min_samples_leaf : int
        The trees' ``min_samples_leaf``.

    Returns
    -------
    numpy.ndarray
        ``(m,)`` predictions.
    """
    rng = np.random.RandomState(seed)
    return _forests([(X_train, y_train, X_test, rng)], rng, trees, min_samples_leaf)[0]


def _counts(rows: np.ndarray, n: int) -> np.ndarray:
    """How often each of ``n`` rows is drawn in each row of ``rows`` (float64)."""
    flat = rows + n * np.arange(len(rows))[:, None]
    return np.bincount(flat.ravel(), minlength=rows.size).reshape(len(rows), n).astype(np.float64)


def _forests(blocks: list, rng, trees: int = PROBE_TREES, min_samples_leaf: int = 3) -> list:
    """:func:`forest_predict` of each ``(X_train, y_train, X_test, bootstrap_rng)``, grown together."""
    # start-up time: scikit-learn loads only for the cue probe
    import sklearn
    from sklearn.tree import DecisionTreeRegressor

    tree = DecisionTreeRegressor(min_samples_leaf=min_samples_leaf, random_state=rng)
    out = []
    for chunk in (blocks[i : i + _STACK] for i in range(0, len(blocks), _STACK)):
        ys = [np.asarray(b[1], dtype=np.float64) for b in chunk]
        lo = np.array([y.min() for y in ys])
        span = np.array([np.ptp(y) or 1.0 for y in ys])
        y = np.concatenate([(yb - lo[i]) / span[i] + _LIFT * i for i, yb in enumerate(ys)])
        X, X_test = (
            np.vstack(
                [np.column_stack([np.full(len(b[j]), i), b[j]]) for i, b in enumerate(chunk)]
            ).astype(np.float32)
            for j in (0, 2)
        )
        row_block, test_block = X[:, 0].astype(int), X_test[:, 0].astype(int)
        # each block's bootstrap counts from its own generator, (trees, rows)
        W = np.hstack(
            [
                _counts(b[3].randint(0, len(yb), (trees, len(yb))), len(yb))
                for b, yb in zip(chunk, ys, strict=True)
            ]
        )
        starts = np.searchsorted(row_block, np.arange(len(chunk)))
        distinct = np.add.reduceat(W > 0, starts, axis=1)
        pred = np.zeros(len(X_test))
        fast = all(np.isfinite(a).all() for a in (X, X_test, y))
        check = not fast
        with sklearn.config_context(skip_parameter_validation=fast, assume_finite=fast):
            for w, count in zip(W, distinct, strict=True):  # one tree of each block's forest
                # a block with fewer distinct rows than a leaf cannot split from the others
                alone = count < min_samples_leaf
                shared = np.where(alone[row_block], 0.0, w)
                p = np.empty(len(X_test))
                if shared.any():
                    tree.fit(X, y, sample_weight=shared, check_input=check)
                    p = tree.predict(X_test, check_input=check)
                    # a test row in a leaf of another block's rows (a split on a response
                    # that happened to separate blocks): its block is grown alone
                    fit_leaf = tree.apply(X[shared > 0], check_input=check)
                    test_leaf = tree.apply(X_test, check_input=check)
                    home = np.full(max(fit_leaf.max(), test_leaf.max()) + 1, -1)
                    home[fit_leaf] = row_block[shared > 0]
                    alone[test_block[home[test_leaf] != test_block]] = True
                for i in np.flatnonzero(alone):
                    rows, test = row_block == i, test_block == i
                    tree.fit(X[rows], y[rows], sample_weight=w[rows], check_input=check)
                    p[test] = tree.predict(X_test[test], check_input=check)
                pred += p
        pred = pred / trees - _LIFT * test_block
        out += [lo[i] + span[i] * pred[test_block == i] for i in range(len(chunk))]
    return out


def _probe_predictions(
    parts: list, seed: int, folds: int, trees: int = PROBE_TREES
) -> list[dict[str, np.ndarray]]:
    """Out-of-fold predictions of ``y_multimodal`` for each paired group of ``parts``."""
    # start-up time: scikit-learn loads only for the cue probe
    from sklearn.model_selection import KFold

    preds, blocks, where = [], [], []
    for g in parts:
        n = len(g)
        X = g[["y_text", "y_image"]].to_numpy()
        y = g["y_multimodal"].to_numpy()
        v = np.column_stack(
            [np.ones(n), g["stimulus"], g["y_text"], g["y_image"], g["y_multimodal"], g["baseline"]]
        )
        pred = {k: np.empty(n) for k in PROBE_MODELS}
        boot = np.random.RandomState(seed)
        for train, test in KFold(folds, shuffle=True, random_state=seed).split(X):
            blocks.append((X[train], y[train], X[test], boot))
            where.append((pred["random_forest"], test))
            q = combine(v[train].T @ v[train])
            a, wn, wo = q["alpha_text"], q["w_text_non_oracle"], q["w_text_oracle"]
            yt, yi = X[test, 0], X[test, 1]
            pred["linear"][test] = a * yt + (1 - a) * yi
            pred["bayes_non_oracle"][test] = wn * yt + (1 - wn) * yi
            cal = [_calibration(v[train, i], v[train, 1]) for i in (2, 3)]
            pred["bayes_oracle"][test] = wo * np.polyval(cal[0], yt) + (1 - wo) * np.polyval(
                cal[1], yi
            )
        preds.append(pred)
    for (target, test), p in zip(
        where, _forests(blocks, np.random.RandomState(seed), trees), strict=True
    ):
        target[test] = p
    return preds


def _calibration(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Least-squares line ``x ~ a y + c`` as ``[a, c]`` (minimum norm if ``y`` is constant)."""
    X = np.column_stack([y, np.ones(len(y))])
    return np.linalg.lstsq(X, x, rcond=None)[0]


def _probe_skip_reason(g: pd.DataFrame) -> str:
    """Why a paired group with enough trials cannot be probed ("" if it can)."""
    for col in ("y_text", "y_image", "y_multimodal"):
        if g[col].min() == g[col].max():
            return CONSTANT_REASON
    return ""


def _probe_all(trials, seed, conditions, folds, paired) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`cue_predictions` of the probed groups and the ``missing.csv`` rows of those skipped."""
    paired, _ = paired_trials(trials) if paired is None else paired
    paired = paired[paired["condition"].isin(conditions)]
    parts, skipped = [], []
    for (subject, task, condition), g in paired.groupby(list(GROUP), sort=True):
        if len(g) < 2 * folds:
            continue  # too few paired trials for the folds: left out, as always
        reason = _probe_skip_reason(g)
        if reason:
            skipped.append((subject, task, f"cue probe {condition}", reason))
        else:
            parts.append(g)
    preds = _probe_predictions(parts, seed, folds)
    frames = [
        g.assign(**{f"pred_{k}": v for k, v in p.items()})
        for g, p in zip(parts, preds, strict=True)
    ]
    cols = [*paired.columns, *(f"pred_{k}" for k in PROBE_MODELS)]
    pred = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
    return pred, pd.DataFrame(skipped, columns=["subject", "task", "component", "reason"])


def cue_predictions(
    trials: pd.DataFrame, seed: int = 0, conditions=("base",), folds: int = 5
) -> pd.DataFrame:
    """Per paired trial: ``y_multimodal`` and each combiner's out-of-fold prediction.

    ``trials`` needs a ``baseline`` column (:func:`with_baseline`).  Groups
    with fewer than ``2 * folds`` paired trials, or with a modality whose
    responses are constant (nothing to calibrate or explain; see
    :func:`cue_probe`), are left out.

    Parameters
    ----------
    trials : DataFrame
        A trial table with a ``baseline`` column.
    seed : int
        Seed of the folds and of the random forest.
    conditions : sequence of str
        The conditions probed (default ``("base",)``).
    folds : int
        Number of cross-validation folds.

    Returns
    -------
    DataFrame
        The paired-trial columns of :func:`paired_trials` plus ``pred_MODEL``
        for each of :data:`PROBE_MODELS`.
    """
    return _probe_all(trials, seed, conditions, folds, None)[0]


def _r2_table(pred: pd.DataFrame) -> pd.DataFrame:
    cols = ["subject", "task", "condition", "n", *(f"r2_{k}" for k in PROBE_MODELS)]
    rows = []
    for key, g in pred.groupby(["subject", "task", "condition"], sort=True):
        y = g["y_multimodal"].to_numpy()
        ss = ((y - y.mean()) ** 2).sum()
        row = dict(zip(["subject", "task", "condition"], key, strict=True), n=len(g))
        for k in PROBE_MODELS:
            row[f"r2_{k}"] = 1 - ((y - g[f"pred_{k}"].to_numpy()) ** 2).sum() / ss
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def cue_probe(
    trials: pd.DataFrame, seed: int = 0, conditions=("base",), folds: int = 5, paired=None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`cue_probe_table` and the ``missing.csv`` rows of the groups it left out.

    A group whose text, image or multimodal responses are constant over its
    paired trials has no R² to report (and nothing to calibrate): it gets a
    row with component ``cue probe CONDITION`` and reason ``constant responses``.
    ``paired`` is :func:`paired_trials` of ``trials`` when the caller has it.

    Parameters
    ----------
    trials : DataFrame
        A trial table with a ``baseline`` column.
    seed : int
        Seed of the folds and of the random forest.
    conditions : sequence of str
        The conditions probed (default ``("base",)``).
    folds : int
        Number of cross-validation folds; a group needs ``2 * folds`` paired trials.
    paired : tuple of DataFrame, optional
        :func:`paired_trials` of ``trials``.

    Returns
    -------
    r2 : DataFrame
        ``subject, task, condition, n, r2_MODEL`` for each of :data:`PROBE_MODELS`.
    skipped : DataFrame
        ``subject, task, component, reason`` of the groups left out for
        constant responses.
    """
    pred, skipped = _probe_all(trials, seed, conditions, folds, paired)
    return _r2_table(pred), skipped


def cue_probe_table(trials: pd.DataFrame, seed: int = 0, conditions=("base",), folds: int = 5):
    """Out-of-fold R² of predicting multimodal from unimodal responses.

    A random forest (the non-linear probe) beside the linear-regression,
    Bayes non-oracle and Bayes oracle combiners, each fitted on the training
    folds only: the paper's Figure 7 comparison.  Groups with constant
    responses are left out (:func:`cue_probe` says which).

    Parameters
    ----------
    trials : DataFrame
        A trial table with a ``baseline`` column.
    seed : int
        Seed of the folds and of the random forest.
    conditions : sequence of str
        The conditions probed (default ``("base",)``).
    folds : int
        Number of cross-validation folds.

    Returns
    -------
    DataFrame
        ``subject, task, condition, n, r2_MODEL`` for each of :data:`PROBE_MODELS`.
    """
    return cue_probe(trials, seed, conditions, folds)[0]
