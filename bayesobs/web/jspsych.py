"""Export a task as a self-contained jsPsych 8 experiment, and read its data back.

``bayesobs export jspsych SPEC --out DIR --platform P`` writes

```
DIR/package.json     jsPsych 8 and its plugins from the npm registry; `npm run build`
DIR/build.mjs        copies the libraries and the experiment into DIR/dist/
DIR/index.html       loads lib/ and experiment.js (and, on JATOS, JATOS's own jatos.js)
DIR/experiment.js    consent, instructions, one practice trial, every trial (progress
                     bar, optional breaks), the platform's saving call, a final page
                     with the completion code (optionally a Prolific redirect)
DIR/stimuli/*.png    the same images, by content hash, as `bayesobs run`
```

How the data are saved, per platform (``PLATFORMS``): ``jatos`` calls
``jatos.submitResultData`` then ``jatos.endStudy`` (or
``jatos.endStudyAndRedirect`` to Prolific) on the ``jatos`` object of the
``jatos.js`` that JATOS serves; ``pavlovia`` runs Pavlovia's jsPsych plugin
(``jsPsychPavlovia``, commands ``init`` and ``finish``; Pavlovia distributes
it as a file, not on the npm registry, so the build asks for it); ``prolific``
saves to the OSF through DataPipe (``@jspsych-contrib/plugin-pipe``) and sends
the participant back to Prolific; ``cognition`` leaves saving to Cognition.run,
which records jsPsych's data itself; ``local`` downloads the data file in the
participant's browser (for piloting).
A failed ``jatos`` or ``prolific`` save is retried, and the completion code
waits until one succeeded (the participant is asked to keep the page open and
press Try again).

Every trial's jsPsych data carries the trial-table fields
(``bayesobs_trial = true``, with ``block_position`` and ``counterbalance``),
so :func:`bayesobs.read_trials` imports the platform's JSON or CSV export
directly.
"""

from __future__ import annotations

import json
import math
import secrets
from pathlib import Path

from ..errors import BayesobsInputError
from ..provenance import provenance
from ..run.plan import load_spec
from ..run.presentation import (
    human_instruction,
    human_plan,
    practice_stimulus,
    stimulus_images,
    stimulus_text,
    trial_blur,
)
from ..run.store import save_png
from ..stimuli import TASKS
from .answers import ANSWER_RANGE, CATCH_INSTRUCTION, WRAP_TEXT
from .study import (
    block_order,
    catch_plan,
    catch_value,
    check_catch_every,
    check_minutes,
    check_order,
    estimate_minutes,
    latin_rows,
)

PLATFORMS = ("jatos", "pavlovia", "cognition", "prolific", "local")
PROLIFIC_RETURN = "https://app.prolific.com/submissions/complete?cc="
PAVLOVIA_PLUGIN = "jspsych-pavlovia.js"

JSPSYCH = {
    "jspsych": "^8.3.0",
    "@jspsych/plugin-survey-html-form": "^2.1.0",
    "@jspsych/plugin-html-button-response": "^2.1.0",
    "@jspsych/plugin-call-function": "^2.1.0",
}
DATAPIPE = {"@jspsych-contrib/plugin-pipe": "^0.5.0"}
LIBS = {  # dist/lib name: file in node_modules
    "jspsych.js": "jspsych/dist/index.browser.min.js",
    "jspsych.css": "jspsych/css/jspsych.css",
    "plugin-survey-html-form.js": "@jspsych/plugin-survey-html-form/dist/index.browser.min.js",
    "plugin-html-button-response.js": "@jspsych/plugin-html-button-response/dist/index.browser.min.js",
    "plugin-call-function.js": "@jspsych/plugin-call-function/dist/index.browser.min.js",
}
PIPE_LIB = {"plugin-pipe.js": "@jspsych-contrib/plugin-pipe/dist/index.browser.min.js"}

