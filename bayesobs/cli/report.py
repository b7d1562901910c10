"""``bayesobs report`` and ``compare``: the HTML report of one study, and models compared across folders."""

from __future__ import annotations


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
    from ..limits import check
    from ..report import build_report

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
    from ..compare import run_compare, summary_text
    from ..leaderboard import wrap

    res = run_compare(args.folders, args.features, args.out, use=args.feature, report=args.report)
    print(summary_text(res["compare"], res["leaderboard"]))
    print()
    names = ", ".join(str(p.relative_to(args.out)) for p in res["written"])
    print(wrap(f"tables -> {args.out}/ ({names})"))
    return 0
