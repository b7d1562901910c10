"""Planning in worker processes (issue 32): the same plan, the same errors, progress that moves."""

from __future__ import annotations

import copy

import pytest

from bayesobs.distributed import WORKERS, local_workers
from bayesobs.errors import BayesobsInputError
from bayesobs.run.parallel import MIN_TRIALS, renders_in_generate
from bayesobs.run.plan import load_spec, plan
from bayesobs.stimuli import get_task

SUBJECT = "sim:perceiver"


def _small() -> dict:
    spec = load_spec("percept_v_small")  # 5 domains x 8 trials, two of them with two images
    spec["runs"] = 2  # 10 session runs
    return spec


def _made(sessions) -> list:
    """Everything a session carries that a run shows or logs, images and demonstrations included."""
    out = []
    for s in sessions:
        out.append(
            (
                s.key,
                s.seed,
                s.range,
                s.distribution,
                s.blur.tobytes(),
                [(x.key(), x.value, x.text, x.prompt, repr(x.params)) for x in s.stimuli],
                [s.task.render_pngs(x) for x in s.stimuli],
                [s.task.demos(x, s.modality) for x in s.stimuli],
            )
        )
    return out


def test_plan_in_two_workers_equals_the_plan_in_one():
    counts = {1: [], 2: []}
    plans = {
        w: plan(_small(), [SUBJECT], workers=w, made=counts[w].append, planned=None) for w in (1, 2)
    }
    assert [s.key for s in plans[2]] == [s.key for s in plans[1]]
    assert _made(plans[2]) == _made(plans[1])
    # every trial counted: per trial in one process, per session run from the workers
    assert sum(counts[1]) == sum(counts[2]) == 10 * 8
    assert counts[2] == [8] * 10 and counts[1] == [1] * 80


def test_a_bad_option_in_a_worker_is_the_same_one_line_error():
    spec = _small()
    spec["runs"] = 1
    spec["sessions"] = copy.deepcopy(spec["sessions"][:2])
    spec["sessions"][1]["variant"] = "no_such_domain"
    messages = []
    for w in (1, 2):
        with pytest.raises(BayesobsInputError) as err:
            plan(spec, [SUBJECT], workers=w)
        assert err.value.__cause__ is None and "\n" not in str(err.value)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "no_such_domain" in messages[0]


def test_workers_default_option_and_environment(monkeypatch):
    monkeypatch.delenv(WORKERS, raising=False)
    assert 1 <= local_workers() <= 2
    assert local_workers(3) == 3  # asked for: used whatever the size
    spec = _small()
    spec["runs"] = 1  # 40 trials: too small to pay for a worker
    assert 5 * 8 < MIN_TRIALS
    counts = []
    plan(spec, [SUBJECT], made=counts.append, planned=None)
    assert counts == [1] * 40  # counted per trial: made in this process
    monkeypatch.setenv(WORKERS, "1")
    assert local_workers() == 1  # turned off
    for bad in ("0", "two", "1.5"):
        monkeypatch.setenv(WORKERS, bad)
        with pytest.raises(BayesobsInputError, match=WORKERS):
            plan(_small(), [SUBJECT])  # checked whatever the size
    for bad in (0, True, 2.0):
        with pytest.raises(BayesobsInputError, match="workers"):
            local_workers(bad)


def test_only_tasks_that_render_while_generating_go_to_workers():
    assert renders_in_generate(get_task("percept_v"))
    assert renders_in_generate(get_task("circuits"))
    assert not renders_in_generate(get_task("line_ratio"))
    assert not renders_in_generate(get_task("two_among_five"))
