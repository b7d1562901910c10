"""Figures take tables and an optional ax; the report opens offline with every link resolving."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import bayesobs
from bayesobs.api import predictions
from bayesobs.cli import main
from bayesobs.report import figures as F
from bayesobs.scores import bias_variance, cue_predictions, score, with_baseline
from bayesobs.trials import normalize_trials


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "exp"
    bayesobs.sweep(
        Path(__file__).resolve().parents[2] / "tasks" / "bayesbench.toml",
        ["sim:bayesian", "sim:linear"],
        out,
        trials=12,
    )
    return out


@pytest.fixture(scope="module")
def tables(run):
    trials = with_baseline(normalize_trials(bayesobs.read_trials(run)))
    res = score(trials, bootstrap=4, seed=0)
    return trials, res


def test_each_figure_draws_into_a_given_ax(tables):
    trials, res = tables
    pred = predictions(trials, res.fits)
    fig = Figure()
    ax = fig.subplots()
    assert F.regression_to_the_mean(pred, "sim:bayesian", "line_ratio", "multimodal", ax=ax) is fig
    assert len(ax.lines) >= 4 and ax.get_xlabel().startswith("stimulus")
    fig = Figure()
    ax = fig.subplots()
    assert F.trajectory(pred, "sim:linear", "maze_distance", "image", ax=ax) is fig
    assert ax.get_legend() is not None
    fig = Figure()
    axes = fig.subplots(1, 3)
    assert (
        F.steering(
            bias_variance(trials),
            res.evidence,
            res.cue,
            "sim:bayesian",
            "marker_location",
            axes=axes,
        )
        is fig
    )
    cue_pred = cue_predictions(trials)
    for f in (
        F.cue_fits(cue_pred, "sim:linear", "line_ratio"),
        F.summary(res.summary, res.bayesbench),
        F.bayesbench_scores(res.bayesbench),
        F.bcs_table(res.bcs_tasks),
    ):
        assert isinstance(f, Figure)


def test_predictions_are_the_fitted_model(tables):
    trials, res = tables
    pred = predictions(trials, res.fits, variants=("static",))
    cell = pred[
        (pred["subject"] == "sim:linear")
        & (pred["task"] == "duration")
        & (pred["condition"] == "base")
    ]
    import json

    row = res.fits[
        (res.fits["subject"] == "sim:linear")
        & (res.fits["task"] == "duration")
        & (res.fits["condition"] == "base")
        & (res.fits["variant"] == "static")
    ]
    w = json.loads(row["params"].iat[0])["w_prior"]
    for _, g in cell.groupby("session"):
        expect = (1 - w) * g["stimulus"] + w * g["stimulus"].mean()
        pd.testing.assert_series_equal(g["pred_static"], expect, check_names=False, rtol=1e-12)


def test_bias_variance_adds_up(tables):
    trials, _ = tables
    bv = bias_variance(trials)
    row = bv.iloc[3]
    d = trials[
        (trials[["subject", "task", "modality", "condition"]] == row.iloc[:4].to_numpy()).all(
            axis=1
        )
    ]
    e = (d["response"] - d["stimulus"]).dropna()
    assert row["mse"] == pytest.approx((e**2).mean(), rel=1e-12)


def test_report_from_a_run_folder_is_offline_and_complete(run, tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["report", str(run), "--out", str(out), "--bootstrap", "3"]) == 0
    index = out / "index.html"
    assert str(index) in capsys.readouterr().out
    page = index.read_text()
    refs = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert refs and not any(r.startswith(("http:", "https:", "//")) for r in refs)
    assert "<link" not in page and "<script" not in page  # no external assets of any kind
    for r in refs:
        assert (out / r).exists(), r
    assert "figures/fig1_regression_0.png" in page  # one grid of subjects per task
    for fig in (
        "fig2_trajectory",
        "fig4_cue",
        "fig5_summary",
        "fig6_bayesbench",
    ):
        assert f"figures/{fig}.png" in page
    assert "Leaderboard" in page and "Provenance" in page and "format_version" in page
    assert (out / "tables" / "bayesbench.csv").exists()


@pytest.fixture(scope="module")
def scored_report(run, tmp_path_factory):
    """``score`` outputs of the run and the report built from them."""
    tmp = tmp_path_factory.mktemp("scored")
    scores = tmp / "scores"
    assert main(["score", str(run), "--out", str(scores), "--bootstrap", "3", "--no-probe"]) == 0
    assert main(["report", str(scores), "--out", str(tmp / "rep")]) == 0
    return scores, tmp / "rep"


def test_report_reuses_score_outputs(scored_report):
    scores, rep = scored_report
    ref = pd.read_csv(scores / "bayesbench.csv")
    got = pd.read_csv(rep / "tables" / "bayesbench.csv")
    pd.testing.assert_frame_equal(got, ref)  # reused, not recomputed


def test_report_leaderboard_has_intervals_legend_and_the_robust_scores(scored_report):
    from bayesobs.leaderboard import INTERVAL_NOTE, LEGEND

    scores, rep = scored_report
    page = (rep / "index.html").read_text()
    board = page[page.index("<h2>Leaderboard</h2>") :]
    board = board[: board.index("<h2>", 5)]
    for col in ("S", "S mean [68%]", "BCS", "BCS mean [68%]", "S_p", "BCS_p mean [68%]"):
        assert f"<th>{col}</th>" in board, col
    legend = re.findall(r"<dt>([^<]+)</dt>", board)
    assert set(legend) >= {"S", "A", "E", "C", "BCS", "BCS_p"}
    assert html.escape(LEGEND["BCS"]) in board
    assert html.escape(INTERVAL_NOTE) in board
    ref = pd.read_csv(scores / "bayesbench.csv").sort_values("S", ascending=False)
    r = ref.iloc[0]
    assert f"<td>{r['S_mean']:.3f} [{r['S_lo']:.3f}, {r['S_hi']:.3f}]</td>" in board
    assert f"{r['BCS_p_mean']:.1f} [{r['BCS_p_lo']:.1f}, {r['BCS_p_hi']:.1f}]" in board


def test_bayesbench_figure_draws_intervals_where_they_are():
    """A point estimate outside its interval: the line spans [lo, hi], not a clipped bar."""
    import numpy as np

    bb = pd.DataFrame(
        [
            {
                "subject": "m",
                "A": 0.8,
                "E": 0.9,
                "C": 0.8,
                "S": 0.915,
                "BCS": 9.0,
                "A_mean": 0.8,
                "A_lo": 0.79,
                "A_hi": 0.81,
                "E_mean": 0.9,
                "E_lo": 0.85,
                "E_hi": 0.95,
                "C_mean": 0.66,
                "C_lo": 0.6,
                "C_hi": 0.733,
                "S_mean": 0.87,
                "S_lo": 0.845,
                "S_hi": 0.9,
                "S_p": 0.7,
            }
        ]
    )
    fig = Figure()
    ax = fig.subplots()
    F.bayesbench_scores(bb, ax=ax)
    spans = [tuple(np.round(seg[:, 1], 6)) for c in ax.collections for seg in c.get_segments()]
    assert (0.845, 0.9) in spans and (0.6, 0.733) in spans
    markers = {(ln.get_marker(), tuple(np.round(ln.get_ydata(), 6))) for ln in ax.lines}
    assert ("o", (0.87,)) in markers and ("D", (0.7,)) in markers


def _mapped_human_csv(path: Path) -> int:
    """Trials under a lab's own column names, with invalid rows; returns the rows kept."""
    assert main(["simulate", "--out", str(path), "--subjects", "2", "--trials", "12"]) == 0
    t = pd.read_csv(path)
    t = t.rename(columns={"stimulus": "dur", "response": "repDur", "subject": "NSub"})
    t["valid"] = (t.index % 7 != 3).astype(int)
    t.to_csv(path, index=False)
    return int(t["valid"].sum())


