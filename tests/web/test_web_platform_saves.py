"""Data saved as it comes (issue 52): a participant who closes the tab keeps what they answered.

The built JATOS bundle runs in Debian's Chromium against a stand-in of ``jatos.js`` that keeps
the result data as JATOS does (``appendResultData`` appends, ``submitResultData`` replaces) and
records every call; the data are then written in JATOS's own export layouts and read back.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from conftest import chromium_browser
from test_web_study import _serve_dir, node_modules  # noqa: F401 - the npm fixture

import bayesobs
from bayesobs.cli import main

SPEC = Path(__file__).resolve().parents[2] / "tasks" / "line_ratio.toml"
JATOS = """window.jatos = {studyResultId: "3", workerId: "9", urlQueryParameters: {}, data: "",
  onLoad(f) { setTimeout(f, 0); },
  appendResultData(d) { this.data += d; window.__record("append", d); return Promise.resolve(); },
  submitResultData(d) { this.data = d; window.__record("submit", d); return Promise.resolve(); },
  endStudy() { return Promise.resolve(); }};
"""


def _answer_17_of_30(page, url: str) -> None:
    """A participant agrees, practises and answers 17 of the 30 trials; trial 18 is on screen."""
    page.goto(f"{url}/index.html?pid=quitter")
    assert "30 answers" in page.locator("#jspsych-content").inner_text()
    page.get_by_role("button", name="I agree").click()
    page.get_by_role("button", name="Start the practice trial").click()
    page.fill("input[name=response]", "0.5")
    page.get_by_role("button", name="Continue").click()
    page.get_by_role("button", name="Start the study").click()
    for i in range(17):
        page.wait_for_selector("input[name=response]")
        page.fill("input[name=response]", f"0.{i + 10}")
        page.get_by_role("button", name="Continue").click()
    page.wait_for_selector("input[name=response]")


@pytest.mark.slow  # a 30-trial study built with npm and answered 17 times in Chromium
def test_jatos_keeps_every_answer_of_a_participant_who_quits_at_17_of_30(
    node_modules,  # noqa: F811
    tmp_path,
):
    exp = tmp_path / "jatos"
    exp.mkdir()
    (exp / "node_modules").symlink_to(node_modules)  # npm install finds them: no network
    args = ["export", "jspsych", str(SPEC), "--out", str(exp), "--platform", "jatos"]
    args += ["--trials", "10", "--modality", "text", "--order", "fixed"]
    assert main(args) == 0  # builds, and writes the JATOS study archive
    (jzip,) = exp.glob("*.jzip")
    with zipfile.ZipFile(jzip) as z:
        z.extractall(tmp_path / "imported")  # what JATOS unpacks on Import study
    (assets,) = [d for d in (tmp_path / "imported").iterdir() if d.is_dir()]
    calls: list[tuple[str, str]] = []
    httpd = _serve_dir(assets)
    try:
        with chromium_browser() as browser:
            page = browser.new_page(viewport={"width": 390, "height": 844})
            page.expose_function("__record", lambda kind, data: calls.append((kind, data)))
            page.route(
                "**/jatos.js", lambda r: r.fulfill(body=JATOS, content_type="text/javascript")
            )
            _answer_17_of_30(page, f"http://127.0.0.1:{httpd.server_address[1]}")
            assert page.evaluate("jatos.data.split('\\n').length") == 18  # 17 lines and ''
            page.close()  # the participant closes the tab at trial 17 of 30
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert [k for k, _ in calls] == ["append"] * 17  # one call per answer, nothing submitted
    data = "".join(d for _, d in calls)
    rows = [json.loads(line) for line in data.splitlines()]
    assert [r["trial"] for r in rows] == list(range(10)) + list(range(7))
    # JATOS's own exports of that result: the data-only .txt and the .jrzip archive
    (tmp_path / "jatos_results_data.txt").write_text(data)
    with zipfile.ZipFile(tmp_path / "jatos_results.jrzip", "w") as z:
        z.writestr("study_result_3/comp-result_5/data.txt", data)
    want = sorted((r["session"], r["trial"], float(r["response"]["response"])) for r in rows)
    for f in ("jatos_results_data.txt", "jatos_results.jrzip"):
        t = bayesobs.read_trials(tmp_path / f)
        assert set(t["subject"]) == {"quitter"}
        got = sorted(zip(t["session"], t["trial"].astype(int), t["response"], strict=True))
        assert got == want
    assert sorted(x[2] for x in want) == pytest.approx([(i + 10) / 100 for i in range(17)])


@pytest.mark.slow  # built with npm and answered 17 times in Chromium
def test_datapipe_keeps_the_finished_blocks_of_a_participant_who_quits(
    node_modules,  # noqa: F811
    tmp_path,
):
    """DataPipe saves a file per finished block: quitting at 17 of 30 keeps block 1's 10."""
    import subprocess

    from test_web_study import NPM

    exp = tmp_path / "pipe"
    args = ["export", "jspsych", str(SPEC), "--out", str(exp), "--platform", "prolific"]
    args += ["--datapipe", "abcDEF123456", "--trials", "10", "--modality", "text"]
    assert main([*args, "--order", "fixed"]) == 0
    (exp / "node_modules").symlink_to(node_modules)
    subprocess.run([NPM, "run", "build"], cwd=exp, check=True, capture_output=True)
    posted: list[dict] = []
    httpd = _serve_dir(exp / "dist")
    try:
        with chromium_browser() as browser:
            page = browser.new_page()
            page.route(
                "https://pipe.jspsych.org/api/data/",
                lambda r: (posted.append(json.loads(r.request.post_data)), r.fulfill(json={})),
            )
            _answer_17_of_30(page, f"http://127.0.0.1:{httpd.server_address[1]}")
            page.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert [b["filename"].rsplit("_", 1)[-1] for b in posted] == ["part0.json"]
    for b in posted:  # the OSF folder as DataPipe fills it
        (tmp_path / b["filename"]).write_text(b["data"])
    t = bayesobs.read_trials(sorted(tmp_path.glob("quitter_*.json")))
    assert sorted(t["trial"].astype(int)) == list(range(10)) and set(t["session"]) == {"short"}
    assert sorted(t["response"]) == pytest.approx([(i + 10) / 100 for i in range(10)])


