"""The decomposed scavenger hunt as the paper runs it (Sec. 4.2, Table 1), and its metrics.

Each single-step question starts from the subject's OWN previous answer
(not from the gold path); accuracy is reported per three-step sequence
beside the per-question accuracy; the final-step error is conditioned on
the first two steps being right; the chaining prediction carries a
guessing term so that a random answerer is not flagged.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from bayesobs.run.engine import execute
from bayesobs.run.plan import plan
from bayesobs.run.store import ExperimentStore
from bayesobs.run.subjects import FatalSubjectError, Reply
from bayesobs.tunnel.scores import chain_prediction, perception_table, skill_from_accuracy
from bayesobs.tunnel.subject import grid_from_text

_START = re.compile(r"Starting at the (\w+) (\w+), follow the label for 1 step\.")
SPEC = {
    "task": "scavenger_hunt",
    "seed": 11,
    "trials": 6,
    "modalities": ["text"],
    "sessions": [{"name": "d", "range": [2, 4], "variant": "decomposed"}],
    "ablations": {"context": 0},
}


class Scripted:
    """Reads the grid from the text table and follows the label, except on scripted trials.

    ``wrong[t]`` says what to answer instead on trial ``t``: ``"other"`` an
    on-grid cell that is not the one the label names, ``"garbage"`` no
    answer in the format; ``stop_at`` raises (a run killed) on that call.
    """

    def __init__(self, wrong=None, stop_at=None):
        self.wrong = wrong or {}
        self.stop_at = stop_at
        self.calls = 0
        self.prompts: dict[int, str] = {}

    async def complete(self, request):
        self.calls += 1
        if self.stop_at is not None and self.calls == self.stop_at:
            raise FatalSubjectError("killed")
        text = request.turns[-1].text
        t = request.meta["trial"]
        self.prompts[t] = text
        cells = grid_from_text(text)
        m = _START.search(text)
        where = {f"{c['colour']} {c['shape']}": c for c in cells}
        here = where.get(f"{m.group(1)} {m.group(2)}")
        nxt = where.get(here["label"]) if here is not None else None
        final = "what color are you on" in text
        how = self.wrong.get(t)
        if how == "garbage":
            return Reply(text="I cannot tell.")
        if how == "other" or nxt is None:
            nxt = next(c for c in cells if c is not here and c is not nxt and c["label"] in where)
        return Reply(
            text="{" + (nxt["colour"] if final else f"{nxt['colour']} {nxt['shape']}") + "}"
        )


def _run(folder, subject):
    sessions = plan(SPEC, ["sim:chainer"])
    record = {"command": "test", "specs": [SPEC]}
    with ExperimentStore(folder, record, lock=True) as store:
        execute(sessions, store, {"sim:chainer": subject}, concurrency=1, progress=False)
    lines = (folder / "trials.jsonl").read_text().splitlines()
    return pd.DataFrame([json.loads(x) for x in lines if x.strip()])


def test_each_step_starts_from_the_subjects_own_previous_answer(tmp_path):
    # trial 0: step 1 of puzzle 1 answered with a wrong (on-grid) cell;
    # trial 4: step 2 of puzzle 2 answered with no braces at all
    subject = Scripted(wrong={0: "other", 4: "garbage"})
    rows = _run(tmp_path / "o", subject)
    assert list(rows.step) == [1, 2, 3] * 6
    first = rows.iloc[0]
    assert first.response_value != first.path_answer  # wrong step 1, on the grid
    # step 2 asks from the model's answer, not from the gold path ...
    said = first.response_value
    assert f"Starting at the {said}, follow the label" in subject.prompts[1]
    second = rows.iloc[1]
    assert second.step_start == said and second.step_start_from == "answer"
    cells = {f"{c['colour']} {c['shape']}": c for c in grid_from_text(subject.prompts[1])}
    # ... and is graded against the label of the cell it starts from
    assert second.gold == cells[said]["label"] and second.correct == 1
    assert rows.iloc[0].step_start_from == "gold"
    # a step whose previous answer is unreadable is not asked, and scores as wrong
    assert 5 not in subject.prompts
    fifth = rows.iloc[5]
    assert not fifth.valid and fifth.not_asked and fifth.invalid_reason.startswith("not asked")
    # the untouched puzzles follow the gold path, step by step
    clean = rows[rows.trial_seed.isin(rows.trial_seed.unique()[2:])]
    assert (clean.correct == 1).all() and (clean.gold == clean.path_answer).all()


def test_a_killed_run_resumes_each_step_from_the_logged_answer(tmp_path):
    full = _run(tmp_path / "full", Scripted(wrong={0: "other", 4: "garbage"}))
    # killed after step 1 of puzzle 1 was logged: step 2 must come from that logged answer
    with pytest.raises(FatalSubjectError):
        _run(tmp_path / "part", Scripted(wrong={0: "other"}, stop_at=2))
    assert len((tmp_path / "part" / "trials.jsonl").read_text().splitlines()) == 1
    again = Scripted(wrong={4: "garbage"})  # would answer trial 0 right: it is not asked again
    part = _run(tmp_path / "part", again)
    assert 0 not in again.prompts
    assert f"Starting at the {full.iloc[0].response_value}," in again.prompts[1]
    same = ["trial", "prompt_id", "stimulus_id", "gold", "response_value", "correct", "step_start"]
    pd.testing.assert_frame_equal(full[same], part[same])


def test_the_chainer_is_asked_from_its_own_path_through_the_runner(tmp_path):
    from bayesobs.tunnel.subject import TunnelSubject

    spec = {**SPEC, "trials": 20, "modalities": ["image"]}
    sessions = plan(spec, ["sim:chainer"])
    with ExperimentStore(tmp_path / "c", {"command": "test"}, lock=True) as store:
        execute(sessions, store, {"sim:chainer": TunnelSubject("chainer")}, progress=False)
    lines = (tmp_path / "c" / "trials.jsonl").read_text().splitlines()
    rows = pd.DataFrame([json.loads(x) for x in lines])
    later = rows[rows.step > 1]
    prev = rows.shift(1)[rows.step > 1]
    unasked = later.get("not_asked", pd.Series(False, index=later.index))
    asked = ~unasked.fillna(False).astype(bool)
    # every later step starts where the previous answer said (never the gold path behind it)
    assert (later.step_start[asked] == prev.response_value[asked]).all()
    assert (later.step_start_from == "answer").all()
    assert (later.gold[asked] != later.path_answer[asked]).any()  # went astray, and was followed


def test_a_reversed_condition_keeps_the_steps_of_a_sequence_in_order():
    from bayesobs.run.plan import reverse_trials
    from bayesobs.stimuli import get_task

    task = get_task("scavenger_hunt")
    stims = task.generate(np.random.default_rng(0), 2, 4, 3, {"variant": "decomposed"})
    rev = reverse_trials(task, stims)
    assert [s.params["columns"]["step"] for s in rev] == [1, 2, 3] * 3
    assert [s.params["seed"] for s in rev[::3]] == [s.params["seed"] for s in stims[::3]][::-1]
    chains = task.generate(np.random.default_rng(0), 2, 4, 3, {"variant": "L3"})
    assert reverse_trials(task, chains) == chains[::-1]  # independent trials: plain reversal


# ------------------------------------------------------------------ metrics
def _hunt_rows(subject, variant, L, hits, chances, **cols):
    return [
        {
            "paradigm": "perception",
            "subject": subject,
            "task": "scavenger_hunt",
            "variant": variant,
            "modality": "image",
            "condition": "base",
            "problem_size": L,
            "correct": h,
            "valid": h is not None,
            "chance": c,
            "gold": "red",
            "response_value": "red" if h else "blue",
            **{k: v[i] if isinstance(v, list) else v for k, v in cols.items()},
        }
        for i, (h, c) in enumerate(zip(hits, chances, strict=True))
    ]


def test_per_sequence_accuracy_and_conditional_final_step_error_by_hand():
    from bayesobs.tunnel.scores import perception_scores

    ch = [1 / 33, 1 / 33, 1 / 11]
    rows = []
    # five puzzles: all right; step 2 wrong; final wrong; step 1 wrong, then invalid and unasked;
    # a sequence cut short by a stopped run (left out of the sequence metrics)
    for seed, hits in enumerate(([1, 1, 1], [1, 0, 1], [1, 1, 0], [0, None, None], [1, 1])):
        rows += _hunt_rows(
            "a",
            "decomposed",
            3,
            hits,
            ch[: len(hits)],
            step=[1, 2, 3][: len(hits)],
            n_steps=3,
            trial_seed=seed,
            session="d",
            run=0,
        )
    acc = perception_scores(pd.DataFrame(rows))["perception"].iloc[0]
    assert acc.n == 14 and acc.n_correct == 9 and acc.accuracy == pytest.approx(9 / 14)
    assert acc.sequence_n == 4 and acc.sequence_correct == 1 and acc.sequence_accuracy == 0.25
    assert acc.final_step_n == 2 and acc.final_step_error == 0.5  # of puzzles 0 and 2
    assert acc.sequence_chance == pytest.approx(1 / 33 / 33 / 11)
    # final answer "red" on the gold path in puzzles 0 and 1 (1 got there by a wrong step 2)
    assert acc.sequence_final_accuracy == 0.5


def test_a_random_colour_answerer_is_not_flagged_but_the_plain_product_would_be():
    from bayesobs.tunnel.scores import chain_table

    rng = np.random.default_rng(1)
    g = 1 / 11
    rows = []
    for L in (2, 3, 4):
        rows += _hunt_rows("r", f"L{L}", L, list((rng.random(200) < g).astype(int)), [g] * 200)
    # reads every label right (steps 1 and 2), guesses every colour at random
    for seed in range(300):
        rows += _hunt_rows(
            "r",
            "decomposed",
            3,
            [1, 1, int(rng.random() < g)],
            [1 / 33, 1 / 33, g],
            step=[1, 2, 3],
            n_steps=3,
            trial_seed=seed,
        )
    chain = chain_table(perception_table(pd.DataFrame(rows)))
    assert list(chain.L) == [2, 3, 4] and (chain.final_step_n == 300).all()
    assert chain.step_skill.max() < 0.05  # no skill beyond guessing
    assert np.allclose(chain.predicted_guess, g, atol=0.02)
    assert chain.within.all()  # with the guessing term: consistent
    assert not chain.within_plain.any()  # (1 - e)^L alone: flagged at every L


def test_prediction_formula_values():
    assert skill_from_accuracy(0.94, 1 / 11) == pytest.approx((0.94 - 1 / 11) / (10 / 11))
    s = float(skill_from_accuracy(0.94, 1 / 11))
    assert chain_prediction(s, 3, 1 / 11) == pytest.approx(s**3 + (1 - s**3) / 11)
    assert chain_prediction(0.94, 3, 0) == pytest.approx(0.94**3)  # the paper's 83%
    assert chain_prediction(0.0, 4, 1 / 11) == pytest.approx(1 / 11)  # a guesser
    assert skill_from_accuracy(0.02, 1 / 11) == 0  # below chance: no skill, not negative


class Chainer:
    """The library's chainer with a known per-step error (looks at the pixels the runner sends)."""

    def __init__(self, error):
        self.error = error

    async def complete(self, request):
        from bayesobs.tunnel import sims
        from bayesobs.tunnel.subject import _rng, trial_of

        rng = _rng(0, "chainer", request.meta)
        return Reply(text=sims.chainer(trial_of(request), rng, error=self.error))


