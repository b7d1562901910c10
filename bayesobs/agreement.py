"""Trial-level agreement of two subjects on the same trials: error consistency, paired correlations.

``bayesobs compare-trials A B`` pairs the rows of two trial tables on task,
modality, condition, session, run and trial (and ``seed`` where both record
it), then per pair of subjects and (task, modality, condition): error
consistency (Geirhos et al. 2020) on right/wrong trials; on magnitude trials the
correlation of the paired responses, of their residuals after each side's best
observer (lowest AIC), and the differences of the static observer's ``w_prior``
and of the Kalman observer's steady-state gain.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from scipy.special import expit, logit, ndtr

from .api import fit_result, predictions
from .errors import BayesobsInputError
from .fits.fitting import fit_batch
from .fits.observers.variants import VARIANTS
from .paradigms import registered
from .seeds import stable_seed
from .trials import normalize_trials

PAIR_KEYS = ("task", "modality", "condition", "session", "run", "trial")
GROUP_KEYS = ("subject_a", "subject_b", "task", "modality", "condition")
_NAMES = [v.name for v in VARIANTS]
_TRUE = {"true", "1", "1.0"}  # ``correct`` as a table holds it: bool, 0/1 or text


def pair_trials(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The paired rows of two trial tables: one row per trial both answered, per pair of subjects.

    Parameters
    ----------
    a, b : DataFrame
        Trial tables (DESIGN contract); catch trials (``catch`` true, or
        ``trial`` < 0) are left out.

    Returns
    -------
    DataFrame
        The key columns, ``subject_a``, ``subject_b`` and every other column
        of each side with the suffix ``_a`` or ``_b``.

    Raises
    ------
    BayesobsInputError
        When nothing pairs: the message names the first key whose values differ.
    """
    sides = []
    for t in (normalize_trials(a), normalize_trials(b)):
        keep = pd.to_numeric(t["trial"], errors="coerce") >= 0
        if "catch" in t.columns:
            keep &= ~t["catch"].astype(str).str.lower().isin(_TRUE)
        t = t[keep].copy()
        for k in PAIR_KEYS:
            t[k] = t[k].astype(str)
        sides.append(t)
    a, b = sides
    keys = list(PAIR_KEYS)
    if "seed" in a.columns and "seed" in b.columns:  # both record the run's seed: it must agree
        for t in (a, b):
            t["seed"] = t["seed"].astype(str)
        keys.append("seed")
    for n in range(1, len(keys) + 1):
        if a[keys[:n]].merge(b[keys[:n]].drop_duplicates(), on=keys[:n]).empty:
            k = keys[n - 1]
            raise BayesobsInputError(
                f"no trial of A pairs with one of B: their {k}s differ (A: "
                f"{', '.join(sorted(a[k].unique())[:5])}; B: {', '.join(sorted(b[k].unique())[:5])})"
                + ("" if n == 1 else f" where {', '.join(keys[: n - 1])} agree")
                + "; give both the same spec (its seed) and --trials"
            )
    paired = a.merge(b, on=keys, suffixes=("_a", "_b"))
    same = np.isclose(paired["stimulus_a"].astype(float), paired["stimulus_b"].astype(float))
    if not same.all():
        raise BayesobsInputError(
            f"{int((~same).sum())} of {len(paired)} paired trials show different stimuli in A and "
            "B: not the same sequences (give both the same spec, its seed, and --trials)"
        )
    return paired


def error_consistency(correct_a, correct_b) -> tuple[float, float, float]:
    """Geirhos et al.'s (2020) error consistency of paired right/wrong answers.

    Parameters
    ----------
    correct_a, correct_b : array of bool
        Whether each side answered each paired trial right.

    Returns
    -------
    kappa, c_obs, c_exp : float
        ``kappa = (c_obs - c_exp) / (1 - c_exp)``, with ``c_obs`` the observed
        agreement and ``c_exp = p_a p_b + (1 - p_a)(1 - p_b)``; ``kappa`` is NaN
        when ``c_exp`` is 1 (one side always right or always wrong).
    """
    x, y = np.asarray(correct_a, bool), np.asarray(correct_b, bool)
    c_obs = float(np.mean(x == y))
    p, q = x.mean(), y.mean()
    c_exp = float(p * q + (1 - p) * (1 - q))
    return ((c_obs - c_exp) / (1 - c_exp) if c_exp < 1 else np.nan), c_obs, c_exp