@pytest.mark.slow
def test_report_rebuilds_mapped_trials_from_the_score_folder_anywhere(tmp_path, monkeypatch):
    lab, elsewhere = tmp_path / "lab", tmp_path / "elsewhere"
    lab.mkdir()
    elsewhere.mkdir()
    kept = _mapped_human_csv(lab / "raw.csv")
    monkeypatch.chdir(lab)  # a relative input, as typed in the lab's folder
    opts = [
        "--map",
        "stimulus=dur",
        "--map",
        "response=repDur",
        "--map",
        "subject=NSub",
        "--where",
        "valid == 1",
        "--bootstrap",
        "2",
        "--no-probe",
    ]
    assert main(["score", "raw.csv", "--out", "scores", *opts]) == 0
    monkeypatch.chdir(elsewhere)
    assert main(["report", str(lab / "scores"), "--out", "rep"]) == 0
    page = (elsewhere / "rep" / "index.html").read_text()
    assert f"<p class=m>{kept} trials · 2 subject(s)" in page  # mapped and filtered, as scored
    # a score folder from before trials.parquet: its recorded --where is not evaluated again
    (lab / "scores" / "trials.parquet").unlink()
    assert main(["report", str(lab / "scores"), "--out", "rep2"]) == 2
    assert not (elsewhere / "rep2" / "index.html").exists()
    # plain renames are applied: the manifest's inputs are read again, unfiltered
    man = lab / "scores" / "score_manifest.json"
    record = json.loads(man.read_text())
    del record["where"]
    man.write_text(json.dumps(record))
    assert main(["report", str(lab / "scores"), "--out", "rep3"]) == 0
    n_all = len(pd.read_csv(lab / "raw.csv"))
    assert n_all > kept
    assert (
        f"<p class=m>{n_all} trials · 2 subject(s)"
        in (elsewhere / "rep3" / "index.html").read_text()
    )


