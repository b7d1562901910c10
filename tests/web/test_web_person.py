"""`bayesobs serve` for people: a person's text, tap-to-answer, catch trials, hardened requests.

Issue 25 item 5 (what a person reads and how a position is answered), the catch trials, and
issue 26 item 9 (full disk, Host allow-list, boolean trial ids, the experimenter token).
One Chromium launch for the module's browser tests.
"""

from __future__ import annotations

import errno
import json
import logging
import re
from pathlib import Path

import httpx
import pytest
from conftest import chromium_browser

import bayesobs.run.store
from bayesobs.cli import main
from bayesobs.web import ParticipantServer, running
from bayesobs.web.answers import catch_word

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks"
# what a model is told and a person must never read
MODEL_TEXT = re.compile(
    r"[{}]|step by step|curly|format the question asks|COUNT:|ANSWER:|output|Cell \(i,j\)|"
    r"pixels large|round brackets|Yes, that is correct",
    re.I,
)


def _rows(folder: Path) -> list[dict]:
    p = folder / "trials.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


@pytest.fixture(scope="module")
def browser():
    with chromium_browser() as b:
        yield b


# ---------------------------------------------------------------- a person's text
def test_a_yes_no_task_on_a_phone_keeps_the_answer_in_view_and_says_what_it_wants(
    tmp_path, browser
):
    """Issue 47: the repeated question folds away, a refusal says "yes or no", a catch asks a word."""
    spec = TASKS / "object_reid.toml"
    server = ParticipantServer(spec, tmp_path / "e", trials=2, order="fixed", catch_every=1)
    in_view = "() => document.getElementById('response').getBoundingClientRect().bottom"
    with running(server) as url:
        page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone
        page.goto(f"{url}/?pid=phone")
        page.get_by_role("button", name="I agree").click()
        page.get_by_role("button", name="Start the practice trial").click()
        page.fill("input[name=response]", "yes")
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Start the study").click()
        page.wait_for_selector("text=Trial 1 of 11")
        assert page.locator("#question").is_visible()  # the first time: in full
        page.fill("input[name=response]", "perhaps")
        page.click("#submit")
        page.wait_for_function("() => document.getElementById('error').textContent")
        assert "yes or no" in page.locator("#error").inner_text()  # says what is wanted
        assert not _rows(tmp_path / "e")
        page.fill("input[name=response]", "no")
        page.click("#submit")
        page.wait_for_selector("text=Trial 2 of 11")  # the catch trial
        word = catch_word(server.spec["seed"], 0)
        assert page.locator("#answer-label").inner_text() == "Your answer"
        assert f"type the word {word}" in page.locator("#question").inner_text()
        page.fill("input[name=response]", word.upper())
        page.click("#submit")
        page.wait_for_selector("text=Trial 3 of 11")
        page.wait_for_function("() => [...document.images].every((i) => i.complete)")
        assert not page.locator("#question").is_visible()  # the same question: folded away
        assert page.evaluate(in_view) <= 844  # the answer box is in view without scrolling
        assert page.evaluate("window.scrollY") == 0
    rows = _rows(tmp_path / "e")
    catch = [r for r in rows if r.get("catch")]
    assert len(rows) == 2 and catch[0]["correct"] is True and catch[0]["catch_word"] == word
    assert catch[0]["stimulus"] == 0  # a number, as `score` needs


@pytest.mark.parametrize(
    "spec", ["two_among_five", "object_reid", "scavenger_hunt", "circuits", "percept_v_small"]
)
def test_worded_tasks_speak_to_a_person(tmp_path, spec):
    """Consent, instructions, practice and trials carry no model text; practice shows the answer."""
    trials = None if spec == "percept_v_small" else 1
    server = ParticipantServer(TASKS / f"{spec}.toml", tmp_path / "e", trials=trials, order="fixed")
    with running(server) as url, httpx.Client(base_url=url) as c:
        about = c.get("/api/study").json()
        assert "estimate a quantity" not in about["task"] and not MODEL_TEXT.search(about["task"])
        assert re.fullmatch(r"about \d+ minutes?", about["duration"])
        assert not re.search(r"\b1 minutes\b", about["duration"])
        start = c.post("/api/start", json={"consent": True, "pid": "p"}).json()
        texts = [start["task"], start["how"]]
        practice = c.get("/api/practice").json()
        texts += [practice["instruction"], practice["question"] or ""]
        t = c.get("/api/next").json()
        for _ in range(min(6, t["total"])):
            texts += [t["instruction"], t["question"] or ""]
            break
        for text in texts:
            assert not MODEL_TEXT.search(text), text
        if practice["answer"] == "tap":
            body = {"x": 1.0, "y": 1.0, "display_w": 300, "display_h": 300}
        else:
            body = {"response": "yes" if spec == "object_reid" else "3"}
        fb = c.post("/api/practice", json=body)
        if fb.status_code == 400:  # not a readable answer to this question: the right one is
            sess = server.study_of("p").sessions[0]
            gold = sess.task.human_answer(server.study.practice)
            fb = c.post("/api/practice", json={"response": gold})
        assert fb.status_code == 200, fb.text
        assert fb.json()["correct_answer"].strip(), fb.json()  # never "the correct answer was ."