@pytest.mark.slow
def test_a_subject_with_known_step_error_matches_the_predictions(tmp_path):
    from bayesobs.tunnel.scores import perception_scores

    E, N = 0.25, 150
    spec = {
        "task": "scavenger_hunt",
        "seed": 5,
        "trials": N,
        "modalities": ["image"],
        "sessions": [
            {"name": v, "range": [2, 4], "variant": v} for v in ("L2", "L3", "L4", "decomposed")
        ],
        "ablations": {"context": 0},
    }
    with ExperimentStore(tmp_path / "k", {"command": "test"}, lock=True) as store:
        execute(plan(spec, ["sim:chainer"]), store, {"sim:chainer": Chainer(E)}, progress=False)
    lines = (tmp_path / "k" / "trials.jsonl").read_text().splitlines()
    tables = perception_scores(pd.DataFrame([json.loads(x) for x in lines]))
    chain = tables["perception_chain"]
    assert chain.within.all()
    # the observed chain accuracy against the truth s = 1 - E (g between 1/16 and 1/11)
    for r in chain.itertuples():
        truth = chain_prediction(1 - E, r.L, 1 / 13)
        assert abs(r.accuracy - truth) < 2.5 * np.sqrt(truth * (1 - truth) / r.n) + 0.02
    dec = tables["perception"].query("variant == 'decomposed'").iloc[0]
    truth = (1 - E) ** 3  # every step right; a wrong cell is never the right one
    assert abs(dec.sequence_accuracy - truth) < 2.5 * np.sqrt(truth * (1 - truth) / N)
    assert abs(dec.final_step_error - E * (1 - 1 / 16)) < 0.12


