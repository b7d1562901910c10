"""``bayesobs serve``: the BayesBench tasks for human participants in a browser.

The same stimulus generators and seeds as the LLM runner, the same trial
table: each answer is appended to ``DIR/trials.jsonl`` the moment it arrives
(``subject`` = participant id), so ``bayesobs score`` works on it unchanged.

Security model: a participant is a random (or given) id plus a secret key
held in an HttpOnly cookie; every request is checked against the key's hash
in ``participants.jsonl``.  Trials are answered strictly in order: the server
knows each participant's next trial id and refuses replays, skips,
non-numbers and out-of-range answers without writing anything.  Stimulus
files are served only by content-hash name from the experiment's own folder.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import hmac
import html
import io
import ipaddress
import json
import logging
import math
import re
import secrets
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pandas as pd
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route

from ..errors import BayesobsInputError
from ..provenance import utc_now
from ..run.plan import Session, load_spec
from ..run.presentation import (
    human_instruction,
    human_plan,
    practice_stimulus,
    stimulus_images,
    stimulus_parts,
    trial_blur,
)
from ..run.store import TRIAL_ID, AppendLog, ExperimentStore, LogWriteError
from ..stimuli import TASKS
from .security import JoinLimit, spreadsheet_safe
from .study import (
    CATCH_RANGE,
    CATCH_SEED,
    CATCH_TAP_RADII,
    CATCH_WORDS,
    block_order,
    catch_plan,
    catch_value,
    check_catch_every,
    check_minutes,
    check_order,
    estimate_minutes,
    latin_rows,
    minutes_text,
)

LOG = logging.getLogger("bayesobs.web")
STATIC = Path(__file__).resolve().parent / "static"
LOOPBACK_NAMES = frozenset({"localhost"})  # besides IP addresses, which are always accepted
MAX_DISPLAY_PX = 20000  # a displayed image size above this is not one
CATCH_INSTRUCTION = (
    "Attention check: this trial checks that you are reading the instructions. Please do exactly "
    "what it says."
)
WRAP_TEXT = ("maze_distance", "duration")  # prose may wrap; ASCII line stimuli must not
PID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # never "..", never a path
MAX_BODY = 4096  # bytes of a request body: an answer is a few dozen
MAX_ANSWER = 32  # characters of a typed answer ("0.4275", "12,5" ...)
MAX_TEXT_ANSWER = 200  # characters of a typed worded answer (a label, a cell, a list of colours)
MAX_RT_MS = 24 * 3600 * 1000  # a client response time above a day is not one
FINISHED_FOR_ESTIMATE = 3  # finished participants before their times replace the spec's estimate
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self'; style-src 'self'; "
        b"script-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
STIM_RE = re.compile(r"^[0-9a-f]{20}\.png$")
ASKS_RE = re.compile(r"\b(?:Type|Answer|Reply) (.*?)\.(?:\s+[A-Z]|\s*$)")  # a question's "Type ..."
# plausible answers per task (the runner's parser uses the same ranges): anything else is refused
ANSWER_RANGE = {
    name: cls.answer_range for name, cls in TASKS.items() if cls.answer_range is not None
}


@dataclass
class Study:
    """One participant's study: the spec, its sessions (blocks) in order and the practice trial."""

    spec: dict
    sessions: list[Session]  # one participant's sessions (blocks), in order
    practice: object  # a stimulus shown once, not logged
    order: dict | None = None  # the counterbalancing row and its session/modality orders
    catch_every: int | None = (
        None  # a catch trial after every N trials (see :func:`.study.catch_plan`)
    )

    def ordered(self, row: int) -> Study:
        """The same study with its blocks in Latin-square row ``row`` (see :mod:`.study`).

        Parameters
        ----------
        row : int
            The Latin-square row.

        Returns
        -------
        Study
            A new study with the reordered sessions and the row's record as
            ``order``.
        """
        sessions, record = block_order(self.sessions, row)
        return Study(self.spec, sessions, self.practice, record, self.catch_every)

    @property
    def trials(self) -> int:
        """Trials of the task in one participant's study (catch trials not counted)."""
        return sum(len(s.stimuli) for s in self.sessions)

    @property
    def total(self) -> int:
        """Answers in one participant's study: the trials and the catch trials."""
        return len(self.sequence())

    def sequence(self) -> list[tuple[str, int]]:
        """The participant's answers in order: ``("trial", i)`` and ``("catch", k)``.

        Returns
        -------
        list of tuple
            :func:`.study.catch_plan` of the study's trials and ``catch_every``.
        """
        return catch_plan(self.trials, self.catch_every)

    def where(self, index: int) -> tuple[Session, int, int]:
        """Session, trial and block of answer ``index`` (a catch trial: those of the trial before it).

        Parameters
        ----------
        index : int
            The answer's position in :meth:`sequence`.

        Returns
        -------
        tuple
            ``(Session, trial within the session, block position)``.
        """
        kind, i = self.sequence()[index]
        if kind == "catch":
            i = [j for k, j in self.sequence()[:index] if k == "trial"][-1]
        return self.trial(i)

    def trial(self, index: int) -> tuple[Session, int, int]:
        """Session, trial within it and block position of the participant's trial ``index``.

        Parameters
        ----------
        index : int
            The trial's position among the participant's task trials.

        Returns
        -------
        tuple
            ``(Session, trial within the session, block position)``.

        Raises
        ------
        IndexError
            When ``index`` is past the last trial.
        """
        for b, s in enumerate(self.sessions):
            if index < len(s.stimuli):
                return s, index, b
            index -= len(s.stimuli)
        raise IndexError(index)


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def parse_answer(text: str) -> float | None:
    """A plain number typed by a person (``0.42``, ``.42``, ``0,42``, ``12``); else None.

    Parameters
    ----------
    text : str
        What was typed (a comma is read as the decimal point).

    Returns
    -------
    float or None
        The number; None for anything else, longer than
        :data:`MAX_ANSWER` characters, or not finite.
    """
    t = (text or "").strip().replace(",", ".")
    if len(t) > MAX_ANSWER:
        return None
    if not re.fullmatch(r"[-+]?(\d+(\.\d*)?|\.\d+)", t):
        return None
    v = float(t)
    return v if math.isfinite(v) else None


