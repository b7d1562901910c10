"""The options several commands share: the trial options of ``fit`` and ``score``, and reading trials with them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import BayesobsInputError


def _add_trial_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "trials",
        nargs="+",
        metavar="TRIALS",
        help="CSV, TSV, Parquet, JSONL, JSON file(s), JATOS's .jrzip or .txt, or experiment "
        "folder(s)",
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
    _add_participants_options(p)
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


def _add_participants_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--participants",
        type=Path,
        metavar="FILE",
        help="a participant export (Prolific's, or any CSV/TSV) whose columns join every trial "
        'of that participant, for --exclude (e.g. "Age < 18"), compare and the report',
    )
    p.add_argument(
        "--participants-id",
        default="PROLIFIC_PID",
        metavar="COL",
        help="its participant-id column, matched to subject (default PROLIFIC_PID)",
    )


def _with_participants(trials, args):
    """The trials with ``--participants`` joined on, where given."""
    if getattr(args, "participants", None) is None:
        return trials
    from ..demographics import join_participants

    return join_participants(trials, args.participants, args.participants_id)


def _add_scheduler_option(p) -> None:
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="send the work to a running Dask scheduler (tcp://host:8786; default "
        "$BAYESOBS_SCHEDULER, else this machine); needs bayesobs[distributed]",
    )


def _progress(args) -> bool:
    """A progress bar only for people watching a terminal."""
    return not args.no_progress and sys.stderr.isatty()


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


def _read(args):
    """Validate the trial options, read the trials and apply ``--exclude``."""
    from ..exclusions import exclude, parse_rule, summary
    from ..limits import check
    from ..trials import catch_rows, parse_mapping, read_trials

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
    trials = _with_participants(trials, args)
    if args.no_order:  # issue 47: every sequential output says so (bayesobs.order)
        trials["no_trial_order"] = True
    if not rules and not catch_rows(trials).any():
        return trials, None
    from ..leaderboard import wrap
    from ..trials import normalize_trials

    kept, table = exclude(trials, rules)
    # number the trials of each run again without the catch trials between them
    kept = normalize_trials(kept)

    print(wrap(summary(table)))
    return kept, table


def _write_exclusions(table, out: Path) -> list[str]:
    """Write ``exclusions.csv`` into ``out`` when there is an exclusions table."""
    if table is None:
        return []
    from ..trials import write_csv

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
        **({"participants": str(args.participants)} if args.participants else {}),
        exclude=args.exclude,
        interleaved=args.interleaved,
        lapse=args.lapse,
        bootstrap=args.bootstrap,
        seed=args.seed,
        resample=args.resample,
        **extra,
    )


def _fit_options(args):
    """The :class:`~bayesobs.fits.fitoptions.FitOptions` of ``fit`` and ``score``, built once."""
    from ..fits.fitoptions import FitOptions

    return FitOptions(
        bootstrap=args.bootstrap,
        seed=args.seed,
        progress=_progress(args),
        resample=args.resample,
        interleaved=args.interleaved,
        lapse=args.lapse,
    )
