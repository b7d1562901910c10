"use strict";
// Participant flow: consent -> instructions -> practice -> trials -> thanks.
// Every answer goes to the server at once; reloading resumes at the next trial.
const $ = (id) => document.getElementById(id);
const NUMBER = /^\s*[-+]?(\d+([.,]\d*)?|[.,]\d+)\s*$/;
const MIN_FONT_PX = 7;  // below this a stimulus is not shown: the participant is asked for a larger screen
let mode = "practice";
let current = null;
let shownAt = 0;
let lastQuestion = null;  // the question of the task trial shown before
let tap = null;  // the tapped point {x, y} in image pixels, with the displayed size

// A point of an image's own pixels -> CSS pixels inside its .tapbox (for a ring drawn there).
function place(ring, img, x, y, diameter) {
  const sx = img.clientWidth / img.naturalWidth, sy = img.clientHeight / img.naturalHeight;
  ring.style.left = `${img.offsetLeft + img.clientLeft + x * sx}px`;
  ring.style.top = `${img.offsetTop + img.clientTop + y * sy}px`;
  if (diameter) { ring.style.width = `${diameter * sx}px`; ring.style.height = `${diameter * sy}px`; }
  ring.hidden = false;
}

// A tap or click on the stimulus: the point in the image's own pixels (scaled from the size it
// is shown at: naturalWidth / displayed width), sent with the displayed size.
function onTap(ev) {
  if (!current || current.answer !== "tap") return;
  const img = $("stim-img");
  if (!img.complete || !img.naturalWidth) return;  // not loaded yet: nothing to scale by
  const box = img.getBoundingClientRect();
  const w = img.clientWidth, h = img.clientHeight;
  const px = ev.clientX - box.left - img.clientLeft, py = ev.clientY - box.top - img.clientTop;
  const clamp = (v, hi) => Math.min(Math.max(v, 0), hi);
  const x = clamp(px * img.naturalWidth / w, img.naturalWidth);
  const y = clamp(py * img.naturalHeight / h, img.naturalHeight);
  tap = {x: Math.round(x * 10) / 10, y: Math.round(y * 10) / 10, display_w: w, display_h: h};
  place($("tap-mark"), img, tap.x, tap.y);
  $("submit").disabled = false;
  $("error").textContent = "";
}

function show(id) {
  for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== id;
}

async function api(path, body) {
  const opts = body === undefined ? {} : {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)};
  const r = await fetch(path, {credentials: "same-origin", ...opts});
  const data = await r.json().catch(() => ({error: "the server did not answer properly"}));
  return {ok: r.ok, status: r.status, data};
}

function render(t) {
  current = t;
  $("instruction").textContent = t.instruction;
  $("unit").textContent = t.unit ? `(${t.unit})` : "";
  const worded = t.answer === "text";  // a word, a cell or a list: read by the task's parser
  const tapped = t.answer === "tap";  // a position: tapped on the picture, never typed
  $("answer-label").textContent = worded ? "Your answer" : "Your estimate";
  $("response").setAttribute("inputmode", worded ? "text" : "decimal");
  $("response").hidden = $("response-label").hidden = tapped;
  $("tap-hint").hidden = !tapped;
  $("stim-img").classList.toggle("tap", tapped);
  $("tap-mark").hidden = true;
  tap = null;
  const pre = $("stim-text");
  pre.hidden = !t.text;
  pre.replaceChildren();
  if (t.text && !t.wrap) {  // one box per line, so the fit below can measure every line
    t.text.split("\n").forEach((line, i) => {
      if (i) pre.append("\n");
      const span = document.createElement("span");
      span.className = "line";
      span.textContent = line;
      pre.append(span);
    });
  } else pre.textContent = t.text || "";
  pre.classList.toggle("wrap", !!t.wrap);
  // a question wraps; the rendering above never does.  The same question as the trial before
  // (a long one repeats on every trial of a task) is folded away, so the answer box stays in view.
  const same = !!t.question && !t.catch && t.question === lastQuestion;
  $("question-box").hidden = !t.question;
  $("question-box").open = !same;
  $("question-note").textContent = same ? "The question (the same as before)" : "The question";
  $("question").textContent = t.question || "";
  if (t.question && !t.catch) lastQuestion = t.question;  // an attention check between: still the same
  const images = t.images || (t.image ? [t.image] : []);
  $("stim-img").hidden = images.length !== 1 || !!t.images;
  if (!$("stim-img").hidden) $("stim-img").src = images[0];
  $("stim-imgs").replaceChildren(...(t.images || []).map((src, i) => {
    const img = document.createElement("img");
    img.src = src;
    img.alt = `stimulus ${i + 1} of ${t.images.length}`;
    return img;
  }));
  if (mode === "trials") {
    $("progress").textContent = `Trial ${t.done + 1} of ${t.total}`;
    $("bar").max = t.total;
    $("bar").value = t.done;
  } else {
    $("progress").textContent = "Practice trial";
    $("bar").value = 0;
  }
  $("error").textContent = "";
  $("response").value = "";
  show("trial");
  fitText();
  if (tapped) $("submit").disabled = true;  // until the picture is tapped
  else $("response").focus();
  shownAt = performance.now();
}

