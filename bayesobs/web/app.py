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
import hashlib
import hmac
import html
import io
import json
import math
import re
import secrets
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pandas as pd
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ..presentation import (
    human_instruction,
    human_plan,
    practice_stimulus,
    stimulus_images,
    stimulus_parts,
    trial_blur,
)
from ..provenance import utc_now
from ..runner import Session, load_spec
from ..stimuli import TASKS
from ..store import AppendLog, ExperimentStore
from .study import block_order, check_minutes, check_order, estimate_minutes, latin_rows

STATIC = Path(__file__).resolve().parent / "static"
WRAP_TEXT = ("maze_distance", "duration")  # prose may wrap; ASCII line stimuli must not
PID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # never "..", never a path
MAX_BODY = 4096  # bytes of a request body: an answer is a few dozen
MAX_ANSWER = 32  # characters of a typed answer ("0.4275", "12,5" ...)
MAX_TEXT_ANSWER = 200  # characters of a typed worded answer (a label, a cell, a list of colours)
MAX_RT_MS = 24 * 3600 * 1000  # a client response time above a day is not one
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

    def ordered(self, row: int) -> Study:
        """The same study with its blocks in Latin-square row ``row`` (see :mod:`.study`)."""
        sessions, record = block_order(self.sessions, row)
        return Study(self.spec, sessions, self.practice, record)

    @property
    def total(self) -> int:
        """Trials in one participant's study."""
        return sum(len(s.stimuli) for s in self.sessions)

    def trial(self, index: int) -> tuple[Session, int, int]:
        """Session, trial within it and block position of the participant's trial ``index``."""
        for b, s in enumerate(self.sessions):
            if index < len(s.stimuli):
                return s, index, b
            index -= len(s.stimuli)
        raise IndexError(index)


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def parse_answer(text: str) -> float | None:
    """A plain number typed by a person (``0.42``, ``.42``, ``0,42``, ``12``); else None."""
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
    ):
        spec = load_spec(spec_path)
        self.spec = spec
        sessions = human_plan(spec, modalities, conditions, trials, ami)  # subject: each pid
        practice = practice_stimulus(spec, sessions[0])
        self.study = Study(spec, sessions, practice)  # row 0: the spec's order
        self.order = check_order(order)
        self.minutes = check_minutes(minutes)
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
        self.last_seen: dict[str, str] = {}
        self.rows_of: dict[str, int] = {}  # counterbalancing row per participant (logged at join)
        self._studies: dict[int, Study] = {}
        self.participants = AppendLog(
            self.folder / "participants.jsonl"
        )  # a torn tail is cut on open
        for rec in self.participants.read()[0]:
            if rec.get("event") == "join":
                self.keys[rec["pid"]] = rec["key_sha256"]
                self.rows_of[rec["pid"]] = int(rec.get("counterbalance", 0))  # older logs: fixed
            elif rec.get("event") == "practice_done":
                self.practiced.add(rec["pid"])
        self.progress: dict[str, int] = {}
        for key in self.store.done:
            self.progress[key[0]] = self.progress.get(key[0], 0) + 1
        self.served_at: dict[tuple[str, int], float] = {}
        self._png: dict[tuple, str] = {}

    # ------------------------------------------------------------ helpers
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
        lat = [r["latency_s"] for r in self.store.done.values() if r.get("latency_s") is not None]
        if len(lat) >= 20:
            med = statistics.median(lat)
            return estimate_minutes(self.study.total, med), f"median answer time so far {med:.0f} s"
        return estimate_minutes(self.study.total), "estimated from the number of trials"

    def completion_code(self, pid: str) -> str:
        """The participant's completion code (an HMAC of the pid: checkable, not guessable)."""
        return hmac.new(self.secret.encode(), pid.encode(), hashlib.sha256).hexdigest()[:10].upper()

    def who(self, request: Request) -> str | None:
        """The pid of the request's signed-in participant, or ``None``."""
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

    def check_answer(self, body, sess, stim) -> dict | Response:
        """The typed answer as the log's answer columns, or a 400 response saying why.

        Tasks with numeric answers take a plain number in the task's range
        (``response``, ``valid``); tasks with worded answers (search cells,
        perception words, labels and lists) read the text with the task's own
        parser, the one the runner uses on a model's reply, in each of the
        task's readings of a typed answer (``Task.human_replies``: a person
        need not type the braces or keys a model is asked for).
        """
        if body is None:
            return JSONResponse({"error": "send JSON"}, status_code=400)
        if not sess.task.worded():
            value = self.check_value(body, sess)
            if isinstance(value, Response):
                return value
            return {"response": value, "valid": True}
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
                return answer
        return JSONResponse(
            {"error": "please answer as the question asks (see the instruction above)"},
            status_code=400,
        )

    def trial_payload(self, pid: str) -> dict:
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
        sess, t, block = study.trial(done)
        stim = sess.stimuli[t]
        blur = trial_blur(sess, t)
        instruction = human_instruction(sess, t)
        lo, hi = ANSWER_RANGE.get(sess.task.name, (None, None))
        self.served_at.setdefault((pid, done), time.monotonic())
        return {
            "finished": False,
            "done": done,
            "total": total,
            "id": done,
            "text": stimulus_parts(sess, stim, t)[0],
            "question": sess.task.human_question(stim),  # no demos for people: see Task
            **_urls(self.images(sess, stim, blur)),
            "instruction": instruction,
            "unit": sess.task.unit,
            "answer": "text" if sess.task.worded() else "number",
            "min": lo,
            "max": hi,
            "wrap": sess.task.name in WRAP_TEXT,
            "block": block,
            "blocks": len(study.sessions),
        }

    # ------------------------------------------------------------ handlers
    async def about(self, request: Request) -> Response:
        """What the consent page states: number of trials and expected duration."""
        minutes, basis = self.expected_minutes()
        return JSONResponse({"trials": self.study.total, "minutes": minutes, "basis": basis})

    async def index(self, request: Request) -> Response:
        """``GET /``: the participant page."""
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})

    async def asset(self, request: Request) -> Response:
        """``GET /assets/{name}``: the page's script and style sheet (nothing else)."""
        name = request.path_params["name"]
        if name not in ("app.js", "style.css"):
            return JSONResponse({"error": "not found"}, status_code=404)
        return FileResponse(STATIC / name)

    async def start(self, request: Request) -> Response:
        """``POST /api/start``: consent given; sign the participant in and assign a counterbalancing row."""
        body = await _json(request)
        if isinstance(body, Response):
            return body
        if body is None or body.get("consent") is not True:
            return JSONResponse({"error": "consent is required to take part"}, status_code=400)
        pid = (body.get("pid") or "").strip()
        current = self.who(request)
        async with self.lock:
            if pid and not PID_RE.match(pid):
                return JSONResponse(
                    {"error": "participant id may use letters, digits, . _ - (max 64)"},
                    status_code=400,
                )
            if not pid:
                if current:
                    pid = current
                else:
                    pid = "P" + secrets.token_hex(5)
            if pid in self.keys:
                if current != pid:
                    return JSONResponse(
                        {"error": f"participant {pid} is already taking part in another browser"},
                        status_code=403,
                    )
                key = request.cookies["bo_key"]
            else:
                key = secrets.token_urlsafe(24)
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
                    }
                )
                self.keys[pid] = _hash(key)
                self.rows_of[pid] = row
        resp = JSONResponse(
            {
                "pid": pid,
                "done": self.progress.get(pid, 0),
                "total": self.study_of(pid).total,
                "practiced": pid in self.practiced,
                "task": self.study.sessions[0].task.instruction,
            }
        )
        for name, value in (("bo_pid", pid), ("bo_key", key)):
            resp.set_cookie(
                name, value, httponly=True, samesite="strict", max_age=60 * 60 * 24 * 30
            )
        return resp

    async def practice(self, request: Request) -> Response:
        """``GET/POST /api/practice``: the practice trial, with feedback (never logged)."""
        pid = self.who(request)
        if pid is None:
            return _unknown_participant()
        sess = self.study_of(pid).sessions[0]  # the modality of the participant's first block
        stim = self.study.practice
        if request.method == "GET":
            lo, hi = ANSWER_RANGE.get(sess.task.name, (None, None))
            return JSONResponse(
                {
                    "text": stim.text if sess.modality != "image" else None,  # never smudged
                    "question": sess.task.human_question(stim),
                    **_urls(self.images(sess, stim, 0.0)),
                    "instruction": sess.task.instruction,
                    "unit": sess.task.unit,
                    "answer": "text" if sess.task.worded() else "number",
                    "min": lo,
                    "max": hi,
                }
            )
        body = await _json(request)
        if isinstance(body, Response):
            return body
        answer = self.check_answer(body, sess, stim)
        if isinstance(answer, Response):
            return answer
        async with self.lock:
            if pid not in self.practiced:
                self.participants.append(
                    {"event": "practice_done", "pid": pid, "time_utc": utc_now()},
                )
                self.practiced.add(pid)
        if sess.task.worded():
            return JSONResponse({"ok": True, "correct_answer": _gold_text(answer.get("gold"))})
        return JSONResponse({"ok": True, "true_value": stim.value})

    def check_value(self, body, sess) -> float | Response:
        """The answer in ``body`` as a number in the task's range, or a 400 response saying why."""
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
        """``GET /api/next``: the participant's next trial."""
        pid = self.who(request)
        if pid is None:
            return _unknown_participant()
        self.last_seen[pid] = utc_now()
        return JSONResponse(self.trial_payload(pid))

    async def answer(self, request: Request) -> Response:
        """``POST /api/answer``: log one answer (append-only), then send the next trial."""
        pid = self.who(request)
        if pid is None:
            return _unknown_participant()
        body = await _json(request)
        if isinstance(body, Response):
            return body
        if body is None or not isinstance(body.get("id"), int):
            return JSONResponse({"error": "missing trial id"}, status_code=400)
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
            sess, t, block = study.trial(expected)
            stim = sess.stimuli[t]
            answer = self.check_answer(body, sess, stim)
            if isinstance(answer, Response):
                return answer
            blur = trial_blur(sess, t)
            shown = self.images(sess, stim, blur)  # logged: image always, images when several
            served = self.served_at.pop((pid, expected), None)
            rec = {
                "subject": pid,
                "task": sess.task.name,
                "modality": sess.modality,
                "condition": sess.cond.name,
                "session": sess.session,
                "run": sess.run,
                "trial": t,
                "seed": sess.seed,
                "paradigm": sess.task.paradigm,
                "stimulus": stim.value,
                "response": answer.pop("response"),
                "raw_response": str(body.get("response")),
                "valid": answer.pop("valid"),
                "range_low": sess.range[0],
                "range_high": sess.range[1],
                "blur_sigma": blur,
                "context_window": None,
                "stimulus_id": stim.key(),
                **{k: v for k, v in shown.items() if k == "image" or v is not None},
                "latency_s": round(time.monotonic() - served, 4) if served is not None else None,
                "rt_client_s": round(float(rt) / 1000, 4) if rt is not None else None,
                "block_position": block,
                "counterbalance": (study.order or {}).get("counterbalance", 0),
                "source": "human",
                "timestamp": utc_now(),
                **answer,  # a worded task's own columns (correct, gold, ...), as the runner logs
            }
            self.store.append(rec)
            self.progress[pid] = expected + 1
        return JSONResponse(self.trial_payload(pid))

    async def stimulus(self, request: Request) -> Response:
        """``GET /stimuli/{name}``: a stored stimulus image."""
        name = request.path_params["name"]
        if not STIM_RE.match(name):
            return JSONResponse({"error": "not found"}, status_code=404)
        path = self.folder / "stimuli" / name
        if not path.is_file():
            return JSONResponse({"error": "not found"}, status_code=404)
        return FileResponse(path, media_type="image/png")

    def _authorised(self, request: Request) -> bool:
        given = request.query_params.get("token", "").encode("utf-8", "surrogateescape")
        return hmac.compare_digest(given, self.token.encode())

    async def experimenter(self, request: Request) -> Response:
        """``GET /experimenter``: progress per participant (token required)."""
        if not self._authorised(request):
            return HTMLResponse("<h1>403</h1><p>experimenter token required</p>", status_code=403)
        rows = "".join(
            f"<tr><td>{html.escape(p)}</td><td>{self.progress.get(p, 0)} / {self.study.total}</td>"
            f"<td>{self.rows_of.get(p, 0)}</td>"
            f"<td>{'yes' if p in self.practiced else 'no'}</td><td>{html.escape(self.last_seen.get(p, ''))}</td>"
            f"<td>{self.completion_code(p) if self.progress.get(p, 0) >= self.study.total else ''}</td></tr>"
            for p in sorted(self.keys)
        )
        tok = html.escape(self.token)
        page = (
            f"<!doctype html><meta charset=utf-8><title>experimenter</title><link rel=stylesheet href=/assets/style.css>"
            f"<main><h1>Participants</h1><p>{len(self.keys)} joined · {len(self.store.done)} trials logged · "
            f"<a href='/experimenter/trials.csv?token={tok}'>download trials (CSV)</a></p>"
            f"<table><tr><th>participant</th><th>trials</th><th>order row</th><th>practice</th><th>last seen (UTC)</th><th>completion code</th></tr>"
            f"{rows}</table></main>"
        )
        return HTMLResponse(page)

    async def trials_csv(self, request: Request) -> Response:
        """``GET /experimenter/trials.csv``: the logged trials as CSV (token required)."""
        if not self._authorised(request):
            return JSONResponse({"error": "experimenter token required"}, status_code=403)
        buf = io.StringIO()
        pd.DataFrame(list(self.store.done.values())).to_csv(buf, index=False)
        return Response(
            buf.getvalue(),
            media_type="text/csv",
            headers={"content-disposition": "attachment; filename=trials.csv"},
        )

    def app(self) -> Starlette:
        """The Starlette application with every route, wrapped in :class:`SecurityHeaders`."""
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
        return SecurityHeaders(Starlette(routes=routes))


class SecurityHeaders:
    """ASGI wrapper: CSP, no framing, no sniffing, no referrer on every response."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        """Add the security headers to every HTTP response."""
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _gold_text(gold) -> str:
    """A correct answer as a person reads it (a list joined by commas)."""
    if isinstance(gold, (list, tuple)):
        return ", ".join(map(str, gold))
    return "" if gold is None else str(gold)


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
    except (ValueError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None
