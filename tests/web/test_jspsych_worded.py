"""The worded tasks in the jsPsych export (issue 52): asked as ``serve`` asks them, read as it reads them.

Fast tests check each paradigm's exported trial list and read back the data the page
writes (a trial's ``data`` with the form's answer, built here as the page builds it) against
the rows ``serve`` logs for the same answers.  The Chromium tests (slow) answer the built
bundle in a browser, one at phone width.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pandas as pd
import pytest
from conftest import chromium_browser

import bayesobs
from bayesobs.cli import main
from bayesobs.stimuli import TASKS
from bayesobs.stimuli.base import Stimulus, choice_key
from bayesobs.tunnel.subject import grid_from_text
from bayesobs.web import ParticipantServer, running

ROOT = Path(__file__).resolve().parents[2]
NPM = shutil.which("npm")
HUNT = """\
task = "scavenger_hunt"
seed = 23
trials = 2
modalities = ["text"]
conditions = ["base"]

[[sessions]]
name = "decomposed"
range = [2, 4]
variant = "decomposed"

[ablations]
context = 0
"""
PERCEPT_V = """\
task = "percept_v"
seed = 4005
trials = 4
modalities = ["image"]
conditions = ["base"]

[[sessions]]
name = "counting_circles"
range = [1, 4]
variant = "counting_circles"
stratified = true

