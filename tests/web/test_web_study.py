"""Real human studies end to end: counterbalancing, phone screens, duration, hardened requests.

The browser tests drive Debian's chromium through Playwright, as a participant meets the page.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import httpx
import pytest
from conftest import chromium_browser

from bayesobs.cli import main
from bayesobs.web import ParticipantServer, running

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "tasks" / "line_ratio.toml"


def _strict_json(line: str):
    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name} in trials.jsonl")

    return json.loads(line, parse_constant=refuse)


def _rows(folder: Path) -> list[dict]:
    p = folder / "trials.jsonl"
    return [_strict_json(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def _log(folder: Path, name: str) -> list[dict]:
    return [json.loads(x) for x in (folder / name).read_text().splitlines() if x.strip()]


@pytest.fixture
def browser():
    with chromium_browser() as b:
        yield b


def _complete(url: str, pid: str) -> None:
    with httpx.Client(base_url=url) as c:
        assert c.post("/api/start", json={"consent": True, "pid": pid}).status_code == 200
        t = c.get("/api/next").json()
        while not t["finished"]:
            t = c.post("/api/answer", json={"id": t["id"], "response": "0.5"}).json()


def _practice(page, url: str, pid: str) -> None:
    """A participant opens the study page, agrees and starts the practice trial."""
    page.goto(f"{url}/?pid={pid}")
    page.get_by_role("button", name="I agree").click()
    page.get_by_role("button", name="Start the practice trial").click()


# ---------------------------------------------------------------- item 2: block order
def test_serve_counterbalances_block_order_with_a_latin_square(tmp_path):
    server = ParticipantServer(SPEC, tmp_path / "exp", trials=1)  # 3 modalities x 3 session types
    with running(server) as url:
        for i in range(9):
            _complete(url, f"p{i}")
    rows = _rows(tmp_path / "exp")
    assert len(rows) == 9 * 9
    first_mod, first_type = Counter(), Counter()
    mod_at = Counter()
    for pid in {r["subject"] for r in rows}:
        mine = sorted((r for r in rows if r["subject"] == pid), key=lambda r: r["block_position"])
        assert [r["block_position"] for r in mine] == list(range(9))  # recorded on every trial
        first_mod[mine[0]["modality"]] += 1
        first_type[mine[0]["session"]] += 1
        for r in mine:
            mod_at[(r["block_position"] % 3, r["modality"])] += 1
        types = [r["session"] for r in mine]
        assert types[0:3] == [types[0]] * 3  # a session type's modality blocks stay together
    # each modality and each session type opens the study for 3 of the 9 participants,
    # and each modality holds each position inside a session type equally often
    assert set(first_mod.values()) == {3} and set(first_type.values()) == {3}
    assert set(mod_at.values()) == {9} and len(mod_at) == 9
    joins = [r for r in _log(tmp_path / "exp", "participants.jsonl") if r["event"] == "join"]
    assert [j["counterbalance"] for j in joins] == list(range(9))
    assert all(len(j["modality_order"]) == 3 and len(j["session_order"]) == 3 for j in joins)


def test_serve_order_fixed_keeps_the_spec_order_and_restart_keeps_assignments(tmp_path):
    fixed = ParticipantServer(SPEC, tmp_path / "fixed", trials=1, order="fixed")
    with running(fixed) as url:
        for i in range(2):
            _complete(url, f"f{i}")
    for pid in ("f0", "f1"):
        mine = [r for r in _rows(tmp_path / "fixed") if r["subject"] == pid]
        assert [(r["session"], r["modality"]) for r in mine] == [
            (s, m) for s in ("short", "medium", "long") for m in ("text", "image", "multimodal")
        ]
    server = ParticipantServer(SPEC, tmp_path / "cb", trials=1)
    with running(server) as url:
        _complete(url, "a")
        c = httpx.Client(base_url=url)
        c.post("/api/start", json={"consent": True, "pid": "b"})
        cookies = dict(c.cookies)
        before = c.get("/api/next").json()
        c.close()
    again = ParticipantServer(SPEC, tmp_path / "cb", trials=1)
    with running(again) as url, httpx.Client(base_url=url, cookies=cookies) as c:
        after = c.get("/api/next").json()
    assert before["block"] == after["block"] == 0 and before["text"] == after["text"]
    assert again.rows_of == {"a": 0, "b": 1}


def test_a_folder_served_in_one_order_is_not_resumed_in_another(tmp_path):
    from bayesobs.errors import BayesobsInputError

    fixed = ParticipantServer(SPEC, tmp_path / "exp", trials=1, order="fixed")  # as before issue 15
    with running(fixed) as url:
        _complete(url, "early")
    with pytest.raises(BayesobsInputError, match="order"):
        ParticipantServer(SPEC, tmp_path / "exp", trials=1)  # would mix fixed and counterbalanced
    again = ParticipantServer(SPEC, tmp_path / "exp", trials=1, order="fixed")
    assert again.progress == {"early": 9}


def test_cli_serve_and_export_refuse_an_unknown_order(tmp_path, capsys):
    assert (
        main(["export", "jspsych", str(SPEC), "--out", str(tmp_path / "x"), "--order", "random"])
        == 2
    )
    assert "--order" in capsys.readouterr().err


# ---------------------------------------------------------------- item 4: duration
def test_consent_page_states_the_duration_of_this_study(tmp_path, browser):
    server = ParticipantServer(SPEC, tmp_path / "exp")  # the spec's 40 trials x 9 sessions
    with running(server) as url:
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector("text=360 answers")
        text = page.locator("#consent").inner_text()
        assert "360 answers, about 50 minutes" in text and "10–20" not in text
    stated = ParticipantServer(SPEC, tmp_path / "exp2", trials=1, minutes=12)
    with running(stated) as url:
        assert httpx.get(f"{url}/api/study").json()["minutes"] == 12
    measured = ParticipantServer(SPEC, tmp_path / "exp3", trials=3)  # 27 trials, answered at once
    with running(measured) as url:
        guess = httpx.get(f"{url}/api/study").json()
        _complete(url, "fast")  # one participant (a pilot, say) does not set it (issue 47)
        assert httpx.get(f"{url}/api/study").json() == guess
        _complete(url, "fast2")
        _complete(url, "fast3")
        now = httpx.get(f"{url}/api/study").json()
    assert guess["minutes"] == 4 and "number of trials" in guess["basis"]
    assert now["minutes"] == 1 and "median answer time" in now["basis"]


# ---------------------------------------------------------------- item 3: phones
FIT_JS = """() => {
  const pre = document.getElementById('stim-text');
  const box = pre.getBoundingClientRect();
  const lines = [...pre.querySelectorAll('.line')].map((s) => ({
    chars: s.textContent.length, width: s.getBoundingClientRect().width,
    right: s.getBoundingClientRect().right}));
  return {scroll: pre.scrollWidth, client: pre.clientWidth, right: box.right,
          vw: document.documentElement.clientWidth, font: parseFloat(getComputedStyle(pre).fontSize),
          lines};
}"""


@pytest.mark.parametrize("size", [(390, 844), (1400, 900)])
def test_line_stimulus_is_never_clipped_and_keeps_its_ratio(tmp_path, browser, size):
    server = ParticipantServer(SPEC, tmp_path / "exp", ["text"], ["base"], 3, order="fixed")
    fonts = []
    with running(server) as url:
        page = browser.new_page(viewport={"width": size[0], "height": size[1]})
        _practice(page, url, "phone")
        page.fill("input[name=response]", "0.5")
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Start the study").click()
        for i in range(9):
            page.wait_for_selector(f"text=Trial {i + 1} of 9")
            m = page.evaluate(FIT_JS)
            assert m["scroll"] <= m["client"] and m["right"] <= m["vw"], m  # nothing cut off
            assert all(ln["right"] <= m["right"] for ln in m["lines"]), m
            (a, b) = m["lines"]
            per_char = (a["width"] / a["chars"], b["width"] / b["chars"])
            assert per_char[0] == pytest.approx(per_char[1], abs=0.02), m  # one scale for both
            fonts.append(m["font"])
            page.fill("input[name=response]", "0.5")
            page.keyboard.press("Enter")
    if size[0] < 500:  # the longer lines needed a smaller font on the phone: the fit did work
        assert min(fonts) < max(fonts) and min(fonts) >= 7
    else:
        assert len(set(fonts)) == 1


def test_too_narrow_a_screen_is_refused_with_a_message(tmp_path, browser):
    server = ParticipantServer(SPEC, tmp_path / "exp", ["text"], ["base"], 2, order="fixed")
    with running(server) as url:
        page = browser.new_page(viewport={"width": 200, "height": 600})
        _practice(page, url, "tiny")
        page.wait_for_selector("#too-small:not([hidden])")
        assert "too narrow" in page.locator("#too-small").inner_text()
        assert page.locator("#submit").is_disabled() and not page.locator("#stim-text").is_visible()
        page.set_viewport_size({"width": 800, "height": 600})  # turned sideways: shown again
        page.wait_for_selector("#stim-text", state="visible")
        assert page.locator("#submit").is_enabled()


# ---------------------------------------------------------------- item 7: hardening
@pytest.fixture
def served(tmp_path):
    server = ParticipantServer(SPEC, tmp_path / "exp", ["text"], ["base"], 2, token="tok")
    with running(server) as url:
        yield url, tmp_path / "exp"


def test_oversized_bodies_and_answers_are_refused_and_nothing_is_logged(served):
    url, folder = served
    with httpx.Client(base_url=url, timeout=30) as c:
        assert c.post("/api/start", json={"consent": True, "pid": "h"}).status_code == 200
        big = b'{"id": 0, "response": "0.5", "pad": "' + b"x" * (1 << 20) + b'"}'
        r = c.post("/api/answer", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413
        chunked = c.post(
            "/api/answer",
            content=iter([big[:4000], big[4000:]]),
            headers={"content-type": "application/json"},
        )
        assert chunked.status_code == 413  # no content-length: the stream is cut at the cap
        zeros = c.post("/api/answer", json={"id": 0, "response": "0" * (2 << 20)})
        assert zeros.status_code in (400, 413)
        zeros = c.post("/api/answer", json={"id": 0, "response": "0." + "0" * 100})
        assert zeros.status_code == 400
        assert _rows(folder) == []
        ok = c.post("/api/answer", json={"id": 0, "response": "0.25"})
        assert ok.status_code == 200
    assert [r["raw_response"] for r in _rows(folder)] == ["0.25"]


def test_non_finite_response_times_never_reach_the_log(served):
    url, folder = served
    with httpx.Client(base_url=url) as c:
        c.post("/api/start", json={"consent": True, "pid": "rt"})
        for rt in ("Infinity", "-Infinity", "NaN", "1" + "0" * 400, "-5", "true", '"12"'):
            body = '{"id": 0, "response": "0.3", "rt_ms": ' + rt + "}"
            r = c.post("/api/answer", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 400, (rt, r.status_code, r.text)
        assert (
            c.post("/api/answer", json={"id": 0, "response": "0.3", "rt_ms": 1234}).status_code
            == 200
        )
    text = (folder / "trials.jsonl").read_text()
    rows = _rows(folder)  # strict JSON: no Infinity / NaN
    assert len(rows) == 1 and rows[0]["rt_client_s"] == 1.234 and "Infinity" not in text


def test_bad_ids_cross_site_posts_and_tokens_are_refused(served):
    url, folder = served
    with httpx.Client(base_url=url) as c:
        for pid in ("..", ".", "../x", ".hidden", "-x", "a/b", "x" * 65):
            assert c.post("/api/start", json={"consent": True, "pid": pid}).status_code == 400, pid
        # a cross-site form can send text/plain without a preflight: refused, nothing joins
        r = c.post(
            "/api/start",
            content='{"consent": true, "pid": "csrf"}',
            headers={"content-type": "text/plain"},
        )
        assert r.status_code == 415
        r = c.post(
            "/api/start",
            json={"consent": True, "pid": "evil"},
            headers={"origin": "https://evil.example"},
        )
        assert r.status_code == 403
        r = c.post("/api/start", json={"consent": True, "pid": "evil2"}, headers={"origin": "null"})
        assert r.status_code == 403  # a sandboxed frame or a file: page
        behind_tls_proxy = url.replace("http://", "https://")
        same = c.post(
            "/api/start", json={"consent": True, "pid": "ok1"}, headers={"origin": behind_tls_proxy}
        )
        assert same.status_code == 200
        for path in ("/", "/api/next", "/assets/app.js", "/experimenter?token=tok"):
            h = c.get(path).headers
            assert "frame-ancestors 'none'" in h["content-security-policy"], path
            assert h["x-frame-options"] == "DENY" and h["x-content-type-options"] == "nosniff"
        assert c.get("/experimenter?token=%C3%A9").status_code == 403
        assert c.get("/experimenter/trials.csv?token=%C3%A9%00").status_code == 403
    joins = [r["pid"] for r in _log(folder, "participants.jsonl") if r["event"] == "join"]
    assert joins == ["ok1"]


# ---------------------------------------------------------------- item 1: platform exports
NPM = shutil.which("npm")
JATOS_STUB = """window.__jatos = {saved: [], ended: false, redirect: null};
window.jatos = {studyResultId: "7", workerId: "42", urlQueryParameters: {},
  onLoad(f) { setTimeout(f, 0); },
  appendResultData(d) { return Promise.resolve(); },
  submitResultData(d) { window.__jatos.saved.push(d); return Promise.resolve(); },
  endStudy() { window.__jatos.ended = true; return Promise.resolve(); },
  endStudyAndRedirect(url) { window.__jatos.redirect = url; window.__jatos.ended = true; return Promise.resolve(); }};