class ParticipantServer:
    """State and request handlers of one experiment folder."""

    def __init__(
        self,
        spec_path,
        out,
        modalities=None,
        conditions=None,
        trials=None,
        token=None,
        ami=None,
        order="counterbalanced",
        minutes=None,
        catch_every=None,
        hosts=(),
    ):
        self.order = check_order(order)
        self.minutes = check_minutes(minutes)
        self.catch_every = check_catch_every(catch_every)
        self.hosts = {h.strip().lower().rstrip(".") for h in hosts or ()} | LOOPBACK_NAMES
        spec = load_spec(spec_path)
        self.spec = spec
        sessions = human_plan(spec, modalities, conditions, trials, ami)  # subject: each pid
        practice = practice_stimulus(spec, sessions[0])
        # row 0: the spec's order
        self.study = Study(spec, sessions, practice, catch_every=self.catch_every)
        self.task = sessions[0].task  # one task per spec
        self.rows = latin_rows(sessions) if self.order == "counterbalanced" else 1
        record = {
            "command": "serve",
            "spec": spec,
            "modalities": modalities,
            "conditions": conditions,
            "trials": trials,
            "subjects": "participants",
            # fixed order: the record of folders served before counterbalancing, which resume
            **({"order": self.order} if self.order != "fixed" else {}),
            **({"catch_every": self.catch_every} if self.catch_every else {}),
        }
        self.store = ExperimentStore(out, record)
        self.folder = Path(out)
        secret_file = self.folder / ".server_secret"
        if not secret_file.exists():
            secret_file.write_text(secrets.token_hex(32))
            secret_file.chmod(0o600)
        self.secret = secret_file.read_text().strip()
        self.token = token or secrets.token_urlsafe(16)
        self.lock = asyncio.Lock()
        self.keys: dict[str, str] = {}
        self.practiced: set[str] = set()
        self.pilots: set[str] = set()  # joined in the experimenter's browser: not in the estimate
        self.joins = JoinLimit()
        self.last_seen: dict[str, str] = {}
        self.rows_of: dict[str, int] = {}  # counterbalancing row per participant (logged at join)
        self._studies: dict[int, Study] = {}
        self.participants = AppendLog(
            self.folder / "participants.jsonl"
        )  # a torn tail is cut on open
        for n, rec in enumerate(self.participants.read()[0], 1):
            row = rec.get("counterbalance", 0)  # older logs: none (fixed order)
            if rec.get("event") in ("join", "rekey"):
                if not (
                    isinstance(rec.get("pid"), str)
                    and isinstance(rec.get("key_sha256"), str)
                    and isinstance(row, int)
                ):
                    raise BayesobsInputError(
                        f"{self.participants.path}: record {n} ({rec.get('event')}) lacks a pid, "
                        "key_sha256 or counterbalance row (was the file edited?); restore it or "
                        "remove that line"
                    )
                self.keys[rec["pid"]] = rec["key_sha256"]
            if rec.get("event") == "join":
                self.rows_of[rec["pid"]] = row
                if rec.get("pilot"):
                    self.pilots.add(rec["pid"])
            elif rec.get("event") == "practice_done":
                self.practiced.add(rec.get("pid"))
        self.progress: dict[str, int] = {}
        for key in self.store.done:
            self.progress[key[0]] = self.progress.get(key[0], 0) + 1
        self.served_at: dict[tuple[str, int], float] = {}
        self._png: dict[tuple, str] = {}
        self._catch: dict[int, object] = {}

    # ------------------------------------------------------------ helpers
    def study_of(self, pid: str) -> Study:
        """The participant's study: the blocks in their counterbalancing row.

        Parameters
        ----------
        pid : str
            The participant id (an unknown one gets row 0).

        Returns
        -------
        Study
            The study in that row's order (cached per row).
        """
        row = self.rows_of.get(pid, 0)
        if row not in self._studies:
            self._studies[row] = self.study.ordered(row)
        return self._studies[row]

    def expected_minutes(self) -> tuple[int, str]:
        """Duration announced on the consent page, and where the number comes from.

        ``--minutes`` when given; else, once :data:`FINISHED_FOR_ESTIMATE`
        participants have finished (not counting those who joined in the
        experimenter's browser: a pilot never sets it), the median answer
        time of their answers; else the task's ``seconds_per_answer``.

        Returns
        -------
        minutes : int
            The duration.
        basis : str
            Where it comes from, as the consent page says it.
        """
        if self.minutes is not None:
            return math.ceil(self.minutes), "stated by the experimenter"
        done = {p for p, n in self.progress.items() if n >= self.study.total} - self.pilots
        lat = [
            r["latency_s"]
            for r in self.store.done.values()
            if r["subject"] in done and r.get("latency_s") is not None
        ]
        if len(done) >= FINISHED_FOR_ESTIMATE and lat:
            med = statistics.median(lat)
            return (
                estimate_minutes(self.study.total, med),
                f"median answer time of the {len(done)} participants who finished, {med:.0f} s",
            )
        guess = self.task.seconds_per_answer
        return (
            estimate_minutes(self.study.total, guess),
            f"estimated from the number of trials ({guess:g} s each)",
        )

    def completion_code(self, pid: str) -> str:
        """The participant's completion code (an HMAC of the pid: checkable, not guessable).

        Parameters
        ----------
        pid : str
            The participant id.

        Returns
        -------
        str
            10 upper-case hex digits of the HMAC-SHA256 of ``pid`` under the
            server's secret.
        """
        return hmac.new(self.secret.encode(), pid.encode(), hashlib.sha256).hexdigest()[:10].upper()

    def catch_stimulus(self, k: int):
        """Catch trial ``k`` of a tapped task: the task's own display with one item alone.

        Drawn by the task's generator with no distractors, asking for a point
        (the tap is scored by its distance to the item), seeded by the spec's
        seed and ``k`` (every participant sees the same catch trials).

        Parameters
        ----------
        k : int
            The catch trial's number.

        Returns
        -------
        Stimulus
            The task's stimulus (cached per ``k``).
        """
        if k not in self._catch:
            rng = np.random.default_rng([int(self.spec["seed"]) + CATCH_SEED, int(k)])
            self._catch[k] = self.task.generate(rng, 0.0, 0.0, 1, {"answer": "coords"})[0]
        return self._catch[k]

    def who(self, request: Request) -> str | None:
        """The pid of the request's signed-in participant, or ``None``.

        Parameters
        ----------
        request : starlette.requests.Request
            The request; its ``bo_pid`` and ``bo_key`` cookies are checked against
            the key's hash logged at join.

        Returns
        -------
        str or None
            The pid when the key matches.
        """
        pid, key = request.cookies.get("bo_pid"), request.cookies.get("bo_key")
        if not pid or not key or pid not in self.keys:
            return None
        return pid if hmac.compare_digest(self.keys[pid], _hash(key)) else None

    def images(self, sess: Session, stim, blur: float) -> dict:
        """A trial's ``image`` (the first stored image) and ``images`` (all, when several).

        Stored paths (``stimuli/<hash>.png``), rendered once per stimulus and
        blur.  ``images`` is every rendered image in order when the task shows
        several (object re-identification's two), else the stored images a
        stimulus names (``params["images"]``), else None.  The log keeps these
        paths; the page gets them as URLs (:func:`_urls`).

        Parameters
        ----------
        sess : Session
            The trial's session run.
        stim : Stimulus
            The stimulus as asked.
        blur : float
            The trial's blur SD, in pixels.

        Returns
        -------
        dict
            ``image`` (a stored path or None) and ``images`` (a list, or None).
        """
        k = (sess.task.name, stim.key(), blur, sess.modality)
        if k not in self._png:
            self._png[k] = [self.store.save_png(p) for p in stimulus_images(sess, stim, blur)]
        paths = self._png[k]
        named = stim.params.get("images") if isinstance(stim.params, dict) else None
        if len(paths) > 1:
            several = list(paths)
        elif isinstance(named, (list, tuple)):
            several = list(named)
        else:
            several = None
        return {"image": paths[0] if paths else None, "images": several}

    def asked(self, pid: str, sess: Session, t: int):
        """Trial ``t`` of ``sess`` as participant ``pid`` is asked it.

        A stimulus for which ``task.follows`` is true (a decomposed scavenger
        hunt's steps after the first) is built, as the runner builds it for a
        model, with ``task.follow_up`` from the participant's logged record of
        the trial before it in the same session and that trial as asked.  The
        records are the store's (``trials.jsonl``, read back when the server
        restarts), so a restarted server asks exactly the same question.
        Trials are answered in order, so that record is always logged by the
        time trial ``t`` is reached.

        Parameters
        ----------
        pid : str
            The participant id.
        sess : Session
            The session run.
        t : int
            The trial within it.

        Returns
        -------
        Stimulus
            The stimulus as asked.
        """
        stim = sess.stimuli[t]
        if t == 0 or not sess.task.follows(stim):
            return stim
        record = self.store.done.get(trial_key(pid, sess, t - 1))
        if record is None:  # not reached: trial t is served only after t - 1 is logged
            return stim
        return sess.task.follow_up(stim, self.asked(pid, sess, t - 1), record)

    def skip_unasked(self, pid: str) -> None:
        """Log the participant's next trials that have nothing to be asked from, unseen.

        A trial whose :meth:`asked` stimulus holds ``not_asked`` (a reason:
        the step before it gave no answer to start from) is logged as the
        runner logs it, invalid with ``not_asked`` and ``invalid_reason``
        ``"not asked: ..."``, without being shown; the participant goes on
        to the next trial.  Called with ``self.lock`` held, after each
        logged answer and before each trial is served (so a server that
        stopped in between logs the skip on the next request).

        Parameters
        ----------
        pid : str
            The participant id.
        """
        study = self.study_of(pid)
        while (index := self.progress.get(pid, 0)) < study.total:
            if study.sequence()[index][0] != "trial":
                return
            sess, t, block = study.where(index)
            stim = self.asked(pid, sess, t)
            why = not_asked(stim)
            if why is None:
                return
            answer = sess.task.record(stim, None)
            answer.update(
                response=None,
                raw_response=None,
                valid=False,
                invalid_reason=f"not asked: {why}",
                not_asked=True,
            )
            first = self.trial_columns(sess, t, stim)
            self.store.append(self.trial_row(pid, study, sess, block, first, answer, None, None))
            self.progress[pid] = index + 1

    def trial_columns(self, sess: Session, t: int, stim) -> dict:
        """A task trial's ``trial``, ``stimulus``, ``blur_sigma``, ``stimulus_id`` and image(s).

        Parameters
        ----------
        sess : Session
            The session run.
        t : int
            The trial within it.
        stim : Stimulus
            The stimulus as asked.

        Returns
        -------
        dict
            ``trial``, ``stimulus``, ``blur_sigma``, ``stimulus_id``, ``image``
            and, when several, ``images``.
        """
        blur = trial_blur(sess, t)
        shown = self.images(sess, stim, blur)  # logged: image always, images when several
        first = {"trial": t, "stimulus": stim.value, "blur_sigma": blur}
        first["stimulus_id"] = stim.key()
        first.update({n: v for n, v in shown.items() if n == "image" or v is not None})
        return first

    def trial_row(self, pid, study, sess, block, first, answer, served, rt) -> dict:
        """The trial-table row of one logged answer (``first``, ``answer``: their columns).

        ``served``: when the trial was sent (monotonic seconds, None if
        unknown or never shown); ``rt``: the page's response time in ms.

        Parameters
        ----------
        pid : str
            The participant id (``subject``).
        study : Study
            The participant's study (its ``order`` gives ``counterbalance``).
        sess : Session
            The trial's session run.
        block : int
            The block position.
        first : dict
            The trial's columns (:meth:`trial_columns`, or a catch trial's);
            emptied of the columns it gives.
        answer : dict
            The answer's columns (``response``, ``raw_response``, ``valid`` and
            the task's own); emptied likewise.
        served : float or None
            When the trial was sent (``time.monotonic()``).
        rt : float or None
            The page's response time, in ms.

        Returns
        -------
        dict
            The row: the trial table's columns, with ``latency_s`` (server side,
            s), ``rt_client_s``, ``block_position``, ``counterbalance``,
            ``source`` ``"human"`` and ``timestamp``.
        """
        return {
            "subject": pid,
            "task": sess.task.name,
            "modality": sess.modality,
            "condition": sess.cond.name,
            "session": sess.session,
            "run": sess.run,
            "trial": first.pop("trial"),
            "seed": sess.seed,
            "paradigm": sess.task.paradigm,
            "stimulus": first.pop("stimulus"),
            "response": answer.pop("response"),
            "raw_response": answer.pop("raw_response"),
            "valid": answer.pop("valid"),
            "range_low": sess.range[0],
            "range_high": sess.range[1],
            "blur_sigma": first.pop("blur_sigma"),
            "context_window": None,
            **first,  # stimulus_id, image(s); a catch trial's catch and catch_index
            "latency_s": round(time.monotonic() - served, 4) if served is not None else None,
            "rt_client_s": round(float(rt) / 1000, 4) if rt is not None else None,
            "block_position": block,
            "counterbalance": (study.order or {}).get("counterbalance", 0),
            "source": "human",
            "timestamp": utc_now(),
            **answer,  # the task's own columns (correct, gold, tap_x, ...), as the runner logs
        }

    def check_answer(self, body, sess, stim) -> dict | Response:
        """The typed answer as the log's answer columns, or a 400 response saying why.

        Tasks with numeric answers take a plain number in the task's range
        (``response``, ``valid``); tasks with worded answers (search cells,
        perception words, labels and lists) read the text with the task's own
        parser, the one the runner uses on a model's reply, in each of the
        task's readings of a typed answer (``Task.human_replies``: a person
        need not type the braces or keys a model is asked for).

        A tapped task takes the tap (:func:`check_tap`) and records the task's
        reply to it.

        Parameters
        ----------
        body : dict or None
            The request's JSON (``response``, or the tap's ``x``, ``y``,
            ``display_w``, ``display_h``).
        sess : Session
            The trial's session run.
        stim : Stimulus
            The stimulus as asked.

        Returns
        -------
        dict or Response
            The answer columns (with ``raw_response``), or a 400 JSON response
            with the error.
        """
        if body is None:
            return JSONResponse({"error": "send JSON"}, status_code=400)
        area = sess.task.tap_area(stim)
        if area is not None:
            tap = check_tap(body, area)
            if isinstance(tap, Response):
                return tap
            reply = sess.task.tap_reply(stim, tap["tap_x"], tap["tap_y"])
            return {**sess.task.record(stim, reply), **tap, "raw_response": reply}
        if not sess.task.worded():
            value = self.check_value(body, sess)
            if isinstance(value, Response):
                return value
            return {"response": value, "valid": True, "raw_response": str(body.get("response"))}
        text = str(body.get("response", "")).strip()
        if not text:
            return JSONResponse({"error": "please type an answer"}, status_code=400)
        if len(text) > MAX_TEXT_ANSWER:
            return JSONResponse(
                {"error": f"answers are at most {MAX_TEXT_ANSWER} characters"}, status_code=400
            )
        for reply in sess.task.human_replies(stim, text):
            answer = sess.task.record(stim, reply)
            if answer.get("valid"):
                return {**answer, "raw_response": str(body.get("response"))}
        asks = ASKS_RE.search(sess.task.human_question(stim) or "")  # "Type yes or no."
        return JSONResponse(
            {
                "error": f"please type {asks.group(1)}"
                if asks
                else "please answer as the question asks"
            },
            status_code=400,
        )

    def trial_payload(self, pid: str) -> dict:
        """What the page needs for the participant's next trial (or that the study is done).

        Parameters
        ----------
        pid : str
            The participant id.

        Returns
        -------
        dict
            ``finished``, ``done``, ``total`` and, when finished, the completion
            ``code``; else the trial's ``id``, ``block``, ``blocks``, ``text``,
            ``question``, ``image``/``images`` (URLs), ``instruction``, the answer
            kind (:func:`answer_kind`) and ``wrap`` (a catch trial:
            :meth:`catch_payload`).
        """
        done = self.progress.get(pid, 0)
        study = self.study_of(pid)
        total = study.total
        if done >= total:
            return {
                "finished": True,
                "done": done,
                "total": total,
                "code": self.completion_code(pid),
            }
        self.served_at.setdefault((pid, done), time.monotonic())
        kind, k = study.sequence()[done]
        sess, t, block = study.where(done)
        head = {"finished": False, "done": done, "total": total, "id": done, "block": block}
        head["blocks"] = len(study.sessions)
        if kind == "catch":
            return {**head, **self.catch_payload(sess, k)}
        stim = self.asked(pid, sess, t)  # a dependent step: from the participant's own answer
        blur = trial_blur(sess, t)
        return {
            **head,
            "text": stimulus_parts(sess, stim, t)[0],
            "question": sess.task.human_question(stim),  # no demos for people: see Task
            **_urls(self.images(sess, stim, blur)),
            "instruction": human_instruction(sess, t),
            **answer_kind(sess.task, stim),
            "wrap": sess.task.name in WRAP_TEXT,
        }

    def catch_payload(self, sess: Session, k: int) -> dict:
        """The page's catch trial ``k``: one item to tap, or a number to type as stated.

        Parameters
        ----------
        sess : Session
            The session run of the trial before it.
        k : int
            The catch trial's number.

        Returns
        -------
        dict
            ``catch``, ``instruction``, ``question``, the image(s) (a tapped
            task) and the answer kind and range.
        """
        out = {"catch": True, "instruction": CATCH_INSTRUCTION, "text": None, "wrap": False}
        if self.task.tap_area(self.study.practice) is not None:
            stim = self.catch_stimulus(k)
            shown = self.images(sess, stim, 0.0)
            question = "There is only one item in this picture. Tap it."
            return {**out, "question": question, **_urls(shown), **answer_kind(self.task, stim)}
        if self.task.worded():  # a word asked for a worded task, never a number as an "estimate"
            word = self._catch_word(k)
            question = f"Please type the word {word} as your answer to this one."
            return {**out, "question": question, "image": None, "images": None, "answer": "text"}
        value, _ = catch_value(self.spec["seed"], k, ANSWER_RANGE.get(self.task.name))
        lo, hi = ANSWER_RANGE.get(self.task.name, CATCH_RANGE)
        question = f"Please type {value:g} as your answer to this one (it is not an estimate)."
        return {
            **out,
            "question": question,
            "image": None,
            "images": None,
            "answer": "number",
            "unit": "",
            "min": lo,
            "max": hi,
        }

    def _catch_word(self, k: int) -> str:
        """The word catch trial ``k`` of a worded task asks for (:data:`.study.CATCH_WORDS`)."""
        return CATCH_WORDS[(int(self.spec["seed"]) + k) % len(CATCH_WORDS)]

    def check_catch(self, body, sess: Session, k: int) -> dict | Response:
        """Catch trial ``k``'s answer as log columns (``correct`` True/False), or a 400 response.

        A tap is right within :data:`CATCH_TAP_RADII` item radii of the item; a
        typed number within the tolerance of :func:`.study.catch_value`.

        Parameters
        ----------
        body : dict or None
            The request's JSON.
        sess : Session
            The session run of the trial before it.
        k : int
            The catch trial's number.

        Returns
        -------
        dict or Response
            The answer columns (``stimulus``, ``response``, ``raw_response``,
            ``valid``, ``correct`` ...), or a 400 JSON response.
        """
        if body is None:
            return JSONResponse({"error": "send JSON"}, status_code=400)
        if self.task.tap_area(self.study.practice) is not None:
            stim = self.catch_stimulus(k)
            tap = check_tap(body, self.task.tap_area(stim))
            if isinstance(tap, Response):
                return tap
            reply = f"({tap['tap_x']:g}, {tap['tap_y']:g})"
            row = self.task.record(stim, reply)
            correct = row["error_px"] <= CATCH_TAP_RADII * stim.params["target_radius"]
            shown = self.images(sess, stim, 0.0)
            return {
                **row,
                **tap,
                **{n: v for n, v in shown.items() if n == "image" or v is not None},
                "stimulus": stim.value,
                "stimulus_id": stim.key(),
                "response": float(correct),
                "raw_response": reply,
                "valid": True,
                "correct": bool(correct),
            }
        if self.task.worded():
            text, word = str(body.get("response", "")).strip(), self._catch_word(k)
            if not text or len(text) > MAX_TEXT_ANSWER:
                return JSONResponse({"error": f"please type the word {word}"}, status_code=400)
            good = text.lower() == word
            row = {"stimulus": 0.0, "response": float(good), "raw_response": text, "valid": True}
            return {**row, "correct": good, "catch_word": word}
        value, tolerance = catch_value(self.spec["seed"], k, ANSWER_RANGE.get(self.task.name))
        lo, hi = ANSWER_RANGE.get(self.task.name, CATCH_RANGE)
        typed = parse_answer(str(body.get("response", "")))
        if typed is None or not lo <= typed <= hi:
            return JSONResponse(
                {"error": f"please enter a number between {lo:g} and {hi:g}"}, status_code=400
            )
        return {
            "stimulus": value,
            "response": typed,
            "raw_response": str(body.get("response")),
            "valid": True,
            "correct": abs(typed - value) <= tolerance + 1e-9,
            "catch_tolerance": tolerance,
        }

    # ------------------------------------------------------------ handlers
    async def about(self, request: Request) -> Response:
        """What the consent page states: number of trials and expected duration.

        Parameters
        ----------
        request : starlette.requests.Request
            The HTTP request.

        Returns
        -------
        Response
            JSON: ``trials`` (answers, catch trials included), ``minutes``,
            ``duration`` (text), ``basis`` and ``task``.
        """
        minutes, basis = self.expected_minutes()
        return JSONResponse(
            {
                "trials": self.study.total,
                "minutes": minutes,
                "duration": minutes_text(minutes),
                "basis": basis,
                "task": self.task.person_task,
            }
        )

    async def index(self, request: Request) -> Response:
        """``GET /``: the participant page.

        Parameters
        ----------
        request : starlette.requests.Request
            The HTTP request.

        Returns
        -------
        Response
            ``static/index.html``, not to be cached.
        """
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})

    async def asset(self, request: Request) -> Response:
        """``GET /assets/{name}``: the page's script and style sheet (nothing else).

        Parameters
        ----------
        request : starlette.requests.Request
            The HTTP request.

        Returns
        -------
        Response
            ``app.js`` or ``style.css``; 404 for any other name.
        """
        name = request.path_params["name"]
        if name not in ("app.js", "style.css"):
            return JSONResponse({"error": "not found"}, status_code=404)
        return FileResponse(STATIC / name)

    async def start(self, request: Request) -> Response:
        """``POST /api/start``: consent given; sign the participant in and assign a counterbalancing row.

        A new participant gets a random key (its hash is logged in
        ``participants.jsonl`` with the row) and the next Latin-square row.

        Parameters
        ----------
        request : starlette.requests.Request
            A JSON body with ``consent: true`` and optionally ``pid``.

        Returns
        -------
        Response
            JSON ``pid``, ``done``, ``total``, ``practiced``, ``task`` and
            ``how`` (:meth:`how_to_answer`), setting the ``bo_pid`` and ``bo_key``
            cookies (HttpOnly, SameSite=Strict, 30 days); 400 without consent or
            for a bad pid, 403 for a pid signed in elsewhere that has answered
            (one that has not is handed a new key: a lost reply locks no one
            out), 429 for too many new participants from one address
            (:class:`.security.JoinLimit`), and the refusals of a body that is
            not a small same-origin JSON object.  A participant who joins in
            the experimenter's browser is logged as a pilot.
        """
        body = await _json(request)
        if isinstance(body, Response):
            return body
        if body is None or body.get("consent") is not True:
            return JSONResponse({"error": "consent is required to take part"}, status_code=400)
        pid = body.get("pid") or ""
        pid = pid.strip() if isinstance(pid, str) else None
        current = self.who(request)
        async with self.lock:
            if pid is None or (pid and not PID_RE.match(pid)):
                return JSONResponse(
                    {"error": "participant id may use letters, digits, . _ - (max 64)"},
                    status_code=400,
                )
            if not pid:
                if current:
                    pid = current
                else:
                    pid = "P" + secrets.token_hex(5)
            if pid in self.keys and current == pid:
                key = request.cookies["bo_key"]
            elif pid in self.keys and self.progress.get(pid, 0) == 0:
                # no answer yet (say the first reply was lost): this browser takes the id over
                key = secrets.token_urlsafe(24)
                self.participants.append(
                    {"event": "rekey", "pid": pid, "key_sha256": _hash(key), "time_utc": utc_now()}
                )
                self.keys[pid] = _hash(key)
            elif pid in self.keys:
                return JSONResponse(
                    {"error": f"participant {pid} is already taking part in another browser"},
                    status_code=403,
                )
            elif wait := self.joins.wait(request.client.host if request.client else ""):
                return JSONResponse(
                    {
                        "error": f"too many new participants from one address; try again in "
                        f"{math.ceil(wait)} s"
                    },
                    status_code=429,
                    headers={"retry-after": str(math.ceil(wait))},
                )
            else:
                key = secrets.token_urlsafe(24)
                pilot = self._authorised(request, cookie_only=True)
                row = len(self.keys) % self.rows  # the next row of the Latin square
                order = self.study.ordered(row).order
                self.participants.append(
                    {
                        "event": "join",
                        "pid": pid,
                        "key_sha256": _hash(key),
                        "time_utc": utc_now(),
                        **order,
                        "order": self.order,
                        **({"pilot": True} if pilot else {}),
                    }
                )
                self.keys[pid] = _hash(key)
                self.rows_of[pid] = row
                if pilot:
                    self.pilots.add(pid)
            self.last_seen[pid] = utc_now()
        resp = JSONResponse(
            {
                "pid": pid,
                "done": self.progress.get(pid, 0),
                "total": self.study_of(pid).total,
                "practiced": pid in self.practiced,
                "task": self.task.person_text(),
                "how": self.how_to_answer(),
            }
        )
        for name, value in (("bo_pid", pid), ("bo_key", key)):
            resp.set_cookie(
                name, value, httponly=True, samesite="strict", max_age=60 * 60 * 24 * 30
            )
        return resp

    def how_to_answer(self) -> str:
        """The instructions page's sentence on how an answer is given (and on catch trials).

        Returns
        -------
        str
            One or two sentences, by the answer kind (number, text or tap).
        """
        kind = answer_kind(self.task, self.study.practice)["answer"]
        how = {
            "number": "Type your estimate as a number and press Enter or the Submit button.",
            "text": "Type your answer as the question asks and press Enter or the Submit button.",
            "tap": "Tap (or click) the picture where your answer is: a ring marks your tap, and "
            "you can tap again to move it. Then press Submit.",
        }[kind]
        if self.catch_every:
            how += (
                " Now and then an attention check asks you to type a given number or to tap the "
                "only item in a picture: please do exactly what it says."
            )
        return how

    async def practice(self, request: Request) -> Response:
        """``GET/POST /api/practice``: the practice trial, with feedback (never logged).

        Parameters
        ----------
        request : starlette.requests.Request
            The HTTP request.

        Returns
        -------
        Response
            GET: the practice trial (``text``, ``question``, image(s),
            ``instruction``, answer kind).  POST: ``ok``, ``correct_answer`` and,
            for numeric tasks, ``true_value`` (a tapped task: ``mark``, the
            target); 400 for an answer that does not check.  401 for an unknown
            participant.
        """
        pid = self.who(request)
        if pid is None:
            return _unknown_participant()
        sess = self.study_of(pid).sessions[0]  # the modality of the participant's first block
        stim = self.study.practice
        if request.method == "GET":
            return JSONResponse(
                {
                    "text": stim.text if sess.modality != "image" else None,  # never smudged
                    "question": sess.task.human_question(stim),
                    **_urls(self.images(sess, stim, 0.0)),
                    "instruction": sess.task.person_text(),
                    **answer_kind(sess.task, stim),
                }
            )
        body = await _json(request)
        if isinstance(body, Response):
            return body
        answer = self.check_answer(body, sess, stim)
        if isinstance(answer, Response):
            return answer
        async with self.lock:
            self.last_seen[pid] = utc_now()
            if pid not in self.practiced:
                self.participants.append(
                    {"event": "practice_done", "pid": pid, "time_utc": utc_now()},
                )
                self.practiced.add(pid)
        feedback = {"ok": True, "correct_answer": sess.task.human_answer(stim)}
        if not sess.task.worded():
            feedback["true_value"] = stim.value
        if sess.task.tap_area(stim) is not None:  # the page rings the target on the image
            p = stim.params
            feedback["mark"] = {"x": p["x"][0], "y": p["y"][0], "r": p["target_radius"]}
        return JSONResponse(feedback)

    def check_value(self, body, sess) -> float | Response:
        """The answer in ``body`` as a number in the task's range, or a 400 response saying why.

        Parameters
        ----------
        body : dict or None
            The request's JSON.
        sess : Session
            The trial's session run (its task's :data:`ANSWER_RANGE`).

        Returns
        -------
        float or Response
            The number, or a 400 JSON response.
        """
        if body is None:
            return JSONResponse({"error": "send JSON"}, status_code=400)
        value = parse_answer(str(body.get("response", "")))
        if value is None:
            return JSONResponse({"error": "please enter a number"}, status_code=400)
        lo, hi = ANSWER_RANGE[sess.task.name]
        if not lo <= value <= hi:
            return JSONResponse(
                {"error": f"please enter a number between {lo:g} and {hi:g}"}, status_code=400
            )
        return value

    async def next_trial(self, request: Request) -> Response:
        """``GET /api/next``: the participant's next trial.

        Parameters
        ----------
        request : starlette.requests.Request
            The HTTP request.

        Returns
        -------
        Response
            JSON :meth:`trial_payload`; 401 for an unknown participant.
        """
        pid = self.who(request)
        if pid is None:
            return _unknown_participant()
        self.last_seen[pid] = utc_now()
        async with self.lock:
            self.skip_unasked(pid)  # after a restart between an answer and its skips
        return JSONResponse(self.trial_payload(pid))

    async def answer(self, request: Request) -> Response:
        """``POST /api/answer``: log one answer (append-only), then send the next trial.

        Parameters
        ----------
        request : starlette.requests.Request
            A JSON body with ``id`` (the answer's position), the answer and
            optionally ``rt_ms``.

        Returns
        -------
        Response
            JSON :meth:`trial_payload` of the next trial; 401 for an unknown
            participant, 400 for a missing id, a bad ``rt_ms`` or an answer that
            does not check, 409 for an id that is not the next one (with
            ``expected``) or when all is done.
        """
        pid = self.who(request)
        if pid is None:
            return _unknown_participant()
        body = await _json(request)
        if isinstance(body, Response):
            return body
        if body is None or type(body.get("id")) is not int:  # True is an int in Python
            return JSONResponse({"error": "missing trial id (a whole number)"}, status_code=400)
        rt = body.get("rt_ms")
        if rt is not None and not (
            isinstance(rt, (int, float)) and not isinstance(rt, bool) and 0 <= rt <= MAX_RT_MS
        ):
            return JSONResponse(
                {"error": "rt_ms must be a number of milliseconds"}, status_code=400
            )
        study = self.study_of(pid)
        async with self.lock:
            expected = self.progress.get(pid, 0)
            if body["id"] != expected:
                what = "was already answered" if body["id"] < expected else "is not the next trial"
                return JSONResponse(
                    {"error": f"trial {body['id']} {what}", "expected": expected}, status_code=409
                )
            if expected >= study.total:
                return JSONResponse({"error": "all trials are done"}, status_code=409)
            kind, k = study.sequence()[expected]
            sess, t, block = study.where(expected)
            if kind == "catch":
                answer = self.check_catch(body, sess, k)
                if isinstance(answer, Response):
                    return answer
                first = {"trial": -(k + 1), "catch": True, "catch_index": k}
                first.update(stimulus=answer.pop("stimulus"), blur_sigma=0.0)
                first.update(stimulus_id=answer.pop("stimulus_id", None))
            else:
                stim = self.asked(pid, sess, t)  # the question shown (see trial_payload)
                answer = self.check_answer(body, sess, stim)
                if isinstance(answer, Response):
                    return answer
                first = self.trial_columns(sess, t, stim)
            served = self.served_at.get((pid, expected))
            rec = self.trial_row(pid, study, sess, block, first, answer, served, rt)
            self.store.append(rec)  # a full disk raises here: nothing counted, the page may retry
            self.served_at.pop((pid, expected), None)
            self.progress[pid] = expected + 1
            self.last_seen[pid] = utc_now()
            self.skip_unasked(pid)  # a step left with nothing to start from: logged, not shown
        return JSONResponse(self.trial_payload(pid))

    async def stimulus(self, request: Request) -> Response:
        """``GET /stimuli/{name}``: a stored stimulus image.

        Parameters
        ----------
        request : starlette.requests.Request
            The HTTP request.

        Returns
        -------
        Response
            The PNG; 404 unless the name is a content hash (``<20 hex>.png``) of
            a file in the folder's ``stimuli/``.
        """
        name = request.path_params["name"]
        if not STIM_RE.match(name):
            return JSONResponse({"error": "not found"}, status_code=404)
        path = self.folder / "stimuli" / name
        if not path.is_file():
            return JSONResponse({"error": "not found"}, status_code=404)
        return FileResponse(path, media_type="image/png")

    def experimenter_cookie(self) -> str:
        """The experimenter cookie's value: an HMAC of the token (the token itself never is one).

        Returns
        -------
        str
            The hex HMAC-SHA256 of ``experimenter:<token>`` under the server's
            secret.
        """
        return hmac.new(
            self.secret.encode(), b"experimenter:" + self.token.encode(), "sha256"
        ).hexdigest()

    def _authorised(self, request: Request, cookie_only: bool = False) -> bool | Response:
        """True for the experimenter's cookie; a redirect setting it for a right ``?token=``.

        The token in the printed link is used once: the answer sets an
        HttpOnly, SameSite=Strict cookie (sent to the participant pages too,
        so a pilot in that browser is known) and sends the browser to the same
        page without the token (so it leaves the address bar and history).
        """
        if "token" in request.query_params and not cookie_only:
            given = request.query_params["token"].encode("utf-8", "surrogateescape")
            if not hmac.compare_digest(given, self.token.encode()):
                return False
            resp = RedirectResponse(request.url.path, status_code=303)
            resp.set_cookie(
                "bo_exp",
                self.experimenter_cookie(),
                httponly=True,
                samesite="strict",
                max_age=60 * 60 * 12,
            )
            return resp
        cookie = request.cookies.get("bo_exp", "").encode("utf-8", "surrogateescape")
        return hmac.compare_digest(cookie, self.experimenter_cookie().encode())

    async def experimenter(self, request: Request) -> Response:
        """``GET /experimenter``: progress per participant (token or its cookie required).

        Parameters
        ----------
        request : starlette.requests.Request
            The HTTP request.

        Returns
        -------
        Response
            An HTML table (participant, trials done, order row, practice, last
            seen, completion code); a 303 redirect setting the cookie for a right
            ``?token=``; 403 otherwise.
        """
        ok = self._authorised(request)
        if isinstance(ok, Response):
            return ok
        if not ok:
            return HTMLResponse("<h1>403</h1><p>experimenter token required</p>", status_code=403)
        rows = "".join(
            f"<tr><td>{html.escape(p)}</td><td>{self.progress.get(p, 0)} / {self.study.total}</td>"
            f"<td>{self.rows_of.get(p, 0)}</td>"
            f"<td>{'yes' if p in self.practiced else 'no'}</td><td>{html.escape(self.last_seen.get(p, ''))}</td>"
            f"<td>{self.completion_code(p) if self.progress.get(p, 0) >= self.study.total else ''}</td></tr>"
            for p in sorted(self.keys)
        )
        page = (
            f"<!doctype html><meta charset=utf-8><title>experimenter</title><link rel=stylesheet href=/assets/style.css>"
            f"<main><h1>Participants</h1><p>{len(self.keys)} joined · {len(self.store.done)} trials logged · "
            f"<a href='/experimenter/trials.csv'>download trials (CSV)</a></p>"
            f"<table><tr><th>participant</th><th>trials</th><th>order row</th><th>practice</th><th>last seen (UTC)</th><th>completion code</th></tr>"
            f"{rows}</table></main>"
        )
        return HTMLResponse(page)

    async def trials_csv(self, request: Request) -> Response:
        """``GET /experimenter/trials.csv``: the logged trials as CSV (token or its cookie required).

        Parameters
        ----------
        request : starlette.requests.Request
            The HTTP request.

        Returns
        -------
        Response
            ``trials.csv`` as an attachment; 303 redirect for a right
            ``?token=``; 403 otherwise.
        """
        ok = self._authorised(request)
        if isinstance(ok, Response):
            return ok
        if not ok:
            return JSONResponse({"error": "experimenter token required"}, status_code=403)
        buf = io.StringIO()  # no participant's text reads as a formula (OWASP CSV injection)
        spreadsheet_safe(pd.DataFrame(list(self.store.done.values()))).to_csv(buf, index=False)
        return Response(
            buf.getvalue(),
            media_type="text/csv",
            headers={"content-disposition": "attachment; filename=trials.csv"},
        )

    def app(self) -> Starlette:
        """The Starlette application with every route, wrapped in :class:`SecurityHeaders`.

        Returns
        -------
        SecurityHeaders
            The ASGI application; an ``OSError`` or :class:`LogWriteError` in a
            handler is answered by :func:`cannot_write`.
        """
        routes = [
            Route("/", self.index),
            Route("/assets/{name}", self.asset),
            Route("/api/study", self.about),
            Route("/api/start", self.start, methods=["POST"]),
            Route("/api/practice", self.practice, methods=["GET", "POST"]),
            Route("/api/next", self.next_trial),
            Route("/api/answer", self.answer, methods=["POST"]),
            Route("/stimuli/{name}", self.stimulus),
            Route("/experimenter", self.experimenter),
            Route("/experimenter/trials.csv", self.trials_csv),
        ]
        handlers = {OSError: cannot_write, LogWriteError: cannot_write}
        return SecurityHeaders(Starlette(routes=routes, exception_handlers=handlers), self.hosts)


