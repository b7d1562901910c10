"""``bayesobs report`` and ``compare``: the HTML report of one study, and models compared across folders."""

from __future__ import annotations

from ..errors import BayesobsInputError


def cmd_report(args) -> int:
    """``bayesobs report``: the HTML report of trial files, an experiment or a score folder."""
    from ..limits import check
    from ..report import build_report

    check("bootstrap", args.bootstrap, "--bootstrap asks for")  # before any reading
    index = build_report(
        args.inputs,
        args.out,
        bootstrap=args.bootstrap,
        seed=args.seed,
        resample=args.resample,
        participants=(args.participants, args.participants_id) if args.participants else None,
    )
    print(f"report -> {index}")
    return 0


def cmd_compare(args) -> int:
    """``bayesobs compare``: mixed models of per-task scores on model features, across folders."""
    from ..compare import run_compare, summary_text
    from ..leaderboard import wrap

    features = args.features
    if args.participants:  # the participant export's columns as the features, by its id
        from ..demographics import read_participants

        features = read_participants(args.participants, args.participants_id)
        features = features.rename_axis("subject").reset_index()
    elif features is None:
        raise BayesobsInputError("compare needs --features FILE or --participants FILE")
    res = run_compare(args.folders, features, args.out, use=args.feature, report=args.report)
    print(summary_text(res["compare"], res["leaderboard"]))
    print()
    names = ", ".join(str(p.relative_to(args.out)) for p in res["written"])
    print(wrap(f"tables -> {args.out}/ ({names})"))
    return 0
