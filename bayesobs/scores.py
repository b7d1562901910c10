"""Accuracy, Bayesian Consistency Score and the BayesBench composite (METHOD §4–§7),
with the robust BCS_p, C_p, S_p beside them (METHOD §9) and the flags of
degenerate data (constant cells, fewer than 2 runs per session type).

Every function returns DataFrames.  Bootstrap replicates share the draws of
:mod:`bayesobs.bootstrap` (per ``(subject, task, condition)`` group), so the
fits, the accuracy and the cue-combination numbers of replicate ``b`` all come
from the same resampled session runs.
"""

from __future__ import annotations

import itertools
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd

from .bootstrap import (
    MIN_RUNS_STRATIFIED,
    check_resample,
    percentile_interval,
    run_draws,
    unit_draws,
)
from .cue import (  # the cue probe lives beside the cue code; re-exported here
    PROBE_MODELS,  # noqa: F401
    _calibration,  # noqa: F401
    _probe,  # noqa: F401
    _probe_predictions,  # noqa: F401
    _probe_skip_reason,  # noqa: F401
    _r2_table,  # noqa: F401
    cue_batch,
    cue_frame,
    cue_predictions,  # noqa: F401
    cue_probe,
    cue_probe_table,  # noqa: F401
)
from .evidence import factor_evidence_array
from .observers.variants import FACTORS, VARIANT_NAMES
from .parse import invalid_reply_rows
from .trials import CELL_KEYS, RUN_KEYS, normalize_trials, write_csv

# METHOD §5: ablation -> modality its w_prior is measured in.
BCS_ABLATIONS: dict[str, str] = {
    "steer_verbal": "multimodal",
    "steer_numeric": "multimodal",
    "noise_constant": "image",
    "noise_gradual": "image",
    "context_long": "multimodal",
}
# Ablations scored like the BCS ablations but never inside the paper's 15 pairs:
# ablation -> modality its w_prior is measured in (bcs_extra.csv, extra bcs_tasks columns).
EXTRA_ABLATIONS: dict[str, str] = {"noise_text": "text"}
PRIOR_DOMINANT = 0.9
NRMSE_MAX = 2.0
BCS_MAX = 15.0
SUMMARY = ("A", "E", "C", "S", "BCS")
# METHOD §9: the robust companions of BCS, C and S (columns after the contract ones).
ROBUST = ("BCS_p", "C_p", "S_p")
# METHOD §9: a shift smaller than this is a tie (sign 0).
TIE = 1e-9
# Reasons in missing.csv that the leaderboard and the report turn into flags.
CONSTANT_REASON = "constant responses"
FEW_RUNS_REASON = f"fewer than {MIN_RUNS_STRATIFIED} runs per session type"


def with_baseline(trials: pd.DataFrame) -> pd.DataFrame:
    """Add ``baseline``: the constant range-midpoint predictor of each trial.

    ``(range_low + range_high) / 2`` where logged; otherwise the midpoint of the
    smallest and largest stimulus of that session type in the cell.
    """
    out = trials.copy()
    g = out.groupby([*CELL_KEYS, "session"], sort=False)["stimulus"]
    fallback = (g.transform("min") + g.transform("max")) / 2
    if "range_low" in out.columns and "range_high" in out.columns:
        logged = (out["range_low"] + out["range_high"]) / 2
        out["baseline"] = logged.where(logged.notna(), fallback)
    else:
        out["baseline"] = fallback
    return out


def constant_cells(trials: pd.DataFrame) -> pd.DataFrame:
    """Cells whose observed responses are all equal (METHOD §8).

    Returns
    -------
    DataFrame
        ``subject, task, modality, condition, n`` (observed responses) of every
        cell with at least one observed response and no two different ones.
    """
    obs = trials.dropna(subset=["response"])
    g = obs.groupby(list(CELL_KEYS), sort=True)["response"]
    stats = pd.DataFrame({"lo": g.min(), "hi": g.max(), "n": g.size()}).reset_index()
    const = stats[stats["lo"] == stats["hi"]]
    return const[[*CELL_KEYS, "n"]].reset_index(drop=True)


