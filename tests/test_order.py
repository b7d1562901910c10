"""Issue 47 item 13: wide tables (a column per participant) and rows in no presentation order."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import pytest

from bayesobs.cli import main
from bayesobs.order import NOTE, grouped_runs
from bayesobs.trials import RUN_KEYS, read_trials

ORDER_HINT = "if it is not, pass --no-order"


def wide_table(seed=0, reps=6) -> pd.DataFrame:
    """Like Gong et al.'s file: rows grouped by stimulus (reps each), one column per participant."""
    rng = np.random.default_rng(seed)
    x = np.repeat([-20.0, 0.0, 20.0, 40.0], reps)
    cols = {f"A{i}": np.round(0.8 * x + rng.normal(0, 3, len(x)), 1) for i in (1, 2, 10)}
    return pd.DataFrame({"L": x - 40, "R": x + 40, **cols})


def test_wide_table_is_read_one_row_per_participant_and_row(tmp_path):
    w = wide_table()
    w.to_csv(tmp_path / "w.csv", index=False)
    t = read_trials(tmp_path / "w.csv", mapping={"stimulus": "(L + R) / 2"}, wide="A*")
    assert sorted(t["subject"].unique()) == ["A1", "A10", "A2"]
    for s in ("A1", "A2", "A10"):
        mine = t[t["subject"] == s].sort_values("trial")
        # the independent reference: the column itself, in file order
        np.testing.assert_array_equal(mine["response"].to_numpy(), w[s].to_numpy())
        np.testing.assert_array_equal(mine["stimulus"].to_numpy(), ((w["L"] + w["R"]) / 2))
        assert list(mine["trial"]) == list(range(len(w)))


def test_wide_pattern_matching_nothing_is_one_line_and_exit_2(tmp_path, capsys):
    wide_table().to_csv(tmp_path / "w.csv", index=False)
    args = ["fit", str(tmp_path / "w.csv"), "--out", str(tmp_path / "o"), "--wide", "P*"]
    assert main([*args, "--map", "stimulus=L"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--wide 'P*': no column matches (columns: L, R, A1" in err


def test_grouped_rows_get_a_hint_and_no_order_is_said_where_sequential_outputs_are(
    tmp_path, capsys
):
    wide_table().to_csv(tmp_path / "w.csv", index=False)
    args = ["fit", str(tmp_path / "w.csv"), "--wide", "A*", "--map", "stimulus=(L + R) / 2"]
    # without --no-order: the grouped rows are noticed, the order is still read as real
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "the stimuli of 3 of 3 run(s) are sorted or grouped by value" in out
    assert ORDER_HINT in out
    assert "no_trial_order" not in pd.read_csv(tmp_path / "a" / "evidence.csv")
    # with it: evidence.csv flags every cell and the summary says what it means
    assert main([*args, "--out", str(tmp_path / "b"), "--no-order"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    ev = pd.read_csv(tmp_path / "b" / "evidence.csv")
    assert ev["no_trial_order"].astype(bool).all()
    assert f"3 of 3 cell(s) with {NOTE}" in out
    assert ORDER_HINT not in out


def test_score_and_report_say_no_trial_order(tmp_path, capsys):
    from bayesobs.report import build_report

    wide_table(reps=10).to_csv(tmp_path / "w.csv", index=False)
    args = ["score", str(tmp_path / "w.csv"), "--out", str(tmp_path / "s"), "--no-probe"]
    args += ["--wide", "A*", "--map", "stimulus=(L + R) / 2", "--map", "task='marker_location'"]
    assert main([*args, "--bootstrap", "0", "--no-order"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert NOTE in out
    page = " ".join(build_report([tmp_path / "s"], tmp_path / "r", bootstrap=0).read_text().split())
    trajectory = page.index("Trial-by-trial responses")
    assert f"Caution: {html.escape(NOTE)}" in page[trajectory : trajectory + 2000]
    assert html.escape(NOTE) in page[page.index("<h2>Factor evidence") :]


def test_grouped_runs_counts_sorted_and_blocked_runs_not_shuffled_ones():
    rng = np.random.default_rng(1)
    x = np.repeat([1.0, 2.0, 3.0], 8)
    runs = {"blocked": x, "sorted": np.sort(rng.uniform(0, 1, 20)), "shuffled": rng.permutation(x)}
    t = pd.concat(
        [pd.DataFrame({"run": k, "stimulus": v}) for k, v in runs.items()], ignore_index=True
    )
    assert grouped_runs(t, ["run"]) == (2, 3)


def test_gong_line_bisection_wide_and_without_order(shared_data, tmp_path, capsys):
    """Gong et al.: 72 participants' columns, 32 rows grouped by line configuration."""
    csv = shared_data / "gong_bayesneg_line_bisection" / "EP32_NC_VN.csv"
    if not csv.is_file():
        pytest.skip(f"{csv} absent (shared data only beside the repository)")
    args = ["fit", str(csv), "--wide", "NC*,VN*", "--map", "stimulus=(L + R) / 2"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "72 run(s), 32 trials each" in out
    assert "the stimuli of 72 of 72 run(s) are sorted or grouped by value" in out
    assert main([*args, "--out", str(tmp_path / "b"), "--no-order"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    ev = pd.read_csv(tmp_path / "b" / "evidence.csv")
    assert ev["subject"].nunique() == 72 and ev["no_trial_order"].astype(bool).all()
    assert f"72 of 72 cell(s) with {NOTE}" in out
    # the control group's mean marks (README quick check: 0.06, 19.23, -20.32, -1.13 mm)
    t = read_trials(csv, mapping={"stimulus": "(L + R) / 2"}, wide="NC*")
    assert len(t) == 30 * 32
    assert grouped_runs(t, list(RUN_KEYS)) == (30, 30)
