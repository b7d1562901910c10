"""``bayesobs report``, ``compare`` and ``compare-trials``: one study's report, models across folders, two on the same trials."""

from __future__ import annotations

import sys

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


def cmd_compare_trials(args) -> int:
    """``bayesobs compare-trials``: trial-level agreement of two folders on the same trials."""
    import math

    from ..agreement import agreement, human_range
    from ..limits import check
    from ..run.store import lock_folder
    from ..trials import read_trials, write_csv

    check("bootstrap", args.bootstrap, "--bootstrap asks for")  # before any reading
    a, b = read_trials(args.a), read_trials(args.b)
    table = agreement(a, b, args.bootstrap, args.seed)
    with lock_folder(args.out, "compare-trials"):
        write_csv(table, args.out / "agreement.csv")
    for r in table.to_dict("records"):
        who = f"{r['subject_a']} vs {r['subject_b']}, {r['task']}/{r['modality']}/{r['condition']}"
        if r["kind"] == "right/wrong":
            print(
                f"{who}: {r['n_pairs']} pairs, error consistency kappa {r['kappa']:.3f} "
                f"[{r['kappa_lo']:.3f}, {r['kappa_hi']:.3f}]"
            )
            continue
        print(
            f"{who}: {r['n_pairs']} pairs in {r['n_runs']} runs, r_response {r['r_response']:.3f}, "
            f"r_residual {r['r_residual']:.3f} ({r['best_a']} / {r['best_b']}), d_w_prior "
            f"{r['d_w_prior']:.3f} [{r['d_w_prior_lo']:.3f}, {r['d_w_prior_hi']:.3f}], "
            f"d_kalman_gain {r['d_kalman_gain']:.3f}"
        )
        if r["n_runs"] < 5 or math.isnan(r["r_residual"]):
            print(
                f"  note: magnitude intervals resample {r['n_runs']} paired run(s); under 5 "
                "they are too few to trust",
                file=sys.stderr,
            )
    if args.human_range:
        _print_range(human_range(a, b, seed=args.seed), args.out)
    print(
        f"95% percentile bootstrap, {args.bootstrap} replicates, seed {args.seed}: kappa over "
        f"paired trials, magnitude columns over paired runs -> {args.out / 'agreement.csv'}"
    )
    return 0


def _print_range(table, out) -> None:
    """Write ``human_range.csv`` and print each model's place in the people's population."""
    from ..run.store import lock_folder
    from ..trials import write_csv

    with lock_folder(out, "compare-trials"):
        write_csv(table, out / "human_range.csv")
    for r in table.to_dict("records"):
        print(
            f"{r['subject']} on {r['task']}/{r['modality']}/{r['condition']}: w_prior "
            f"{r['w_prior']:.3f}; a new person's 95% [{r['person_lo']:.3f}, {r['person_hi']:.3f}] "
            f"from {r['n_people']} people ({r['people'].replace(';', ', ')}): p = "
            f"{r['p_within']:.3f}, {'within' if r['within'] else 'outside'} the range (p >= 0.05)"
        )