def test_every_percept_v_domain_reads_its_own_example_answer():
    """Each domain's person question ends with how to type the answer, and that example parses."""
    from bayesobs import perceptv
    from bayesobs.stimuli import get_task

    task = get_task("percept_v")
    for domain in perceptv.ALL_DOMAINS:
        stim = task.questions(domain, 3)[0].stim
        q = task.human_question(stim)
        assert not MODEL_TEXT.search(q), (domain, q)
        example = re.search(r"e\.g\. (.+?)\.?$", q).group(1)
        read = [task.record(stim, r) for r in task.human_replies(stim, example)]
        assert any(r["valid"] for r in read), (domain, example)
        assert task.human_answer(stim), domain


def test_magnitude_consent_and_minutes_are_plural_aware(tmp_path):
    server = ParticipantServer(TASKS / "line_ratio.toml", tmp_path / "e", ["text"], ["base"], 1)
    with running(server) as url:
        about = httpx.get(f"{url}/api/study").json()
    assert about["minutes"] == 1 and about["duration"] == "about 1 minute"
    assert "shorter" in about["task"]


# ---------------------------------------------------------------- tap to answer, in Chromium
def _tap_target(page, stim) -> None:
    """Click the target where it is drawn on the displayed (scaled) image."""
    box = page.locator("#stim-img").bounding_box()
    scale = box["width"] / 400
    page.mouse.click(box["x"] + stim.params["x"][0] * scale, box["y"] + stim.params["y"][0] * scale)


def test_a_person_taps_the_target_and_the_server_logs_image_pixels(tmp_path, browser):
    server = ParticipantServer(
        TASKS / "two_among_five.toml", tmp_path / "e", trials=1, order="fixed", catch_every=4
    )
    study = server.study_of("tap")
    with running(server) as url:
        page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone: image ~345 px
        page.goto(f"{url}/?pid=tap")
        page.wait_for_selector("#task-summary:has-text('tap')")
        consent = page.locator("#consent").inner_text()
        assert "estimate a quantity" not in consent and not MODEL_TEXT.search(consent)
        assert re.search(r"7 answers, about \d+ minutes?\b", consent) and "1 minutes" not in consent
        page.get_by_role("button", name="I agree").click()
        page.wait_for_selector("#instructions:not([hidden])")
        instructions = page.locator("#instructions").inner_text()
        assert "Tap" in instructions and not MODEL_TEXT.search(instructions)
        page.get_by_role("button", name="Start the practice trial").click()
        page.wait_for_selector("#stim-img:visible")
        page.wait_for_function("() => document.getElementById('stim-img').naturalWidth > 0")
        assert not page.locator("#response").is_visible()  # a position is tapped, not typed
        trial = page.locator("#trial").inner_text()
        assert not MODEL_TEXT.search(trial), trial
        _tap_target(page, server.study.practice)
        page.click("#submit")
        page.wait_for_selector("#practice-done:not([hidden])")
        feedback = page.locator("#practice-feedback").inner_text()
        assert re.search(r"the correct answer was \S", feedback), feedback
        assert page.locator("#practice-mark").is_visible()  # the target is marked on the image
        page.get_by_role("button", name="Start the study").click()
        for i in range(7):
            page.wait_for_selector(f"text=Trial {i + 1} of 7")
            page.wait_for_function("() => document.getElementById('stim-img').naturalWidth > 0")
            seq = study.sequence()[i]
            if seq[0] == "catch":
                assert "attention check" in page.locator("#trial").inner_text().lower()
                stim = server.catch_stimulus(seq[1])
            else:
                sess, t, _ = study.trial(seq[1])
                stim = sess.stimuli[t]
            _tap_target(page, stim)
            page.click("#submit")
        page.wait_for_selector("#thanks:not([hidden])")
    rows = _rows(tmp_path / "e")
    assert len(rows) == 7 and {r["subject"] for r in rows} == {"tap"}
    real = [r for r in rows if not r.get("catch")]
    catch = [r for r in rows if r.get("catch")]
    assert len(real) == 6 and len(catch) == 1
    for r in rows:
        assert 330 <= r["display_w"] <= 390 and r["display_w"] == r["display_h"]
        assert r["tap_x"] == pytest.approx(r["target_x"], abs=3), r
        assert r["tap_y"] == pytest.approx(r["target_y"], abs=3), r
    assert all(r["correct"] == 1 and r["valid"] for r in real)
    coords = [r for r in real if r["answer"] == "coords"]
    assert len(coords) == 3 and all(r["error_px"] < 3 for r in coords)
    assert catch[0]["correct"] is True and catch[0]["stimulus"] == 0.0


