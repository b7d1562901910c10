"""The run engine: run planned sessions on subjects: build prompts, call, parse, log, resume.

A *session run* is a sequence of trials shown to one subject in one
conversation: each trial's request carries the system prompt, the previous
``N`` trials of the session (their stimuli in their modality and the
subject's own answers) and the current stimulus.  Stimulus sequences depend
only on the task spec's seed, the session type and the run index, so every
modality and condition of a run sees the same stimuli (cue combination pairs
them; ``context_reversed`` shows the base order reversed).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import sys
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BayesobsInputError
from ..logprobs import reply_distribution
from ..paradigms import registered
from ..provenance import utc_now
from ..stimuli import Stimulus
from .ablations import (
    final_answer,
    reply_budget,
    system_prompt,
)
from .budget import Budget, BudgetReached
from .concurrency import AIMD, DEFAULT_MAX_CONCURRENCY, AdaptiveGate
from .imagecost import DEFAULT_IMAGE_DETAIL, image_tokens, png_size
from .plan import Session
from .presentation import stimulus_images, stimulus_text, trial_blur
from .prices import money
from .progress import bar as progress_bar
from .reasoning import BUDGET_EXHAUSTED, budget_exhausted, reasoning_budget
from .store import ExperimentStore, LogWriteError
from .subjects import (
    FatalSubjectError,
    RandomSubject,
    Reply,
    Request,
    SubjectError,
    Turn,
    parse_subject,
)

TOKENS_PER_IMAGE = 765  # a 4-tile image at OpenAI's high detail: where no image can be measured


API_KINDS = ("openai", "anthropic", "inspect")  # subjects behind an API (chat options, key, cache)


# ---------------------------------------------------------------- running
AUTO = "auto"  # --concurrency auto


def check_concurrency(concurrency, max_concurrency) -> None:
    """``--concurrency`` is a whole number >= 1 or ``auto``; ``--max-concurrency`` a whole number >= 1.

    Parameters
    ----------
    concurrency : int or "auto"
        Sessions run at once, or ``"auto"`` (adaptive).
    max_concurrency : int
        Ceiling of the adaptive level.

    Raises
    ------
    BayesobsInputError
        For a value that is neither (a bool, a float, a number below 1, other text).
    """
    if concurrency != AUTO and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise BayesobsInputError(
            f"--concurrency must be a whole number >= 1 or auto, not {concurrency!r}"
        )
    if (
        isinstance(max_concurrency, bool)
        or not isinstance(max_concurrency, int)
        or max_concurrency < 1
    ):
        raise BayesobsInputError(
            f"--max-concurrency must be a whole number >= 1, not {max_concurrency!r}"
        )


@dataclass
class RunReport:
    """What a run did: trials logged, resumed, cached, unparsed, failed sessions, time."""

    done: int = 0
    skipped: int = 0
    cached: int = 0
    unparsed: int = 0
    budget_exhausted: int = 0  # replies that spent their whole budget reasoning (no answer)
    cached_from: Counter = field(
        default_factory=Counter
    )  # folder a cached reply was logged for -> count
    failed_sessions: list[str] = field(default_factory=list)
    seconds: float = 0.0
    torn_logs: list[str] = field(default_factory=list)  # logs whose torn tail was cut on open
    # 1-based numbers of unreadable (corrupt) lines of trials.jsonl skipped on resume: their
    # trials are run again
    unreadable_lines: list[int] = field(default_factory=list)
    dry_run: dict | None = None  # with dry_run=True: calls to make, tokens, trials already logged
    concurrency: dict | None = None  # --concurrency auto: the controller's figures (AIMD.summary)
    budget: Budget | None = None  # the money and tokens of the folder's calls, and the limits
    budget_reached: str | None = None  # the stop line when the budget stopped the run


class Runner:
    """Runs sessions concurrently (trials within a session in order) into a store."""

    def __init__(
        self,
        store: ExperimentStore,
        subjects: dict[str, Any],
        concurrency: int | str = 16,
        progress: bool | str = True,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        budget: Budget | None = None,
    ):
        check_concurrency(concurrency, max_concurrency)
        self.store = store
        self.budget = budget
        self.subjects = subjects
        self.concurrency = concurrency
        # --concurrency auto: sessions in flight follow the API's 429s (bayesobs.run.concurrency)
        self.gate = AdaptiveGate(AIMD(max_concurrency)) if concurrency == AUTO else None
        self.progress = progress
        self.report = RunReport(budget=budget)
        self._png: OrderedDict[tuple, bytes] = OrderedDict()  # (task, stimulus, blur) -> PNG
        self._reported: dict[str, int] = {}  # subject -> request changes reported

    def _turn(self, sess: Session, stim: Stimulus, blur: float, t: int = 0) -> Turn:
        text = stimulus_text(sess, stim, t)  # the same text a person is shown
        pngs: tuple[bytes, ...] = ()
        if sess.modality in ("image", "multimodal"):
            # the same stimulus recurs across modalities and conditions: render it once
            key = (sess.task.name, stim.key(), blur)
            pngs = self._png.get(key)
            if pngs is None:
                pngs = self._png[key] = stimulus_images(sess, stim, blur)
                if len(self._png) > 4096:
                    self._png.popitem(last=False)
            else:
                self._png.move_to_end(key)
        if len(pngs) > 1:  # several images (object re-identification shows two), in order
            return Turn("user", text=text, png=pngs[0], images=pngs)
        return Turn("user", text=text, png=pngs[0] if pngs else None)

    def _demo_turns(self, sess: Session, stim: Stimulus) -> tuple[tuple[Turn, ...], list[dict]]:
        """The task's few-shot demonstrations as chat turns, and their log entries."""
        demos = sess.task.demos(stim, sess.modality)
        turns: list[Turn] = []
        logged = []
        for d in demos:
            pngs = tuple(d.images)
            if len(pngs) > 1:
                turns.append(Turn("user", text=d.text, png=pngs[0], images=pngs))
            else:
                turns.append(Turn("user", text=d.text, png=pngs[0] if pngs else None))
            turns.append(Turn("assistant", text=d.answer))
            logged.append(
                {
                    "text": d.text,
                    "images": [self.store.save_png(p) for p in pngs],
                    "answer": d.answer,
                }
            )
        return tuple(turns), logged

    def _extra_images(self, user: Turn, demo_log: list[dict]) -> dict:
        """Log columns of a trial that shows several images or few-shot demonstrations."""
        out: dict[str, Any] = {}
        if len(user.pngs) > 1:
            out["images"] = [self.store.save_png(p) for p in user.pngs]
        if demo_log:
            out["demos"] = demo_log
        return out

    def _later(self, sess: Session, stim: Stimulus, blur: float, t: int) -> Callable[[], Turn]:
        """A trial's user turn, rendered on first use and then kept."""
        turn: Turn | None = None

        def get() -> Turn:
            nonlocal turn
            if turn is None:
                turn = self._turn(sess, stim, blur, t)
            return turn

        return get

    def _adaptations(self, name: str, subject) -> None:
        """Report a subject's new request choices: one terminal line and a runs.jsonl event each."""
        changes = getattr(subject, "adaptations", None)
        if changes is None:
            return
        self.store.requests[name] = subject.summary()
        for change in changes[self._reported.get(name, 0) :]:
            print(f"note: {name}: {change['note']}", file=sys.stderr)
            self.store.log_run(event="request_adapted", **change)
        self._reported[name] = len(changes)

    async def run_session(self, sess: Session, bar) -> None:
        """Run one session's trials in order, skipping those already logged.

        Each new trial is asked with the session's system prompt, its few-shot
        demonstrations and the rolling context of the subject's earlier
        answers, then parsed and appended to the store; the report's counts
        are updated.

        Parameters
        ----------
        sess : Session
            The session run.
        bar : tqdm or None
            Progress bar advanced once per trial logged.

        Raises
        ------
        SubjectError
            When the subject cannot answer a trial (logged as ``trial_failed``
            unless fatal; the session stops there).
        """
        subject = self.subjects[sess.subject]
        history: list[tuple[Callable[[], Turn], Turn, int]] = []
        previous: list[float] = []
        asked: Stimulus | None = None  # the previous trial as asked, and its record
        last: dict | None = None
        for t, stim in enumerate(sess.stimuli):
            if asked is not None and last is not None and sess.task.follows(stim):
                # asked from the subject's own previous answer (from the log on resume)
                stim = sess.task.follow_up(stim, asked, last)
            not_asked = stim.params.get("not_asked")
            blur = trial_blur(sess, t)
            later = self._later(sess, stim, blur, t)
            window = history[-sess.cond.context :] if sess.cond.context else []
            key = (*sess.key[:6], t)
            rec = self.store.done.get(key)
            if rec is None:
                user = later()
                system = system_prompt(sess.task, sess.cond, previous, sess.range, sess.options)
                if extra := sess.task.system_extra(stim, sess.cond):  # hvs: the hint condition
                    system = f"{system} {extra}"
                # few-shot demonstrations (with their correct answers) come first, then the
                # rolling context of the subject's own answers, then the trial
                demo_turns, demo_log = self._demo_turns(sess, stim)
                turns = demo_turns + tuple(x for u, a, _ in window for x in (u(), a)) + (user,)
                meta = dict(
                    zip(
                        ("subject", "task", "modality", "condition", "session", "run"),
                        sess.key,
                        strict=True,
                    )
                )
                meta.update(trial=t, seed=sess.seed)
                if sess.prior_mean is not None:  # the session's true prior mean (sim observers)
                    meta["prior_mean"] = sess.prior_mean
                # a task's extra fields for simulated subjects (hvs: the question); not logged
                ask = {**meta, **sess.task.request_meta(stim)}
                # the true values of the context's trials and this one (sim observers of tables)
                ask["magnitudes"] = [sess.stimuli[i].value for *_, i in window] + [stim.value]
                reserved = False
                try:
                    if not_asked:  # nothing to start from: logged unasked, no call
                        reply = Reply(text="")
                    else:
                        if self.gate is not None:  # --concurrency auto: pause while over the level
                            await self.gate.checkpoint()
                        if self.budget is not None:  # raises BudgetReached past the budget
                            self.budget.reserve()
                            reserved = True
                        reply = await subject.complete(
                            Request(
                                system,
                                turns,
                                ask,
                                max_tokens=reply_budget(
                                    sess.task.max_tokens,
                                    sess.cond,
                                    getattr(getattr(subject, "options", None), "max_tokens", None),
                                    getattr(
                                        getattr(subject, "options", None), "reasoning_budget", None
                                    ),
                                ),
                                session_range=sess.range,
                            )
                        )
                    self._adaptations(sess.subject, subject)
                except SubjectError as exc:
                    if reserved:
                        self.budget.settle(None)
                    self._adaptations(sess.subject, subject)
                    if not isinstance(exc, FatalSubjectError):  # logged so; redone on resume
                        self.store.log_run(
                            event="trial_failed",
                            session="/".join(map(str, sess.key)),
                            trial=t,
                            error=str(exc),
                        )
                    raise
                # cot: the task reads the answer after the reply's last "Answer:" label
                answer = sess.task.record(
                    stim,
                    None if not_asked else reasoned(sess, reply.text),
                    truncated=reply.finish_reason == "length",
                )
                if not_asked:
                    answer.update(
                        response=None,
                        valid=False,
                        invalid_reason=f"not asked: {not_asked}",
                        not_asked=True,
                    )
                extra = reply.extra or {}
                if "logprobs" in extra and not sess.task.worded():  # --logprobs: numeric answers
                    answer.update(
                        reply_distribution(
                            extra["logprobs"],
                            reply.text,
                            sess.task.fraction,
                            sess.task.answer_range,
                            truncated=reply.finish_reason == "length",
                            start=reasoned_start(sess, reply.text),
                        )
                    )
                if budget_exhausted(reply.text, reply.finish_reason, extra.get("reasoning_tokens")):
                    answer["valid"] = False  # not a reply without a number: no reply at all
                    answer["invalid_reason"] = BUDGET_EXHAUSTED
                    self.report.budget_exhausted += 1
                if not answer["valid"]:
                    answer.setdefault("invalid_reason", "no answer in the asked format")
                rec = {
                    **meta,
                    "paradigm": sess.task.paradigm,
                    "stimulus": stim.value,
                    "response": answer.pop("response"),
                    "raw_response": None if not_asked else reply.text,
                    "valid": answer.pop("valid"),
                    "range_low": sess.range[0],
                    "range_high": sess.range[1],
                    "blur_sigma": blur,
                    "text_noise": sess.cond.text_noise if user.text is not None else 0.0,
                    "distribution": sess.distribution,
                    "context_window": sess.cond.context,
                    "context_trials": [i for _, _, i in window],
                    "prompt_id": hashlib.sha256(system.encode()).hexdigest()[:12],
                    "stimulus_id": stim.key(),
                    # what the task's record reads besides the reply (rescore, without re-planning)
                    "parse_params": json.dumps(stim.params if sess.task.worded() else {}),
                    "stimulus_text": user.text,
                    "image": self.store.save_png(user.png) if user.png is not None else None,
                    "source": stim.params.get("source"),
                    "latency_s": round(reply.latency_s, 4),
                    **self._extra_images(user, demo_log),
                    "usage": reply.usage,
                    "cached": reply.cached,
                    "attempts": reply.attempts,
                    "finish_reason": reply.finish_reason,
                    **extra,  # API subjects: token_param, temperature_effective, token counts
                    "timestamp": utc_now(),
                    **answer,  # task-specific columns (e.g. a search trial's cells and error)
                }
                self.store.append(rec)
                if reserved:
                    self.budget.settle(rec)
                self.report.done += 1
                self.report.cached += reply.cached
                if reply.cached:
                    self.report.cached_from[reply.cached_from or "an earlier run"] += 1
                self.report.unparsed += not rec["valid"] and not not_asked
                if bar is not None:
                    if post := self._postfix():
                        bar.set_postfix_str(post, refresh=False)
                    bar.update(1)
                await asyncio.sleep(0)  # a subject that never waits (sim:) still lets Ctrl-C in
            else:
                self.report.skipped += 1
            if not not_asked:  # an unasked trial is no turn of the conversation
                # cot: the context shows the subject's earlier answers, not their reasoning
                said = rec["raw_response"]
                history.append((later, Turn("assistant", text=reasoned(sess, said)), t))
            previous.append(stim.value)
            asked, last = stim, rec

    def _postfix(self) -> str:
        """Beside the progress count: the concurrency level (auto) and the money spent so far."""
        parts = [f"concurrency {self.gate.level}"] if self.gate is not None else []
        if self.budget is not None and self.budget.spend.billed:
            parts.append(f"{money(self.budget.spend.usd)} spent")
        return ", ".join(parts)

    async def run(self, sessions: list[Session]) -> RunReport:
        """Run sessions concurrently (up to ``concurrency``) and return the report.

        A session that fails (a subject error or any other exception) is
        noted in the report's ``failed_sessions`` and in ``runs.jsonl``; the
        others go on.

        Parameters
        ----------
        sessions : list of Session
            The session runs; trials already in the store are skipped.

        Returns
        -------
        RunReport
            The counts, failed sessions, seconds and (with ``"auto"``) the
            concurrency controller's summary.

        Raises
        ------
        FatalSubjectError
            When a subject cannot answer at all (bad key, unknown model): the run stops.
        LogWriteError
            When the log cannot be written: the run stops, what was logged is kept.
        """
        t0 = time.perf_counter()
        todo = sum(
            1 for s in sessions for t in range(len(s.stimuli)) if (*s.key, t) not in self.store.done
        )
        bar = progress_bar(self.progress, todo, "trials", "trial") if todo else None
        gate = self.gate
        if gate is not None:
            for subj in self.subjects.values():
                if hasattr(subj, "pacer"):  # API subjects report each call's outcome
                    subj.pacer = gate
        sem = asyncio.Semaphore(self.concurrency) if gate is None else None

        async def guarded(sess):
            # a session's place: a fixed number of them (semaphore) or adaptive (gate)
            async with sem if gate is None else _GateSlot(gate):
                try:
                    await self.run_session(sess, bar)
                except (FatalSubjectError, LogWriteError):
                    raise
                except BudgetReached as exc:  # a clean stop: no failed session, resumable
                    self.budget.stopped += 1
                    if self.report.budget_reached is None:
                        self.report.budget_reached = str(exc)
                        self.store.log_run(event="budget_reached", **self.budget.event())
                except Exception as exc:
                    label = "/".join(map(str, sess.key))
                    msg = (
                        str(exc)
                        if isinstance(exc, SubjectError)
                        else f"{type(exc).__name__}: {exc}"
                    )
                    self.report.failed_sessions.append(f"{label}: {msg}")
                    self.store.log_run(event="session_failed", session=label, error=msg)

        try:
            async with asyncio.TaskGroup() as tg:
                for s in sessions:
                    tg.create_task(guarded(s))
        except* (FatalSubjectError, LogWriteError) as group:
            raise group.exceptions[0] from None
        finally:
            if bar is not None:
                bar.close()
            if gate is not None:
                self.report.concurrency = gate.policy.summary()
        self.report.seconds = time.perf_counter() - t0
        return self.report