// Scale the font of a line stimulus so its longest line fits the box: every line
// scales alike, so lengths keep their ratio; never cut, never squeezed in one direction.
// Too narrow even at MIN_FONT_PX: the stimulus is withheld and the participant told why.
function fitText() {
  const pre = $("stim-text");
  pre.style.fontSize = "";
  $("stim-box").hidden = false;  // measured in place
  const lines = [...pre.querySelectorAll(".line")];
  let ok = true;
  if (!pre.hidden && lines.length) {
    const cs = getComputedStyle(pre);
    const base = parseFloat(cs.fontSize);
    const avail = pre.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    const need = Math.max(...lines.map((l) => l.getBoundingClientRect().width));
    if (need > avail) {
      const px = Math.floor(base * avail / need * 10) / 10;
      ok = px >= MIN_FONT_PX;
      pre.style.fontSize = `${px}px`;
    }
  }
  $("stim-box").hidden = !ok;
  $("too-small").hidden = ok;
  $("response").disabled = !ok;
  $("submit").disabled = !ok || (current && current.answer === "tap" && !tap);
  return ok;
}

function finish(code) {
  $("code").textContent = code;
  show("thanks");
}

async function nextTrial() {
  const r = await api("/api/next");
  if (!r.ok) { $("error").textContent = r.data.error; return; }
  if (r.data.finished) return finish(r.data.code);
  if (mode !== "trials") lastQuestion = null;  // the study's first trial shows it in full
  mode = "trials";
  render(r.data);
}

async function submit(ev) {
  ev.preventDefault();
  const text = $("response").value;
  if (current.answer === "tap") {
    if (!tap) { $("error").textContent = "Please tap the picture"; return; }
  } else if (current.answer === "text") {
    if (!text.trim()) { $("error").textContent = "Please type an answer"; return; }
  } else {
    if (!NUMBER.test(text)) { $("error").textContent = "Please enter a number, e.g. 0.42"; return; }
    const value = parseFloat(text.replace(",", "."));
    if (value < current.min || value > current.max) {
      $("error").textContent = `Please enter a number between ${current.min} and ${current.max}`;
      return;
    }
  }
  $("submit").disabled = true;
  const rt = Math.round(performance.now() - shownAt);
  const answer = current.answer === "tap" ? {...tap} : {response: text};
  try {
    if (mode === "practice") {
      const r = await api("/api/practice", {...answer, rt_ms: rt});
      if (!r.ok) { $("error").textContent = r.data.error; return; }
      const said = current.answer === "tap" ? "Your tap is marked in red" : `You answered ${text}`;
      $("practice-feedback").textContent =
        `${said}; the correct answer was ${r.data.correct_answer}. In the study you will not be told the answers.`;
      show("practice-done");
      showMark(r.data.mark, tap);
      return;
    }
    const r = await api("/api/answer", {id: current.id, ...answer, rt_ms: rt});
    if (r.status === 409) return nextTrial();  // answered elsewhere (another tab): move on
    if (!r.ok) { $("error").textContent = r.data.error; return; }
    if (r.data.finished) return finish(r.data.code);
    render(r.data);
  } finally {
    // stays off while the screen is too narrow, and until a tap on a tapped task
    $("submit").disabled = $("response").disabled || (current.answer === "tap" && !tap);
  }
}

// After a tapped practice trial: the picture again, the target ringed in green, the tap in red.
function showMark(mark, you) {
  $("practice-box").hidden = !mark;
  if (!mark) return;
  const img = $("practice-img");
  const draw = () => {
    place($("practice-mark"), img, mark.x, mark.y, mark.r * 2.6);
    if (you) place($("practice-tap"), img, you.x, you.y);
  };
  img.onload = draw;
  img.src = current.image;
  if (img.complete && img.naturalWidth) draw();
}

async function startPractice() {
  mode = "practice";
  const r = await api("/api/practice");
  if (!r.ok) { $("error").textContent = r.data.error; return; }
  render(r.data);
}

async function agree() {
  const r = await api("/api/start", {consent: true, pid: $("pid").value.trim()});
  if (!r.ok) { $("consent-error").textContent = r.data.error; return; }
  $("task-instruction").textContent = r.data.task;
  $("how").textContent = r.data.how;
  if (r.data.practiced) return nextTrial();
  show("instructions");
}

async function boot() {
  window.addEventListener("resize", () => { if (current && !$("trial").hidden) fitText(); });
  api("/api/study").then((r) => {
    if (!r.ok) return;
    $("task-summary").textContent = r.data.task;
    $("n-trials").textContent = r.data.trials;
    $("duration").textContent = r.data.duration;
  });
  $("pid").value = new URLSearchParams(location.search).get("pid") || "";
  $("agree").addEventListener("click", agree);
  $("begin").addEventListener("click", startPractice);
  $("go").addEventListener("click", nextTrial);
  $("answer-form").addEventListener("submit", submit);
  $("stim-img").addEventListener("click", onTap);
  const r = await api("/api/next");
  if (r.status === 401) return show("consent");
  if (!r.ok) return show("consent");
  if (r.data.finished) return finish(r.data.code);
  // a returning participant: continue (practice first if it was never done)
  const s = await api("/api/start", {consent: true});
  if (s.ok && !s.data.practiced) {
    $("task-instruction").textContent = s.data.task;
    $("how").textContent = s.data.how;
    return show("instructions");
  }
  mode = "trials";
  render(r.data);
}

boot();