"""
PAVLOVIA_STUB = """window.__pavlovia = {commands: [], csv: null, participantId: null};
var jsPsychPavlovia = (function () {
  class PavloviaStub {
    constructor(jsPsych) { this.jsPsych = jsPsych; }
    trial(el, trial) {
      window.__pavlovia.commands.push(trial.command);
      if (trial.command === "finish") {
        window.__pavlovia.csv = this.jsPsych.data.get().csv();
        window.__pavlovia.participantId = trial.participantId;
      }
      this.jsPsych.finishTrial({});
    }
  }
  PavloviaStub.info = {name: "pavlovia", version: "stub", data: {},
    parameters: {command: {type: jsPsychModule.ParameterType.STRING, default: "init"},
                 participantId: {type: jsPsychModule.ParameterType.STRING, default: "PARTICIPANT"}}};
  return PavloviaStub;
})();
"""


@pytest.fixture(scope="module")
def node_modules(tmp_path_factory):
    """One npm install of every package an export may list (each export links to it)."""
    if NPM is None:
        pytest.skip("npm is not installed")
    import subprocess

    from bayesobs.web.jspsych import DATAPIPE, JSPSYCH

    d = tmp_path_factory.mktemp("npm")
    pkg = {"name": "bo-test", "private": True, "dependencies": {**JSPSYCH, **DATAPIPE}}
    (d / "package.json").write_text(json.dumps(pkg))
    subprocess.run(
        [NPM, "install", "--no-audit", "--no-fund"], cwd=d, check=True, capture_output=True
    )
    return d / "node_modules"


def _serve_dir(folder: Path):
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


# the fast suite keeps one platform (the local server's endpoint); the others run in the slow tier
SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "platform",
    [pytest.param(p, marks=SLOW) for p in ("jatos", "pavlovia", "prolific")]
    + ["local", pytest.param("cognition", marks=SLOW)],
)
def test_platform_export_saves_the_data_where_fit_and_score_read_it(
    platform, node_modules, browser, tmp_path
):
    import subprocess

    exp = tmp_path / platform
    args = [
        "export",
        "jspsych",
        str(SPEC),
        "--out",
        str(exp),
        "--trials",
        "2",
        "--modality",
        "multimodal",
        "--modality",
        "text",
        "--platform",
        platform,
        "--break-every",
        "4",
        "--completion-code",
        "DONE42",
    ]
    if platform == "prolific":
        args += ["--datapipe", "abcDEF123456", "--prolific-code", "C0DE99"]
    if platform == "jatos":
        args += ["--prolific-code", "C0DE99", "--no-build"]  # built below, offline
    assert main(args) == 0
    (exp / "node_modules").symlink_to(node_modules)
    if platform == "pavlovia":
        built = subprocess.run([NPM, "run", "build"], cwd=exp, capture_output=True, text=True)
        assert (
            built.returncode != 0 and "jspsych-pavlovia.js" in built.stderr
        )  # says what is missing
        (exp / "jspsych-pavlovia.js").write_text(PAVLOVIA_STUB)
    subprocess.run([NPM, "run", "build"], cwd=exp, check=True, capture_output=True)
    posted = []
    httpd = _serve_dir(exp / "dist")
    try:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.route(
            "**/jatos.js", lambda r: r.fulfill(body=JATOS_STUB, content_type="text/javascript")
        )
        page.route(
            "https://pipe.jspsych.org/api/data/",
            lambda r: (posted.append(r.request.post_data), r.fulfill(json={"ok": True})),
        )
        page.route(
            "https://pipe.jspsych.org/api/condition/", lambda r: r.fulfill(json={"condition": 4})
        )  # DataPipe's next condition
        page.route(
            "https://app.prolific.com/**",
            lambda r: r.fulfill(body="<p>back on Prolific</p>", content_type="text/html"),
        )
        page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/index.html?pid=js1")
        consent = page.locator("#jspsych-content").inner_text()
        assert "12 answers, about 2 minutes" in consent
        page.get_by_role("button", name="I agree").click()
        page.get_by_role("button", name="Start the practice trial").click()
        page.fill("input[name=response]", "0.5")
        page.get_by_role("button", name="Continue").click()
        page.get_by_role("button", name="Start the study").click()
        breaks, widths = 0, []
        for i in range(12):
            page.wait_for_selector("input[name=response]")
            if page.locator("#jspsych-content pre").count():
                m = page.evaluate(
                    FIT_JS.replace(
                        "document.getElementById('stim-text')",
                        "document.querySelector('#jspsych-content pre')",
                    )
                )
                assert m["scroll"] <= m["client"] and m["right"] <= m["vw"], m
            page.fill("input[name=response]", f"0.{i + 2:02d}")
            if platform == "local" and i == 11:
                with page.expect_download() as dl:
                    page.get_by_role("button", name="Continue").click()
                dl.value.save_as(tmp_path / "data.json")
            else:
                page.get_by_role("button", name="Continue").click()
            widths.append(
                page.evaluate(
                    "parseFloat(document.getElementById('jspsych-progressbar-inner').style.width)"
                )
            )
            if i in (3, 7):
                page.wait_for_selector("text=Time for a short break")
                breaks += 1
                page.get_by_role("button", name="Continue").click()
        page.wait_for_selector("#bo-code")
        assert page.locator("#bo-code").inner_text() == "DONE42"  # never a blank page
        assert breaks == 2 and widths == sorted(widths) and widths[-1] == pytest.approx(100)
        if platform == "jatos":
            saved = page.evaluate("window.__jatos.saved")
            assert len(saved) == 1
            (tmp_path / "data.json").write_text(saved[0])
            page.get_by_role("button", name="Return to Prolific").click()
            page.wait_for_function("() => window.__jatos.ended")
            assert page.evaluate("window.__jatos.redirect").endswith("?cc=C0DE99")
        elif platform == "pavlovia":
            pav = page.evaluate("window.__pavlovia")
            assert pav["commands"] == ["init", "finish"] and pav["participantId"] == "js1"
            (tmp_path / "data.csv").write_text(pav["csv"])
        elif platform == "prolific":  # a file per finished block as it comes, then the whole
            bodies = [json.loads(b) for b in posted]
            parts = [b for b in bodies if "_part" in b["filename"]]
            assert [len(json.loads(b["data"])) for b in parts] == [2] * 5  # 6 blocks of 2
            (body,) = [b for b in bodies if b not in parts]
            assert body["experimentID"] == "abcDEF123456" and body["filename"].startswith("js1_")
            (tmp_path / "data.json").write_text(body["data"])
            page.get_by_role("button", name="Return to Prolific").click()
            page.wait_for_url("https://app.prolific.com/**")
            assert page.url.endswith("?cc=C0DE99")
        elif platform == "cognition":  # Cognition.run records jsPsych's own data
            (tmp_path / "data.json").write_text(page.evaluate("window.jsPsych.data.get().json()"))
    finally:
        httpd.shutdown()
        httpd.server_close()
    data = tmp_path / ("data.csv" if platform == "pavlovia" else "data.json")
    import bayesobs

    t = bayesobs.read_trials(data)
    assert len(t) == 12 and set(t["subject"]) == {"js1"}
    assert sorted(t["response"]) == pytest.approx([(i + 2) / 100 for i in range(12)])
    assert sorted(t["block_position"].astype(int).unique()) == list(range(6))
    assert main(["fit", str(data), "--out", str(tmp_path / "fit")]) == 0
    fits = __import__("pandas").read_csv(tmp_path / "fit" / "fits.csv")
    assert set(fits["modality"]) == {"multimodal", "text"} and fits["loglik"].notna().any()
    first = t.sort_values("block_position").iloc[0]
    if platform == "prolific":  # DataPipe's condition 4: row 4, session types rotated by 2
        assert int(first["counterbalance"]) == 4 and first["session"] == "long"
        assert first["modality"] == "multimodal"
    if platform == "jatos":  # JATOS's study-result counter 7 picks Latin-square row 7 % 6 = 1
        assert int(first["counterbalance"]) == 1 and first["modality"] == "text"
        assert (
            main(
                ["score", str(data), "--out", str(tmp_path / "s"), "--bootstrap", "2", "--no-probe"]
            )
            == 0
        )


def test_a_trial_with_several_images_shows_them_all_in_order(tmp_path, browser):
    server = ParticipantServer(SPEC, tmp_path / "exp", ["image"], ["base"], 2, order="fixed")
    sess = server.study.sessions[0]
    stored = [server.images(sess, s, 0.0)["image"] for s in sess.stimuli[:2]]  # stimuli/<hash>.png
    sess.stimuli[0].params["images"] = stored[
        ::-1
    ]  # as a stimulus with several pictures carries them
    with running(server) as url:
        page = browser.new_page()
        _practice(page, url, "multi")
        page.fill("input[name=response]", "0.5")
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Start the study").click()
        page.wait_for_selector("#stim-imgs img")
        imgs = page.locator("#stim-imgs img")
        assert [imgs.nth(i).get_attribute("src") for i in range(imgs.count())] == [
            "/" + s for s in stored[::-1]
        ]
        page.wait_for_function(  # every image loads (waits while the machine is busy)
            "() => [...document.querySelectorAll('#stim-imgs img')].every(i => i.complete)"
        )
        assert page.evaluate(
            "[...document.querySelectorAll('#stim-imgs img')].every(i => i.naturalWidth > 0)"
        )
        assert not page.locator("#stim-img").is_visible()
        page.fill("input[name=response]", "0.5")
        page.keyboard.press("Enter")
        page.wait_for_selector("text=Trial 2 of 6")
        assert (
            page.locator("#stim-img").is_visible() and page.locator("#stim-imgs img").count() == 0
        )
    assert _rows(tmp_path / "exp")[0]["images"] == stored[::-1]


# ---------------------------------------------------------------- worded answers (perception)
def test_a_person_answers_object_reidentification_with_two_images(tmp_path, browser):
    """serve takes worded answers: two images a trial, the task's parser, `correct` logged, scored."""
    spec = ROOT / "tasks" / "object_reid.toml"
    server = ParticipantServer(spec, tmp_path / "exp", trials=2, order="fixed")
    with running(server) as url:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        _practice(page, url, "reid")
        page.wait_for_selector("#stim-imgs img >> nth=1")
        assert page.locator("#stim-imgs img").count() == 2  # both images, in order
        assert page.locator("#answer-label").inner_text() == "Your answer"
        question = page.locator("#question").inner_text()  # no reply to demos a person never saw
        assert question.startswith("The first image shows") and "Type yes or no." in question
        assert "{" not in question and "curly" not in question  # a model's format, not a person's
        page.fill("input[name=response]", "perhaps")  # not a yes/no answer: asked again
        page.keyboard.press("Enter")
        page.wait_for_selector("text=please type yes or no")  # says what is wanted (issue 47)
        page.fill("input[name=response]", "yes")
        page.keyboard.press("Enter")
        page.wait_for_selector("text=the correct answer was")
        page.get_by_role("button", name="Start the study").click()
        for i in range(6):
            page.wait_for_selector(f"text=Trial {i + 1} of 6")
            assert page.locator("#stim-imgs img").count() == 2
            page.fill("input[name=response]", "yes" if i % 2 else "{no}")  # braces optional
            page.keyboard.press("Enter")
        page.wait_for_selector("#thanks:not([hidden])")
    rows = _rows(tmp_path / "exp")
    assert len(rows) == 6 and {r["paradigm"] for r in rows} == {"perception"}
    for r in rows:
        assert r["valid"] is True and len(r["images"]) == 2 and r["image"] == r["images"][0]
        assert all((tmp_path / "exp" / p).exists() for p in r["images"])
        assert r["correct"] == int(r["response_value"] == r["gold"])  # the runner's scoring
    assert sorted(r["response_value"] for r in rows) == ["no"] * 3 + ["yes"] * 3
    assert main(["score", str(tmp_path / "exp"), "--out", str(tmp_path / "scores")]) == 0
    import pandas as pd

    acc = pd.read_csv(tmp_path / "scores" / "perception.csv")
    assert set(acc["subject"]) == {"reid"} and acc["n"].sum() == 6


