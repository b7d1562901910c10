"""``bayesobs fit``: maximum-likelihood and posterior fits of every cell, printed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..errors import BayesobsInputError
from .options import (
    _fit_options,
    _progress,
    _read,
    _trial_options,
    _write_exclusions,
)


def _fit_posterior(args, trials, fits, out: Path) -> None:
    """``fit --method posterior``: the library writes the outputs; here they are printed."""
    from ..compile_cache import enable
    from ..report.posterior import write_outputs

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
        from ..fits.posterior import prior_predictive
        from ..trials import write_csv

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


def cmd_fit(args) -> int:
    """``bayesobs fit``: maximum-likelihood (and optionally posterior) fits of every cell."""
    _check_fit_options(args)
    transfer = _transfer_spec(args)
    t0 = time.perf_counter()
    from ..api import fit_result, write_fit

    trials, exclusions = _read(args)
    trials = _fit_trials(trials, transfer)
    result = fit_result(trials, _fit_options(args), response=args.response, normalized=True)
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
    from ..api import magnitude_trials

    trials, left_out = magnitude_trials(trials)
    if transfer:
        from ..fits.transfer import check_conditions

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
        from ..fits.observers import get_variant

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
    from ..leaderboard import wrap
    from ..order import order_lines, unordered
    from ..trials import RUN_KEYS, parse_mapping, runs_summary

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
    from ..fits.transfer import parse_transfer

    if args.interleaved:
        raise BayesobsInputError(
            "--transfer with --interleaved: transfer applies one parameter set per cell; "
            "fit the interleaved levels without --transfer"
        )
    return parse_transfer(args.transfer)


def _write_transfer(trials, fits, transfer: tuple[str, str], out: Path) -> None:
    """Write ``transfer.csv`` and print its one-line summary."""
    from ..fits.transfer import transfer_summary, transfer_table
    from ..trials import write_csv

    table = transfer_table(trials, fits, *transfer)
    write_csv(table, out / "transfer.csv")
    print(f"{transfer_summary(table, *transfer)} -> {out}/transfer.csv")


def fit_bootstrap_warnings(trials, cells, bootstrap: int) -> list[str]:
    """``fit --bootstrap`` on cells with too few runs: what ``score`` says, and the empty intervals."""
    if not bootstrap:
        return []
    from ..scores import FEW_RUNS_REASON, few_runs_cells

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
