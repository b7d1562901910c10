"""Perception-task analyses: accuracy against chance, problem size, covariate effects, F1, chains.

Input: trial rows with ``paradigm = "perception"`` (the runner writes them;
see :mod:`bayesobs.stimuli.perception`): ``correct`` (1/0, empty for an
invalid reply), ``valid``, ``problem_size``, ``chance``, ``gold``,
``response_value``, ``variant`` and the task's own columns.  An invalid
reply scores as wrong (the papers' rule) and is counted in ``invalid_rate``.

Tables (:func:`perception_scores`), one row per subject x task x variant x
modality x condition (``condition`` is the runner's ablation, ``base``):

``perception``
    ``n``, ``n_correct``, ``accuracy`` with its 95% Wilson interval
    (``lo``, ``hi``) and binomial ``se``, ``chance`` (the mean chance
    accuracy of the trials), ``invalid_rate``, and ``p_above_chance`` (exact
    one-sided binomial test against ``chance``).
``perception_size``
    the same by ``problem_size``.
``perception_effects``
    logistic regressions of correctness on each named covariate alone
    (``model = univariate``: ``problem_size`` and the task's ``covariates``,
    e.g. the circuits' ``distance_px`` and ``crossings``, the paper's Table
    2), and on the task's ``joint_covariates`` together (``model`` names
    them: each coefficient adjusted for the others), fitted by statsmodels:
    ``coef`` (log-odds per unit), ``se``, ``z``, Wald ``p``; ``note`` says
    why a row has none (a constant covariate, perfect separation).
``perception_f1``
    per-class precision, recall and F1 for yes/no tasks (an invalid reply is
    a prediction of neither class).
``perception_chain``
    the scavenger hunt's compounding test: accuracy per chain length ``L``
    beside the prediction ``(1 - e)^L`` from the decomposed variant's
    final-step error ``e`` (the paper's Sec. 4.2), with the prediction's
    interval from ``e``'s 95% Wilson interval and ``within`` (that interval
    and the accuracy's 95% interval overlap: both are estimates).
"""

from __future__ import annotations

import warnings
from statistics import NormalDist

import numpy as np
import pandas as pd

from .errors import BayesobsInputError
from .trials import paradigm_rows

KEYS = ["subject", "task", "variant", "modality", "condition"]
Z95 = NormalDist().inv_cdf(0.975)
ACCURACY_COLUMNS = KEYS + [
    "n",
    "n_correct",
    "accuracy",
    "lo",
    "hi",
    "se",
    "chance",
    "invalid_rate",
    "p_above_chance",
]
EFFECT_COLUMNS = KEYS + ["model", "covariate", "n", "coef", "se", "z", "p", "intercept", "note"]
F1_COLUMNS = KEYS + ["class", "support", "predicted", "precision", "recall", "f1"]
CHAIN_COLUMNS = [
    "subject",
    "task",
    "modality",
    "condition",
    "L",
    "n",
    "accuracy",
    "lo",
    "hi",
    "final_step_error",
    "final_step_n",
    "step_error",
    "predicted",
    "predicted_lo",
    "predicted_hi",
    "within",
]


def is_perception(trials: pd.DataFrame) -> pd.Series:
    """Which rows are perception trials: ``paradigm == "perception"``.

    Rows without a stated paradigm are perception trials when they hold
    ``problem_size`` and ``gold`` (a human data file in the same layout).
    """
    return paradigm_rows(trials, "perception")


