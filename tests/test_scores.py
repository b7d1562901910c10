"""Accuracy, BCS and the BayesBench composite: closed forms, known subjects, bootstrap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesobs.bootstrap import run_draws
from bayesobs.cli import main
from bayesobs.observers import simulate
from bayesobs.scores import BCS_ABLATIONS, accuracy_batch, score, sign_score, with_baseline
from bayesobs.synthetic import TASK_RANGES
from bayesobs.trials import normalize_trials, parse_mapping, read_trials

CONTRACT = {
    "accuracy": ["subject", "task", "modality", "condition", "nrmse"],
    "cue": ["subject", "task", "condition", "nrmse_text", "nrmse_image", "nrmse_multimodal",
            "alpha_text", "w_text_non_oracle", "w_text_oracle", "nrmse_equal",
            "nrmse_bayes_non_oracle", "nrmse_bayes_oracle", "rre_equal", "rre_bayes_non_oracle",
            "rre_bayes_oracle"],
    "bcs": ["subject", "task", "ablation", "w_base", "w_ablation", "s"],
    "bayesbench": ["subject", "A", "E", "C", "S", "BCS"]
    + [f"{m}_{s}" for m in ("A", "E", "C", "S", "BCS") for s in ("mean", "lo", "hi")],
}  # fmt: skip


def protocol(w_base, w_ablation, seed=0, n_per=40, runs=1, subject="s", sigma=0.01):
    """Static observers on three visual tasks x three modalities, base + BCS ablations."""
    rng = np.random.default_rng(seed)
    frames = []
    for task in ("line_ratio", "marker_location", "maze_distance"):
        for cond in ("base", *BCS_ABLATIONS):
            w = w_base if cond == "base" else w_ablation
            for s, (lo, hi) in enumerate(TASK_RANGES[task]):
                for r in range(runs):
                    x = rng.uniform(lo, hi, n_per)
                    for mod in ("text", "image", "multimodal"):
                        p = {"w_prior": w, "sigma": sigma * (hi + lo)}
                        frames.append(pd.DataFrame({
                            "subject": subject, "task": task, "modality": mod, "condition": cond,
                            "session": f"s{s}", "run": r, "stimulus": x,
                            "response": simulate("static", p, x, rng=rng),
                            "range_low": lo, "range_high": hi}))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def test_nrmse_matches_direct_computation():
    t = with_baseline(normalize_trials(protocol(0.3, 0.4)))
    t.loc[t.index[::17], "response"] = np.nan
    cells, nrmse = accuracy_batch(t)
    for i, row in cells.iterrows():
        d = t[
            (t[["subject", "task", "modality", "condition"]] == row.to_numpy()).all(axis=1)
        ].dropna(subset=["response"])
        mid = (d["range_low"] + d["range_high"]) / 2
        ref = np.sqrt(np.mean((d["response"] - d["stimulus"]) ** 2)) / np.sqrt(
            np.mean((mid - d["stimulus"]) ** 2)
        )
        np.testing.assert_allclose(nrmse[i, 0], ref, rtol=1e-10)


def test_baseline_falls_back_to_session_midpoint():
    t = normalize_trials(pd.DataFrame({"session": ["a"] * 3 + ["b"] * 2, "stimulus": [1, 2, 5, 10, 20],
                                       "response": [1, 2, 3, 4, 5]}))  # fmt: skip
    np.testing.assert_allclose(with_baseline(t)["baseline"], [3, 3, 3, 15, 15])


@pytest.mark.parametrize(("w_abl", "expected"), [(0.55, 15), (0.05, -15), (0.95, 0)])
def test_bcs_of_known_subjects(w_abl, expected):
    res = score(protocol(0.3, w_abl), bootstrap=0, probe=False)
    assert len(res.bcs) == 15
    assert res.bayesbench["BCS"].iat[0] == expected
    if w_abl > 0.9:
        assert (res.bcs["s"] == 0).all()
    np.testing.assert_allclose(res.bayesbench["C"].iat[0], (expected + 15) / 30)
    assert (res.bcs_tasks["bcs"] == expected / 3).all()
    # the magnitude-aware extra: delta_w is the fitted shift
    np.testing.assert_allclose(res.bcs["delta_w"], w_abl - 0.3, atol=0.05)


def test_sign_rule():
    np.testing.assert_array_equal(
        sign_score([0.3, 0.3, 0.3, 0.3, np.nan], [0.3, 0.2, 0.91, 0.9, 0.5]), [1, -1, 0, 1, np.nan]
    )


def test_composite_is_mean_of_components():
    res = score(protocol(0.3, 0.5), bootstrap=0, probe=False)
    b = res.bayesbench.iloc[0]
    np.testing.assert_allclose(b["S"], (b["A"] + b["E"] + b["C"]) / 3)
    acc = res.accuracy[res.accuracy["condition"] == "base"]
    a_task = acc.assign(a=np.clip(1 - acc["nrmse"] / 2, 0, 1)).groupby("task")["a"].mean()
    np.testing.assert_allclose(b["A"], a_task.mean())
    cue = res.cue[res.cue["condition"] == "base"]
    np.testing.assert_allclose(
        b["E"], ((cue["rre_bayes_oracle"] + cue["rre_bayes_non_oracle"]) / 2).mean()
    )


def test_bootstrap_seeded_ordered_and_covering():
    df = protocol(0.3, 0.5, runs=3, seed=1, sigma=0.03)
    a = score(df, bootstrap=12, seed=7, probe=False)
    b = score(df, bootstrap=12, seed=7, probe=False)
    for name in ("accuracy", "cue", "bcs", "bayesbench", "evidence"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))
    acc = a.accuracy
    inside = (acc["nrmse_lo"] <= acc["nrmse"]) & (acc["nrmse"] <= acc["nrmse_hi"])
    assert inside.mean() > 0.8
    c = score(df, bootstrap=12, seed=8, probe=False)
    assert not np.allclose(a.accuracy["nrmse_mean"], c.accuracy["nrmse_mean"])


def test_accuracy_replicate_equals_resampled_runs_in_order():
    """Replicate b = NRMSE of the drawn runs concatenated, each run's trials in order."""
    t = with_baseline(normalize_trials(protocol(0.3, 0.5, runs=3, seed=2, sigma=0.03)))
    B = 5
    cells, nrmse = accuracy_batch(t, B, seed=3)
    draws = run_draws(t, B, 3)
    for i in (0, 7, 30):
        key = cells.iloc[i]
        cell = t[(t[["subject", "task", "modality", "condition"]] == key.to_numpy()).all(axis=1)]
        run_keys, idx = draws[(key["subject"], key["task"], key["condition"])]
        for b in range(B):
            parts = [
                cell[(cell["session"] == run_keys[k][0]) & (cell["run"] == run_keys[k][1])]
                for k in idx[b]
            ]
            rep = pd.concat(parts)
            assert all((p["trial"].diff().dropna() == 1).all() for p in parts)  # order kept
            ref = np.sqrt(
                ((rep["response"] - rep["stimulus"]) ** 2).sum()
                / ((rep["baseline"] - rep["stimulus"]) ** 2).sum()
            )
            np.testing.assert_allclose(nrmse[i, b + 1], ref, rtol=1e-10)