[[sessions]]
name = "change_colour"
range = [1, 4]
variant = "change_colour"
stratified = true
"""
# a paradigm each: search (taps: cells and points), Tunnel Vision (words; two images), Percept-V
SPECS = {
    "two_among_five": ["--trials", "1"],
    "object_reid": ["--trials", "1"],
    "circuits": ["--trials", "2"],
    "percept_v_small": ["--trials", "4"],
}
# the columns a worded trial's answer gives (``Task.record``), compared with serve's rows
ANSWER_COLUMNS = ("response", "valid", "correct", "raw_response", "stimulus_id", "gold")


def _blocks(out: Path) -> list[list[dict]]:
    js = (out / "experiment.js").read_text()
    return json.loads(re.search(r"const BLOCKS = (\[.*?\n\]);", js, re.S).group(1))


def _export(spec: Path, out: Path, *args: str) -> list[list[dict]]:
    argv = ["export", "jspsych", str(spec), "--out", str(out), "--order", "fixed", *args]
    assert main(argv) == 0
    return _blocks(out)


def _answer(task, stim: Stimulus, others=(), wrong: bool = False) -> dict:
    """What a person sends: a tap on (or beside) the target, else the right answer (or another
    trial's right answer of the same format that is wrong here: readable, scored wrong)."""
    p = stim.params
    if task.tap_area(stim) is not None:
        x = p["x"][0] + (150 if wrong and p["x"][0] < 200 else -150 if wrong else 0)
        return {"x": x, "y": p["y"][0], "display_w": 345, "display_h": 345}
    right = task.human_answer(stim)
    if wrong:
        same = [task.human_answer(o) for o in others if o.params["format"] == p["format"]]
        choices = list(task.answer_choices(stim) or ()) + same
        other = [c for c in choices if choice_key(c) != choice_key(right)]
        return {"response": other[0] if other else right}
    return {"response": right}


def _merged(a: dict, d: dict) -> dict:
    """``a`` with ``d``'s entries, nested dicts entry by entry (worded.js's boMerge)."""
    out = dict(a)
    for k, v in d.items():
        both = isinstance(v, dict) and isinstance(a.get(k), dict)
        out[k] = _merged(a[k], v) if both else v
    return out


def _page_rows(blocks, answers, pid="p1") -> list[dict]:
    """The data rows the page writes: each trial's data, the asked step's, the form's answer."""
    rows, last = [], None
    for t, said in zip([t for b in blocks for t in b], answers, strict=False):
        data = dict(t["data"])
        if t.get("follow"):  # the step the previous answer picks (worded.js: preamble, boMerge)
            data = _merged(data, t["follow"][last]["data"])
        if "response" in said:
            last = choice_key(said["response"])
        form = {k: str(v) for k, v in said.items()}  # a form's fields are text
        rows.append({**data, "trial_type": "survey-html-form", "response": form, "rt": 900})
        rows[-1]["subject"] = pid
    return rows


def _values(col: pd.Series) -> list:
    """A column's values, a missing one as None (NaN is never equal to itself)."""
    return [None if pd.isna(v) else v for v in col.astype(object)]


def _served(spec: Path, folder: Path, answers, args: dict) -> pd.DataFrame:
    server = ParticipantServer(spec, folder, order="fixed", **args)
    with running(server) as url, httpx.Client(base_url=url) as c:
        assert c.post("/api/start", json={"consent": True, "pid": "p1"}).status_code == 200
        t = c.get("/api/next").json()
        for said in answers:
            t = c.post("/api/answer", json={"id": t["id"], **said}).json()
    return bayesobs.read_trials(folder)


def _args(argv: list[str]) -> dict:
    """``serve``'s arguments for the export's options in ``argv``."""
    out: dict = {}
    if "--trials" in argv:
        out["trials"] = int(argv[argv.index("--trials") + 1])
    return out


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "circuits" else n for n in SPECS]
)
def test_the_export_asks_as_serve_asks_and_reads_as_serve_reads(name, tmp_path):
    """Each trial: the answer kind, the person's question, the images and the stimulus serve
    asks; the same answers, right and wrong, given in the export's page and to serve: the same
    rows."""
    spec = ROOT / "tasks" / f"{name}.toml"
    if name == "percept_v_small":  # two of its domains (a count, a colour change), 4 trials each
        spec = tmp_path / "pv.toml"
        spec.write_text(PERCEPT_V)
    argv = SPECS[name]
    blocks = _export(spec, tmp_path / "x", *argv)
    server = ParticipantServer(spec, tmp_path / "plan", order="fixed", **_args(argv))
    sessions = server.study_of("p").sessions
    assert len(blocks) == len(sessions)
    for block, sess in zip(blocks, sessions, strict=True):
        assert [t["data"]["stimulus_id"] for t in block] == [s.key() for s in sess.stimuli]
        for t, stim in zip(block, sess.stimuli, strict=True):
            assert t["answer"] == ("tap" if sess.task.tap_area(stim) else "text")
            assert t["question"] == sess.task.human_question(stim) and "{" not in t["question"]
            assert Stimulus(**t["data"]["bayesobs_stimulus"]).key() == stim.key()
            shown = t["images"] or [t["image"]]
            assert all((tmp_path / "x" / p).is_file() for p in shown)
            assert len(shown) == stim.params.get("n_images", 1)
    stims = [s for sess in sessions for s in sess.stimuli]
    task = server.task
    answers = [_answer(task, s, stims, wrong=i % 2 == 1) for i, s in enumerate(stims)]
    answers = answers[: sum(map(len, blocks))]
    data = tmp_path / "data.json"
    data.write_text(json.dumps(_page_rows(blocks, answers)))
    got = bayesobs.read_trials(data)
    want = _served(spec, tmp_path / "e", answers, _args(argv))
    assert len(got) == len(want) == len(answers) and len(got) >= 2
    assert set(got["correct"].astype(int)) == {0, 1}  # right and wrong answers both read
    cols = [c for c in ANSWER_COLUMNS if c in want.columns]
    extra = [c for c in want.columns if c.startswith(("tap_", "response_", "step", "error_px"))]
    for col in cols + extra:
        assert _values(got[col]) == _values(want[col]), col
    # the same data as a CSV export (Pavlovia's): objects as JSON text, read alike
    rows = _page_rows(blocks, answers)
    table = pd.DataFrame(
        [{k: json.dumps(v) if isinstance(v, dict) else v for k, v in r.items()} for r in rows]
    )
    table.to_csv(tmp_path / "data.csv", index=False)
    csv = bayesobs.read_trials(tmp_path / "data.csv")
    for col in ("correct", "valid", "response"):
        assert _values(csv[col].astype(float)) == _values(got[col].astype(float)), col


