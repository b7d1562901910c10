"""The routes of ``bayesobs serve``: the BayesBench tasks for human participants in a browser."""

from __future__ import annotations

import errno
import hmac
import html
import io
import logging
import math
import re
import secrets
import threading
import time
from contextlib import contextmanager
from pathlib import Path

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

from ..provenance import utc_now
from ..run.store import LogWriteError
from .answers import answer_kind, check_answer, check_catch
from .participants import Participants
from .security import (
    LOOPBACK_NAMES,
    JoinLimit,
    SecurityHeaders,
    listen,
    read_json,
    spreadsheet_safe,
    uvicorn_config,
)
from .study import minutes_text

LOG = logging.getLogger("bayesobs.web")
STATIC = Path(__file__).resolve().parent / "static"
PID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # never "..", never a path
MAX_RT_MS = 24 * 3600 * 1000  # a client response time above a day is not one
STIM_RE = re.compile(r"^[0-9a-f]{20}\.png$")


class ParticipantServer(Participants):
    """The routes of one experiment folder's study, over its participants' state."""

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
        super().__init__(
            spec_path, out, modalities, conditions, trials, ami, order, minutes, catch_every
        )
        self.hosts = {h.strip().lower().rstrip(".") for h in hosts or ()} | LOOPBACK_NAMES
        self.token = token or secrets.token_urlsafe(16)
        self.joins = JoinLimit()

    async def _about(self, request: Request) -> Response:
        """What the consent page states: number of trials and expected duration."""
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

    async def _index(self, request: Request) -> Response:
        """``GET /``: the participant page."""
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})

    async def _asset(self, request: Request) -> Response:
        """``GET /assets/{name}``: the page's script and style sheet (nothing else)."""
        name = request.path_params["name"]
        if name not in ("app.js", "style.css"):
            return _not_found()
        return FileResponse(STATIC / name)

    async def _start(self, request: Request) -> Response:
        """``POST /api/start``: consent given; sign the participant in and assign a counterbalancing row."""
        body = await read_json(request)
        if isinstance(body, Response):
            return body
        if body is None or body.get("consent") is not True:
            return JSONResponse({"error": "consent is required to take part"}, status_code=400)
        pid = body.get("pid") or ""
        pid = pid.strip() if isinstance(pid, str) else None
        current = self._who(request)
        async with self.lock:
            if pid is None or (pid and not PID_RE.match(pid)):
                return JSONResponse(
                    {"error": "participant id may use letters, digits, . _ - (max 64)"},
                    status_code=400,
                )
            pid = pid or current or "P" + secrets.token_hex(5)
            if pid in self.keys and current == pid:
                key = request.cookies["bo_key"]
            elif pid in self.keys and self.progress.get(pid, 0) == 0:
                key = self._rekey(pid)  # no answer yet (a lost reply): this browser takes the id
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
                pilot = self._authorised(request, cookie_only=True)  # the experimenter's browser
                key = self._join(pid, pilot=pilot)
            self.last_seen[pid] = utc_now()
        resp = JSONResponse(
            {
                "pid": pid,
                "done": self.progress.get(pid, 0),
                "total": self.study_of(pid).total,
                "practiced": pid in self.practiced,
                "task": self.task.person_text(),
                "how": self._how_to_answer(),
            }
        )
        for name, value in (("bo_pid", pid), ("bo_key", key)):
            resp.set_cookie(
                name, value, httponly=True, samesite="strict", max_age=60 * 60 * 24 * 30
            )
        return resp

    def _how_to_answer(self) -> str:
        """The instructions page's sentence on how an answer is given (and on catch trials)."""
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

    async def _practice(self, request: Request) -> Response:
        """``GET/POST /api/practice``: the practice trial, with feedback (never logged)."""
        pid = self._who(request)
        if pid is None:
            return _unknown_participant()
        sess = self.study_of(pid).sessions[0]  # the modality of the participant's first block
        stim = self.study.practice
        if request.method == "GET":
            return JSONResponse(
                {
                    "text": stim.text if sess.modality != "image" else None,  # never smudged
                    "question": sess.task.human_question(stim),
                    **self._image_urls(sess, stim, 0.0),
                    "instruction": sess.task.person_text(),
                    **answer_kind(sess.task, stim),
                }
            )
        body = await read_json(request)
        if isinstance(body, Response):
            return body
        answer = check_answer(body, sess.task, stim)
        if isinstance(answer, Response):
            return answer
        async with self.lock:
            self.last_seen[pid] = utc_now()
            self._practice_done(pid)
        feedback = {"ok": True, "correct_answer": sess.task.human_answer(stim)}
        if not sess.task.worded():
            feedback["true_value"] = stim.value
        if sess.task.tap_area(stim) is not None:  # the page rings the target on the image
            p = stim.params
            feedback["mark"] = {"x": p["x"][0], "y": p["y"][0], "r": p["target_radius"]}
        return JSONResponse(feedback)

    async def _next_trial(self, request: Request) -> Response:
        """``GET /api/next``: the participant's next trial."""
        pid = self._who(request)
        if pid is None:
            return _unknown_participant()
        self.last_seen[pid] = utc_now()
        async with self.lock:
            self._skip_unasked(pid)  # after a restart between an answer and its skips
        return JSONResponse(self._trial_payload(pid))

    async def _answer(self, request: Request) -> Response:
        """``POST /api/answer``: log one answer (append-only), then send the next trial."""
        pid = self._who(request)
        if pid is None:
            return _unknown_participant()
        body = await read_json(request)
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
            sess, t, _ = study.where(expected)
            if kind == "catch":
                seed = self.spec["seed"]
                answer = check_catch(body, self.task, seed, k, *self._catch_shown(sess, k))
                if isinstance(answer, Response):
                    return answer
                first = {"trial": -(k + 1), "catch": True, "catch_index": k}
                first.update(stimulus=answer.pop("stimulus"), blur_sigma=0.0)
                first.update(stimulus_id=answer.pop("stimulus_id", None))
            else:
                stim = self._asked(pid, sess, t)  # the question shown (see _trial_payload)
                answer = check_answer(body, sess.task, stim)
                if isinstance(answer, Response):
                    return answer
                first = self._trial_columns(sess, t, stim)
            self._log_answer(pid, first, answer, rt)  # a full disk raises: nothing counted
            self.last_seen[pid] = utc_now()
            self._skip_unasked(pid)  # a step left with nothing to start from: logged, not shown
        return JSONResponse(self._trial_payload(pid))

    async def _stimulus(self, request: Request) -> Response:
        """``GET /stimuli/{name}``: a stored stimulus image."""
        name = request.path_params["name"]
        if not STIM_RE.match(name):
            return _not_found()
        path = self.folder / "stimuli" / name
        if not path.is_file():
            return _not_found()
        return FileResponse(path, media_type="image/png")

    def _experimenter_cookie(self) -> str:
        """The experimenter cookie: an HMAC of the token under the server's secret (never the token)."""
        return hmac.new(
            self.secret.encode(), b"experimenter:" + self.token.encode(), "sha256"
        ).hexdigest()

    def _authorised(self, request: Request, cookie_only: bool = False) -> bool | Response:
        """True for the experimenter's cookie; a redirect setting it for a right ``?token=``."""
        # the printed link's token is used once: an HttpOnly, SameSite=Strict cookie (sent to the
        # participant pages too, so a pilot in that browser is known) replaces it, and the
        # redirect takes it out of the address bar and history
        if "token" in request.query_params and not cookie_only:
            given = request.query_params["token"].encode("utf-8", "surrogateescape")
            if not hmac.compare_digest(given, self.token.encode()):
                return False
            resp = RedirectResponse(request.url.path, status_code=303)
            resp.set_cookie(
                "bo_exp",
                self._experimenter_cookie(),
                httponly=True,
                samesite="strict",
                max_age=60 * 60 * 12,
            )
            return resp
        cookie = request.cookies.get("bo_exp", "").encode("utf-8", "surrogateescape")
        return hmac.compare_digest(cookie, self._experimenter_cookie().encode())

    async def _experimenter(self, request: Request) -> Response:
        """``GET /experimenter``: progress per participant (token or its cookie required)."""
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

    async def _trials_csv(self, request: Request) -> Response:
        """``GET /experimenter/trials.csv``: the logged trials as CSV (token or its cookie required)."""
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
        """The Starlette application with every route, wrapped in :class:`.security.SecurityHeaders`."""
        routes = [
            Route("/", self._index),
            Route("/assets/{name}", self._asset),
            Route("/api/study", self._about),
            Route("/api/start", self._start, methods=["POST"]),
            Route("/api/practice", self._practice, methods=["GET", "POST"]),
            Route("/api/next", self._next_trial),
            Route("/api/answer", self._answer, methods=["POST"]),
            Route("/stimuli/{name}", self._stimulus),
            Route("/experimenter", self._experimenter),
            Route("/experimenter/trials.csv", self._trials_csv),
        ]
        handlers = {OSError: _cannot_write, LogWriteError: _cannot_write}
        return SecurityHeaders(Starlette(routes=routes, exception_handlers=handlers), self.hosts)


