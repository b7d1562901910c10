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
    (``lo``, ``hi``) and binomial ``se`` -- all per question --, ``chance``
    (the mean of the trials' own chance accuracies: 1/n for a circuit of n
    components, so E[1/n] over a task's trials), ``invalid_rate``, and
    ``p_above_chance`` (exact one-sided binomial test against ``chance``);
    ``chance_paper`` (the chance level the paper states, e.g. the circuits'
    1/7 = 1/E[n] for n uniform on 4..10, NaN for tasks it does not cover)
    and ``p_above_chance_paper`` (the same test against it: what a
    comparison with the paper uses).  Multi-step sequences (the decomposed
    scavenger hunt; rows with ``step`` and ``n_steps``) add the paper's
    Table 1 metrics (:func:`sequence_table`): ``sequence_n``,
    ``sequence_correct``, ``sequence_accuracy`` (every step right) with
    ``sequence_lo``/``sequence_hi``, ``sequence_chance`` (the product of
    the steps' chances), ``sequence_p_above_chance`` and
    ``sequence_final_accuracy`` (final answer the gold path's colour);
    ``final_step_error`` (wrong final steps among the sequences whose
    earlier steps are all right) with ``final_step_n`` and its interval.
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
    beside predictions from the decomposed variant's final-step error ``e``
    (conditional on reaching the final step, as the paper's Table 1):
    ``predicted`` is the paper's ``(1 - e)^L`` (Sec. 4.2: 0.94^3 = 83%);
    ``predicted_guess`` adds guessing, :func:`chain_prediction` with the
    step skill ``s = (1 - e - g) / (1 - g)`` of :func:`skill_from_accuracy`
    and ``g`` the chain trials' chance (1/11): ``s^L + (1 - s^L) g``.  Each
    has an interval from ``e``'s 95% Wilson interval; ``within`` says the
    guessing prediction's interval and the accuracy's 95% interval overlap
    (``within_plain`` the same for ``(1 - e)^L``, which flags a random
    answerer).  See docs/method.md, "Tunnel Vision metrics".
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..errors import BayesobsInputError
from ..intervals import wilson
from ..trials import paradigm_rows

KEYS = ["subject", "task", "variant", "modality", "condition"]
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
    "chance_paper",
    "p_above_chance_paper",
    "sequence_n",
    "sequence_correct",
    "sequence_accuracy",
    "sequence_lo",
    "sequence_hi",
    "sequence_chance",
    "sequence_p_above_chance",
    "sequence_final_accuracy",
    "final_step_error",
    "final_step_lo",
    "final_step_hi",
    "final_step_n",
]
SEQUENCE_COLUMNS = KEYS + ACCURACY_COLUMNS[ACCURACY_COLUMNS.index("sequence_n") :]
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
    "guess",
    "step_skill",
    "predicted_guess",
    "predicted_guess_lo",
    "predicted_guess_hi",
    "within",
    "within_plain",
]


def is_perception(trials: pd.DataFrame) -> pd.Series:
    """Which rows are perception trials: ``paradigm == "perception"``.

    Rows without a stated paradigm are perception trials when they hold
    ``problem_size`` and ``gold`` (a human data file in the same layout).

    Parameters
    ----------
    trials : DataFrame
        A trial table.

    Returns
    -------
    pandas.Series
        One bool per row (the table's index).
    """
    return paradigm_rows(trials, "perception")


def perception_table(trials: pd.DataFrame) -> pd.DataFrame:
    """The perception rows with the keys filled in and ``hit`` (1 correct, 0 wrong or invalid).

    Parameters
    ----------
    trials : DataFrame
        A trial table; only its perception rows (:func:`is_perception`) are kept.

    Returns
    -------
    DataFrame
        A copy of the perception rows with ``subject``, ``task``, ``variant``
        (default ``all``), ``modality`` (default ``image``) and ``condition``
        (default ``base``) as text, ``valid`` (a valid reply with a
        ``correct`` value), ``hit``, and ``chance`` and ``problem_size`` as
        numbers (NaN where absent; ``chance`` 0 on a decomposed step that
        has no right answer).

    Raises
    ------
    BayesobsInputError
        When there is no perception trial.
    """
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
    # a decomposed step with no right answer (from an off-grid answer, or not asked): chance 0
    # (logs written before issue 49 said 1/33 or 1/11 there)
    start = t.get("step_start_from", pd.Series(None, index=t.index))
    nogo = t.get("not_asked", pd.Series(False, index=t.index)).fillna(False).astype(bool)
    gold = t.get("gold", pd.Series("", index=t.index))
    t.loc[nogo | ((start == "answer") & gold.isna()), "chance"] = 0.0
    t["problem_size"] = pd.to_numeric(t["problem_size"], errors="coerce")
    return t.reset_index(drop=True)


def above_chance(k, n, chance) -> list[float]:
    """Exact one-sided binomial p-values of ``k`` of ``n`` right against ``chance`` (NaN without one).

    Parameters
    ----------
    k : iterable of int
        Right answers per group.
    n : iterable of int
        Trials per group.
    chance : iterable of float
        Each group's chance accuracy; a group's p-value is NaN unless it is
        strictly between 0 and 1 (and ``n > 0``).

    Returns
    -------
    list of float
        One p-value per group.
    """
    from scipy.stats import binomtest  # imported here: `bayesobs fit` loads this module

    return [
        float(binomtest(int(kk), int(nn), float(c), alternative="greater").pvalue)
        if np.isfinite(c) and 0 < c < 1 and nn > 0
        else np.nan
        for kk, nn, c in zip(k, n, chance, strict=True)
    ]


def paper_chance(task: str, variant: str) -> float:
    """The chance accuracy (fraction) a paper states for a task variant, NaN if none.

    Tunnel Vision (:func:`bayesobs.tunnel.published.chance`): 0.5, 1/11 and,
    for circuits, 1/7 -- one over the mean number of components (4..10),
    not the mean of 1/n that a random guesser among the components shown
    achieves (E[1/n] = 0.1565 for n uniform on 4..10; see :func:`mean_inverse`).

    Parameters
    ----------
    task : str
        The task.
    variant : str
        Its variant.

    Returns
    -------
    float
        The chance accuracy as a fraction; NaN for a task or variant the
        published references do not cover.
    """
    # start-up time: `bayesobs fit` loads this module; Tunnel Vision loads only here
    from ..tunnel.published import REFERENCES

    # start-up time: `bayesobs fit` loads this module; Tunnel Vision loads only here
    from ..tunnel.published import chance as published_chance

    if task not in {r.task for r in REFERENCES}:
        return np.nan
    try:
        return published_chance(task, variant) / 100
    except ValueError:
        return np.nan


def mean_inverse(low: int, high: int) -> float:
    """``E[1/n]`` for ``n`` uniform on ``low..high``: a random guesser's chance among n options.

    Parameters
    ----------
    low, high : int
        The smallest and largest number of options (inclusive).

    Returns
    -------
    float
        The mean of ``1/n`` over ``n = low..high``.
    """
    return float(np.mean(1 / np.arange(low, high + 1)))


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
    out["p_above_chance"] = above_chance(k, n, out["chance"])
    out["chance_paper"] = [
        paper_chance(str(a), str(b)) for a, b in zip(out["task"], out["variant"], strict=True)
    ]
    out["p_above_chance_paper"] = above_chance(k, n, out["chance_paper"])
    return out


def accuracy_table(t: pd.DataFrame) -> pd.DataFrame:
    """``perception.csv``: accuracy per subject x task x variant x modality x condition.

    Per question, with the per-sequence metrics of :func:`sequence_table`
    beside it where the trials form sequences (NaN elsewhere).

    Parameters
    ----------
    t : DataFrame
        :func:`perception_table` rows.

    Returns
    -------
    DataFrame
        The :data:`ACCURACY_COLUMNS`, one row per group.
    """
    acc = _accuracy(t, KEYS)
    seq = sequence_table(t)
    out = acc.merge(seq, on=KEYS, how="left") if len(seq) else acc
    return out.reindex(columns=ACCURACY_COLUMNS)


def sequences(t: pd.DataFrame) -> pd.DataFrame:
    """One row per multi-step sequence (rows with ``step`` and ``n_steps``, e.g. the decomposed hunt).

    A sequence is the rows of one generated trial (``trial_seed``) in one
    session run (``session``, ``run`` where present).  Columns: the keys,
    ``steps`` (rows seen), ``n_steps``, ``complete`` (every step logged),
    ``all_right`` (every step right: the paper's Table 1 accuracy),
    ``reached_final`` (every step before the last right), ``final_right``
    (the final step right from where it started), ``final_on_path`` (the
    final answer is the gold path's: ``path_answer``, else ``gold``, whatever
    path led there) and ``chance`` (the product of the steps' chances).  An unreadable or
    unasked step counts as wrong.

    Parameters
    ----------
    t : DataFrame
        :func:`perception_table` rows.

    Returns
    -------
    DataFrame
        The keys and the columns above; empty (with them) without sequence rows.
    """
    cols = [
        "steps",
        "n_steps",
        "complete",
        "all_right",
        "reached_final",
        "final_right",
        "final_on_path",
        "chance",
    ]
    if not {"step", "n_steps"} <= set(t.columns):
        return pd.DataFrame(columns=KEYS + cols)
    step = pd.to_numeric(t["step"], errors="coerce")
    last = pd.to_numeric(t["n_steps"], errors="coerce")
    ok = step.notna() & last.notna() & (last > 1)
    d = t[ok].assign(_step=step[ok].astype(int), _last=last[ok].astype(int))
    if d.empty:
        return pd.DataFrame(columns=KEYS + cols)
    ids = [c for c in ("session", "run", "trial_seed") if c in d.columns]
    d[ids] = d[ids].astype(str)
    rows = []
    for key, g in d.groupby(KEYS + ids, sort=True, dropna=False):
        n_steps = int(g["_last"].max())
        hit = dict(zip(g["_step"], g["hit"], strict=False))
        complete = sorted(hit) == list(range(1, n_steps + 1)) and len(g) == n_steps
        before = all(hit.get(k, 0) == 1 for k in range(1, n_steps))
        final = g[g["_step"] == n_steps]
        path = final["path_answer"] if "path_answer" in final.columns else final["gold"]
        on_path = bool(
            len(final)
            and final["valid"].iloc[0]
            and str(final["response_value"].iloc[0]) == str(path.iloc[0])
        )
        rows.append(
            dict(zip(KEYS, key[: len(KEYS)], strict=True))
            | {
                "steps": len(g),
                "n_steps": n_steps,
                "complete": complete,
                "all_right": complete and before and hit.get(n_steps, 0) == 1,
                "reached_final": complete and before,
                "final_right": hit.get(n_steps, 0) == 1,
                "final_on_path": complete and on_path,
                "chance": float(np.prod(g["chance"].to_numpy(float))),
            }
        )
    return pd.DataFrame(rows, columns=KEYS + cols)


def sequence_table(t: pd.DataFrame) -> pd.DataFrame:
    """Per-sequence accuracy and the conditional final-step error, per subject x task x variant ...

    The paper's Table 1 (decomposed scavenger hunt): ``sequence_accuracy``
    is the share of complete sequences with every step right;
    ``final_step_error`` the share of wrong final steps among the sequences
    whose earlier steps are all right (``final_step_n`` of them), each with
    a 95% Wilson interval; ``sequence_final_accuracy`` the share whose final
    answer is the gold path's colour by any path (Table 1's weaker rows,
    e.g. 24% accuracy with an 85% final-step error, are only possible
    under this reading: docs/method.md).  Incomplete sequences (a run stopped part way)
    are left out.  Columns: :data:`SEQUENCE_COLUMNS`.

    Parameters
    ----------
    t : DataFrame
        :func:`perception_table` rows.

    Returns
    -------
    DataFrame
        One row per group with complete sequences; empty without them.
    """
    seq = sequences(t)
    seq = seq[seq["complete"].astype(bool)]
    if seq.empty:
        return pd.DataFrame(columns=SEQUENCE_COLUMNS)
    g = seq.groupby(KEYS, sort=True)
    out = g.agg(
        sequence_n=("all_right", "size"),
        sequence_correct=("all_right", "sum"),
        sequence_chance=("chance", "mean"),
        final_step_n=("reached_final", "sum"),
        sequence_final_accuracy=("final_on_path", "mean"),
    ).reset_index()
    reached = seq[seq["reached_final"].astype(bool)]
    reached = reached.assign(_wrong=~reached["final_right"].astype(bool))
    wrong = reached.groupby(KEYS, sort=True)["_wrong"].sum().rename("_errors").reset_index()
    out = out.merge(wrong, on=KEYS, how="left")
    errors = out["_errors"].fillna(0).to_numpy(float)
    n, k = out["sequence_n"].to_numpy(float), out["sequence_correct"].to_numpy(float)
    m = out["final_step_n"].to_numpy(float)
    out["sequence_correct"] = k.astype(int)
    out["final_step_n"] = m.astype(int)
    out["sequence_accuracy"] = k / n
    out["sequence_lo"], out["sequence_hi"] = wilson(k, n)
    out["sequence_p_above_chance"] = above_chance(k, n, out["sequence_chance"])
    with np.errstate(invalid="ignore", divide="ignore"):
        out["final_step_error"] = np.where(m > 0, errors / m, np.nan)
    out["final_step_lo"], out["final_step_hi"] = wilson(errors, m)
    return out[SEQUENCE_COLUMNS]


def skill_from_accuracy(accuracy, guess):
    """Step skill ``s`` from a step's accuracy ``a = s + (1 - s) g``: ``(a - g) / (1 - g)`` in [0, 1].

    A step is done right by skill with probability ``s``; otherwise the
    answer is a guess, right with probability ``g`` (1/11 for a colour).

    Parameters
    ----------
    accuracy : array_like
        The step's accuracy ``a``.
    guess : array_like
        The guess rate ``g`` (below 1).

    Returns
    -------
    numpy.ndarray
        The skill, clipped to [0, 1].
    """
    a, g = np.asarray(accuracy, float), np.asarray(guess, float)
    return np.clip((a - g) / (1 - g), 0.0, 1.0)


def chain_prediction(skill, length, guess):
    """Accuracy of an ``L``-step chain: ``s^L + (1 - s^L) g``.

    Right by skill at every step (``s^L``), or a guess right by chance
    after the chain broke (``g``).  ``g = 0`` gives the paper's ``s^L``.

    Parameters
    ----------
    skill : array_like
        The step skill ``s``.
    length : array_like
        The chain length ``L``.
    guess : array_like
        The guess rate ``g``.

    Returns
    -------
    numpy.ndarray
        The predicted accuracy (the arguments broadcast).
    """
    sl = np.asarray(skill, float) ** np.asarray(length, float)
    return sl + (1 - sl) * np.asarray(guess, float)


def size_table(t: pd.DataFrame) -> pd.DataFrame:
    """``perception_size.csv``: accuracy by problem size.

    Parameters
    ----------
    t : DataFrame
        :func:`perception_table` rows; those without ``problem_size`` are left out.

    Returns
    -------
    DataFrame
        The keys, ``problem_size`` and the per-question accuracy columns of
        :data:`ACCURACY_COLUMNS` (``n`` to ``p_above_chance_paper``).
    """
    cols = (
        KEYS + ["problem_size"] + ACCURACY_COLUMNS[len(KEYS) : ACCURACY_COLUMNS.index("sequence_n")]
    )
    return _accuracy(t[t["problem_size"].notna()], KEYS + ["problem_size"])[cols]


def task_covariates(task: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A task's covariates for ``perception_effects``.

    Parameters
    ----------
    task : str
        The task's name in :data:`bayesobs.stimuli.TASKS`; an unknown task has
        ``problem_size`` alone.

    Returns
    -------
    single : tuple of str
        The covariates fitted one at a time, ``problem_size`` first.
    joint : tuple of str
        The set fitted jointly (each adjusted for the others; may be empty).
    """
    # start-up time: `bayesobs fit` loads this module; the stimuli load only here
    from ..stimuli import TASKS

    cls = TASKS.get(task)
    single = ("problem_size", *getattr(cls, "covariates", ()))
    return single, tuple(getattr(cls, "joint_covariates", ()))


def logistic(y: np.ndarray, x: np.ndarray) -> list[dict]:
    """Logistic regression ``logit P(y) = a + x @ b`` (statsmodels ML fit, Wald test per ``b``).

    Parameters
    ----------
    y : numpy.ndarray
        The outcome, 0 or 1.
    x : numpy.ndarray
        The covariates, ``(n,)`` or ``(n, k)``; rows with a non-finite value
        are left out.

    Returns
    -------
    list of dict
        One dict per column of ``x`` with ``n``, ``coef``, ``se``, ``z``,
        ``p``, ``intercept`` and ``note`` (why there is no estimate: fewer than
        ``k + 2`` trials, a constant covariate, all correct or all wrong,
        perfect separation, a failed fit; or "did not converge").
    """
    import statsmodels.api as sm  # start-up time: statsmodels loads only for its regressions

    # start-up time: statsmodels loads only for its regressions
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

    Parameters
    ----------
    t : DataFrame
        :func:`perception_table` rows.

    Returns
    -------
    DataFrame
        The :data:`EFFECT_COLUMNS`, one row per group, model and covariate
        present in the trials.
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
    """``perception_f1.csv``: per-class precision, recall and F1 of the yes/no tasks.

    Parameters
    ----------
    t : DataFrame
        :func:`perception_table` rows; groups whose ``gold`` is not all
        ``yes``/``no`` are skipped.

    Returns
    -------
    DataFrame
        The :data:`F1_COLUMNS`, one row per group and class; precision,
        recall and F1 are NaN where their denominator is 0.
    """
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
    """``perception_chain.csv``: chain accuracy by ``L`` against the compounding predictions.

    ``e`` is the decomposed variant's final-step error conditional on the
    first steps being right (:func:`sequence_table`); ``step_error`` the
    error over all its questions.  ``predicted`` = ``(1 - e)^L`` (the
    paper's), ``predicted_guess`` = :func:`chain_prediction` of the skill
    :func:`skill_from_accuracy` ``(1 - e, g)``, ``g`` (``guess``) the chain
    trials' mean chance.  Intervals map ``e``'s 95% Wilson interval;
    ``within`` / ``within_plain``: the prediction's interval overlaps the
    accuracy's.

    Parameters
    ----------
    t : DataFrame
        :func:`perception_table` rows; only ``scavenger_hunt`` is read.

    Returns
    -------
    DataFrame
        The :data:`CHAIN_COLUMNS`, one row per subject, task, modality,
        condition and chain length; the predictions are NaN without a
        decomposed final-step error.
    """
    hunt = t[(t["task"] == "scavenger_hunt")]
    keys = ["subject", "task", "modality", "condition"]
    finals = sequence_table(hunt[hunt["variant"] == "decomposed"])
    rows = []
    for key, g in hunt.groupby(keys, sort=True):
        dec = g[g["variant"] == "decomposed"]
        chains = g[g["variant"] != "decomposed"]
        if chains.empty:
            continue
        e = e_lo = e_hi = np.nan
        n_final = 0
        step_error = 1 - dec["hit"].mean() if not dec.empty else np.nan
        f = finals[(finals[keys] == pd.Series(key, index=keys)).all(axis=1)]
        if len(f) and int(f["final_step_n"].iloc[0]) > 0:
            n_final = int(f["final_step_n"].iloc[0])
            e = float(f["final_step_error"].iloc[0])
            e_lo, e_hi = float(f["final_step_lo"].iloc[0]), float(f["final_step_hi"].iloc[0])
        for L, c in chains.groupby("problem_size", sort=True):
            n, k = len(c), int(c["hit"].sum())
            lo, hi = wilson(k, n)
            guess = float(c["chance"].mean())
            if np.isfinite(e):
                pred, p_lo, p_hi = (1 - e) ** L, (1 - e_hi) ** L, (1 - e_lo) ** L
                skill = float(skill_from_accuracy(1 - e, guess))
                g_pred, g_lo, g_hi = (
                    float(chain_prediction(skill_from_accuracy(1 - x, guess), L, guess))
                    for x in (e, e_hi, e_lo)
                )
            else:
                pred = p_lo = p_hi = skill = g_pred = g_lo = g_hi = np.nan
            rows.append(
                dict(zip(keys, key, strict=True))
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
                    "guess": guess,
                    "step_skill": skill,
                    "predicted_guess": g_pred,
                    "predicted_guess_lo": g_lo,
                    "predicted_guess_hi": g_hi,
                    # the prediction's interval (from e's) and the accuracy's overlap
                    "within": bool(g_lo <= hi and lo <= g_hi) if np.isfinite(g_pred) else None,
                    "within_plain": bool(p_lo <= hi and lo <= p_hi) if np.isfinite(pred) else None,
                }
            )
    return pd.DataFrame(rows, columns=CHAIN_COLUMNS)


def perception_scores(trials: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Every perception table of a trial table (the ``perception*`` fields of ``Scores``).

    Parameters
    ----------
    trials : DataFrame
        A trial table with perception trials.

    Returns
    -------
    dict of str to DataFrame
        ``perception``, ``perception_size``, ``perception_effects``,
        ``perception_f1`` and ``perception_chain`` (Percept-V's own tables:
        :func:`bayesobs.perceptv.score.perceptv_scores`).

    Raises
    ------
    BayesobsInputError
        When there is no perception trial.
    """
    t = perception_table(trials)
    return {
        "perception": accuracy_table(t),
        "perception_size": size_table(t),
        "perception_effects": effects_table(t),
        "perception_f1": f1_table(t),
        "perception_chain": chain_table(t),
    }