BUILD = """// Copy jsPsych and the experiment into dist/ (no bundler needed).
import {{ cpSync, existsSync, mkdirSync }} from "node:fs";
const lib = "dist/lib";
mkdirSync(lib, {{ recursive: true }});
const LIBS = {libs};
for (const [name, from] of Object.entries(LIBS)) cpSync(`node_modules/${{from}}`, `${{lib}}/${{name}}`);
if ({pavlovia}) {{
  if (!existsSync("{plugin}")) {{
    console.error("Pavlovia's jsPsych plugin is not on the npm registry: save Pavlovia's jspsych-pavlovia " +
      "plugin file for jsPsych 7+ (lib/vendors of Pavlovia's jsPsych demo) as {plugin} in this folder, then build again.");
    process.exit(1);
  }}
  cpSync("{plugin}", `${{lib}}/{plugin}`);
}}
for (const f of ["index.html", "experiment.js", "bayesobs_manifest.json"]) cpSync(f, `dist/${{f}}`);
cpSync("stimuli", "dist/stimuli", {{ recursive: true }});
console.log("built dist/");
"""

INDEX = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="lib/jspsych.css">
{scripts}
<style>
pre{{text-align:left;display:block;font-size:14px;white-space:pre;overflow:hidden;margin:.5em 0;padding:.5em;
    background:#fff;border:1px solid #ddd}} pre .line{{display:inline-block}} pre.wrap{{white-space:pre-wrap}}
img{{max-width:100%;height:auto}} .bo-stim{{width:min(760px,92vw);margin:0 auto}} .bo-code{{font:700 1.6rem monospace}}
.bo-small{{color:#b91c1c}}
</style>
</head>
<body><script src="experiment.js"></script></body>
</html>
"""

EXPERIMENT = r"""// Generated by bayesobs: __TASK__ for __PLATFORM__. Trial fields follow the bayesobs trial table.
"use strict";
const CONFIG = __CONFIG__;
const BLOCKS = __BLOCKS__;
const ORDERS = __ORDERS__;
const PRACTICE = __PRACTICE__;
const MIN_FONT_PX = 7;  // a line stimulus never shrinks below this: the participant is asked for a larger screen
const params = new URLSearchParams(location.search);

function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})[c]); }
function stimulusHtml(t) {
  let h = `<p>${esc(t.instruction)}</p><div class="bo-stim">`;
  if (t.text !== null) {
    const body = t.wrap ? esc(t.text) : t.text.split("\n").map((l) => `<span class="line">${esc(l)}</span>`).join("\n");
    h += `<pre class="${t.wrap ? "wrap" : ""}">${body}</pre>`;
    h += `<p class="bo-small" hidden>This screen is too narrow to show the stimulus without cutting or squeezing it. Please turn your phone sideways or use a larger screen.</p>`;
  }
  for (const [i, src] of (t.images || (t.image !== null ? [t.image] : [])).entries())
    h += `<img src="${esc(src)}" alt="stimulus${t.images ? " " + (i + 1) : ""}"><br>`;
  return h + "</div>";
}
// Scale a line stimulus's font so its longest line fits: every line scales alike (ratios kept),
// nothing is cut; below MIN_FONT_PX the stimulus is withheld and the answer disabled.
function fitText() {
  const pre = document.querySelector("#jspsych-content pre");
  if (!pre) return;
  const lines = [...pre.querySelectorAll(".line")];
  const small = document.querySelector(".bo-small");
  const button = document.querySelector("#jspsych-survey-html-form-next");
  pre.style.fontSize = "";
  pre.hidden = false;
  let ok = true;
  if (lines.length) {
    const cs = getComputedStyle(pre);
    const avail = pre.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    const need = Math.max(...lines.map((l) => l.getBoundingClientRect().width));
    if (need > avail) {
      const px = Math.floor(parseFloat(cs.fontSize) * avail / need * 10) / 10;
      ok = px >= MIN_FONT_PX;
      pre.style.fontSize = `${px}px`;
    }
  }
  pre.hidden = !ok;
  if (small) small.hidden = ok;
  if (button) button.disabled = !ok;
}
window.addEventListener("resize", fitText);

function participant() {
  const jatosId = typeof jatos !== "undefined" ? (jatos.urlQueryParameters || {}).PROLIFIC_PID || jatos.workerId : null;
  return params.get("PROLIFIC_PID") || params.get("pid") || (jatosId ? String(jatosId) : null) ||
    ("P" + Math.random().toString(16).slice(2, 12));
}
// Latin-square row: ?cb=K if given, else the platform's counter (JATOS's study-result id,
// DataPipe's condition), else a hash of the participant id (balanced only on average).
function orderRow(subject, counter) {
  const n = ORDERS.length;
  const given = parseInt(params.get("cb"), 10);
  if (Number.isInteger(given) && given >= 0) return given % n;
  if (typeof jatos !== "undefined" && jatos.studyResultId) return Number(jatos.studyResultId) % n;
  if (Number.isInteger(counter) && counter >= 0) return counter % n;
  let h = 0;
  for (const c of subject) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return h % n;
}

