"""`bayesobs.fits.synthetic` (the known-observer trial tables) and `bcs.bcs_agreement` values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bayesobs
from bayesobs.fits.fitting import decode_params
from bayesobs.fits.synthetic import SESSIONS, TASK_RANGES, bayesbench_design, simulated_trials
from bayesobs.scores.bcs import bcs_agreement


def test_design_is_the_papers_87_cells():
    design = bayesbench_design()
    assert len(design) == 87 and len(set(design)) == 87
    assert ("duration", "text", "base") in design and ("duration", "image", "base") not in design
    assert len(bayesbench_design(include_context_none=True)) == 87 + 9


@pytest.mark.slow
def test_tables_respect_ranges_and_pair_modalities():
    t = simulated_trials(n_subjects=2, trials_per_session=15, runs=2, seed=3)
    assert len(t) == 2 * 87 * 3 * 2 * 15
    for (task, session), g in t.groupby(["task", "session"]):
        lo, hi = TASK_RANGES[task][SESSIONS.index(session)]
        assert g["stimulus"].between(lo, hi).all()
        assert (g["range_low"] == lo).all() and (g["range_high"] == hi).all()
    # cue combination pairs modalities: identical stimulus sequences within a condition
    keys = ["subject", "task", "condition", "session", "run", "trial"]
    spread = t.groupby(keys)["stimulus"].agg(lambda s: s.max() - s.min())
    assert (spread == 0).all()
    # seeded
    pd.testing.assert_frame_equal(
        t, simulated_trials(n_subjects=2, trials_per_session=15, runs=2, seed=3)
    )


def test_static_subjects_raise_w_prior_under_the_ablations():
    design = [("line_ratio", "multimodal", c) for c in ("base", "steer_verbal", "context_short")]
    t = simulated_trials(n_subjects=1, trials_per_session=120, seed=0, design=design)
    fits, _ = bayesobs.fit(t)
    st = fits[fits["variant"] == "static"].set_index("condition")["params"].map(decode_params)
    w = {c: p["w_prior"] for c, p in st.items()}
    assert w["steer_verbal"] - w["base"] == pytest.approx(0.15, abs=0.06)
    assert w["context_short"] == pytest.approx(w["base"], abs=0.06)  # no bump


def _cells(subject, rows):
    return pd.DataFrame(
        [(subject, task, mod, cond) for task, mod, cond in rows],
        columns=["subject", "task", "modality", "condition"],
    )


def test_bcs_agreement_counts_by_hand():
    # two tasks, one ablation measured in image and multimodal
    cells = _cells(
        "s",
        [
            ("a", "image", "base"),
            ("a", "image", "noise_constant"),
            ("a", "multimodal", "base"),
            ("a", "multimodal", "noise_constant"),
            ("b", "image", "base"),
            ("b", "image", "noise_constant"),
            ("b", "multimodal", "base"),
            ("b", "multimodal", "noise_constant"),
        ],
    )
    # task a: image rises, multimodal falls (disagree); task b: both rise (agree)
    w = np.array([[0.2], [0.4], [0.5], [0.3], [0.2], [0.3], [0.2], [0.6]])
    bcs = pd.DataFrame(
        {"subject": "s", "task": ["a", "b"], "ablation": "noise_constant", "s": [1.0, -1.0]}
    )
    got = bcs_agreement(bcs, cells, w).iloc[0]
    assert got["task_pairs"] == 1 and got["across_tasks"] == 0.0  # +1 vs -1
    assert got["modality_pairs"] == 2 and got["across_modalities"] == 0.5