def test_tap_answers_are_checked_and_typed_positions_refused(tmp_path):
    server = ParticipantServer(TASKS / "two_among_five.toml", tmp_path / "e", trials=1)
    with running(server) as url, httpx.Client(base_url=url) as c:
        c.post("/api/start", json={"consent": True, "pid": "t"})
        bad = [
            {"response": "1,1"},  # a typed position: refused, the image is tapped
            {"x": 1, "y": 1},  # no display size
            {"x": 401, "y": 5, "display_w": 345, "display_h": 345},  # outside the image
            {"x": float("nan"), "y": 5, "display_w": 345, "display_h": 345},
            {"x": True, "y": 5, "display_w": 345, "display_h": 345},
            {"x": 5, "y": 5, "display_w": 0, "display_h": 345},
        ]
        for body in bad:
            r = c.post("/api/answer", content=json.dumps({"id": 0, **body}), headers=_JSON)
            assert r.status_code == 400 and "error" in r.json(), body
        assert _rows(tmp_path / "e") == []
        r = c.post(
            "/api/answer", json={"id": 0, "x": 1, "y": 1, "display_w": 345, "display_h": 345}
        )
        assert r.status_code == 200
    (row,) = _rows(tmp_path / "e")
    assert (row["tap_x"], row["tap_y"], row["display_w"]) == (1, 1, 345)
    assert row["response_cell"] == "1,1"  # the top-left image pixel is in the top-left cell


# ---------------------------------------------------------------- catch trials
_JSON = {"content-type": "application/json"}


def test_catch_trials_are_logged_with_catch_and_correct(tmp_path):
    server = ParticipantServer(
        TASKS / "line_ratio.toml", tmp_path / "e", ["text"], ["base"], 2, catch_every=2
    )
    with running(server) as url, httpx.Client(base_url=url) as c:
        assert c.get("/api/study").json()["trials"] == 8  # 6 trials, a check after the 2nd and 4th
        c.post("/api/start", json={"consent": True, "pid": "k"})
        t = c.get("/api/next").json()
        seen = 0
        while not t["finished"]:
            if t.get("catch"):
                value = re.search(r"type (\S+?) ", t["question"]).group(1)
                said = value if seen == 0 else "0.99"  # the second check is failed
                seen += 1
            else:
                said = "0.5"
            t = c.post("/api/answer", json={"id": t["id"], "response": said}).json()
    rows = _rows(tmp_path / "e")
    catch = [r for r in rows if r.get("catch")]
    assert len(rows) == 8 and len(catch) == 2 and {r["subject"] for r in rows} == {"k"}
    assert [r["correct"] for r in catch] == [True, False]
    assert all(0 < r["stimulus"] < 1 and r["trial"] < 0 for r in catch)
    assert [rows.index(r) for r in catch] == [2, 5]
    assert all(not r.get("catch") for r in rows if r not in catch)


def test_cli_refuses_a_bad_catch_every(tmp_path, capsys):
    out = tmp_path / "x"
    spec = str(TASKS / "line_ratio.toml")
    assert main(["export", "jspsych", spec, "--out", str(out), "--catch-every", "0"]) == 2
    assert "--catch-every" in capsys.readouterr().err


def test_export_places_catch_trials_in_the_timeline(tmp_path):
    out = tmp_path / "x"
    args = ["export", "jspsych", str(TASKS / "line_ratio.toml"), "--out", str(out)]
    assert main([*args, "--trials", "2", "--modality", "text", "--catch-every", "3"]) == 0
    js = (out / "experiment.js").read_text()
    config = json.loads(re.search(r"const CONFIG = (.*);", js).group(1))
    assert config["catch_every"] == 3 and len(config["catch"]) == 1  # 6 trials: one check
    check = config["catch"][0]
    assert 0 < check["value"] < 1 and check["tolerance"] == pytest.approx(0.01)
    assert json.loads((out / "bayesobs_manifest.json").read_text())["catch_every"] == 3


