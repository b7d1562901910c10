"""Start a run: the one path of ``bayesobs run`` and ``sweep`` (:func:`start`).

:func:`run_task` and :func:`sweep` plan a spec or a protocol
(:mod:`bayesobs.run.plan`) and :func:`start` runs the sessions into an experiment
folder, trial by trial (:mod:`bayesobs.run.engine`) or through a provider's Batch
API (:mod:`bayesobs.run.batch`).  The planning and engine names that used to live
here are re-exported.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from ..errors import BayesobsInputError
from .budget import Budget
from .concurrency import DEFAULT_MAX_CONCURRENCY
from .engine import RunReport as RunReport  # re-exported: the engine's names' old home
from .engine import estimate as estimate
from .engine import execute as execute
from .engine import experiment_record, make_subjects
from .plan import HUMAN as HUMAN
from .plan import Session as Session  # re-exported: the planning API's old home
from .plan import load_protocol as load_protocol
from .plan import load_spec as load_spec
from .plan import plan as plan
from .plan import plan_all
from .plan import reverse_trials as reverse_trials
from .prices import Prices, load_prices
from .progress import total_line
from .store import ExperimentStore, logged_trials


def _batch():
    """The Batch API path (:mod:`bayesobs.run.batch`)."""
    # start-up time: the batch path loads the OpenAI and Anthropic SDKs; only with --batch
    from . import batch

    return batch


def costs(
    sessions: list[Session], done: dict, chat: dict | None, prices: Prices, batch: bool = False
) -> dict:
    """Dollars of the calls still to make, as a range (``--dry-run``, ``design --cost-for``).

    Parameters
    ----------
    sessions : list of Session
        The planned session runs (``sim:`` subjects cost nothing).
    done : dict
        The trials already logged, keyed as :func:`estimate` takes them.
    chat : dict or None
        Chat options (the reply budget).
    prices : Prices
        The price table (:func:`bayesobs.run.prices.load_prices`).
    batch : bool, default False
        At the Batch API's discount.

    Returns
    -------
    dict
        ``cost_low`` (the :func:`estimate` input tokens with one output
        token a reply), ``cost_high`` (every reply its whole budget),
        ``unpriced`` (a line for each model without a price, left out of
        both) and ``per_call`` (dollars and tokens of one call at the high
        end: the budget's estimate before a reply is billed).
    """
    by_subject: dict[str, list[Session]] = {}
    for s in sessions:
        if not s.subject.startswith("sim:"):  # simulated observers cost nothing
            by_subject.setdefault(s.subject, []).append(s)
    low = high = 0.0
    calls = tokens = 0
    unpriced = []
    for subject, group in by_subject.items():
        est = estimate(group, done, chat)
        price = prices.price(subject)
        if not est["calls"]:
            continue
        if price is None:
            unpriced.append(prices.why_unknown(subject))
            continue
        calls += est["calls"]
        tokens += est["input_tokens"] + est["output_tokens"]
        low += price.cost(est["input_tokens"], 0, est["calls"], batch)
        high += price.cost(est["input_tokens"], 0, est["output_tokens"], batch)
    per_call = (high / calls, tokens // calls) if calls else (0.0, 0)
    return {"cost_low": low, "cost_high": high, "unpriced": unpriced, "per_call": per_call}


def _budget(options: dict | None, sessions, done, chat, batch: bool) -> tuple[Budget, dict]:
    """The run's :class:`Budget` (limits of ``options``, prices of ``--prices``/``--price``) and its cost estimate."""
    options = dict(options or {})
    prices = load_prices(options.pop("prices", None), options.pop("price", None) or ())
    est = costs(sessions, done, chat, prices, batch)
    if options.get("max_cost") is not None and est["unpriced"]:
        raise BayesobsInputError(f"--max-cost needs a price for every model: {est['unpriced'][0]}")
    return Budget(prices, first_call=est["per_call"], **options), est


@contextmanager
def _sigterm_as_ctrl_c():
    """While a run holds its folder, SIGTERM stops it as Ctrl-C does (a ``stopped`` event, exit 130)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        handler = signal.getsignal(signal.SIGINT)  # asyncio's (cancels the run) or Python's
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def start(
    specs: list[dict],
    sessions: list[Session],
    subjects: list[str],
    out: str | Path,
    settings: dict,
    chat: dict | None = None,
    sim_seed: int = 0,
    ami: str | None = None,
    api_key: str | None = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    cache_scope: str = "folder",
    concurrency: int | str = 16,
    progress: bool | str = False,
    dry_run: bool = False,
    hvs: str | None = None,
    batch: dict | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    budget: dict | None = None,
) -> RunReport:
    """Run planned sessions into experiment folder ``out``: the one path of ``run`` and ``sweep``.

    Builds the experiment record (compared with the folder's manifest on
    resume), the subjects, takes the folder's lock, and logs every trial.
    With ``dry_run`` nothing is called: the report's ``dry_run`` holds the
    calls still to make and a rough input-token count.  With ``batch``
    (:class:`bayesobs.run.batch.BatchOptions` fields, e.g. ``{"poll_max": 60}``)
    the requests go through the provider's Batch API in rounds
    (:mod:`bayesobs.run.batch`); the experiment record is the same, so a folder
    may be resumed with or without it.

    Parameters
    ----------
    specs : list of dict
        The task specs the sessions were planned from (for the experiment record).
    sessions : list of Session
        The planned session runs (:func:`bayesobs.run.plan.plan`).
    subjects : list of str
        Subject specifiers (``sim:...``, ``openai:...``, ``anthropic:...``).
    out : str or Path
        The experiment folder (created, or resumed when its manifest matches).
    settings : dict
        Command settings recorded in the manifest (``command``, ``trials``, ``runs`` ...).
    chat : dict, optional
        Chat options of API subjects (:class:`bayesobs.run.subjects.openai_chat.ChatOptions` fields).
    sim_seed : int, default 0
        Seed of the simulated subjects.
    ami : str, optional
        A folder of the AMI corpus (task ``duration``), recorded in the manifest.
    api_key : str, optional
        API key of the subjects (never written anywhere).
    cache_dir : str or Path, optional
        The reply cache's folder.
    use_cache : bool, default True
        Replay and store replies in the cache.
    cache_scope : {"folder", "global"}, default "folder"
        Replay cached replies only into ``out``, or from any folder.
    concurrency : int or "auto", default 16
        Sessions run at once; ``"auto"`` adapts it to the provider's limits.
    progress : bool or str, default False
        Show a progress bar (``"lines"``: plain lines on stderr, for a log file).
    dry_run : bool, default False
        Call nothing; report what is left to call.
    hvs : str, optional
        Source folder of task ``hvs``, recorded in the manifest when given.
    batch : dict, optional
        :class:`bayesobs.run.batch.BatchOptions` fields; run through the Batch API.
    max_concurrency : int, default DEFAULT_MAX_CONCURRENCY
        Ceiling of ``concurrency="auto"``.
    budget : dict, optional
        ``max_cost`` (dollars), ``max_total_tokens``, ``prices`` (a price
        file) and ``price`` (``MODEL=IN,OUT`` overrides):
        :class:`bayesobs.run.budget.Budget`.  The folder's calls, earlier
        runs' included, are counted against the limits; a session stops
        cleanly before a call would pass them (the report's
        ``budget_reached``), and the same call with larger limits resumes.

    Returns
    -------
    RunReport
        What the run did (trials logged, resumed, cached, unparsed, failed
        sessions, time, torn logs and unreadable lines cut on resume); with
        ``dry_run`` only its ``dry_run`` dictionary (calls, tokens, trials
        logged, sessions and, with ``batch``, the rounds needed).

    Raises
    ------
    BayesobsInputError
        For a subject that cannot be built or has no Batch API (with
        ``batch``), bad batch options, or a folder whose manifest differs.
    """
    if batch is not None:
        _batch().check_batch_subjects(subjects)
        batch_options = _batch().BatchOptions(**batch)

    record = experiment_record(specs, subjects, **settings, chat=chat, sim_seed=sim_seed, ami=ami)
    if hvs:  # only then: folders without hvs keep their manifest
        record["hvs"] = hvs
    logged = logged_trials(Path(out) / "trials.jsonl")[0] if dry_run else {}
    money, est = _budget(budget, sessions, logged, chat, batch is not None)
    if dry_run:
        done = set(logged)
        extra = (
            {"batch_rounds": _batch().rounds_needed(sessions, done)} if batch is not None else {}
        )
        for row in logged.values():
            money.spend.add(row, money.prices)
        return RunReport(
            dry_run={
                **estimate(sessions, done, chat),
                "logged": len(done),
                "sessions": len(sessions),
                **{k: est[k] for k in ("cost_low", "cost_high", "unpriced")},
                **extra,
            },
            budget=money,
        )
    objs = make_subjects(
        subjects,
        sim_seed=sim_seed,
        chat=chat,
        api_key=api_key,
        cache_dir=cache_dir,
        use_cache=use_cache,
        cache_scope=cache_scope,
        folder=out,
    )
    with ExperimentStore(out, record, lock=True) as store, _sigterm_as_ctrl_c():
        torn, unreadable = list(store.torn_logs), list(store.unreadable_lines)
        for row in store.done.values():  # the folder's earlier calls count against the budget
            money.spend.add(row, money.prices)
        if batch is not None:
            # the batch path's bar, else its own line per poll
            report = _batch().execute_batch(
                sessions, store, objs, batch_options, chat, progress is True, money
            )
        else:
            report = execute(
                sessions,
                store,
                objs,
                concurrency=concurrency,
                progress=progress,
                max_concurrency=max_concurrency,
                budget=money,
            )
    report.torn_logs = torn
    report.unreadable_lines = unreadable
    return report


def run_task(
    task: str | Path,
    subjects: list[str],
    out: str | Path,
    modalities: list[str] | None = None,
    conditions: list[str] | None = None,
    trials: int | None = None,
    runs: int | None = None,
    ami: str | Path | None = None,
    hvs: str | Path | None = None,
    **options,
) -> RunReport:
    """Run one task spec on subjects into ``out``: the library form of ``bayesobs run``.

    ``options`` are those of :func:`start` (``chat``, ``api_key``,
    ``concurrency``, ``dry_run`` ...).

    Parameters
    ----------
    task : str or Path
        The task spec's path or name (:func:`bayesobs.run.plan.load_spec`).
    subjects : list of str
        Subject specifiers.
    out : str or Path
        The experiment folder.
    modalities, conditions : list of str, optional
        Override the spec's modalities and conditions.
    trials : int, optional
        Trials per run (overrides the spec).
    runs : int, optional
        Runs per session (overrides the spec).
    ami : str or Path, optional
        A folder of the AMI corpus (task ``duration``).
    hvs : str or Path, optional
        Source folder of task ``hvs``.
    **options
        Keyword arguments of :func:`start`.

    Returns
    -------
    RunReport
        As :func:`start` returns it.

    Raises
    ------
    BayesobsInputError
        For a spec that does not load or plan, or as :func:`start` raises.
    """
    spec = load_spec(task)
    ami = str(ami) if ami else None
    hvs = str(hvs) if hvs else None
    if options.get("batch") is not None:  # before planning: one line for a subject without one
        _batch().check_batch_subjects(subjects)
    kw = dict(
        subjects=subjects,
        modalities=modalities,
        conditions=conditions,
        trials=trials,
        runs=runs,
        ami=ami,
        hvs=hvs,
    )
    t0 = time.perf_counter()
    sessions = plan_all([(spec, kw)], progress=options.get("progress", False))
    planning = time.perf_counter() - t0
    settings = {
        "command": "run",
        "modalities": modalities,
        "conditions": conditions,
        "trials": trials,
        "runs": runs,
    }
    report = start([spec], sessions, subjects, out, settings, ami=ami, hvs=hvs, **options)
    if options.get("progress") and not options.get("dry_run"):
        print(total_line(report, time.perf_counter() - t0, planning), file=sys.stderr, flush=True)
    return report


def sweep(
    protocol: str | Path,
    subjects: list[str],
    out: str | Path,
    trials: int | None = None,
    runs: int | None = None,
    ami: str | Path | None = None,
    concurrency: int | str = 16,
    progress: bool | str = False,
    sim_seed: int = 0,
    cache_scope: str = "folder",
    api_key: str | None = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    dry_run: bool = False,
    hvs: str | Path | None = None,
    batch: dict | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    budget: dict | None = None,
    **chat,
) -> RunReport:
    """Run a protocol (e.g. ``tasks/bayesbench.toml``) on subjects into folder ``out``.

    The library form of ``bayesobs sweep`` (the CLI calls it, so either
    resumes a folder the other started); resumes an existing folder (held
    with a lock while it runs).  ``chat`` takes
    :class:`bayesobs.run.subjects.openai_chat.ChatOptions` fields (``temperature``,
    ``base_url`` ...) for ``openai:`` subjects; ``api_key`` (never written
    anywhere; default ``$OPENAI_API_KEY``), ``cache_dir``/``use_cache`` as
    ``--cache``/``--no-cache``; ``cache_scope`` is ``"folder"`` (replay cached
    replies only into ``out``) or ``"global"``; ``batch`` as in :func:`start`
    (``--batch``).

    Parameters
    ----------
    protocol : str or Path
        The protocol's path or name (:func:`bayesobs.run.plan.load_protocol`).
    subjects : list of str
        Subject specifiers.
    out : str or Path
        The experiment folder.
    trials : int, optional
        Trials per run for every experiment (overrides the specs).
    runs : int, optional
        Runs per session (overrides the specs).
    ami : str or Path, optional
        A folder of the AMI corpus (task ``duration``).
    concurrency : int or "auto", default 16
        Sessions run at once.
    progress : bool or str, default False
        The plan line, progress bars while planning and running (``"lines"``:
        plain lines, for a log file) and the total line, on stderr.
    sim_seed : int, default 0
        Seed of the simulated subjects.
    cache_scope : {"folder", "global"}, default "folder"
        Where cached replies may be replayed from.
    api_key : str, optional
        API key (default ``$OPENAI_API_KEY``).
    cache_dir : str or Path, optional
        The reply cache's folder.
    use_cache : bool, default True
        Replay and store replies in the cache.
    dry_run : bool, default False
        Call nothing; report what is left to call.
    hvs : str or Path, optional
        Source folder of task ``hvs``.
    batch : dict, optional
        :class:`bayesobs.run.batch.BatchOptions` fields.
    max_concurrency : int, default DEFAULT_MAX_CONCURRENCY
        Ceiling of ``concurrency="auto"``.
    budget : dict, optional
        Limits and prices, as in :func:`start` (``--max-cost`` ...).
    **chat
        Chat options of API subjects.

    Returns
    -------
    RunReport
        As :func:`start` returns it.

    Raises
    ------
    BayesobsInputError
        For a protocol that does not load or plan, or as :func:`start` raises.
    """
    exps = load_protocol(protocol)
    ami = str(ami) if ami else None
    hvs = str(hvs) if hvs else None
    if batch is not None:  # before planning: one line for a subject without a batch API
        _batch().check_batch_subjects(subjects)
    kw = dict(subjects=subjects, trials=trials, runs=runs, ami=ami, hvs=hvs)
    t0 = time.perf_counter()
    sessions = plan_all([(e["spec"], kw) for e in exps], progress=progress)
    planning = time.perf_counter() - t0
    settings = {"command": "sweep", "protocol": str(protocol), "trials": trials, "runs": runs}
    report = start(
        [e["spec"] for e in exps],
        sessions,
        subjects,
        out,
        settings,
        chat=chat,
        sim_seed=sim_seed,
        ami=ami,
        api_key=api_key,
        cache_dir=cache_dir,
        use_cache=use_cache,
        cache_scope=cache_scope,
        concurrency=concurrency,
        progress=progress,
        dry_run=dry_run,
        hvs=hvs,
        batch=batch,
        max_concurrency=max_concurrency,
        budget=budget,
    )
    if progress and not dry_run:
        print(total_line(report, time.perf_counter() - t0, planning), file=sys.stderr, flush=True)
    return report