function build(jsPsych, subject, counter) {
  const row = orderRow(subject, counter);
  const order = ORDERS[row];
  jsPsych.data.addProperties({subject, counterbalance: row, platform: CONFIG.platform});
  const trials = [];
  order.blocks.forEach((b, position) => BLOCKS[b].forEach((t) => trials.push({...t, data: {...t.data, block_position: position}})));
  let answered = 0;
  const answers = trials.length + CONFIG.catch.length;  // the catch trials count as answers
  // catch trial k, after trial t: a number to type as stated, logged in t's block with catch = true
  function catchTrial(c, k, t) {
    return {instruction: `${CONFIG.catch_instruction} ${c.question}`, unit: "", min: t.min, max: t.max,
            wrap: false, text: null, image: null,
            data: {...t.data, trial: -(k + 1), catch: true, catch_index: k, stimulus: c.value,
                   blur_sigma: 0, stimulus_id: null, catch_tolerance: c.tolerance}};
  }
  function question(t, counted) {
    return {
      type: jsPsychSurveyHtmlForm,
      preamble: stimulusHtml(t),
      html: `<p><label>Your estimate ${t.unit ? "(" + esc(t.unit) + ")" : ""}
             <input name="response" type="number" step="any" min="${t.min}" max="${t.max}" required autofocus></label></p>`,
      button_label: "Continue",
      data: t.data,
      on_load: fitText,
      on_finish: (d) => {
        d.response_value = parseFloat(d.response.response);
        if (d.catch) d.correct = Math.abs(d.response_value - d.stimulus) <= d.catch_tolerance + 1e-9;
        if (counted) jsPsych.progressBar.progress = ++answered / answers;
      },
    };
  }
  const button = (stimulus, label) => ({type: jsPsychHtmlButtonResponse, stimulus, choices: [label]});
  const timeline = [];
  if (CONFIG.platform === "pavlovia") timeline.push({type: jsPsychPavlovia, command: "init"});
  const minutes = `about ${CONFIG.minutes} minute${CONFIG.minutes === 1 ? "" : "s"}`;
  timeline.push(button(`<p>In this study you will ${esc(CONFIG.task_summary)}: ${answers} answers, ${minutes} in all. ` +
    "Your answers are stored with a participant code, not your name. You may stop at any time by closing this page.</p>", "I agree"));
  const checks = CONFIG.catch.length ? " Now and then an attention check asks you to type a given number: please type exactly that number." : "";
  timeline.push(button(`<p>${esc(PRACTICE.instruction)}</p><p>Type your answer as a number and press Continue.${checks}</p>`, "Start the practice trial"));
  timeline.push(question(PRACTICE, false));
  timeline.push(button("<p>That was the practice trial.</p>", "Start the study"));
  trials.forEach((t, i) => {
    timeline.push(question(t, true));
    if (CONFIG.catch_every && (i + 1) % CONFIG.catch_every === 0 && i + 1 < trials.length) {
      const k = (i + 1) / CONFIG.catch_every - 1;
      timeline.push(question(catchTrial(CONFIG.catch[k], k, t), true));
    }
    if (CONFIG.break_every && (i + 1) % CONFIG.break_every === 0 && i + 1 < trials.length)
      timeline.push(button(`<p>Time for a short break: ${i + 1} of ${trials.length} answers done.</p><p>Continue when you are ready.</p>`, "Continue"));
  });
  const json = () => jsPsych.data.get().json();
  const file = `${subject}_${Date.now()}.json`;  // one name: a retry replaces, never adds
  if (CONFIG.platform === "jatos") {
    saving(timeline, () => jatos.submitResultData(json()));
  } else if (CONFIG.platform === "pavlovia") {
    timeline.push({type: jsPsychPavlovia, command: "finish", participantId: subject});
  } else if (CONFIG.platform === "prolific") {  // DataPipe answers {error} or returns a fetch's Error
    saving(timeline, () => jsPsychPipe.saveData(CONFIG.datapipe_id, file, json()).then((r) => {
      if (!r || r instanceof Error || r.error) throw new Error((r && (r.error || r.message)) || "no answer");
    }));
  } else if (CONFIG.platform === "local") {
    timeline.push({type: jsPsychCallFunction, func: () => jsPsych.data.get().localSave("json", `bayesobs_${subject}.json`)});
  }
  const back = CONFIG.prolific_code ? CONFIG.prolific_return + encodeURIComponent(CONFIG.prolific_code) : null;
  const end = `<h2>Thank you!</h2><p>You have finished. Your completion code is</p><p class="bo-code" id="bo-code">${esc(CONFIG.completion_code)}</p>`;
  if (back || CONFIG.platform === "jatos") {
    timeline.push({type: jsPsychHtmlButtonResponse, stimulus: end, choices: [back ? "Return to Prolific" : "Finish"],
      on_finish: () => {
        if (CONFIG.platform === "jatos") return back ? jatos.endStudyAndRedirect(back) : jatos.endStudy();
        location.href = back;
      }});
  } else {  // the last page stays: the code remains on screen
    timeline.push({type: jsPsychHtmlButtonResponse, stimulus: end, choices: []});
  }
  return timeline;
}

