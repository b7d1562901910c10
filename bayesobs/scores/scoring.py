"""``score()``: every BayesBench number for a trial table, the magnitude tables and the rest."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..bootstrap import add_interval
from ..errors import BayesobsInputError
from ..fits.controls import controls_table, fit_controls
from ..fits.fitoptions import FitOptions, fit_options
from ..fits.fitresults import collapse_levels, fits_table
from ..fits.fitting import fit_batch
from ..fits.observers.variants import FACTORS, VARIANT_NAMES
from ..paradigms import registered, table_names
from ..parse import invalid_reply_rows
from ..trials import CELL_KEYS, natural_key, normalize_trials
from .accuracy import accuracy_batch, replicated, with_baseline
from .bcs import EXTRA_ABLATIONS, bcs_agreement, bcs_batch, extra_ablations, nansum_or_nan, sum_by
from .composite import ROBUST, SUMMARY, composite, subject_summary
from .cot_accuracy import cot_accuracy
from .cue import cue_batch, cue_frame, cue_probe, paired_trials
from .degenerate import CONSTANT_REASON, FEW_RUNS_REASON, constant_cells, few_runs_cells
from .evidence import evidence_table, factor_evidence_array
from .references import (
    IDEAL_WITHHELD,
    PREFIX,
    human_subjects,
    prompted,
    reference_trials,
    with_references,
)
from .results import Scores
from .spread import answer_spread


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
    magnitude = prepared = paired = probed = None
    if not found.all():
        magnitude = trials[~found]
        prepared = with_baseline(magnitude.reset_index(drop=True))
        paired = paired_trials(prepared)  # once, for the cue combination and the probe
        if probe:
            probed = cue_probe(prepared, seed, ("base",), 5, paired)
    # start-up time: `import bayesobs` stays light (the search and perception scorers)
    from .psychometric import psychometric_scores, with_psychometric

    # search and perception levels (as many bootstrap data sets as the rest); missing rows
    psych = psychometric_scores(trials, opts.bootstrap, seed)
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
        return with_psychometric(Scores(**{**empty, **extra}), *psych)._replace(
            cot_accuracy=cot_acc, plugins=plugins or None
        )
    res = _magnitude_scores(prepared, opts, non_oracle, paired, probed)
    if opts.resample == "pooled" and opts.bootstrap > 0 and few_runs_cells(magnitude).empty:
        # issue 28: every cell can be resampled within its session types, so the
        # stratified intervals go beside the paper's pooled ones (bayesbench.csv)
        strat = _magnitude_scores(
            prepared, replace(opts, resample="stratified"), non_oracle, paired, None
        )
        res = res._replace(bayesbench=with_stratified(res.bayesbench, strat.bayesbench))
    if references or humans:
        ref_bb, human_ids = _reference_rows(magnitude, humans, references, opts, non_oracle)
        res = res._replace(bayesbench=with_references(res.bayesbench, ref_bb, human_ids))
        if references and not prompted(magnitude, human_ids).any():  # people: issue 47
            row = [(f"{PREFIX}ideal", "", "reference", IDEAL_WITHHELD)]
            missing = [*res.missing.itertuples(index=False, name=None), *row]
            res = res._replace(missing=pd.DataFrame(missing, columns=res.missing.columns))
    return with_psychometric(
        res._replace(**extra, cot_accuracy=cot_acc, plugins=plugins or None), *psych
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


def _reference_rows(magnitude, patterns, references, opts, non_oracle):
    """The reference rows' ``bayesbench`` (None if none) and the human subjects, for :func:`score`."""
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


def _magnitude_scores(trials, opts: FitOptions, non_oracle, paired, probed) -> Scores:
    """Every table of the magnitude trials (``with_baseline``, index from 0)."""
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
    accuracy = replicated(acc_cells.copy(), "nrmse", nrmse)
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
    bcs_tasks = replicated(bcs_tasks, "bcs", per_task)
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
    probe_table, probe_skipped = probed if probed is not None else (pd.DataFrame(), None)
    if probe_skipped is not None:
        missing += [tuple(r) for r in probe_skipped.itertuples(index=False)]
    subjects = sorted(trials["subject"].unique())
    bayesbench = composite(
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
        summary=subject_summary(
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


def _degenerate_missing(trials: pd.DataFrame, B: int) -> tuple[pd.DataFrame, list[tuple]]:
    """Constant cells and, with a bootstrap, cells with too few runs: ``missing.csv`` rows."""
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