def _right_answer(task, stim) -> dict:
    """What a person who knows the answer sends (search: a tap on the target, on a 345-px image)."""
    p = stim.params
    if task.paradigm == "search":
        return {"x": p["x"][0], "y": p["y"][0], "display_w": 345, "display_h": 345}
    return {"response": task.human_answer(stim)}  # bare: no braces, no COUNT: key


@pytest.mark.parametrize(
    "spec", ["two_among_five", "scavenger_hunt", "circuits", "percept_v_small"]
)
def test_worded_answers_are_read_by_the_runners_parser(tmp_path, spec):
    """Right answers typed by a person score correct on every worded task, through the HTTP API."""
    trials = None if spec == "percept_v_small" else 2  # percept_v_small: 40 in all
    server = ParticipantServer(
        ROOT / "tasks" / f"{spec}.toml", tmp_path / "e", trials=trials, order="fixed"
    )
    study = server.study_of("p1")
    with running(server) as url, httpx.Client(base_url=url) as c:
        assert c.post("/api/start", json={"consent": True, "pid": "p1"}).status_code == 200
        t = c.get("/api/next").json()
        assert t["answer"] in ("text", "tap") and (t["image"] or t["images"])
        n = 0
        while not t["finished"] and n < 12:
            sess, i, _ = study.trial(t["id"])
            r = c.post("/api/answer", json={"id": t["id"], "response": "@@"})
            assert r.status_code == 400  # unreadable: refused, nothing logged
            said = _right_answer(sess.task, sess.stimuli[i])
            t = c.post("/api/answer", json={"id": t["id"], **said}).json()
            n += 1
    rows = _rows(tmp_path / "e")
    assert len(rows) == n and all(r["valid"] and r["correct"] == 1 for r in rows), rows[:2]