class SecurityHeaders:
    """ASGI wrapper: only the served host names; CSP, no framing, no sniffing, no referrer.

    A request whose ``Host`` is neither an IP address nor one of ``hosts``
    (``localhost`` and the names given with ``--allow-host``) is answered
    421 without reaching the app: a DNS-rebinding page, which reaches the
    server under the attacker's own name, cannot start participants.
    """

    def __init__(self, app, hosts=None):
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope, receive, send):
        """Check the Host header, then add the security headers to every HTTP response."""
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        if self.hosts is not None:
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if not host_allowed(host, self.hosts):
                refused = JSONResponse(
                    {
                        "error": f"unknown host name {host[:100]!r}: this server answers only its own"
                    },
                    status_code=421,
                )
                return await refused(scope, receive, send_with_headers)
        await self.app(scope, receive, send_with_headers)


def host_allowed(host: str, names: set[str]) -> bool:
    """Whether a ``Host`` header names this server: an IP address, or one of ``names``.

    An IP address cannot come from a DNS-rebinding page (it reaches the
    server under a name it controls), so every IP literal is accepted.

    Parameters
    ----------
    host : str
        The ``Host`` header (a port and a trailing dot are ignored; IPv6 in
        brackets).
    names : set of str
        The allowed host names, lower case.

    Returns
    -------
    bool
        True for an IP literal or a name in ``names``.
    """
    host = host.strip().lower()
    if host.startswith("["):  # [v6] or [v6]:port
        name = host[1 : host.find("]")] if "]" in host else host
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    name = name.rstrip(".")
    if not name:
        return False
    if name in names:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


