"""Issue 31 section 3: reference rows (random responder, ideal observer, humans) in the leaderboard."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import truncnorm

from bayesobs.cli import main
from bayesobs.fits.synthetic import TASK_RANGES
from bayesobs.scores import accuracy_table, score
from bayesobs.scores.references import (
    ideal_responses,
    posterior_mean,
    random_responses,
    reference_trials,
    subjects_only,
)
from bayesobs.trials import normalize_trials

TASKS = ("line_ratio", "marker_location")
CONDITIONS = (
    "base",
    "steer_verbal",
    "steer_numeric",
    "noise_constant",
    "noise_gradual",
    "context_long",
)
B = 8


def runner_like(n: int = 30, seed: int = 0, subjects=("llm",)) -> pd.DataFrame:
    """Trials shaped like a sweep: the same stimuli in every modality and condition.

    Each subject is a static observer (noise sd 0.05, w_prior 0.3 in base and
    0.45 under the ablations); the image trials of the noise conditions log a
    blur of 6 px.  Rows carry the ``prompt_id`` that ``bayesobs run`` logs,
    except a participant's (``P...``), as the web app's rows.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for task in TASKS:
        for si, (lo, hi) in enumerate(TASK_RANGES[task]):
            x = rng.uniform(lo, hi, n)
            for subject in subjects:
                for cond in CONDITIONS:
                    w = 0.3 if cond == "base" else 0.45
                    for mod in ("text", "image", "multimodal"):
                        blur = 6.0 if cond.startswith("noise") and mod != "text" else 0.0
                        y = (1 - w) * x + w * x.mean() + 0.05 * rng.standard_normal(n)
                        rows.append(
                            pd.DataFrame(
                                {
                                    "subject": subject,
                                    "task": task,
                                    "modality": mod,
                                    "condition": cond,
                                    "session": f"s{si}",
                                    "run": 0,
                                    "trial": np.arange(n),
                                    "stimulus": x,
                                    "response": y,
                                    "range_low": lo,
                                    "range_high": hi,
                                    "blur_sigma": blur,
                                    "prompt_id": None if subject.startswith("P") else "p0",
                                }
                            )
                        )
    return pd.concat(rows, ignore_index=True)


@pytest.fixture(scope="module")
def scored():
    t = runner_like()
    with_refs = score(t, bootstrap=B, seed=3, probe=False, references=True)
    without = score(t, bootstrap=B, seed=3, probe=False)
    return t, with_refs.bayesbench, without.bayesbench


def test_reference_rows_are_present_and_marked(scored):
    _, bb, _ = scored
    refs = bb.set_index("subject")["reference"]
    assert refs["reference:random"] == "random"
    assert refs["reference:ideal"] == "ideal"
    assert refs["llm"] == ""
    assert list(subjects_only(bb)["subject"]) == ["llm"]


def test_subjects_rows_are_identical_with_and_without_references(scored):
    _, bb, plain = scored
    assert "reference" not in plain
    mine = subjects_only(bb).drop(columns="reference")
    assert list(mine.columns) == list(plain.columns)
    assert mine.to_csv(index=False) == plain.to_csv(index=False)


def test_random_is_at_the_floor_and_ideal_at_the_top(scored):
    _, bb, _ = scored
    r = bb.set_index("subject")
    rnd, ideal, llm = r.loc["reference:random"], r.loc["reference:ideal"], r.loc["llm"]
    for name in ("A", "E", "C", "S"):
        assert rnd[name] < ideal[name], name
    # the subject (noise 0.05) is less accurate than the ideal observer, far better than random
    assert rnd["A"] < llm["A"] < ideal["A"]
    # a uniform guess: NRMSE^2 = 1 + Var(U) / mean((c - x)^2) = 2 for uniform stimuli -> A = 0.293
    assert rnd["A"] == pytest.approx(1 - np.sqrt(2) / 2, abs=0.03)
    # the ideal observer's w_prior never falls: ties (steering and context change nothing it
    # measures) count +1 and blur raises it; 2 tasks x 5 ablations = 10 pairs
    assert ideal["BCS"] == 10
    assert rnd["BCS"] < 10


def test_random_responder_nrmse_matches_the_closed_form_of_a_uniform_guess():
    t = normalize_trials(runner_like(n=200, seed=1))
    t = t[t["subject"] == "llm"].assign(response=lambda d: random_responses(d, seed=5))
    acc = accuracy_table(t)
    for row in acc.itertuples(index=False):
        cell = t[(t["task"] == row.task) & (t["modality"] == row.modality)]
        cell = cell[cell["condition"] == row.condition]
        a, b = cell["range_low"].to_numpy(), cell["range_high"].to_numpy()
        c, x = (a + b) / 2, cell["stimulus"].to_numpy()
        expected = np.sqrt(np.sum((b - a) ** 2 / 12 + (c - x) ** 2) / np.sum((c - x) ** 2))
        assert row.nrmse == pytest.approx(expected, rel=0.08)