def test_export_catch_trials_reach_the_data_with_catch_and_correct(node_modules, browser, tmp_path):
    """--catch-every: a check after every N trials, in the data with catch, correct and the subject."""
    import subprocess

    exp = tmp_path / "catch"
    args = ["export", "jspsych", str(SPEC), "--out", str(exp), "--trials", "2"]
    args += ["--modality", "text", "--platform", "cognition", "--catch-every", "3"]
    assert main(args) == 0
    (exp / "node_modules").symlink_to(node_modules)
    subprocess.run([NPM, "run", "build"], cwd=exp, check=True, capture_output=True)
    httpd = _serve_dir(exp / "dist")
    try:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/index.html?pid=js1")
        assert "7 answers" in page.locator("#jspsych-content").inner_text()
        page.get_by_role("button", name="I agree").click()
        page.get_by_role("button", name="Start the practice trial").click()
        page.fill("input[name=response]", "0.5")
        page.get_by_role("button", name="Continue").click()
        page.get_by_role("button", name="Start the study").click()
        for _ in range(7):
            page.wait_for_selector("input[name=response]")
            asked = page.locator("#jspsych-content").inner_text()
            m = re.search(r"please type (\S+) as your answer", asked, re.I)
            page.fill("input[name=response]", m.group(1) if m else "0.5")
            page.get_by_role("button", name="Continue").click()
        page.wait_for_selector("#bo-code")
        (tmp_path / "data.json").write_text(page.evaluate("window.jsPsych.data.get().json()"))
    finally:
        httpd.shutdown()
        httpd.server_close()
    data = [d for d in json.loads((tmp_path / "data.json").read_text()) if d.get("bayesobs_trial")]
    assert len(data) == 7 and {d["subject"] for d in data} == {"js1"}
    (check,) = [d for d in data if d.get("catch")]
    assert data.index(check) == 3 and check["correct"] is True and check["trial"] == -1
    assert check["response_value"] == check["stimulus"] and 0 < check["stimulus"] < 1


