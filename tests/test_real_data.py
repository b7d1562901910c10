"""Published human data sets (../shared/data): the fits reproduce known effects.

Skipped with a reason when the shared data folder is not beside the repo.
"""

from __future__ import annotations

import json

import pandas as pd

import bayesobs
from bayesobs.trials import parse_mapping


def _w_prior(fits: pd.DataFrame) -> pd.DataFrame:
    s = fits[fits["variant"] == "static"].copy()
    s["w_prior"] = s["params"].map(lambda p: json.loads(p)["w_prior"])
    return s.pivot(index="subject", columns="condition", values="w_prior")


def test_glasauer_shi_random_walk_lowers_w_prior(shared_data):
    """Vierordt: central tendency is weaker in random-walk than randomized order."""
    trials = bayesobs.read_trials(
        shared_data / "glasauer_shi_2021_vierordt" / "rep_randwalk_table.csv",
        mapping=parse_mapping(
            ["stimulus=dur", "response=repDur", "subject=NSub", "run=NB", "condition=RandLevel"]
        ),
        missing_where="valid == 0",
    )
    assert len(trials) == 11200 and trials["response"].isna().sum() == 85
    fits, _ = bayesobs.fit(trials)
    w = _w_prior(fits)  # condition 1 = random walk, 2 = randomized
    assert len(w) == 14
    lower = int((w["1"] < w["2"]).sum())
    assert lower >= 10, f"w_prior lower in random walk for only {lower}/14 subjects"


def test_qu_shi_low_coherence_raises_w_prior(shared_data):
    """Precision weighting: noisier motion (coherence 0.3) pulls more to the prior."""
    folder = shared_data / "qu_shi_precision_weighting" / "raw_psychopy_csv" / "experiment2"
    trials = bayesobs.read_trials(
        sorted(folder.glob("*.csv")),
        mapping=parse_mapping(
            [
                "stimulus=TimeDur",
                "response=keyDuration / 1000",  # ms -> s
                "subject=participant",
                "condition=Coherence1",
            ]
        ),
        where="TrialType == 'Time'",
        missing_where="keyDuration >= 9999",  # PsychoPy time-out sentinel
    )
    assert trials["subject"].nunique() == 22
    fits, _ = bayesobs.fit(trials)
    w = _w_prior(fits)
    higher = int((w["0.3"] > w["0.7"]).sum())
    assert higher >= 14, f"w_prior higher at coherence 0.3 for only {higher}/22 subjects"


def test_vul_numerosity_is_fitted_best_by_weber_variants(shared_data):
    """Dot-count estimates (one file per participant): log (Weber) observers fit best."""
    folder = shared_data / "vul_numerosity_estimation" / "numexpt"
    trials = bayesobs.read_trials(
        sorted(folder.glob("*.csv")),
        mapping=parse_mapping(
            ["stimulus=num_dots", "response=answer1", "subject=@file", "task='numerosity'"]
        ),
    )
    assert trials["subject"].nunique() == 24 and len(trials) == 24 * 300
    _, evidence = bayesobs.fit(trials)
    weber = evidence[evidence["factor"] == "weber"]["p"]
    assert (weber > 0.5).mean() >= 0.75, f"Weber evidence > 0.5 for {(weber > 0.5).sum()}/24"


def test_glasauer_shi_corrected_recipe_keeps_each_sequence_whole(shared_data):
    """README recipe: one run per 400-trial sequence, trials in NT order (not run=NB)."""
    trials = bayesobs.read_trials(
        shared_data / "glasauer_shi_2021_vierordt" / "rep_randwalk_table.csv",
        mapping=parse_mapping(
            ["stimulus=dur", "response=repDur", "subject=NSub", "trial=NT", "condition=RandLevel"]
        ),
        missing_where="valid == 0",
    )
    assert trials.groupby(["subject", "condition"])["run"].nunique().max() == 1
    assert trials.groupby(["subject", "condition"]).size().eq(400).all()
    fits, _ = bayesobs.fit(trials)
    w = _w_prior(fits)
    assert int((w["1"] < w["2"]).sum()) >= 12
