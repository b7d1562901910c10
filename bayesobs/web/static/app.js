"use strict";
// Participant flow: consent -> instructions -> practice -> trials -> thanks.
// Every answer goes to the server at once; reloading resumes at the next trial.
const $ = (id) => document.getElementById(id);
const NUMBER = /^\s*[-+]?(\d+([.,]\d*)?|[.,]\d+)\s*$/;
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
  $("stim-text").hidden = !t.text;
  $("stim-text").textContent = t.text || "";
  $("stim-text").classList.toggle("wrap", !!t.wrap);
  $("stim-img").hidden = !t.image;
  if (t.image) $("stim-img").src = t.image;
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
  $("response").focus();
  shownAt = performance.now();
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
  if (!NUMBER.test(text)) { $("error").textContent = "Please enter a number, e.g. 0.42"; return; }
  const value = parseFloat(text.replace(",", "."));
  if (value < current.min || value > current.max) {
    $("error").textContent = `Please enter a number between ${current.min} and ${current.max}`;
    return;
  }
  $("submit").disabled = true;
  const rt = Math.round(performance.now() - shownAt);
  try {
    if (mode === "practice") {
      const r = await api("/api/practice", {response: text, rt_ms: rt});
      if (!r.ok) { $("error").textContent = r.data.error; return; }
      $("practice-feedback").textContent = `You answered ${text}; the true value was ${Math.round(r.data.true_value * 1000) / 1000}. In the study you will not be told the answers.`;
      show("practice-done");
      return;
    }
    const r = await api("/api/answer", {id: current.id, response: text, rt_ms: rt});
    if (r.status === 409) return nextTrial();  // answered elsewhere (another tab): move on
    if (!r.ok) { $("error").textContent = r.data.error; return; }
    if (r.data.finished) return finish(r.data.code);
    render(r.data);
  } finally {
    $("submit").disabled = false;
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
