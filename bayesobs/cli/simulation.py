"""Simulated observers: ``bayesobs simulate``, ``design`` (recovery and power) and ``calibrate`` (SBC)."""

from __future__ import annotations

from ..errors import BayesobsInputError


def cmd_simulate(args) -> int:
    """``bayesobs simulate``: trial tables of simulated observers with known parameters."""
    from ..fits.synthetic import simulated_trials
    from ..trials import write_trials

    if args.subjects < 1 or args.trials < 2 or args.runs < 1:
        raise BayesobsInputError("--subjects and --runs must be >= 1 and --trials >= 2")
    from ..limits import check

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
    """``bayesobs design``: model recovery and power of a protocol before any run."""
    from ..design import design, write_design

    trials = _number_list(args.trials, "--trials", int) if args.trials else None
    if trials is not None and any(t < 2 for t in trials):
        raise BayesobsInputError(f"--trials must be whole numbers >= 2, not {args.trials!r}")
    shifts = _number_list(args.shifts, "--shifts")
    if args.adaptive:
        return _design_adaptive(args, trials)
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
    if args.cost_for:
        print(power_against_cost(args, trials, res["summary"]))
    total = float(res["timing"]["seconds"].iloc[-1])
    print(
        f"\n{args.reps} replicate(s) per model in {total:.1f} s -> {args.out}/ "
        f"({', '.join(res)}; figures/confusion.png)"
    )
    return 0


def power_against_cost(args, trials, summary) -> str:
    """``design --cost-for``: calls, tokens and dollars per trial count beside the power (``costs.csv``)."""
    from ..design import design_costs
    from ..run.prices import load_prices, money

    prices = load_prices(None, args.price or ())
    cost = design_costs(args.spec, args.cost_for, trials, args.runs, prices)
    cost.to_csv(args.out / "costs.csv", index=False)
    power = [
        c for c in summary.columns if c == "diagonal_mean" or c.startswith(("right_", "power_s_"))
    ]
    lines = [
        f"\npower against cost on {args.cost_for} (prices of {prices.date or 'your table'}; "
        "input tokens estimated as --dry-run does, dollars from one output token a reply "
        "to every reply's whole budget):",
        "trials     calls  input tokens  dollars          " + "".join(f"  {c:>14}" for c in power),
    ]
    for r in cost.itertuples(index=False):
        row = summary[summary["trials"] == r.trials] if r.trials else summary.iloc[:1]
        dollars = (
            f"{money(r.cost_low)}-{money(r.cost_high)}"
            if r.cost_low == r.cost_low  # NaN: no price
            else prices.why_unknown(args.cost_for)
        )
        lines.append(
            f"{r.trials or 'spec':>6}  {r.calls:>8,}  {r.input_tokens:>12,}  {dollars:<17}"
            + "".join(f"  {row[c].iloc[0]:>14.3f}" for c in power if len(row))
        )
    return "\n".join(lines)


def _design_adaptive(args, trials) -> int:
    """``design --adaptive SUBJECT``: the adaptive rule against the fixed protocol, before paying."""
    from ..adaptive import AdaptiveOptions, compare_fixed

    rule = AdaptiveOptions(bootstrap=args.bootstrap, seed=args.seed)
    for subject in args.adaptive:
        if not subject.startswith("sim:"):
            raise BayesobsInputError(f"design --adaptive simulates sim: subjects, not {subject!r}")
        folder = args.out / subject.replace(":", "-")
        r = compare_fixed(args.spec, [subject], folder, rule, trials and trials[0], args.runs)
        reached = (
            f"; the fixed protocol's decided conclusions reached: {r['agreement']:.0%} of "
            f"{r['decided']} (factor winners {r['factor_agreement']:.0%}, BCS signs "
            f"{r['sign_agreement']:.0%}); of all {r['conclusions']}: {r['agreement_all']:.0%}"
        )
        print(
            f"{subject}: adaptive {r['calls']} of {r['fixed_calls']} calls "
            f"({r['calls'] / r['fixed_calls']:.0%}), about {r['input_tokens']:,} of "
            f"{r['fixed_input_tokens']:,} input tokens, {r['rounds']} round(s)"
            f"{reached if r['conclusions'] else ''} -> {folder}/"
        )
        for t in r["thresholds"]:  # right/wrong groups: the precision each design reaches
            f, a = t["fixed"], t["adaptive"]
            print(
                f"  {t['group']}: threshold 95% interval {a['hi'] - a['lo']:.3g} wide after "
                f"{a['trials']} trials (fixed: {f['hi'] - f['lo']:.3g} after {f['trials']})"
            )
    return 0


def design_summary(summary) -> str:
    """Plain-text table of ``summary.csv``: one line per trial count."""
    cols = [c for c in summary.columns if c != "trials"]
    lines = ["trials  " + "  ".join(f"{c:>14}" for c in cols)]
    for r in summary.itertuples(index=False):
        lines.append(f"{r[0]:>6}  " + "  ".join(f"{v:>14.3f}" for v in r[1:]))
    return "\n".join(lines)


def cmd_calibrate(args) -> int:
    """``bayesobs calibrate``: simulation-based calibration of the posterior fits."""
    from ..calibration import POWER, calibrate, write_calibration
    from ..compile_cache import enable
    from ..leaderboard import wrap

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
