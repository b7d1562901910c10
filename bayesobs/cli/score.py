"""``bayesobs score``: the score tables, the leaderboard and the digests printed."""

from __future__ import annotations

import sys
import time

from ..errors import BayesobsInputError
from .options import (
    _fit_options,
    _read,
    _trial_options,
    _write_exclusions,
)


def leaderboard(bayesbench, missing=None, resample: str | None = "pooled") -> str:
    """Plain-text leaderboard: subjects by S."""
    from ..leaderboard import leaderboard_text

    return leaderboard_text(bayesbench, missing, resample=resample)


def cmd_score(args) -> int:
    """``bayesobs score``: accuracy, BCS, cue combination and the BayesBench composite."""
    from ..run.store import lock_folder

    with lock_folder(args.out, "score"):  # one writer of a score folder at a time
        return _score(args)


def _score(args) -> int:
    """The work of :func:`cmd_score`, its ``--out`` folder held."""
    from ..scores import score

    t0 = time.perf_counter()
    trials, exclusions = _read(args)
    result = score(
        trials,
        non_oracle=args.non_oracle,
        probe=not args.no_probe,
        options=_fit_options(args),
        references=not args.no_references,
        humans=args.humans,
    )
    options = _trial_options(
        args,
        non_oracle=args.non_oracle,
        references=not args.no_references,
        humans=args.humans,
        seconds=round(time.perf_counter() - t0, 3),
    )
    from ..provenance import adaptive_subjects

    if adaptive := adaptive_subjects(args.trials):  # issue 53: say which numbers are adaptive
        options["adaptive"] = adaptive
        for table in (result.bayesbench, result.evidence, result.bcs):
            if "subject" in table:
                table["adaptive"] = table["subject"].isin(list(adaptive))
        if "subject" not in result.bayesbench:  # else the leaderboard's note says it
            print(
                f"note: {', '.join(adaptive)}: from an adaptive sweep (manifest.json holds the stops)"
            )
    written = result.to_folder(args.out, trials=trials, manifest=options)
    written += _write_exclusions(exclusions, args.out)
    _print_scores(args, trials, result, written)
    return 0


def _print_scores(args, trials, result, written: list[str]) -> None:
    """The leaderboard, notes and summaries ``bayesobs score`` prints once its tables are written."""
    from ..leaderboard import wrap

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
    from ..scores.evidence import veridical_lead

    for line in veridical_lead(result.evidence):  # issue 49: the headline's veridical reading
        print(wrap(f"note: {line}"))
    from ..order import order_lines
    from ..trials import RUN_KEYS

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
    from ..paradigms import paradigm_tables_of, registered

    tables = result.tables()
    for paradigm in registered():  # each registered paradigm's summary (bayesobs.paradigms)
        mine = paradigm_tables_of(paradigm, tables)
        if mine and (text := paradigm.summary_text(mine, args.out)):
            print()
            print(text)
    if result.cot_accuracy is not None:
        from ..leaderboard import cot_accuracy_summary

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


def cmd_psychometric(args) -> int:
    """``bayesobs psychometric``: Bayesian (and ML) psychometric functions of a user's table."""
    from ..report.psychometric import psychometric_grid
    from ..run.store import lock_folder
    from ..scores.psychometric_bayes import bayes_table
    from ..trials import write_csv

    levels, direction = _psychometric_input(args)
    fits, missing = bayes_table(levels, args.sigmoid, direction, args.bootstrap)
    if fits.empty:
        raise BayesobsInputError(f"nothing to fit in {args.table}: {'; '.join(missing['reason'])}")
    with lock_folder(args.out, "psychometric"):
        (args.out / "figures").mkdir(parents=True, exist_ok=True)
        write_csv(fits, args.out / "psychometric.csv")
        write_csv(levels, args.out / "psychometric_levels.csv")
        psychometric_grid(fits, levels).savefig(args.out / "figures" / "psychometric.png")
    for why in missing["reason"]:
        print(f"skipped: {why}", file=sys.stderr)
    for r in fits.to_dict("records"):
        edge = f" (prior binds: {r['mass_at_edge']})" if r["mass_at_edge"] else ""
        print(
            f"threshold {r['threshold']:.4g} [{r['threshold_lo']:.4g}, {r['threshold_hi']:.4g}], "
            f"width {r['width']:.4g}, lapse {r['lapse']:.3f}, eta {r['eta']:.3f}{edge}"
        )
    print(f"wrote {args.out / 'psychometric.csv'}")
    return 0


def _psychometric_input(args):
    """The levels of ``bayesobs psychometric``'s input, and the direction to fit.

    A folder is an experiment (its right/wrong trials, at each paradigm's chance; falling
    with the level unless ``--direction`` says otherwise); a file, a ``level, correct[, total]``
    table (rising unless told).
    """
    import pandas as pd

    from ..scores.psychometric import psychometric_levels
    from ..scores.psychometric_bayes import counts_levels
    from ..trials import read_trials

    if args.table.is_dir():
        levels = psychometric_levels(read_trials([args.table]))
        if levels.empty:
            raise BayesobsInputError(f"{args.table}: no right/wrong trials with levels to fit")
        if args.guess is not None:
            levels = levels.assign(guess=args.guess)
        return levels, args.direction or "decreasing"
    if args.guess is None:
        raise BayesobsInputError("a table needs --guess (the chance rate, e.g. 0.5 for 2AFC)")
    try:
        table = pd.read_csv(args.table)
    except (OSError, ValueError, UnicodeDecodeError) as e:  # pandas' parse errors are ValueErrors
        raise BayesobsInputError(f"cannot read {args.table}: {e}") from e
    return counts_levels(table, args.guess, tuple(args.by)), args.direction or "increasing"
