"""HVSBench-style library: standardiser (paper Tables 7-10) and MultiMatch (hand-computed)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from bayesobs.hvs import GT_MEAN_COUNT, multimatch, standardise
from bayesobs.hvs.multimatch import align

DEFAULT = {"X": [0.5], "Y": [0.5], "T": [0]}
S3 = {"X": [0.49, 0.57, 0.56], "Y": [0.53, 0.53, 0.51], "T": [316, 148, 123]}
F3 = {"X": [0.32, 0.54, 0.43], "Y": [0.22, 0.31, 0.54], "T": [384, 287, 166]}
J3 = {"X": [0.45, 0.52, 0.6], "Y": [0.5, 0.54, 0.52], "T": [312, 165, 130]}

# Table 7 (Q9, Q12), verbatim; the paper prints newlines as "\n" and typographic quotes.
TABLE7 = [
    ("X = [0.49, 0.57, 0.56, ...] Y = [0.53, 0.53, 0.51, ...] T = [316, 148, 123, ...]", S3),
    ("X = [0.49, 0.57, 0.56, 0.75, 0.85, 0.95]", DEFAULT),
    (
        "the result scanpath is X = [0.49, 0.57, 0.56], Y = [0.53, 0.53, 0.51], "
        "and T = [316, 148, 123]",
        S3,
    ),
    (
        "Here’s a prediction of eye fixation points for the provided image in the format "
        "requested:\n X-coordinates(normalized):\n 0.32,0.54,0.43\n Y-coordinates "
        "(normalized):\n 0.22,0.31,0.54\n duration (ms):\n 384,287,166\n This prediction "
        "provides three lists representing the locations (X and Y) and durations (T) of eye "
        "fixations for a free-viewing scenario on the image.",
        F3,
    ),
    (
        "Here’s a prediction of eye fixation points for the provided image in the format "
        "requested:\n X-Coordinates (normalized):\n 0.32,0.54,0.43\n Y-Coordinates "
        "(normalized):\n 0.22,0.31,0.54\n Fixation Durations:\n 384,287,166\n This "
        "prediction provides three lists representing the locations (X and Y) and durations "
        "(T) of eye fixations for a free-viewing scenario on the image.",
        F3,
    ),
    # As printed (the PDF dropped the ``` fence) and as the model wrote it (with the fence).
    ("json\n{“X”: [0.45, 0.52, 0.60],\n“Y”: [0.50, 0.54, 0.52],\n“T”: [312, 165, 130]}\n", J3),
    (
        "```json\n{“X”: [0.45, 0.52, 0.60],\n“Y”: [0.50, 0.54, 0.52],\n“T”: [312, 165, 130]}\n```",
        J3,
    ),
    ("**X = ** [0.45, 0.52, 0.60],\n **Y = ** [0.50, 0.54, 0.52],\n **T = ** [312, 165, 130]", J3),
]

# Table 8 (Q2), verbatim.
TABLE8 = [
    ("10", 10),
    ("22", 22),
    ("there is 1 sample", 1),
    ("three", 3),
    ("Five", 5),
    ("8.", 8),
    ("num of people in this image is 5", 5),
    ("B", GT_MEAN_COUNT),
    ("There are five salient objects in the image: four boats and one flower.", 5),
]

# Table 9 (Q1, Q4-Q8, Q10, Q11, Q13), verbatim.
TABLE9 = [
    ("[A]", "A"),
    ("A.", "A"),
    ("So the result is B", "B"),
    ("A clock is a clock. So the answer is B", "B"),
]

# Table 10 (Q3), verbatim.
TABLE10 = [
    ("[A]", "A"),
    ("A.", "A"),
    ("D B C A", "DBCA"),
    ("the answer is only B", "B"),
    ("its A and B", "AB"),
    ("[A] and [C]", "AC"),
    ("The order between the A,B,C should be B>C>A", "BCA"),
    ("Between A,B,C, so the answer is BCA", "BCA"),
]


@pytest.mark.parametrize(("reply", "expected"), TABLE7)
def test_standardise_scanpath_table7(reply, expected):
    assert standardise("scanpath", reply) == expected


@pytest.mark.parametrize(("reply", "expected"), TABLE8)
def test_standardise_count_table8(reply, expected):
    got = standardise("count", reply)
    assert got == expected
    assert type(got) is type(expected)


@pytest.mark.parametrize(("reply", "expected"), TABLE9)
def test_standardise_choice_table9(reply, expected):
    assert standardise("choice", reply) == expected


@pytest.mark.parametrize(("reply", "expected"), TABLE10)
def test_standardise_ranking_table10(reply, expected):
    assert standardise("ranking", reply) == expected


@pytest.mark.parametrize(
    ("kind", "reply", "expected"),
    [
        ("choice", "", ""),
        ("choice", None, ""),
        ("choice", "no idea, sorry", ""),
        ("choice", "The most salient object is [E]", "E"),  # paper Fig. 10, LLaVA-OV
        ("choice", "The output is: (C)", "C"),
        ("ranking", "no letters here", ""),
        ("ranking", "The ranking is C > A > B.", "CAB"),
        ("count", "six", 6),
        ("count", "", GT_MEAN_COUNT),
        # Figure 3 (main text): three empty lists stay empty, as the paper's "Ours" shows.
        ("scanpath", "To extract ...\nX = []\nY = []\nT = []\n...", {"X": [], "Y": [], "T": []}),
        ("scanpath", "I cannot predict fixations.", DEFAULT),
        ("scanpath", "```json\n{not json}\n```", DEFAULT),
        ("scanpath", "X = [0.1, 0.2] Y = [0.3] T = [100, 200]", DEFAULT),
        ("scanpath", "X = [0.1, nan] Y = [0.3, 0.4] T = [100, 200]", DEFAULT),
        ("scanpath", '```json\n{"X": [NaN], "Y": [0.5], "T": [1]}\n```', DEFAULT),
    ],
)
def test_standardise_edge_cases(kind, reply, expected):
    assert standardise(kind, reply) == expected


def test_standardise_default_is_a_fresh_copy():
    a = standardise("scanpath", "nothing")
    a["X"].append(9)
    assert standardise("scanpath", "nothing") == DEFAULT


def test_standardise_unknown_kind_names_the_allowed_kinds():
    with pytest.raises(ValueError, match="choice, count, ranking, scanpath"):
        standardise("boxes", "A")


# ---------------------------------------------------------------- MultiMatch
SCREEN = (1680, 1050)
DIAG = math.hypot(*SCREEN)


def test_multimatch_identical_is_one():
    p = [(100, 200, 250), (900, 300, 180), (400, 800, 320), (1200, 700, 90)]
    got = multimatch(p, p, SCREEN)
    assert got == pytest.approx(dict.fromkeys(got, 1.0), abs=1e-12)


def test_multimatch_two_fixations_by_hand():
    # One saccade each: (300, 400) against (0, 400), both from (0, 0).
    got = multimatch([(0, 0, 100), (300, 400, 200)], [(0, 0, 300), (0, 400, 100)], SCREEN)
    expected = {
        "vector": 1 - 300 / (2 * DIAG),
        "direction": 1 - (math.pi / 2 - math.atan2(400, 300)) / math.pi,
        "length": 1 - 100 / DIAG,
        "position": 1.0,
        "duration": 1 - 200 / 300,
    }
    assert got == pytest.approx(expected, abs=1e-6)


def test_multimatch_three_against_two_by_hand():
    # Saccades (100, 0), (0, 100) against (100, 0): both align with the single one;
    # the medians of two values are their means.
    pred = [(0, 0, 100), (100, 0, 100), (100, 100, 100)]
    human = [(0, 0, 100), (100, 0, 300)]
    got = multimatch(pred, human, SCREEN)
    expected = {
        "vector": 1 - (math.hypot(100, 100) / 2) / (2 * DIAG),
        "direction": 1 - (math.pi / 4) / math.pi,
        "length": 1.0,
        "position": 1 - 50 / DIAG,
        "duration": 1.0,
    }
    assert got == pytest.approx(expected, abs=1e-6)


def test_multimatch_single_fixation_is_padded():
    # HVSBench's default answer (one central fixation of 0 ms) against a two-fixation path.
    got = multimatch([(840, 525, 0)], [(840, 525, 200), (1140, 925, 300)], SCREEN)
    expected = {
        "vector": 1 - 500 / (2 * DIAG),
        "direction": 1 - math.atan2(400, 300) / math.pi,
        "length": 1 - 500 / DIAG,
        "position": 1.0,
        "duration": 0.0,
    }
    assert got == pytest.approx(expected, abs=1e-6)


def test_multimatch_matches_multimatch_gaze_reference():
    # Output of multimatch-gaze 0.1.3 docomparison(..., screensize=[1680, 1050]) on these
    # paths (computed once with that package; see bayesobs/hvs/multimatch.py).
    a = [(100, 100, 200), (400, 300, 300), (800, 500, 250)]
    b = [(120, 90, 220), (500, 200, 100), (700, 600, 400), (300, 300, 100)]
    ref = [0.9435660162928599, 0.8347506594614321, 0.9733554872079987, 0.7918817513239516, 0.75]
    got = multimatch(a, b, SCREEN)
    assert list(got.values()) == pytest.approx(ref, abs=1e-12)


def _brute_min_cost(cost):
    n, m = cost.shape
    best = math.inf
    steps = [(1, 0), (0, 1), (1, 1)]
    for k in range(n + m):
        for seq in itertools.product(steps, repeat=k):
            i = j = 0
            total = cost[0, 0]
            for di, dj in seq:
                i, j = i + di, j + dj
                if i >= n or j >= m:
                    break
                total += cost[i, j]
            else:
                if (i, j) == (n - 1, m - 1):
                    best = min(best, total)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_align_is_the_cheapest_monotone_path(seed):
    rng = np.random.default_rng(seed)
    n, m = rng.integers(1, 5, 2)
    v1, v2 = rng.normal(size=(n, 2)), rng.normal(size=(m, 2))
    cost = np.linalg.norm(v1[:, None] - v2[None], axis=2)
    path = align(v1, v2)
    assert path[0] == (0, 0) and path[-1] == (n - 1, m - 1)
    for (i0, j0), (i1, j1) in itertools.pairwise(path):
        assert (i1 - i0, j1 - j0) in {(1, 0), (0, 1), (1, 1)}
    assert sum(cost[i, j] for i, j in path) == pytest.approx(_brute_min_cost(cost), rel=1e-12)


def test_multimatch_bad_input():
    with pytest.raises(ValueError, match="pred: a scanpath needs at least one fixation"):
        multimatch([], [(1, 1, 1)])
    with pytest.raises(ValueError, match="human: expected a sequence of"):
        multimatch([(1, 1, 1)], [(1, 1)])
    with pytest.raises(ValueError, match="negative"):
        multimatch([(1, 1, -1)], [(1, 1, 1)])
