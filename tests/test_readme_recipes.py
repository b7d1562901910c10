"""Every human-data recipe of the docs runs end to end: fit, score, report.

The command lines are read from the pages themselves (docs/human-data.md, the
fenced blocks of the sections below; the README's recipe is one of them), so an edited page is
what is tested.  Each runs as a user who copied it would: in a checkout's root with
``../shared`` beside it, its paths and globs as bash reads them.  A recipe a user can copy and
that crashes fails here.
"""

from __future__ import annotations

import colorsys
import html
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import chromium_browser
from docs_pages import checkout, commands, fenced_blocks, page, section, shell_argv
from matplotlib.image import imread

from bayesobs.api import predictions
from bayesobs.cli import main
from bayesobs.report import figures as F
from bayesobs.trials import read_trials

ROOT = Path(__file__).resolve().parents[1]
# (page, heading) of each section whose `bayesobs fit` recipes run here
SECTIONS = (
    ("human-data.md", "Fitting someone else's export"),
    ("human-data.md", "One sitting in two numbered blocks (Vul et al.)"),
)


def cli_recipes() -> list[str]:
    """Each ``bayesobs fit`` command line on the shared data sets of the recipe sections, as printed."""
    out = []
    for name, heading in SECTIONS:
        for block in fenced_blocks(section(page(name), heading)):
            out += commands(block, "bayesobs fit ../shared/data/")
    return out


def library_snippet() -> str:
    (block,) = fenced_blocks(page("library.md"), "python")
    return block


RECIPES = cli_recipes()


def test_the_docs_have_their_human_data_recipes(shared_data):
    firsts = [shlex.split(r)[2] for r in RECIPES]
    assert firsts == [
        "../shared/data/glasauer_shi_2021_vierordt/rep_randwalk_table.csv",
        "../shared/data/qu_shi_precision_weighting/raw_psychopy_csv/experiment2/*.csv",
        "../shared/data/vul_numerosity_estimation/numexpt-fb/*.csv",
        "../shared/data/gong_bayesneg_line_bisection/EP32_NC_VN.csv",
        "../shared/data/vul_numerosity_estimation/numexpt/*.csv",
    ]
    assert "build_report" in library_snippet()
    # the README's recipe is the page's first, so the test below runs it too
    (readme,) = commands(fenced_blocks(section(page("README.md"), "Human data"))[0])
    assert readme == RECIPES[0]
    # a user outside the project reads where each data set comes from and its licence: the
    # source repository that the set's own README.txt names
    text = section(page("human-data.md"), "The data sets")
    for first in firsts:
        folder = first.split("/")[3]
        about = (shared_data / folder / "README.txt").read_text()
        source = re.search(r"SOURCE REPO\s*:\s*(\S+)", about).group(1)
        row = next(r for r in text.splitlines() if f"`{folder}/" in r)
        assert source.removeprefix("https://") in row, (folder, source)
        assert ("MIT" in row) == about.split("LICENCE")[1].lstrip(" :").startswith("MIT"), row


def _inputs(line: str, cwd: Path) -> tuple[list[str], list[str]]:
    """The recipe's input files, as bash expands them in ``cwd``, and its options without ``--out``."""
    args = shell_argv(line, cwd)[2:]
    k = next(i for i, a in enumerate(args) if a.startswith("--"))
    files = args[:k]
    missing = [f for f in files if not (cwd / f).is_file()]
    assert files and not missing, f"{line}: no such file from {cwd}: {missing[:3]}"
    opts = args[k:]
    i = opts.index("--out")
    return files, opts[:i] + opts[i + 2 :]


