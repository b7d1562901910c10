"use strict";
// Participant flow: consent -> instructions -> practice -> trials -> thanks.
// Every answer goes to the server at once; reloading resumes at the next trial.
const $ = (id) => document.getElementById(id);
const NUMBER = /^\s*[-+]?(\d+([.,]\d*)?|[.,]\d+)\s*$/;
const MIN_FONT_PX = 7;  // below this a stimulus is not shown: the participant is asked for a larger screen
let mode = "practice";
let current = null;
let shownAt = 0;

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
  $("answer-label").textContent = worded ? "Your answer" : "Your estimate";
  $("response").setAttribute("inputmode", worded ? "text" : "decimal");
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
  $("question").hidden = !t.question;  // a question wraps; the rendering above never does
  $("question").textContent = t.question || "";
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
  $("response").focus();
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
  $("submit").disabled = !ok;
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
  mode = "trials";
  render(r.data);
}

async function submit(ev) {
  ev.preventDefault();
  const text = $("response").value;
  if (current.answer === "text") {
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
  try {
    if (mode === "practice") {
      const r = await api("/api/practice", {response: text, rt_ms: rt});
      if (!r.ok) { $("error").textContent = r.data.error; return; }
      const truth = r.data.correct_answer !== undefined
        ? `the correct answer was ${r.data.correct_answer}`
        : `the true value was ${Math.round(r.data.true_value * 1000) / 1000}`;
      $("practice-feedback").textContent = `You answered ${text}; ${truth}. In the study you will not be told the answers.`;
      show("practice-done");
      return;
    }
    const r = await api("/api/answer", {id: current.id, response: text, rt_ms: rt});
    if (r.status === 409) return nextTrial();  // answered elsewhere (another tab): move on
    if (!r.ok) { $("error").textContent = r.data.error; return; }
    if (r.data.finished) return finish(r.data.code);
    render(r.data);
  } finally {
    $("submit").disabled = $("response").disabled;  // stays off while the screen is too narrow
  }
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
  if (r.data.practiced) return nextTrial();
  show("instructions");
}

async function boot() {
  window.addEventListener("resize", () => { if (current && !$("trial").hidden) fitText(); });
  api("/api/study").then((r) => {
    if (!r.ok) return;
    $("n-trials").textContent = r.data.trials;
    $("minutes").textContent = r.data.minutes;
  });
  $("pid").value = new URLSearchParams(location.search).get("pid") || "";
  $("agree").addEventListener("click", agree);
  $("begin").addEventListener("click", startPractice);
  $("go").addEventListener("click", nextTrial);
  $("answer-form").addEventListener("submit", submit);
  const r = await api("/api/next");
  if (r.status === 401) return show("consent");
  if (!r.ok) return show("consent");
  if (r.data.finished) return finish(r.data.code);
  // a returning participant: continue (practice first if it was never done)
  const s = await api("/api/start", {consent: true});
  if (s.ok && !s.data.practiced) { $("task-instruction").textContent = s.data.task; return show("instructions"); }
  mode = "trials";
  render(r.data);
}

boot();