def test_the_decomposed_hunt_asks_each_step_from_the_previous_answer(tmp_path):
    """A wrong step 1: step 2 starts where the participant said, as serve asks it, and scores alike."""
    spec = tmp_path / "hunt.toml"
    spec.write_text(HUNT)
    (block,) = _export(spec, tmp_path / "x")
    server = ParticipantServer(spec, tmp_path / "plan", order="fixed")
    stims = server.study_of("p").sessions[0].stimuli
    assert [bool(t.get("follow")) for t in block] == [False, True, True] * 2
    cells = {f"{c['colour']} {c['shape']}": c for c in grid_from_text(stims[0].text)}
    right = cells[stims[0].params["columns"]["step_start"]]["label"]
    said = next(k for k, c in cells.items() if k != right and c["label"] in cells)
    first = {"response": "{" + said.upper() + "}"}  # braces and capitals: read as serve reads them
    step2 = block[1]["follow"][said]
    assert step2["question"].startswith(f"Starting at the {said}, follow the label for 1 step.")
    # the rest answered right from where the participant stands
    answers = [first]
    for i in range(1, 6):
        rows = _page_rows([block], [*answers, {"response": "x"}])
        stim = Stimulus(**rows[i]["bayesobs_stimulus"])
        answers.append({"response": server.task.human_answer(stim)})
    data = tmp_path / "data.json"
    data.write_text(json.dumps(_page_rows([block], answers)))
    got = bayesobs.read_trials(data)
    want = _served(spec, tmp_path / "e", answers, {})
    for col in ("correct", "valid", "step_start", "step_start_from", "gold", "stimulus_id"):
        assert _values(got[col]) == _values(want[col]), col
    assert got["correct"].astype(int).tolist() == [0, 1, 1, 1, 1, 1]
    assert got["step_start"].iloc[1] == said


