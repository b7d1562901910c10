"""Command-line interface: a thin adapter over the library.

Every command calls one public library function.  Bad input exits with
status 2 and a one-line message, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .errors import BayesobsInputError


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
        help="take column NEW from column (or pandas expression) OLD; repeatable, "
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
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        metavar="B",
        help="session-run bootstrap replicates (fit: 0, score: 30)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _read(args):
    from .trials import parse_mapping, read_trials

    return read_trials(
        args.trials,
        mapping=parse_mapping(args.map),
        where=args.where,
        missing_where=args.missing_where,
    )


def _write_csv(df, path: Path) -> None:
    tmp = path.with_name(path.name + ".part")
    df.to_csv(tmp, index=False)
    tmp.replace(path)  # a reader never sees a half-written file


def cmd_fit(args) -> int:
    from .api import evidence_table
    from .fitting import fit_batch, fits_table
    from .provenance import provenance

    if args.bootstrap < 0:
        raise BayesobsInputError("--bootstrap must be 0 or more")
    t0 = time.perf_counter()
    trials = _read(args)
    batch = fit_batch(
        trials,
        bootstrap=args.bootstrap,
        seed=args.seed,
        progress=not args.no_progress and sys.stderr.isatty(),
    )
    args.out.mkdir(parents=True, exist_ok=True)
    _write_csv(fits_table(batch), args.out / "fits.csv")
    _write_csv(evidence_table(batch), args.out / "evidence.csv")
    cells = batch.cells
    _write_csv(cells, args.out / "cells.csv")
    n_missing = int(cells["n_missing"].sum())
    n_trials = int(cells["n_trials"].sum())
    skipped_log = int((cells["log_skipped"] != "").sum())
    record = provenance(
        command="fit",
        inputs=[str(p) for p in args.trials],
        map=args.map,
        where=args.where,
        missing_where=args.missing_where,
        bootstrap=args.bootstrap,
        seed=args.seed,
        n_cells=len(cells),
        n_trials=n_trials,
        n_missing=n_missing,
        seconds=round(time.perf_counter() - t0, 3),
    )
    (args.out / "fit_manifest.json").write_text(json.dumps(record, indent=2) + "\n")
    print(
        f"fitted {len(cells)} cell(s), {n_trials} trials "
        f"({n_missing} missing response(s) kept in sequence, excluded from likelihoods)"
        + (
            f", log variants skipped in {skipped_log} cell(s) (see cells.csv)"
            if skipped_log
            else ""
        )
        + f" -> {args.out}/fits.csv, {args.out}/evidence.csv"
    )
    return 0


def _fmt(row, name, digits=3) -> str:
    val = row[name]
    if val != val:  # NaN
        return "n/a"
    text = f"{val:.{digits}f}"
    lo, hi = row.get(f"{name}_lo"), row.get(f"{name}_hi")
    if lo is not None and lo == lo:
        text += f" [{lo:.{digits}f}, {hi:.{digits}f}]"
    return text


def leaderboard(bayesbench) -> str:
    """Plain-text leaderboard: subjects by S, with A, E, C and BCS (68% intervals)."""
    board = bayesbench.sort_values("S", ascending=False, na_position="last")
    cols = [("S", 3), ("A", 3), ("E", 3), ("C", 3), ("BCS", 1)]
    header = ["rank", "subject", *(c for c, _ in cols)]
    lines = [
        [str(i + 1), str(r["subject"]), *(_fmt(r, c, d) for c, d in cols)]
        for i, (_, r) in enumerate(board.iterrows())
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *lines, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), *(fmt.format(*ln) for ln in lines)])


def cmd_score(args) -> int:
    from .provenance import provenance
    from .scores import score

    if args.bootstrap < 0:
        raise BayesobsInputError("--bootstrap must be 0 or more")
    t0 = time.perf_counter()
    trials = _read(args)
    result = score(
        trials,
        bootstrap=args.bootstrap,
        seed=args.seed,
        non_oracle=args.non_oracle,
        probe=not args.no_probe,
        progress=not args.no_progress and sys.stderr.isatty(),
    )
    args.out.mkdir(parents=True, exist_ok=True)
    for name, table in result._asdict().items():
        _write_csv(table, args.out / f"{name}.csv")
    record = provenance(
        command="score",
        inputs=[str(p) for p in args.trials],
        map=args.map,
        where=args.where,
        missing_where=args.missing_where,
        bootstrap=args.bootstrap,
        seed=args.seed,
        non_oracle=args.non_oracle,
        n_trials=len(trials),
        n_missing=int(trials["response"].isna().sum()),
        seconds=round(time.perf_counter() - t0, 3),
    )
    (args.out / "score_manifest.json").write_text(json.dumps(record, indent=2) + "\n")
    interval = f"bootstrap B={args.bootstrap}, 68% intervals" if args.bootstrap else "no bootstrap"
    print(f"BayesBench leaderboard ({interval})")
    print(leaderboard(result.bayesbench))
    if len(result.missing):
        print(
            f"\n{len(result.missing)} piece(s) could not be computed (see {args.out}/missing.csv):"
        )
        for r in result.missing.head(8).itertuples(index=False):
            where = "/".join(x for x in (r.subject, r.task) if x)
            print(f"  {where}: {r.component}: {r.reason}")
    print(f"\ntables -> {args.out}/ (accuracy, cue, bcs, bayesbench, fits, evidence, ...)")
    return 0


def cmd_simulate(args) -> int:
    from .synthetic import simulated_trials
    from .trials import write_trials

    if args.subjects < 1 or args.trials < 2 or args.runs < 1:
        raise BayesobsInputError("--subjects and --runs must be >= 1 and --trials >= 2")
    trials = simulated_trials(
        n_subjects=args.subjects, trials_per_session=args.trials, runs=args.runs, seed=args.seed
    )
    path = write_trials(trials, args.out)
    print(f"wrote {len(trials)} simulated trials ({args.subjects} subject(s)) -> {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="bayesobs",
        description="Bayesian psychophysics of language models and people.",
    )
    parser.add_argument("--version", action="version", version=f"bayesobs {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("fit", help="fit the ten observer variants; write fits.csv and evidence.csv")
    _add_trial_options(p)
    p.set_defaults(func=cmd_fit)

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
    p.set_defaults(func=cmd_score)

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
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BayesobsInputError as exc:
        print(f"bayesobs: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bayesobs: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