# ---------------------------------------------------------------- hardening (issue 26 item 9)
@pytest.fixture
def served(tmp_path):
    server = ParticipantServer(
        TASKS / "line_ratio.toml", tmp_path / "exp", ["text"], ["base"], 2, token="tok"
    )
    with running(server) as url:
        yield server, url, tmp_path / "exp"


def test_a_boolean_trial_id_is_refused(served):
    _, url, folder = served
    with httpx.Client(base_url=url) as c:
        c.post("/api/start", json={"consent": True, "pid": "b"})
        assert c.post("/api/answer", json={"id": 0, "response": "0.3"}).status_code == 200
        r = c.post("/api/answer", json={"id": True, "response": "0.4"})  # True == 1 in Python
        assert r.status_code == 400 and "error" in r.json()
    assert len(_rows(folder)) == 1


def test_only_the_served_host_names_are_accepted(served, tmp_path):
    _, url, folder = served
    with httpx.Client(base_url=url) as c:
        r = c.post(
            "/api/start",
            json={"consent": True, "pid": "rebound"},
            headers={"host": "attacker.example"},
        )
        assert r.status_code == 421 and "host" in r.json()["error"]
        assert c.get("/", headers={"host": "attacker.example:8000"}).status_code == 421
        for host in ("localhost", "127.0.0.1", url.split("//")[1]):
            assert c.get("/api/study", headers={"host": host}).status_code == 200, host
    assert not (folder / "participants.jsonl").exists()
    named = ParticipantServer(
        TASKS / "line_ratio.toml", tmp_path / "n", ["text"], ["base"], 1, hosts=["study.example"]
    )
    with running(named) as url2, httpx.Client(base_url=url2) as c:
        assert c.get("/api/study", headers={"host": "study.example"}).status_code == 200
        assert c.get("/api/study", headers={"host": "other.example"}).status_code == 421


def test_the_experimenter_token_is_exchanged_for_a_cookie(served):
    _, url, _ = served
    with httpx.Client(base_url=url) as c:
        r = c.get("/experimenter?token=tok")
        assert r.status_code == 303 and r.headers["location"] == "/experimenter"
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "tok;" not in cookie
        page = c.get("/experimenter")  # the cookie, no token
        assert page.status_code == 200 and "tok" not in page.text  # no token in links
        assert c.get("/experimenter/trials.csv").status_code == 200
    with httpx.Client(base_url=url) as fresh:
        assert fresh.get("/experimenter").status_code == 403
        assert fresh.get("/experimenter/trials.csv").status_code == 403
    with httpx.Client(base_url=url, cookies={"bo_exp": "tok"}) as forged:
        assert forged.get("/experimenter").status_code == 403  # the raw token is no cookie


def test_a_full_disk_answers_json_503_logs_one_line_and_loses_nothing(
    served, monkeypatch, caplog, capfd
):
    _, url, folder = served
    with httpx.Client(base_url=url) as c:
        c.post("/api/start", json={"consent": True, "pid": "d"})
        assert c.get("/api/next").json()["id"] == 0  # served: its answer time is measured
        real = bayesobs.run.store.append_line

        def full(path, rec):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(bayesobs.run.store, "append_line", full)
        caplog.clear()
        with caplog.at_level(logging.INFO):
            for _ in range(2):
                r = c.post("/api/answer", json={"id": 0, "response": "0.3"})
                assert r.status_code == 503, r.text
                assert "disk" in r.json()["error"] and r.json()["retry"] is True
        mine = [x for x in caplog.records if x.name == "bayesobs.web"]
        assert len(mine) == 2 and all(x.exc_info is None for x in mine)
        assert all("\n" not in x.getMessage() for x in mine)
        assert "Traceback" not in capfd.readouterr().err
        monkeypatch.setattr(bayesobs.run.store, "append_line", real)
        r = c.post("/api/answer", json={"id": 0, "response": "0.3"})  # the participant retries
        assert r.status_code == 200 and r.json()["id"] == 1
    rows = _rows(folder)
    assert len(rows) == 1 and rows[0]["response"] == 0.3 and rows[0]["latency_s"] is not None
