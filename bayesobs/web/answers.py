"""The answer checks of ``bayesobs serve``: a typed number, a worded answer, a tap, a catch trial."""

from __future__ import annotations

import math
import re

from starlette.responses import JSONResponse, Response

from .study import CATCH_RANGE, CATCH_TAP_RADII, CATCH_WORDS, catch_value

MAX_DISPLAY_PX = 20000  # a displayed image size above this is not one
CATCH_INSTRUCTION = (
    "Attention check: this trial checks that you are reading the instructions. Please do exactly "
    "what it says."
)
WRAP_TEXT = ("maze_distance", "duration")  # prose may wrap; ASCII line stimuli must not
MAX_ANSWER = 32  # characters of a typed answer ("0.4275", "12,5" ...)
MAX_TEXT_ANSWER = 200  # characters of a typed worded answer (a label, a cell, a list of colours)
ASKS_RE = re.compile(r"\b(?:Type|Answer|Reply) (.*?)\.(?:\s+[A-Z]|\s*$)")  # a question's "Type ..."


def _refuse(error: str) -> JSONResponse:
    """A 400 JSON response with ``error``."""
    return JSONResponse({"error": error}, status_code=400)


def _finite(v) -> bool:
    """Whether ``v`` is a finite JSON number (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def parse_answer(text: str) -> float | None:
    """A plain number typed by a person (``0.42``, ``.42``, ``0,42``, ``12``); else None."""
    t = (text or "").strip().replace(",", ".")
    if len(t) > MAX_ANSWER:
        return None
    if not re.fullmatch(r"[-+]?(\d+(\.\d*)?|\.\d+)", t):
        return None
    v = float(t)
    return v if math.isfinite(v) else None


def check_tap(body: dict, area: tuple[int, int]) -> dict | Response:
    """A tap's image-pixel point and the displayed size, as log columns, or a 400 response."""
    vals = [body.get(k) for k in ("x", "y", "display_w", "display_h")]
    if not all(_finite(v) for v in vals):
        return _refuse("tap (or click) the picture to answer; positions are not typed")
    x, y, dw, dh = map(float, vals)
    if not (0 <= x <= area[0] and 0 <= y <= area[1]):
        return _refuse("the tap is outside the picture")
    if not (0 < dw <= MAX_DISPLAY_PX and 0 < dh <= MAX_DISPLAY_PX):
        return _refuse("display size out of range")
    return {
        "tap_x": round(x, 2),
        "tap_y": round(y, 2),
        "display_w": round(dw, 2),
        "display_h": round(dh, 2),
    }


def check_answer(body, task, stim) -> dict | Response:
    """The typed answer as the log's answer columns, or a 400 response saying why."""
    if body is None:
        return _refuse("send JSON")
    area = task.tap_area(stim)
    if area is not None:
        tap = check_tap(body, area)
        return tap if isinstance(tap, Response) else task.person_row(stim, body)
    if not task.worded():
        value = parse_answer(str(body.get("response", "")))
        if value is None:
            return _refuse("please enter a number")
        lo, hi = task.answer_range
        if not lo <= value <= hi:
            return _refuse(f"please enter a number between {lo:g} and {hi:g}")
        return {"response": value, "valid": True, "raw_response": str(body.get("response"))}
    text = str(body.get("response", "")).strip()
    if not text:
        return _refuse("please type an answer")
    if len(text) > MAX_TEXT_ANSWER:
        return _refuse(f"answers are at most {MAX_TEXT_ANSWER} characters")
    answer = task.person_row(stim, body)  # the jsPsych export's data are read the same way
    if answer.get("valid"):
        return answer
    asks = ASKS_RE.search(task.human_question(stim) or "")  # "Type yes or no."
    return _refuse(f"please type {asks.group(1)}" if asks else "please answer as the question asks")


def answer_kind(task, stim) -> dict:
    """How the page takes the answer: ``tap`` (with the image's size), ``text`` or ``number``."""
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
    lo, hi = task.answer_range or (None, None)
    kind = "text" if task.worded() else "number"
    return {"answer": kind, "unit": task.unit, "min": lo, "max": hi}


def catch_word(seed, k: int) -> str:
    """The word catch trial ``k`` of a worded task asks for."""
    return CATCH_WORDS[(int(seed) + k) % len(CATCH_WORDS)]


def check_catch(body: dict, task, seed, k: int, stim=None, shown=None) -> dict | Response:
    """Catch trial ``k``'s answer as log columns (``correct`` True/False), or a 400 response."""
    if stim is not None:
        tap = check_tap(body, task.tap_area(stim))
        if isinstance(tap, Response):
            return tap
        reply = f"({tap['tap_x']:g}, {tap['tap_y']:g})"
        row = task.record(stim, reply)
        correct = row["error_px"] <= CATCH_TAP_RADII * stim.params["target_radius"]
        return {
            **row,
            **tap,
            **shown,
            "stimulus": stim.value,
            "stimulus_id": stim.key(),
            "response": float(correct),
            "raw_response": reply,
            "valid": True,
            "correct": bool(correct),
        }
    if task.worded():
        text, word = str(body.get("response", "")).strip(), catch_word(seed, k)
        if not text or len(text) > MAX_TEXT_ANSWER:
            return _refuse(f"please type the word {word}")
        good = text.lower() == word
        row = {"stimulus": 0.0, "response": float(good), "raw_response": text, "valid": True}
        return {**row, "correct": good, "catch_word": word}
    value, tolerance = catch_value(seed, k, task.answer_range)
    lo, hi = task.answer_range or CATCH_RANGE
    typed = parse_answer(str(body.get("response", "")))
    if typed is None or not lo <= typed <= hi:
        return _refuse(f"please enter a number between {lo:g} and {hi:g}")
    return {
        "stimulus": value,
        "response": typed,
        "raw_response": str(body.get("response")),
        "valid": True,
        "correct": abs(typed - value) <= tolerance + 1e-9,
        "catch_tolerance": tolerance,
    }