@pytest.fixture(scope="module")
def base_only(tmp_path_factory):
    """Human-study-shaped data: every modality, base condition only (no ablations)."""
    from bayesobs.run.runner import run_task

    out = tmp_path_factory.mktemp("human") / "exp"
    run_task(
        Path(__file__).resolve().parents[2] / "tasks" / "line_ratio.toml",
        ["sim:bayesian", "sim:linear"],
        out,
        None,
        ["base"],
        12,
        1,
    )
    trials = with_baseline(normalize_trials(bayesobs.read_trials(out)))
    return out, trials, score(trials, bootstrap=3, seed=0)


def test_report_leaves_out_what_base_only_data_cannot_support(base_only, tmp_path):
    run, trials, res = base_only
    assert (
        F.steering(bias_variance(trials), res.evidence, res.cue, "sim:linear", "line_ratio") is None
    )
    fig = F.summary(res.summary, res.bayesbench)
    assert [ax.get_ylabel() for ax in fig.axes] == ["P(Bayesian)", "RRE (Bayes oracle)"]  # no BCS
    assert all(ax.lines for ax in fig.axes)  # every drawn panel has data
    fig = F.bayesbench_scores(res.bayesbench)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "score S" not in labels and "consistency C" not in labels and "accuracy A" in labels
    assert main(["report", str(run), "--out", str(tmp_path / "rep"), "--bootstrap", "2"]) == 0
    page = (tmp_path / "rep" / "index.html").read_text()
    figs = {p.name for p in (tmp_path / "rep" / "figures").iterdir()}
    assert not any(f.startswith(("fig3_steering", "fig6_bcs_table")) for f in figs)
    assert {"fig1_regression_0.png", "fig5_summary.png", "fig6_bayesbench.png"} <= figs
    left = page[page.index("<h2>Left out</h2>") :]
    assert "Steering and noise: the trials hold only base" in left
    assert "BCS and consistency C" in left and "<h2>BCS per task</h2>" not in page


def _few_search_trials() -> pd.DataFrame:
    """Coordinate answers, few per set size: mostly near the target, sometimes a far miss."""
    import numpy as np

    rng = np.random.default_rng(3)
    n = 24
    far = rng.uniform(size=n) < 0.3
    error = np.where(far, rng.uniform(420, 560, n), rng.uniform(0, 6, n))
    return pd.DataFrame(
        {
            "subject": "p1",
            "task": "circle_sizes",
            "condition": "c",
            "answer": "coords",
            "set_size": np.repeat([2, 8, 16, 32], 6),
            "correct": (~far).astype(int),
            "error_px": error,
            "modality": "image",
        }
    )


def test_search_error_intervals_respect_their_bounds_and_legends_sit_outside():
    from scipy import stats

    from bayesobs.search.scores import search_accuracy

    t = _few_search_trials()
    g = t.groupby("set_size")["error_px"]
    half = stats.t.ppf(0.975, g.count() - 1) * g.std() / np.sqrt(g.count())
    assert ((g.mean() - half) < 0).any() or ((g.mean() + half) > 565.7).any()  # a t interval's flaw
    b = search_accuracy(t)
    for row in b.itertuples():
        e = t.loc[t["set_size"] == row.set_size, "error_px"]
        assert e.min() <= row.error_lo <= row.error_px <= row.error_hi <= e.max()
    fig = Figure(figsize=(5, 3))
    ax = fig.subplots()
    F.search_curves(pd.concat([b, b.assign(condition="d")]), "p1", "circle_sizes", "coords", ax=ax)
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1  # outside the data
    assert not [c for c in ax.collections if type(c).__name__ == "FillBetweenPolyCollection"]
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= b["error_hi"].max()


def test_search_table_comes_after_the_figures(base_only, tmp_path):
    import numpy as np

    run, _, _ = base_only
    s = _few_search_trials()
    s = pd.concat([s, s.assign(answer="cell", error_px=np.nan)], ignore_index=True)
    cells = pd.Series(["1,1", "1,2", "2,1", "2,2"] * 12)
    s = s.assign(target_cell=cells, response_cell=cells.where(s["correct"] == 1, "1,1"))
    s = s.assign(
        stimulus=s["set_size"],
        response=s["correct"],
        paradigm="search",
        session="search",
        run=(s["answer"] == "cell").astype(int),
        trial=s.index % 24,
    )
    s.to_csv(tmp_path / "search.csv", index=False)
    assert (
        main(
            [
                "report",
                str(run),
                str(tmp_path / "search.csv"),
                "--out",
                str(tmp_path / "r"),
                "--bootstrap",
                "2",
            ]
        )
        == 0
    )
    page = (tmp_path / "r" / "index.html").read_text()
    heads = re.findall(r"<h2>([^<]+)</h2>", page)
    table = heads.index("Visual search: set-size effect")
    assert table > heads.index("Summary") and table > heads.index("Visual search: circle_sizes")