def test_missing_components_are_reported():
    df = protocol(0.3, 0.5)
    df = df[~((df["modality"] == "image") & (df["condition"] == "noise_gradual"))]
    df = df[df["task"] != "maze_distance"]
    res = score(df, bootstrap=0, probe=False)
    assert len(res.bcs) == 8  # 2 tasks x 4 ablations
    msgs = res.missing["component"] + ": " + res.missing["reason"]
    assert msgs.str.contains("BCS noise_gradual: no image noise_gradual trials").sum() == 2
    assert res.bayesbench["BCS"].iat[0] == 8


def test_score_cli_writes_contract_tables_and_leaderboard(tmp_path, capsys):
    df = pd.concat([protocol(0.3, 0.5, subject="good"), protocol(0.3, 0.1, subject="anti", seed=4)])
    df.to_parquet(tmp_path / "t.parquet")
    assert (
        main(
            ["score", str(tmp_path / "t.parquet"), "--out", str(tmp_path / "o"), "--bootstrap", "5"]
        )
        == 0
    )
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("BayesBench leaderboard (bootstrap B=5")
    assert lines[2].split()[1] == "good" and lines[3].split()[1] == "anti"
    for name, cols in CONTRACT.items():
        table = pd.read_csv(tmp_path / "o" / f"{name}.csv")
        assert list(table.columns[: len(cols)]) == cols, name
    for name in ("fits", "evidence", "bcs_tasks", "bcs_agreement", "cue_probe", "missing"):
        assert (tmp_path / "o" / f"{name}.csv").exists()
    probe = pd.read_csv(tmp_path / "o" / "cue_probe.csv")
    assert len(probe) == 6 and probe["r2_random_forest"].between(0, 1).all()


def test_qu_shi_low_coherence_is_a_bayes_consistent_noise_ablation(shared_data):
    """Humans: coherence 0.3 vs 0.7 as constant noise; most shift w_prior upwards."""
    folder = shared_data / "qu_shi_precision_weighting" / "raw_psychopy_csv" / "experiment2"
    t = read_trials(
        sorted(folder.glob("*.csv")),
        mapping=parse_mapping(
            [
                "stimulus=TimeDur",
                "response=keyDuration / 1000",
                "subject=participant",
                "condition=Coherence1",
            ]
        ),
        where="TrialType == 'Time'",
        missing_where="keyDuration >= 9999",
    )
    t["condition"] = t["condition"].map({"0.7": "base", "0.3": "noise_constant"})
    t["modality"] = "image"
    res = score(t, bootstrap=10, probe=False)
    assert len(res.bcs) == 22
    consistent = int((res.bcs["delta_w"] > 0).sum())  # s = 0 above 0.9 hides the sign
    assert consistent >= 14, f"only {consistent}/22 subjects Bayes-consistent"