def _coloured_fraction(png: Path) -> float:
    """Share of pixels with a saturated colour (points and lines; frames and text are grey)."""
    rgb = imread(png)[..., :3].reshape(-1, 3)
    sat = np.array([colorsys.rgb_to_hsv(*p)[1] for p in rgb[:: max(1, len(rgb) // 40000)]])
    return float((sat > 0.25).mean())


def _section(page: str, title: str) -> str:
    i = page.index(f"<h2>{title}")
    j = page.find("<h2>", i + 4)
    return page[i : j if j > 0 else len(page)]


def check_report(folder: Path, scores: Path, interleaved: str | None = None) -> None:
    """What every report must show: per-subject panels with data, tasks, one-line reasons."""
    page = (folder / "index.html").read_text()
    trials = read_trials(scores / "trials.parquet")
    fits = pd.read_csv(scores / "fits.csv")
    pred = predictions(trials, fits)
    tasks = sorted(trials["task"].unique())
    titles = re.findall(r"<h2>Responses against stimuli: ([^<]+)</h2>", page)
    assert titles, "no 'Responses against stimuli' section"
    for task in tasks:  # under the data's own task names
        assert any(t.startswith(html.escape(task)) for t in titles), (task, titles)
    imgs = re.findall(r'src="(figures/fig1_[^"]+\.png)"', page)
    assert len(imgs) >= len(titles)
    for src in imgs:
        assert _coloured_fraction(folder / src) > 0.002, f"{src} is blank"
    for spec in F.response_panels(pred):
        fig = F.responses_grid(pred, **spec)
        drawn = [ax for ax in fig.axes if ax.axison]
        cell = pred[(pred[list(spec)] == pd.Series(spec)).all(axis=1)]
        assert len(drawn) == cell["subject"].nunique() > 0
        for ax in drawn:  # each subject's panel has points and a fitted line
            pts = np.concatenate([c.get_offsets() for c in ax.collections])
            assert np.isfinite(np.asarray(pts, float)).all(axis=1).sum() > 0
            lines = [ln for ln in ax.get_lines() if "fit" in ln.get_label()]
            assert lines and all(np.isfinite(ln.get_ydata()).any() for ln in lines)
        if interleaved:  # one fit per level of the interleaved column
            labels = {h.get_label() for ax in drawn for h in ax.get_lines()}
            levels = sorted(fits["level"].unique())
            assert all(any(lev in lab for lab in labels) for lev in levels), labels
    traj = re.findall(r'src="(figures/fig2_[^"]+\.png)"', page)
    assert traj and all(_coloured_fraction(folder / s) > 0.002 for s in traj)
    left = re.search(r"<h2>Left out</h2><ul[^>]*>(.*?)</ul>", page, flags=re.S)
    assert left, "no 'Left out' list"
    items = re.findall(r"<li>(.*?)</li>", left.group(1), flags=re.S)
    assert items and all(x.strip() and "\n" not in x for x in items)
    for part in ("Steering and noise", "Cue combination"):  # absent: one line says why
        if f"<h2>{part}" not in page:
            assert any(x.startswith(part) for x in items), (part, items)
    assert "Traceback" not in page


@pytest.mark.slow
@pytest.mark.parametrize("recipe", RECIPES, ids=[shlex.split(r)[2] for r in RECIPES])
def test_docs_recipe_runs_fit_score_report(recipe, shared_data, tmp_path, monkeypatch, capsys):
    cwd = checkout(tmp_path)  # a user's checkout root, ../shared beside it
    monkeypatch.chdir(cwd)
    files, opts = _inputs(recipe, cwd)
    assert main(shell_argv(recipe, cwd)[1:]) == 0  # the fit as printed
    scores = tmp_path / "scores"
    assert main(["score", *files, "--out", str(scores), *opts, "--bootstrap", "2"]) == 0
    assert main(["report", str(scores), "--out", str(tmp_path / "report")]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    interleaved = opts[opts.index("--interleaved") + 1] if "--interleaved" in opts else None
    check_report(tmp_path / "report", scores, interleaved)


def test_docs_library_snippet_runs(tmp_path, monkeypatch):
    (tmp_path / "tasks").symlink_to(ROOT / "tasks")  # the snippet names tasks/ from the repo root
    monkeypatch.chdir(tmp_path)
    exec(compile(library_snippet(), "docs/library.md", "exec"), {})  # the docs are ours
    page = (tmp_path / "report" / "index.html").read_text()
    assert re.search(r'src="figures/fig1_[^"]+\.png"', page)
    assert (tmp_path / "scores" / "bayesbench.csv").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _take_part(browser, url: str, pid: str, attentive: bool, rng) -> None:
    """One person in Chromium: consent, practice, every trial; a wrong catch answer if not attentive."""
    page = browser.new_page()
    page.goto(f"{url}/?pid={pid}")
    page.get_by_role("button", name="I agree").click()
    page.get_by_role("button", name="Start the practice trial").click()
    page.fill("input[name=response]", "0.5")
    page.keyboard.press("Enter")
    page.get_by_role("button", name="Start the study").click()
    k = 0
    while True:
        page.wait_for_function(
            "k => !document.getElementById('thanks').hidden || "
            "document.getElementById('progress').textContent.startsWith(`Trial ${k} of`)",
            arg=k + 1,
        )
        if page.locator("#thanks").is_visible():
            break
        said = re.search(r"type (\S+?) as your answer", page.locator("#trial").inner_text())
        if said:
            value = said.group(1) if attentive else "0.99"
        else:  # an estimate: the first three at once (under 0.2 s), the others after 0.3 s
            value = f"{rng.uniform(0.1, 0.9):.3f}"
            if k >= 3:
                page.wait_for_timeout(300)
        page.fill("input[name=response]", value)
        page.keyboard.press("Enter")
        k += 1
    page.close()


@pytest.mark.slow
def test_the_readme_study_pair_runs_on_a_study_served_to_two_people_in_chromium(
    tmp_path, monkeypatch
):
    """README "A human study": serve as printed, two people in Chromium, then score as printed."""
    block = fenced_blocks(section(page("README.md"), "A human study"))[0]
    serve, score = commands(block)
    human_data = section(page("human-data.md"), "Fitting someone else's export")
    assert score in [c for b in fenced_blocks(human_data) for c in commands(b)]  # the same rules
    cwd = checkout(tmp_path)
    port = _free_port()
    # one modality, four trials a session: 12 trials a person, a catch trial after the 10th
    small = ["--modality", "text", "--trials", "4", "--port", str(port)]
    cmd = [str(Path(sys.executable).with_name("bayesobs")), *shell_argv(serve, cwd)[1:], *small]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        with chromium_browser() as browser:
            for _ in range(300):  # up to 30 s for the server to listen
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                    break
                except OSError:
                    assert proc.poll() is None, (tmp_path / "serve.log").read_text()
                    time.sleep(0.1)
            rng = np.random.default_rng(3)
            _take_part(browser, url, "p1", True, rng)
            _take_part(browser, url, "p2", False, rng)
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    rows = [json.loads(x) for x in (cwd / "study" / "trials.jsonl").read_text().splitlines()]
    assert {r["subject"] for r in rows} == {"p1", "p2"} and len(rows) == 26
    monkeypatch.chdir(cwd)
    extra = ["--bootstrap", "2", "--no-probe", "--no-progress"]
    assert main([*shell_argv(score, cwd)[1:], *extra]) == 0
    table = pd.read_csv(cwd / "scores" / "exclusions.csv", dtype={"subject": str})
    part = table[table["level"] == "participant"]
    assert part[["subject", "rule"]].values.tolist() == [["p2", "catch_error_rate > 0.2"]]
    # each of p1's answers under 0.2 s by the browser's clock, and no other, is left out
    fast = [r for r in rows if r["subject"] == "p1" and not r.get("catch")]
    n_fast = sum(r["rt_client_s"] < 0.2 for r in fast)
    assert 0 < n_fast < len(fast)
    rule = table[table["rule"] == "rt_client_s < 0.2"]
    assert rule["trials"].sum() == n_fast and set(rule["subject"]) == {"p1"}
    scored = read_trials(cwd / "scores" / "trials.parquet")
    assert set(scored["subject"]) == {"p1"}
    assert int(scored["response"].isna().sum()) == n_fast


def test_a_new_terminal_reaches_bayesobs_as_the_readme_says_after_make_demo():
    """The README's blocks up to its first `bayesobs` command, typed in a fresh terminal."""
    if not (ROOT / ".venv" / "bin" / "activate").exists():
        pytest.skip("no .venv in the checkout (make demo or make test makes it)")
    blocks = fenced_blocks(page("README.md"))
    first = next(i for i, b in enumerate(blocks) if commands(b))
    typed = [
        line
        for b in blocks[: first + 1]
        for line in b.splitlines()
        if line.strip() and not line.startswith("make ")  # make: done, .venv is there
    ]
    assert "make demo" in blocks[0], blocks[0]
    # a new terminal: no virtual environment on PATH, the checkout's root as cwd
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"), "PYTHONPATH": str(ROOT)}
    script = "set -e\n" + "\n".join(typed)
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (typed, done.stderr[-500:])
    assert "usage: bayesobs" in done.stdout
