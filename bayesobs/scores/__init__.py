"""Accuracy, Bayesian Consistency Score and the BayesBench composite (METHOD §4–§7).

With the robust BCS_p, C_p, S_p beside them (METHOD §9; the signs are in
:mod:`bayesobs.scores.bcs`) and the flags of degenerate data (constant cells, fewer
than 2 runs per session type).

Every function returns DataFrames.  Bootstrap replicates share the draws of
:mod:`bayesobs.bootstrap` (per ``(subject, task, condition)`` group), so the
fits, the accuracy and the cue-combination numbers of replicate ``b`` all come
from the same resampled session runs.
"""

from __future__ import annotations

import json as _json
import warnings
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..bootstrap import (
    MIN_RUNS_STRATIFIED,
    add_interval,
    run_draws,
    unit_draws,
)
from ..distributed import AsideWorker
from ..errors import BayesobsInputError
from ..fits.controls import controls_table, fit_controls
from ..fits.fitoptions import FitOptions, fit_options
from ..fits.fitresults import collapse_levels, fits_table
from ..fits.fitting import fit_batch
from ..fits.observers.variants import FACTORS, VARIANT_NAMES
from ..paradigms import registered, table_names
from ..parse import invalid_reply_rows
from ..provenance import write_manifest
from ..trials import (
    CELL_KEYS,
    RUN_KEYS,
    natural_key,
    normalize_trials,
    write_csv,
)
from .bcs import (
    BCS_MAX,
    EXTRA_ABLATIONS,
    bcs_agreement,
    bcs_batch,
    extra_ablations,
    nansum_or_nan,
    sum_by,
)
from .cot_accuracy import cot_accuracy
from .cue import (  # the cue probe lives beside the cue code; re-exported here
    PROBE_MODELS,  # noqa: F401
    cue_batch,
    cue_frame,
    cue_predictions,  # noqa: F401
    cue_probe,  # noqa: F401
    cue_probe_table,  # noqa: F401
    paired_trials,
    start_cue_probe,
)
from .evidence import evidence_table, factor_evidence_array
from .references import (
    IDEAL_WITHHELD,
    PREFIX,
    human_subjects,
    prompted,
    reference_trials,
    with_references,
)
from .spread import answer_spread

NRMSE_MAX = 2.0
SUMMARY = ("A", "E", "C", "S", "BCS")
# METHOD §9: the robust companions of BCS, C and S (columns after the contract ones).
ROBUST = ("BCS_p", "C_p", "S_p")
# Reasons in missing.csv that the leaderboard and the report turn into flags.
CONSTANT_REASON = "constant responses"
FEW_RUNS_REASON = f"fewer than {MIN_RUNS_STRATIFIED} runs per session type"
PERFECT_REASON = (
    "RRE is 0/0: the multimodal answers and the Bayesian combination of text and image both have "
    "zero error (answers equal to the stimuli), so efficiency is undefined"
)


