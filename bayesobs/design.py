"""Design before you pay: model recovery and power of a protocol (``bayesobs design``).

Every observer variant of METHOD §2, and the anchoring control of §12, is
simulated through the session structure of a spec or protocol (its tasks,
session ranges, trials per run, runs per session type) and fitted exactly as
``bayesobs fit`` fits real data: all replicates, variants and trial counts are
one trial table (the replicate is encoded in ``subject``), fitted by one call
of :func:`bayesobs.fits.fitting.fit_batch`.  The outputs answer, before any model
is paid for:

* ``confusion``: how often each true variant is the best by AIC (the ten
  variants and the two anchoring controls compete);
* ``calibration`` and ``factors``: what the factor evidence ``P(f)`` of
  METHOD §3 reads when ``f`` is truly present or absent, per true variant;
* ``recovery``: bias and spread of ``w_prior``, ``log rho`` and ``g``;
* ``power``: for true shifts of ``w_prior`` under each ablation, how often
  the paper's ``s_a`` (§5) and the ``s_p`` of §9 have the right sign;
* ``summary``: one row per trial count ("how many trials do I need").

Simulated parameters (drawn independently for every replicate; ``c`` and
``s`` are the midpoint and width of the task's whole stimulus range, in log
space for the log variants, ``W`` the mean session width):

* ``linear``: ``w ~ U(0.6, 0.9)``, ``b = (1 - w) c + U(-0.05, 0.05) s``;
* ``static``: ``w_prior ~ U(0.2, 0.6)``;
* ``kalman``: ``log rho ~ U(log 0.05, log 1)``;
* ``*_gain``: ``g ~ U(0.6, 0.85)``, ``delta = (1 - g) c + U(-0.05, 0.05) s``;
* ``anchor``: ``a ~ U(0.2, 0.6)``;
* noise: ``sigma = noise * W`` (identity), ``sigma = noise * mean(width / midpoint)``
  of the sessions (log variants): the same relative noise on either scale.

Stimuli follow each session's distribution (uniform in its range unless the
spec sets ``distribution``); a ``missing`` fraction
of responses is set to NaN at random (they stay in the sequence, METHOD §2).
The BCS power simulates a static observer (``w_prior ~ U(0.2, 0.6)`` in the
base condition, ``w_prior + shift`` clipped to [0, 1] under the ablation, the
same noise in every modality) and reads ``w_prior`` with ``bootstrap``
session-run replicates, as ``bayesobs score`` does.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import BayesobsInputError
from .fits.controls import fit_controls, simulate_anchor
from .fits.fitting import fit_batch
from .fits.kernel import closed_forms, gram_stats, transformed
from .fits.observers import simulate
from .fits.observers.variants import FACTORS, VARIANT_NAMES, VARIANTS
from .fits.runtable import build_runs, dataset_matrix
from .limits import check
from .plotting import figure_axes
from .run.plan import load_protocol, whole_number
from .run.prices import Prices, load_prices
from .run.runner import costs, estimate, plan_all
from .scores.bcs import BCS_ABLATIONS, TIE, sign_probability, sign_score
from .scores.evidence import factor_evidence_array
from .stimuli.distributions import draw_values
from .trials import normalize_trials, write_csv

DEFAULT_SHIFTS = (0.0, 0.05, 0.1, 0.2)
DEFAULT_NOISE = 0.1
CONTROL_NAMES = ("anchor", "anchor_log")
CANDIDATES = VARIANT_NAMES + CONTROL_NAMES
TRUE_MODELS = VARIANT_NAMES + ("anchor",)
# the floor of P(bayesian) for a linear observer: static_gain nests linear with one more parameter
BAYESIAN_FLOOR = float(np.exp(-1.0) / (1.0 + np.exp(-1.0)))
_SEP = "|"


def _structure(spec_or_protocol, trials, runs) -> list[dict]:
    """Tasks with their sessions ``[(name, low, high)]``, trial counts, runs and BCS ablations."""
    out = []
    for exp in load_protocol(spec_or_protocol):
        spec = exp["spec"]
        t_list = [whole_number(t, "--trials") for t in trials] if trials else [int(spec["trials"])]
        n_runs = whole_number(runs, "--runs") if runs is not None else int(spec.get("runs", 1))
        mods = set(spec.get("modalities", []))
        ablations = [
            c
            for c in spec.get("conditions", ["base"])
            if c in BCS_ABLATIONS and BCS_ABLATIONS[c] in mods
        ]
        out.append(
            {
                "task": spec["task"],
                "sessions": [(s["name"], *map(float, s["range"])) for s in spec["sessions"]],
                "options": [{**spec.get("options", {}), **s} for s in spec["sessions"]],
                "trials": t_list,
                "runs": n_runs,
                "ablations": ablations,
            }
        )
    return out


def _draw_params(name: str, rng, c: float, s: float, c_log: float, s_log: float, sd, sd_log):
    """Parameters of one simulated observer (see the module docstring)."""
    if name == "anchor":
        return {"a": rng.uniform(0.2, 0.6), "sigma": sd}
    v = VARIANTS[VARIANT_NAMES.index(name)]
    centre, width = (c_log, s_log) if v.log else (c, s)
    p: dict[str, float] = {"sigma": sd_log if v.log else sd}
    if v.family == "linear":
        p["w"] = rng.uniform(0.6, 0.9)
        p["b"] = (1 - p["w"]) * centre + rng.uniform(-0.05, 0.05) * width
    elif v.family == "static":
        p["w_prior"] = rng.uniform(0.2, 0.6)
    else:
        p["rho"] = float(np.exp(rng.uniform(np.log(0.05), 0.0)))
    if v.gain:
        p["g"] = rng.uniform(0.6, 0.85)
        p["delta"] = (1 - p["g"]) * centre + rng.uniform(-0.05, 0.05) * width
    return p


def _stimuli(sessions, T: int, n_runs: int, rng, options=None):
    """Stimuli, session names and run labels of one simulated cell."""
    x, sess, run = [], [], []
    options = options or [{}] * len(sessions)
    for (name, lo, hi), opt in zip(sessions, options, strict=True):
        for r in range(n_runs):
            uniform = opt.get("distribution", "uniform") == "uniform"
            x.append(rng.uniform(lo, hi, T) if uniform else draw_values(rng, lo, hi, T, opt))
            sess += [name] * T
            run += [r] * T
    return np.concatenate(x), np.array(sess, dtype=object), np.repeat(np.arange(len(run) // T), T)


def simulate_design(
    structure: list[dict], reps: int, noise: float, missing: float, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One trial table of every (task, trial count, true model, replicate), and the truths.

    Parameters
    ----------
    structure : list of dict
        Tasks as :func:`design` reads them from a spec or protocol: ``task``,
        ``sessions`` (``[(name, low, high)]``), ``options`` (one dict per
        session), ``trials`` (trial counts per run), ``runs`` (runs per session).
    reps : int
        Replicates per (task, trial count, true model).
    noise : float
        Response noise as a fraction of the mean session width (see the module docstring).
    missing : float
        Fraction of responses set to NaN at random, in [0, 1).
    seed : int
        Seed of the simulation.

    Returns
    -------
    trials : DataFrame
        The trial table (``subject`` is ``MODEL|T<count>|r<rep>``, modality
        ``text``, condition ``base``).
    truth : DataFrame
        One row per simulated subject: ``subject``, ``task``, ``trials``,
        ``true`` (the true model), ``rep`` and ``true_<param>`` per drawn parameter.
    """
    rng = np.random.default_rng(seed)
    frames, truth = [], []
    for exp in structure:
        sessions = exp["sessions"]
        lows = np.array([s[1] for s in sessions])
        highs = np.array([s[2] for s in sessions])
        c, s = (lows.min() + highs.max()) / 2, highs.max() - lows.min()
        c_log = (np.log(lows.min()) + np.log(highs.max())) / 2 if lows.min() > 0 else np.log(c)
        s_log = np.log(highs.max()) - np.log(lows.min()) if lows.min() > 0 else 1.0
        sd = noise * float(np.mean(highs - lows))
        sd_log = noise * float(np.mean((highs - lows) / ((highs + lows) / 2)))
        for T in exp["trials"]:
            for name in TRUE_MODELS:
                for rep in range(reps):
                    x, sess, run = _stimuli(sessions, T, exp["runs"], rng, exp["options"])
                    p = _draw_params(name, rng, c, s, c_log, s_log, sd, sd_log)
                    if name == "anchor":
                        y = simulate_anchor(p["a"], p["sigma"], x, run, rng=rng)
                    else:
                        y = simulate(name, p, x, run, rng=rng)
                    if missing > 0:
                        y = np.where(rng.uniform(size=len(y)) < missing, np.nan, y)
                    subject = _SEP.join((name, f"T{T}", f"r{rep}"))
                    frames.append(
                        pd.DataFrame(
                            {
                                "subject": subject,
                                "task": exp["task"],
                                "session": sess,
                                "run": run % exp["runs"],
                                "trial": np.tile(np.arange(T), len(x) // T),
                                "stimulus": x,
                                "response": y,
                            }
                        )
                    )
                    truth.append(
                        {
                            "subject": subject,
                            "task": exp["task"],
                            "trials": T,
                            "true": name,
                            "rep": rep,
                            **{f"true_{k}": v for k, v in p.items()},
                        }
                    )
    trials = pd.concat(frames, ignore_index=True)
    trials["modality"] = "text"
    trials["condition"] = "base"
    return trials, pd.DataFrame(truth)


def _confusion(best: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (task, T), g in best.groupby(["task", "trials"], sort=True):
        rows.append(_confusion_rows(g, task, T))
    for T, g in best.groupby("trials", sort=True):
        rows.append(_confusion_rows(g, "all", T))
    return pd.concat(rows, ignore_index=True)


def _confusion_rows(g: pd.DataFrame, task: str, T: int) -> pd.DataFrame:
    counts = pd.crosstab(g["true"], g["best"]).reindex(
        index=list(TRUE_MODELS), columns=list(CANDIDATES), fill_value=0
    )
    counts = counts.fillna(0)
    n = counts.sum(axis=1).to_numpy()
    long = counts.stack().rename("count").reset_index()
    long.columns = ["true", "best", "count"]
    long["rate"] = long["count"] / np.repeat(np.where(n > 0, n, 1), len(CANDIDATES))
    long.insert(0, "trials", T)
    long.insert(0, "task", task)
    return long


def _static_w_prior(trials: pd.DataFrame, B: int, seed: int):
    """``w_prior`` of ``static`` for every cell and bootstrap replicate: the engine's closed form."""
    cells, runs = build_runs(trials)
    W = dataset_matrix(trials, cells, runs, B, seed)
    z, u, obs, _, _ = transformed(runs, cells, False)
    Gd = np.asarray(W @ gram_stats(z, u, runs.present, obs))
    w = closed_forms(Gd)["static"][1]["w_prior"].reshape(len(cells), 1 + B)
    w[cells["constant"].to_numpy(bool)] = np.nan
    return cells, w


def simulate_power(
    structure: list[dict], reps: int, shifts, noise: float, missing: float, seed: int
) -> pd.DataFrame:
    """Trial table of the BCS power simulation: one (base, ablation) pair per replicate.

    Parameters
    ----------
    structure : list of dict
        Tasks as in :func:`simulate_design`, with ``ablations`` (the BCS
        ablations the spec runs in a modality it has).
    reps : int
        Replicates per (task, trial count, ablation, shift).
    shifts : iterable of float
        True shifts of ``w_prior`` under the ablation.
    noise : float
        Response noise as a fraction of the mean session width.
    missing : float
        Fraction of responses set to NaN at random, in [0, 1).
    seed : int
        Seed of the simulation (``seed + 1`` is used, apart from :func:`simulate_design`).

    Returns
    -------
    DataFrame
        Trial table of static observers (``subject`` is
        ``ABLATION|T<count>|d<shift>|r<rep>``) with extra columns ``shift``
        and ``trials``; empty when no task has an ablation.
    """
    rng = np.random.default_rng(seed + 1)
    frames = []
    for exp in structure:
        sessions = exp["sessions"]
        sd = noise * float(np.mean([hi - lo for _, lo, hi in sessions]))
        for T in exp["trials"]:
            for ablation in exp["ablations"]:
                for shift in shifts:
                    for rep in range(reps):
                        w0 = rng.uniform(0.2, 0.6)
                        subject = _SEP.join((ablation, f"T{T}", f"d{shift:g}", f"r{rep}"))
                        for cond, w in (("base", w0), (ablation, float(np.clip(w0 + shift, 0, 1)))):
                            x, sess, run = _stimuli(sessions, T, exp["runs"], rng, exp["options"])
                            y = simulate("static", {"w_prior": w, "sigma": sd}, x, run, rng=rng)
                            if missing > 0:
                                y = np.where(rng.uniform(size=len(y)) < missing, np.nan, y)
                            frames.append(
                                pd.DataFrame(
                                    {
                                        "subject": subject,
                                        "task": exp["task"],
                                        "modality": BCS_ABLATIONS.get(ablation, "text"),
                                        "condition": cond,
                                        "session": sess,
                                        "run": run % exp["runs"],
                                        "trial": np.tile(np.arange(T), len(x) // T),
                                        "stimulus": x,
                                        "response": y,
                                        "shift": shift,
                                        "trials": T,
                                    }
                                )
                            )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _power(trials: pd.DataFrame, bootstrap: int, seed: int) -> pd.DataFrame:

    cols = [
        "task",
        "trials",
        "ablation",
        "shift",
        "n",
        "right_s",
        "right_s_p",
        "mean_s",
        "mean_s_p",
    ]
    if trials.empty:
        return pd.DataFrame(columns=cols)
    meta = trials[["subject", "shift", "trials"]].drop_duplicates("subject").set_index("subject")
    cells, w = _static_w_prior(normalize_trials(trials), bootstrap, seed)
    base = cells[cells["condition"] == "base"].reset_index()
    abl = cells[cells["condition"] != "base"].reset_index()
    pair = abl.merge(base, on=["subject", "task"], suffixes=("", "_base"))
    wb, wa = w[pair["index_base"].to_numpy()], w[pair["index"].to_numpy()]
    s = sign_score(wb[:, 0], wa[:, 0])
    s_p = sign_probability(wb[:, 1:], wa[:, 1:]) if bootstrap else np.full(len(pair), np.nan)
    shift = meta.loc[pair["subject"], "shift"].to_numpy(float)
    truth = np.sign(shift)
    df = pd.DataFrame(
        {
            "task": pair["task"],
            "trials": meta.loc[pair["subject"], "trials"].to_numpy(int),
            "ablation": pair["condition"],
            "shift": shift,
            "right_s": s == truth,
            "right_s_p": np.where(np.abs(s_p) < TIE, 0.0, np.sign(s_p)) == truth,
            "s": s,
            "s_p": s_p,
        }
    )
    if not bootstrap:
        df["right_s_p"] = np.nan
    out = (
        df.groupby(["task", "trials", "ablation", "shift"], sort=True)
        .agg(
            n=("s", "size"),
            right_s=("right_s", "mean"),
            right_s_p=("right_s_p", "mean"),
            mean_s=("s", "mean"),
            mean_s_p=("s_p", "mean"),
        )
        .reset_index()
    )
    return out[cols]


def design(
    spec_or_protocol: str | Path,
    reps: int = 50,
    trials: list[int] | None = None,
    runs: int | None = None,
    noise: float = DEFAULT_NOISE,
    seed: int = 0,
    missing: float = 0.0,
    shifts=DEFAULT_SHIFTS,
    bootstrap: int = 30,
) -> dict[str, pd.DataFrame]:
    """Model recovery, factor calibration, parameter recovery and BCS power of a design.

    Parameters
    ----------
    spec_or_protocol : str or Path
        A task spec or a protocol such as ``tasks/bayesbench.toml``.
    reps : int
        Simulated observers per (task, trial count, true model).
    trials : list of int, optional
        Trials per session run (default: each spec's); several values give
        one row per value in every table.
    runs : int, optional
        Runs of each session type (default: each spec's).
    noise : float
        Response noise SD as a fraction of the mean session width (log
        variants: of the mean width relative to the session midpoint).
    seed : int
        Seed of the simulations and of the bootstrap draws.
    missing : float
        Fraction of responses set missing at random, in [0, 1).
    shifts : sequence of float
        True shifts of ``w_prior`` (ablation minus base) for the BCS power.
    bootstrap : int
        Session-run replicates behind ``s_p`` (METHOD §9).

    Returns
    -------
    dict of DataFrame
        ``confusion``, ``calibration``, ``factors``, ``recovery``, ``power``,
        ``summary`` (column meanings in ``docs/method.md``), and ``timing``
        (seconds per stage).
    """
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 2:
        raise BayesobsInputError(f"--reps must be a whole number >= 2, not {reps!r}")
    if not (np.isfinite(noise) and noise > 0):
        raise BayesobsInputError(f"--noise must be a number > 0, not {noise!r}")
    if not 0.0 <= missing < 1.0:
        raise BayesobsInputError(f"--missing must be in [0, 1), not {missing!r}")
    if bootstrap < 0:
        raise BayesobsInputError(f"--bootstrap must be >= 0, not {bootstrap!r}")
    check("bootstrap", bootstrap, "--bootstrap asks for")
    if not all(np.isfinite(shifts)):
        raise BayesobsInputError(f"--shifts must be finite numbers, not {list(shifts)!r}")
    t0 = time.perf_counter()
    structure = _structure(spec_or_protocol, trials, runs)
    table, truth = simulate_design(structure, reps, noise, missing, seed)
    table = normalize_trials(table)
    t1 = time.perf_counter()
    batch = fit_batch(table)
    ctrl = fit_controls(table)
    t2 = time.perf_counter()
    cells = batch.cells[["subject", "task"]].copy()
    aic = batch.aic[:, 0, :]
    caic = ctrl.aic[:, 0, :]
    every = np.concatenate([aic, caic], axis=1)
    with np.errstate(invalid="ignore"):
        best = np.nanargmin(np.where(np.isnan(every), np.inf, every), axis=1)
    cells["best"] = np.array(CANDIDATES)[best]
    cells = cells.merge(truth, on=["subject", "task"])
    confusion = _confusion(cells)

    # factor evidence of the ten variants (the controls never enter it)
    P = factor_evidence_array(aic)
    fac = []
    for i, f in enumerate(FACTORS):
        present = np.array(
            [
                getattr(VARIANTS[VARIANT_NAMES.index(t)], f) if t in VARIANT_NAMES else False
                for t in cells["true"]
            ]
        )
        fac.append(cells[["task", "trials", "true"]].assign(factor=f, p=P[:, i], present=present))
    fac = pd.concat(fac, ignore_index=True)
    fac = fac[fac["true"] != "anchor"]
    fac["right"] = (fac["p"] > 0.5) == fac["present"]
    factors = (
        fac.groupby(["trials", "true", "factor"], sort=False)
        .agg(
            present=("present", "first"),
            p_mean=("p", "mean"),
            p_min=("p", "min"),
            p_median=("p", "median"),
            p_max=("p", "max"),
            right=("right", "mean"),
        )
        .reset_index()
    )
    calibration = (
        fac.groupby(["trials", "factor"], sort=False)
        .apply(
            lambda g: pd.Series(
                {
                    "p_present": g.loc[g["present"], "p"].mean(),
                    "p_absent": g.loc[~g["present"], "p"].mean(),
                    "right": g["right"].mean(),
                    "right_present": g.loc[g["present"], "right"].mean(),
                    "right_absent": g.loc[~g["present"], "right"].mean(),
                }
            ),
            include_groups=False,
        )
        .reset_index()
    )
    recovery = _recovery(batch, cells)
    t3 = time.perf_counter()
    power = _power(simulate_power(structure, reps, shifts, noise, missing, seed), bootstrap, seed)
    t4 = time.perf_counter()
    diag = confusion[(confusion["task"] == "all") & (confusion["true"] == confusion["best"])]
    summary = diag.groupby("trials").agg(
        diagonal_mean=("rate", "mean"), diagonal_min=("rate", "min")
    )
    acc = calibration.pivot(index="trials", columns="factor", values="right")
    summary = summary.join(acc.add_prefix("right_")[[f"right_{f}" for f in FACTORS]])
    if len(power):
        pw = (
            power[power["shift"] != 0].groupby(["trials", "shift"])[["right_s", "right_s_p"]].mean()
        )
        for (T, d), r in pw.iterrows():
            summary.loc[T, f"power_s_{d:g}"] = r["right_s"]
            summary.loc[T, f"power_s_p_{d:g}"] = r["right_s_p"]
    summary = summary.reset_index()
    timing = pd.DataFrame(
        {
            "stage": ["simulate", "fit", "tables", "power", "total"],
            "seconds": [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0],
        }
    )
    # anchoring control: how often it beats the Kalman variants, per true model
    fits_rows = _best_kalman(aic)
    ctab = pd.DataFrame(
        {
            "subject": batch.cells["subject"],
            "task": batch.cells["task"],
            "delta_aic_kalman": caic[:, 0] - fits_rows,
        }
    ).merge(truth[["subject", "task", "trials", "true"]], on=["subject", "task"])
    controls = (
        ctab.groupby(["trials", "true"], sort=False)["delta_aic_kalman"]
        .agg(beats_kalman=lambda v: float((v < 0).mean()), median_delta_aic_kalman="median")
        .reset_index()
    )
    return {
        "confusion": confusion,
        "calibration": calibration,
        "factors": factors,
        "recovery": recovery,
        "power": power,
        "controls": controls,
        "summary": summary,
        "timing": timing,
    }


def _best_kalman(aic: np.ndarray) -> np.ndarray:
    idx = [
        VARIANT_NAMES.index(v) for v in ("kalman", "kalman_gain", "kalman_log", "kalman_log_gain")
    ]
    sub = aic[:, idx]
    return np.min(np.where(np.isnan(sub), np.inf, sub), axis=1)


def _recovery(batch, cells: pd.DataFrame) -> pd.DataFrame:
    """Bias and spread of ``w_prior``, ``log rho`` and ``g``, each from the true variant's own fit."""
    rows = []
    row_of = {
        (s, t): i
        for i, (s, t) in enumerate(zip(batch.cells["subject"], batch.cells["task"], strict=True))
    }
    for r in cells.itertuples(index=False):
        if r.true not in VARIANT_NAMES:
            continue
        j = VARIANT_NAMES.index(r.true)
        i = row_of[(r.subject, r.task)]
        for name in ("w_prior", "rho", "g"):
            true = getattr(r, f"true_{name}", np.nan)
            if true is None or not np.isfinite(true):
                continue
            est = batch.params[name][i, 0, j]
            if name == "rho":
                name, true, est = "log_rho", np.log(true), np.log(est) if est > 0 else -np.inf
            rows.append(
                {"trials": r.trials, "variant": r.true, "param": name, "true": true, "est": est}
            )
    df = pd.DataFrame(rows)
    # log rho at its limits (0 or inf) is clipped to the searched interval [-18, 18]
    df["est"] = df["est"].clip(-18.0, 18.0)
    df["error"] = df["est"] - df["true"]
    return (
        df.groupby(["trials", "variant", "param"], sort=False)
        .agg(
            n=("error", "size"),
            true_mean=("true", "mean"),
            bias=("error", "mean"),
            sd=("error", "std"),
            median_abs_error=("error", lambda e: float(np.median(np.abs(e)))),
        )
        .reset_index()
    )


def confusion_figure(confusion: pd.DataFrame, task: str = "all", axes=None):
    """Heat maps of the confusion matrix (true model x best-AIC model), one per trial count.

    Parameters
    ----------
    confusion : DataFrame
        ``design(...)["confusion"]``.
    task : str
        A task, or ``"all"`` (pooled over the protocol's tasks).
    axes : sequence of Axes, optional

    Returns
    -------
    Figure
    """
    c = confusion[confusion["task"] == task]
    counts = sorted(c["trials"].unique())
    fig, axes = figure_axes(axes, n=len(counts), size=(6.4, 5.6))
    for ax, T in zip(axes, counts, strict=False):
        m = (
            c[c["trials"] == T]
            .pivot(index="true", columns="best", values="rate")
            .reindex(index=list(TRUE_MODELS), columns=list(CANDIDATES))
        )
        im = ax.imshow(m.to_numpy(float), vmin=0, vmax=1, cmap="viridis")
        ax.set_xticks(range(len(CANDIDATES)), CANDIDATES, rotation=70, fontsize=7)
        ax.set_yticks(range(len(TRUE_MODELS)), TRUE_MODELS, fontsize=7)
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                v = m.iat[i, j]
                if v >= 0.05:
                    ax.text(
                        j,
                        i,
                        f"{v:.2f}",
                        ha="center",
                        va="center",
                        fontsize=6,
                        color="black" if v > 0.6 else "white",
                    )
        ax.set_xlabel("best by AIC")
        ax.set_ylabel("true observer")
        ax.set_title(f"{task}: {T} trials per run")
    fig.colorbar(im, ax=axes, shrink=0.8, label="rate")
    return fig


def power_figure(power: pd.DataFrame, ax=None):
    """BCS power: share of right signs of ``s_a`` and ``s_p`` against trials, per true shift.

    Parameters
    ----------
    power : DataFrame
        ``design(...)["power"]``.
    ax : Axes, optional

    Returns
    -------
    Figure
    """
    fig, (ax,) = figure_axes(ax, size=(5.0, 3.6))
    pw = power.groupby(["shift", "trials"])[["right_s", "right_s_p"]].mean().reset_index()
    for k, (d, g) in enumerate(pw.groupby("shift")):
        color = f"C{k}"
        ax.plot(g["trials"], g["right_s"], "o--", color=color, label=f"s_a, shift {d:g}")
        ax.plot(g["trials"], g["right_s_p"], "s-", color=color, label=f"s_p, shift {d:g}")
    ax.set_xlabel("trials per session run")
    ax.set_ylabel("right sign")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=6, ncol=2)
    return fig


def write_design(res: dict, out) -> list[str]:
    """Write :func:`design`'s tables as ``out/NAME.csv`` and its figures under ``out/figures``.

    What ``bayesobs design`` writes, callable from a notebook; each table
    atomically (:func:`bayesobs.trials.write_csv`).

    Parameters
    ----------
    res : dict of str to DataFrame
        :func:`design`'s result (it needs ``confusion`` and ``power``).
    out : str or Path
        The output folder (created if absent).

    Returns
    -------
    list of str
        The files written, relative to ``out`` (``NAME.csv``, then
        ``figures/confusion.png`` and, when ``power`` has rows, ``figures/power.png``).
    """
    out = Path(out)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in res.items():
        write_csv(table, out / f"{name}.csv")
        written.append(f"{name}.csv")
    figures = [("confusion", confusion_figure(res["confusion"]))]
    if len(res["power"]):
        figures.append(("power", power_figure(res["power"])))
    for name, fig in figures:
        fig.savefig(out / "figures" / f"{name}.png", dpi=110)
        written.append(f"figures/{name}.png")
    return written


def design_costs(
    spec_or_protocol: str | Path,
    subject: str,
    trials: list[int] | None = None,
    runs: int | None = None,
    prices: Prices | None = None,
) -> pd.DataFrame:
    """What a design costs on a model: its calls, tokens and dollars per trial count (``design --cost-for``).

    Parameters
    ----------
    spec_or_protocol : str or Path
        A task spec or a protocol, as :func:`design` takes it.
    subject : str
        The model asked, e.g. ``openai:gpt-4o`` (a bare ``gpt-4o`` or
        ``claude-...`` is taken as its provider's).
    trials : list of int, optional
        Trials per session run (default: each spec's own, one row).
    runs : int, optional
        Runs of each session type (default: each spec's).
    prices : Prices, optional
        The price table (default: the shipped one).

    Returns
    -------
    pandas.DataFrame
        One row per trial count: ``trials`` (0: each spec's own), ``calls``,
        ``input_tokens`` (the ``--dry-run`` estimate), ``output_tokens``
        (every reply's whole budget), ``cost_low`` and ``cost_high`` in
        dollars (:func:`bayesobs.run.runner.costs`; NaN without a price).

    Raises
    ------
    BayesobsInputError
        For a spec that does not load or plan.
    """
    prices = prices or load_prices()
    if ":" not in subject:  # a bare model name: its provider's subject (image tokens differ)
        subject = f"{'anthropic' if subject.startswith('claude') else 'openai'}:{subject}"
    exps = load_protocol(spec_or_protocol)
    rows = []
    for t in trials or [None]:
        kw = dict(subjects=[subject], trials=t, runs=runs, ami=None, hvs=None)
        sessions = plan_all([(e["spec"], kw) for e in exps])
        est, money = estimate(sessions, {}), costs(sessions, {}, None, prices)
        priced = not money["unpriced"]
        rows.append(
            {
                "trials": t or 0,
                "calls": est["calls"],
                "input_tokens": est["input_tokens"],
                "output_tokens": est["output_tokens"],
                "cost_low": money["cost_low"] if priced else np.nan,
                "cost_high": money["cost_high"] if priced else np.nan,
            }
        )
    return pd.DataFrame(rows)
