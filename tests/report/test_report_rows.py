"""Figures stay readable at 20-100 subjects: every subject identifiable (issue 47)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from PIL import Image

from bayesobs.cli import main
from bayesobs.fits.predictions import predictions
from bayesobs.report import figures as F
from bayesobs.report.render import DPI
from bayesobs.report.rows import MANY
from bayesobs.scores import SCORED_TRIALS, Scores

PAGE = 1168  # px: the report's 1,200 px column less its padding, at a 1,280 px window


def tables(n: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A summary and a BayesBench table of ``n`` subjects with bootstrap intervals."""
    rng = np.random.default_rng(seed)
    subjects = [f"S{i:02d}" for i in range(1, n + 1)]
    summary = pd.DataFrame({"subject": subjects})
    for col, scale in (("nrmse", 0.5), ("p_bayesian", 1.0)):
        v = rng.uniform(0, scale, n)
        summary[col], summary[f"{col}_lo"], summary[f"{col}_hi"] = v, v - 0.05, v + 0.05
    bb = pd.DataFrame({"subject": subjects})
    for col in ("A", "E", "C", "S"):
        v = rng.uniform(0.2, 1.0, n)
        bb[col], bb[f"{col}_mean"], bb[f"{col}_lo"], bb[f"{col}_hi"] = v, v, v - 0.05, v + 0.05
    bb["S_p"] = bb["S"]
    return summary, bb


def identifiable(fig, subjects) -> None:
    """Each subject named once per figure in a label at least 7 px tall at the page's width,
    no two names overlapping; a legend never gives two subjects one colour."""
    fig.set_dpi(DPI)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    scale = min(1.0, PAGE / (fig.get_figwidth() * DPI))  # the browser shrinks a wider image
    names = {}
    for t in fig.findobj(lambda a: hasattr(a, "get_text") and a.get_text() in subjects):
        if t.get_visible() and t.get_window_extent(renderer).height:
            names.setdefault(t.get_text(), t.get_window_extent(renderer))
    assert set(names) == set(subjects), f"{len(names)} of {len(subjects)} subjects named"
    boxes = sorted(names.values(), key=lambda b: b.y0)
    assert min(b.height for b in boxes) * scale >= 7
    assert all(
        a.y1 <= b.y0 + 1 or a.x1 <= b.x0 or b.x1 <= a.x0 for a, b in itertools.pairwise(boxes)
    )
    for legend in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        colours = [
            to_hex(h.get_color())
            for h, t in zip(legend.legend_handles, legend.get_texts(), strict=True)
            if t.get_text() in subjects
        ]
        assert len(colours) == len(set(colours)), "two subjects share a colour in one legend"


@pytest.mark.parametrize("n", [3, MANY, MANY + 1, 20, 72, 100])
def test_every_subject_is_identifiable_in_the_summary_figures(n):
    summary, bb = tables(n)
    subjects = list(summary["subject"])
    identifiable(F.summary(summary, bb), subjects)
    identifiable(F.bayesbench_scores(bb), subjects)


def test_many_subjects_keep_their_numbers_and_intervals():
    """72 subjects: one row each, the bars are the scores, the lines their intervals."""
    _, bb = tables(72)
    fig = F.bayesbench_scores(bb, caveats={"S05": {"E"}})
    assert [ax.get_title() for ax in fig.axes][:4] == [
        "accuracy A",
        "efficiency E",
        "consistency C",
        "score S",
    ]
    order = bb.sort_values("S", ascending=False)
    ax = fig.axes[3]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list(order["subject"])
    widths = [p.get_width() for p in ax.patches]
    np.testing.assert_allclose(widths, order["S"], rtol=1e-12)
    hatched = [p.get_hatch() for p in fig.axes[1].patches]
    assert hatched.count("////") == 1
    assert hatched[list(order["subject"]).index("S05")] == "////"


@pytest.mark.slow
def test_a_72_subject_report_names_every_subject(shared_data, tmp_path):
    """Gong et al.'s line bisection: 30 controls, 42 patients, 32 marks each."""
    wide = pd.read_csv(shared_data / "gong_bayesneg_line_bisection" / "EP32_NC_VN.csv")
    wide["stimulus"] = (wide["L"] + wide["R"]) / 2
    subjects = [c for c in wide.columns if c[:2] in ("NC", "VN")]
    long = wide.melt(id_vars=["stimulus"], value_vars=subjects, var_name="subject")
    long = long.rename(columns={"value": "response"}).assign(task="line_bisection")
    long["trial"] = long.groupby("subject").cumcount()
    long.to_csv(tmp_path / "t.csv", index=False)
    scores = tmp_path / "scores"
    assert main(["score", str(tmp_path / "t.csv"), "--out", str(scores), "--bootstrap", "0"]) == 0
    assert main(["report", str(scores), "--out", str(tmp_path / "r")]) == 0
    figures = tmp_path / "r" / "figures"
    for name in ("fig5_summary.png", "fig6_bayesbench.png"):
        with Image.open(figures / name) as im:
            w, h = im.size
        assert h * min(1.0, PAGE / w) >= 72 * 10, name  # at least 10 px a subject on the page
    # the report's other figures of every subject: one titled panel each
    res = Scores.from_folder(scores)
    pred = predictions(pd.read_parquet(scores / SCORED_TRIALS), res.fits)
    (panel,) = F.response_panels(pred)
    identifiable(F.responses_grid(pred, **panel), subjects)
    cells = [(s, "line_bisection", panel["modality"], panel["condition"]) for s in subjects]
    identifiable(F.trajectory_grid(pred, cells), subjects)
    identifiable(F.summary(res.summary, res.bayesbench), subjects)
    identifiable(F.bayesbench_scores(res.bayesbench), subjects)