def with_baseline(trials: pd.DataFrame) -> pd.DataFrame:
    """Add ``baseline``: the constant range-midpoint predictor of each trial.

    ``(range_low + range_high) / 2`` where logged; otherwise the midpoint of the
    smallest and largest stimulus of that session type in the cell.

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (the cell keys, ``session``,
        ``stimulus``; optional ``range_low``, ``range_high``).

    Returns
    -------
    DataFrame
        A copy of ``trials`` with the ``baseline`` column (stimulus units).
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

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (the cell keys and ``response``, NaN
        where missing).

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

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (the cell keys, ``session``, ``run``).
    minimum : int
        The fewest runs per session type a cell needs; default
        :data:`bayesobs.bootstrap.MIN_RUNS_STRATIFIED` (2), what the
        stratified bootstrap needs.

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
                    (
                        subject,
                        task,
                        f"bootstrap: {len(g)} of {total[(subject, task)]} cells",
                        FEW_RUNS_REASON,
                    )
                )
    return const, rows


def _cell_mask(cells: pd.DataFrame, subset: pd.DataFrame) -> np.ndarray:
    """Boolean mask of the rows of ``cells`` whose cell keys appear in ``subset``."""
    keys = set(subset[list(CELL_KEYS)].itertuples(index=False, name=None))
    return np.array(
        [k in keys for k in cells[list(CELL_KEYS)].itertuples(index=False, name=None)], dtype=bool
    )


def _align(cells: pd.DataFrame, other: pd.DataFrame, values: np.ndarray) -> np.ndarray:
    """Rows of ``values`` (indexed like ``other``) in the order of ``cells``."""
    pos = {tuple(r): i for i, r in enumerate(other[list(CELL_KEYS)].itertuples(index=False))}
    idx = [pos[tuple(r)] for r in cells[list(CELL_KEYS)].itertuples(index=False)]
    return values[idx]


def _replicated(df: pd.DataFrame, name: str, values: np.ndarray) -> pd.DataFrame:
    """Add ``name`` (full data) and, with replicates, ``name_mean/_lo/_hi``."""
    df[name] = values[:, 0]
    if values.shape[1] > 1:
        add_interval(df, name, values[:, 1:])
    return df


# ------------------------------------------------------------------ accuracy
def accuracy_batch(
    trials: pd.DataFrame, bootstrap: int = 0, seed: int = 0, resample: str = "pooled"
):
    """NRMSE of every cell and replicate: ``(cells, 1 + B)``.

    Over the trials with an observed response: ``RMSE(y, x) / RMSE(c, x)``.
    ``resample`` is the bootstrap scheme (:func:`bayesobs.bootstrap.run_draws`).

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (``baseline`` is added by
        :func:`with_baseline` when absent).
    bootstrap : int
        Session-run bootstrap replicates ``B`` (0: full data only).
    seed : int
        Bootstrap seed.
    resample : {"pooled", "stratified"}
        The bootstrap scheme.

    Returns
    -------
    cells : DataFrame
        ``subject, task, modality, condition`` of every cell, sorted.
    nrmse : numpy.ndarray
        ``(len(cells), 1 + B)``: column 0 the full data, then each replicate;
        NaN where no response was observed, infinite where the baseline has
        no error but the responses have some.

    Raises
    ------
    BayesobsInputError
        With ``bootstrap > 0``: an unknown ``resample``, or ``stratified``
        with fewer than 2 runs of a session type in some group.
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
    """``accuracy.csv``: ``subject, task, modality, condition, nrmse`` (+ interval).

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials.
    bootstrap : int
        Pooled session-run bootstrap replicates (0: no interval).
    seed : int
        Bootstrap seed.

    Returns
    -------
    DataFrame
        One row per cell: the cell keys and ``nrmse`` (full data), with
        ``bootstrap > 0`` also ``nrmse_mean``, ``nrmse_lo``, ``nrmse_hi``
        (the replicates' mean and 68% percentile interval).
    """
    cells, nrmse = accuracy_batch(trials, bootstrap, seed)
    return _replicated(cells, "nrmse", nrmse)


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
    bcs_extra: pd.DataFrame | None = None  # noise_text, cot: ablations outside the BCS
    hvs: pd.DataFrame | None = None  # HVSBench-style questions (task hvs): the Table 3 layout
    # perception tasks (bayesobs.tunnel.scores): accuracy, by problem size, covariate effects, F1, chains
    perception: pd.DataFrame | None = None
    perception_size: pd.DataFrame | None = None
    perception_effects: pd.DataFrame | None = None
    perception_f1: pd.DataFrame | None = None
    perception_chain: pd.DataFrame | None = None
    # Percept-V (task percept_v, bayesobs.perceptv.score): per domain, per skill, format errors
    perceptv_domains: pd.DataFrame | None = None
    perceptv_skills: pd.DataFrame | None = None
    perceptv_formats: pd.DataFrame | None = None
    # --logprobs runs: mean within-answer sd beside the best model's residual sd (bayesobs.scores.spread)
    answer_spread: pd.DataFrame | None = None
    # right/wrong paradigms with 3+ levels: psychometric functions (bayesobs.scores.psychometric)
    psychometric: pd.DataFrame | None = None
    # right/wrong paradigms with cot beside base: accuracy(cot) - accuracy(base) (bayesobs.scores.cot_accuracy)
    cot_accuracy: pd.DataFrame | None = None
    # the tables of registered paradigms (bayesobs.paradigms) that have no field above, by name
    plugins: dict[str, pd.DataFrame] | None = None

    def tables(self) -> dict[str, pd.DataFrame | None]:
        """Every table by name: the fields in order, then :attr:`plugins`' tables.

        Returns
        -------
        dict of str to DataFrame or None
            ``NAME -> table`` (None or a table without columns: not computed).
        """
        out = {name: getattr(self, name) for name in self._fields if name != "plugins"}
        return {**out, **(self.plugins or {})}

    def to_folder(
        self, out, trials: pd.DataFrame | None = None, manifest: dict | None = None
    ) -> list[str]:
        """Write every computed table as ``out/NAME.csv``; returns the names written.

        Each file is written atomically (:func:`bayesobs.trials.write_csv`).  With
        ``trials`` (the table that was scored, after any mapping and filtering),
        the folder also keeps it as ``out/trials.parquet``, so ``bayesobs report``
        rebuilds the figures from the folder alone, from any working directory.
        ``score_manifest.json`` records the provenance, the options given in
        ``manifest`` (bootstrap, seed, inputs...) and the trial counts.

        Parameters
        ----------
        out : str or pathlib.Path
            The output folder; created with its parents if absent.
        trials : DataFrame, optional
            The scored trial table, kept as ``trials.parquet`` (its counts
            ``n_trials`` and ``n_missing`` go into the manifest).
        manifest : dict, optional
            Further fields of ``score_manifest.json``.

        Returns
        -------
        list of str
            The table names written (``NAME`` of ``NAME.csv``; a table
            without columns is not written), then ``trials.parquet`` when
            ``trials`` was given.
        """
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, table in self.tables().items():
            if table is not None and len(table.columns):  # no columns: not computed
                write_csv(table, out / f"{name}.csv")
                written.append(name)
        if trials is not None:
            _write_scored_trials(trials, out / SCORED_TRIALS)
            written.append(SCORED_TRIALS)

        counts = {}
        if trials is not None:
            counts = {"n_trials": len(trials), "n_missing": int(trials["response"].isna().sum())}
        write_manifest(out / "score_manifest.json", "score", **{**(manifest or {}), **counts})
        return written

    @classmethod
    def from_folder(cls, folder) -> Scores | None:
        """The tables of a ``bayesobs score`` output folder, or None if it is not one.

        Parameters
        ----------
        folder : str or pathlib.Path
            A folder written by :meth:`to_folder`.

        Returns
        -------
        Scores or None
            Every ``NAME.csv`` read back (``subject`` and ``task`` as text);
            an absent or empty file gives a table without columns, or None
            for the search, HVS, perception, Percept-V, ``answer_spread``,
            ``psychometric`` and ``cot_accuracy`` tables.  None when the
            folder has none of ``bayesbench.csv``, ``search.csv``,
            ``perception.csv`` and ``hvs.csv``.
        """
        folder = Path(folder)
        own = [n for n in table_names() if n not in cls._fields]  # plug-ins' tables
        if not any(
            (folder / f"{n}.csv").exists()
            for n in ("bayesbench", "search", "perception", "hvs", *own)
        ):
            return None
        tables = {}
        for name in (*(f for f in cls._fields if f != "plugins"), *own):
            p = folder / f"{name}.csv"
            try:
                tables[name] = (
                    pd.read_csv(p) if p.exists() and p.stat().st_size > 1 else pd.DataFrame()
                )
            except (UnicodeDecodeError, pd.errors.ParserError) as exc:
                reason = str(exc).strip().splitlines()[-1]
                raise BayesobsInputError(f"{p}: not a readable score table ({reason})") from None
        for name in (*table_names(), "answer_spread", "psychometric", "cot_accuracy"):
            if tables[name].empty and not len(tables[name].columns):
                tables[name] = None
        for name in ("subject", "task"):  # keys stay text (e.g. subject "007")
            for t in tables.values():
                if t is not None and name in t:
                    t[name] = t[name].astype(str)
        plugins = {n: tables.pop(n) for n in own if tables[n] is not None}
        return cls(**tables, plugins=plugins or None)