async def _cannot_write(request: Request, exc: Exception) -> Response:
    """A log write that failed (a full disk): one log line and a JSON 503 the page may retry."""
    disk = getattr(exc, "errno", None) == errno.ENOSPC or "disk is full" in str(exc)
    what = "the disk is full" if disk else (getattr(exc, "strerror", None) or type(exc).__name__)
    LOG.error("cannot save: %s (%s %s)", what, request.method, request.url.path)
    msg = "the server cannot save answers right now" + (" (its disk is full)" if disk else "")
    return JSONResponse(
        {"error": msg + "; please try again in a moment", "retry": True},
        status_code=503,
        headers={"retry-after": "30"},
    )


def _unknown_participant() -> JSONResponse:
    """401: no signed-in participant."""
    return JSONResponse(
        {"error": "unknown participant: start from the consent page"}, status_code=401
    )


def _not_found() -> JSONResponse:
    """404 for a name this server does not serve."""
    return JSONResponse({"error": "not found"}, status_code=404)


@contextmanager
def running(server: ParticipantServer, host: str = "127.0.0.1"):
    """Serve ``server`` on a free port in a background thread; yields the base URL."""
    import uvicorn  # start-up time: the ASGI server loads only for serve

    sock = listen(host, 0)
    uv = uvicorn.Server(uvicorn_config(server.app(), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not uv.started and time.time() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
        sock.close()
