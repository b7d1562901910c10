"""The report on a phone, folded long lists, and n/a never drawn as a value (issue 25)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import CHROMIUM, chromium_browser

import bayesobs
from bayesobs.cli import main
from bayesobs.report import figures as F
from bayesobs.report.html import bcs_not_available, constant_subjects
from bayesobs.scores import Scores

ROOT = Path(__file__).resolve().parents[2]
# the slow tier: a whole demo sweep, score and report (~11 s) and Chromium page loads
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A small demo-like report: two simulated observers and a constant responder."""
    tmp = tmp_path_factory.mktemp("demo")
    bayesobs.sweep(
        ROOT / "tasks" / "bayesbench.toml", ["sim:bayesian", "sim:linear"], tmp / "run", trials=12
    )
    trials = bayesobs.read_trials(tmp / "run")
    stuck = trials[trials["subject"] == "sim:linear"].assign(subject="stuck", response=0.5)
    pd.concat([trials, stuck]).to_csv(tmp / "trials.csv", index=False)
    scores = tmp / "scores"
    assert main(["score", str(tmp / "trials.csv"), "--out", str(scores), "--bootstrap", "2"]) == 0
    assert main(["report", str(scores), "--out", str(tmp / "report")]) == 0
    return scores, tmp / "report"


def _bcs_rows(page: str) -> dict[str, list[str]]:
    i = page.index("<h2>BCS per task</h2>")
    table = page[i : page.index("</table>", i)]
    rows = {}
    for tr in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S):
        cells = [c.strip() for c in re.findall(r"<td>(.*?)</td>", tr, flags=re.S)]
        rows[cells[0]] = cells[1:]
    return rows


def test_a_constant_responders_bcs_is_na_in_the_table_and_the_heatmap(demo):
    scores, report = demo
    res = Scores.from_folder(scores)
    board = res.bayesbench.set_index("subject")
    assert np.isnan(board.loc["stuck", "BCS"])  # the leaderboard: n/a
    rows = _bcs_rows((report / "index.html").read_text())
    assert rows["stuck"] and all(c == "n/a" for c in rows["stuck"])
    assert all(c != "n/a" for c in rows["sim:bayesian"])
    na = bcs_not_available(res)
    fig = F.bcs_table(res.bcs_tasks, na=na)
    ax = fig.axes[0]
    row = [t.get_text() for t in ax.get_yticklabels()].index("stuck")
    texts = [t for t in ax.texts if round(t.get_position()[1]) == row]
    assert texts and all(t.get_text() == "n/a" for t in texts)
    drawn = np.ma.masked_invalid(ax.images[0].get_array()[row])
    assert drawn.mask.all()  # blank, not coloured as 0


def test_a_flagged_e_is_hatched(demo):
    scores, _ = demo
    res = Scores.from_folder(scores)
    assert constant_subjects(res.missing) == ["stuck"]
    fig = F.bayesbench_scores(res.bayesbench, caveats={"stuck": {"E"}})
    ax = fig.axes[0]
    order = list(res.bayesbench.sort_values("S", ascending=False, na_position="last")["subject"])
    e_bars = ax.containers[[c.get_label() for c in ax.containers].index("efficiency E")]
    hatched = [bool(p.get_hatch()) for p in e_bars.patches]
    assert hatched == [s == "stuck" for s in order]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("E: flagged") for t in legend)


def test_long_lists_are_folded_under_a_summary(demo):
    _, report = demo
    page = (report / "index.html").read_text()
    if "<h2>Anchoring control</h2>" in page:
        part = page[page.index("<h2>Anchoring control</h2>") :]
        part = part[: part.index("<h2>", 5)]
        assert "<table" in part and "<details><summary>All" in part
    nc = page[page.index("<h2>Not computed</h2>") :]
    assert "<details><summary>All" in nc[: nc.index("<h2>", 5)]
    for table in re.findall(r"(.{0,30})<table", page):
        assert table.endswith("<div class=scroll>")  # every table in its own scroll box


def _scroll_width(path: Path, width: int = 390) -> tuple[int, int]:
    with chromium_browser() as b:
        page = b.new_page(viewport={"width": width, "height": 844})
        page.goto(path.resolve().as_uri())
        return page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
        )


@pytest.fixture
def chromium():
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")


def test_the_demo_report_has_no_sideways_scroll_on_a_phone(demo, chromium):
    _, report = demo
    width, _ = _scroll_width(report / "index.html")
    assert width <= 390


def test_a_human_data_report_has_no_sideways_scroll_on_a_phone(shared_data, tmp_path, chromium):
    data = shared_data / "glasauer_shi_2021_vierordt" / "rep_randwalk_table.csv"
    maps = ["stimulus=dur", "response=repDur", "subject=NSub", "trial=NT", "condition=RandLevel"]
    opts = [x for m in maps for x in ("--map", m)] + ["--missing-where", "valid == 0"]
    scores = tmp_path / "scores"
    assert main(["score", str(data), "--out", str(scores), "--bootstrap", "0", *opts]) == 0
    assert main(["report", str(scores), "--out", str(tmp_path / "rep")]) == 0
    width, _ = _scroll_width(tmp_path / "rep" / "index.html")
    assert width <= 390