# ------------------------------------------------------------------ circuits chance (item 12)
def test_circuits_report_both_chance_levels_with_their_definitions(tmp_path):
    from fractions import Fraction

    from bayesobs.tunnel import circuits
    from bayesobs.tunnel.scores import mean_inverse, perception_scores
    from bayesobs.tunnel.subject import TunnelSubject

    low, high = circuits.N_COMPONENTS
    spec = {
        "task": "circuits",
        "seed": 3,
        "trials": 14,
        "modalities": ["image"],
        "options": {"stratified": True},
        "sessions": [{"name": "s", "range": [low, high], "variant": "single"}],
        "ablations": {"context": 0},
    }
    with ExperimentStore(tmp_path / "c", {"command": "test"}, lock=True) as store:
        subject = {"sim:random": TunnelSubject("random")}
        execute(plan(spec, ["sim:random"]), store, subject, progress=False)
    lines = (tmp_path / "c" / "trials.jsonl").read_text().splitlines()
    row = perception_scores(pd.DataFrame([json.loads(x) for x in lines]))["perception"].iloc[0]
    ns = range(low, high + 1)
    e_inv = sum(Fraction(1, n) for n in ns) / len(ns)  # E[1/n]: a guesser among the n shown
    inv_e = 1 / (Fraction(sum(ns), len(ns)))  # 1/E[n]: the paper's 1/7
    assert inv_e == Fraction(1, 7) and float(e_inv) == pytest.approx(0.15652, abs=1e-5)
    assert row.chance == pytest.approx(float(e_inv), abs=1e-12)  # two trials of each n
    assert mean_inverse(low, high) == pytest.approx(float(e_inv), abs=1e-12)
    assert row.chance_paper == pytest.approx(float(inv_e), abs=1e-12)
    assert np.isfinite(row.p_above_chance) and np.isfinite(row.p_above_chance_paper)
    assert row.p_above_chance_paper <= row.p_above_chance  # the lower bar is easier to pass


