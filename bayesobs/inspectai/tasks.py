"""bayesobs task specs and protocols as inspect tasks: one sample per session run."""

from __future__ import annotations

from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset, Sample

from ..run.plan import HUMAN, Session, load_protocol, plan, spec_dirs
from .scorer import trial_scorer
from .solver import ask_trials


def spec_files() -> dict:
    """Task specs and protocols by name, the first found in :func:`bayesobs.run.plan.spec_dirs`."""
    out: dict = {}
    for folder in spec_dirs():
        for path in sorted(folder.glob("*.toml")) if folder.is_dir() else ():
            out.setdefault(path.stem, path)
    return out


RUN_KEYS = ("task", "modality", "condition", "session", "run")  # a sample's run, as trial rows say


def sample_id(run: tuple) -> str:
    """A run's sample id: task/modality/condition/session/run."""
    return "/".join(map(str, run))


def sample_input(run: tuple, n: int) -> str:
    """What a sample's input says of its run."""
    task, modality, condition, session, number = run
    return f"{task}, {modality}, {condition}: session {session} run {number}, {n} trials"


def _names(value) -> list[str] | None:
    """``-T modality=text,image`` or a list: the names; None keeps the spec's."""
    if value is None or isinstance(value, list):
        return value
    return [v.strip() for v in str(value).split(",") if v.strip()]


def bayesobs_task(
    name: str,
    modality=None,
    condition=None,
    trials: int | None = None,
    runs: int | None = None,
    ami: str | None = None,
    hvs: str | None = None,
) -> Task:
    """A bayesobs task spec or protocol as an inspect task, as ``bayesobs run``/``sweep`` plan it.

    Parameters
    ----------
    name : str
        A spec or protocol name (``tasks/NAME.toml``) or file.
    modality, condition : str or list of str, optional
        Override the spec's modalities and conditions (a comma-separated string or a list).
    trials, runs : int, optional
        Trials per session run and runs per session type (override the spec).
    ami, hvs : str, optional
        Source folders of the tasks ``duration`` and ``hvs``.

    Returns
    -------
    Task
        One sample per session run (session x run x condition x modality),
        solved by :func:`bayesobs.inspectai.solver.ask_trials` and scored by
        :func:`bayesobs.inspectai.scorer.trial_scorer`.

    Raises
    ------
    BayesobsInputError
        For a spec that does not load or plan.
    """
    sessions: dict[str, Session] = {}
    for exp in load_protocol(spec_files().get(name, name)):
        for sess in plan(
            exp["spec"],
            [HUMAN],
            _names(modality),
            _names(condition),
            trials,
            runs,
            ami=ami,
            hvs=hvs,
        ):
            sessions[sample_id(sess.key[1:])] = sess
    dataset = MemoryDataset(
        [
            Sample(
                id=key,
                input=sample_input(s.key[1:], len(s.stimuli)),
                metadata=dict(zip(RUN_KEYS, s.key[1:], strict=True)),
            )
            for key, s in sessions.items()
        ],
        name=str(name),
    )
    return Task(dataset=dataset, solver=ask_trials(sessions), scorer=trial_scorer())