def wilson(k, n, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of ``k`` successes in ``n`` trials (arrays; NaN where n = 0)."""
    k, n = np.asarray(k, float), np.asarray(n, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        den = 1 + z * z / n
        mid = (p + z * z / (2 * n)) / den
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return mid - half, mid + half


def perception_table(trials: pd.DataFrame) -> pd.DataFrame:
    """The perception rows with the keys filled in and ``hit`` (1 correct, 0 wrong or invalid)."""
    t = trials[is_perception(trials)].copy()
    if t.empty:
        raise BayesobsInputError("no perception trials (paradigm = perception)")
    for col, default in (
        ("subject", "subject"),
        ("task", "task"),
        ("variant", "all"),
        ("modality", "image"),
        ("condition", "base"),
    ):
        if col not in t.columns:
            t[col] = default
        t[col] = t[col].fillna(default).astype(str)
    correct = pd.to_numeric(t["correct"], errors="coerce")
    valid = t["valid"].astype(bool) if "valid" in t.columns else correct.notna()
    t["valid"] = valid & correct.notna()
    t["hit"] = np.where(t["valid"], correct.fillna(0), 0).astype(int)
    t["chance"] = pd.to_numeric(t["chance"], errors="coerce") if "chance" in t.columns else np.nan
    t["problem_size"] = pd.to_numeric(t["problem_size"], errors="coerce")
    return t.reset_index(drop=True)


def _accuracy(t: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    g = t.groupby(keys, sort=True, dropna=False)
    out = g.agg(
        n=("hit", "size"),
        n_correct=("hit", "sum"),
        chance=("chance", "mean"),
        n_valid=("valid", "sum"),
    ).reset_index()
    n, k = out["n"].to_numpy(float), out["n_correct"].to_numpy(float)
    out["accuracy"] = k / n
    out["lo"], out["hi"] = wilson(k, n)
    out["se"] = np.sqrt(out["accuracy"] * (1 - out["accuracy"]) / n)
    out["invalid_rate"] = 1 - out["n_valid"] / n
    from scipy.stats import binomtest  # imported here: `bayesobs fit` loads this module

    out["p_above_chance"] = [
        float(binomtest(int(kk), int(nn), float(c), alternative="greater").pvalue)
        if np.isfinite(c) and 0 < c < 1
        else np.nan
        for kk, nn, c in zip(k, n, out["chance"], strict=True)
    ]
    return out


def accuracy_table(t: pd.DataFrame) -> pd.DataFrame:
    """``perception.csv``: accuracy per subject x task x variant x modality x condition."""
    return _accuracy(t, KEYS)[ACCURACY_COLUMNS]


def size_table(t: pd.DataFrame) -> pd.DataFrame:
    """``perception_size.csv``: accuracy by problem size."""
    cols = KEYS + ["problem_size"] + ACCURACY_COLUMNS[len(KEYS) :]
    return _accuracy(t[t["problem_size"].notna()], KEYS + ["problem_size"])[cols]


def task_covariates(task: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A task's covariates for ``perception_effects``.

    Returns the univariate ones (``problem_size`` first) and the set fitted
    jointly (each adjusted for the others; may be empty).
    """
    from .stimuli import TASKS

    cls = TASKS.get(task)
    single = ("problem_size", *getattr(cls, "covariates", ()))
    return single, tuple(getattr(cls, "joint_covariates", ()))


def logistic(y: np.ndarray, x: np.ndarray) -> list[dict]:
    """Logistic regression ``logit P(y) = a + x @ b`` (statsmodels ML fit, Wald test per ``b``).

    ``x`` is ``(n,)`` or ``(n, k)``; returns one dict per column with ``n``,
    ``coef``, ``se``, ``z``, ``p``, ``intercept`` and ``note`` (why there is
    no estimate: a constant covariate, all correct, perfect separation).
    """
    import statsmodels.api as sm
    from statsmodels.tools.sm_exceptions import ConvergenceWarning, PerfectSeparationWarning

    y = np.asarray(y, float)
    x = np.asarray(x, float).reshape(len(y), -1)
    k = x.shape[1]
    ok = np.isfinite(x).all(axis=1)
    y, x = y[ok], x[ok]
    out = [
        {
            "n": len(y),
            "coef": np.nan,
            "se": np.nan,
            "z": np.nan,
            "p": np.nan,
            "intercept": np.nan,
            "note": "",
        }
        for _ in range(k)
    ]

    def refuse(note):
        for o in out:
            o["note"] = note
        return out

    if len(y) < k + 2:
        return refuse(f"fewer than {k + 2} trials")
    if (np.ptp(x, axis=0) == 0).any():
        return refuse("covariate constant")
    if y.min() == y.max():
        return refuse("all correct" if y.max() == 1 else "all wrong")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerfectSeparationWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)  # reported in ``note`` instead
        try:
            fit = sm.Logit(y, sm.add_constant(x, has_constant="add")).fit(disp=0, maxiter=100)
        except PerfectSeparationWarning:
            return refuse("perfect separation")
        except (np.linalg.LinAlgError, ValueError) as exc:
            return refuse(f"no fit: {exc}")
    note = "" if fit.mle_retvals.get("converged", True) else "did not converge"
    for j, o in enumerate(out):
        o.update(
            coef=float(fit.params[j + 1]),
            se=float(fit.bse[j + 1]),
            z=float(fit.tvalues[j + 1]),
            p=float(fit.pvalues[j + 1]),
            intercept=float(fit.params[0]),
            note=note,
        )
    return out