def _interval(values) -> tuple[float, float]:
    """The 2.5 and 97.5 percentiles of the finite bootstrap values."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    return (np.nan, np.nan) if not len(v) else tuple(np.percentile(v, [2.5, 97.5]))


def _corr(x, y) -> float:
    """Pearson r of the rows where both are finite (NaN when either is constant)."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 3 or x.std() == 0 or y.std() == 0:
        return np.nan
    return float(np.corrcoef(x, y)[0, 1])


def steady_gain(rho):
    """The Kalman filter's steady-state gain ``K = (sqrt(rho^2 + 4 rho) - rho) / 2`` (1 at rho = inf)."""
    rho = np.asarray(rho, float)
    with np.errstate(invalid="ignore"):
        k = (np.sqrt(rho**2 + 4 * rho) - rho) / 2
    return np.where(np.isinf(rho), 1.0, k)


def _residuals(rows: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Each row's residual after its cell's best variant (lowest AIC), and the cells' best fits."""
    cell, keys = ["subject", "task", "modality", "condition"], ["subject", *PAIR_KEYS]
    rows = rows.astype({"subject": str})
    once = rows.drop_duplicates(keys)  # a subject paired with several of the other side: once
    fits = fit_result(once).fits
    best = fits.loc[fits.dropna(subset=["aic"]).groupby(cell)["aic"].idxmin(), [*cell, "variant"]]
    pred = predictions(once, fits, variants=_NAMES).merge(best, how="left")
    chosen = np.full(len(pred), np.nan)
    for v in pred["variant"].dropna().unique():
        m = (pred["variant"] == v).to_numpy()
        chosen[m] = pred.loc[m, f"pred_{v}"]
    pred["residual"] = pred["response"] - chosen
    pred[keys] = pred[keys].astype(str)
    return rows[keys].merge(pred[[*keys, "residual"]], how="left")["residual"].to_numpy(), best


def _side(paired: pd.DataFrame, s: str) -> pd.DataFrame:
    """One side's trial table of the paired rows (subject, keys and its own columns)."""
    own = {c[: -len(s) - 1]: paired[c] for c in paired.columns if c.endswith(f"_{s}")}
    keys = {k: paired[k] for k in PAIR_KEYS}
    return pd.DataFrame({**keys, **own, "subject": paired[f"subject_{s}"]})


def _params(table: pd.DataFrame) -> pd.DataFrame:
    """The static observer's w_prior and the Kalman observer's steady gain, per subject of ``table``."""
    batch = fit_batch(normalize_trials(table))
    out = batch.cells[["subject"]].copy()
    out["w_prior"] = batch.params["w_prior"][:, 0, _NAMES.index("static")]
    out["gain"] = steady_gain(batch.params["rho"][:, 0, _NAMES.index("kalman")])
    return out.set_index("subject")


def _magnitude(group: pd.DataFrame, bootstrap: int, rng) -> dict:
    """r_response, r_residual, d_w_prior and d_kalman_gain of one group, with run-bootstrap intervals."""
    runs = group[["session", "run"]].drop_duplicates().to_numpy()
    ya, yb = group["response_a"].to_numpy(float), group["response_b"].to_numpy(float)
    ra, rb = group["residual_a"].to_numpy(float), group["residual_b"].to_numpy(float)
    unit = group["session"] + "\x1f" + group["run"]
    pos = {u: np.flatnonzero(unit.to_numpy() == u) for u in unit.unique()}
    reps = {"r_response": [], "r_residual": []}
    tables = {"a": [], "b": []}
    sides = {s: _side(group, s) for s in "ab"}
    for r in range(bootstrap + 1):
        draw = runs if r == 0 else runs[rng.integers(len(runs), size=len(runs))]
        idx = [pos[f"{s}\x1f{n}"] for s, n in draw]
        if r:
            i = np.concatenate(idx)
            reps["r_response"].append(_corr(ya[i], yb[i]))
            reps["r_residual"].append(_corr(ra[i], rb[i]))
        for s in "ab":
            parts = [
                sides[s].iloc[ix].assign(run=str(k), subject=f"{r}") for k, ix in enumerate(idx)
            ]
            tables[s].append(pd.concat(parts))
    est = {s: _params(pd.concat(tables[s])) for s in "ab"}
    d_w = est["a"]["w_prior"] - est["b"]["w_prior"]
    d_k = est["a"]["gain"] - est["b"]["gain"]
    out = {
        "n_runs": len(runs),
        "r_response": _corr(ya, yb),
        "r_residual": _corr(ra, rb),
        "w_prior_a": est["a"]["w_prior"].get("0"),
        "w_prior_b": est["b"]["w_prior"].get("0"),
        "d_w_prior": d_w.get("0"),
        "kalman_gain_a": est["a"]["gain"].get("0"),
        "kalman_gain_b": est["b"]["gain"].get("0"),
        "d_kalman_gain": d_k.get("0"),
    }
    for name, values in (
        *reps.items(),
        ("d_w_prior", d_w.drop("0")),
        ("d_kalman_gain", d_k.drop("0")),
    ):
        out[f"{name}_lo"], out[f"{name}_hi"] = _interval(values)
    return out


def agreement(
    a: pd.DataFrame, b: pd.DataFrame, bootstrap: int = 200, seed: int = 0
) -> pd.DataFrame:
    """Trial-level agreement of the subjects of ``a`` with those of ``b`` (``agreement.csv``).

    Intervals are 95% percentile bootstraps: over paired trials for ``kappa``,
    over paired runs (session, run) for the magnitude columns (each replicate
    refits both sides); the replicates' seeds derive from ``seed`` and the row's key.

    Parameters
    ----------
    a, b : DataFrame
        Trial tables of the same trials (:func:`pair_trials`).
    bootstrap : int, default 200
        Bootstrap replicates.
    seed : int, default 0
        Bootstrap seed.

    Returns
    -------
    DataFrame
        One row per subject pair, task, modality and condition: ``kind``
        (``right/wrong`` or ``magnitude``), ``n_pairs``; right/wrong rows
        ``kappa``, ``kappa_lo``, ``kappa_hi``, ``c_obs``, ``c_exp``; magnitude
        rows ``n_runs``, ``r_response``, ``r_residual`` (after each side's
        ``best_a``/``best_b`` variant), ``w_prior_a``, ``w_prior_b``,
        ``d_w_prior`` (a minus b), ``kalman_gain_a``, ``kalman_gain_b``,
        ``d_kalman_gain`` (steady-state gains of the ``kalman`` variant), each
        difference and r with ``_lo`` and ``_hi``.
    """
    paired = pair_trials(a, b).reset_index(drop=True)
    right_wrong = pd.Series(False, index=paired.index)
    for s in "ab":
        side = _side(paired, s)
        for paradigm in registered():
            right_wrong |= paradigm.rows(side).to_numpy()
    magnitude = paired[~right_wrong].copy()
    if len(magnitude):
        for s in "ab":
            side = _side(magnitude, s)
            magnitude[f"residual_{s}"], best = _residuals(side)
            magnitude[f"best_{s}"] = (
                side[["subject", "task", "modality", "condition"]]
                .merge(best, how="left")["variant"]
                .to_numpy()
            )
    rows = []
    for part, kind in ((paired[right_wrong], "right/wrong"), (magnitude, "magnitude")):
        for key, g in part.groupby(list(GROUP_KEYS), sort=True):
            rng = np.random.default_rng(stable_seed((seed, *key)))
            row = {**dict(zip(GROUP_KEYS, key, strict=True)), "kind": kind, "n_pairs": len(g)}
            if kind == "right/wrong":
                x, y = (
                    g[f"correct_{s}"].astype(str).str.lower().isin(_TRUE).to_numpy() for s in "ab"
                )
                row["kappa"], row["c_obs"], row["c_exp"] = error_consistency(x, y)
                draws = rng.integers(len(g), size=(bootstrap, len(g)))
                kappas = [error_consistency(x[d], y[d])[0] for d in draws]
                row["kappa_lo"], row["kappa_hi"] = _interval(kappas)
            else:
                row.update(best_a=g["best_a"].iat[0], best_b=g["best_b"].iat[0])
                row.update(_magnitude(g, bootstrap, rng))
            rows.append(row)
    return pd.DataFrame(rows)


def human_range(
    people: pd.DataFrame, models: pd.DataFrame, chains=2, warmup=500, draws=500, seed=0
) -> pd.DataFrame:
    """Whether each model's w_prior could be a new person's, under the people's hierarchical posterior.

    The people's magnitude trials are fitted with the hierarchical static
    observer (:func:`bayesobs.fits.posterior.fit_posterior`, ``hierarchical``:
    ``logit w_prior ~ Normal(mu_pop, tau_pop)`` per task, modality and
    condition); each model's w_prior is its maximum-likelihood static fit.

    Parameters
    ----------
    people, models : DataFrame
        Trial tables: the people (two or more per group) and the models.
    chains, warmup, draws : int, default 2, 500, 500
        NUTS chains, warm-up and kept draws per chain.
    seed : int, default 0
        Sampler seed.

    Returns
    -------
    DataFrame
        One row per model and group: ``w_prior``, ``n_people``, ``people``
        (their ids, ``;``-separated), ``person_lo``, ``person_hi`` (the 95%
        posterior predictive interval of a new person's w_prior), ``quantile``
        (the predictive probability that a new person's w_prior is below the
        model's), ``p_within`` (``2 min(quantile, 1 - quantile)``) and
        ``within`` (``p_within >= 0.05``).
    """
    # optional weight: JAX and NumPyro load only for the posterior fit
    from .fits.posterior import fit_posterior

    group = ["task", "modality", "condition"]
    people = normalize_trials(people).astype({"subject": str})
    counts = people.groupby(group)["subject"].nunique()
    if not (counts >= 2).any():
        raise BayesobsInputError("the people's population needs two or more people in a task")
    keep = people.set_index(group).index.isin(counts[counts >= 2].index)
    _, _, idatas, _ = fit_posterior(people[keep], ["static"], True, chains, warmup, draws, seed)
    fits = fit_result(models).fits
    rows = []
    for r in fits[fits["variant"] == "static"].to_dict("records"):
        key = (r["task"], r["modality"], r["condition"], "static")
        if key not in idatas:
            continue
        post = idatas[key].posterior
        mu, tau = (np.asarray(post[k])[..., 0].ravel() for k in ("mu_pop", "tau_pop"))
        w = json.loads(r["params"])["w_prior"]
        with np.errstate(divide="ignore"):
            q = float(np.mean(ndtr((logit(w) - mu) / tau)))
        new = expit(mu + tau * np.random.default_rng(seed).standard_normal(mu.shape))
        names = [str(s).split("/")[0] for s in post["subject"].values]
        rows.append(
            dict(zip([*group, "subject"], [*key[:3], r["subject"]], strict=True))
            | dict(w_prior=w, n_people=len(names), people=";".join(names))
            | dict(zip(("person_lo", "person_hi"), np.percentile(new, [2.5, 97.5]), strict=True))
            | dict(quantile=q, p_within=2 * min(q, 1 - q), within=2 * min(q, 1 - q) >= 0.05)
        )
    return pd.DataFrame(rows)
