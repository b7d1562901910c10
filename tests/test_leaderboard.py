"""The terminal leaderboard on data nobody here prepared: order, width, left-out columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesobs.cli import main
from bayesobs.leaderboard import (
    WIDTH,
    board,
    leaderboard_text,
    left_out,
    text_table,
)
from bayesobs.trials import natural_key

NUMBERS = ("A", "E", "C", "S", "BCS", "BCS_p", "C_p", "S_p")


def _bayesbench(subjects, values=None, boot=True):
    """A bayesbench.csv-like table: every number n/a unless given in ``values``."""
    rows = []
    for s in subjects:
        row = {"subject": s}
        for k in NUMBERS:
            v = (values or {}).get(s, {}).get(k, np.nan)
            row[k] = v
            if boot:
                row[f"{k}_mean"], row[f"{k}_lo"], row[f"{k}_hi"] = v, v - 0.01, v + 0.01
        rows.append(row)
    return pd.DataFrame(rows)


def test_natural_key_orders_numbers_as_numbers():
    ids = ["10", "2", "1", "p10", "p2", "P1", "sim:b"]
    assert sorted(ids, key=natural_key) == ["1", "2", "10", "P1", "p2", "p10", "sim:b"]


def test_human_data_without_bayesbench_numbers_is_one_line_per_fact_not_rows_of_na():
    """The issue: 14 rows of n/a ranked 1, 10, 11, ..., 2 in lines of 220+ characters."""
    subjects = [str(i) for i in range(1, 15)]
    bb = _bayesbench(subjects)
    missing = pd.DataFrame(
        [
            {"subject": s, "task": "", "component": "A", "reason": "no base-condition trials"}
            for s in subjects
        ]
    )
    text = leaderboard_text(bb, missing)
    lines = text.splitlines()
    assert max(map(len, lines)) <= WIDTH
    assert "n/a" not in text
    assert lines[0] == "no BayesBench number for any of the 14 subject(s)"
    said = " ".join(lines)
    assert "A (no base-condition trials)" in said
    for name in ("S", "E", "C", "BCS", "S_p", "BCS_p"):
        assert f" {name} (" in said or f"{name} (" in said


def test_columns_no_subject_has_are_left_out_and_ranks_tie_in_natural_order():
    vals = {
        "10": {"A": 0.9},
        "2": {"A": 0.7},
        "1": {"A": 0.8},
    }
    bb = _bayesbench(["10", "2", "1", "3"], vals)
    header, rows = board(bb)
    assert header == ["rank", "subject", "A", "A mean [68%]"]
    # no S anywhere: every subject ties on S and is listed in natural order
    assert [r[1] for r in rows] == ["1", "2", "3", "10"]
    lines = left_out(bb)
    assert len(lines) == 1 and lines[0].startswith("left out, no subject has them: ")
    assert "S (needs A, E and C)" in lines[0] and "A (" not in lines[0]


def test_rank_is_by_s_then_natural_order():
    vals = {s: {k: 0.5 for k in NUMBERS} for s in ("2", "10", "1")}
    vals["10"]["S"] = 0.9
    _, rows = board(_bayesbench(["2", "10", "1"], vals))
    assert [r[1] for r in rows] == ["10", "1", "2"]
    assert [r[0] for r in rows] == ["1", "2", "3"]


def test_long_names_and_every_number_fit_100_columns():
    vals = {s: {k: 0.5 for k in NUMBERS} for s in ("a" * 60, "sim:bayesian")}
    text = leaderboard_text(_bayesbench(list(vals), vals))
    lines = text.splitlines()
    assert max(map(len, lines)) <= WIDTH
    # every number and interval is still there, the long name cut in the middle
    for name in ("S", "A", "E", "C", "BCS", "S_p", "BCS_p"):
        assert f"{name} mean [68%]" in text
    assert "aaaa…aaaa" in text


def test_text_table_says_constant_columns_once_and_fits():
    t = pd.DataFrame(
        {
            "subject": ["sim:perceiver", "sim:guesser"],
            "task": ["percept_v", "percept_v"],
            "variant": ["x" * 80, "short"],
            "accuracy": ["0.91", "0.10"],
        }
    )
    text = text_table(t)
    lines = text.splitlines()
    assert lines[0].strip() == "task: percept_v"
    assert max(map(len, lines)) <= WIDTH
    assert "sim:perceiver" in text and "0.91" in text


@pytest.mark.parametrize("bootstrap", ["0", "5"])
def test_score_of_the_readme_human_recipe_fits_100_columns(
    shared_data, tmp_path, capsys, bootstrap
):
    """Glasauer & Shi through `bayesobs score` as the README maps it: readable terminal output."""
    csv = shared_data / "glasauer_shi_2021_vierordt" / "rep_randwalk_table.csv"
    args = ["score", str(csv), "--out", str(tmp_path / "s"), "--bootstrap", bootstrap]
    args += ["--map", "stimulus=dur", "--map", "response=repDur", "--map", "subject=NSub"]
    args += ["--map", "trial=NT", "--map", "condition=RandLevel", "--missing-where", "valid == 0"]
    assert main([*args, "--no-probe"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(map(len, lines)) <= WIDTH, max(lines, key=len)
    assert "n/a  n/a" not in out
    assert "no BayesBench number for any of the 14 subject(s)" in out
    if bootstrap != "0":  # subjects named in natural order
        assert "(1, 2, 3, 4 and 10 more)" in out


def test_perfect_observer_is_listed_in_missing_and_flagged(tmp_path, capsys):
    """Issue 28 item 7: exact answers make every RRE 0/0; say so instead of ranking silently."""
    from bayesobs.fits.synthetic import simulated_trials

    design = [
        ("line_ratio", m, c)
        for m in ("text", "image", "multimodal")
        for c in ("base", "steer_verbal")
    ]
    trials = simulated_trials(n_subjects=2, design=design, seed=3)
    perfect = trials[trials["subject"] == trials["subject"].iloc[0]].copy()
    perfect["subject"] = "perfect"
    perfect["response"] = perfect["stimulus"]
    pd.concat([trials, perfect]).to_csv(tmp_path / "t.csv", index=False)
    args = ["score", str(tmp_path / "t.csv"), "--out", str(tmp_path / "s"), "--no-probe"]
    assert main([*args, "--bootstrap", "4"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    missing = pd.read_csv(tmp_path / "s" / "missing.csv").fillna("")
    mine = missing[missing["subject"] == "perfect"]
    assert {"E", "S"} <= set(mine["component"])
    reason = mine.loc[mine["component"] == "E", "reason"].iat[0]
    assert "0/0" in reason and "zero error" in reason
    bb = pd.read_csv(tmp_path / "s" / "bayesbench.csv").set_index("subject")
    assert np.isnan(bb.loc["perfect", "E"]) and np.isnan(bb.loc["perfect", "S"])
    assert "warning: perfect: E and S not computed" in out
    assert "not ranked (listed after every subject with S)" in out
    # the others keep their numbers and no such line
    assert bb.drop(index="perfect")["S"].notna().all()


def test_every_point_and_mean_outside_its_interval_is_starred():
    """Issue 28 item 8: BCS_p_mean 14.93 outside [15, 15] went unstarred."""
    from bayesobs.leaderboard import board, interval_note

    bb = pd.DataFrame(
        {
            "subject": ["a", "b"],
            "BCS_p": [14.93, 3.0],
            "BCS_p_mean": [14.93, 3.0],
            "BCS_p_lo": [15.0, 2.0],
            "BCS_p_hi": [15.0, 4.0],
            "S": [0.9, 0.5],
            "S_mean": [0.8, 0.5],
            "S_lo": [0.7, 0.4],
            "S_hi": [0.85, 0.6],
        }
    )
    header, rows = board(bb)
    by = {r[1]: dict(zip(header, r, strict=True)) for r in rows}
    assert by["a"]["BCS_p"] == "14.9*"
    assert by["a"]["BCS_p mean [68%]"] == "14.9* [15.0, 15.0]"
    assert by["a"]["S"] == "0.900*" and by["a"]["S mean [68%]"] == "0.800 [0.700, 0.850]"
    assert "*" not in "".join(by["b"].values())
    note = interval_note("pooled")
    assert "68% percentile interval of the pooled run bootstrap" in note
    assert "not a confidence interval" in note


def test_report_figure_stars_points_outside_their_interval():
    from bayesobs.report.figures import bayesbench_scores, outside_tops

    bb = pd.DataFrame(
        {
            "subject": ["a", "b"],
            **{c: [0.9, 0.5] for c in ("A", "E", "C", "S")},
            **{f"{c}_mean": [0.8, 0.5] for c in ("A", "E", "C", "S")},
            **{f"{c}_lo": [0.7, 0.4] for c in ("A", "E", "C", "S")},
            **{f"{c}_hi": [0.85, 0.6] for c in ("A", "E", "C", "S")},
        }
    )
    assert outside_tops(bb, "S") == [0.9, None]
    fig = bayesbench_scores(bb)
    stars = [t for t in fig.axes[0].texts if t.get_text() == "*"]
    assert len(stars) == 4  # A, E, C and S of subject a
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("percentile" in lab for lab in labels) and any("outside" in lab for lab in labels)


@pytest.mark.parametrize("runs", [1, 2])
def test_stratified_intervals_beside_pooled_where_every_cell_has_two_runs(runs, tmp_path, capsys):
    from bayesobs.fits.synthetic import simulated_trials

    design = [("line_ratio", m, "base") for m in ("text", "image", "multimodal")]
    trials = simulated_trials(n_subjects=2, design=design, runs=runs, seed=1)
    trials.to_csv(tmp_path / "t.csv", index=False)
    args = ["score", str(tmp_path / "t.csv"), "--out", str(tmp_path / "s"), "--no-probe"]
    assert main([*args, "--bootstrap", "6"]) == 0
    out = capsys.readouterr().out
    bb = pd.read_csv(tmp_path / "s" / "bayesbench.csv")
    if runs == 1:  # nothing to stratify: pooled only
        assert not any(c.endswith("_strat_lo") for c in bb.columns)
        assert "strat [68%]" not in out
        return
    assert {"A_strat_lo", "A_strat_hi", "E_strat_lo"} <= set(bb.columns)
    # the same numbers as a stratified run of score
    args2 = ["score", str(tmp_path / "t.csv"), "--out", str(tmp_path / "st"), "--no-probe"]
    assert main([*args2, "--bootstrap", "6", "--resample", "stratified"]) == 0
    st = pd.read_csv(tmp_path / "st" / "bayesbench.csv")
    np.testing.assert_allclose(bb["A_strat_lo"], st["A_lo"], rtol=1e-12)
    np.testing.assert_allclose(bb["E_strat_hi"], st["E_hi"], rtol=1e-12)
    assert "A strat [68%]" in out and "stratified ones beside" in out