def effects_table(t: pd.DataFrame) -> pd.DataFrame:
    """``perception_effects.csv``: correctness on each covariate alone and on the joint set.

    ``model = univariate`` rows are the paper's Table 2 regressions; the
    joint model's rows (``model`` names its covariates) adjust each for the others.
    """
    rows = []
    for key, g in t.groupby(KEYS, sort=True):
        single, joint = task_covariates(key[1])
        y = g["hit"].to_numpy(float)
        base = dict(zip(KEYS, key, strict=True))

        def numeric(cov, g=g):
            return pd.to_numeric(g[cov], errors="coerce").to_numpy(float)

        for cov in (c for c in single if c in g.columns):
            (res,) = logistic(y, numeric(cov))
            rows.append(base | {"model": "univariate", "covariate": cov} | res)
        joint = [c for c in joint if c in g.columns]
        if len(joint) > 1:
            x = np.column_stack([numeric(c) for c in joint])
            label = " + ".join(joint)
            for cov, res in zip(joint, logistic(y, x), strict=True):
                rows.append(base | {"model": label, "covariate": cov} | res)
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def f1_table(t: pd.DataFrame) -> pd.DataFrame:
    """``perception_f1.csv``: per-class precision, recall and F1 of the yes/no tasks."""
    rows = []
    for key, g in t.groupby(KEYS, sort=True):
        gold = g["gold"].astype(str)
        if not set(gold) <= {"yes", "no"}:
            continue
        pred = g["response_value"].where(g["valid"], "invalid").astype(str)
        for cls in ("yes", "no"):
            tp = int(((pred == cls) & (gold == cls)).sum())
            support, predicted = int((gold == cls).sum()), int((pred == cls).sum())
            precision = tp / predicted if predicted else np.nan
            recall = tp / support if support else np.nan
            f1 = 2 * tp / (support + predicted) if support + predicted else np.nan
            rows.append(
                dict(zip(KEYS, key, strict=True))
                | {
                    "class": cls,
                    "support": support,
                    "predicted": predicted,
                    "precision": precision,
                    "recall": recall,
                    "f1": f1,
                }
            )
    return pd.DataFrame(rows, columns=F1_COLUMNS)


def chain_table(t: pd.DataFrame) -> pd.DataFrame:
    """``perception_chain.csv``: chain accuracy by ``L`` against ``(1 - e)^L`` (scavenger hunt)."""
    hunt = t[(t["task"] == "scavenger_hunt")]
    rows = []
    for key, g in hunt.groupby(["subject", "task", "modality", "condition"], sort=True):
        dec = g[g["variant"] == "decomposed"]
        chains = g[g["variant"] != "decomposed"]
        if chains.empty:
            continue
        e = e_lo = e_hi = np.nan
        n_final = 0
        step_error = np.nan
        if not dec.empty and "step" in dec.columns:
            step = pd.to_numeric(dec["step"], errors="coerce")
            last = pd.to_numeric(dec["n_steps"], errors="coerce")
            final = dec[step == last]
            n_final = len(final)
            if n_final:
                errors = n_final - final["hit"].sum()
                e = errors / n_final
                lo, hi = wilson(errors, n_final)
                e_lo, e_hi = float(lo), float(hi)
            step_error = 1 - dec["hit"].mean()
        for L, c in chains.groupby("problem_size", sort=True):
            n, k = len(c), int(c["hit"].sum())
            lo, hi = wilson(k, n)
            pred = (1 - e) ** L if np.isfinite(e) else np.nan
            p_lo, p_hi = ((1 - e_hi) ** L, (1 - e_lo) ** L) if np.isfinite(e) else (np.nan, np.nan)
            rows.append(
                dict(zip(["subject", "task", "modality", "condition"], key, strict=True))
                | {
                    "L": int(L),
                    "n": n,
                    "accuracy": k / n,
                    "lo": float(lo),
                    "hi": float(hi),
                    "final_step_error": e,
                    "final_step_n": n_final,
                    "step_error": step_error,
                    "predicted": pred,
                    "predicted_lo": p_lo,
                    "predicted_hi": p_hi,
                    # the prediction's interval (from e's) and the accuracy's overlap
                    "within": bool(p_lo <= hi and lo <= p_hi) if np.isfinite(pred) else None,
                }
            )
    return pd.DataFrame(rows, columns=CHAIN_COLUMNS)


def perception_scores(trials: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Every perception table of a trial table (the ``perception*`` fields of ``Scores``)."""
    t = perception_table(trials)
    return {
        "perception": accuracy_table(t),
        "perception_size": size_table(t),
        "perception_effects": effects_table(t),
        "perception_f1": f1_table(t),
        "perception_chain": chain_table(t),
        **perceptv_scores(trials),
    }


def perceptv_scores(trials: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The Percept-V tables of the ``percept_v`` rows (none if there are none).

    ``perceptv_domains``, ``perceptv_skills`` and ``perceptv_formats`` from
    :mod:`bayesobs.perceptv.score`; an invalid reply counts as wrong.
    """
    if "task" not in trials.columns:
        return {}
    t = trials[trials["task"].astype(str) == "percept_v"]
    if t.empty:
        return {}
    from .perceptv import score as pscore

    rows = pd.DataFrame(
        {
            "subject": t["subject"].astype(str).to_numpy(),
            "domain": t["domain"].astype(str).to_numpy(),
            "problem_size": t["problem_size"].astype(int).to_numpy(),
            "answer_type": t["answer_type"].astype(str).to_numpy(),
            "correct": pd.to_numeric(t["correct"], errors="coerce")
            .fillna(0)
            .astype(int)
            .to_numpy(),
            "valid": t["valid"].astype(bool).astype(int).to_numpy(),
            "chance": pd.to_numeric(t["chance"], errors="coerce").to_numpy(),
        }
    )
    domains = pscore.domain_table(rows)
    return {
        "perceptv_domains": domains,
        "perceptv_skills": pscore.skill_table(domains),
        "perceptv_formats": pscore.format_table(rows),
    }