// The save at the end: tried SAVE_TRIES times, then a page that says the answers are not saved
// and asks the participant to keep the page open and try again; the completion code (and the
// redirect) come only after a save succeeded.
const SAVE_TRIES = 3;
function saving(timeline, save) {
  let saved = false, error = "";
  const attempt = {type: jsPsychCallFunction, async: true, func: (done) => {
    const once = (left) => Promise.resolve().then(save).then(() => { saved = true; done({saved: true}); }, (e) => {
      error = String((e && e.message) || e || "no answer");
      if (left > 1) setTimeout(() => once(left - 1), 1000 * (SAVE_TRIES - left + 1));
      else done({saved: false, save_error: error});
    });
    once(SAVE_TRIES);
  }};
  const failed = {type: jsPsychHtmlButtonResponse, choices: ["Try again"],
    stimulus: () => `<p id="bo-unsaved"><b>Your answers are not saved yet</b> (${esc(error)}).</p>` +
      "<p>Please keep this page open, check your internet connection and press Try again. " +
      "Your completion code appears here once your answers are saved. If this keeps failing, " +
      "contact the researcher through the platform and do not close this page.</p>"};
  timeline.push({timeline: [attempt, {timeline: [failed], conditional_function: () => !saved}],
                 loop_function: () => !saved});
}

