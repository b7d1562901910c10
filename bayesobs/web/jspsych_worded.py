"""The worded tasks in the jsPsych export: words, lists, cells and points tapped, as ``serve`` asks them.

A trial carries the stimulus asked (``bayesobs_stimulus``): the reader
(:mod:`bayesobs.worded`) reads the answer with the task's own parser, as
``serve`` does.  A step asked from the answer before it (the decomposed hunt)
carries its question for every answer the step before may take (the task's
``answer_choices``); the page asks the one the participant's answer picks.
"""

from __future__ import annotations

from dataclasses import asdict

from ..errors import BayesobsInputError
from ..stimuli.base import choice_key
from .answers import ASKS_RE, MAX_TEXT_ANSWER, answer_kind, catch_word
from .study import CATCH_TAP_RADII, tap_catch

WORDED_JS = r"""
// Worded answers (a word, a list, a cell or a point tapped on the picture), as `serve` asks them.
let boLast = null;  // the last worded answer (as matched against choices): a dependent step starts there
function boMerge(a, d) {  // a with d's entries, nested objects entry by entry
  const o = {...a}, obj = (v) => v && typeof v === "object" && !Array.isArray(v);
  for (const [k, v] of Object.entries(d)) o[k] = obj(v) && obj(a[k]) ? boMerge(a[k], v) : v;
  return o;
}
function boKey(s) { return String(s).replace(/[{}]/g, " ").toLowerCase().split(/\s+/).filter(Boolean).join(" "); }
function worded(t, progress) {
  let asked = t;  // the question asked: t, or (a dependent step) the one the previous answer picks
  const tapped = t.answer === "tap";
  return {
    type: jsPsychSurveyHtmlForm,
    preamble: () => {
      const f = t.follow && t.follow[boLast];  // what differs from the planned step
      asked = f ? boMerge(t, f) : t;
      return stimulusHtml(asked) + (asked.question ? `<p class="bo-question">${esc(asked.question)}</p>` : "");
    },
    html: tapped ? '<p id="bo-tap-hint">Tap (or click) the picture where your answer is; tap again to move it.</p>' +
      ["x", "y", "display_w", "display_h"].map((n) => `<input name="${n}" required style="display:none">`).join("")
      : `<p><label>Your answer <input name="response" type="text" maxlength="${t.maxlength}" ` +
        'required autofocus autocomplete="off"></label></p>',
    button_label: "Submit",  // as the tasks' instructions for people say
    data: t.data,
    on_load: () => { fitText(); tapped ? boTap() : boCheck(asked); },
    on_finish: (d) => {
      Object.assign(d, asked.data);
      const text = (d.response || {}).response;
      if (d.catch) {  // a word typed as asked (a tapped check is read with its display)
        if (asked.word) d.correct = String(text).trim().toLowerCase() === asked.word;
      } else if (!tapped && !d.bayesobs_practice) boLast = boKey(text);
      progress();
    },
  };
}
// A typed answer outside the trial's few choices is refused in the page, as `serve` refuses it.
function boCheck(t) {
  const input = document.querySelector("#jspsych-content input[name=response]");
  const check = () => input.setCustomValidity(
    !t.choices || !input.value.trim() || t.choices.includes(boKey(input.value)) ? "" : t.hint);
  input.addEventListener("input", check);
}
// A tap: the point in the image's own pixels (scaled from the size it is shown at), with that size.
function boTap() {
  const img = document.querySelector("#jspsych-content .bo-stim img");
  const button = document.querySelector("#jspsych-survey-html-form-next");
  const ring = document.createElement("div");
  ring.id = "bo-tap";
  ring.hidden = true;
  ring.style.cssText = "position:absolute;width:18px;height:18px;margin:-12px 0 0 -12px;" +
    "border:3px solid #dc2626;border-radius:50%;pointer-events:none";
  img.parentElement.style.position = "relative";
  img.parentElement.append(ring);
  img.style.cursor = "crosshair";
  button.disabled = true;
  img.addEventListener("click", (ev) => {
    if (!img.complete || !img.naturalWidth) return;
    const box = img.getBoundingClientRect(), w = img.clientWidth, h = img.clientHeight;
    const clamp = (v, hi) => Math.min(Math.max(v, 0), hi);
    const x = clamp((ev.clientX - box.left - img.clientLeft) * img.naturalWidth / w, img.naturalWidth);
    const y = clamp((ev.clientY - box.top - img.clientTop) * img.naturalHeight / h, img.naturalHeight);
    const set = {x: Math.round(x * 10) / 10, y: Math.round(y * 10) / 10, display_w: w, display_h: h};
    for (const [n, v] of Object.entries(set)) document.querySelector(`#jspsych-content input[name=${n}]`).value = v;
    ring.style.left = `${img.offsetLeft + img.clientLeft + set.x * w / img.naturalWidth}px`;
    ring.style.top = `${img.offsetTop + img.clientTop + set.y * h / img.naturalHeight}px`;
    ring.hidden = false;
    button.disabled = false;
  });
}
"""


def asked(task, stim) -> dict:
    """What a trial shows and logs for ``stim``: question, choices, the stimulus asked."""
    choices = task.answer_choices(stim)
    asks = ASKS_RE.search(task.human_question(stim) or "")
    return {
        "question": task.human_question(stim),
        "choices": [choice_key(c) for c in choices] if choices is not None else None,
        "hint": f"Please type {asks.group(1)}." if asks else "Please answer as the question asks.",
        "data": {"stimulus_id": stim.key(), "bayesobs_stimulus": asdict(stim)},
    }


def worded_fields(task, stim, previous=None) -> dict:
    """A worded trial's fields (``previous``: the planned step before a dependent one)."""
    out = {**answer_kind(task, stim), **asked(task, stim), "maxlength": MAX_TEXT_ANSWER}
    if previous is not None:  # each answer the step before may take picks this step's question
        choices = task.answer_choices(previous)
        if choices is None:
            raise BayesobsInputError(
                f"task {task.name} asks a step from the participant's previous answer, which "
                "may be any text: the export cannot build it; run it with `bayesobs serve`"
            )
        follow = {}
        for c in choices:
            step = task.follow_up(stim, previous, task.person_row(previous, {"response": c}))
            follow[choice_key(c)] = changed(asked(task, step), out)
        out["follow"] = follow
    return out


def changed(new: dict, old: dict) -> dict:
    """The entries of ``new`` that differ from ``old``, nested dicts entry by entry."""
    # worded.js's boMerge puts them back; it cannot take an entry out: a follow-up keeps them
    out = {}
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(old.get(k), dict):
            if set(old[k]) - set(v):
                raise ValueError(f"a follow-up leaves out {sorted(set(old[k]) - set(v))} of {k}")
            v = changed(v, old[k])
            if v:
                out[k] = v
        elif k not in old or v != old[k]:
            out[k] = v
    return out


def worded_catch(task, tapped: bool, seed, k: int, images) -> dict:
    """Attention check ``k`` as ``serve`` asks it: the one item of a display to tap, else a word.

    ``images(stim)`` stores a check's display; a tap within ``catch_radius_px`` of the item is right.
    """
    if tapped:
        stim = tap_catch(task, seed, k)
        return {
            "question": "There is only one item in this picture. Tap it.",
            **images(stim),
            "data": {
                "stimulus": stim.value,
                "stimulus_id": stim.key(),
                "bayesobs_stimulus": asdict(stim),
                "catch_radius_px": CATCH_TAP_RADII * stim.params["target_radius"],
            },
        }
    word = catch_word(seed, k)
    return {"word": word, "question": f"Please type the word {word} as your answer to this one."}
