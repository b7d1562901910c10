"""Accuracy, BCS and the BayesBench composite: closed forms, known subjects, bootstrap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesobs.bootstrap import run_draws
from bayesobs.cli import main
from bayesobs.fits.observers import simulate
from bayesobs.fits.synthetic import TASK_RANGES
from bayesobs.scores import accuracy_batch, score, with_baseline
from bayesobs.scores.bcs import BCS_ABLATIONS, sign_score
from bayesobs.trials import normalize_trials, parse_mapping, read_trials

CONTRACT = {
    "accuracy": ["subject", "task", "modality", "condition", "nrmse"],
    "cue": [
        "subject",
        "task",
        "condition",
        "nrmse_text",
        "nrmse_image",
        "nrmse_multimodal",
        "alpha_text",
        "w_text_non_oracle",
        "w_text_oracle",
        "nrmse_equal",
        "nrmse_bayes_non_oracle",
        "nrmse_bayes_oracle",
        "rre_equal",
        "rre_bayes_non_oracle",
        "rre_bayes_oracle",
    ],
    "bcs": ["subject", "task", "ablation", "w_base", "w_ablation", "s"],
    "bayesbench": ["subject", "A", "E", "C", "S", "BCS"]
    + [f"{m}_{s}" for m in ("A", "E", "C", "S", "BCS") for s in ("mean", "lo", "hi")],
}


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
                        frames.append(
                            pd.DataFrame(
                                {
                                    "subject": subject,
                                    "task": task,
                                    "modality": mod,
                                    "condition": cond,
                                    "session": f"s{s}",
                                    "run": r,
                                    "stimulus": x,
                                    "response": simulate("static", p, x, rng=rng),
                                    "range_low": lo,
                                    "range_high": hi,
                                }
                            )
                        )
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
    t = normalize_trials(
        pd.DataFrame(
            {
                "session": ["a"] * 3 + ["b"] * 2,
                "stimulus": [1, 2, 5, 10, 20],
                "response": [1, 2, 3, 4, 5],
            }
        )
    )
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


@pytest.mark.slow
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


# ------------------------------------------------ METHOD §9: s_p and BCS_p
TASKS = ("line_ratio", "marker_location", "maze_distance")


def static_protocol(w_base, w_ablation, sigma=0.01, seed=0, n_per=30, runs=1, subject="s"):
    """Plain numpy static observers: ``y = (1 - w) x + w * run mean + noise``.

    Three visual tasks x three modalities, base + the five BCS ablations; the
    noise SD is ``sigma`` times the session's range midpoint.
    """
    rng = np.random.default_rng(seed)
    frames = []
    for task in TASKS:
        for cond in ("base", *BCS_ABLATIONS):
            w = w_base if cond == "base" else w_ablation
            for s, (lo, hi) in enumerate(TASK_RANGES[task]):
                for r in range(runs):
                    x = rng.uniform(lo, hi, n_per)
                    for mod in ("text", "image", "multimodal"):
                        y = (1 - w) * x + w * x.mean() + rng.normal(0, sigma * (lo + hi) / 2, n_per)
                        frames.append(
                            pd.DataFrame(
                                {
                                    "subject": subject,
                                    "task": task,
                                    "modality": mod,
                                    "condition": cond,
                                    "session": f"s{s}",
                                    "run": r,
                                    "trial": np.arange(n_per),
                                    "stimulus": x,
                                    "response": y,
                                    "range_low": lo,
                                    "range_high": hi,
                                }
                            )
                        )
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize(("w", "sigma"), [(0.0, 0.0), (-0.05, 0.01)])
def test_prior_less_observer_gets_the_maximum_paper_bcs_but_no_bcs_p(w, sigma):
    """w_prior = 0 everywhere (exactly, or fitted below 0 and clipped): every shift is a tie.

    The paper's rule counts a tie +1, so BCS = +15 and C = 1 (the flaw is
    reproduced); the robust score counts it 0.
    """
    res = score(static_protocol(w, w, sigma=sigma), bootstrap=30, probe=False)
    b = res.bayesbench.iloc[0]
    assert (res.bcs["w_base"] == 0).all() and (res.bcs["w_ablation"] == 0).all()
    assert b["BCS"] == 15 and b["C"] == 1
    # tolerance: a replicate can only move off the tie if a resampled fit leaves 0,
    # which here needs a > 4 SD excursion of the noise
    assert abs(b["BCS_p"]) <= 0.5
    assert b["C_p"] == pytest.approx((b["BCS_p"] + 15) / 30, rel=1e-12)
    assert (res.bcs["s_p"].abs() <= 0.1).all()


@pytest.mark.slow
def test_noisy_prior_less_observer_bcs_p_is_centred_on_zero():
    """w = 0 with 1% noise: fitted weights scatter around 0 (half clipped).

    Over 12 independent data sets the paper's BCS averages well above 0 (ties
    count +1) while BCS_p averages 0.  Tolerance: BCS_p of one data set has an
    SD of about 3 here, so the mean of 12 has an SE of about 0.9; we allow 2.5.
    """
    paper, robust = [], []
    for seed in range(12):
        res = score(
            static_protocol(0.0, 0.0, sigma=0.01, seed=seed, n_per=20), bootstrap=30, probe=False
        )
        paper.append(res.bayesbench["BCS"].iat[0])
        robust.append(res.bayesbench["BCS_p"].iat[0])
    assert abs(np.mean(robust)) <= 2.5, robust
    assert all(-15 <= r <= 15 for r in robust)


@pytest.mark.parametrize(("w_abl", "expected"), [(0.55, 15), (0.05, -15)])
def test_bcs_p_of_reliable_shifts(w_abl, expected):
    """A Bayesian observer whose prior weight reliably rises gets BCS_p = +15 (falls: -15).

    Tolerance 0.5: the shift (0.25) is about 25 SE of a fitted weight here, so
    no replicate should flip.
    """
    res = score(static_protocol(0.3, w_abl, runs=2), bootstrap=30, probe=False)
    b = res.bayesbench.iloc[0]
    assert b["BCS"] == expected
    assert abs(b["BCS_p"] - expected) <= 0.5
    assert b["S_p"] == pytest.approx((b["A"] + b["E"] + (b["BCS_p"] + 15) / 30) / 3, rel=1e-12)
    assert abs(b["BCS_p_mean"] - expected) <= 0.5


def _static_w(cell, runs):
    """Closed-form static w_prior (clipped to [0, 1]) of the listed runs, each run in order."""
    num = den = 0.0
    for sess, run in runs:
        d = cell[(cell["session"] == sess) & (cell["run"] == run)]
        x, y = d["stimulus"].to_numpy(), d["response"].to_numpy()
        num += ((y - x) * (x.mean() - x)).sum()
        den += ((x.mean() - x) ** 2).sum()
    return min(max(num / den, 0.0), 1.0)


def test_s_p_and_bcs_p_match_a_plain_loop_over_replicates():
    """s_p = mean over the §7 replicates of the robust sign, from first principles."""
    df = static_protocol(0.0, 0.0, sigma=0.01, seed=3, n_per=20, runs=2)
    B, seed = 12, 4
    res = score(df, bootstrap=B, seed=seed, probe=False)
    t = normalize_trials(df)
    draws = run_draws(t, B, seed)
    s_p = []
    for r in res.bcs.itertuples(index=False):
        mod = BCS_ABLATIONS[r.ablation]
        signs = []
        for b in range(B):
            w = {}
            for cond in ("base", r.ablation):
                cell = t[
                    (t["subject"] == r.subject)
                    & (t["task"] == r.task)
                    & (t["modality"] == mod)
                    & (t["condition"] == cond)
                ]
                run_keys, idx = draws[(r.subject, r.task, cond)]
                w[cond] = _static_w(cell, [run_keys[k] for k in idx[b]])
            d = w[r.ablation] - w["base"]
            signs.append(0.0 if w[r.ablation] > 0.9 or abs(d) < 1e-9 else np.sign(d))
        s_p.append(np.mean(signs))
    np.testing.assert_allclose(res.bcs["s_p"], s_p, atol=1e-12)
    assert len(set(np.round(s_p, 6))) > 2  # a non-trivial mix of signs and ties
    b = res.bayesbench.iloc[0]
    assert b["BCS_p"] == pytest.approx(sum(s_p), abs=1e-12)
    assert b["C_p"] == pytest.approx((sum(s_p) + 15) / 30, abs=1e-12)
    assert b["S_p"] == pytest.approx((b["A"] + b["E"] + b["C_p"]) / 3, abs=1e-12)
    tasks = res.bcs.assign(ref=s_p).groupby("task")["ref"].sum()
    np.testing.assert_allclose(res.bcs_tasks.set_index("task")["bcs_p"], tasks, atol=1e-12)


def test_robust_scores_are_empty_without_bootstrap(tmp_path):
    df = static_protocol(0.3, 0.55)
    res = score(df, bootstrap=0, probe=False)
    assert res.bcs["s_p"].isna().all() and res.bcs_tasks["bcs_p"].isna().all()
    b = res.bayesbench.iloc[0]
    assert np.isnan(b["BCS_p"]) and np.isnan(b["C_p"]) and np.isnan(b["S_p"])
    assert b["BCS"] == 15  # the paper's number is there, the robust one is not
    df.to_csv(tmp_path / "t.csv", index=False)
    assert (
        main(
            [
                "score",
                str(tmp_path / "t.csv"),
                "--out",
                str(tmp_path / "o"),
                "--bootstrap",
                "0",
                "--no-probe",
            ]
        )
        == 0
    )
    text = (tmp_path / "o" / "bayesbench.csv").read_text().splitlines()
    # the reference rows' marker (issue 31) is the one column after the robust ones
    assert text[0].split(",")[-4:] == ["BCS_p", "C_p", "S_p", "reference"]
    assert text[1].endswith(",,,,")  # blank, never a copy of the paper's numbers


def test_robust_columns_come_after_the_contract_columns():
    res = score(static_protocol(0.3, 0.55), bootstrap=4, probe=False)
    cols = list(res.bayesbench.columns)
    assert cols[: len(CONTRACT["bayesbench"])] == CONTRACT["bayesbench"]
    extra = ["BCS_p", "C_p", "S_p"] + [
        f"{m}_{s}" for m in ("BCS_p", "C_p", "S_p") for s in ("mean", "lo", "hi")
    ]
    assert cols[len(CONTRACT["bayesbench"]) :] == extra
    assert list(res.bcs.columns[: len(CONTRACT["bcs"])]) == CONTRACT["bcs"]
    assert res.bcs.columns[-1] == "s_p"


# ------------------------------------------- degenerate subjects and designs
def constant_and_good(runs=1):
    good = static_protocol(0.3, 0.55, subject="good", runs=runs)
    const = static_protocol(0.3, 0.55, subject="const", seed=5, runs=runs).assign(response=0.5)
    return pd.concat([good, const], ignore_index=True)


@pytest.mark.slow
def test_constant_responder_is_flagged_without_numpy_warnings(tmp_path, capfd):
    """An LLM that always answers 0.5: no raw numpy warnings, rows in missing.csv, flags."""
    import warnings

    data = tmp_path / "t.parquet"
    constant_and_good().to_parquet(data)
    out = tmp_path / "o"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["score", str(data), "--out", str(out), "--bootstrap", "3"]) == 0
    assert [str(w.message) for w in caught] == []
    captured = capfd.readouterr()
    assert "Warning" not in captured.err and "Warning" not in captured.out
    missing = pd.read_csv(out / "missing.csv")
    const = missing[missing["reason"] == "constant responses"]
    assert (const["subject"] == "const").all()
    assert const["component"].str.startswith("fits ").sum() == 54  # every cell of the subject
    assert (const["component"] == "cue probe base").sum() == 3
    assert "warning: const: constant responses in 9 base cell(s)" in captured.out
    assert "warning: good" not in captured.out
    # no BCS from cells without evidence (METHOD §8), for the paper's score and the robust one
    bcs = pd.read_csv(out / "bcs.csv")
    assert bcs.loc[bcs["subject"] == "const", ["s", "s_p"]].isna().all().all()
    assert bcs.loc[bcs["subject"] == "good", "s"].eq(1).all()
    # the report flags the subject too
    from bayesobs.report import build_report

    page = build_report([out], tmp_path / "rep").read_text()
    assert "const: constant responses in 9 base cell(s)" in page


def test_cells_with_fewer_than_two_runs_per_session_type_are_warned_about(tmp_path, capsys):
    res = score(constant_and_good().query("subject == 'good'"), bootstrap=3, probe=False)
    few = res.missing[res.missing["reason"] == "fewer than 2 runs per session type"]
    assert sorted(few["task"]) == sorted(TASKS)
    assert (few["component"] == "bootstrap: 18 of 18 cells").all()
    # 2 runs of every session type, or no bootstrap: nothing to warn about
    res = score(static_protocol(0.3, 0.55, runs=2), bootstrap=3, probe=False)
    assert not res.missing["reason"].str.contains("runs per session type").any()
    res = score(static_protocol(0.3, 0.55), bootstrap=0, probe=False)
    assert not res.missing["reason"].str.contains("runs per session type").any()
    # one run of one session type is enough to be warned about
    df = static_protocol(0.3, 0.55, runs=2)
    df = df[
        ~(
            (df["task"] == "line_ratio")
            & (df["condition"] == "base")
            & (df["session"] == "s1")
            & (df["run"] == 1)
        )
    ]
    res = score(df, bootstrap=3, probe=False)
    few = res.missing[res.missing["reason"] == "fewer than 2 runs per session type"]
    assert list(few["task"]) == ["line_ratio"] and list(few["component"]) == [
        "bootstrap: 3 of 18 cells"
    ]
    df.to_csv(tmp_path / "t.csv", index=False)
    assert (
        main(
            [
                "score",
                str(tmp_path / "t.csv"),
                "--out",
                str(tmp_path / "o"),
                "--bootstrap",
                "3",
                "--no-probe",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "warning: fewer than 2 runs per session type in 3 cell(s) of 1 subject(s) (s)" in out


def test_leaderboard_shows_point_estimate_bootstrap_mean_interval_and_why():
    """The issue's example: S 0.915 [0.845, 0.900] and BCS 9.0 [3.0, 7.0]."""
    from bayesobs.cli import leaderboard
    from bayesobs.leaderboard import INTERVAL_NOTE

    row = {
        "subject": "m",
        "A": 0.8,
        "E": 0.95,
        "C": 0.7,
        "S": 0.915,
        "BCS": 9.0,
        "A_mean": 0.8,
        "A_lo": 0.79,
        "A_hi": 0.81,
        "E_mean": 0.9,
        "E_lo": 0.85,
        "E_hi": 0.99,
        "C_mean": 0.66,
        "C_lo": 0.6,
        "C_hi": 0.733,
        "S_mean": 0.87,
        "S_lo": 0.845,
        "S_hi": 0.9,
        "BCS_mean": 4.8,
        "BCS_lo": 3.0,
        "BCS_hi": 7.0,
        "BCS_p": 2.5,
        "C_p": 17.5 / 30,
        "S_p": 0.78,
        "BCS_p_mean": 2.5,
        "BCS_p_lo": 1.0,
        "BCS_p_hi": 4.0,
        "C_p_mean": 0.58,
        "C_p_lo": 0.53,
        "C_p_hi": 0.63,
        "S_p_mean": 0.76,
        "S_p_lo": 0.74,
        "S_p_hi": 0.79,
    }
    text = leaderboard(pd.DataFrame([row]))
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100
    # the point estimates side by side, then the bootstrap intervals in blocks
    assert lines[0].split() == ["rank", "subject", "S", "A", "E", "C", "BCS", "S_p", "BCS_p"]
    row1 = ["1", "m", "0.915*", "0.800", "0.950", "0.700", "9.0*", "0.780", "2.5"]
    assert lines[1].split() == row1  # * only where the point is outside its interval
    assert lines[2] == ""
    blocks = "\n".join(lines[3:])
    assert "S mean [68%]" in lines[3] and "0.870 [0.845, 0.900]" in lines[4]
    assert "4.8 [3.0, 7.0]" in blocks and "2.5 [1.0, 4.0]" in blocks
    assert all(ln.startswith("1 ") for ln in lines[3:] if ln and ln[0].isdigit())
    note = " ".join(ln.strip() for ln in lines if ln.startswith(("note:", "  ")))
    assert note == f"note: {INTERVAL_NOTE}"
    assert "sums of signs" in INTERVAL_NOTE or "add up signs" in INTERVAL_NOTE