SCORED_TRIALS = "trials.parquet"  # the scored trial table inside a score folder


def _write_scored_trials(trials: pd.DataFrame, path) -> None:
    """The scored trials as Parquet, atomically; mixed-type text columns kept as text."""
    t = trials.copy()
    for col in [c for c in t.columns if pd.api.types.is_object_dtype(t[c].dtype)]:
        t[col] = t[col].map(
            lambda v: (
                v
                if v is None or isinstance(v, str) or (isinstance(v, float) and v != v)
                else _json.dumps(v)
                if isinstance(v, (list, dict))
                else str(v)
            )
        )
    tmp = path.with_name(path.name + ".part")
    t.to_parquet(tmp, index=False)
    tmp.replace(path)


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
            with warnings.catch_warnings():
                # a replicate drawing only runs without a response: NaN, as in bootstrap.interval
                warnings.simplefilter("ignore", RuntimeWarning)
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
            if np.isnan(E[0]):  # say why E (and with it S) is not computed
                exact = (cue_vals["nrmse_multimodal"][idx, 0] == 0).any()
                missing.append((subject, "", "E", PERFECT_REASON if exact else "an RRE is NaN"))
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
                    [nansum_or_nan(bcs_vals["s_p"][sel])],
                    nansum_or_nan(bcs_vals["s_robust"][sel, 1:]),
                ]
            )
        else:
            BCS_p = np.full(R, np.nan)
        if np.isnan(S[0]) and not np.isnan(A[0] + C[0]) and np.isnan(E[0]):
            missing.append((subject, "", "S", "needs E, which is not computed (see E)"))
        C_p = (BCS_p + BCS_MAX) / (2 * BCS_MAX)
        S_p = (A + E + C_p) / 3
        rows.append(
            (
                subject,
                {
                    "A": A,
                    "E": E,
                    "C": C,
                    "S": S,
                    "BCS": BCS,
                    "BCS_p": BCS_p,
                    "C_p": C_p,
                    "S_p": S_p,
                },
            )
        )
    out = pd.DataFrame({"subject": [r[0] for r in rows]})
    for name in SUMMARY:
        out[name] = [r[1][name][0] for r in rows]
    if B:
        for name in SUMMARY:
            add_interval(out, name, np.array([r[1][name][1:] for r in rows]).reshape(len(rows), B))
    for name in ROBUST:  # after every contract column
        out[name] = [r[1][name][0] for r in rows]
    if B:
        for name in ROBUST:
            add_interval(out, name, np.array([r[1][name][1:] for r in rows]).reshape(len(rows), B))
    return out


