"""The report stays short enough to read: thin psychometric fits withheld with their reason (issue 47)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import CHROMIUM, chromium_browser
from matplotlib.backends.backend_agg import FigureCanvasAgg

import bayesobs
from bayesobs.cli import main
from bayesobs.report.psychometric import psychometric_grid, psychometric_sections, withheld_reason
from bayesobs.scores.psychometric import psychometric_levels, psychometric_table

ROOT = Path(__file__).resolve().parents[2]
CELLS = np.array(["1,1", "1,2", "2,1", "2,2"])


def _height(index: Path, width: int = 1280) -> int:
    """``document.body.scrollHeight`` of the page in headless Chromium at ``width`` px."""
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    with chromium_browser() as b:
        page = b.new_page(viewport={"width": width, "height": 800})
        page.goto(index.resolve().as_uri())
        page.wait_for_load_state("load")
        return page.evaluate("document.body.scrollHeight")


def _searcher(subject: str, n: int, levels: int, seed: int) -> pd.DataFrame:
    """Cell answers whose accuracy falls with the set size (1 .. levels), n trials."""
    rng = np.random.default_rng(seed)
    k = np.resize(np.arange(1, levels + 1), n)
    target = rng.choice(CELLS, n)
    found = rng.uniform(size=n) < 1 / (1 + np.exp((k - levels / 2) / 2))
    resp = np.where(found, target, rng.choice(CELLS, n))
    return pd.DataFrame(
        {
            "subject": subject,
            "task": "circle_sizes",
            "condition": "small",
            "set_size": k,
            "modality": "image",
            "stimulus": k,
            "response": (resp == target).astype(float),
            "target_cell": target,
            "response_cell": resp,
            "correct": (resp == target).astype(int),
        }
    )


@pytest.mark.parametrize(
    ("levels", "trials", "reason"),
    [
        (19, 20, "withheld: about one trial per level (19 levels, 20 trials)"),
        (10, 20, "withheld: about 2 trials per level (10 levels, 20 trials)"),
        (10, 29, "withheld: about 3 trials per level (10 levels, 29 trials)"),
        (10, 30, ""),
        (3, 900, ""),
    ],
)
def test_a_panel_is_withheld_below_three_trials_per_level(levels, trials, reason):
    assert withheld_reason({"n_levels": levels, "n_trials": trials}) == reason


def test_withheld_panels_are_not_drawn_and_the_page_says_why(tmp_path):
    """A thin subject's panel is withheld (one line per task says why), a well-sampled one is drawn."""
    trials = pd.concat(
        [_searcher("thin", 20, 19, 0), _searcher("rich", 600, 12, 1)], ignore_index=True
    )
    table, _ = psychometric_table(psychometric_levels(trials), bootstrap=0)
    assert set(table["subject"]) == {"thin", "rich"}
    saved = []

    def save(task, path):
        saved.append(task)
        return str(path)

    sections, tail = psychometric_sections(
        SimpleNamespace(psychometric=table), trials, tmp_path, save, lambda df: df.to_html()
    )
    assert len(sections) == 1 and len(saved) == 1
    drawn = saved[0].args[0]  # the rows the figure task draws: the rich subject only
    assert list(drawn["subject"]) == ["rich"]
    page = "".join(tail)
    assert "circle_sizes: 1 of 2 panels withheld: fewer than 3 trials per level" in page
    assert "(19 levels, 20 trials a group)" in page
    assert "withheld: about one trial per level (19 levels, 20 trials)" in page  # the table's row
    assert re.search(r"<td>drawn</td>", page)


@pytest.mark.slow
def test_the_demo_search_report_is_short_and_says_what_it_withholds(tmp_path):
    """The demo's search part (3 searchers, 20 trials a condition): 1-2 trials a level.

    Before issue 47 this page was 21,237 px tall at 1,280 px (176 psychometric
    panels of 20 trials over 10-19 levels, the 180-row table unfolded); now 3,984.
    """
    subjects = ["sim:parallel", "sim:serial", "sim:random"]
    bayesobs.sweep(ROOT / "tasks" / "visual_search.toml", subjects, tmp_path / "search", trials=20)
    scores = tmp_path / "scores"
    assert main(["score", str(tmp_path / "search"), "--out", str(scores), "--bootstrap", "0"]) == 0
    assert main(["report", str(scores), "--out", str(tmp_path / "report")]) == 0
    index = tmp_path / "report" / "index.html"
    page = index.read_text()
    assert not list((tmp_path / "report" / "figures").glob("psychometric_*.png"))
    for task in ("circle_sizes", "light_priors", "two_among_five"):
        assert re.search(rf"<li>{task}: (\d+) of \1 panels withheld: fewer than 3 trials", page)
    assert "<details><summary>All 180 rows</summary>" in page  # the fits, folded
    assert _height(index) <= 6000


@pytest.mark.slow
def test_the_demo_report_is_at_most_12000_px_tall(tmp_path):
    """`make demo`'s commands (two sweeps, score --bootstrap 30, report): 30,063 px before issue 47, 11,668 after."""
    search, run = tmp_path / "search", tmp_path / "run"
    bayesobs.sweep(
        ROOT / "tasks" / "visual_search.toml",
        ["sim:parallel", "sim:serial", "sim:random"],
        search,
        trials=20,
    )
    bayesobs.sweep(
        ROOT / "tasks" / "bayesbench.toml",
        ["sim:bayesian", "sim:antibayes", "sim:kalman", "sim:linear"],
        run,
    )
    scores = tmp_path / "scores"
    args = ["score", str(run), str(search), "--bootstrap", "30", "--out", str(scores)]
    assert main(args) == 0
    assert main(["report", str(scores), "--out", str(tmp_path / "report")]) == 0
    index = tmp_path / "report" / "index.html"
    assert "panels withheld: fewer than 3 trials per level" in index.read_text()
    assert _height(index) <= 12000


def test_psychometric_panel_titles_do_not_overlap():
    """Long group names wrap inside their panel instead of running into the next one."""
    trials = pd.concat(
        [
            _searcher(f"participant_{i}_with_a_long_name", 600, 12, i).assign(
                condition="noise_constant_long_condition"
            )
            for i in range(4)
        ],
        ignore_index=True,
    )
    table, _ = psychometric_table(psychometric_levels(trials), bootstrap=0)
    fig = psychometric_grid(table, psychometric_levels(trials))
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    boxes = [ax.title.get_window_extent(renderer) for ax in fig.axes if ax.get_visible()]
    width = fig.get_figwidth() * fig.dpi
    assert all(0 <= b.x0 and b.x1 <= width for b in boxes)
    assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
