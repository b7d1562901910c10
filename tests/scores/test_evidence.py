"""Factor evidence against a literal transcription of METHOD §3."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import RTOL

from bayesobs.fits.observers import FACTORS, VARIANT_NAMES
from bayesobs.scores.evidence import factor_evidence, factor_evidence_array

# Factor labels written out by hand from METHOD §2 (not taken from the package).
LABELS = {
    #                  bayesian weber  sequential gain
    "linear": (False, False, False, False),
    "static": (True, False, False, False),
    "static_gain": (True, False, False, True),
    "kalman": (True, False, True, False),
    "kalman_gain": (True, False, True, True),
    "linear_log": (False, True, False, False),
    "static_log": (True, True, False, False),
    "static_log_gain": (True, True, False, True),
    "kalman_log": (True, True, True, False),
    "kalman_log_gain": (True, True, True, True),
}
NUIS = {
    "bayesian": ["weber"],
    "weber": ["bayesian", "sequential", "gain"],
    "sequential": ["bayesian", "weber", "gain"],
    "gain": ["bayesian", "weber", "sequential"],
}
POS = {"bayesian": 0, "weber": 1, "sequential": 2, "gain": 3}


def brute_force(aic: dict[str, float], factor: str) -> float:
    fitted = {m: a for m, a in aic.items() if not math.isnan(a)}
    amin = min(fitted.values())
    L = {m: math.exp(-(a - amin) / 2) for m, a in fitted.items()}
    groups: dict[tuple, dict[bool, list[float]]] = {}
    for m, lik in L.items():
        key = tuple(LABELS[m][POS[n]] for n in NUIS[factor])
        groups.setdefault(key, {True: [], False: []})[LABELS[m][POS[factor]]].append(lik)
    both = [g for g in groups.values() if g[True] and g[False]]
    if not both:
        return math.nan
    lt = sum(max(g[True]) for g in both) / len(both)
    lf = sum(max(g[False]) for g in both) / len(both)
    return lt / (lt + lf)


@pytest.mark.parametrize("seed", range(30))
def test_matches_brute_force_on_random_aics(seed):
    rng = np.random.default_rng(seed)
    aic = rng.normal(0, 6, 10)
    if seed % 3 == 0:  # log variants skipped
        aic[5:] = np.nan
    if seed % 5 == 1:  # some other variant missing
        aic[rng.integers(0, 10)] = np.nan
    ours = factor_evidence_array(aic)
    for i, f in enumerate(FACTORS):
        ref = brute_force(dict(zip(VARIANT_NAMES, aic, strict=True)), f)
        if math.isnan(ref):
            assert math.isnan(ours[i])
        else:
            np.testing.assert_allclose(ours[i], ref, rtol=RTOL)


def test_clear_winner_gives_certain_evidence():
    aic = np.full(10, 100.0)
    aic[VARIANT_NAMES.index("kalman")] = 0.0
    p = dict(zip(FACTORS, factor_evidence_array(aic), strict=True))
    assert p["bayesian"] > 1 - 1e-12 and p["sequential"] > 1 - 1e-12
    assert p["weber"] < 1e-12 and p["gain"] < 1e-12


def test_equal_aics_give_one_half():
    np.testing.assert_allclose(factor_evidence_array(np.zeros(10)), 0.5)


def test_batched_shape_and_table_api():
    rng = np.random.default_rng(1)
    aic = rng.normal(0, 5, (3, 7, 10))
    p = factor_evidence_array(aic)
    assert p.shape == (3, 7, 4)
    np.testing.assert_allclose(p[2, 5], factor_evidence_array(aic[2, 5]))
    fits = pd.DataFrame(
        {
            "subject": "s",
            "task": "t",
            "modality": "text",
            "condition": "base",
            "variant": list(VARIANT_NAMES),
            "aic": aic[0, 0],
        }
    )
    table = factor_evidence(fits)
    assert list(table.columns) == ["subject", "task", "modality", "condition", "factor", "p"]
    np.testing.assert_allclose(table.set_index("factor").loc[list(FACTORS), "p"], p[0, 0])


def test_bounds_line_counts_cells_not_level_rows():
    """Interleaved fits repeat a cell's evidence on each level's row: the note counts cells (49.8)."""
    from bayesobs.scores.evidence import bounds_line

    rows = [
        {
            "subject": f"s{i}",
            "task": "t",
            "modality": "text",
            "condition": "base",
            "level": lv,
            "factor": "bayesian",
            "p_floor": (0.5 if i < 2 else 0.1) if lv == "c=0.7" else 0.5,
            "p_ceiling": 1.0,
        }
        for i in range(3)
        for lv in ("c=0.3", "c=0.7")
    ]
    line = bounds_line(pd.DataFrame(rows))
    assert "bayesian [0.5, 1] in 2 of 3 cells" in line, line
