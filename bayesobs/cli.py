"""Command-line interface: argument parsing and printing over the library.

Each command parses its arguments, calls the library function a notebook
would call (``fit``: :func:`bayesobs.fits.fitting.fit_batch` and
:func:`bayesobs.report.posterior.write_outputs`; ``score``: :func:`bayesobs.score`
and :meth:`bayesobs.Scores.to_folder`; ``run``/``sweep``:
:func:`bayesobs.run.runner.run_task`/:func:`bayesobs.run.runner.sweep`; ``rescore``:
:func:`bayesobs.rescore_folder`; ``report``:
:func:`bayesobs.report.build_report`; ``compare``:
:func:`bayesobs.compare.run_compare`; ``calibrate``:
:func:`bayesobs.calibration.calibrate`; ``serve``, ``export``, ``simulate``)
and prints a summary.  Bad input exits with status 2 and a one-line message,
never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .errors import BayesobsInputError, FatalSubjectError
from .jsonl import trial_file
from .logprobs import MAX_TOP_LOGPROBS, RESPONSES
from .run import DEFAULT_MAX_CONCURRENCY  # not .run.concurrency: no asyncio at start-up
from .run.imagecost import DEFAULT_IMAGE_DETAIL, IMAGE_DETAILS, IMAGE_MODES
from .run.reasoning import DEFAULT_REASONING_BUDGET, MAX_REASONING_BUDGET, TOKEN_PARAMS


def _add_trial_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "trials",
        nargs="+",
        metavar="TRIALS",
        help="CSV, TSV, Parquet, JSONL file(s) or experiment folder(s)",
    )
    p.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="NEW=OLD",
        help="take column NEW from column (or expression, never run as Python) OLD; repeatable, "
        "e.g. --map stimulus=dur --map response=repDur --map subject=NSub --map run=NB",
    )
    p.add_argument(
        "--where", metavar="EXPR", help='keep only rows where EXPR holds, e.g. "valid == 1"'
    )
    p.add_argument(
        "--missing-where",
        metavar="EXPR",
        help="treat the response as missing where EXPR holds (the trial stays in the "
        'observer\'s sequence), e.g. "valid == 0"',
    )
    p.add_argument(
        "--columns",
        metavar="NAME,NAME,...",
        help="name every field of the CSV input(s) and ignore their header line, for files "
        "whose header names fewer fields than the rows hold (a ragged CSV is otherwise an error)",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="RULE",
        help="exclusion rule NAME OP NUMBER, repeatable: a participant measure such as "
        '"catch_error_rate > 0.2" removes that participant, a trial column such as '
        '"rt_client_s < 0.2" each trial; catch trials are never fitted; written to exclusions.csv',
    )
    p.add_argument(
        "--wide",
        metavar="GLOB,GLOB",
        help="one response column per participant (e.g. NC*,VN*): read as subject (the "
        "column's name) and response, one row per participant and row, in file order",
    )
    p.add_argument(
        "--no-order",
        action="store_true",
        help="the rows are not in the order of presentation (e.g. grouped by condition): "
        "the sequential outputs (Kalman, P(sequential), anchoring) say so",
    )
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        metavar="B",
        help="session-run bootstrap replicates (fit: 0, score: 30)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--interleaved",
        metavar="COL",
        help="COL's levels alternate trial by trial inside a run (e.g. two motion "
        "coherences): keep each run whole and fit per-level parameters (METHOD §10)",
    )
    p.add_argument(
        "--lapse",
        action="store_true",
        help="add a uniform lapse rate (0 to 0.2) to every variant, fitted by EM (METHOD §11)",
    )
    p.add_argument(
        "--resample",
        choices=("pooled", "stratified"),
        default="pooled",
        help="bootstrap scheme: pooled (the paper's, default) draws runs from all session types; "
        "stratified draws runs within each session type (needs 2+ runs of every type)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _progress(args) -> bool:
    """A progress bar only for people watching a terminal."""
    return not args.no_progress and sys.stderr.isatty()


# `score` and `fit` of inputs this large (bytes of trial files: about 70,000 trials in
# Parquet, 7,000 in a run log) start a worker process before reading (cmd_score, cmd_fit)
WORKER_INPUT_BYTES = 1_000_000


def _input_bytes(paths) -> int:
    """The size of the files ``read_trials`` reads for ``paths`` (0 for one that is missing)."""
    total = 0
    for path in map(Path, paths):
        try:
            total += trial_file(path).stat().st_size
        except OSError:  # missing or unreadable: _read says so
            continue
    return total


def _read(args):
    """Validate the trial options, read the trials and apply ``--exclude``.

    Returns the kept trials and the exclusions table (``None`` when the data
    hold no catch trials and no rule was given: no ``exclusions.csv``).
    """
    from .exclusions import exclude, parse_rule, summary
    from .limits import check
    from .trials import catch_rows, parse_mapping, read_trials

    if getattr(args, "bootstrap", 0) < 0:
        raise BayesobsInputError("--bootstrap must be 0 or more")
    check("bootstrap", getattr(args, "bootstrap", 0), "--bootstrap asks for")
    rules = [parse_rule(r) for r in args.exclude]  # refused before any reading
    trials = read_trials(
        args.trials,
        mapping=parse_mapping(args.map),
        where=args.where,
        missing_where=args.missing_where,
        columns=args.columns.split(",") if args.columns else None,
        keep_catch=True,
        wide=args.wide,
    )
    if args.no_order:  # issue 47: every sequential output says so (bayesobs.order)
        trials["no_trial_order"] = True
    if not rules and not catch_rows(trials).any():
        return trials, None
    from .leaderboard import wrap
    from .trials import normalize_trials

    kept, table = exclude(trials, rules)
    # number the trials of each run again without the catch trials between them
    kept = normalize_trials(kept)

    print(wrap(summary(table)))
    return kept, table


def _write_exclusions(table, out: Path) -> list[str]:
    """Write ``exclusions.csv`` into ``out`` when there is an exclusions table."""
    if table is None:
        return []
    from .trials import write_csv

    out.mkdir(parents=True, exist_ok=True)
    write_csv(table, out / "exclusions.csv")
    return ["exclusions"]


def _trial_options(args, **extra) -> dict:
    """The options of a command that reads trials, for its manifest: inputs and trial options."""
    return dict(
        inputs=[str(p) for p in args.trials],
        map=args.map,
        where=args.where,
        missing_where=args.missing_where,
        columns=args.columns,
        wide=args.wide,
        no_order=args.no_order,
        exclude=args.exclude,
        interleaved=args.interleaved,
        lapse=args.lapse,
        bootstrap=args.bootstrap,
        seed=args.seed,
        resample=args.resample,
        **extra,
    )


def _fit_posterior(args, trials, fits, out: Path) -> None:
    """``fit --method posterior``: the library writes the outputs; here they are printed."""
    from .compile_cache import enable
    from .report.posterior import write_outputs

    enable()  # JAX's persistent compilation cache (issue 32 §3)

    loo, notes = write_outputs(
        trials,
        fits,
        out,
        variants=args.variant,
        hierarchical=args.hierarchical,
        chains=args.chains,
        warmup=args.warmup,
        draws=args.draws,
        seed=args.seed,
        progress=_progress(args),
    )
    for n in notes:
        print(f"warning: {n}", file=sys.stderr)
    if args.prior_predictive:
        from .fits.posterior import prior_predictive
        from .trials import write_csv

        pp = prior_predictive(trials, variants=args.variant, seed=args.seed)
        write_csv(pp, out / "prior_predictive.csv")
        missed = pp[~pp["covers"]] if len(pp) else pp
        print(
            f"prior predictive: {len(pp) - len(missed)} of {len(pp)} (cell, variant) fit(s) cover "
            "the observed response range (1% quantile of simulated minima, 99% of maxima)"
            + (f"; not covered: {', '.join(sorted(set(missed['variant'])))}" if len(missed) else "")
            + f" -> {out}/prior_predictive.csv"
        )
    high_k = loo["pareto_k_over_0.7"] if len(loo) else []
    print(
        f"posterior fits -> {out}/posterior.csv, {out}/loo.csv, {out}/bcs_posterior.csv, "
        f"{out}/posterior/*.nc; Pareto k > 0.7: {int(sum(high_k))} observation(s) in "
        f"{int(sum(k > 0 for k in high_k))} fit(s)"
    )


def _fit_options(args):
    """The :class:`~bayesobs.fits.fitoptions.FitOptions` of ``fit`` and ``score``, built once."""
    from .fits.fitoptions import FitOptions

    return FitOptions(
        bootstrap=args.bootstrap,
        seed=args.seed,
        progress=_progress(args),
        resample=args.resample,
        interleaved=args.interleaved,
        lapse=args.lapse,
    )


def cmd_fit(args) -> int:
    """``bayesobs fit``: maximum-likelihood (and optionally posterior) fits of every cell.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs fit`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status, 0; the tables go to ``args.out`` (``fits.csv``,
        ``evidence.csv``, their manifest and, where asked, the posterior,
        transfer and exclusions files) and a summary to stdout.

    Raises
    ------
    BayesobsInputError
        An unknown ``--variant``, ``--prior-predictive`` without ``--method
        posterior``, ``--method posterior`` with ``--interleaved`` or
        ``--lapse``, a bad ``--transfer``, a negative ``--bootstrap``, or
        trial files or trial options that cannot be read.
    """
    _check_fit_options(args)
    transfer = _transfer_spec(args)
    t0 = time.perf_counter()
    from .distributed import imports, release, submit

    # a large input: a worker for the log scale's Kalman fits starts now, its imports
    # (pandas, SciPy: ~1 s) beside this one's imports and reading (fit_batch uses it)
    big = not args.interleaved and _input_bytes(args.trials) >= WORKER_INPUT_BYTES
    submit(imports, "bayesobs.fits.kernel", worth=big, workers=1)
    try:
        from .api import fit_result, write_fit

        trials, exclusions = _read(args)
        trials = _fit_trials(trials, transfer)
        result = fit_result(trials, _fit_options(args), response=args.response, normalized=True)
    finally:
        release()
    if args.response == "expected":
        n = result.n_without_expected
        print(
            "fitting response_expected, the mean of each answer's distribution (--logprobs)"
            + (f"; {n} trial(s) without one kept in sequence as missing" if n else "")
        )
    options = _trial_options(args, seconds=round(time.perf_counter() - t0, 3))
    summary = write_fit(result, args.out, manifest=options)
    _write_exclusions(exclusions, args.out)
    if args.method == "posterior":
        _fit_posterior(args, result.trials, result.fits, args.out)
    if _print_fit(args, trials, result, summary, exclusions is not None) and transfer:
        _write_transfer(result.trials, result.fits, transfer, args.out)
    return 0


def _fit_trials(trials, transfer):
    """The magnitude trials ``fit`` fits (a note on the others), checked for ``--transfer``."""
    from .api import magnitude_trials

    trials, left_out = magnitude_trials(trials)
    if transfer:
        from .fits.transfer import check_conditions

        check_conditions(trials, *transfer)
    if left_out:
        print(
            f"note: {left_out} visual-search/perception trial(s) left out of the fits "
            "(see bayesobs score)"
        )
    return trials


def _check_fit_options(args) -> None:
    """``fit``'s option combinations, refused before any reading."""
    if args.variant:
        from .fits.observers import get_variant

        for v in args.variant:
            try:
                get_variant(v)
            except ValueError as exc:
                raise BayesobsInputError(str(exc)) from None
    if args.prior_predictive and args.method != "posterior":
        raise BayesobsInputError("--prior-predictive checks the priors of --method posterior")
    if args.method == "posterior" and (args.interleaved or args.lapse):
        raise BayesobsInputError(
            "--method posterior does not model --interleaved levels or --lapse yet; "
            "use the maximum-likelihood fits for those"
        )


def _print_fit(args, trials, result, summary: dict, exclusions: bool) -> bool:
    """What ``bayesobs fit`` prints after writing its tables; whether anything was fitted."""
    n_missing, n_trials = summary["n_missing"], summary["n_trials"]
    skipped_log, n_constant, levels = (
        summary["log_skipped"],
        summary["n_constant"],
        summary["levels"],
    )
    if n_trials and n_missing == n_trials:  # issue 47: no answer parsed, nothing to read
        print(
            f"0 observed responses: nothing fitted ({n_trials} trial(s), every response missing; "
            f"see raw_response, or bayesobs rescore) -> {args.out}/fits.csv"
        )
        return False
    print(
        f"fitted {summary['n_cells']} cell(s), {n_trials} trials "
        + (f"with {len(levels)} interleaved level(s) of {args.interleaved} " if levels else "")
        + f"({n_missing} missing response(s) kept in sequence, excluded from likelihoods)"
        + (
            f", log variants skipped in {skipped_log} cell(s) (see cells.csv)"
            if skipped_log
            else ""
        )
        + (
            f", {n_constant} cell(s) with constant responses not fitted (no evidence; "
            "see cells.csv)"
            if n_constant
            else ""
        )
        + f" -> {args.out}/fits.csv, {args.out}/evidence.csv"
        + (f", {args.out}/exclusions.csv" if exclusions else "")
    )
    from .leaderboard import wrap
    from .order import order_lines, unordered
    from .trials import RUN_KEYS, parse_mapping, runs_summary

    print(wrap(runs_summary(trials, parse_mapping(args.map))))
    if not unordered(trials).any():  # the evidence notes say it where the order is unknown
        for line in order_lines(trials, RUN_KEYS):
            print(wrap(f"note: {line}"))
    for line in summary["evidence_notes"]:
        print(wrap(f"note: {line}"))
    for line in fit_bootstrap_warnings(result.trials, result.batch.cells, args.bootstrap):
        print(wrap(f"warning: {line}"), file=sys.stderr)
    return True


def _transfer_spec(args) -> tuple[str, str] | None:
    """``fit --transfer A:B`` checked before any reading: ``(A, B)`` or ``None``."""
    if not getattr(args, "transfer", None):
        return None
    from .fits.transfer import parse_transfer

    if args.interleaved:
        raise BayesobsInputError(
            "--transfer with --interleaved: transfer applies one parameter set per cell; "
            "fit the interleaved levels without --transfer"
        )
    return parse_transfer(args.transfer)


def _write_transfer(trials, fits, transfer: tuple[str, str], out: Path) -> None:
    """Write ``transfer.csv`` and print its one-line summary."""
    from .fits.transfer import transfer_summary, transfer_table
    from .trials import write_csv

    table = transfer_table(trials, fits, *transfer)
    write_csv(table, out / "transfer.csv")
    print(f"{transfer_summary(table, *transfer)} -> {out}/transfer.csv")


def fit_bootstrap_warnings(trials, cells, bootstrap: int) -> list[str]:
    """``fit --bootstrap`` on cells with too few runs: what ``score`` says, and the empty intervals.

    Parameters
    ----------
    trials : DataFrame
        The fitted magnitude trials.
    cells : DataFrame
        The fitted cells (``subject``, ``task``, ``modality``, ``condition``,
        ``n_runs``) of :func:`bayesobs.fits.fitting.fit_batch`.
    bootstrap : int
        The ``--bootstrap`` replicates (0: no warning).

    Returns
    -------
    list of str
        One warning line (cells with fewer than 2 runs of a session type,
        and how many have a single run, so empty intervals), or none.
    """
    if not bootstrap:
        return []
    from .scores import FEW_RUNS_REASON, few_runs_cells

    few = few_runs_cells(trials)
    if not len(few):
        return []
    one = cells.drop_duplicates(["subject", "task", "modality", "condition"])
    n_one = int((one["n_runs"] < 2).sum())
    line = (
        f"{FEW_RUNS_REASON} in {len(few)} of {len(one)} cell(s): the bootstrap intervals rest on "
        "few distinct resamples (pooled draws mix session types)"
    )
    if n_one:
        line += (
            f"; {n_one} cell(s) have a single run, so no resampling: their p_mean, p_lo, p_hi "
            "are left empty (evidence.csv interval_note)"
        )
    return [line]


def leaderboard(bayesbench, missing=None, resample: str | None = "pooled") -> str:
    """Plain-text leaderboard: subjects by S.

    Each number's point estimate beside its bootstrap mean and 68% interval,
    the paper's numbers then S_p and BCS_p, one line on why point and
    interval can differ, and warnings from ``missing`` (constant responders,
    fewer than 2 runs per session type).

    Parameters
    ----------
    bayesbench : DataFrame
        A ``bayesbench`` table.
    missing : DataFrame, optional
        ``missing.csv`` rows.
    resample : str or None
        The bootstrap scheme of the intervals (None: not known).

    Returns
    -------
    str
        :func:`bayesobs.leaderboard.leaderboard_text`.
    """
    from .leaderboard import leaderboard_text

    return leaderboard_text(bayesbench, missing, resample=resample)


def cmd_score(args) -> int:
    """``bayesobs score``: accuracy, BCS, cue combination and the BayesBench composite.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs score`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status, 0; every table of :func:`bayesobs.scores.score` goes
        to ``args.out`` (:meth:`bayesobs.scores.Scores.to_folder`), the
        leaderboard and digests to stdout.

    Raises
    ------
    BayesobsInputError
        A negative ``--bootstrap``, an unknown ``--resample`` (or
        ``stratified`` with too few runs), or trial files or trial options
        that cannot be read, or an ``--out`` another ``score`` is writing into.
    """
    from .run.store import lock_folder

    with lock_folder(args.out, "score"):  # one writer of a score folder at a time
        return _score(args)


def _score(args) -> int:
    """The work of :func:`cmd_score`, its ``--out`` folder held."""
    from .distributed import imports, release, submit

    t0 = time.perf_counter()
    # a large input: a worker for the cue probe's forests starts now, its imports (pandas,
    # scikit-learn: ~2.5 s) beside this one's imports and reading (score() uses it)
    worth = not (args.no_probe and args.no_references)  # nothing to run there otherwise
    submit(
        imports,
        "bayesobs.scores",
        "sklearn.tree",
        worth=worth and _input_bytes(args.trials) >= WORKER_INPUT_BYTES,
        workers=1,
    )
    try:
        from .scores import score

        trials, exclusions = _read(args)
        result = score(
            trials,
            non_oracle=args.non_oracle,
            probe=not args.no_probe,
            options=_fit_options(args),
            references=not args.no_references,
            humans=args.humans,
        )
    finally:
        release()
    options = _trial_options(
        args,
        non_oracle=args.non_oracle,
        references=not args.no_references,
        humans=args.humans,
        seconds=round(time.perf_counter() - t0, 3),
    )
    written = result.to_folder(args.out, trials=trials, manifest=options)
    written += _write_exclusions(exclusions, args.out)
    _print_scores(args, trials, result, written)
    return 0


def _print_scores(args, trials, result, written: list[str]) -> None:
    """The leaderboard, notes and summaries ``bayesobs score`` prints once its tables are written."""
    from .leaderboard import wrap

    if len(result.bayesbench.columns):
        interval = (
            f"bootstrap B={args.bootstrap}, {args.resample} resampling, 68% percentile intervals"
            + (
                ", stratified ones beside"
                if any(c.endswith("_strat_lo") for c in result.bayesbench.columns)
                else ""
            )
            if args.bootstrap
            else "no bootstrap"
        )
        print(f"BayesBench leaderboard ({interval})")
        print(leaderboard(result.bayesbench, result.missing, args.resample))
    from .scores.evidence import veridical_lead

    for line in veridical_lead(result.evidence):  # issue 49: the headline's veridical reading
        print(wrap(f"note: {line}"))
    from .order import order_lines
    from .trials import RUN_KEYS

    for line in order_lines(trials, RUN_KEYS) if len(result.evidence) else []:  # issue 47
        print(wrap(f"note: {line} (evidence.csv, controls.csv)"))
    if len(result.missing):
        print()
        print(
            wrap(
                f"{len(result.missing)} piece(s) could not be computed or need care "
                f"(see {args.out}/missing.csv):"
            )
        )
        # one line per reason, so a degenerate subject does not flood the terminal
        for reason, g in result.missing.groupby("reason", sort=False):
            first = g.iloc[0]
            where = "/".join(str(x) for x in (first.subject, first.task) if x)
            more = f" (and {len(g) - 1} more)" if len(g) > 1 else ""
            print(wrap(f"  {reason}: {where}: {first.component}{more}"))
    from .paradigms import paradigm_tables_of, registered

    tables = result.tables()
    for paradigm in registered():  # each registered paradigm's summary (bayesobs.paradigms)
        mine = paradigm_tables_of(paradigm, tables)
        if mine and (text := paradigm.summary_text(mine, args.out)):
            print()
            print(text)
    if result.cot_accuracy is not None:
        from .leaderboard import cot_accuracy_summary

        print()
        print(
            wrap(
                "Reasoning (cot) against base on the right/wrong tasks: accuracy and its shift, "
                "95% trial-bootstrap interval, all levels pooled (per level in "
                f"{args.out}/cot_accuracy.csv)"
            )
        )
        print(cot_accuracy_summary(result.cot_accuracy))
    print()
    print(wrap(f"tables -> {args.out}/ ({', '.join(written)})"))


def cmd_rescore(args) -> int:
    """``bayesobs rescore``: re-read a folder's logged replies with today's parsers.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs rescore`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status, 0; the rescored trials go to ``args.out`` (default
        ``FOLDER/rescored.jsonl``), ``trials.jsonl`` is left as it is.

    Raises
    ------
    BayesobsInputError
        A folder or log that :func:`bayesobs.run.rescore.rescore_folder`
        refuses.
    """
    from .run.rescore import rescore_folder

    table = rescore_folder(args.folder, args.out)
    target = args.out or args.folder / "rescored.jsonl"
    changed = int(table["rescored_changed"].sum())
    invalid = int((~table["valid"].astype(bool)).sum())
    print(
        f"rescored {len(table)} trial(s): {changed} response(s) changed, {invalid} invalid "
        f"-> {target} (trials.jsonl is unchanged; fit/score read {target.name} like any trial file)"
    )
    return 0


def cmd_report(args) -> int:
    """``bayesobs report``: the HTML report of trial files, an experiment or a score folder.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs report`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status, 0; the report is ``args.out/index.html``
        (:func:`bayesobs.report.build_report`).

    Raises
    ------
    BayesobsInputError
        Inputs :func:`bayesobs.report.build_report` refuses (no trials, a
        score folder without its trials, an unreadable calibration file).
    """
    from .limits import check
    from .report import build_report

    check("bootstrap", args.bootstrap, "--bootstrap asks for")  # before any reading
    index = build_report(
        args.inputs, args.out, bootstrap=args.bootstrap, seed=args.seed, resample=args.resample
    )
    print(f"report -> {index}")
    return 0


def cmd_compare(args) -> int:
    """``bayesobs compare``: mixed models of per-task scores on model features, across folders.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs compare`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status, 0; the tables go to ``args.out``
        (:func:`bayesobs.compare.run_compare`) and a summary to stdout.

    Raises
    ------
    BayesobsInputError
        Folders or a feature table that :func:`bayesobs.compare.run_compare`
        refuses, or data where no outcome could be fitted (each reason named).
    """
    from .compare import run_compare, summary_text
    from .leaderboard import wrap

    res = run_compare(args.folders, args.features, args.out, use=args.feature, report=args.report)
    print(summary_text(res["compare"], res["leaderboard"]))
    print()
    names = ", ".join(str(p.relative_to(args.out)) for p in res["written"])
    print(wrap(f"tables -> {args.out}/ ({names})"))
    return 0


def _positive_int(text: str) -> int:
    """A whole number >= 1 (argparse type)."""
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {text!r}")
    return v


def _probability(text: str) -> float:
    """A number strictly between 0 and 1 (argparse type)."""
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1, not {text!r}")
    return v


def cmd_calibrate(args) -> int:
    """``bayesobs calibrate``: simulation-based calibration of the posterior fits.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs calibrate`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status: 0 when every parameter's SBC ranks are uniform, 1
        when some are not; ``sbc.csv``, ``sbc_ranks.csv`` and the rank
        figure go to ``args.out``.

    Raises
    ------
    BayesobsInputError
        Options :func:`bayesobs.calibration.calibrate` refuses: an unknown
        variant, fewer than 5 simulations per rank bin, fewer draws than
        ``bins - 1`` or a ``--prior-scale`` that is not positive.
    """
    from .calibration import POWER, calibrate, write_calibration
    from .compile_cache import enable
    from .leaderboard import wrap

    enable()  # JAX's persistent compilation cache (issue 32 §3)

    def progress(name, sec):
        print(f"  {name}: {args.sims} simulation(s) fitted in {sec:.1f} s", flush=True)

    try:
        table, ranks = calibrate(
            args.variant,
            n_sims=args.sims,
            draws=args.draws,
            chains=args.chains,
            warmup=args.warmup,
            bins=args.bins,
            alpha=args.alpha,
            seed=args.seed,
            prior_scale=args.prior_scale,
            progress=progress,
        )
    except ValueError as exc:
        raise BayesobsInputError(str(exc)) from None
    paths = write_calibration(args.out, table, ranks)
    bad = table[~table["uniform"]]
    thr = float(table["threshold"].iat[0])
    print(
        f"SBC: {len(table) - len(bad)} of {len(table)} parameter(s) have uniform ranks "
        f"({args.sims} simulations x {args.draws} draws, chi-square on {args.bins} bins, "
        f"p >= {thr:.2g} = {args.alpha} / {len(table)})"
    )
    for r in bad.itertuples(index=False):
        print(f"not calibrated: {r.variant} {r.parameter} (chi2 {r.chi2:.1f}, p {r.p:.2g})")
    print(wrap(POWER))
    print(f"-> {', '.join(str(p) for p in paths)}")
    return 1 if len(bad) else 0


def cmd_serve(args) -> int:
    """``bayesobs serve``: the web app for human participants.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs serve`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status, 0, once the server stops; the answers are appended
        to ``args.out/trials.jsonl`` while it runs, the folder locked.

    Raises
    ------
    BayesobsInputError
        A ``--port`` outside 1 to 65535, a task spec that cannot be loaded,
        or a folder another writer holds.
    """
    if not 1 <= args.port <= 65535:
        raise BayesobsInputError(f"--port must be a port number from 1 to 65535, not {args.port}")
    from .run.runner import load_spec
    from .run.store import lock_folder

    load_spec(args.spec)  # a bad spec is refused before the folder is made
    # the folder's one writer for the server's whole life: no run, sweep, rescore or second
    # server writes beside the participants
    with lock_folder(args.out, "serve"):
        return _serve(args)


def _serve(args) -> int:
    import uvicorn

    from .web import ParticipantServer
    from .web.security import listen, uvicorn_config

    sock = listen(args.host, args.port)  # a busy port or a bad address: one line, no links
    with sock:
        server = ParticipantServer(
            args.spec,
            args.out,
            args.modality,
            args.condition,
            args.trials,
            token=args.token,
            ami=str(args.ami) if args.ami else None,
            order=args.order,
            minutes=args.minutes,
            catch_every=args.catch_every,
            hosts=[*(args.allow_host or []), args.host],
        )
        base = f"http://{args.host}:{args.port}"
        print(f"participants: {base}/   (or {base}/?pid=ID)")
        print(f"experimenter: {base}/experimenter?token={server.token}")
        minutes, basis = server.expected_minutes()
        print(
            f"{server.study.total} trials per participant (about {minutes} min, {basis}); block order "
            f"{args.order}; answers are appended to {args.out}/trials.jsonl"
        )
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"note: listening on {args.host}, reachable from other machines", file=sys.stderr)
        uvicorn.Server(uvicorn_config(server.app(), log_level="warning")).run(sockets=[sock])
    return 0


def cmd_export(args) -> int:
    """``bayesobs export jspsych``: a jsPsych study folder for an online platform.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs export jspsych`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status, 0; the study folder is written by
        :func:`bayesobs.web.jspsych.export_jspsych`.

    Raises
    ------
    BayesobsInputError
        A spec or options that :func:`bayesobs.web.jspsych.export_jspsych`
        refuses.
    """
    from .web.jspsych import export_jspsych

    out = export_jspsych(
        args.spec,
        args.out,
        args.modality,
        args.condition,
        args.trials,
        ami=str(args.ami) if args.ami else None,
        platform=args.platform,
        order=args.order,
        break_every=args.break_every,
        completion_code=args.completion_code,
        prolific_code=args.prolific_code,
        datapipe_id=args.datapipe,
        minutes=args.minutes,
        catch_every=args.catch_every,
    )
    manifest = json.loads((out / "bayesobs_manifest.json").read_text())
    print(
        f"jsPsych experiment for {args.platform} -> {out}  (cd {out} && npm install && npm run build; "
        f"then upload {out}/dist)"
    )
    print(
        f"completion code {manifest['completion_code']}; block order {args.order} "
        f"({len(manifest['orders'])} Latin-square row(s)); about {manifest['minutes']} min"
    )
    if args.platform == "pavlovia":
        print(
            "Pavlovia: save Pavlovia's jsPsych plugin as "
            f"{out}/jspsych-pavlovia.js before building (it is not on the npm registry)"
        )
    return 0


def cmd_export_dataset(args) -> int:
    """``bayesobs export dataset``: an experiment folder as an open data set.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs export dataset`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status, 0; the data set is written by
        :func:`bayesobs.dataset.export_dataset`.

    Raises
    ------
    BayesobsInputError
        A folder or options that :func:`bayesobs.dataset.export_dataset`
        refuses.
    """
    from .dataset import export_dataset

    summary = export_dataset(
        args.folder, args.out, scores=args.scores, images=args.images, license=args.license
    )
    parts = ", ".join(f"{name} {n}" for name, n in summary.rows.items())
    extra = f"; {len(summary.scores)} score file(s)" if summary.scores else "; no scores"
    if summary.images:
        extra += f"; {summary.images} image(s)"
    print(f"data set -> {summary.out}  (trials: {parts}{extra}; card {summary.out}/README.md)")
    return 0


def cmd_simulate(args) -> int:
    """``bayesobs simulate``: trial tables of simulated observers with known parameters.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs simulate`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status, 0; the trials go to ``args.out``
        (:func:`bayesobs.trials.write_trials`).

    Raises
    ------
    BayesobsInputError
        ``--subjects`` or ``--runs`` below 1, or ``--trials`` below 2.
    """
    from .fits.synthetic import simulated_trials
    from .trials import write_trials

    if args.subjects < 1 or args.trials < 2 or args.runs < 1:
        raise BayesobsInputError("--subjects and --runs must be >= 1 and --trials >= 2")
    from .limits import check

    check("trials", args.subjects * args.runs * args.trials, "--subjects x --runs x --trials =")
    trials = simulated_trials(
        n_subjects=args.subjects, trials_per_session=args.trials, runs=args.runs, seed=args.seed
    )
    path = write_trials(trials, args.out)
    print(f"wrote {len(trials)} simulated trials ({args.subjects} subject(s)) -> {path}")
    return 0


def _number_list(text: str, what: str, kind=float) -> list:
    """``"20,40,80"`` -> ``[20, 40, 80]``; a bad entry is one clear error."""
    try:
        values = [kind(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise BayesobsInputError(
            f"{what} takes comma-separated {'whole ' if kind is int else ''}numbers, not {text!r}"
        ) from None
    if not values:
        raise BayesobsInputError(f"{what} is empty")
    return values


def cmd_design(args) -> int:
    """``bayesobs design``: model recovery and power of a protocol before any run.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs design`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status, 0; the tables and ``figures/confusion.png`` go to
        ``args.out`` (:func:`bayesobs.design.write_design`), the summary to
        stdout.

    Raises
    ------
    BayesobsInputError
        A ``--trials`` or ``--shifts`` list that is empty or not numbers, a
        trial count below 2, or a spec or options that
        :func:`bayesobs.design.design` refuses.
    """
    from .design import design, write_design

    trials = _number_list(args.trials, "--trials", int) if args.trials else None
    if trials is not None and any(t < 2 for t in trials):
        raise BayesobsInputError(f"--trials must be whole numbers >= 2, not {args.trials!r}")
    shifts = _number_list(args.shifts, "--shifts")
    res = design(
        args.spec,
        reps=args.reps,
        trials=trials,
        runs=args.runs,
        noise=args.noise,
        seed=args.seed,
        missing=args.missing,
        shifts=shifts,
        bootstrap=args.bootstrap,
    )
    write_design(res, args.out)
    print(design_summary(res["summary"]))
    total = float(res["timing"]["seconds"].iloc[-1])
    print(
        f"\n{args.reps} replicate(s) per model in {total:.1f} s -> {args.out}/ "
        f"({', '.join(res)}; figures/confusion.png)"
    )
    return 0


def design_summary(summary) -> str:
    """Plain-text table of ``summary.csv``: one line per trial count.

    Parameters
    ----------
    summary : DataFrame
        ``summary.csv`` of :func:`bayesobs.design.design`: ``trials`` first,
        then numeric columns.

    Returns
    -------
    str
        A header line and one line per row, numbers to 3 decimals.
    """
    cols = [c for c in summary.columns if c != "trials"]
    lines = ["trials  " + "  ".join(f"{c:>14}" for c in cols)]
    for r in summary.itertuples(index=False):
        lines.append(f"{r[0]:>6}  " + "  ".join(f"{v:>14.3f}" for v in r[1:]))
    return "\n".join(lines)


def _concurrency(text: str) -> int | str:
    """``--concurrency``: ``auto`` or a whole number (checked in :func:`_check_run_options`)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a whole number >= 1 or auto, not {text!r}"
        ) from None


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--subject",
        action="append",
        required=True,
        metavar="SUBJECT",
        help="sim:bayesian, sim:antibayes, sim:kalman, sim:linear, openai:MODEL (any "
        "OpenAI-compatible API) or anthropic:MODEL (Claude's Messages API); repeatable",
    )
    p.add_argument(
        "--concurrency",
        type=_concurrency,
        default=16,
        metavar="N|auto",
        help="sessions run at once (default 16), or auto: start at 4, grow while calls succeed "
        "and halve on each burst of 429s (AIMD), up to --max-concurrency",
    )
    p.add_argument(
        "--max-concurrency",
        type=int,
        default=DEFAULT_MAX_CONCURRENCY,
        metavar="N",
        help=f"with --concurrency auto: the most sessions at once (default {DEFAULT_MAX_CONCURRENCY})",
    )
    p.add_argument(
        "--image-detail",
        choices=IMAGE_DETAILS,
        default=DEFAULT_IMAGE_DETAIL,
        help="OpenAI's detail of every image part, sent explicitly and logged in each trial row "
        f"(default {DEFAULT_IMAGE_DETAIL}, OpenAI's own default; low: 85 tokens an image; "
        "anthropic: subjects have no such setting and log None)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the calls and estimated tokens, call nothing"
    )
    p.add_argument(
        "--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL or OpenAI)"
    )
    p.add_argument(
        "--api-key",
        help="API key (default: $OPENAI_API_KEY); never logged, but visible to other users in "
        "`ps`: prefer $OPENAI_API_KEY or --api-key-file",
    )
    p.add_argument(
        "--api-key-file",
        type=Path,
        metavar="PATH",
        help="read the API key from this file (surrounding whitespace stripped); never logged",
    )
    p.add_argument(
        "--temperature", type=float, default=0.7, help="sampling temperature (default 0.7)"
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=64,
        help="reply length limit (default 64: room for the answer and a short note)",
    )
    p.add_argument("--reasoning-effort", help='e.g. "minimal" or "none" where the API supports it')
    p.add_argument(
        "--reasoning-budget",
        type=int,
        default=DEFAULT_REASONING_BUDGET,
        metavar="N",
        help=f"with --reasoning-effort (other than none): tokens of hidden reasoning added to "
        f"the reply budget (default {DEFAULT_REASONING_BUDGET})",
    )
    p.add_argument(
        "--logprobs",
        type=int,
        metavar="K",
        help=f"ask for the top K (0-{MAX_TOP_LOGPROBS}) alternatives of every reply token and "
        "log each numeric answer's distribution: response_expected, response_sd, response_mass, "
        "response_top (docs/method.md); a server without logprobs gets one note, the run goes on",
    )
    p.add_argument(
        "--token-param",
        choices=TOKEN_PARAMS,
        default="auto",
        help="how the reply budget is sent: auto (default: max_completion_tokens, switching to "
        "max_tokens for a server that refuses it or overruns it), max_completion_tokens, max_tokens",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds per whole request, however slowly it trickles (default 120)",
    )
    p.add_argument(
        "--max-attempts",
        type=int,
        default=12,
        help="attempts per request on 429/5xx/time-out (default 12)",
    )
    p.add_argument(
        "--max-wait",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="total seconds one trial's request may wait between attempts (default 600); past "
        "it the trial fails and is redone on resume. Retry-After values over 120 s are ignored",
    )
    p.add_argument(
        "--cache",
        type=Path,
        metavar="DIR",
        help="response cache folder (default ~/.cache/bayesobs)",
    )
    p.add_argument(
        "--no-cache", action="store_true", help="do not read or write the response cache"
    )
    p.add_argument(
        "--cache-scope",
        choices=("folder", "global"),
        default="folder",
        help="folder (default): replay cached replies only into the same --out folder, so a new "
        "folder draws new samples; global: replay them into any folder",
    )
    p.add_argument(
        "--ami",
        type=Path,
        metavar="DIR",
        help="AMI manual annotations folder for the duration task "
        "(default: the synthetic dialogue generator)",
    )
    p.add_argument(
        "--hvs",
        type=Path,
        metavar="DIR",
        help="source datasets of the HVSBench-style task hvs (layout: docs/hvs.md)",
    )
    p.add_argument(
        "--sim-seed", type=int, default=0, help="seed of the simulated subjects (default 0)"
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument(
        "--progress",
        action="store_true",
        help="show progress also when stderr is not a terminal (a log file): the plan, a plain "
        "line every 10 s and the total (on a terminal: always, with bars)",
    )
    p.add_argument(
        "--batch",
        action="store_true",
        help="ask through OpenAI's Batch API (anthropic: subjects: Anthropic's Message "
        "Batches) at half the price, in rounds by trial position "
        "(sessions without a rolling context all in the first); resumable (batches.jsonl)",
    )
    p.add_argument(
        "--poll-max",
        type=float,
        default=60.0,  # bayesobs.run.batch.POLL_MAX_S (not imported here: it loads the SDK)
        metavar="SECONDS",
        help="with --batch: the longest wait between polls of a batch (default 60; polling "
        "starts after 1 s and doubles up to it)",
    )


def _check_run_options(args) -> None:
    """Numbers of the run options: one clear line (exit 2) instead of a hang or a traceback."""
    import math

    if args.concurrency != "auto" and args.concurrency < 1:
        raise BayesobsInputError(
            f"--concurrency must be at least 1 or auto, not {args.concurrency}"
        )
    if args.max_concurrency < 1:
        raise BayesobsInputError(
            f"--max-concurrency must be at least 1, not {args.max_concurrency}"
        )
    if args.max_tokens < 1:
        raise BayesobsInputError(f"--max-tokens must be at least 1, not {args.max_tokens}")
    if not 0 <= args.reasoning_budget <= MAX_REASONING_BUDGET:
        raise BayesobsInputError(
            f"--reasoning-budget must be a whole number of tokens in 0..{MAX_REASONING_BUDGET:,}, "
            f"not {args.reasoning_budget}"
        )
    if args.logprobs is not None and not 0 <= args.logprobs <= MAX_TOP_LOGPROBS:
        raise BayesobsInputError(
            f"--logprobs must be a whole number from 0 to {MAX_TOP_LOGPROBS} (the APIs' limit on "
            f"top_logprobs), not {args.logprobs}"
        )
    if args.max_attempts < 1:
        raise BayesobsInputError(f"--max-attempts must be at least 1, not {args.max_attempts}")
    if not (math.isfinite(args.max_wait) and args.max_wait >= 0):
        raise BayesobsInputError(
            f"--max-wait must be a finite number of seconds >= 0, not {args.max_wait}"
        )
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise BayesobsInputError(
            f"--timeout must be a positive number of seconds, not {args.timeout}"
        )
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise BayesobsInputError(
            f"--temperature must be a finite number >= 0, not {args.temperature}"
        )
    if args.progress and args.no_progress:
        raise BayesobsInputError("give --progress or --no-progress, not both")
    if args.batch:
        from .run.batch import check_batch_subjects, check_poll_max

        check_poll_max(args.poll_max)
        check_batch_subjects(args.subject)
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise BayesobsInputError(f"--out {args.out} is a file, not a folder")
    kinds = {str(s).partition(":")[0] for s in args.subject}
    if args.base_url is not None:
        check_base_url(args.base_url, "--base-url")
    else:
        for kind, var in (("openai", "OPENAI_BASE_URL"), ("anthropic", "ANTHROPIC_BASE_URL")):
            if kind in kinds and os.environ.get(var):
                check_base_url(os.environ[var], f"${var}")
    if {"openai", "anthropic"} <= kinds and (
        args.api_key is not None or args.api_key_file is not None or args.base_url is not None
    ):
        raise BayesobsInputError(
            "openai: and anthropic: subjects in one run take their keys and endpoints from "
            "OPENAI_API_KEY/OPENAI_BASE_URL and ANTHROPIC_API_KEY/ANTHROPIC_BASE_URL, not from "
            "--api-key, --api-key-file or --base-url (one of them would go to the wrong API)"
        )


def check_base_url(url: str, what: str) -> str:
    """``url`` if it is an http(s) URL with a host; otherwise one clear error.

    A malformed endpoint (``ht!tp:/x``) would otherwise be tried and retried
    as if the network were down.

    Parameters
    ----------
    url : str
        The endpoint.
    what : str
        Where it came from, for the message (``--base-url``, ``$VAR``).

    Returns
    -------
    str
        ``url`` unchanged.

    Raises
    ------
    BayesobsInputError
        A scheme other than http or https, no host, or a bad port.
    """
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        scheme, host, _ = parts.scheme.lower(), parts.hostname, parts.port  # a bad port raises
    except ValueError:
        scheme, host = "", None
    if scheme not in ("http", "https") or not host:
        raise BayesobsInputError(
            f"{what} {url!r} is not an http:// or https:// URL with a host, "
            "e.g. https://api.openai.com/v1 or http://localhost:8000/v1"
        )
    return url


def _api_key(args) -> str | None:
    """The key of ``--api-key-file`` (stripped) or ``--api-key``; None: ``$OPENAI_API_KEY``."""
    if args.api_key_file is None:
        return args.api_key
    if args.api_key is not None:
        raise BayesobsInputError("give --api-key or --api-key-file, not both")
    try:
        key = args.api_key_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a text file"
        raise BayesobsInputError(
            f"--api-key-file {args.api_key_file}: cannot read ({why})"
        ) from None
    if not key:
        raise BayesobsInputError(f"--api-key-file {args.api_key_file} is empty")
    return key


def _run_options(args) -> dict:
    """The options ``run`` and ``sweep`` pass to :func:`bayesobs.run.runner.start`."""
    chat = {
        "temperature": args.temperature,
        "max_tokens": args.max_tokens,
        "reasoning_effort": args.reasoning_effort,
        "reasoning_budget": args.reasoning_budget,
        "token_param": args.token_param,
        "logprobs": args.logprobs,
        "base_url": args.base_url,
        "timeout_s": args.timeout,
        "max_attempts": args.max_attempts,
        "max_wait_s": args.max_wait,
        "image_detail": args.image_detail,
    }
    return {
        "sim_seed": args.sim_seed,
        "api_key": _api_key(args),
        "cache_dir": args.cache,
        "use_cache": not args.no_cache,
        "cache_scope": args.cache_scope,
        "concurrency": args.concurrency,
        "max_concurrency": args.max_concurrency,
        # a bar on a terminal; with --progress plain lines into a log file
        "progress": _progress(args) or ("lines" if args.progress else False),
        "dry_run": args.dry_run,
        "batch": {"poll_max": args.poll_max} if args.batch else None,
    }, chat


def _print_report(args, report) -> int:
    """The terminal summary of a run (the library did the work)."""
    if report.dry_run is not None:
        d = report.dry_run
        print(
            f"dry run: {d['sessions']} session run(s), {d['calls']} call(s) to make ({d['logged']} trial(s) already logged in "
            f"{args.out}), about {d['input_tokens']:,} input tokens, at most "
            f"{d['output_tokens']:,} output tokens"
            + (
                f" (each reply's budget includes {d['reasoning_budget']:,} reasoning tokens)"
                if d["reasoning_budget"]
                else ""
            )
        )
        if "batch_rounds" in d:
            print(
                f"with --batch: {d['batch_rounds']} round(s); batch prices are half the live "
                f"ones, so about {d['input_tokens'] // 2:,} input tokens' worth is saved"
            )
        return 0
    for name in report.torn_logs:
        redo = "; that trial is redone" if name == "trials.jsonl" else ""
        print(
            f"note: the torn last line of {args.out / name} was cut (kept in {name}.torn){redo}",
            file=sys.stderr,
        )
    if lines := report.unreadable_lines:
        which = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
        print(
            f"note: {args.out / 'trials.jsonl'}: skipped {len(lines)} unreadable "
            f"line{'s' if len(lines) > 1 else ''} (line{'s' if len(lines) > 1 else ''} {which}); "
            "the trial(s) they held are run again",
            file=sys.stderr,
        )
    here = str(Path(args.out).resolve())
    sources = ", ".join(
        f"{n} from {'this folder' if src == here else src}"
        for src, n in report.cached_from.most_common()
    )
    print(
        f"logged {report.done} trial(s) in {report.seconds:.1f} s ({report.skipped} already logged, "
        f"{report.cached} from cache{f' ({sources})' if sources else ''}, {report.unparsed} without a number) "
        f"-> {args.out}/trials.jsonl"
    )
    if n := report.budget_exhausted:
        print(
            f"note: {n} of {report.done} replies spent their whole budget reasoning, with no "
            f"answer left (invalid_reason budget_exhausted); raise --reasoning-budget "
            f"(now {args.reasoning_budget}, counted with --reasoning-effort) to give them room",
            file=sys.stderr,
        )
    if c := report.concurrency:
        print(
            f"concurrency auto: ended at {c['final']} session(s) at once (peak {c['peak']}, "
            f"max {c['max_concurrency']}); {c['throttled']} rate-limited (429) call(s), "
            f"halved {c['cuts']} time(s)"
        )
    if report.failed_sessions:
        print(
            f"{len(report.failed_sessions)} session(s) stopped early; run the same command again to resume:",
            file=sys.stderr,
        )
        for line in report.failed_sessions[:10]:
            print(f"  {line}", file=sys.stderr)
        return 1
    return 0


def cmd_run(args) -> int:
    """``bayesobs run``: one task spec on the given subjects into an experiment folder.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs run`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status: 0, or 1 when some session stopped early (the same
        command resumes it); the trials are appended to
        ``args.out/trials.jsonl`` (default ``runs/TASK``).

    Raises
    ------
    BayesobsInputError
        Run options out of range, a malformed ``--base-url``, both or an
        unreadable ``--api-key``/``--api-key-file``, or a spec that cannot
        be loaded.
    """
    from .run.runner import load_spec, run_task

    _check_run_options(args)
    if args.out is None:
        args.out = Path("runs") / load_spec(args.task)["task"]
        _check_run_options(args)
    options, chat = _run_options(args)
    report = run_task(
        args.task,
        args.subject,
        args.out,
        args.modality,
        args.condition,
        args.trials,
        args.runs,
        ami=args.ami,
        hvs=args.hvs,
        chat=chat,
        **options,
    )
    return _print_report(args, report)


def cmd_sweep(args) -> int:
    """``bayesobs sweep``: a protocol (several specs) into one experiment folder.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``bayesobs sweep`` (:func:`build_parser`).

    Returns
    -------
    int
        The exit status: 0, or 1 when some session stopped early (the same
        command resumes it); the trials are appended to
        ``args.out/trials.jsonl``.

    Raises
    ------
    BayesobsInputError
        Run options out of range, a malformed ``--base-url``, both or an
        unreadable ``--api-key``/``--api-key-file``, or a protocol that
        cannot be loaded.
    """
    from .run.runner import sweep

    _check_run_options(args)
    options, chat = _run_options(args)
    report = sweep(
        args.protocol,
        args.subject,
        args.out,
        trials=args.trials,
        runs=args.runs,
        ami=args.ami,
        hvs=args.hvs,
        **options,
        **chat,
    )
    return _print_report(args, report)


def _add_stimulus_options(p: argparse.ArgumentParser) -> None:
    """Which stimuli a participant sees (``serve`` and ``export``)."""
    p.add_argument(
        "--condition",
        action="append",
        help="repeatable, e.g. base, noise_constant (default: the spec's)",
    )
    p.add_argument(
        "--modality", action="append", choices=("text", "image", "multimodal"), help="repeatable"
    )
    p.add_argument("--trials", type=int, help="trials per session (default: the spec's)")
    p.add_argument("--ami", type=Path, metavar="DIR", help="AMI annotations for the duration task")
    p.add_argument(
        "--order",
        default="counterbalanced",
        help="block order: counterbalanced (default: a Latin square over modalities and session "
        "types, one row per participant, logged) or fixed (the spec's order for everyone)",
    )
    p.add_argument(
        "--minutes",
        type=float,
        help="duration stated on the consent page (default: estimated from the number of trials)",
    )
    p.add_argument(
        "--catch-every",
        type=int,
        metavar="N",
        help="an attention-check (catch) trial after every N trials, logged with catch = true "
        "and never fitted (a number to type as stated, or the only item of a picture to tap)",
    )


def _add_scheduler_option(p) -> None:
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="send the work to a running Dask scheduler (tcp://host:8786; default "
        "$BAYESOBS_SCHEDULER, else this machine); needs bayesobs[distributed]",
    )


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked (start-up time)."""

    def __init__(
        self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None
    ):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from . import __version__  # start-up time: importlib.metadata only for --version

        print(f"bayesobs {__version__}")  # on stdout, as argparse's own version action
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every ``bayesobs`` command.

    Returns
    -------
    argparse.ArgumentParser
        The parser; each subcommand sets ``func``, the ``cmd_*`` function
        that runs it.
    """
    parser = argparse.ArgumentParser(
        prog="bayesobs",
        description="Bayesian psychophysics of language models and people.",
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="show program's version number and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("fit", help="fit the ten observer variants; write fits.csv and evidence.csv")
    _add_trial_options(p)
    p.add_argument(
        "--method",
        choices=("mle", "posterior"),
        default="mle",
        help="mle (default): exact maximum likelihood with AIC; posterior: also NumPyro NUTS fits, "
        "diagnostics, PSIS-LOO, posterior BCS",
    )
    p.add_argument(
        "--hierarchical",
        action="store_true",
        help="posterior: pool subjects through a population prior",
    )
    p.add_argument(
        "--variant",
        action="append",
        help="posterior: fit only these variants (repeatable; default all ten)",
    )
    p.add_argument(
        "--response",
        choices=RESPONSES,
        default="sampled",
        help="sampled (default): the answers as written; expected: the mean of each answer's "
        "distribution (response_expected, logged by runs with --logprobs)",
    )
    p.add_argument(
        "--prior-predictive",
        action="store_true",
        help="posterior: also draw responses from the priors and write prior_predictive.csv "
        "(whether they cover the observed response range, per cell and variant)",
    )
    p.add_argument("--chains", type=int, default=4, help="posterior: chains (default 4)")
    p.add_argument(
        "--warmup", type=int, default=500, help="posterior: warm-up draws per chain (default 500)"
    )
    p.add_argument(
        "--draws", type=int, default=500, help="posterior: draws per chain (default 500)"
    )
    p.add_argument(
        "--transfer",
        metavar="A:B",
        help="cross-condition transfer: apply each variant's parameters fitted on condition A "
        "to condition B's stimuli; write transfer.csv (predicted vs observed slope, LL on B)",
    )
    _add_scheduler_option(p)
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser(
        "calibrate",
        help="simulation-based calibration of the posterior fits; write sbc.csv (exit 1 when a "
        "parameter's ranks are not uniform)",
    )
    p.add_argument(
        "--variant",
        action="append",
        help="calibrate only these variants (repeatable; default all ten)",
    )
    p.add_argument(
        "--sims", type=_positive_int, default=100, help="simulations per variant (default 100)"
    )
    p.add_argument(
        "--draws",
        type=_positive_int,
        default=99,
        help="thinned posterior draws per simulation (default 99: ranks 0..99 in 10 equal bins)",
    )
    p.add_argument("--chains", type=_positive_int, default=2, help="chains (default 2)")
    p.add_argument(
        "--warmup", type=_positive_int, default=300, help="warm-up draws per chain (default 300)"
    )
    p.add_argument(
        "--bins", type=_positive_int, default=10, help="rank bins of the chi-square (default 10)"
    )
    p.add_argument(
        "--alpha",
        type=_probability,
        default=0.05,
        help="family-wise level, Bonferroni over the parameters tested (default 0.05)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument(
        "--prior-scale",
        type=float,
        default=1.0,
        help="fit with every Normal/half-Normal prior scale multiplied by this (default 1); "
        "anything else is a deliberately wrong prior, to see the check fail",
    )
    p.add_argument("--out", required=True, type=Path, help="output folder (created)")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser(
        "run", help="run one task on subjects; append every trial to DIR/trials.jsonl"
    )
    p.add_argument("task", metavar="TASK", help="task name (tasks/TASK.toml) or a spec file")
    p.add_argument(
        "--modality",
        action="append",
        choices=("text", "image", "multimodal"),
        help="repeatable (default: the spec's modalities)",
    )
    p.add_argument(
        "--condition",
        action="append",
        metavar="CONDITION",
        help="repeatable (default: the spec's conditions)",
    )
    p.add_argument("--trials", type=int, help="trials per session run (default: the spec's)")
    p.add_argument("--runs", type=int, help="runs of each session type (default: the spec's)")
    p.add_argument("--out", type=Path, metavar="DIR", help="experiment folder (default runs/TASK)")
    _add_run_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "sweep", help="run a whole protocol (e.g. tasks/bayesbench.toml) on subjects"
    )
    p.add_argument("protocol", metavar="PROTOCOL", help="protocol file, e.g. tasks/bayesbench.toml")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="experiment folder")
    p.add_argument("--trials", type=int, help="trials per session run (default: each spec's)")
    p.add_argument("--runs", type=int, help="runs of each session type (default: each spec's)")
    _add_run_options(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser(
        "score",
        help="accuracy, cue combination, BCS and the BayesBench score with bootstrap intervals",
    )
    _add_trial_options(p)
    p.set_defaults(bootstrap=30)
    p.add_argument(
        "--non-oracle",
        choices=("response", "error"),
        default="response",
        help="variances behind the non-oracle Bayes weights: of responses (paper, default) or errors",
    )
    p.add_argument("--no-probe", action="store_true", help="skip the random-forest cue probe")
    p.add_argument(
        "--no-references",
        action="store_true",
        help="leave out the leaderboard's reference rows (random responder, ideal observer)",
    )
    p.add_argument(
        "--humans",
        action="append",
        default=[],
        metavar="PATTERN",
        help="subjects whose id matches this glob (repeatable, e.g. 'P*') are human participants: "
        "shown as references, never ranked, and pooled into the row reference:humans",
    )
    _add_scheduler_option(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser(
        "rescore", help="re-read every logged reply of an experiment folder with today's parsers"
    )
    p.add_argument("folder", type=Path, metavar="DIR", help="experiment folder")
    p.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="rescored trials (.jsonl, .csv or .parquet; default DIR/rescored.jsonl); "
        "trials.jsonl is never rewritten",
    )
    p.set_defaults(func=cmd_rescore)

    p = sub.add_parser("report", help="figures, tables and provenance as an offline HTML report")
    p.add_argument(
        "inputs",
        nargs="+",
        type=Path,
        metavar="DIR_OR_TRIALS",
        help="trial files, experiment folders, or a `bayesobs score` output folder",
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="report folder")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=30,
        help="replicates when scores must be computed (default 30)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--resample",
        choices=("pooled", "stratified"),
        default="pooled",
        help="bootstrap scheme when scores must be computed (default pooled)",
    )
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "compare",
        help="mixed models of per-task scores on model features, and a leaderboard across folders",
    )
    p.add_argument(
        "folders", nargs="+", type=Path, metavar="SCOREDIR", help="`bayesobs score` output folders"
    )
    p.add_argument(
        "--features",
        type=Path,
        required=True,
        metavar="FILE",
        help="CSV (or .tsv): `subject` plus one column per model feature (numeric or categorical)",
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    p.add_argument(
        "--feature",
        action="append",
        metavar="COLUMN",
        help="repeatable: use only these feature columns (default: every column but subject)",
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="also write the cross-model page DIR/report/index.html",
    )
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("serve", help="run a task on human participants in the browser")
    p.add_argument(
        "spec", metavar="SPEC", help="task name or spec file, e.g. tasks/line_ratio.toml"
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="experiment folder")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only)",
    )
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    _add_stimulus_options(p)
    p.add_argument("--token", help="experimenter page token (default: random, printed)")
    p.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        help="repeatable: a host name participants reach the server by (besides --host, "
        "localhost and IP addresses), e.g. the name of a reverse proxy; other Host headers "
        "are refused (DNS rebinding)",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "export",
        help="export a task as a jsPsych 8 experiment, or an experiment folder as an open data set",
    )
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    d = formats.add_parser(
        "dataset",
        help="an experiment folder as a Hugging Face-loadable data set (Parquet per paradigm, "
        "scores, dataset card)",
    )
    d.add_argument("folder", type=Path, metavar="DIR", help="experiment folder (run, sweep, serve)")
    d.add_argument(
        "--out", type=Path, required=True, metavar="OUT", help="data set folder (new or empty)"
    )
    d.add_argument(
        "--scores",
        type=Path,
        metavar="SCOREDIR",
        help="score folder of bayesobs score (default: DIR/scores when it exists)",
    )
    d.add_argument(
        "--images",
        choices=IMAGE_MODES,
        default="paths",
        help="image stimuli: paths into DIR (default), copy the PNGs into OUT/stimuli, or omit",
    )
    d.add_argument(
        "--license",
        default="cc-by-4.0",
        help="licence id stated in the dataset card for the trials and stimuli (default cc-by-4.0)",
    )
    d.set_defaults(func=cmd_export_dataset)
    p = formats.add_parser("jspsych", help="a self-contained jsPsych 8 experiment")
    p.add_argument("spec", metavar="SPEC", help="task name or spec file")
    p.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="experiment folder to write"
    )
    _add_stimulus_options(p)
    p.add_argument(
        "--platform",
        choices=("jatos", "pavlovia", "cognition", "prolific", "local"),
        default="local",
        help="where dist/ runs, which decides how data are saved: jatos (jatos.submitResultData), "
        "pavlovia (Pavlovia's jsPsych plugin), cognition (Cognition.run saves jsPsych data), "
        "prolific (DataPipe to the OSF, then back to Prolific), local (the browser downloads the "
        "data file; default, for piloting)",
    )
    p.add_argument("--break-every", type=int, metavar="N", help="a break page after every N trials")
    p.add_argument(
        "--completion-code",
        metavar="CODE",
        help="code shown on the final page (default: --prolific-code, else a random code)",
    )
    p.add_argument(
        "--prolific-code",
        metavar="CODE",
        help="Prolific completion code: the final page returns the participant to Prolific",
    )
    p.add_argument("--datapipe", metavar="ID", help="DataPipe experiment id (--platform prolific)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "simulate",
        help="write a BayesBench-shaped trial table whose responses come from known observer models",
    )
    p.add_argument("--out", required=True, type=Path, help="output file (.csv, .parquet or .jsonl)")
    p.add_argument(
        "--subjects", type=int, default=3, help="number of simulated subjects (default 3)"
    )
    p.add_argument("--trials", type=int, default=40, help="trials per session (default 40)")
    p.add_argument("--runs", type=int, default=1, help="runs per session type (default 1)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser(
        "design",
        help="before running: model recovery, factor calibration and BCS power of a spec or protocol",
    )
    p.add_argument("spec", metavar="SPEC_OR_PROTOCOL", help="e.g. tasks/bayesbench.toml")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder")
    p.add_argument(
        "--reps", type=int, default=50, help="simulated observers per model (default 50)"
    )
    p.add_argument(
        "--trials",
        metavar="N[,N...]",
        help="trials per session run, e.g. 20,40,80 (default: each spec's)",
    )
    p.add_argument("--runs", type=int, help="runs of each session type (default: each spec's)")
    p.add_argument(
        "--noise",
        type=float,
        default=0.1,
        help="response noise SD as a fraction of the mean session width (default 0.1)",
    )
    p.add_argument(
        "--missing",
        type=float,
        default=0.0,
        help="fraction of responses missing at random (default 0)",
    )
    p.add_argument(
        "--shifts",
        default="0,0.05,0.1,0.2",
        help="true w_prior shifts under the ablations for the BCS power (default 0,0.05,0.1,0.2)",
    )
    p.add_argument("--bootstrap", type=int, default=30, help="replicates behind s_p (default 30)")
    p.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    _add_scheduler_option(p)
    p.set_defaults(func=cmd_design)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code (2 for bad input, with a one-line message).

    Parameters
    ----------
    argv : list of str, optional
        The arguments after ``bayesobs``; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        The command's exit status; 2 after a :class:`BayesobsInputError` or
        an ``OSError`` (one line on stderr), 1 after a fatal subject error,
        130 after Ctrl-C.

    Raises
    ------
    SystemExit
        From argparse: ``--help``, ``--version`` (status 0) or arguments it
        cannot parse (status 2).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from .distributed import use_scheduler

        with use_scheduler(getattr(args, "scheduler", None)):
            return args.func(args)
    except BayesobsInputError as exc:
        print(f"bayesobs: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "bayesobs: interrupted; everything logged so far is kept (run the same command to resume)",
            file=sys.stderr,
        )
        return 130
    except FatalSubjectError as exc:
        print(f"bayesobs: error: {exc} (everything logged so far is kept)", file=sys.stderr)
        return 1
    except OSError as exc:  # a full disk, a read-only folder: one line, never a traceback
        where = f" {exc.filename}" if exc.filename else ""
        print(f"bayesobs: error: cannot access{where}: {exc.strerror or exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