function start(counter) {
  const jsPsych = initJsPsych({show_progress_bar: true, auto_update_progress_bar: false,
                               message_progress_bar: "Progress"});
  window.jsPsych = jsPsych;
  jsPsych.run(build(jsPsych, participant(), counter));
}
if (CONFIG.platform === "prolific" && ORDERS.length > 1 && !params.has("cb")) {
  // DataPipe hands out conditions in turn (set its number of conditions to ORDERS.length)
  jsPsychPipe.getCondition(CONFIG.datapipe_id).then((c) => start(Number(c)), () => start(null));
} else if (CONFIG.platform === "jatos") {
  jatos.onLoad(() => start(null));
} else {
  start(null);
}
"""


def dependent_sessions(sessions) -> list[str]:
    """Names of the sessions with a trial asked from the answer before it (``Task.follows``).

    Such a trial (a decomposed scavenger hunt's later steps) is built on the
    server from the participant's logged answer (``Task.follow_up``); the
    static export has no server, so it refuses them (docs/tunnel.md).

    Parameters
    ----------
    sessions : list of Session
        The planned session runs.

    Returns
    -------
    list of str
        The session types (``Session.session``) with such a trial, each once,
        in plan order.
    """
    out: list[str] = []
    for sess in sessions:
        if sess.session not in out and any(sess.task.follows(s) for s in sess.stimuli):
            out.append(sess.session)
    return out


def export_jspsych(
    spec_path,
    out,
    modalities=None,
    conditions=None,
    trials=None,
    ami=None,
    platform: str = "local",
    order: str = "counterbalanced",
    break_every: int | None = None,
    completion_code: str | None = None,
    prolific_code: str | None = None,
    datapipe_id: str | None = None,
    minutes: float | None = None,
    catch_every: int | None = None,
) -> Path:
    """Write the experiment folder for ``platform``; returns it.

    Parameters
    ----------
    spec_path : str or Path
        The task spec (TOML).
    out : str or Path
        The folder to write (created if needed).
    modalities, conditions : list of str, optional
        Override the spec's modalities and conditions.
    trials : int, optional
        Override the spec's trials per session.
    ami : str, optional
        The AMI annotations folder (the duration task).
    platform : {"jatos", "pavlovia", "cognition", "prolific", "local"}
        Where ``dist/`` is hosted, which decides how the data are saved (see the module doc).
    order : {"counterbalanced", "fixed"}
        Block order: a Latin square over modalities and session types (row from ``?cb=K``,
        JATOS's study-result counter or a hash of the participant id), or the spec's order.
    break_every : int, optional
        A break page after every ``break_every`` trials.
    completion_code : str, optional
        Shown on the final page (default: ``prolific_code``, else a random code, kept in
        ``bayesobs_manifest.json``).
    prolific_code : str, optional
        Prolific completion code: the final page sends the participant back to Prolific.
    datapipe_id : str, optional
        DataPipe experiment id (``platform="prolific"``: where the data are saved).
    minutes : float, optional
        Duration stated on the consent page (default: estimated from the number of trials).
    catch_every : int, optional
        An attention-check trial after every ``catch_every`` trials (never after the last):
        "please type X", X drawn by :func:`.study.catch_value`; its jsPsych data carry
        ``catch = true``, ``stimulus = X`` and ``correct`` (within ``catch_tolerance``).

    Returns
    -------
    Path
        ``out``, holding ``package.json``, ``build.mjs``, ``index.html``,
        ``experiment.js``, ``bayesobs_manifest.json`` and ``stimuli/``.

    Raises
    ------
    BayesobsInputError
        For an unknown platform or order, a bad ``minutes``, ``catch_every``
        or ``break_every``, ``prolific`` without ``datapipe_id``, a completion
        code with other characters than letters, digits, ``-`` and ``_``, a
        task with worded answers, or a task whose trials follow the
        participant's previous answer.
    """
    if platform not in PLATFORMS:
        raise BayesobsInputError(
            f"--platform must be one of {', '.join(PLATFORMS)}, not {platform!r}"
        )
    check_order(order)
    check_minutes(minutes)
    check_catch_every(catch_every)
    if break_every is not None and break_every < 1:
        raise BayesobsInputError(f"--break-every must be at least 1, not {break_every}")
    if platform == "prolific" and not datapipe_id:
        raise BayesobsInputError(
            "--platform prolific saves the data through DataPipe: give --datapipe EXPERIMENT_ID "
            "(or host on JATOS/Pavlovia and add --prolific-code for the redirect)"
        )
    for name, code in (("--completion-code", completion_code), ("--prolific-code", prolific_code)):
        if code is not None and not (
            code.isascii() and code.replace("-", "").replace("_", "").isalnum()
        ):
            raise BayesobsInputError(f"{name} takes letters, digits, - and _, not {code!r}")
    spec = load_spec(spec_path)
    if TASKS[spec["task"]].worded():
        raise BayesobsInputError(
            f"task {spec['task']} takes worded answers (cells, words, lists); the jsPsych export "
            "takes numbers only: run it with `bayesobs serve`, which reads such answers with "
            "the task's own parser"
        )
    sessions = human_plan(spec, modalities, conditions, trials, ami)
    if dependent := dependent_sessions(sessions):
        raise BayesobsInputError(
            f"task {spec['task']} asks trials of session(s) {', '.join(dependent)} from the "
            "participant's own previous answer, which this static export cannot build in the "
            "browser: run it with `bayesobs serve`, which asks them as the runner does"
        )
    code = completion_code or prolific_code or secrets.token_hex(4).upper()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stimuli").mkdir(exist_ok=True)  # the build copies it, even when no image is shown
    n_trials = sum(len(s.stimuli) for s in sessions)
    task = sessions[0].task
    checks = []
    for kind, k in catch_plan(n_trials, catch_every):
        if kind == "catch":
            value, tolerance = catch_value(spec["seed"], k, ANSWER_RANGE[task.name])
            question = f"Please type {value:g} as your answer to this one (it is not an estimate)."
            checks.append({"value": value, "tolerance": tolerance, "question": question})
    stated = minutes is not None
    answers = n_trials + len(checks)
    minutes = math.ceil(minutes) if stated else estimate_minutes(answers, task.seconds_per_answer)
    record = provenance(
        command="export jspsych",
        spec=spec,
        modalities=modalities,
        conditions=conditions,
        trials=trials,
        platform=platform,
        order=order,
        break_every=break_every,
        completion_code=code,
        prolific_code=prolific_code,
        datapipe_id=datapipe_id,
        minutes=minutes,
        minutes_stated=stated,
        **({"catch_every": catch_every} if catch_every else {}),
    )

    def image(sess, stim, blur):
        shown = stimulus_images(sess, stim, blur)  # callers ask only where images are shown
        return save_png(out, shown[0])

    lo, hi = ANSWER_RANGE[task.name]
    blocks = []
    for sess in sessions:
        items = []
        for t, stim in enumerate(sess.stimuli):
            blur = trial_blur(sess, t)
            items.append(
                {
                    "instruction": human_instruction(sess, t),
                    "unit": task.unit,
                    "min": lo,
                    "max": hi,
                    "wrap": task.name in WRAP_TEXT,
                    "text": stimulus_text(sess, stim, t),
                    "image": image(sess, stim, blur)
                    if sess.modality in ("image", "multimodal")
                    else None,
                    "data": {
                        "bayesobs_trial": True,
                        "paradigm": task.paradigm,
                        "task": task.name,
                        "modality": sess.modality,
                        "condition": sess.cond.name,
                        "session": sess.session,
                        "run": sess.run,
                        "trial": t,
                        "stimulus": stim.value,
                        "range_low": sess.range[0],
                        "range_high": sess.range[1],
                        "blur_sigma": blur,
                        "stimulus_id": stim.key(),
                    },
                }
            )
        blocks.append(items)
    index = {id(s): i for i, s in enumerate(sessions)}
    orders = []
    for row in range(latin_rows(sessions) if order == "counterbalanced" else 1):
        ordered, rec = block_order(sessions, row)
        orders.append({**rec, "blocks": [index[id(s)] for s in ordered]})
    record["orders"] = orders
    (out / "bayesobs_manifest.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    first = sessions[0]
    pstim = practice_stimulus(spec, first)
    practice = {
        "instruction": task.person_text(),
        "unit": task.unit,
        "min": lo,
        "max": hi,
        "wrap": task.name in WRAP_TEXT,
        "text": pstim.text if first.modality != "image" else None,
        "image": image(first, pstim, 0.0) if first.modality != "text" else None,
        "data": {"bayesobs_practice": True},
    }
    deps = {**JSPSYCH, **(DATAPIPE if platform == "prolific" else {})}
    libs = {**LIBS, **(PIPE_LIB if platform == "prolific" else {})}
    pkg = {
        "name": f"bayesobs-{task.name.replace('_', '-')}",
        "private": True,
        "version": "1.0.0",
        "description": f"bayesobs {task.name} experiment for jsPsych 8 on {platform}",
        "scripts": {"build": "node build.mjs"},
        "dependencies": deps,
    }
    (out / "package.json").write_text(json.dumps(pkg, indent=2) + "\n")
    (out / "build.mjs").write_text(
        BUILD.format(
            libs=json.dumps(libs, indent=2),
            pavlovia=json.dumps(platform == "pavlovia"),
            plugin=PAVLOVIA_PLUGIN,
        )
    )
    scripts = [f"lib/{n}" for n in libs if n.endswith(".js")]
    if platform == "pavlovia":
        scripts.append(f"lib/{PAVLOVIA_PLUGIN}")
    if platform == "jatos":
        scripts.insert(0, "jatos.js")  # served by JATOS itself, beside the study's files
    (out / "index.html").write_text(
        INDEX.format(
            title=f"{task.name} estimation",
            scripts="\n".join(f'<script src="{s}"></script>' for s in scripts),
        )
    )
    config = {
        "platform": platform,
        "order": order,
        "minutes": minutes,
        "break_every": break_every,
        "completion_code": code,
        "prolific_code": prolific_code,
        "prolific_return": PROLIFIC_RETURN,
        "datapipe_id": datapipe_id,
        "task_summary": task.person_task,
        "catch_every": catch_every,
        "catch": checks,
        "catch_instruction": CATCH_INSTRUCTION,
    }
    js = EXPERIMENT
    for key, value in (
        ("__TASK__", task.name),
        ("__PLATFORM__", platform),
        ("__CONFIG__", json.dumps(config)),
        ("__BLOCKS__", json.dumps(blocks, indent=1)),
        ("__ORDERS__", json.dumps(orders)),
        ("__PRACTICE__", json.dumps(practice)),
    ):
        js = js.replace(key, value)
    (out / "experiment.js").write_text(js)
    return out
