"""Issue 29: a paradigm defined only here (no edit to the package) runs through sweep, score and report."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from bayesobs import paradigms
from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError
from bayesobs.paradigms import Paradigm, by_name, register, registered, resolve, unregister
from bayesobs.run.subjects import Reply
from bayesobs.seeds import stable_rng
from bayesobs.stimuli.base import Stimulus, Task


class ParityTask(Task):
    """Is a number even?  A text-only right/wrong task."""

    name = "toy_parity"
    role = "parity judge"
    instruction = "Answer 1 if the number is even and 0 if it is odd."
    modalities = ("text",)
    paradigm = "toy"

    def generate(self, rng, low, high, n, options):
        values = rng.integers(int(low), int(high) + 1, n)
        return [Stimulus(self.name, float(v), f"The number is {int(v)}.") for v in values]

    def record(self, stim, reply, truncated=False):
        guess = None if reply is None or reply.strip() not in ("0", "1") else int(reply.strip())
        truth = int(stim.value) % 2 == 0
        return {
            "response": None if guess is None else float(guess),
            "valid": guess is not None,
            "parity_correct": None if guess is None else int(bool(guess) == truth),
        }


class ParitySubject:
    """``sim:toy_even``: says "even" for every number (right on half of them)."""

    def __init__(self, kind, seed=0):
        self.kind, self.seed, self.name = kind, seed, f"sim:{kind}"

    async def complete(self, request):
        return Reply(text="1")


def parity_table(trials: pd.DataFrame) -> dict[str, pd.DataFrame]:
    acc = trials.groupby(["subject", "task"], sort=True)["parity_correct"].mean()
    return {"toy_parity": acc.rename("accuracy").reset_index()}


def parity_summary(tables, out) -> str:
    t = tables["toy_parity"]
    return "\n".join(f"Toy parity: {r.subject} {r.accuracy:.3f}" for r in t.itertuples())


def parity_sections(tables, trials, out, save, table_html):
    return [], [f"<h2>Toy parity</h2>{table_html(tables['toy_parity'])}"]


TOY = Paradigm(
    name="toy",
    tasks={"toy_parity": ParityTask},
    subjects={"toy_even": ParitySubject},
    tables=("toy_parity",),
    analyse=parity_table,
    summary=parity_summary,
    report_sections=parity_sections,
)

SPEC = """\
task = "toy_parity"
seed = 3
trials = 20
runs = 1
modalities = ["text"]
conditions = ["base"]

[[sessions]]
name = "small"
range = [1, 40]
"""


@pytest.fixture
def toy():
    register(TOY)
    yield TOY
    unregister("toy")


def test_a_paradigm_defined_in_the_tests_runs_through_sweep_score_and_report(toy, tmp_path, capsys):
    spec = tmp_path / "toy.toml"
    spec.write_text(SPEC)
    run, scores, report = tmp_path / "run", tmp_path / "scores", tmp_path / "report"
    assert main(["sweep", str(spec), "--subject", "sim:toy_even", "--out", str(run)]) == 0
    trials = pd.read_json(run / "trials.jsonl", lines=True)
    assert len(trials) == 20 and set(trials["paradigm"]) == {"toy"}
    assert set(trials["raw_response"].astype(str)) == {"1"}
    capsys.readouterr()

    assert main(["score", str(run), "--out", str(scores)]) == 0
    printed = capsys.readouterr().out
    table = pd.read_csv(scores / "toy_parity.csv")
    even = (trials["stimulus"] % 2 == 0).mean()
    assert list(table.columns) == ["subject", "task", "accuracy"]
    assert table["accuracy"].iloc[0] == pytest.approx(even)
    assert f"Toy parity: sim:toy_even {even:.3f}" in printed
    assert "toy_parity" in printed.split("tables ->")[-1]  # the written tables name it
    # the toy rows are not magnitudes: no BayesBench tables were made of them
    assert not (scores / "bayesbench.csv").exists()

    assert main(["report", str(scores), "--out", str(report)]) == 0
    page = (report / "index.html").read_text()
    assert "<h2>Toy parity</h2>" in page
    assert (report / "tables" / "toy_parity.csv").exists()
    assert 'href="tables/toy_parity.csv"' in page


def test_without_its_registration_the_toy_task_and_subject_are_unknown(tmp_path, capsys):
    spec = tmp_path / "toy.toml"
    spec.write_text(SPEC)
    assert main(["sweep", str(spec), "--subject", "sim:bayesian", "--out", str(tmp_path)]) == 2
    assert "unknown task 'toy_parity'" in capsys.readouterr().err
    assert "toy" not in [p.name for p in registered()]


def test_the_registry_refuses_clashes_and_bad_declarations(toy):
    with pytest.raises(paradigms.BayesobsInputError, match="already registered"):
        register(TOY)
    clash = Paradigm(name="other", tasks={"circle_sizes": ParityTask})
    with pytest.raises(paradigms.BayesobsInputError, match="circle_sizes already belongs"):
        register(clash)
    with pytest.raises(ValueError, match="identifier"):
        Paradigm(name="no good")
    with pytest.raises(ValueError, match="module:attribute"):
        resolve("bayesobs.search.scores")
    assert [p.name for p in registered()][:1] == ["search"]


def test_every_builtin_hook_resolves():
    for p in registered(default=True):
        for ref in (*p.tasks.values(), *p.subjects.values()):
            assert callable(resolve(ref))
        for ref in (p.analyse, p.summary, p.report_sections, p.random):
            assert ref is None or callable(resolve(ref))


def parity_guess(request, seed):
    """``sim:random`` on the toy task: a fair coin in the task's own format (0 or 1)."""
    return str(int(stable_rng((seed, request.meta["trial"])).integers(2)))