async def cannot_write(request: Request, exc: Exception) -> Response:
    """A log write that failed (a full disk): one log line and a JSON 503 the page may retry.

    Nothing was counted (the store appends before it counts), so the same
    answer sent again is logged once.

    Parameters
    ----------
    request : starlette.requests.Request
        The request that failed.
    exc : Exception
        The write error.

    Returns
    -------
    Response
        JSON ``error`` and ``retry: true``, status 503, ``retry-after: 30``.
    """
    disk = getattr(exc, "errno", None) == errno.ENOSPC or "disk is full" in str(exc)
    what = "the disk is full" if disk else (getattr(exc, "strerror", None) or type(exc).__name__)
    LOG.error("cannot save: %s (%s %s)", what, request.method, request.url.path)
    msg = "the server cannot save answers right now" + (" (its disk is full)" if disk else "")
    return JSONResponse(
        {"error": msg + "; please try again in a moment", "retry": True},
        status_code=503,
        headers={"retry-after": "30"},
    )


def check_tap(body: dict, area: tuple[int, int]) -> dict | Response:
    """A tap's image-pixel point and the displayed size, as log columns, or a 400 response.

    ``x``, ``y``: the tap in the image's own pixels (the page scales the
    displayed point by ``naturalWidth / displayed width``); ``display_w``,
    ``display_h``: the size the image was shown at, in CSS pixels.

    Parameters
    ----------
    body : dict
        The request's JSON.
    area : tuple of int
        The image's width and height, in its own pixels.

    Returns
    -------
    dict or Response
        ``tap_x``, ``tap_y``, ``display_w``, ``display_h`` (rounded to 0.01),
        or a 400 JSON response: a value not a finite number, a tap outside the
        picture, or a display size not in (0, :data:`MAX_DISPLAY_PX`].
    """
    keys = ("x", "y", "display_w", "display_h")
    vals = [body.get(k) for k in keys]
    if not all(_finite(v) for v in vals):
        return JSONResponse(
            {"error": "tap (or click) the picture to answer; positions are not typed"},
            status_code=400,
        )
    x, y, dw, dh = map(float, vals)
    if not (0 <= x <= area[0] and 0 <= y <= area[1]):
        return JSONResponse({"error": "the tap is outside the picture"}, status_code=400)
    if not (0 < dw <= MAX_DISPLAY_PX and 0 < dh <= MAX_DISPLAY_PX):
        return JSONResponse({"error": "display size out of range"}, status_code=400)
    return {
        "tap_x": round(x, 2),
        "tap_y": round(y, 2),
        "display_w": round(dw, 2),
        "display_h": round(dh, 2),
    }