def reasoned(sess: Session, text: str | None) -> str | None:
    """A reply as the task reads it: under ``cot`` its final answer part, else the whole reply.

    Parameters
    ----------
    sess : Session
        The session run (its condition says whether the subject reasons).
    text : str or None
        The reply.

    Returns
    -------
    str or None
        :func:`bayesobs.run.ablations.final_answer` of ``text`` under a
        reasoning condition, else ``text`` itself (None stays None).
    """
    if not sess.cond.reasoning or text is None:
        return text
    return final_answer(text)


def reasoned_start(sess: Session, text: str | None) -> int:
    """Where :func:`reasoned`'s part of a reply begins in it (0: the whole reply is read).

    Parameters
    ----------
    sess : Session
        The session run.
    text : str or None
        The reply.

    Returns
    -------
    int
        The character offset of the last occurrence of the read part in
        ``text``; 0 when the whole reply is read or either is empty.
    """
    part = reasoned(sess, text)
    if not text or not part or part is text:
        return 0
    return max(0, text.rfind(part))


class _GateSlot:
    """``async with``: a session's slot of an :class:`~bayesobs.run.concurrency.AdaptiveGate`."""

    def __init__(self, gate: AdaptiveGate):
        self.gate = gate

    async def __aenter__(self):
        await self.gate.acquire()

    async def __aexit__(self, *exc):
        self.gate.release()


