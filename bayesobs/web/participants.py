"""A study's participants: who they are, where each stands, what each is asked next."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import secrets
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request

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
from ..run.store import TRIAL_ID, AppendLog, ExperimentStore
from .answers import CATCH_INSTRUCTION, WRAP_TEXT, answer_kind, catch_word
from .study import (
    CATCH_RANGE,
    block_order,
    catch_plan,
    catch_value,
    check_catch_every,
    check_minutes,
    check_order,
    estimate_minutes,
    latin_rows,
    tap_catch,
)

FINISHED_FOR_ESTIMATE = 3  # finished participants before their times replace the spec's estimate


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
        """The same study with its blocks in Latin-square row ``row`` (see :mod:`.study`)."""
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
        """The participant's answers in order: ``("trial", i)`` and ``("catch", k)``."""
        return catch_plan(self.trials, self.catch_every)

    def where(self, index: int) -> tuple[Session, int, int]:
        """Session, trial and block of answer ``index`` (a catch trial: those of the trial before it)."""
        kind, i = self.sequence()[index]
        if kind == "catch":
            i = [j for k, j in self.sequence()[:index] if k == "trial"][-1]
        return self.trial(i)

    def trial(self, index: int) -> tuple[Session, int, int]:
        """Session, trial within it and block position of the participant's trial ``index``."""
        for b, s in enumerate(self.sessions):
            if index < len(s.stimuli):
                return s, index, b
            index -= len(s.stimuli)
        raise IndexError(index)


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class Participants:
    """The participants of one experiment folder: sign-in keys, progress, the trials they are asked."""

    def __init__(
        self,
        spec_path,
        out,
        modalities=None,
        conditions=None,
        trials=None,
        ami=None,
        order="counterbalanced",
        minutes=None,
        catch_every=None,
    ):
        self.order = check_order(order)
        self.minutes = check_minutes(minutes)
        self.catch_every = check_catch_every(catch_every)
        self.spec = spec = load_spec(spec_path)
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
        self.lock = asyncio.Lock()
        self.keys: dict[str, str] = {}
        self.practiced: set[str] = set()
        self.pilots: set[str] = set()  # joined in the experimenter's browser: not in the estimate
        self.last_seen: dict[str, str] = {}
        self.rows_of: dict[str, int] = {}  # counterbalancing row per participant (logged at join)
        self._studies: dict[int, Study] = {}
        self.participants = AppendLog(self.folder / "participants.jsonl")  # a torn tail is cut
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

    def study_of(self, pid: str) -> Study:
        """The participant's study: the blocks in their counterbalancing row."""
        row = self.rows_of.get(pid, 0)
        if row not in self._studies:
            self._studies[row] = self.study.ordered(row)
        return self._studies[row]

    def expected_minutes(self) -> tuple[int, str]:
        """Duration announced on the consent page, and where the number comes from."""
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
        """The participant's completion code (an HMAC of the pid: checkable, not guessable)."""
        return hmac.new(self.secret.encode(), pid.encode(), hashlib.sha256).hexdigest()[:10].upper()

    def catch_stimulus(self, k: int):
        """Catch trial ``k`` of a tapped task: the task's own display with one item alone."""
        if k not in self._catch:
            self._catch[k] = tap_catch(self.task, self.spec["seed"], k)
        return self._catch[k]

    def _catch_shown(self, sess: Session, k: int) -> tuple:
        """Catch trial ``k``'s stimulus and logged image(s) for a tapped task, else ``(None, None)``."""
        if self.task.tap_area(self.study.practice) is None:
            return None, None
        stim = self.catch_stimulus(k)
        return stim, _logged(self.images(sess, stim, 0.0))

    def _who(self, request: Request) -> str | None:
        """The pid of the request's signed-in participant, or ``None``."""
        pid, key = request.cookies.get("bo_pid"), request.cookies.get("bo_key")
        if not pid or not key or pid not in self.keys:
            return None
        return pid if hmac.compare_digest(self.keys[pid], _hash(key)) else None

    def _sign(self, event: str, pid: str, extra: dict | None = None) -> str:
        """A new key for ``pid``, its hash logged as ``event`` with ``extra``."""
        key = secrets.token_urlsafe(24)
        record = {"event": event, "pid": pid, "key_sha256": _hash(key), "time_utc": utc_now()}
        self.participants.append({**record, **(extra or {})})
        self.keys[pid] = _hash(key)
        return key

    def _rekey(self, pid: str) -> str:
        """Hand a participant who has not answered yet a new key (a lost reply locks no one out)."""
        return self._sign("rekey", pid)

    def _join(self, pid: str, pilot: bool = False) -> str:
        """Sign a new participant up with a key and the next row of the Latin square."""
        row = len(self.keys) % self.rows
        order = self.study.ordered(row).order
        extra = {**order, "order": self.order, **({"pilot": True} if pilot else {})}
        key = self._sign("join", pid, extra)
        self.rows_of[pid] = row
        if pilot:
            self.pilots.add(pid)
        return key

    def _practice_done(self, pid: str) -> None:
        """Log the participant's first practice answer (later ones are not logged)."""
        if pid not in self.practiced:
            self.participants.append({"event": "practice_done", "pid": pid, "time_utc": utc_now()})
            self.practiced.add(pid)

    def images(self, sess: Session, stim, blur: float) -> dict:
        """A trial's ``image`` (the first stored image) and ``images`` (all, when several)."""
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

    def _image_urls(self, sess: Session, stim, blur: float) -> dict:
        """:meth:`images` as this server's URLs, for the page."""
        return _urls(self.images(sess, stim, blur))

    def _asked(self, pid: str, sess: Session, t: int):
        """Trial ``t`` of ``sess`` as participant ``pid`` is asked it."""
        stim = sess.stimuli[t]
        if t == 0 or not sess.task.follows(stim):
            return stim
        # a dependent step, built as the runner builds it from the logged record of the step
        # before (read back on restart: a restarted server asks the same question)
        record = self.store.done.get(_trial_key(pid, sess, t - 1))
        if record is None:  # not reached: trial t is served only after t - 1 is logged
            return stim
        return sess.task.follow_up(stim, self._asked(pid, sess, t - 1), record)

    def _skip_unasked(self, pid: str) -> None:
        """Log the participant's next trials that have nothing to be asked from, unseen."""
        # with the lock held, after each answer and before each trial is served
        study = self.study_of(pid)
        while (index := self.progress.get(pid, 0)) < study.total:
            if study.sequence()[index][0] != "trial":
                return
            sess, t, _ = study.where(index)
            stim = self._asked(pid, sess, t)
            why = stim.params.get("not_asked") if isinstance(stim.params, dict) else None
            if not why:
                return
            answer = sess.task.record(stim, None)
            answer.update(
                response=None,
                raw_response=None,
                valid=False,
                invalid_reason=f"not asked: {why}",
                not_asked=True,
            )
            self._log_answer(pid, self._trial_columns(sess, t, stim), answer)

    def _trial_columns(self, sess: Session, t: int, stim) -> dict:
        """A task trial's ``trial``, ``stimulus``, ``blur_sigma``, ``stimulus_id`` and image(s)."""
        blur = trial_blur(sess, t)
        shown = self.images(sess, stim, blur)  # logged: image always, images when several
        first = {"trial": t, "stimulus": stim.value, "blur_sigma": blur}
        first["stimulus_id"] = stim.key()
        first.update(_logged(shown))
        return first

    def _log_answer(self, pid: str, first: dict, answer: dict, rt=None) -> None:
        """Log the participant's next answer and count it (nothing is counted if the write fails)."""
        study = self.study_of(pid)
        index = self.progress.get(pid, 0)
        sess, _, block = study.where(index)
        served = self.served_at.get((pid, index))  # kept until the write succeeds: a retry
        self.store.append(_row(pid, study, sess, block, first, answer, served, rt))
        self.served_at.pop((pid, index), None)
        self.progress[pid] = index + 1

    def _trial_payload(self, pid: str) -> dict:
        """What the page needs for the participant's next trial (or that the study is done)."""
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
            return {**head, **self._catch_payload(sess, k)}
        stim = self._asked(pid, sess, t)  # a dependent step: from the participant's own answer
        blur = trial_blur(sess, t)
        return {
            **head,
            "text": stimulus_parts(sess, stim, t)[0],
            "question": sess.task.human_question(stim),  # no demos for people: see Task
            **self._image_urls(sess, stim, blur),
            "instruction": human_instruction(sess, t),
            **answer_kind(sess.task, stim),
            "wrap": sess.task.name in WRAP_TEXT,
        }

    def _catch_payload(self, sess: Session, k: int) -> dict:
        """The page's catch trial ``k``: one item to tap, a word or a number to type as stated."""
        out = {"catch": True, "instruction": CATCH_INSTRUCTION, "text": None, "wrap": False}
        stim, shown = self._catch_shown(sess, k)
        if stim is not None:
            question = "There is only one item in this picture. Tap it."
            return {**out, "question": question, **_urls(shown), **answer_kind(self.task, stim)}
        if self.task.worded():  # a word asked for a worded task, never a number as an "estimate"
            word = catch_word(self.spec["seed"], k)
            question = f"Please type the word {word} as your answer to this one."
            return {**out, "question": question, "image": None, "images": None, "answer": "text"}
        value, _ = catch_value(self.spec["seed"], k, self.task.answer_range)
        lo, hi = self.task.answer_range or CATCH_RANGE
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