def few_runs_cells(trials: pd.DataFrame, minimum: int = MIN_RUNS_STRATIFIED) -> pd.DataFrame:
    """Cells with fewer than ``minimum`` runs of some session type.

    Returns
    -------
    DataFrame
        ``subject, task, modality, condition, min_runs`` (the smallest number of
        runs of any session type in the cell), only for cells below ``minimum``.
    """
    runs = trials[[*CELL_KEYS, "session", "run"]].drop_duplicates()
    per = runs.groupby([*CELL_KEYS, "session"], sort=True).size()
    least = per.groupby(level=list(range(len(CELL_KEYS))), sort=True).min().rename("min_runs")
    least = least.reset_index()
    return least[least["min_runs"] < minimum].reset_index(drop=True)


def _degenerate_missing(trials: pd.DataFrame, B: int) -> tuple[pd.DataFrame, list[tuple]]:
    """Constant cells and, with a bootstrap, cells with too few runs: ``missing.csv`` rows.

    Every constant cell gets a row (component ``fits MODALITY CONDITION``,
    reason :data:`CONSTANT_REASON`).  With ``B > 0``, each ``(subject, task)``
    with cells below 2 runs of a session type gets one row (component
    ``bootstrap: K of N cells``, reason :data:`FEW_RUNS_REASON`).
    """
    const = constant_cells(trials)
    rows = [
        (r.subject, r.task, f"fits {r.modality} {r.condition}", CONSTANT_REASON)
        for r in const.itertuples(index=False)
    ]
    if B > 0:
        few = few_runs_cells(trials)
        if len(few):
            total = trials[list(CELL_KEYS)].drop_duplicates().groupby(["subject", "task"]).size()
            for (subject, task), g in few.groupby(["subject", "task"], sort=True):
                rows.append(
                    (subject, task, f"bootstrap: {len(g)} of {total[(subject, task)]} cells",
                     FEW_RUNS_REASON)
                )  # fmt: skip
    return const, rows


def _cell_mask(cells: pd.DataFrame, subset: pd.DataFrame) -> np.ndarray:
    """Boolean mask of the rows of ``cells`` whose cell keys appear in ``subset``."""
    keys = set(subset[list(CELL_KEYS)].itertuples(index=False, name=None))
    return np.array([k in keys for k in cells[list(CELL_KEYS)].itertuples(index=False, name=None)],
                    dtype=bool)  # fmt: skip


def _align(cells: pd.DataFrame, other: pd.DataFrame, values: np.ndarray) -> np.ndarray:
    """Rows of ``values`` (indexed like ``other``) in the order of ``cells``."""
    pos = {tuple(r): i for i, r in enumerate(other[list(CELL_KEYS)].itertuples(index=False))}
    idx = [pos[tuple(r)] for r in cells[list(CELL_KEYS)].itertuples(index=False)]
    return values[idx]


def _replicated(df: pd.DataFrame, name: str, values: np.ndarray) -> pd.DataFrame:
    """Add ``name`` (full data) and, with replicates, ``name_mean/_lo/_hi``."""
    df[name] = values[:, 0]
    if values.shape[1] > 1:
        mean, lo, hi = percentile_interval(values[:, 1:])
        df[f"{name}_mean"], df[f"{name}_lo"], df[f"{name}_hi"] = mean, lo, hi
    return df