def test_a_tap_without_its_point_is_one_line(tmp_path, capsys):
    """Data whose tap lost its point (an edited file): one line, exit 2, no score written."""
    blocks = _export(ROOT / "tasks" / "two_among_five.toml", tmp_path / "b", "--trials", "1")
    rows = _page_rows(blocks, [{"x": 1, "y": 2, "display_w": 3, "display_h": 3}] * 6)
    del rows[0]["response"]["x"]
    (tmp_path / "data.json").write_text(json.dumps(rows))
    capsys.readouterr()
    assert main(["score", str(tmp_path / "data.json"), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "row 1 of the jsPsych data" in err, err
    assert not list((tmp_path / "s").glob("*.csv"))  # no score table


# ---------------------------------------------------------------- in Chromium (slow)
@pytest.fixture(scope="module")
def node_modules(tmp_path_factory):
    """One npm install of jsPsych (each export links to it)."""
    if NPM is None:
        pytest.skip("npm is not installed")
    from bayesobs.web.jspsych import JSPSYCH

    d = tmp_path_factory.mktemp("npm")
    (d / "package.json").write_text(json.dumps({"name": "bo-worded", "dependencies": JSPSYCH}))
    npm = [NPM, "install", "--no-audit", "--no-fund", "--prefer-offline"]
    subprocess.run(npm, cwd=d, check=True, capture_output=True)
    return d / "node_modules"


@pytest.fixture(scope="module")
def browser():
    with chromium_browser() as b:
        yield b


def _built(spec: Path, out: Path, node_modules: Path, *args: str):
    """The exported bundle, built and served from dist/ on 127.0.0.1; yields its page URL."""
    import functools
    import http.server
    import threading

    assert (
        main(["export", "jspsych", str(spec), "--out", str(out), "--order", "fixed"] + list(args))
        == 0
    )
    (out / "node_modules").symlink_to(node_modules)
    subprocess.run([NPM, "run", "build"], cwd=out, check=True, capture_output=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out / "dist"))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/index.html?pid=js1"


TRIAL_DATA = "window.jsPsych.getCurrentTrial().data"
PROGRESS = "window.jsPsych.getProgress().current_trial_global"
STEP_START = re.compile(r"Starting at the (\w+ \w+), follow the label for 1 step\.")


def _tap(page, x: float, y: float) -> None:
    """Tap the trial's picture at image pixel ``(x, y)`` (scaled to the size it is shown at)."""
    img = page.locator("#jspsych-content .bo-stim img")
    img.evaluate("i => i.complete || new Promise(r => i.onload = r)")
    w, nat = img.evaluate("i => [i.clientWidth, i.naturalWidth]")
    img.click(position={"x": x * w / nat, "y": y * w / nat})
    assert page.locator("#bo-tap").is_visible()


def _say(page, answer: str | tuple) -> None:
    """Answer the trial on the page (a tap at a point, else typed) and press Continue."""
    if isinstance(answer, tuple):
        _tap(page, *answer)
    else:
        page.fill("#jspsych-content input[name=response]", answer)
    page.get_by_role("button", name="Submit").click()


def _take_part(page, url: str, answers) -> pd.DataFrame:
    """Consent, the practice, then ``answers(i, data, question)`` for each trial; the data read."""
    page.set_default_timeout(15000)
    page.goto(url)
    page.get_by_role("button", name="I agree").click()
    page.get_by_role("button", name="Start the practice trial").click()
    i = 0
    for _ in range(40):  # never more screens than this
        page.wait_for_selector("#jspsych-survey-html-form-next, #bo-code")
        if page.locator("#bo-code").count():
            break
        data = page.evaluate(TRIAL_DATA)
        at = page.evaluate(PROGRESS)
        question = page.locator("#jspsych-content").inner_text()
        said = answers(i, data, question)
        _say(page, said)
        page.wait_for_function(f"{PROGRESS} > {at}")  # the next screen, not this one again
        if data.get("bayesobs_practice"):
            page.get_by_role("button", name="Start the study").click()
        else:
            i += 1
    rows = json.loads(page.evaluate("window.jsPsych.data.get().json()"))
    return [r for r in rows if r.get("bayesobs_trial")]


def _serve_same(spec: Path, folder: Path, rows: list[dict], args: dict) -> Path:
    """The same answers, as the page recorded them, given to ``serve`` by participant js1."""
    server = ParticipantServer(spec, folder, order="fixed", **args)
    with running(server) as url, httpx.Client(base_url=url) as c:
        assert c.post("/api/start", json={"consent": True, "pid": "js1"}).status_code == 200
        t = c.get("/api/next").json()
        for r in rows:
            said = {k: float(v) if k != "response" else v for k, v in r["response"].items()}
            r = c.post("/api/answer", json={"id": t["id"], **said})
            assert r.status_code == 200, r.text
            t = r.json()
    return folder


def _scores(data: Path, out: Path, table: str) -> pd.DataFrame:
    assert main(["score", str(data), "--out", str(out), "--bootstrap", "2", "--no-probe"]) == 0
    return pd.read_csv(out / f"{table}.csv")


@pytest.mark.slow
def test_a_search_task_is_tapped_at_phone_width_and_scores_as_served(
    node_modules, browser, tmp_path
):
    """Cells and points tapped on a 390-px screen, and a check (tap the one item): the read data
    score as serve scores the same taps."""
    spec = ROOT / "tasks" / "two_among_five.toml"
    args = ("--trials", "1", "--platform", "cognition", "--catch-every", "3")
    httpd, url = _built(spec, tmp_path / "x", node_modules, *args)
    taps = []
    try:
        page = browser.new_page(viewport={"width": 390, "height": 844})

        def answer(i, data, question):
            if data.get("bayesobs_practice"):
                return (200, 200)
            p = data["bayesobs_stimulus"]["params"]
            if data.get("catch"):
                assert "only one item in this picture" in question and len(p["x"]) == 1
                return (p["x"][0], p["y"][0])
            assert "Tap it" in question
            taps.append(len(taps) % 2 == 0)  # on the target, else opposite it
            return (p["x"][0], p["y"][0]) if taps[-1] else (400 - p["x"][0], 400 - p["y"][0])

        rows = _take_part(page, url, answer)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert len(rows) == 7 and all(float(r["response"]["display_w"]) < 390 for r in rows)
    (tmp_path / "data.json").write_text(json.dumps(rows))
    got = bayesobs.read_trials(tmp_path / "data.json")
    served = _serve_same(spec, tmp_path / "e", rows, {"trials": 1, "catch_every": 3})
    want = bayesobs.read_trials(served)
    for col in ("correct", "response", "response_cell", "tap_x", "tap_y", "error_px"):
        assert _values(got[col]) == _values(want[col]), col
    assert sorted(got["correct"].astype(int)) == [0, 0, 0, 1, 1, 1]
    a = _scores(tmp_path / "data.json", tmp_path / "s1", "search_accuracy")
    b = _scores(served, tmp_path / "s2", "search_accuracy")
    pd.testing.assert_frame_equal(a, b)
    checks = [bayesobs.read_trials(f, keep_catch=True) for f in (tmp_path / "data.json", served)]
    got, want = (t.loc[t["catch"].astype(str).str.lower() == "true"] for t in checks)
    for col in ("response", "correct", "error_px", "stimulus", "stimulus_id", "trial", "valid"):
        assert _values(got[col]) == _values(want[col]), col
    assert got["response"].tolist() == [1.0]


@pytest.mark.slow
def test_the_decomposed_hunt_in_chromium_follows_the_typed_answer(node_modules, browser, tmp_path):
    """Step 2 starts where the participant said; typos are refused in the page; a word check."""
    spec = tmp_path / "hunt.toml"
    spec.write_text(HUNT)
    args = ("--platform", "cognition", "--catch-every", "4")
    httpd, url = _built(spec, tmp_path / "x", node_modules, *args)
    said = []
    try:
        page = browser.new_page()

        def answer(i, data, question):
            if data.get("catch"):
                return re.search(r"type the word (\w+)", question).group(1)
            text = (data.get("bayesobs_stimulus") or {}).get("text")
            cells = {f"{c['colour']} {c['shape']}": c for c in grid_from_text(text or "") or ()}
            m = STEP_START.search(question)
            final = "what color are you on" in question.lower()
            if data.get("bayesobs_practice"):
                return "red" if final else "red circle"
            if i == 0:  # a wrong cell on the grid, whose label is on the grid; a typo first
                right = cells[m.group(1)]["label"]
                pick = next(k for k, c in cells.items() if k != right and c["label"] in cells)
                page.fill("#jspsych-content input[name=response]", "purple circel")
                page.get_by_role("button", name="Submit").click()
                assert page.evaluate(
                    "document.querySelector('input[name=response]').validationMessage"
                )
                said.append(pick)
                return "{" + pick.upper() + "}"
            if i == 1:
                assert m.group(1) == said[0]  # asked from the participant's own answer
            there = cells.get(cells[m.group(1)]["label"]) if m.group(1) in cells else None
            if there is None:
                return "red" if final else "red circle"
            return there["colour"] if final else f"{there['colour']} {there['shape']}"

        rows = _take_part(page, url, answer)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert len(rows) == 7 and [bool(r.get("catch")) for r in rows].count(True) == 1
    (tmp_path / "data.json").write_text(json.dumps(rows))
    got = bayesobs.read_trials(tmp_path / "data.json")
    served = _serve_same(spec, tmp_path / "e", rows, {"catch_every": 4})
    want = bayesobs.read_trials(served)
    for col in ("correct", "valid", "step_start", "gold", "stimulus_id", "response"):
        assert _values(got[col]) == _values(want[col]), col
    assert got["step_start"].iloc[1] == said[0]
    checks = [bayesobs.read_trials(f, keep_catch=True) for f in (tmp_path / "data.json", served)]
    got, want = (t.loc[t["catch"].astype(str).str.lower() == "true"] for t in checks)
    for col in ("response", "raw_response", "correct", "catch_word", "trial"):
        assert _values(got[col]) == _values(want[col]), col
    assert got["response"].tolist() == [1.0]
    a = _scores(tmp_path / "data.json", tmp_path / "s1", "perception")
    b = _scores(served, tmp_path / "s2", "perception")
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "table"), [("object_reid", "perception"), ("percept_v_small", "perceptv_domains")]
)
def test_typed_answers_in_chromium_score_as_served(name, table, node_modules, browser, tmp_path):
    """Right and wrong answers typed in the page (two images for re-identification): the read
    data, and their scores, equal serve's for the same answers."""
    spec = ROOT / "tasks" / f"{name}.toml"
    trials = "1" if name == "object_reid" else "4"
    httpd, url = _built(spec, tmp_path / "x", node_modules, "--trials", trials)
    try:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        task = TASKS[name.removesuffix("_small")]()

        def answer(i, data, question):
            shown = page.locator("#jspsych-content .bo-stim img").count()
            if data.get("bayesobs_practice"):
                return "yes" if name == "object_reid" else "1"
            stim = Stimulus(**data["bayesobs_stimulus"])
            assert shown == stim.params["n_images"] >= 1  # every image, in order
            assert task.human_question(stim) in question
            right = task.human_answer(stim)
            if i % 2 == 0:  # right; else wrong where a wrong answer is readable (serve asks again)
                return right
            return {"yes": "no", "no": "yes"}.get(
                right, str(int(right) + 1) if right.isdigit() else right
            )

        rows = _take_part(page, url, answer)
    finally:
        httpd.shutdown()
        httpd.server_close()
    (tmp_path / "data.json").write_text(json.dumps(rows))
    got = bayesobs.read_trials(tmp_path / "data.json")
    served = _serve_same(spec, tmp_path / "e", rows, {"trials": int(trials)})
    want = bayesobs.read_trials(served)
    assert len(got) == len(want) == len(rows) >= 3
    for col in ("correct", "valid", "response", "gold", "raw_response", "stimulus_id"):
        assert _values(got[col]) == _values(want[col]), col
    a = _scores(tmp_path / "data.json", tmp_path / "s1", table)
    b = _scores(served, tmp_path / "s2", table)
    pd.testing.assert_frame_equal(a, b)