def bias_variance(trials: pd.DataFrame) -> pd.DataFrame:
    """Per cell: mean squared error of the responses and its split into bias² and variance.

    ``mse = bias2 + variance`` with ``bias2 = mean(y - x)^2`` and
    ``variance = mean((y - x - mean(y - x))^2)``, over observed responses.

    Parameters
    ----------
    trials : DataFrame
        Normalised magnitude trials (the cell keys, ``stimulus``,
        ``response``).

    Returns
    -------
    DataFrame
        ``subject, task, modality, condition, bias2, variance, mse`` (squared
        stimulus units), one row per cell with an observed response.
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
        per = {
            n: np.array(
                [
                    np.nanmean(r[1][n], axis=0)
                    if n in r[1] and len(r[1][n])
                    else np.full(1 + B, np.nan)
                    for r in rows
                ]
            )
            for n in names
        }
    for n in names:
        out[n] = per[n][:, 0]
    if B:
        for n in names:
            add_interval(out, n, per[n][:, 1:])
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
    options: FitOptions | None = None,
    references: bool = False,
    humans=(),
    aside: AsideWorker | None = None,
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
    options : FitOptions, optional
        ``bootstrap``, ``seed``, ``progress``, ``resample``, ``interleaved``
        and ``lapse`` at once (checked once); when given, those keywords are
        not read.
    references : bool
        Add the reference rows ``reference:random`` and ``reference:ideal``
        to ``bayesbench`` (:mod:`bayesobs.scores.references`), scored by this same
        function on the same cells; a ``reference`` column marks them.
    humans : sequence of str
        Glob patterns of subject ids that are human participants: their rows
        in ``bayesbench`` are marked ``reference = human`` (never ranked)
        and their trials pooled give the row ``reference:humans``.
    aside : AsideWorker, optional
        A process already started for this call's work of plain Python (the
        ``score`` command starts one before it reads a large input): the cue
        probe's forests, then the reference rows, run there while the
        observers are fitted here.  Default: a process started here for a
        probe of :data:`~bayesobs.scores.cue.PROBE_ASIDE_MIN_GROUPS` groups
        or more (the reference rows follow the forests into it).  The
        numbers are the same wherever they are computed.

    Returns
    -------
    Scores
        DataFrames; ``missing`` lists what could not be computed and why.
        Visual-search trials (with ``set_size`` and ``correct``) are scored
        by :func:`bayesobs.search.scores.search_scores` into ``search``,
        ``search_accuracy`` and ``search_bias``; HVSBench-style trials (paradigm
        ``hvs``) by :func:`bayesobs.hvs.logged.hvs_scores` into ``hvs``; the
        other tables come from the magnitude trials.  Search and perception
        trials with 3+ levels also get ``psychometric``
        (:func:`bayesobs.scores.psychometric.psychometric_scores`).
    """
    opts = fit_options(
        options,
        bootstrap=bootstrap,
        seed=seed,
        progress=progress,
        resample=resample,
        interleaved=interleaved,
        lapse=lapse,
    )
    seed = opts.seed
    trials = normalize_trials(trials)
    subjects = trials["subject"].astype(str).unique()
    for pattern in humans or ():  # a pattern that matches nobody is a typo, not "no humans"
        if not human_subjects(subjects, [pattern]):
            shown = ", ".join(sorted(subjects, key=natural_key)[:5])
            raise BayesobsInputError(
                f"--humans {pattern!r} matches no subject (a glob such as 'P*'; subjects: "
                f"{shown}{', ...' if len(subjects) > 5 else ''})"
            )
    # the registered paradigms (bayesobs.paradigms) each score their own rows (one that is
    # part of another shares its rows); what none claims is magnitude trials
    found, claimed = pd.Series(False, index=trials.index), []
    for paradigm in registered():
        rows = paradigm.rows(trials) & (True if paradigm.part_of else ~found)
        if rows.any():
            claimed.append((paradigm, rows))
            found = found | rows
    magnitude = prepared = paired = probe_run = None
    if not found.all():
        magnitude = trials[~found]
        prepared = with_baseline(magnitude.reset_index(drop=True))
        paired = paired_trials(prepared)  # once, for the cue combination and the probe
        # the probe's forests first: on the second core (start_cue_probe) while the rest runs
        probe_run = start_cue_probe(prepared, seed, paired=paired, worker=aside) if probe else None
    # start-up time: `import bayesobs` stays light (the search and perception scorers)
    from .psychometric import start_psychometric_scores, with_psychometric

    # search and perception levels (as many bootstrap data sets as the rest); missing rows;
    # many groups are fitted on the second core meanwhile (start_psychometric_scores)
    psych_run = start_psychometric_scores(trials, bootstrap=opts.bootstrap, seed=seed)
    cot_acc = cot_accuracy(trials, seed=seed)  # right/wrong paradigms: cot beside base
    plugins, extra = {}, {}
    for paradigm, rows in claimed:
        for name, table in paradigm_tables(paradigm, trials[rows]).items():
            (extra if name in Scores._fields else plugins)[name] = table
    if magnitude is None:
        # no magnitude trials: those tables are empty; search/perception ones absent unless found
        empty = {
            name: pd.DataFrame()
            for name in Scores._fields
            if name not in (*table_names(), "cot_accuracy", "plugins")
        }
        return with_psychometric(Scores(**{**empty, **extra}), *psych_run.result())._replace(
            cot_accuracy=cot_acc, plugins=plugins or None
        )
    # the reference rows after the forests, in their process if they have one
    worker = aside if aside is not None and aside.aside else None
    if worker is None and probe_run is not None:
        worker = probe_run.worker
    ref_run = None
    if references or humans:
        ref_run = worker or AsideWorker(start=False)  # without a process: computed at result()
        ref_index = ref_run.submit(
            _reference_task, (magnitude, humans, references, opts, non_oracle)
        )
    try:
        res = _magnitude_scores(prepared, opts, non_oracle, paired, probe_run)
        if opts.resample == "pooled" and opts.bootstrap > 0 and few_runs_cells(magnitude).empty:
            # issue 28: every cell can be resampled within its session types, so the
            # stratified intervals go beside the paper's pooled ones (bayesbench.csv)
            strat = _magnitude_scores(
                prepared, replace(opts, resample="stratified"), non_oracle, paired, None
            )
            res = res._replace(bayesbench=with_stratified(res.bayesbench, strat.bayesbench))
        if ref_run is not None:
            ref_bb, human_ids = ref_run.result(ref_index)
            res = res._replace(bayesbench=with_references(res.bayesbench, ref_bb, human_ids))
            if references and not prompted(magnitude, human_ids).any():  # people: issue 47
                row = [(f"{PREFIX}ideal", "", "reference", IDEAL_WITHHELD)]
                missing = [*res.missing.itertuples(index=False, name=None), *row]
                res = res._replace(missing=pd.DataFrame(missing, columns=res.missing.columns))
    finally:
        if probe_run is not None:
            probe_run.close()
    return with_psychometric(
        res._replace(**extra, cot_accuracy=cot_acc, plugins=plugins or None), *psych_run.result()
    )