def test_a_step_with_no_right_answer_has_no_chance_of_being_right(tmp_path):
    """A guesser's later steps often start from a cell off the grid: chance 0 there (issue 49.7).

    Known truth: the random guesser answers uniformly, so its expected hits are the sum of the
    rows' chances; the accuracy table's ``chance`` must be that mean, not 1/33 and 1/11 on steps
    that no answer can get right.
    """
    from scipy import stats

    from bayesobs.tunnel.scores import accuracy_table
    from bayesobs.tunnel.subject import TunnelSubject

    spec = {**SPEC, "trials": 120}
    with ExperimentStore(tmp_path / "r", {"command": "test"}, lock=True) as store:
        execute(
            plan(spec, ["sim:random"]),
            store,
            {"sim:random": TunnelSubject("random")},
            progress=False,
        )
    lines = (tmp_path / "r" / "trials.jsonl").read_text().splitlines()
    rows = pd.DataFrame([json.loads(x) for x in lines])
    none = rows.gold.isna() | rows.get("not_asked", pd.Series(False, index=rows.index)).fillna(
        False
    )
    assert none.sum() > 40  # the premise: many steps 2-3 start off the grid
    assert (rows.chance[none] == 0).all() and (rows.correct[none] == 0).all()
    legacy = rows.assign(chance=np.where(rows.step == 3, 1 / 11, 1 / 33))  # logs before the fix
    assert (perception_table(legacy).chance.to_numpy()[none.to_numpy()] == 0).all()
    acc = accuracy_table(perception_table(rows)).iloc[0]
    assert acc.chance == pytest.approx(rows.chance.mean(), abs=1e-12)
    hits = int(rows.correct.sum())
    # two-sided: the guesser's hits are consistent with its chance (was p about 0.001 for 1/33, 1/11)
    assert stats.binomtest(hits, len(rows), acc.chance).pvalue > 0.01
