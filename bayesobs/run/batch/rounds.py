"""The round engine: log what is known, submit what waits, poll until the round's batches end."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from ...provenance import utc_now
from ..engine import Runner, estimate, run_async
from ..store import TRIAL_ID, AppendLog, ExperimentStore, LogWriteError
from ..subjects import FatalSubjectError, Reply, Request, SubjectError
from ..subjects.anthropic_messages import AnthropicSubject
from ..subjects.openai_chat import redact
from .anthropic_batches import AnthropicBatches
from .display import plan_line, progress_bar, show
from .openai_batches import OpenAIBatches
from .options import POLL_FIRST_S, BatchOptions
from .provider import TERMINAL, BatchGone, BatchState, Outcome
from .store import BATCH_LOG, ShadowStore


def trial_key(meta: dict) -> tuple:
    """A request's trial identity (the trial table's key) from its ``meta``."""
    return tuple(meta[k] for k in TRIAL_ID)


def custom_id(key: tuple) -> str:
    """The ``custom_id`` of a trial, the same in every round: ``t-`` and 32 hex digits of its key's hash."""
    return "t-" + hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()[:32]


def independent(sess) -> bool:
    """Whether a session's requests do not depend on its answers (all in the first round)."""
    return sess.cond.context == 0 and not any(sess.task.follows(s) for s in sess.stimuli)


def rounds_needed(sessions: list, done: dict) -> int:
    """Rounds a batch run takes when every request succeeds."""
    n = 0
    for s in sessions:
        todo = [t for t in range(len(s.stimuli)) if (*s.key, t) not in done]
        if todo:
            n = max(n, 1 if independent(s) else len(s.stimuli) - todo[0])
    return n


def poll_delays(poll_max: float, first: float = POLL_FIRST_S) -> Iterator[float]:
    """Seconds between polls, endlessly: ``first`` (at most ``poll_max``), doubling up to ``poll_max``."""
    d = min(first, poll_max)
    while True:
        yield d
        d = min(d * 2, poll_max)


def chunks(lines: list[bytes], max_requests: int, max_bytes: int) -> list[list[bytes]]:
    """Input lines split into files of at most ``max_requests`` lines and ``max_bytes`` bytes (a larger line alone)."""
    out: list[list[bytes]] = []
    size = 0
    for line in lines:
        if not out or len(out[-1]) >= max_requests or (out[-1] and size + len(line) > max_bytes):
            out.append([])
            size = 0
        out[-1].append(line)
        size += len(line)
    return out


def adapter(subject):
    """The batch API of a subject: :class:`AnthropicBatches` or :class:`OpenAIBatches`."""
    if isinstance(subject, AnthropicSubject):
        return AnthropicBatches(subject)
    return OpenAIBatches(subject)


class Pending(Exception):
    """A trial whose reply is not known yet: its session waits for the next round."""

    def __init__(self, key: tuple, body: dict):
        super().__init__(key)
        self.key = key
        self.body = body


@dataclass
class Submitted:
    """A batch of this folder: its round, subject and ``custom_id`` -> trial."""

    batch_id: str
    round: int
    subject: str
    ids: dict[str, tuple]
    nonce: str | None = None


class BatchSubject:
    """What the runner asks during a batch run: replies from batches, or the request noted."""

    def __init__(self, engine: BatchRun, subject, collect: list | None = None):
        self.engine = engine
        self.subject = subject
        self.collect = collect

    async def complete(self, request: Request) -> Reply:
        """The batch's reply, the cache's, a placeholder when collecting; else :class:`Pending`."""
        key = trial_key(request.meta)
        body = self.subject.payload(request)
        out = self.engine.results.get(key)
        if out is not None:
            if out.kind != "ok":
                raise SubjectError(out.message)
            return self.engine.reply(self.subject, request, body, out)
        _, hit = self.subject._replay(body, request)
        if hit is not None:
            return hit
        if self.collect is not None:
            self.collect.append((key, body))
            return Reply(text="")
        raise Pending(key, body)


