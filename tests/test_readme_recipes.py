"""Every human-data recipe of the docs runs end to end: fit, score, report.

The command lines are read from the pages themselves (docs/human-data.md, the
fenced blocks of the sections below), so an edited page is what is tested.  Paths in a recipe
name the data set's own files; ``SHARED_PATHS`` says where they are under the
shared data folder.  A recipe a user can copy and that crashes fails here.
"""

from __future__ import annotations

import colorsys
import html
import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from docs_pages import commands, fenced_blocks, page, section
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
# recipe path prefix -> where the data set keeps it under the shared data folder
SHARED_PATHS = {
    "rep_randwalk_table.csv": "glasauer_shi_2021_vierordt/rep_randwalk_table.csv",
    "experiment2/": "qu_shi_precision_weighting/raw_psychopy_csv/experiment2/",
    "numexpt-fb/": "vul_numerosity_estimation/numexpt-fb/",
    "numexpt/": "vul_numerosity_estimation/numexpt/",
    "EP32_NC_VN.csv": "gong_bayesneg_line_bisection/EP32_NC_VN.csv",
}


def cli_recipes() -> list[list[str]]:
    """Each ``bayesobs fit`` command line of the recipe sections, as an argument list."""
    out = []
    for name, heading in SECTIONS:
        for block in fenced_blocks(section(page(name), heading)):
            for line in commands(block, "bayesobs fit "):
                out.append(shlex.split(line)[2:])
    return out


def library_snippet() -> str:
    (block,) = fenced_blocks(page("library.md"), "python")
    return block


RECIPES = cli_recipes()


def test_the_docs_have_their_human_data_recipes():
    firsts = [r[0] for r in RECIPES]
    assert firsts == [
        "rep_randwalk_table.csv",
        "experiment2/*.csv",
        "numexpt-fb/*.csv",
        "EP32_NC_VN.csv",
        "numexpt/*.csv",
    ]
    assert "build_report" in library_snippet()


def _inputs(args: list[str], data: Path) -> tuple[list[str], list[str]]:
    """The recipe's input files (under the shared folder) and its options without ``--out``."""
    k = next(i for i, a in enumerate(args) if a.startswith("--"))
    files = []
    for pattern in args[:k]:
        prefix = next(p for p in SHARED_PATHS if pattern.startswith(p))
        where = data / (SHARED_PATHS[prefix] + pattern[len(prefix) :])
        found = sorted(where.parent.glob(where.name))
        assert found, f"{pattern}: nothing at {where}"
        files += [str(f) for f in found]
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
@pytest.mark.parametrize("recipe", RECIPES, ids=[r[0] for r in RECIPES])
def test_docs_recipe_runs_fit_score_report(recipe, shared_data, tmp_path, capsys):
    files, opts = _inputs(recipe, shared_data)
    assert main(["fit", *files, "--out", str(tmp_path / "fit"), *opts]) == 0
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