def trial_key(pid: str, sess: Session, t: int) -> tuple:
    """The log key (:data:`bayesobs.run.store.TRIAL_ID`) of participant ``pid``'s trial ``t`` of ``sess``.

    Parameters
    ----------
    pid : str
        The participant id.
    sess : Session
        The session run.
    t : int
        The trial within it.

    Returns
    -------
    tuple
        The key's values in :data:`~bayesobs.run.store.TRIAL_ID` order.
    """
    ids = dict(zip(("task", "modality", "condition", "session", "run"), sess.key[1:], strict=True))
    ids.update(subject=pid, trial=t)
    return tuple(ids[k] for k in TRIAL_ID)


def not_asked(stim) -> str | None:
    """Why ``stim`` (a ``Task.follow_up`` result) is not asked, or None when it is.

    Parameters
    ----------
    stim : Stimulus
        A stimulus as asked.

    Returns
    -------
    str or None
        Its ``params["not_asked"]`` reason.
    """
    params = stim.params if isinstance(stim.params, dict) else {}
    return params.get("not_asked") or None


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def answer_kind(task, stim) -> dict:
    """How the page takes the answer: ``tap`` (with the image's size), ``text`` or ``number``.

    Parameters
    ----------
    task : Task
        The task.
    stim : Stimulus
        The stimulus as asked (a tapped task has a tap area).

    Returns
    -------
    dict
        ``answer`` (``tap``, ``text`` or ``number``), ``unit``, ``min`` and
        ``max`` (the answer range, None where none) and, for a tap,
        ``tap_w`` and ``tap_h``.
    """
    area = task.tap_area(stim)
    if area is not None:
        return {
            "answer": "tap",
            "tap_w": area[0],
            "tap_h": area[1],
            "unit": "",
            "min": None,
            "max": None,
        }
    lo, hi = ANSWER_RANGE.get(task.name, (None, None))
    kind = "text" if task.worded() else "number"
    return {"answer": kind, "unit": task.unit, "min": lo, "max": hi}