@pytest.mark.slow  # ~9 s each in Chromium
@pytest.mark.parametrize("platform", ["jatos", "prolific"])
def test_a_failed_save_is_retried_and_the_code_waits_for_it(
    platform, node_modules, browser, tmp_path
):
    """Issue 48: no completion code (nor redirect) until the data are saved; Try again saves them."""
    import subprocess

    exp = tmp_path / platform
    args = ["export", "jspsych", str(SPEC), "--out", str(exp), "--trials", "1"]
    args += ["--modality", "multimodal", "--platform", platform, "--completion-code", "DONE42"]
    args += ["--prolific-code", "C0DE99", "--no-build"] + (
        ["--datapipe", "abcDEF123456"] * (platform == "prolific")
    )
    assert main(args) == 0
    (exp / "node_modules").symlink_to(node_modules)
    subprocess.run([NPM, "run", "build"], cwd=exp, check=True, capture_output=True)
    stub = JATOS_STUB.replace(
        "submitResultData(d) {",
        "submitResultData(d) { if (window.__down) return Promise.reject(new Error('offline'));",
    )
    posted = []

    def pipe(route):
        if page.evaluate("window.__down"):
            return route.abort()  # the network is down: the plugin returns fetch's Error
        posted.append(route.request.post_data)
        route.fulfill(json={"ok": True})

    httpd = _serve_dir(exp / "dist")
    try:
        page = browser.new_page()
        page.add_init_script("window.__down = true;")
        page.route("**/jatos.js", lambda r: r.fulfill(body=stub, content_type="text/javascript"))
        page.route("https://pipe.jspsych.org/api/data/", pipe)
        page.route("https://pipe.jspsych.org/api/condition/", lambda r: r.abort())
        page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/index.html?pid=js1&cb=0")
        page.get_by_role("button", name="I agree").click()
        page.get_by_role("button", name="Start the practice trial").click()
        page.fill("input[name=response]", "0.5")
        page.get_by_role("button", name="Continue").click()
        page.get_by_role("button", name="Start the study").click()
        for i in range(3):
            page.wait_for_selector("input[name=response]")
            page.fill("input[name=response]", f"0.{i + 2}")
            page.get_by_role("button", name="Continue").click()
        page.wait_for_selector("#bo-unsaved", timeout=20000)  # after the automatic tries
        assert "not saved" in page.locator("#jspsych-content").inner_text()
        assert page.locator("#bo-code").count() == 0 and not posted
        page.get_by_role("button", name="Try again").click()  # still down: asked again
        page.wait_for_selector("#bo-unsaved", timeout=20000)
        page.evaluate("window.__down = false")
        page.get_by_role("button", name="Try again").click()
        page.wait_for_selector("#bo-code")
        assert page.locator("#bo-code").inner_text() == "DONE42"
        data = page.evaluate("window.__jatos.saved[0]") if platform == "jatos" else None
        data = data or json.loads(posted[0])["data"]
    finally:
        httpd.shutdown()
        httpd.server_close()
    (tmp_path / "data.json").write_text(data)
    import bayesobs

    assert sorted(bayesobs.read_trials(tmp_path / "data.json")["response"]) == [0.2, 0.3, 0.4]
