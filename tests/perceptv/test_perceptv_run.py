"""Percept-V through the real CLI: sweep, score and report with the library's simulated subjects."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesobs.cli import main
from bayesobs.perceptv import sims
from bayesobs.perceptv.tasks import size_of_seed
from bayesobs.stimuli import get_task

ROOT = Path(__file__).resolve().parents[2]
SUBJECTS = ("sim:perceiver", "sim:guesser", "sim:sloppy")
# a wider test protocol: sizes 1..20 (2 per size) on four domains -> 160 trials per subject
DOMAINS = ("counting_circles", "sort_lines", "cross_and_knots", "change_colour")


def _rows(folder: Path) -> pd.DataFrame:
    lines = (folder / "trials.jsonl").read_text().splitlines()
    return pd.DataFrame([json.loads(x) for x in lines if x.strip()])


def _sweep(spec: Path, out: Path, subjects=SUBJECTS) -> int:
    args = ["sweep", str(spec), "--out", str(out), "--no-progress"]
    for s in subjects:
        args += ["--subject", s]
    return main(args)


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    root = tmp_path_factory.mktemp("pv")
    lines = ['task = "percept_v"', "seed = 18", "trials = 40", 'modalities = ["image"]']
    for d in DOMAINS:
        lines += [
            "[[sessions]]",
            f'name = "{d}"',
            "range = [1, 20]",
            f'variant = "{d}"',
            "stratified = true",
        ]
    spec = root / "wide.toml"
    spec.write_text("\n".join(lines) + "\n")
    out = root / "run"
    assert _sweep(spec, out) == 0
    return out


@pytest.mark.slow
def test_small_protocol_sweep_score_report(tmp_path):
    out = tmp_path / "small"
    spec = ROOT / "tasks" / "percept_v_small.toml"
    subjects = (*SUBJECTS, "sim:random")  # sim:random answers percept_v as the guesser
    assert _sweep(spec, out, subjects) == 0
    log = (out / "trials.jsonl").read_bytes()
    assert _sweep(spec, out, subjects) == 0  # resumed: nothing new, the log unchanged
    assert (out / "trials.jsonl").read_bytes() == log
    rows = _rows(out)
    assert set(rows["subject"]) == set(subjects)
    assert rows.query("subject == 'sim:random'")["valid"].astype(bool).all()
    assert {"domain", "answer_type", "skills", "valid", "chance", "trial_seed"} <= set(rows)
    assert (rows["problem_size"] == rows["trial_seed"].map(size_of_seed)).all()
    assert rows["problem_size"].between(1, 4).all()
    scores = tmp_path / "scores"
    assert main(["score", str(out), "--out", str(scores)]) == 0
    cols = {
        "perceptv_domains": [
            "subject",
            "domain",
            "answer_type",
            "skills",
            "counting",
            "n",
            "accuracy",
            "format_errors",
            "chance",
        ],
        "perceptv_skills": ["subject", "skill", "accuracy", "n_domains", "n_tagged"],
        "perceptv_formats": ["subject", "answer_type", "n", "format_errors"],
    }
    for name, c in cols.items():
        assert list(pd.read_csv(scores / f"{name}.csv").columns) == c
    assert (scores / "perception.csv").exists()
    report = tmp_path / "report"
    assert main(["report", str(scores), "--out", str(report)]) == 0
    assert (report / "figures" / "perceptv_skills.png").exists()
    assert "Percept-V" in (report / "index.html").read_text()


@pytest.mark.slow
def test_perceiver_accurate_and_falls_with_size(wide):
    rows = _rows(wide)
    p = rows[rows["subject"] == "sim:perceiver"]
    acc = p.groupby("problem_size")["correct"].apply(lambda c: c.fillna(0).mean())
    assert acc.loc[1] >= 0.9
    assert acc.loc[1:5].mean() > acc.loc[16:20].mean()


def test_guesser_at_chance(wide):
    g = _rows(wide).query("subject == 'sim:guesser'")
    acc = g["correct"].fillna(0).mean()
    chance = g["chance"].mean()
    se = np.sqrt(chance * (1 - chance) / len(g))
    assert abs(acc - chance) <= 4 * se, (acc, chance, se)


def test_sloppy_format_error_rate(wide):
    s = _rows(wide).query("subject == 'sim:sloppy'")
    rate = 1 - s["valid"].astype(bool).mean()
    assert abs(rate - sims.SLOPPY_RATE) <= 0.05, rate


def test_logged_trial_regenerates():
    task = get_task("percept_v")
    (q,) = task.questions("change_colour", 41)
    assert q.stim.value == size_of_seed(41) == 2 and len(q.images) == 2
    (again,) = task.questions("change_colour", 41)
    assert again.images == q.images


def test_unknown_domain_fails_before_any_call(tmp_path, capsys):
    spec = tmp_path / "bad.toml"
    spec.write_text(
        'task = "percept_v"\nseed = 1\ntrials = 2\n[[sessions]]\nname = "a"\n'
        'range = [1, 20]\nvariant = "counting_sheep"\n'
    )
    out = tmp_path / "o"
    assert _sweep(spec, out, ("sim:perceiver",)) == 2
    assert "percept_v: unknown variant 'counting_sheep'" in capsys.readouterr().err
    assert not (out / "trials.jsonl").exists()


def test_skipping_unwanted_seeds_makes_the_same_stimuli(monkeypatch):
    """Issue 32: seeds whose size is not wanted are dropped unrendered; nothing else changes."""
    task = get_task("percept_v")
    opts = {"variant": "counting_circles", "stratified": True}
    rendered: list[int] = []
    questions = type(task).questions

    def counted(self, variant, seed):
        rendered.append(seed)
        return questions(self, variant, seed)

    monkeypatch.setattr(type(task), "questions", counted)
    fast = task.generate(np.random.default_rng(7), 1, 20, 40, opts)
    n_fast = len(rendered)
    monkeypatch.setattr(type(task), "seed_size", lambda self, variant, seed: None)  # the old way
    slow_task = get_task("percept_v")
    slow = slow_task.generate(np.random.default_rng(7), 1, 20, 40, opts)
    assert n_fast == 40 < len(rendered) - n_fast  # only the kept trials were rendered
    assert [s.key() for s in fast] == [s.key() for s in slow]
    assert [task.render_pngs(s) for s in fast] == [slow_task.render_pngs(s) for s in slow]


def test_pixel_masks_match_their_definitions():
    """The channel-by-channel masks equal np.all/np.any over the colour axis (issue 32 speed-up)."""
    from bayesobs.perceptv.common import PALETTE20
    from bayesobs.perceptv.scenes import background

    rng = np.random.default_rng(3)
    arr = rng.choice(np.array([0, 1, 42, 165, 255], np.uint8), (60, 70, 3))
    for colour in [(0, 0, 0), (255, 255, 255), (165, 42, 42), (1, 255, 0)]:
        want = np.all(arr == np.asarray(colour, np.uint8), axis=-1)
        assert np.array_equal(sims.colour_mask(arr, colour), want)
    assert np.array_equal(sims.ink_mask(arr), np.any(arr != 255, axis=-1))
    img = np.asarray(background(np.random.default_rng(5), 300, 200)).astype(np.int32)
    packed = (img[..., 0] << 16) | (img[..., 1] << 8) | img[..., 2]
    palette = [(r << 16) | (g << 8) | b for r, g, b in PALETTE20.values()]
    assert not np.isin(packed, palette).any()
