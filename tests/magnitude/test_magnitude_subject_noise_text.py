"""The ``noise_text`` ablation: a controlled degradation of the text rendering."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import bayesobs
from bayesobs.cli import main
from bayesobs.magnitude.subject import read_text, text_noise_level
from bayesobs.run.ablations import condition, degrade_text

LINES = "A: " + "-" * 50 + "\nB: " + "-" * 20
MAZE = "Start at (0, 0). Move right 30, up 50, left 20."


def test_zero_strength_is_the_clean_text_and_the_format_survives():
    rng = np.random.default_rng(0)
    assert degrade_text(LINES, 0.0, rng) == LINES
    for _ in range(50):
        t = degrade_text(LINES, 0.3, rng)
        assert re.fullmatch(r"A: [-~]+\nB: [-~]+", t)
        m = degrade_text("-" * 20 + "0" + "-" * 30, 0.3, rng)
        assert m.count("0") == 1 and set(m) <= {"-", "~", "0"}
        d = degrade_text(MAZE, 0.3, rng)
        assert d.startswith("Start at (0, 0). Move right ")
    assert condition("noise_text").text_noise == pytest.approx(0.1)
    assert condition("noise_text", {"text_noise": 0.4}).text_noise == pytest.approx(0.4)


@pytest.mark.parametrize("s", [0.05, 0.2])
def test_strength_sets_the_jitter_and_the_visible_smudges(s):
    rng = np.random.default_rng(1)
    texts = [degrade_text(LINES, s, rng) for _ in range(4000)]
    a = np.array([len(re.findall(r"[-~]+", t)[0]) for t in texts])
    # relative SD of a run length is s (rounding adds ~ 1/sqrt(12) characters)
    assert np.std(a / 50) == pytest.approx(np.hypot(s, 0.29 / 50), rel=0.08)
    assert np.mean(a) == pytest.approx(50, abs=0.5)
    assert np.mean([text_noise_level(t) for t in texts]) == pytest.approx(s, rel=0.05)
    numbers = [
        int(n)
        for t in (degrade_text(MAZE, s, rng) for _ in range(4000))
        for n in re.findall(r"right ~?(\d+)", t)
    ]
    assert np.std(numbers) / 30 == pytest.approx(s, rel=0.1)
    assert text_noise_level(LINES) == 0.0
    # the simulated reader still reads the degraded text
    assert 0 < read_text("line_ratio", texts[0]) <= 1
    assert read_text("maze_distance", "Start at (0, 0). Move right ~3, up 4.") == 5.0


def test_noise_text_is_refused_where_the_text_has_no_runs_or_numbers(tmp_path, capsys):
    spec = tmp_path / "d.toml"
    spec.write_text(
        'task = "duration"\nseed = 1\ntrials = 5\nconditions = ["noise_text"]\n'
        '[[sessions]]\nname = "s"\nrange = [2.0, 8.0]\n'
    )
    assert main(["run", str(spec), "--subject", "sim:bayesian", "--out", str(tmp_path / "o")]) == 2
    assert "noise_text" in capsys.readouterr().err


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("nt")
    proto = root / "proto.toml"
    tasks = bayesobs.__file__.rsplit("/", 2)[0] + "/tasks"
    proto.write_text(
        f'[[experiment]]\nspec = "{tasks}/line_ratio.toml"\nmodalities = ["text", "image"]\n'
        'conditions = ["base", "noise_text", "noise_constant"]\n'
        f'[[experiment]]\nspec = "{tasks}/marker_location.toml"\nmodalities = ["text"]\n'
        'conditions = ["base", "noise_text"]\n'
    )
    out = root / "run"
    assert (
        main(
            [
                "sweep",
                str(proto),
                "--subject",
                "sim:bayesian",
                "--subject",
                "sim:linear",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "score",
                str(out),
                "--out",
                str(root / "score"),
                "--bootstrap",
                "10",
                "--no-probe",
                "--no-progress",
            ]
        )
        == 0
    )
    return root


def test_trials_log_the_degraded_text_and_its_strength(swept):
    t = pd.DataFrame(bayesobs.read_trials(swept / "run"))
    noisy = t[(t["condition"] == "noise_text") & (t["modality"] == "text")]
    assert (noisy["text_noise"] == 0.1).all()
    assert noisy["stimulus_text"].str.contains("~").mean() > 0.9
    clean = t[t["condition"] != "noise_text"]
    assert (clean["text_noise"] == 0).all()
    assert not clean["stimulus_text"].dropna().str.contains("~").any()
    # the same degraded text for every subject
    a = noisy[noisy["subject"] == "sim:bayesian"].sort_values(["task", "session", "trial"])
    b = noisy[noisy["subject"] == "sim:linear"].sort_values(["task", "session", "trial"])
    assert list(a["stimulus_text"]) == list(b["stimulus_text"])


def test_bayesian_w_prior_rises_under_noise_text_outside_the_bcs(swept):
    extra = pd.read_csv(swept / "score" / "bcs_extra.csv").set_index(["subject", "task"])
    bayes = extra.loc["sim:bayesian"]
    assert (bayes["delta_w"] > 0.1).all() and (bayes["s_p"] == 1).all()
    # a reader without a prior shows no shift where the rendering is unbiased (marker position)
    assert abs(extra.loc[("sim:linear", "marker_location"), "delta_w"]) < 0.05
    bcs = pd.read_csv(swept / "score" / "bcs.csv")
    assert "noise_text" not in set(bcs["ablation"])
    tasks = pd.read_csv(swept / "score" / "bcs_tasks.csv").set_index("subject")
    assert tasks.loc["sim:bayesian", "s_noise_text"] == 1
    bb = pd.read_csv(swept / "score" / "bayesbench.csv").set_index("subject")
    s = bcs.groupby("subject")["s"].sum()
    assert bb.loc["sim:bayesian", "BCS"] == s.loc["sim:bayesian"]


def test_report_runs_on_noise_text_trials(swept):
    assert (
        main(["report", str(swept / "run"), "--out", str(swept / "rep"), "--bootstrap", "0"]) == 0
    )
    assert (swept / "rep" / "index.html").exists()
