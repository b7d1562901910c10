"""The magnitude tasks (bayesobs.magnitude): renderings agree with their values, AMI is read right."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bayesobs.magnitude.duration import (
    Duration,
    load_ami,
    parse_words_xml,
    synthetic_meeting,
    transcript,
)
from bayesobs.magnitude.subject import measure_image, read_text
from bayesobs.parse import parse_number
from bayesobs.stimuli import from_png, get_task

RANGES = {"line_ratio": (0.1, 0.9), "marker_location": (0.02, 0.98), "maze_distance": (2.0, 18.0)}
# measured - drawn, unblurred and at sigma = 6 px (the marker tick is clipped at the line ends)
TOL = {"line_ratio": (1e-9, 1e-3), "marker_location": (2e-3, 0.02), "maze_distance": (1e-9, 0.01)}


@pytest.mark.parametrize("name", list(RANGES))
def test_pixel_measurements_match_drawn_values(name):
    task = get_task(name)
    stims = task.generate(np.random.default_rng(1), *RANGES[name], 25, {})
    for sigma, tol in zip((0.0, 6.0), TOL[name], strict=True):
        err = [
            abs(measure_image(name, from_png(task.render_png(s, sigma))) - s.value) for s in stims
        ]
        assert max(err) <= tol, (name, sigma, max(err))
    # and the text rendering carries exactly the same value
    assert max(abs(read_text(name, s.text) - s.value) for s in stims) < 1e-12


@pytest.mark.parametrize("name", list(RANGES))
def test_values_within_session_range(name):
    lo, hi = {
        "line_ratio": (0.3, 0.7),
        "marker_location": (0.3, 0.7),
        "maze_distance": (5.0, 12.0),
    }[name]
    vals = [s.value for s in get_task(name).generate(np.random.default_rng(2), lo, hi, 200, {})]
    assert min(vals) >= lo and max(vals) <= hi
    assert np.std(vals) > (hi - lo) / 5  # spread over the range


@pytest.mark.slow  # about 4 s: the release's XML tables parsed (the fast suite's 5-minute budget)
def test_ami_words_xml_matches_the_release_tables(shared_data):
    folder = shared_data / "ami_meeting_corpus" / "raw_xml_sample_ES2002a"
    words = parse_words_xml(folder / "ES2002a.A.words.xml")
    assert words[0].text == "Hi" and words[0].start == 77.44 and words[0].end == 77.74
    assert words[1].punc and words[2].text == "I'm"
    tsv = pd.read_csv(
        shared_data / "ami_meeting_corpus" / "ami_words.tsv.gz",
        sep="\t",
        dtype=str,
        keep_default_na=False,
    )
    ref = tsv[(tsv["meeting"] == "ES2002a") & (tsv["element"] == "w")]
    ours = [w for s in "ABCD" for w in parse_words_xml(folder / f"ES2002a.{s}.words.xml")]
    assert len(ours) == len(ref) == 3105
    ref = ref.assign(i=ref["word_index"].astype(int)).sort_values(["speaker", "i"])
    assert [w.text for w in ours] == ref["text"].tolist()
    start = pd.to_numeric(ref["start"], errors="coerce").to_numpy()
    np.testing.assert_array_equal(np.array([w.start for w in ours]), start)
    meetings = load_ami(folder)
    assert list(meetings) == ["ES2002a"]
    assert all(
        a.start <= b.start
        for a, b in zip(meetings["ES2002a"], meetings["ES2002a"][1:], strict=False)
    )


def test_duration_extracts_from_ami_have_word_timed_durations(shared_data):
    folder = shared_data / "ami_meeting_corpus" / "raw_xml_sample_ES2002a"
    task = Duration(ami=folder)
    words = load_ami(folder)["ES2002a"]
    for s in task.generate(np.random.default_rng(4), 5.0, 15.0, 10, {}):
        assert 5.0 <= s.value <= 15.0 and s.params["source"] == "ami"
        span = words[s.params["first_word"] : s.params["first_word"] + s.params["n_words"]]
        assert math.isclose(
            s.value, round(max(w.end for w in span) - span[0].start, 3), abs_tol=1e-9
        )
        assert s.text == transcript(span)


def test_synthetic_dialogue_is_labelled_and_realistic():
    words = synthetic_meeting(np.random.default_rng(5), 600)
    speech = sum(w.end - w.start for w in words)
    rate = len(words) / (words[-1].end - words[0].start)
    assert 2.0 < rate < 3.5 and speech > 0
    s = Duration().generate(np.random.default_rng(6), 2.0, 8.0, 5, {})
    assert all(x.params["source"] == "synthetic" for x in s)
    assert all(x.text.split(":")[0] in "ABCD" for x in s)


@pytest.mark.parametrize(
    ("reply", "fraction", "value"),
    [
        ("0.42", True, 0.42),
        ("I estimate 0.42.", True, 0.42),
        ("3/7", True, 3 / 7),
        ("42%", True, 0.42),
        ("42%", False, 42.0),
        ("About 12 seconds", False, 12.0),
        ("1:30", False, 90.0),
        ("The ratio is 0.4 (range 0 to 1)", True, 0.4),
        ("Answer: 7.5 units", False, 7.5),
        ("two", False, 2.0),
        ("-0.5", False, -0.5),
        ("1,234.5", False, 1234.5),
        ("approximately 0,35", True, 0.35),
        ("**0.61**", True, 0.61),
        ("", True, math.nan),
        ("no idea", True, math.nan),
        (None, True, math.nan),
    ],
)
def test_parse_number(reply, fraction, value):
    got = parse_number(reply, fraction)
    assert (math.isnan(got) and math.isnan(value)) or got == pytest.approx(value)


def test_numerosity_text_and_pixels_show_the_same_count():
    task = get_task("numerosity")
    stims = task.generate(np.random.default_rng(7), 2, 120, 40, {})
    counts = np.array([s.value for s in stims])
    assert counts.min() >= 2 and counts.max() <= 120 and (counts == np.round(counts)).all()
    assert np.median(np.log(counts)) < np.log(40)  # log-uniform: more small counts than large
    for s in stims:
        assert read_text("numerosity", s.text) == s.value
        assert measure_image("numerosity", from_png(task.render_png(s, 0.0))) == s.value
        xy = np.column_stack([s.params["x"], s.params["y"]])
        d = np.sqrt(((xy[:, None] - xy[None]) ** 2).sum(-1)) + np.eye(len(xy)) * 1e9
        assert d.min() >= 14  # never overlapping
    # heavy blur merges neighbouring dots: counts can only fall
    blurred = [measure_image("numerosity", from_png(task.render_png(s, 6.0))) for s in stims]
    assert (
        all(b <= s.value for b, s in zip(blurred, stims, strict=True))
        and sum(blurred) < counts.sum()
    )