class BatchRun:
    """Runs sessions through batch APIs in rounds into a store (see :mod:`bayesobs.run.batch`)."""

    def __init__(
        self, store: ExperimentStore, subjects: dict, options: BatchOptions, progress, budget=None
    ):
        self.store = store
        self.budget = budget  # bayesobs.run.budget.Budget: money counted, batches held to it
        self.counted = set(store.done)  # rows already in the budget's spend
        self.subjects = subjects
        self.options = options
        self.progress = progress
        self.log = AppendLog(store.folder / BATCH_LOG)
        self.providers = {name: adapter(s) for name, s in subjects.items()}
        self.results: dict[tuple, Outcome] = {}
        self.failures: Counter = Counter()  # trial -> batches it failed in (this run)
        self.inflight: dict[str, Submitted] = {}
        self.round = 0
        self.submitted = 0  # batches created by this run
        self.runner = Runner(
            store, {n: BatchSubject(self, s) for n, s in subjects.items()}, progress=False
        )
        self.report = self.runner.report
        self.report.budget = budget
        self.finished: set[tuple] = set()
        self.stopped: set[tuple] = set()
        self.bar = None
        self.planned = 0

    def reply(self, subject, request: Request, body: dict, out: Outcome) -> Reply:
        """A batch's ``ok`` outcome as the runner takes it (with ``batch_id``), cached as a live reply would be."""
        key, hit = subject._replay(body, request)
        reply = subject._answered(
            None if hit is not None else key,
            body,
            redact(out.text, subject.client.api_key),
            out.finish,
            out.usage,
            out.details,
            attempts=self.failures[trial_key(request.meta)] + 1,
        )
        reply.extra["batch_id"] = out.batch_id
        return reply

    def note(self, **rec) -> None:
        """Append a record to ``batches.jsonl``, ``time_utc`` first."""
        self.log.append({"time_utc": utc_now(), **rec})

    async def recover(self) -> None:
        """Take up the batches of earlier runs whose trials are not all logged."""
        records, _ = self.log.read()
        intents = {r["nonce"]: r for r in records if r.get("event") == "submitting"}
        ids = {r["nonce"]: r["batch_id"] for r in records if r.get("event") == "submitted"}
        ended = {r["batch_id"] for r in records if r.get("event") == "ended"}
        lost = {r["batch_id"] for r in records if r.get("event") == "lost"}
        known = set(ids.values())
        for nonce, rec in intents.items():
            self.round = max(self.round, int(rec.get("round", 0)))
            name = rec.get("subject")
            if name not in self.providers:
                continue
            keys = {cid: tuple(k) for cid, k in rec.get("ids", {}).items()}
            if all(k in self.store.done for k in keys.values()):
                continue
            bid = ids.get(nonce)
            if bid is None:
                bid = await self.providers[name].find(nonce, {**rec, "known_ids": sorted(known)})
                if bid is None:
                    continue  # never created: its trials are asked again
                known.add(bid)
                self.note(event="submitted", nonce=nonce, batch_id=bid, round=rec["round"])
            if bid in lost:  # noted when it was lost: its trials are asked again
                continue
            sub = Submitted(bid, int(rec["round"]), name, keys, nonce=nonce)
            if bid in ended:  # collect its replies again (errors were handled then)
                provider = self.providers[name]
                try:
                    state = await provider.status(bid)
                    outs = await provider.results(state, nonce)
                except BatchGone as exc:
                    self.lost(sub, exc)
                    continue
                self.absorb(sub, state, outs, errors=False)
            else:
                self.inflight[bid] = sub

    async def advance(self, sessions: list) -> dict:
        """Log every trial whose reply is known; session key -> (session, :class:`Pending`) of each that waits."""
        pending = {}
        for sess in sessions:
            if sess.key in self.finished or sess.key in self.stopped:
                continue
            try:
                await self.runner.run_session(sess, self.bar)
                self.finished.add(sess.key)
            except Pending as p:
                pending[sess.key] = (sess, p)
            except (FatalSubjectError, LogWriteError):
                raise
            except Exception as exc:
                label = "/".join(map(str, sess.key))
                msg = str(exc) if isinstance(exc, SubjectError) else f"{type(exc).__name__}: {exc}"
                self.report.failed_sessions.append(f"{label}: {msg}")
                self.store.log_run(event="session_failed", session=label, error=msg)
                self.stopped.add(sess.key)
        if self.budget is not None:  # count the replies logged this round (batch prices)
            for key in set(self.store.done) - self.counted:
                self.budget.spend.add(self.store.done[key], self.budget.prices)
            self.counted = set(self.store.done)
        return pending

    async def requests(self, sess, first: Pending) -> list[tuple[tuple, dict]]:
        """(trial key, body) of the requests a waiting session puts in this round."""
        if not independent(sess):
            return [(first.key, first.body)]
        noted: list[tuple[tuple, dict]] = []
        runner = self.runner
        keep = runner.store, runner.subjects, runner.report
        runner.store = ShadowStore(self.store.done)
        runner.subjects = {
            n: BatchSubject(self, s, collect=noted) for n, s in self.subjects.items()
        }
        runner.report = type(keep[2])()
        try:
            await runner.run_session(sess, None)
        finally:
            runner.store, runner.subjects, runner.report = keep
        return noted

    async def submit(self, pending: dict) -> None:
        """Submit the waiting requests not already in a batch: one batch per subject (split if large)."""
        flying = {k for sub in self.inflight.values() for k in sub.ids.values()}
        by_subject: dict[str, dict[str, tuple[tuple, dict]]] = {}
        for sess, first in pending.values():
            for key, body in await self.requests(sess, first):
                if key in flying or key in self.results:
                    continue
                by_subject.setdefault(sess.subject, {})[custom_id(key)] = (key, body)
        if self.budget is not None:  # no more requests than the budget holds
            n = sum(map(len, by_subject.values()))
            room = self.budget.fits(n)
            if room < n and self.report.budget_reached is None:
                self.report.budget_reached = self.budget.stop_line()
                self.store.log_run(event="budget_reached", **self.budget.event())
            for name in list(by_subject):
                keep = dict(list(by_subject[name].items())[:room])
                room -= len(keep)
                by_subject[name] = keep
                if not keep:
                    del by_subject[name]
        if not by_subject:
            return
        self.round += 1
        for name, reqs in by_subject.items():
            provider = self.providers[name]
            lines = [provider.line(cid, body) for cid, (_, body) in reqs.items()]
            cids = list(reqs)
            start = 0
            most = min(self.options.max_requests, provider.max_requests)
            for part in chunks(lines, most, min(self.options.max_bytes, provider.max_bytes)):
                ids = {cid: reqs[cid][0] for cid in cids[start : start + len(part)]}
                start += len(part)
                nonce = uuid.uuid4().hex
                self.note(
                    event="submitting",
                    nonce=nonce,
                    round=self.round,
                    subject=name,
                    requests=len(part),
                    ids={cid: list(k) for cid, k in ids.items()},
                )
                bid = await provider.submit(part, nonce)
                self.note(event="submitted", nonce=nonce, batch_id=bid, round=self.round)
                self.inflight[bid] = Submitted(bid, self.round, name, ids, nonce=nonce)
                self.submitted += 1

    def absorb(
        self, sub: Submitted, state: BatchState, outs: dict[str, Outcome], errors: bool = True
    ) -> tuple[int, int]:
        """Take an ended batch's replies; the numbers of requests to retry and of those that cannot succeed."""
        retry = fatal = 0
        why = f"batch {state.id} {state.status}" + (f" ({state.errors})" if state.errors else "")
        for cid, key in sub.ids.items():
            if key in self.store.done or (key in self.results and self.results[key].kind == "ok"):
                continue
            out = outs.get(cid) or Outcome("retry", message=f"{why}: no reply", batch_id=state.id)
            if out.kind == "ok":
                self.results[key] = out
            elif not errors:
                continue
            elif out.kind == "fatal":
                self.results[key] = out
                fatal += 1
            else:
                self.failures[key] += 1
                n = self.failures[key]
                limit = self.subjects[sub.subject].options.max_attempts
                if n >= limit:
                    self.results[key] = Outcome(
                        "fatal", message=f"gave up after {n} batches: {out.message}"
                    )
                    fatal += 1
                else:
                    retry += 1
        return retry, fatal

    def lost(self, sub: Submitted, exc: BatchGone) -> None:
        """Note a batch the provider lost (``batches.jsonl``, ``runs.jsonl``, stderr); its trials go in the next batch."""
        todo = sum(k not in self.store.done for k in sub.ids.values())
        self.note(event="lost", batch_id=sub.batch_id, round=sub.round, error=str(exc))
        self.store.log_run(
            event="batch_lost",
            batch_id=sub.batch_id,
            subject=sub.subject,
            round=sub.round,
            requests=todo,
            error=str(exc),
        )
        api = self.providers[sub.subject].api_name
        print(
            f"note: {api}: batch {sub.batch_id} is gone ({exc}: expired, or made with another "
            f"key); its {todo} request(s) not logged are asked again in the next batch",
            file=sys.stderr,
        )
        self.absorb(sub, BatchState(sub.batch_id, "lost", errors=str(exc)), {})

    async def wait(self) -> None:
        """Poll the batches in flight until every one has ended, collecting each as it ends."""
        delays = poll_delays(self.options.poll_max)
        states: dict[str, BatchState] = {}  # the batches of this wait, ended ones too
        while self.inflight:
            await asyncio.sleep(next(delays))
            for bid, sub in list(self.inflight.items()):
                provider = self.providers[sub.subject]
                try:
                    states[bid] = state = await provider.status(bid)
                    if state.status not in TERMINAL:
                        continue
                    outs = await provider.results(state, sub.nonce)
                except BatchGone as exc:
                    self.lost(sub, exc)
                    del self.inflight[bid]
                    continue
                retry, fatal = self.absorb(sub, state, outs)
                self.note(
                    event="ended",
                    batch_id=bid,
                    round=sub.round,
                    status=state.status,
                    request_counts={
                        "total": state.total,
                        "completed": state.completed,
                        "failed": state.failed,
                    },
                    errors=state.errors or None,
                    retry=retry,
                    failed=fatal,
                )
                del self.inflight[bid]
            show(list(states.values()), self.round, self.planned, self.bar)

    async def run(self, sessions: list, chat: dict | None = None) -> None:
        """Rounds until every session is logged or stopped, the batches of earlier runs taken up first."""
        t0 = time.perf_counter()
        await self.recover()
        done0 = dict(self.store.done)
        skipped = sum(1 for s in sessions for t in range(len(s.stimuli)) if (*s.key, t) in done0)
        est = estimate(sessions, done0, chat)
        rounds = rounds_needed(sessions, done0)
        self.planned = self.round + rounds
        if est["calls"]:
            dependent = sum(1 for s in sessions if not independent(s))
            line = plan_line(est, rounds, sessions, dependent, len(self.inflight))
            print(line, file=sys.stderr)
        if self.progress and est["calls"]:
            self.bar = progress_bar(est["calls"])
        try:
            while True:
                pending = await self.advance(sessions)
                if not pending and not self.inflight:
                    break
                await self.submit(pending)
                if not self.inflight and self.report.budget_reached:
                    break  # the budget holds no more: what is logged is kept
                if not self.inflight:  # nothing could be submitted: should not happen
                    raise RuntimeError("batch run: trials wait but no batch is in flight")
                self.planned = max(self.planned, self.round)
                await self.wait()
        finally:
            if self.bar is not None:
                self.bar.close()
        self.report.skipped = skipped
        self.report.seconds = time.perf_counter() - t0


def execute_batch(
    sessions: list,
    store: ExperimentStore,
    subjects: dict,
    options: BatchOptions,
    chat: dict | None = None,
    progress: bool = False,
    budget=None,
):
    """Run sessions through batch APIs into ``store``; logs the invocation in ``runs.jsonl``."""
    store.log_run(event="start", sessions=len(sessions), batch=True)
    engine = BatchRun(store, subjects, options, progress, budget)

    async def go():
        try:
            await engine.run(sessions, chat)
        finally:
            for subj in subjects.values():
                await subj.aclose()

    try:
        run_async(go)
    except BaseException as exc:
        try:
            store.log_run(
                event="stopped", error=f"{type(exc).__name__}: {exc}", logged=engine.report.done
            )
        except LogWriteError:
            pass
        raise
    report = engine.report
    store.log_run(
        event="end",
        logged=report.done,
        resumed=report.skipped,
        cached=report.cached,
        cached_from=dict(report.cached_from),
        unparsed=report.unparsed,
        failed_sessions=report.failed_sessions,
        seconds=round(report.seconds, 3),
        batch_rounds=engine.round,
        batches=engine.submitted,
        **(budget.spend.summary() if budget is not None else {}),
    )
    return report
