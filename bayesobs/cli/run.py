"""``bayesobs run``, ``sweep`` and ``rescore``: the run options, their checks and the run's summary."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..errors import BayesobsInputError
from ..logprobs import MAX_TOP_LOGPROBS
from ..run import DEFAULT_MAX_CONCURRENCY  # not .run.concurrency: no asyncio at start-up
from ..run.imagecost import DEFAULT_IMAGE_DETAIL, IMAGE_DETAILS
from ..run.prices import money
from ..run.reasoning import DEFAULT_REASONING_BUDGET, MAX_REASONING_BUDGET, TOKEN_PARAMS
from .options import _progress


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
        "OpenAI-compatible API), anthropic:MODEL (Claude's Messages API), "
        "inspect:PROVIDER/MODEL (any model inspect_ai reaches; the [inspect] extra) or "
        "python:PACKAGE.MODULE:NAME (your own function or class); repeatable",
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
        "--base-url",
        help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL or OpenAI); for inspect: "
        "subjects, the provider's base_url",
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
        "--max-cost",
        type=float,
        metavar="DOLLARS",
        help="stop cleanly before the folder's calls (earlier runs' included) would cost more: "
        "the next calls are estimated at the running mean of the billed ones; exit 2, nothing "
        "lost, the same command with a larger budget resumes (docs/llm-runs.md#costs-and-budgets)",
    )
    p.add_argument(
        "--max-total-tokens",
        type=int,
        metavar="N",
        help="likewise for input plus output tokens of all calls (not the reply length: "
        "that is --max-tokens)",
    )
    p.add_argument(
        "--prices",
        type=Path,
        metavar="FILE",
        help="a TOML price table over the shipped one (bayesobs/run/prices.toml's shape)",
    )
    p.add_argument(
        "--price",
        action="append",
        metavar="MODEL=IN,OUT",
        help="dollars per million input and output tokens of a model (a third number: cached "
        "input); repeatable; over --prices and the shipped table",
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
    from ..run.budget import check_limits
    from ..run.prices import parse_price

    check_limits(args.max_cost, args.max_total_tokens)
    for text in args.price or ():
        parse_price(text)
    if args.progress and args.no_progress:
        raise BayesobsInputError("give --progress or --no-progress, not both")
    if args.batch:
        from ..run.batch import check_batch_subjects, check_poll_max

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
    """``url`` if it is an http(s) URL with a host; otherwise one clear error."""
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
        "budget": {
            "max_cost": args.max_cost,
            "max_total_tokens": args.max_total_tokens,
            "prices": args.prices,
            "price": args.price,
        },
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
        if d["cost_high"]:  # API subjects with a price (sim: costs nothing)
            print(
                f"money: {money(d['cost_low'])} to {money(d['cost_high'])} for these calls "
                f"(about the input tokens with one output token a reply, to every reply its whole "
                f"budget{'; batch prices' if 'batch_rounds' in d else ''}; prices of "
                f"{report.budget.prices.date or 'your table'})"
            )
        for why in d["unpriced"]:
            print(f"money: {why}")
        if (limit := args.max_cost) is not None and report.budget.spend.usd + d[
            "cost_high"
        ] > limit:
            print(
                f"money: with --max-cost {money(limit)} the run may stop before the end (at the "
                "high estimate it would pass it); the same command with a larger budget resumes"
            )
        if report.budget.spend.billed:
            print(f"already in {args.out}: {report.budget.spend.line()}")
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
    spend = report.budget.spend if report.budget is not None else None
    if spend is not None and (spend.billed or spend.unpriced) and not report.budget_reached:
        print(f"money: {args.out}: {spend.line()}")
    if report.failed_sessions:
        print(
            f"{len(report.failed_sessions)} session(s) stopped early; run the same command again to resume:",
            file=sys.stderr,
        )
        for line in report.failed_sessions[:10]:
            print(f"  {line}", file=sys.stderr)
    if report.budget_reached:  # after the calls in flight ended: the folder's final spend
        print(f"bayesobs: {report.budget.stop_line()}", file=sys.stderr)
        return 2
    return 1 if report.failed_sessions else 0


def cmd_run(args) -> int:
    """``bayesobs run``: one task spec on the given subjects into an experiment folder."""
    from ..run.runner import load_spec, run_task

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
    """``bayesobs sweep``: a protocol (several specs) into one experiment folder."""
    from ..run.runner import sweep

    _check_run_options(args)
    options, chat = _run_options(args)
    rule = (args.first_runs, args.sign_level, args.risk, args.place_width)
    if args.adaptive or any(v is not None for v in rule):
        return _adaptive(args, options, chat)
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


def _adaptive(args, options: dict, chat: dict) -> int:
    """``sweep --adaptive``: rounds of runs, a line per round and per stop reason."""
    from collections import Counter

    from ..adaptive import AdaptiveOptions, adaptive_sweep

    if not args.adaptive:
        raise BayesobsInputError(
            "--first-runs, --sign-level, --risk and --place-width set the rule of --adaptive; "
            "add it"
        )
    given = {"first_runs": args.first_runs, "sign_level": args.sign_level, "risk": args.risk}
    given["place_width"] = args.place_width
    rule = AdaptiveOptions(**{k: v for k, v in given.items() if v is not None})
    for k in ("ami", "hvs"):
        options[k] = str(getattr(args, k)) if getattr(args, k) else None
    res = adaptive_sweep(
        args.protocol, args.subject, args.out, rule, args.trials, args.runs, chat=chat, **options
    )
    if res.reports and res.reports[-1].dry_run is not None:  # later rounds depend on round 1
        _print_report(args, res.reports[-1])
        print(
            f"--adaptive: that is round 1; at most the fixed protocol's {res.fixed_calls} call(s)"
        )
        return 0
    for r in res.rounds:
        print(
            f"round {r['round']}: {r['session_runs']} session run(s) asked, {r['stopped']} cell(s) stopped, {r['open']} open"
        )
    for reason, n in Counter(s["reason"].split(":")[0] for s in res.stops).items():
        print(f"{n} cell(s) stopped: {reason}")
    print(
        f"adaptive sweep: {res.calls} call(s) of the fixed protocol's {res.fixed_calls} "
        f"({res.calls / max(res.fixed_calls, 1):.0%}), about {res.input_tokens:,} of "
        f"{res.fixed_input_tokens:,} input tokens; rule and stops in {args.out / 'manifest.json'}"
    )
    return 0 if res.complete else _print_report(args, res.reports[-1])


def cmd_rescore(args) -> int:
    """``bayesobs rescore``: re-read a folder's logged replies with today's parsers."""
    from ..run.rescore import rescore_folder

    table = rescore_folder(args.folder, args.out)
    target = args.out or args.folder / "rescored.jsonl"
    changed = int(table["rescored_changed"].sum())
    invalid = int((~table["valid"].astype(bool)).sum())
    print(
        f"rescored {len(table)} trial(s): {changed} response(s) changed, {invalid} invalid "
        f"-> {target} (trials.jsonl is unchanged; fit/score read {target.name} like any trial file)"
    )
    return 0
