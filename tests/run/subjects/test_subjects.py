"""Subjects of their own: names, the simulated observers' reading, seeding and answer rule."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from bayesobs.errors import BayesobsInputError
from bayesobs.magnitude.subject import TEXT_SD, read_text
from bayesobs.run.subjects import FatalSubjectError, Request, SimSubject, Turn, parse_subject


@pytest.mark.parametrize(
    "name, expected",
    [
        ("sim:linear", ("sim", "linear")),
        ("openai:gpt-4o-mini", ("openai", "gpt-4o-mini")),
        ("anthropic:claude-sonnet-4-5", ("anthropic", "claude-sonnet-4-5")),
    ],
)
def test_subject_names(name, expected):
    assert parse_subject(name) == expected


@pytest.mark.parametrize(
    "name, message",
    [
        ("gpt-4o", "use sim:<kind>"),
        ("gemini:pro", "use sim:<kind>"),
        ("anthropic:", "use sim:<kind>"),
        ("sim:", "use sim:<kind>"),
        ("sim:oracle", "unknown simulated subject 'sim:oracle'"),
    ],
)
def test_bad_subject_names_are_refused_with_the_choices(name, message):
    with pytest.raises(BayesobsInputError, match=message):
        parse_subject(name)


def _request(text: str, trial: int, task: str = "line_ratio", run: int = 0) -> Request:
    meta = dict(task=task, modality="text", condition="base", session="short", run=run, trial=trial)
    return Request("", (Turn("user", text=text),), meta)


def test_the_text_reader_counts_characters():
    assert read_text("line_ratio", "A: " + "-" * 12 + "\nB: " + "-" * 48) == 0.25
    assert read_text("marker_location", "|----0-----|".replace("|", "")) == pytest.approx(4 / 9)
    assert read_text("numerosity", "o o o . o") == 4.0


def test_a_simulated_answer_depends_only_on_seed_and_trial():
    text = "-" * 10 + "\n" + "-" * 40
    a, b = SimSubject("linear", seed=1), SimSubject("linear", seed=1)
    assert a.answer(_request(text, 3)) == b.answer(_request(text, 3))
    assert a.answer(_request(text, 3)) != a.answer(_request(text, 4))
    assert a.answer(_request(text, 3)) != SimSubject("linear", seed=2).answer(_request(text, 3))


def test_the_linear_observer_recovers_its_rule():
    """sim:linear answers 0.8 * percept + 0.2 * 0.5 with zero-mean noise: the mean over runs.

    (Within a run a stimulus is always perceived the same way, so the runs vary.)
    """
    text = "-" * 10 + "\n" + "-" * 40  # ratio 0.25
    sim = SimSubject("linear", seed=0)
    answers = np.array([sim.answer(_request(text, 0, run=r)) for r in range(2000)])
    expected = 0.8 * 0.25 + 0.2 * 0.5
    # percept sd TEXT_SD * 0.5, times 0.8, plus decision noise 0.2 of it; 5 standard errors
    sd = np.hypot(0.8, 0.2) * TEXT_SD * 0.5
    assert abs(answers.mean() - expected) < 5 * sd / np.sqrt(len(answers))
    assert answers.std() == pytest.approx(sd, rel=0.1)


def test_a_magnitude_observer_refuses_a_search_task():
    with pytest.raises(FatalSubjectError, match="needs a searcher"):
        asyncio.run(SimSubject("bayesian").complete(_request("x", 0, task="circle_sizes")))


@pytest.mark.parametrize("provider, var", [("anthropic", "ANTHROPIC"), ("openai", "OPENAI")])
def test_a_run_without_an_api_key_is_one_line_and_exit_2(
    tmp_path, monkeypatch, capsys, provider, var
):
    """A missing key is the user's to fix (issue 48): exit 2, one line naming the variable."""
    from bayesobs.cli import main

    for name in ("API_KEY", "BASE_URL"):
        monkeypatch.delenv(f"{var}_{name}", raising=False)
    out = tmp_path / "o"
    argv = ["run", "line_ratio", "--subject", f"{provider}:m", "--modality", "text"]
    assert main([*argv, "--trials", "2", "--out", str(out), "--no-cache", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"bayesobs: error: no API key: set {var}_API_KEY or pass --api-key-file (or --api-key)"
    ]
    assert not (out / "manifest.json").exists()