def test_ideal_posterior_mean_is_the_truncated_normal_mean_under_a_uniform_prior():
    rng = np.random.default_rng(0)
    n = 50
    lo, hi = np.full(n, 0.3), np.full(n, 0.7)
    m = rng.uniform(0.2, 0.8, n)
    t = pd.DataFrame({"task": "line_ratio", "modality": "text", "stimulus": m})
    t = t.assign(range_low=0.3, range_high=0.7, subject="s", condition="base", session="a")
    post = posterior_mean(t, m, np.full(n, np.nan), lo, hi, np.full(n, "text"))
    sd = 0.05 * 0.5  # sim's text noise on line_ratio
    expected = truncnorm.mean((lo - m) / sd, (hi - m) / sd, loc=m, scale=sd)
    np.testing.assert_allclose(post, expected, atol=2e-4)


def test_ideal_answers_the_same_stimulus_alike_in_every_condition_and_order():
    t = normalize_trials(runner_like(n=20))
    t = t[t["subject"] == "llm"].reset_index(drop=True)
    rev = t[(t["condition"] == "base")].copy()
    rev["condition"] = "context_reversed"
    rev["trial"] = rev.groupby(["task", "modality", "session", "run"])["trial"].transform(
        lambda s: s.max() - s
    )
    both = normalize_trials(pd.concat([t, rev], ignore_index=True))
    y = pd.Series(ideal_responses(both, seed=2), index=both.index)
    key = ["task", "modality", "session", "stimulus"]
    base = both["condition"] == "base"
    for cond in ("steer_verbal", "context_reversed"):
        a = both[base].assign(y=y[base]).sort_values(key)["y"].to_numpy()
        sel = both["condition"] == cond
        b = both[sel].assign(y=y[sel]).sort_values(key)["y"].to_numpy()
        np.testing.assert_allclose(a, b)
    # blur makes the image measurement noisier: its answers move toward the session mean
    img = both["modality"] == "image"
    err = (y - both["stimulus"]).abs()
    assert err[img & (both["condition"] == "noise_constant")].mean() > err[img & base].mean()


def test_reference_trials_use_the_subjects_cells():
    t = normalize_trials(runner_like(n=10, subjects=("a", "b")))
    refs = reference_trials(t, seed=0)
    assert set(refs["subject"]) == {"reference:random", "reference:ideal"}
    one = refs[refs["subject"] == "reference:random"]
    mine = t[t["subject"] == "a"]
    cols = ["task", "modality", "condition", "session", "run", "trial", "stimulus"]
    pd.testing.assert_frame_equal(
        one[cols].reset_index(drop=True), mine[cols].reset_index(drop=True)
    )


def test_score_cli_shows_references_apart_and_pools_humans(tmp_path, capsys):
    t = runner_like(n=12, subjects=("llm", "P1"))
    path = tmp_path / "t.csv"
    t.to_csv(path, index=False)
    args = [str(path), "--bootstrap", "4", "--no-probe"]
    assert main(["score", *args, "--out", str(tmp_path / "a"), "--humans", "P*"]) == 0
    text = capsys.readouterr().out
    lines = [ln.split() for ln in text.splitlines()]
    firsts = {ln[1]: ln[0] for ln in lines if len(ln) > 2 and ln[0] in ("1", "2", "ref")}
    assert firsts["llm"] == "1"
    for name in ("reference:random", "reference:ideal", "reference:humans", "P1"):
        assert firsts[name] == "ref"
    assert "ref = a reference row, not ranked" in text
    bb = pd.read_csv(tmp_path / "a" / "bayesbench.csv", keep_default_na=False)
    kinds = dict(zip(bb["subject"], bb["reference"], strict=True))
    assert kinds == {
        "llm": "",
        "P1": "human",
        "reference:random": "random",
        "reference:ideal": "ideal",
        "reference:humans": "humans",
    }
    # one participant pooled is that participant (its runs renamed, nothing else)
    r = bb.set_index("subject")
    for name in ("A", "E", "S"):
        assert float(r.loc["reference:humans", name]) == pytest.approx(float(r.loc["P1", name]))
    assert main(["score", *args, "--out", str(tmp_path / "b"), "--no-references"]) == 0
    plain = pd.read_csv(tmp_path / "b" / "bayesbench.csv")
    assert "reference" not in plain and len(plain) == 2