@pytest.mark.slow  # built with npm, answered in Chromium, opened again
def test_a_local_pilot_closed_mid_way_gives_its_answers_when_opened_again(
    node_modules,  # noqa: F811
    tmp_path,
):
    import subprocess

    from test_web_study import NPM

    exp = tmp_path / "local"
    args = ["export", "jspsych", str(SPEC), "--out", str(exp), "--trials", "10"]
    assert main([*args, "--modality", "text", "--order", "fixed"]) == 0
    (exp / "node_modules").symlink_to(node_modules)
    subprocess.run([NPM, "run", "build"], cwd=exp, check=True, capture_output=True)
    httpd = _serve_dir(exp / "dist")
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with chromium_browser() as browser:
            context = browser.new_context(accept_downloads=True)
            page = context.new_page()
            _answer_17_of_30(page, url)
            page.close()  # closed at trial 17 of 30: nothing downloaded yet
            page = context.new_page()
            with page.expect_download() as dl:
                page.goto(f"{url}/index.html")
            dl.value.save_as(tmp_path / dl.value.suggested_filename)
            page.reload()  # downloaded once: the kept answers are gone from the browser
            assert page.evaluate("localStorage.getItem('bayesobs_unfinished')") is None
    finally:
        httpd.shutdown()
        httpd.server_close()
    t = bayesobs.read_trials(tmp_path / "bayesobs_quitter_unfinished.json")
    assert len(t) == 17 and set(t["subject"]) == {"quitter"}
    assert sorted(t["response"]) == pytest.approx([(i + 10) / 100 for i in range(17)])


def _fake_dist(out: Path) -> None:
    for name, text in (
        ("index.html", "<p>study</p>"),
        ("lib/jspsych.js", "//"),
        ("stimuli/a.png", ""),
    ):
        (out / "dist" / name).parent.mkdir(parents=True, exist_ok=True)
        (out / "dist" / name).write_text(text)


def test_the_jatos_archive_holds_one_study_file_and_one_assets_folder(tmp_path):
    """JATOS's import takes exactly one .jas (study JSON, version 3) and one assets folder."""
    from bayesobs.web.jatos import write_jzip

    out = tmp_path / "study1"
    _fake_dist(out)
    with zipfile.ZipFile(write_jzip(out, "line_ratio")) as z:
        names = z.namelist()
        (jas,) = [n for n in names if n.endswith(".jas")]
        study = json.loads(z.read(jas))
    assert "/" not in jas and {n.split("/")[0] for n in names} == {jas, jas[:-4]}
    data = study["data"]
    assert study["version"] == "3" and data["dirName"] == jas[:-4]
    (comp,) = data["componentList"]
    assert f"{data['dirName']}/{comp['htmlFilePath']}" in names and comp["active"]
    assert sorted(n for n in names if n != jas) == [
        f"{jas[:-4]}/{p}" for p in ("index.html", "lib/jspsych.js", "stimuli/a.png")
    ]
    again = json.loads(zipfile.ZipFile(write_jzip(out, "line_ratio")).read(jas))
    assert again["data"]["uuid"] == data["uuid"]  # a re-export re-imports as the same study


def test_without_npm_the_jatos_export_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm on the path
    out = tmp_path / "x"
    args = ["export", "jspsych", str(SPEC), "--out", str(out), "--platform", "jatos"]
    assert main([*args, "--trials", "1", "--modality", "text"]) == 0
    said = [x for x in capsys.readouterr().out.splitlines() if "npm install" in x]
    assert len(said) == 1 and "not built (npm is not installed here)" in said[0]
    assert (out / "experiment.js").exists() and not list(out.glob("*.jzip"))
