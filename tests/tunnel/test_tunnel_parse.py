"""Tunnel Vision answer extraction: the paper's rules and malformed replies."""

from __future__ import annotations

import pytest

from bayesobs.tunnel import PARSERS, published
from bayesobs.tunnel.parse import parse, parse_cell, parse_colour, parse_component, parse_reid


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("{yes}", "yes"),
        ("{{yes}}", "yes"),  # the authors' demo answers are literally {{yes}}
        ("{ No }", "no"),
        ("The object is rotated as a whole. {yes}", "yes"),
        ("{no} ... although {yes} is tempting", "no"),  # the first braces decide
        ("Yes.", "yes"),
        ("No, a component moved.", "no"),
        ("I think not; no.", "no"),
        ("no, but on reflection yes", "no"),  # first word (the authors' code would say yes)
    ],
)
def test_parse_reid_valid(reply, value):
    assert parse_reid(reply) == (value, None)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty"),
        (None, "empty"),
        ("   ", "empty"),
        ("{maybe}", "not yes or no"),
        ("{yes} or {no}", None),  # valid: first braces
        ("The shapes look similar.", "no {yes}/{no}"),
        ("yesterday nobody came", "no {yes}/{no}"),  # words, not substrings
    ],
)
def test_parse_reid_invalid(reply, reason):
    value, why = parse_reid(reply)
    if reason is None:
        assert (value, why) == ("yes", None)
    else:
        assert value is None and reason in why


@pytest.mark.parametrize(
    ("reply", "value", "invalid"),
    [
        ("{red}", "red", None),
        ("{ Gray }", "gray", None),
        ("We start at the blue square, ... and then end at the gray square. {gray}", "gray", None),
        ("magenta", "magenta", None),  # no braces: the whole reply, exactly
        ("{grey}", None, "not one of the 11 colours"),  # exact names only
        ("{light blue}", None, "not one of the 11 colours"),
        ("The answer is red.", None, "no braces"),
        ("{}", None, "not one of"),
        ("", None, "empty"),
    ],
)
def test_parse_colour(reply, value, invalid):
    v, why = parse_colour(reply)
    assert v == value
    assert (why is None) if invalid is None else (invalid in why)


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("{red circle}", "red circle"),
        ("{Lime  Triangle}", "lime triangle"),
        ("cyan square", "cyan square"),
    ],
)
def test_parse_cell_valid(reply, value):
    assert parse_cell(reply) == (value, None)


@pytest.mark.parametrize(
    "reply", ["{red}", "{red hexagon}", "{circle red}", "{big red circle}", ""]
)
def test_parse_cell_invalid(reply):
    v, why = parse_cell(reply)
    assert v is None and why


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("{C3}", "C3"),
        ("{c10}", "C10"),
        ("After following the wire, it connects to C2. {C2}", "C2"),
        ("{ C 4 }", "C4"),
        ("C7", "C7"),
        ("{C03}", "C3"),
    ],
)
def test_parse_component_valid(reply, value):
    assert parse_component(reply) == (value, None)


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("{Component 3}", "not a component label"),
        ("It connects to C3.", "no braces"),
        ("{port 7}", "not a component label"),
        ("{C}", "not a component label"),
        ("", "empty"),
    ],
)
def test_parse_component_invalid(reply, why):
    v, reason = parse_component(reply)
    assert v is None and why in reason


def test_parse_dispatch_and_formats():
    assert set(PARSERS) == {"reid", "hunt_colour", "hunt_cell", "circuit"}
    assert parse("circuit", "{c5}") == ("C5", None)
    with pytest.raises(ValueError, match="unknown answer format"):
        parse("count", "{3}")


def test_published_numbers_carry_sources():
    refs = published.references()
    assert all(r.source for r in refs)
    assert published.chance("object_reid", "standard") == 50
    assert published.chance("scavenger_hunt", "L4") == pytest.approx(100 / 11)
    assert published.chance("circuits", "single") == pytest.approx(14.2857, abs=1e-3)
    gpt5 = {
        (r.variant, r.metric): r.value for r in published.references("circuits") if r.who == "GPT-5"
    }
    assert gpt5[("single", "log_odds_distance")] == -0.0106
    assert gpt5[("single", "log_odds_crossings")] == -1.0008
    claude = [r for r in published.TABLE2 if r.who == "Claude Sonnet 3.7" and r.variant == "single"]
    assert {r.metric: r.value for r in claude}["log_odds_crossings"] == -0.9305
    reid_unconnected = {
        r.who: r.value for r in published.references("object_reid", "unconnected", "accuracy")
    }
    assert reid_unconnected == {
        "chance": 50.0,
        "GPT-5": 77.0,
        "Gemini 2.5 Pro": 65.0,
        "Claude Sonnet 4": 79.0,
    }
    decomposed = {
        (r.who, r.metric): r.value for r in published.references("scavenger_hunt", "decomposed")
    }
    assert (
        decomposed[("o4-mini", "accuracy")] == 90.67
        and decomposed[("Qwen2.5-VL-7B", "final_step_error")] == 85
    )