def test_sim_random_answers_a_plugged_in_paradigm_through_its_random_hook(tmp_path):
    # with a random hook, sim:random answers in the paradigm's format; without one (the
    # magnitude default), a number uniform in the session's range [1, 40]
    spec = tmp_path / "toy.toml"
    spec.write_text(SPEC)
    replies = {}
    for hook in (parity_guess, None):
        register(dataclasses.replace(TOY, random=hook))
        try:
            out = tmp_path / f"run_{hook is None}"
            assert main(["sweep", str(spec), "--subject", "sim:random", "--out", str(out)]) == 0
        finally:
            unregister("toy")
        trials = pd.read_json(out / "trials.jsonl", lines=True)
        replies[hook] = trials["raw_response"].astype(float)
    guesses = replies[parity_guess]
    assert set(guesses) == {0.0, 1.0} and len(guesses) == 20
    assert replies[None].between(1, 40).all() and replies[None].nunique() == 20


def test_the_derived_names_match_the_paradigms_own_modules():
    # the registry lists each paradigm's tasks and simulated subjects; the modules that
    # implement them keep their own lists, which must not drift from it
    from bayesobs.dataset import DEFAULT_PARADIGM
    from bayesobs.hvs import subject as hvs_sim
    from bayesobs.magnitude import subject as sim
    from bayesobs.perceptv import subject as perceptv_sim
    from bayesobs.run.subjects import SIM_KINDS
    from bayesobs.scores.psychometric import LEVELS
    from bayesobs.search import subject as search_sim
    from bayesobs.stimuli import TASKS
    from bayesobs.trials import PARADIGM_MARKERS
    from bayesobs.tunnel import subject as tunnel_sim

    kinds = {p.name: tuple(p.subjects) for p in registered(default=True)}
    assert kinds["magnitude"] == sim.KINDS
    assert kinds["search"] + ("random",) == search_sim.SEARCH_KINDS
    assert kinds["perception"] == tunnel_sim.TUNNEL_KINDS
    assert kinds["hvs"] == hvs_sim.HVS_KINDS
    assert kinds["perceptv"] == perceptv_sim.PERCEPTV_KINDS
    assert sorted(SIM_KINDS) == sorted({k for ks in kinds.values() for k in ks} | {"random"})
    assert set(search_sim.SEARCH_TASKS) == set(by_name("search").tasks)
    assert set(TASKS) == {t for p in registered(default=True) for t in p.tasks}
    assert all(isinstance(TASKS[t], type) for t in TASKS)
    assert DEFAULT_PARADIGM == "magnitude" and "magnitude" not in [p.name for p in registered()]
    assert LEVELS == {"search": "set_size", "perception": "problem_size", "choice": "level"}
    assert PARADIGM_MARKERS == {
        "search": ("set_size", "correct"),
        "perception": ("problem_size", "gold"),
    }


def test_there_is_one_default_paradigm():
    with pytest.raises(BayesobsInputError, match="default paradigm already"):
        register(Paradigm(name="other_default", default=True))
    assert "other_default" not in [p.name for p in registered(default=True)]


def test_rows_follow_the_paradigm_column_then_the_markers():
    search = next(p for p in registered() if p.name == "search")
    t = pd.DataFrame(
        {
            "paradigm": ["search", "magnitude", None, None],
            "set_size": [1, 2, 3, np.nan],
            "correct": [1, 0, 1, 1],
        }
    )
    assert search.rows(t).tolist() == [True, False, True, False]
    assert search.rows(t.drop(columns="paradigm")).tolist() == [True, True, True, False]