def _urls(shown: dict) -> dict:
    """:meth:`ParticipantServer.images` with every stored path as this server's URL."""
    image, images = shown["image"], shown["images"]
    return {
        "image": _url(image) if image else None,
        "images": [_url(x) for x in images] if images is not None else None,
    }


def _url(path: str) -> str:
    """A stored stimulus path (``stimuli/<hash>.png``) as this server's URL; URLs unchanged."""
    path = str(path)
    return path if path.startswith(("/", "http://", "https://")) else "/" + path


def _unknown_participant() -> JSONResponse:
    return JSONResponse(
        {"error": "unknown participant: start from the consent page"}, status_code=401
    )


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number in JSON")


async def _json(request: Request):
    """The request's JSON object; None if it is not one; a Response to send back if refused.

    Refused: a body over ``MAX_BODY`` bytes (413, read no further), a content
    type other than JSON (415: a cross-site form cannot send JSON without a
    CORS preflight), and an ``Origin`` other than this server's (403).
    """
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return JSONResponse({"error": "send JSON (content-type application/json)"}, status_code=415)
    origin = request.headers.get("origin")  # host only: behind a TLS proxy the scheme differs
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        return JSONResponse({"error": "cross-origin request refused"}, status_code=403)
    too_big = JSONResponse({"error": f"request body over {MAX_BODY} bytes"}, status_code=413)
    try:
        if int(request.headers.get("content-length") or 0) > MAX_BODY:
            return too_big
    except ValueError:
        return JSONResponse({"error": "bad content-length"}, status_code=400)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            return too_big
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep
        return None
    return body if isinstance(body, dict) else None
