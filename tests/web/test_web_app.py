"""`bayesobs serve`: a participant in real headless Chromium, 20 at once over HTTP, bad requests."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import httpx
import pandas as pd
import pytest
from conftest import CHROMIUM, chromium_browser

import bayesobs
from bayesobs.cli import main
from bayesobs.web import ParticipantServer, running

ROOT = Path(__file__).resolve().parents[2]
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)


def _rows(folder: Path) -> list[dict]:
    p = folder / "trials.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


@pytest.fixture
def server(tmp_path):
    return ParticipantServer(
        ROOT / "tasks" / "line_ratio.toml",
        tmp_path / "exp",
        ["multimodal"],
        ["base"],
        2,
        token="secret-token",
    )


@pytest.fixture
def clients():
    made: list[httpx.Client] = []
    yield made
    for c in made:
        c.close()


@pytest.fixture
def browser():
    with chromium_browser() as b:
        yield b


@needs_chromium
def test_participant_completes_a_session_in_chromium(server, browser, tmp_path):
    with running(server) as url:
        page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone
        page.goto(f"{url}/?pid=alice")
        page.get_by_role("button", name="I agree").click()
        page.get_by_role("button", name="Start the practice trial").click()
        page.fill("input[name=response]", "0.5")
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Start the study").click()
        answers = []
        for i in range(6):
            page.wait_for_selector(f"text=Trial {i + 1} of 6")
            assert (
                page.locator("#stim-img").is_visible() and page.locator("#stim-text").is_visible()
            )
            if i == 1:  # a non-numeric answer is refused in the page and nothing is written
                page.fill("input[name=response]", "about half")
                page.click("#submit")
                assert "Please enter a number" in page.locator("#error").inner_text()
                assert len(_rows(tmp_path / "exp")) == 1
            if i == 3:  # reload mid-session: back at the same trial
                page.reload()
                page.wait_for_selector("text=Trial 4 of 6")
            value = f"0.{i + 2}"
            answers.append(float(value))
            page.fill("input[name=response]", value)
            page.keyboard.press("Enter") if i % 2 else page.click("#submit")
        page.wait_for_selector("#thanks:not([hidden])")
        code = page.locator("#code").inner_text()
        page.screenshot(path=str(tmp_path / "thanks.png"))
    rows = _rows(tmp_path / "exp")
    assert [r["response"] for r in rows] == answers
    assert {r["subject"] for r in rows} == {"alice"} and code == server.completion_code("alice")
    assert all(r["latency_s"] is not None and r["rt_client_s"] > 0 for r in rows)


def test_twenty_participants_at_once_lose_nothing_and_mix_nothing(server, tmp_path):
    async def participant(url: str, i: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=30) as c:
            r = await c.post("/api/start", json={"consent": True, "pid": f"p{i:02d}"})
            assert r.status_code == 200
            await c.post("/api/practice", json={"response": "0.5"})
            t = (await c.get("/api/next")).json()
            while not t["finished"]:
                r = await c.post(
                    "/api/answer",
                    json={"id": t["id"], "response": f"{i / 100 + t['id'] / 1000:.3f}"},
                )
                assert r.status_code == 200, r.text
                t = r.json()

    async def all_of_them(url):
        await asyncio.gather(*(participant(url, i) for i in range(20)))

    with running(server) as url:
        asyncio.run(all_of_them(url))
    rows = pd.DataFrame(_rows(tmp_path / "exp"))
    assert len(rows) == 20 * 6
    assert not rows.duplicated(["subject", "session", "run", "trial"]).any()
    order = rows.groupby("subject").cumcount()
    expect = rows["subject"].str[1:].astype(int) / 100 + order / 1000
    assert (
        rows["response"] - expect
    ).abs().max() < 1e-9  # each answer under its own participant, in order


def test_bad_requests_are_refused_and_write_nothing(server, tmp_path, clients):
    with running(server) as url:
        a = httpx.Client(base_url=url)
        other = httpx.Client(base_url=url)
        forged = httpx.Client(base_url=url, cookies={"bo_pid": "bob", "bo_key": "guess"})
        clients.extend((a, other, forged))
        assert a.post("/api/start", json={"pid": "bob"}).status_code == 400  # no consent
        assert a.post("/api/start", json={"consent": True, "pid": "bob"}).status_code == 200
        t = a.get("/api/next").json()
        # a forged key
        assert forged.get("/api/next").status_code == 401
        assert forged.post("/api/answer", json={"id": 0, "response": "0.5"}).status_code == 401
        assert (
            a.post("/api/answer", json={"id": t["id"] + 1, "response": "0.5"}).status_code == 409
        )  # skipped
        assert a.post("/api/answer", json={"id": t["id"], "response": "half"}).status_code == 400
        assert (
            a.post("/api/answer", json={"id": t["id"], "response": "7"}).status_code == 400
        )  # out of range
        assert a.post("/api/answer", json={"id": t["id"], "response": "0.25"}).status_code == 200
        # another browser claiming bob once bob has answered
        assert other.post("/api/start", json={"consent": True, "pid": "bob"}).status_code == 403
        assert (
            a.post("/api/answer", json={"id": t["id"], "response": "0.25"}).status_code == 409
        )  # replayed
        for path in (
            "/stimuli/../manifest.json",
            "/stimuli/..%2F.server_secret",
            "/stimuli/%2e%2e/trials.jsonl",
            "/assets/../app.py",
            "/assets/%2e%2e%2fapp.py",
            "/.server_secret",
            "/participants.jsonl",
        ):
            r = a.get(path)
            assert r.status_code == 404 and "key_sha256" not in r.text, path
        assert a.get("/experimenter").status_code == 403
        assert a.get("/experimenter/trials.csv?token=wrong").status_code == 403
        csv = a.get("/experimenter/trials.csv?token=secret-token", follow_redirects=True)
        assert csv.status_code == 200 and "bob" in csv.text  # the token, then its cookie
        assert "bob" in a.get("/experimenter").text
        assert a.get(t["image"]).headers["content-type"] == "image/png"
    rows = _rows(tmp_path / "exp")
    assert len(rows) == 1 and rows[0]["response"] == 0.25 and rows[0]["subject"] == "bob"


def test_restart_resumes_participants(server, tmp_path, clients):
    with running(server) as url:
        c = httpx.Client(base_url=url)
        clients.append(c)
        c.post("/api/start", json={"consent": True, "pid": "carol"})
        c.post("/api/answer", json={"id": 0, "response": "0.3"})
        cookies = dict(c.cookies)
    again = ParticipantServer(
        ROOT / "tasks" / "line_ratio.toml", tmp_path / "exp", ["multimodal"], ["base"], 2
    )
    with running(again) as url:
        c = httpx.Client(base_url=url, cookies=cookies)
        clients.append(c)
        assert c.get("/api/next").json()["id"] == 1
        assert again.completion_code("carol") == server.completion_code("carol")


def test_score_runs_on_the_served_folder(server, tmp_path, clients):
    with running(server) as url:
        for pid in ("h1", "h2"):
            c = httpx.Client(base_url=url)
            clients.append(c)
            c.post("/api/start", json={"consent": True, "pid": pid})
            t = c.get("/api/next").json()
            while not t["finished"]:
                t = c.post("/api/answer", json={"id": t["id"], "response": "0.5"}).json()
    t = bayesobs.read_trials(tmp_path / "exp")
    assert len(t) == 12 and set(t["subject"]) == {"h1", "h2"}
    assert (
        main(
            [
                "score",
                str(tmp_path / "exp"),
                "--out",
                str(tmp_path / "s"),
                "--bootstrap",
                "2",
                "--no-probe",
            ]
        )
        == 0
    )


NPM = shutil.which("npm")


@needs_chromium
@pytest.mark.skipif(NPM is None, reason="npm is not installed")
def test_jspsych_export_builds_runs_and_imports(tmp_path, browser):
    import functools
    import http.server
    import subprocess
    import threading

    exp = tmp_path / "jspsych"
    assert (
        main(
            [
                "export",
                "jspsych",
                str(ROOT / "tasks" / "line_ratio.toml"),
                "--out",
                str(exp),
                "--trials",
                "2",
                "--modality",
                "multimodal",
                "--platform",
                "cognition",
            ]
        )
        == 0
    )
    subprocess.run(
        [NPM, "install", "--no-audit", "--no-fund"], cwd=exp, check=True, capture_output=True
    )
    subprocess.run([NPM, "run", "build"], cwd=exp, check=True, capture_output=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(exp / "dist"))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/index.html?pid=js1")
        page.get_by_role("button", name="I agree").click()
        page.get_by_role("button", name="Start the practice trial").click()
        page.fill("input[name=response]", "0.5")
        page.get_by_role("button", name="Continue").click()
        page.get_by_role("button", name="Start the study").click()
        for i in range(6):
            page.wait_for_selector("img[alt=stimulus]", state="visible")
            page.fill("input[name=response]", f"0.{i + 3}")
            page.get_by_role("button", name="Continue").click()
        page.wait_for_selector("#bo-code")  # the final page with the completion code
        (tmp_path / "data.json").write_text(page.evaluate("window.jsPsych.data.get().json()"))
        (tmp_path / "data.csv").write_text(page.evaluate("window.jsPsych.data.get().csv()"))
    finally:
        httpd.shutdown()
        httpd.server_close()
    for name in ("data.json", "data.csv"):
        t = bayesobs.read_trials(tmp_path / name)
        assert len(t) == 6 and set(t["subject"]) == {"js1"}
        assert sorted(t["response"]) == pytest.approx([0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
        assert set(t["modality"]) == {"multimodal"} and t["latency_s"].gt(0).all()
    fits, _ = bayesobs.fit(bayesobs.read_trials(tmp_path / "data.json"))
    assert len(fits) == 10 and fits["loglik"].notna().sum() >= 5