def paradigm_tables(paradigm, trials: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """A registered paradigm's score tables from its rows, checked against the names it declares.

    Parameters
    ----------
    paradigm : bayesobs.paradigms.Paradigm
        The paradigm.
    trials : DataFrame
        Its rows of the (normalised) trial table.

    Returns
    -------
    dict of str to DataFrame
        ``paradigm.analysis(trials)``.

    Raises
    ------
    ValueError
        A table the paradigm does not declare in ``tables``, or not a DataFrame.
    """
    out = paradigm.analysis(trials)
    for name, table in out.items():
        if name not in paradigm.tables or not isinstance(table, pd.DataFrame):
            raise ValueError(
                f"paradigm {paradigm.name}: its analysis returned {name!r}, not one of its "
                f"declared tables ({', '.join(paradigm.tables)}) as a DataFrame"
            )
    return out


def _reference_task(args) -> tuple[pd.DataFrame | None, list]:
    """The reference rows' ``bayesbench`` (None if none) and the human subjects, for :func:`score`.

    ``args`` is ``(magnitude, patterns, references, opts, non_oracle)``: the
    reference rows are scored by :func:`score` on the same cells (here or
    in the process of the cue probe's forests).
    """
    magnitude, patterns, references, opts, non_oracle = args
    humans = human_subjects(magnitude["subject"].unique(), patterns)
    kinds = ("random", "ideal") if references else ()
    refs = reference_trials(magnitude, opts.seed, humans, kinds)
    ref_bb = None
    if len(refs):
        ref_bb = score(refs, probe=False, non_oracle=non_oracle, options=opts).bayesbench
    return ref_bb, humans


def with_stratified(pooled: pd.DataFrame, stratified: pd.DataFrame) -> pd.DataFrame:
    """``pooled`` with ``NAME_strat_lo``/``NAME_strat_hi`` from a stratified bootstrap's table.

    For each BayesBench number with an interval (``NAME_lo`` in both), after
    every other column; rows are matched by ``subject``.

    Parameters
    ----------
    pooled : DataFrame
        A ``bayesbench`` table from the pooled bootstrap (not changed).
    stratified : DataFrame
        The ``bayesbench`` table of the same trials from the stratified
        bootstrap.

    Returns
    -------
    DataFrame
        A copy of ``pooled`` with the ``_strat_lo``/``_strat_hi`` columns
        (NaN for a subject the stratified table lacks).
    """
    out = pooled.copy()
    other = stratified.set_index("subject")
    for name in (*SUMMARY, *ROBUST):
        if f"{name}_lo" in out and f"{name}_lo" in other:
            for end in ("lo", "hi"):
                out[f"{name}_strat_{end}"] = out["subject"].map(other[f"{name}_{end}"])
    return out


def _magnitude_scores(trials, opts: FitOptions, non_oracle, paired, probe_run) -> Scores:
    """Every table of the magnitude trials (``with_baseline``, index from 0).

    ``paired`` is :func:`paired_trials` of ``trials``; ``probe_run`` the
    started cue probe (:func:`start_cue_probe`), or None for no probe.
    """
    B, seed, resample, interleaved = opts.bootstrap, opts.seed, opts.resample, opts.interleaved
    level_batch = fit_batch(trials, options=opts)
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
    cue_groups, cue_vals, cue_missing = cue_batch(trials, B, seed, non_oracle, resample, paired)
    cue = cue_frame(cue_groups, cue_vals)
    bcs_rows, bcs_vals, bcs_missing = bcs_batch(batch.cells, w_prior)
    bcs = bcs_rows[["subject", "task", "ablation"]].copy()
    for name in ("w_base", "w_ablation", "s"):
        bcs[name] = bcs_vals[name][:, 0]
    bcs["delta_w"] = bcs_vals["delta_w"][:, 0]
    if B:
        for name in ("w_base", "w_ablation", "s", "delta_w"):
            add_interval(bcs, name, bcs_vals[name][:, 1:])
    bcs["s_p"] = bcs_vals["s_p"]  # METHOD §9, after every other column
    groups, per_task = sum_by(bcs_rows, ["subject", "task"], bcs_vals["s"])
    bcs_tasks = groups.assign(
        n_ablations=bcs_rows.groupby(["subject", "task"], sort=True).size().to_numpy()
    )
    bcs_tasks = _replicated(bcs_tasks, "bcs", per_task)
    codes = bcs_rows.groupby(["subject", "task"], sort=True).ngroup().to_numpy()
    bcs_tasks["bcs_p"] = [
        float(nansum_or_nan(bcs_vals["s_p"][codes == i])) for i in range(len(groups))
    ]
    bcs_extra = extra_ablations(batch.cells, w_prior, acc_cells, nrmse)
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
    probe_table, probe_skipped = (
        probe_run.result() if probe_run is not None else (pd.DataFrame(), None)
    )
    if probe_skipped is not None:
        missing += [tuple(r) for r in probe_skipped.itertuples(index=False)]
    subjects = sorted(trials["subject"].unique())
    bayesbench = _composite(
        subjects, acc_cells, nrmse, cue_groups, cue_vals, bcs_rows, bcs_vals, B, missing
    )

    fits = fits_table(level_batch)
    return Scores(
        fits=fits,
        evidence=evidence_table(level_batch, trials),
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
        answer_spread=answer_spread(trials, fits) if "response_sd" in trials else None,
    )