# ------------------------------------------------------------------ accuracy
def accuracy_batch(
    trials: pd.DataFrame, bootstrap: int = 0, seed: int = 0, resample: str = "pooled"
):
    """NRMSE of every cell and replicate: ``(cells, 1 + B)``.

    Over the trials with an observed response: ``RMSE(y, x) / RMSE(c, x)``.
    ``resample`` is the bootstrap scheme (:func:`bayesobs.bootstrap.run_draws`).
    """
    t = trials if "baseline" in trials.columns else with_baseline(trials)
    obs = t["response"].notna().to_numpy()
    x = t["stimulus"].to_numpy()
    err = np.where(obs, t["response"].to_numpy() - x, 0.0)
    base = np.where(obs, t["baseline"].to_numpy() - x, 0.0)
    runs = t.assign(_e=err**2, _b=base**2).groupby(list(RUN_KEYS), sort=True)[["_e", "_b"]].sum()
    keys = runs.index.to_frame(index=False)
    cells = keys[list(CELL_KEYS)].drop_duplicates().reset_index(drop=True)
    unit_cell = keys.groupby(list(CELL_KEYS), sort=True).ngroup().to_numpy()
    B = int(bootstrap)
    draws = run_draws(t, B, seed, resample) if B > 0 else {}
    W = unit_draws(cells, unit_cell, keys["session"].to_numpy(), keys["run"].to_numpy(), draws, B)
    sums = np.asarray(W @ runs.to_numpy()).reshape(len(cells), 1 + B, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        nrmse = np.sqrt(sums[..., 0] / sums[..., 1])
    return cells, nrmse


def accuracy_table(trials: pd.DataFrame, bootstrap: int = 0, seed: int = 0) -> pd.DataFrame:
    """``accuracy.csv``: ``subject, task, modality, condition, nrmse`` (+ interval)."""
    cells, nrmse = accuracy_batch(trials, bootstrap, seed)
    return _replicated(cells, "nrmse", nrmse)


# ----------------------------------------------------------------------- BCS
def bcs_batch(cells: pd.DataFrame, w_prior: np.ndarray):
    """Per ``(subject, task, ablation)``: ``w_base``, ``w_ablation``, ``s``.

    Parameters
    ----------
    cells : DataFrame
        ``subject, task, modality, condition`` of each fitted cell.
    w_prior : array, shape (cells, 1 + B)
        ``w_prior`` of the ``static`` variant per cell and replicate.

    Returns
    -------
    rows : DataFrame
        ``subject, task, ablation, modality``.
    values : dict of arrays
        ``w_base``, ``w_ablation``, ``s``, ``delta_w`` and ``s_robust`` (the
        METHOD §9 sign of each replicate), each ``(rows, 1 + B)``; ``s_p``,
        shape ``(rows,)`` (NaN without replicates).
    missing : DataFrame
        ``subject, task, component, reason`` for ablations that could not be scored.
    """
    index = {tuple(r): i for i, r in enumerate(cells[list(CELL_KEYS)].itertuples(index=False))}
    rows, wb, wa, missing = [], [], [], []
    # Tasks with image or multimodal cells: in the BayesBench protocol exactly
    # the three multimodal tasks (duration is text-only and gets no BCS).
    visual = cells[cells["modality"].isin(["image", "multimodal"])]
    for subject, task in visual[["subject", "task"]].drop_duplicates().itertuples(index=False):
        for abl, mod in BCS_ABLATIONS.items():
            i_base = index.get((subject, task, mod, "base"))
            i_abl = index.get((subject, task, mod, abl))
            if i_base is None or i_abl is None:
                what = f"{mod} base" if i_base is None else f"{mod} {abl}"
                missing.append((subject, task, f"BCS {abl}", f"no {what} trials"))
                continue
            rows.append((subject, task, abl, mod))
            wb.append(w_prior[i_base])
            wa.append(w_prior[i_abl])
    out = pd.DataFrame(rows, columns=["subject", "task", "ablation", "modality"])
    shape = (0, w_prior.shape[1])
    wb = np.array(wb).reshape(-1, w_prior.shape[1]) if wb else np.empty(shape)
    wa = np.array(wa).reshape(-1, w_prior.shape[1]) if wa else np.empty(shape)
    s = sign_score(wb, wa)
    values = {"w_base": wb, "w_ablation": wa, "s": s, "delta_w": wa - wb,
              "s_robust": robust_sign(wb, wa), "s_p": sign_probability(wb[:, 1:], wa[:, 1:])}  # fmt: skip
    return out, values, pd.DataFrame(missing, columns=["subject", "task", "component", "reason"])


def extra_ablations(cells: pd.DataFrame, w_prior: np.ndarray) -> pd.DataFrame:
    """``bcs_extra.csv``: the :data:`EXTRA_ABLATIONS` scored like a BCS ablation.

    One row per ``(subject, task, ablation)`` with both the ablation and the
    base cell in the ablation's modality: ``w_base``, ``w_ablation``,
    ``delta_w``, the paper's sign ``s`` and ``s_p`` (METHOD §9; NaN without
    replicates).  These never enter the BCS, ``C`` or ``S``.
    """
    index = {tuple(r): i for i, r in enumerate(cells[list(CELL_KEYS)].itertuples(index=False))}
    rows, wb, wa = [], [], []
    for subject, task in cells[["subject", "task"]].drop_duplicates().itertuples(index=False):
        for abl, mod in EXTRA_ABLATIONS.items():
            i_base = index.get((subject, task, mod, "base"))
            i_abl = index.get((subject, task, mod, abl))
            if i_base is not None and i_abl is not None:
                rows.append((subject, task, abl, mod))
                wb.append(w_prior[i_base])
                wa.append(w_prior[i_abl])
    out = pd.DataFrame(rows, columns=["subject", "task", "ablation", "modality"])
    R = w_prior.shape[1]
    wb = np.array(wb).reshape(-1, R)
    wa = np.array(wa).reshape(-1, R)
    out["w_base"] = wb[:, 0]
    out["w_ablation"] = wa[:, 0]
    out["delta_w"] = wa[:, 0] - wb[:, 0]
    out["s"] = sign_score(wb[:, 0], wa[:, 0])
    out["s_p"] = sign_probability(wb[:, 1:], wa[:, 1:])
    return out


def sign_score(w_base: np.ndarray, w_ablation: np.ndarray) -> np.ndarray:
    """``s_a``: 0 if ``w_ablation > 0.9``, else +1 if it did not fall, else -1; NaN if unknown."""
    w_base = np.asarray(w_base, dtype=float)
    w_ablation = np.asarray(w_ablation, dtype=float)
    s = np.where(w_ablation - w_base >= 0, 1.0, -1.0)
    s = np.where(w_ablation > PRIOR_DOMINANT, 0.0, s)
    return np.where(np.isnan(w_base) | np.isnan(w_ablation), np.nan, s)


def robust_sign(w_base: np.ndarray, w_ablation: np.ndarray) -> np.ndarray:
    """METHOD §9 sign of one shift: ``sgn(Δw)`` with ties and a dominant prior as 0.

    0 where ``w_ablation > 0.9`` or ``|w_ablation - w_base| < 1e-9``, else the
    sign of the shift; NaN where either weight is unknown.
    """
    w_base = np.asarray(w_base, dtype=float)
    w_ablation = np.asarray(w_ablation, dtype=float)
    d = w_ablation - w_base
    known = ~(np.isnan(w_base) | np.isnan(w_ablation))
    s = np.where(np.abs(np.where(known, d, 0.0)) < TIE, 0.0, np.sign(np.where(known, d, 0.0)))
    s = np.where(w_ablation > PRIOR_DOMINANT, 0.0, s)
    return np.where(known, s, np.nan)


def sign_probability(w_base: np.ndarray, w_ablation: np.ndarray) -> np.ndarray:
    """``s_p`` (METHOD §9): the mean robust sign over bootstrap replicates.

    Parameters
    ----------
    w_base, w_ablation : arrays, shape (rows, B)
        ``w_prior`` of the base and ablation fits in each replicate (the
        full-data column excluded).

    Returns
    -------
    ndarray, shape (rows,)
        ``(1/B) sum_b robust_sign(...)`` in ``[-1, 1]``.  Replicates where a
        weight is unknown are left out of the mean; NaN where none is known
        or ``B = 0``.
    """
    s = robust_sign(w_base, w_ablation)
    if s.shape[1] == 0:
        return np.full(s.shape[0], np.nan)
    known = ~np.isnan(s)
    count = known.sum(axis=1)
    total = np.where(known, s, 0.0).sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _nansum_or_nan(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """Sum ignoring NaN, but NaN where every value is NaN."""
    return np.where(np.isnan(values).all(axis=axis), np.nan, np.nansum(values, axis=axis))


def _sum_by(keys: pd.DataFrame, by: list[str], values: np.ndarray):
    """Sum rows of ``values`` within groups of ``keys[by]`` (NaN rows count as 0)."""
    codes = keys.groupby(by, sort=True).ngroup().to_numpy()
    groups = keys[by].drop_duplicates().sort_values(by).reset_index(drop=True)
    out = np.zeros((len(groups), values.shape[1]))
    np.add.at(out, codes, np.nan_to_num(values))
    return groups, out


def bcs_agreement(bcs: pd.DataFrame, cells: pd.DataFrame, w_prior: np.ndarray) -> pd.DataFrame:
    """Beyond the paper: how consistently a subject's BCS signs agree.

    ``across_tasks``: over ablations, the fraction of pairs of tasks whose
    ``s_a`` agree.  ``across_modalities``: over (task, ablation), the fraction
    where ``s_a`` measured in the image modality equals ``s_a`` measured in the
    multimodal modality (each against its own base).
    """
    index = {tuple(r): i for i, r in enumerate(cells[list(CELL_KEYS)].itertuples(index=False))}
    out = []
    for subject, sub in bcs.groupby("subject", sort=True):
        pairs = agree = 0
        for _, a in sub.groupby("ablation"):
            for s1, s2 in itertools.combinations(a["s"].to_numpy(), 2):
                pairs += 1
                agree += s1 == s2
        both = same = 0
        for task in sub["task"].unique():
            for abl in BCS_ABLATIONS:
                w = {}
                for mod in ("image", "multimodal"):
                    ib, ia = (
                        index.get((subject, task, mod, "base")),
                        index.get((subject, task, mod, abl)),
                    )
                    if ib is not None and ia is not None:
                        w[mod] = sign_score(w_prior[ib, 0], w_prior[ia, 0])
                if len(w) == 2:
                    both += 1
                    same += w["image"] == w["multimodal"]
        out.append(
            {
                "subject": subject,
                "across_tasks": agree / pairs if pairs else np.nan,
                "task_pairs": pairs,
                "across_modalities": same / both if both else np.nan,
                "modality_pairs": both,
            }
        )
    return pd.DataFrame(
        out,
        columns=["subject", "across_tasks", "task_pairs", "across_modalities", "modality_pairs"],
    )


# ------------------------------------------------------------------ results
class Scores(NamedTuple):
    """Every table ``bayesobs score`` writes (see DESIGN.md for the contract files).

    A table without columns (``pd.DataFrame()``) was not computed: the
    magnitude tables when the trials hold only visual-search trials, the
    ``search*`` tables when they hold none.
    """

    fits: pd.DataFrame
    evidence: pd.DataFrame
    accuracy: pd.DataFrame
    cue: pd.DataFrame
    bcs: pd.DataFrame
    bayesbench: pd.DataFrame
    bcs_tasks: pd.DataFrame
    bcs_agreement: pd.DataFrame
    cue_probe: pd.DataFrame
    summary: pd.DataFrame
    missing: pd.DataFrame
    search: pd.DataFrame | None = None
    search_accuracy: pd.DataFrame | None = None
    search_bias: pd.DataFrame | None = None
    controls: pd.DataFrame | None = None  # METHOD §12: the anchoring control, not a factor
    bcs_extra: pd.DataFrame | None = None  # noise_text and other ablations outside the BCS

    def to_folder(self, out) -> list[str]:
        """Write every computed table as ``out/NAME.csv``; returns the names written.

        Each file is written atomically (:func:`bayesobs.trials.write_csv`).
        """
        from pathlib import Path

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, table in self._asdict().items():
            if table is not None and len(table.columns):  # no columns: not computed
                write_csv(table, out / f"{name}.csv")
                written.append(name)
        return written

    @classmethod
    def from_folder(cls, folder) -> Scores | None:
        """The tables of a ``bayesobs score`` output folder, or None if it is not one."""
        from pathlib import Path

        folder = Path(folder)
        if not any((folder / f"{n}.csv").exists() for n in ("bayesbench", "search")):
            return None
        tables = {}
        for name in cls._fields:
            p = folder / f"{name}.csv"
            tables[name] = pd.read_csv(p) if p.exists() and p.stat().st_size > 1 else pd.DataFrame()
        for name in ("search", "search_accuracy", "search_bias"):
            if tables[name].empty:
                tables[name] = None
        for name in ("subject", "task"):  # keys stay text (e.g. subject "007")
            for t in tables.values():
                if t is not None and name in t:
                    t[name] = t[name].astype(str)
        return cls(**tables)


def _composite(
    subjects, acc_cells, nrmse, cue_groups, cue_vals, bcs_rows, bcs_vals, B, missing
) -> pd.DataFrame:
    """A, E, C, S and BCS per subject and replicate (METHOD §6), then BCS_p, C_p, S_p (§9)."""
    R = 1 + B
    rows = []
    for subject in subjects:
        # A: per task, mean over modalities of clip(1 - NRMSE/2, 0, 1) on base
        sel = (acc_cells["subject"] == subject) & (acc_cells["condition"] == "base")
        a_task = []
        for task, idx in acc_cells[sel].groupby("task").groups.items():
            score = np.clip(1 - nrmse[list(idx)] / NRMSE_MAX, 0, 1)
            a_task.append(np.nanmean(score, axis=0) if len(idx) else np.full(R, np.nan))
            del task
        A = np.mean(a_task, axis=0) if a_task else np.full(R, np.nan)
        if not a_task:
            missing.append((subject, "", "A", "no base-condition trials"))
        # E: per multimodal task, mean of RRE(oracle) and RRE(non-oracle) on base
        if len(cue_groups):
            sel = (cue_groups["subject"] == subject) & (cue_groups["condition"] == "base")
            idx = np.flatnonzero(sel.to_numpy())
        else:
            idx = np.array([], dtype=int)
        if len(idx):
            e_task = (cue_vals["rre_bayes_oracle"][idx] + cue_vals["rre_bayes_non_oracle"][idx]) / 2
            E = np.mean(e_task, axis=0)
        else:
            E = np.full(R, np.nan)
            missing.append(
                (subject, "", "E", "no base condition with text, image and multimodal trials")
            )
        # BCS: sum over tasks and ablations
        sel = (bcs_rows["subject"] == subject).to_numpy()
        if sel.any():
            s = bcs_vals["s"][sel]
            BCS = np.where(np.isnan(s).all(axis=0), np.nan, np.nansum(s, axis=0))
        else:
            BCS = np.full(R, np.nan)
            missing.append((subject, "", "C", "no multimodal task with base and ablation fits"))
        C = (BCS + BCS_MAX) / (2 * BCS_MAX)
        S = (A + E + C) / 3
        # METHOD §9: the point estimate sums s_p; replicate b sums its own robust
        # signs (their mean over b is BCS_p), which gives the interval columns.
        if sel.any() and B:
            BCS_p = np.concatenate(
                [
                    [_nansum_or_nan(bcs_vals["s_p"][sel])],
                    _nansum_or_nan(bcs_vals["s_robust"][sel, 1:]),
                ]
            )
        else:
            BCS_p = np.full(R, np.nan)
        C_p = (BCS_p + BCS_MAX) / (2 * BCS_MAX)
        S_p = (A + E + C_p) / 3
        rows.append((subject, {"A": A, "E": E, "C": C, "S": S, "BCS": BCS,
                               "BCS_p": BCS_p, "C_p": C_p, "S_p": S_p}))  # fmt: skip
    out = pd.DataFrame({"subject": [r[0] for r in rows]})
    for name in SUMMARY:
        out[name] = [r[1][name][0] for r in rows]
    if B:
        for name in SUMMARY:
            vals = np.array([r[1][name][1:] for r in rows]).reshape(len(rows), B)
            mean, lo, hi = percentile_interval(vals)
            out[f"{name}_mean"], out[f"{name}_lo"], out[f"{name}_hi"] = mean, lo, hi
    for name in ROBUST:  # after every contract column
        out[name] = [r[1][name][0] for r in rows]
    if B:
        for name in ROBUST:
            vals = np.array([r[1][name][1:] for r in rows]).reshape(len(rows), B)
            mean, lo, hi = percentile_interval(vals)
            out[f"{name}_mean"], out[f"{name}_lo"], out[f"{name}_hi"] = mean, lo, hi
    return out


def bias_variance(trials: pd.DataFrame) -> pd.DataFrame:
    """Per cell: mean squared error of the responses and its split into bias² and variance.

    ``mse = bias2 + variance`` with ``bias2 = mean(y - x)^2`` and
    ``variance = mean((y - x - mean(y - x))^2)``, over observed responses.
    """
    t = trials.dropna(subset=["response"]).assign(_e=lambda d: d["response"] - d["stimulus"])
    g = t.groupby(list(CELL_KEYS), sort=True)["_e"]
    out = pd.DataFrame({"bias2": g.mean() ** 2, "variance": g.var(ddof=0)})
    out["mse"] = out["bias2"] + out["variance"]
    return out.reset_index()


def _subject_summary(subjects, cells, nrmse, p_bayes, cue_groups, cue_vals, B) -> pd.DataFrame:
    """Per subject, over its base-condition cells: the paper's Figure 8 axes.

    ``nrmse`` and ``p_bayesian``: means over base cells (all tasks and
    modalities); ``rre_bayes_oracle`` and ``nrmse_multimodal``: means over base
    cue-combination rows.  Intervals come from the replicate-level means.
    """
    rows = []
    base = (cells["condition"] == "base").to_numpy()
    for subject in subjects:
        sel = base & (cells["subject"] == subject).to_numpy()
        vals = {"nrmse": nrmse[sel], "p_bayesian": p_bayes[sel]}
        if len(cue_groups):
            csel = (
                (cue_groups["subject"] == subject) & (cue_groups["condition"] == "base")
            ).to_numpy()
            vals["rre_bayes_oracle"] = cue_vals["rre_bayes_oracle"][csel]
            vals["nrmse_multimodal"] = cue_vals["nrmse_multimodal"][csel]
        rows.append((subject, vals))
    out = pd.DataFrame({"subject": [r[0] for r in rows]})
    names = ("nrmse", "p_bayesian", "rre_bayes_oracle", "nrmse_multimodal")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # subjects without a piece: NaN
        per = {n: np.array([np.nanmean(r[1][n], axis=0) if n in r[1] and len(r[1][n]) else np.full(1 + B, np.nan)
                            for r in rows]) for n in names}  # fmt: skip
    for n in names:
        out[n] = per[n][:, 0]
    if B:
        for n in names:
            out[f"{n}_mean"], out[f"{n}_lo"], out[f"{n}_hi"] = percentile_interval(per[n][:, 1:])
    return out


def score(
    trials: pd.DataFrame,
    bootstrap: int = 30,
    seed: int = 0,
    non_oracle: str = "response",
    probe: bool = True,
    progress: bool = False,
    resample: str = "pooled",
    interleaved: str | None = None,
    lapse: bool = False,
) -> Scores:
    """Every BayesBench number for a trial table.

    Parameters
    ----------
    trials : DataFrame
        Any trial table (validated here).
    bootstrap : int
        Session-run bootstrap replicates (METHOD §7), 30 by default.
    seed : int
        Bootstrap seed: the same seed gives identical output.
    non_oracle : {"response", "error"}
        Variances for the non-oracle Bayes weights.
    probe : bool
        Also run the random-forest cue-combination probe (base condition).
    progress : bool
        Show a progress bar while fitting.
    resample : {"pooled", "stratified"}
        Bootstrap scheme: the paper's ``"pooled"`` draws runs from all session
        types; ``"stratified"`` draws runs within each session type and needs
        at least 2 runs of every type (:func:`bayesobs.bootstrap.run_draws`).
    interleaved : str, optional
        A column whose levels alternate trial by trial inside a run (METHOD
        §10): ``fits`` and ``evidence`` get one row per level.  The paper's
        BCS needs one ``w_prior`` per cell, so with two or more levels it is
        not computed (``missing`` says so; ``fits`` holds each level's
        ``w_prior``).
    lapse : bool
        Fit every variant with a lapse rate (METHOD §11); the BCS then uses
        the lapse-robust ``w_prior`` of ``static``.

    Returns
    -------
    Scores
        DataFrames; ``missing`` lists what could not be computed and why.
        Visual-search trials (with ``set_size`` and ``correct``) are scored
        by :func:`bayesobs.search.search_scores` into ``search``,
        ``search_accuracy`` and ``search_bias``; the other tables come from
        the magnitude trials.
    """
    from .search import is_search, search_scores

    check_resample(resample)
    trials = normalize_trials(trials)
    found = is_search(trials)
    extra = search_scores(trials[found]) if found.any() else {}
    if found.all():
        empty = {name: pd.DataFrame() for name in Scores._fields}
        return Scores(**{**empty, **extra})
    res = _magnitude_scores(
        trials[~found], bootstrap, seed, non_oracle, probe, progress, resample, interleaved, lapse
    )
    return res._replace(**extra)


def _magnitude_scores(
    trials, bootstrap, seed, non_oracle, probe, progress, resample, interleaved=None, lapse=False
) -> Scores:
    from .evidence import evidence_table
    from .fitting import collapse_levels, fit_batch, fits_table

    trials = with_baseline(trials.reset_index(drop=True))
    B = int(bootstrap)
    level_batch = fit_batch(
        trials,
        bootstrap=B,
        seed=seed,
        progress=progress,
        resample=resample,
        interleaved=interleaved,
        lapse=lapse,
    )
    # one row per cell for everything past fits/evidence (joint AIC; no per-level w_prior)
    batch = collapse_levels(level_batch)
    j = VARIANT_NAMES.index("static")
    w_prior = batch.params["w_prior"][:, :, j].copy()
    # METHOD §8: a constant cell carries no evidence, so no w_prior for the BCS
    const, degenerate = _degenerate_missing(trials, B)
    if len(const):
        w_prior[_cell_mask(batch.cells, const)] = np.nan
    acc_cells, nrmse = accuracy_batch(trials, B, seed, resample)
    accuracy = _replicated(acc_cells.copy(), "nrmse", nrmse)
    cue_groups, cue_vals, cue_missing = cue_batch(trials, B, seed, non_oracle, resample)
    cue = cue_frame(cue_groups, cue_vals)
    bcs_rows, bcs_vals, bcs_missing = bcs_batch(batch.cells, w_prior)
    bcs = bcs_rows[["subject", "task", "ablation"]].copy()
    for name in ("w_base", "w_ablation", "s"):
        bcs[name] = bcs_vals[name][:, 0]
    bcs["delta_w"] = bcs_vals["delta_w"][:, 0]
    if B:
        for name in ("w_base", "w_ablation", "s", "delta_w"):
            mean, lo, hi = percentile_interval(bcs_vals[name][:, 1:])
            bcs[f"{name}_mean"], bcs[f"{name}_lo"], bcs[f"{name}_hi"] = mean, lo, hi
    bcs["s_p"] = bcs_vals["s_p"]  # METHOD §9, after every other column
    groups, per_task = _sum_by(bcs_rows, ["subject", "task"], bcs_vals["s"])
    bcs_tasks = groups.assign(
        n_ablations=bcs_rows.groupby(["subject", "task"], sort=True).size().to_numpy()
    )
    bcs_tasks = _replicated(bcs_tasks, "bcs", per_task)
    codes = bcs_rows.groupby(["subject", "task"], sort=True).ngroup().to_numpy()
    bcs_tasks["bcs_p"] = [
        float(_nansum_or_nan(bcs_vals["s_p"][codes == i])) for i in range(len(groups))
    ]
    bcs_extra = extra_ablations(batch.cells, w_prior)
    for abl in EXTRA_ABLATIONS:  # extra columns, after every other; never summed into bcs
        e = bcs_extra[bcs_extra["ablation"] == abl][["subject", "task", "s", "s_p"]]
        if e.empty:  # only where the trials hold that ablation
            continue
        e = e.rename(columns={"s": f"s_{abl}", "s_p": f"s_p_{abl}"})
        bcs_tasks = bcs_tasks.merge(e, on=["subject", "task"], how="left")
    missing = list(degenerate)
    missing += [tuple(r) for r in bcs_missing.itertuples(index=False)]
    for r in cue_missing.itertuples(index=False):
        missing.append((r.subject, r.task, f"cue {r.condition}", r.reason))
    missing += invalid_reply_rows(trials)  # the runner's parse failures, counted by reason
    if batch is not level_batch:
        missing.append(
            (
                "",
                "",
                "BCS",
                f"not defined with --interleaved {interleaved}: each level has its "
                "own w_prior (see fits.csv), the paper's score needs one per cell",
            )
        )
    probe_table, probe_skipped = cue_probe(trials, seed) if probe else (pd.DataFrame(), None)
    if probe_skipped is not None:
        missing += [tuple(r) for r in probe_skipped.itertuples(index=False)]
    subjects = sorted(trials["subject"].unique())
    bayesbench = _composite(
        subjects, acc_cells, nrmse, cue_groups, cue_vals, bcs_rows, bcs_vals, B, missing
    )
    from .controls import controls_table, fit_controls

    fits = fits_table(level_batch)
    return Scores(
        fits=fits,
        evidence=evidence_table(level_batch),
        accuracy=accuracy,
        cue=cue,
        bcs=bcs,
        bayesbench=bayesbench,
        bcs_tasks=bcs_tasks,
        bcs_agreement=bcs_agreement(bcs, batch.cells, w_prior),
        cue_probe=probe_table,
        summary=_subject_summary(
            subjects,
            batch.cells,
            _align(batch.cells, acc_cells, nrmse),
            factor_evidence_array(batch.aic)[..., FACTORS.index("bayesian")],
            cue_groups,
            cue_vals,
            B,
        ),
        missing=pd.DataFrame(missing, columns=["subject", "task", "component", "reason"]),
        controls=controls_table(fit_controls(trials), fits),
        bcs_extra=bcs_extra,
    )