def estimate(sessions: list[Session], done: dict, chat: dict | None = None) -> dict[str, int]:
    """Calls still to make, a rough input-token count and the output budget (for ``--dry-run``).

    ``output_tokens`` is the most the replies may spend: each call's reply
    budget (the task's, else ``max_tokens``; under ``cot`` plus the reasoning
    budget, :func:`bayesobs.run.ablations.reply_budget`) plus, with
    ``reasoning_effort``, the reasoning budget
    (:func:`bayesobs.run.reasoning.reasoning_budget`).

    Parameters
    ----------
    sessions : list of Session
        The planned session runs.
    done : dict
        The trials already logged, keyed by ``(*Session.key, trial)``; they cost nothing.
    chat : dict, optional
        Chat options (``max_tokens``, ``reasoning_effort``, ``image_detail`` ...).

    Returns
    -------
    dict of str to int
        ``calls`` (trials still to ask), ``input_tokens`` (a rough count:
        about 4 characters a token, the context window and demonstrations
        included, images at their measured cost), ``output_tokens`` (the
        most the replies may spend) and ``reasoning_budget`` (per call).
    """
    opts = chat_identity(chat, every=True)
    extra = reasoning_budget(opts["reasoning_effort"], opts["reasoning_budget"])
    calls = tokens = output = 0
    sizes: dict[tuple, int] = {}
    for s in sessions:
        budget = reply_budget(
            s.task.max_tokens, s.cond, opts["max_tokens"], opts["reasoning_budget"]
        )
        budget = (budget or opts["max_tokens"]) + extra
        per_image = session_image_tokens(s, opts["image_detail"], sizes)
        for t, stim in enumerate(s.stimuli):
            if (*s.key, t) in done:
                continue
            calls += 1
            output += budget
            k = min(t, s.cond.context)
            n_images = int(stim.params.get("n_images", 1))  # a perception trial may show two
            per_turn = (
                (len(stim.text) // 4 if s.modality != "image" else 0)
                + len(stim.prompt) // 4
                + (n_images * per_image if s.modality != "text" else 0)
            )
            # few-shot demonstrations are about one trial each (and a short answer)
            n_demos = int(stim.params.get("n_demos", 0))
            tokens += 60 + (k + 1 + n_demos) * per_turn + (k + n_demos) * 4
    return {
        "calls": calls,
        "input_tokens": tokens,
        "output_tokens": output,
        "reasoning_budget": extra,
    }


def session_image_tokens(sess: Session, detail: str, seen: dict[tuple, int]) -> int:
    """Input tokens of one of a session's images for its subject (:mod:`bayesobs.run.imagecost`).

    The session's first image is rendered and measured once per task,
    modality, subject kind and ``detail`` (kept in ``seen``); a text
    session costs 0, a task that renders no image :data:`TOKENS_PER_IMAGE`.

    Parameters
    ----------
    sess : Session
        The session run.
    detail : str
        The image detail asked for (``ChatOptions.image_detail``).
    seen : dict
        Cache of measured costs, keyed by ``(task, modality, subject kind,
        detail)``; updated in place.

    Returns
    -------
    int
        Input tokens of one image.
    """
    if sess.modality == "text" or not sess.stimuli:
        return 0
    kind = sess.subject.partition(":")[0]
    key = (sess.task.name, sess.modality, kind, detail)
    if key not in seen:
        pngs = stimulus_images(sess, sess.stimuli[0], trial_blur(sess, 0))
        seen[key] = (
            image_tokens(sess.subject, *png_size(pngs[0]), detail) if pngs else TOKENS_PER_IMAGE
        )
    return seen[key]


# ---------------------------------------------------------------- entry points
def make_subjects(
    names: list[str],
    sim_seed: int = 0,
    chat: dict | None = None,
    api_key: str | None = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    cache_scope: str = "global",
    folder: str | Path | None = None,
) -> dict[str, Any]:
    """Subject objects by name (validated before any call is made).

    Parameters
    ----------
    names : list of str
        ``sim:<kind>``, ``openai:<model>``, ``anthropic:<model>``, ``inspect:<provider>/<model>``,
        ``python:<package.module>:<name>`` or an installed kind's ``KIND:NAME``.
    sim_seed : int
        Seed of the simulated subjects.
    chat : dict, optional
        :class:`~bayesobs.run.subjects.openai_chat.ChatOptions` fields for API subjects.
    api_key : str, optional
        The API key (never logged).
    cache_dir : path, optional
        Response cache folder (default ``~/.cache/bayesobs``).
    use_cache : bool
        Read and write the response cache.
    cache_scope : {"global", "folder"}
        ``"global"`` replays a cached reply into any experiment folder;
        ``"folder"`` only into the folder it was first logged for.
    folder : path, optional
        The experiment folder the replies are for (required with ``"folder"``;
        recorded with each cached reply, so a summary can say where a replay came from).

    Returns
    -------
    dict
        Subject objects by name.
    """
    if cache_scope not in ("folder", "global"):
        raise BayesobsInputError(f"cache scope must be 'folder' or 'global', not {cache_scope!r}")
    if cache_scope == "folder" and folder is None:
        raise BayesobsInputError("cache scope 'folder' needs the experiment folder")
    where = str(Path(folder).resolve()) if folder is not None else None
    out = {}
    cache = None

    def response_cache():
        """The response cache, opened on first use (None with ``use_cache`` off)."""
        nonlocal cache
        # the cache folder's module only for subjects with replies to keep (not sim:)
        from .subjects.cache import ResponseCache, default_cache_dir

        if cache is None and use_cache:
            cache = ResponseCache(cache_dir or default_cache_dir())
            if cache.unreadable:
                print(
                    f"note: {cache.path}: skipped {cache.unreadable} unreadable line(s) "
                    "(left by a writer killed mid-record); those replies are not replayed",
                    file=sys.stderr,
                )
        return cache

    scope = where if cache_scope == "folder" else "global"
    for name in names:
        kind, rest = parse_subject(name)
        if kind == "sim":
            if rest == "random":  # every paradigm in its format, through its random hook
                out[name] = RandomSubject(seed=sim_seed)
                continue
            # the registered paradigms (bayesobs.paradigms) make their own
            plugin = next((p for p in registered(default=True) if rest in p.subjects), None)
            if plugin is None:  # a paradigm unregistered since parse_subject's check
                raise BayesobsInputError(f"unknown simulated subject {name!r}")
            out[name] = plugin.subject(rest, seed=sim_seed)
        elif kind not in API_KINDS:  # python: and installed kinds (entry points)
            from .subjects.python_subject import own_subject  # only for those subjects

            out[name] = own_subject(
                name, sim_seed, chat, cache=response_cache(), cache_scope=scope, folder=where
            )
        else:
            # the API clients (openai, anthropic: ~1 s of start-up) only for an API subject
            from .subjects.anthropic_messages import AnthropicSubject
            from .subjects.openai_chat import ChatOptions, OpenAIChatSubject

            opts = ChatOptions(model=rest, **(chat or {}))
            api_cls = AnthropicSubject if kind == "anthropic" else OpenAIChatSubject
            if kind == "inspect":
                from .subjects.inspect_model import InspectSubject  # inspect_ai: only when used

                api_cls = functools.partial(InspectSubject, rest)
            out[name] = api_cls(
                opts,
                api_key=api_key,
                cache=response_cache(),
                folder=where,
                cache_scope=scope,
            )
    return out


CHAT_IDENTITY = ("temperature", "max_tokens", "reasoning_effort", "base_url")


def chat_identity(chat: dict | None, every: bool = False) -> dict:
    """The chat options that decide the replies, with the defaults filled in.

    The CLI and :func:`sweep` both record this, so a folder started by one is
    resumed by the other with the same settings (time-outs and retries do not
    change what is asked, so they are left out).  ``token_param`` is recorded
    when it is not ``auto``, ``reasoning_budget`` when a reasoning effort
    adds it and ``logprobs`` when asked for (so folders of earlier versions
    resume), ``image_detail`` when not the default; ``every`` gives them always.

    Parameters
    ----------
    chat : dict or None
        Chat options (:class:`bayesobs.run.subjects.openai_chat.ChatOptions`
        fields; None values take the defaults).
    every : bool, default False
        Include ``token_param``, ``reasoning_budget``, ``logprobs`` and
        ``image_detail`` whatever their values.

    Returns
    -------
    dict
        ``temperature``, ``max_tokens``, ``reasoning_effort``, ``base_url``
        and the conditional keys above.
    """
    # start-up time: the OpenAI SDK loads only for API subjects
    from .subjects.openai_chat import ChatOptions, public_url

    opts = ChatOptions(model="", **{k: v for k, v in (chat or {}).items() if v is not None})
    out = {k: getattr(opts, k) for k in CHAT_IDENTITY}
    out["base_url"] = public_url(out["base_url"])  # a key inside the URL is never written
    if every or opts.token_param != "auto":
        out["token_param"] = opts.token_param
    if every or reasoning_budget(opts.reasoning_effort, opts.reasoning_budget):
        out["reasoning_budget"] = opts.reasoning_budget
    if every or opts.logprobs is not None:
        out["logprobs"] = opts.logprobs
    if every or opts.image_detail != DEFAULT_IMAGE_DETAIL:
        out["image_detail"] = opts.image_detail
    return out


def experiment_record(specs: list[dict], subjects: list[str], **settings) -> dict:
    """What identifies an experiment folder (stored in the manifest, checked on resume).

    ``chat`` (the options of ``openai:`` and ``anthropic:`` subjects) is
    recorded through :func:`chat_identity`, and only when such a subject
    takes part.

    Parameters
    ----------
    specs : list of dict
        The task specs.
    subjects : list of str
        Subject specifiers.
    **settings
        Command settings (``command``, ``trials``, ``runs``, ``protocol`` ...),
        and ``chat`` (the chat options), ``sim_seed``, ``ami``.

    Returns
    -------
    dict
        ``specs``, ``subjects``, the settings and ``chat`` (None without an
        API subject).
    """
    uses_api = any(str(s).partition(":")[0] in API_KINDS for s in subjects)
    chat = settings.pop("chat", None)
    return {
        "specs": [{k: v for k, v in s.items()} for s in specs],
        "subjects": list(subjects),
        **settings,
        "chat": chat_identity(chat) if uses_api else None,
    }


def _run_async(make_coro):
    """``asyncio.run``, also from inside a running loop (Jupyter): then on a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coro())

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make_coro())).result()


run_async = _run_async  # the public name (bayesobs.run.batch runs its rounds with it)


def execute(
    sessions: list[Session],
    store: ExperimentStore,
    subjects: dict,
    concurrency: int | str = 16,
    progress: bool | str = True,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    budget: Budget | None = None,
) -> RunReport:
    """Run sessions into ``store``; logs the invocation in ``runs.jsonl``.

    ``concurrency`` is a number of sessions, or ``"auto"``: adaptive, up to
    ``max_concurrency`` (:mod:`bayesobs.run.concurrency`).

    Parameters
    ----------
    sessions : list of Session
        The session runs.
    store : ExperimentStore
        The open experiment folder (its lock held).
    subjects : dict
        Subject objects by name (:func:`make_subjects`); closed at the end.
    concurrency : int or "auto", default 16
        Sessions run at once.
    progress : bool or str, default True
        Show a progress bar (``"lines"``: plain lines, for a log file).
    max_concurrency : int, default DEFAULT_MAX_CONCURRENCY
        Ceiling of ``"auto"``.
    budget : Budget, optional
        Counts the money and tokens of each call and stops sessions cleanly
        before a call would pass its limits (:mod:`bayesobs.run.budget`).

    Returns
    -------
    RunReport
        What the run did; ``runs.jsonl`` gets ``start`` and ``end`` events
        (``stopped`` when it is interrupted).

    Raises
    ------
    BayesobsInputError
        For an invalid ``concurrency`` or ``max_concurrency``.
    FatalSubjectError
        When a subject cannot answer at all.
    LogWriteError
        When the log cannot be written.
    """
    store.log_run(event="start", sessions=len(sessions))
    runner = Runner(
        store,
        subjects,
        concurrency=concurrency,
        progress=progress,
        max_concurrency=max_concurrency,
        budget=budget,
    )

    async def go():
        try:
            return await runner.run(sessions)
        finally:
            for subj in subjects.values():
                if hasattr(subj, "aclose"):
                    await subj.aclose()

    try:
        report = _run_async(go)
    except BaseException as exc:
        try:
            store.log_run(
                event="stopped", error=f"{type(exc).__name__}: {exc}", logged=runner.report.done
            )
        except LogWriteError:
            pass  # the disk that stopped the run cannot take the note either
        raise
    store.log_run(
        event="end",
        logged=report.done,
        resumed=report.skipped,
        cached=report.cached,
        cached_from=dict(report.cached_from),
        unparsed=report.unparsed,
        failed_sessions=report.failed_sessions,
        seconds=round(report.seconds, 3),
        **({"concurrency": report.concurrency} if report.concurrency else {}),
        **(budget.spend.summary() if budget is not None else {}),
    )
    return report