def _trial_key(pid: str, sess: Session, t: int) -> tuple:
    """The log key (:data:`~bayesobs.run.store.TRIAL_ID` order) of ``pid``'s trial ``t`` of ``sess``."""
    ids = dict(zip(("task", "modality", "condition", "session", "run"), sess.key[1:], strict=True))
    ids.update(subject=pid, trial=t)
    return tuple(ids[k] for k in TRIAL_ID)


def _urls(shown: dict) -> dict:
    """:meth:`Participants.images` with every stored path as this server's URL."""
    image, images = shown["image"], shown.get("images")
    return {
        "image": _url(image) if image else None,
        "images": [_url(x) for x in images] if images is not None else None,
    }


def _logged(shown: dict) -> dict:
    """:meth:`Participants.images` as logged: ``image``, and ``images`` when several."""
    return {n: v for n, v in shown.items() if n == "image" or v is not None}


def _url(path: str) -> str:
    """A stored stimulus path (``stimuli/<hash>.png``) as this server's URL; URLs unchanged."""
    path = str(path)
    return path if path.startswith(("/", "http://", "https://")) else "/" + path


def _row(pid, study, sess, block, first, answer, served, rt) -> dict:
    """The trial-table row of one answer: ``first``'s and ``answer``'s columns (popped) and the run's."""
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
