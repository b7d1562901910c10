"""Table tasks for people (issue 52): `serve` on a phone and the jsPsych export, then score and report."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import shutil
import subprocess
import threading
from pathlib import Path

import pandas as pd
import pytest
from conftest import chromium_browser

import bayesobs
from bayesobs.cli import main
from bayesobs.web import ParticipantServer, running

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "make_table_example", ROOT / "tools" / "make_table_example.py"
)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)
NPM = shutil.which("npm")


@pytest.fixture
def browser():
    with chromium_browser() as b:
        yield b


def _score_and_report(folder: Path, tmp_path: Path) -> None:
    """``score`` and ``report`` read the table task's trials."""
    score = ["score", str(folder), "--out", str(tmp_path / "s"), "--bootstrap", "0"]
    assert main([*score, "--no-probe", "--no-progress"]) == 0
    assert set(pd.read_csv(tmp_path / "s" / "fits.csv")["task"]) == {"table"}
    assert main(["report", str(folder), "--out", str(tmp_path / "r"), "--bootstrap", "0"]) == 0
    assert "table" in (tmp_path / "r" / "index.html").read_text()


@pytest.mark.slow
def test_a_person_on_a_phone_answers_a_table_of_images(tmp_path, browser):
    spec = example.make(tmp_path / "discs")
    truth = pd.read_csv(tmp_path / "discs" / "discs.csv")["magnitude"]
    server = ParticipantServer(spec, tmp_path / "exp", ["image"], ["base"], 3, token="t")
    with running(server) as url:
        page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone
        page.goto(f"{url}/?pid=ann")
        page.get_by_role("button", name="I agree").click()
        page.get_by_role("button", name="Start the practice trial").click()
        page.fill("input[name=response]", "50")
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Start the study").click()
        for i in range(6):
            page.wait_for_selector(f"text=Trial {i + 1} of 6")
            img = page.locator("#stim-img")
            assert img.is_visible() and img.bounding_box()["width"] <= 390
            if i == 0:  # beyond the table's answer range: refused in the page
                page.fill("input[name=response]", "400")
                page.click("#submit")
                assert "between 0 and 300" in page.locator("#error").inner_text()
            page.fill("input[name=response]", str(60 + 10 * i))
            page.click("#submit")
        page.wait_for_selector("#thanks:not([hidden])")
    rows = [json.loads(x) for x in (tmp_path / "exp" / "trials.jsonl").read_text().splitlines()]
    assert [r["response"] for r in rows] == [60.0 + 10 * i for i in range(6)]
    assert {r["task"] for r in rows} == {"table"} and {r["stimulus"] for r in rows} <= set(truth)
    _score_and_report(tmp_path / "exp", tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(NPM is None, reason="npm is not installed")
def test_the_jspsych_export_of_a_table_runs_and_reads_back(tmp_path, browser):
    spec = example.make(tmp_path / "discs")
    exp = tmp_path / "jspsych"
    args = ["export", "jspsych", str(spec), "--out", str(exp), "--trials", "2"]
    assert main([*args, "--platform", "cognition"]) == 0
    npm = subprocess.run(
        [NPM, "install", "--no-audit", "--no-fund", "--prefer-offline"],
        cwd=exp,
        capture_output=True,
    )
    if npm.returncode:
        pytest.skip(f"npm install failed (offline?): {npm.stderr.decode()[-200:]}")
    subprocess.run([NPM, "run", "build"], cwd=exp, check=True, capture_output=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(exp / "dist"))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/index.html?pid=js1")
        page.get_by_role("button", name="I agree").click()
        page.get_by_role("button", name="Start the practice trial").click()
        page.fill("input[name=response]", "50")
        page.get_by_role("button", name="Continue").click()
        page.get_by_role("button", name="Start the study").click()
        for i in range(4):
            page.wait_for_selector("img[alt=stimulus]", state="visible")
            page.fill("input[name=response]", str(70 + i))
            page.get_by_role("button", name="Continue").click()
        page.wait_for_selector("#bo-code")
        (tmp_path / "data.json").write_text(page.evaluate("window.jsPsych.data.get().json()"))
    finally:
        httpd.shutdown()
        httpd.server_close()
    t = bayesobs.read_trials(tmp_path / "data.json")
    assert sorted(t["response"]) == [70, 71, 72, 73] and set(t["task"]) == {"table"}
    _score_and_report(tmp_path / "data.json", tmp_path)
