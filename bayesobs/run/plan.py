"""Specs and plans: read and check a task spec or protocol, and plan its session runs.

The run wing's first step, below the runner, the presentation and the web
app: :func:`load_spec` and :func:`load_protocol` read and check TOML specs,
:func:`plan` expands a spec into :class:`Session` runs (their stimuli drawn
from seeds derived by :func:`bayesobs.seeds.stable_seed`), and the small
checks :func:`whole_number` and :func:`finite_number` that other front ends
(``bayesobs design``) share.
"""

from __future__ import annotations

import math
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..distributed import local_workers
from ..errors import BayesobsInputError
from ..limits import check
from ..seeds import stable_seed
from ..stimuli import Stimulus, Task, get_task, task_classes
from ..stimuli.distributions import check_distribution, label, prior_mean
from ..trials import MODALITIES
from .ablations import (
    TEXT_NOISE_TASKS,
    Condition,
    blur_schedule,
    condition,
)
from .parallel import MIN_TRIALS, make_runs, renders_in_generate
from .progress import bar as progress_bar
from .progress import plan_counts, plan_line
from .subjects import parse_subject

SPEC_KEYS = {
    "task",
    "seed",
    "trials",
    "runs",
    "sessions",
    "modalities",
    "conditions",
    "options",
    "ablations",
    "description",
    "table",  # task table: its table (bayesobs.magnitude.table)
}


# ---------------------------------------------------------------- specs
def spec_dirs() -> list[Path]:
    """Where task specs are looked for: ./tasks, the source tree's tasks, the installed share.

    Returns
    -------
    list of Path
        ``./tasks`` (of the working directory), the source tree's ``tasks``
        and ``<sys.prefix>/share/bayesobs/tasks``, in that order.
    """
    source_root = Path(__file__).resolve().parents[2]  # bayesobs/run/plan.py -> the source tree
    return [
        Path.cwd() / "tasks",
        source_root / "tasks",
        Path(sys.prefix) / "share" / "bayesobs" / "tasks",
    ]


def find_spec(name: str | Path) -> Path:
    """A spec file from a path, or ``tasks/NAME.toml`` in the usual places.

    Parameters
    ----------
    name : str or Path
        A path to an existing ``.toml`` file, a file name ``NAME.toml`` or a bare
        spec name ``NAME``, looked for in :func:`spec_dirs`.

    Returns
    -------
    Path
        The spec file.

    Raises
    ------
    BayesobsInputError
        When no such file exists (the message lists the folders searched).
    """
    p = Path(name)
    if p.suffix == ".toml" and p.exists():
        return p
    for d in spec_dirs():
        cand = d / (p.name if p.suffix == ".toml" else f"{name}.toml")
        if cand.exists():
            return cand
    raise BayesobsInputError(
        f"no task spec {str(name)!r} (looked for tasks/{p.stem}.toml in {', '.join(map(str, spec_dirs()))})"
    )


def _read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's table; a binary, unreadable or malformed file is one clear error."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise BayesobsInputError(
            f"{path}: not a text file (binary data), so not a TOML spec"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise BayesobsInputError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise BayesobsInputError(f"{path}: not valid TOML (nested too deep)") from None
    except OSError as exc:
        raise BayesobsInputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def whole_number(value, what: str, low: int = 1) -> int:
    """A whole number >= ``low`` (bools and 2.5 are refused).

    Parameters
    ----------
    value : object
        The value to check.
    what : str
        Its name in the error message (``"trials"``, ``"--runs"``).
    low : int, default 1
        The smallest value allowed.

    Returns
    -------
    int
        ``value`` unchanged.

    Raises
    ------
    BayesobsInputError
        When ``value`` is not an ``int`` (or is a bool) or is below ``low``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise BayesobsInputError(f"{what} must be a whole number >= {low}, not {value!r}")
    return value


def finite_number(value, what: str, low: float | None = 0.0) -> float:
    """A finite number >= ``low`` (``low=None``: any finite number; bools are refused).

    Parameters
    ----------
    value : object
        The value to check.
    what : str
        Its name in the error message.
    low : float or None, default 0.0
        The smallest value allowed; None for no lower bound.

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    BayesobsInputError
        When ``value`` is not an int or float, is a bool, is NaN or infinite,
        or is below ``low``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BayesobsInputError(f"{what} must be a finite number, not {value!r}")
    if low is not None and value < low:
        raise BayesobsInputError(f"{what} must be >= {low:g}, not {value!r}")
    return float(value)


def _is_number(v) -> bool:
    """An int or float option value (a bool such as ``stratified = true`` is not a number)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# option and ablation keys that count something (whole numbers >= 0); other numbers must be finite >= 0
_COUNT_KEYS = {"context", "context_short", "context_long", "steer_window", "min_chars", "max_chars"}


def check_spec_values(spec: dict, where: str) -> None:
    """Types and ranges of a spec's numbers: counts, session ranges, options, ablations.

    Parameters
    ----------
    spec : dict
        A parsed task spec.
    where : str
        Prefix of the error message (the file).

    Raises
    ------
    BayesobsInputError
        One line naming the key: a count that is not a whole number (``trials
        = 2.5``, ``context = -1``), an empty or doubly named session list, a
        negative or infinite range, option or blur.
    """
    try:
        whole_number(spec["trials"], "trials")
        if "runs" in spec:
            whole_number(spec["runs"], "runs")
        whole_number(spec["seed"], "seed", low=0)
        sessions = spec["sessions"]
        if not isinstance(sessions, list) or not sessions:
            raise BayesobsInputError("sessions must be a non-empty list of [[sessions]] tables")
        names = set()
        for i, s in enumerate(sessions):
            if not isinstance(s, dict) or not {"name", "range"} <= set(s):
                raise BayesobsInputError(f"sessions[{i}] needs a name and a range [low, high]")
            if s["name"] in names:
                raise BayesobsInputError(f"two sessions are named {s['name']!r}; names must differ")
            names.add(s["name"])
            r = s["range"]
            if not isinstance(r, list) or len(r) != 2:
                raise BayesobsInputError(f"sessions[{i}] range must be [low, high]")
            low = finite_number(r[0], f"sessions[{i}] range low")
            high = finite_number(r[1], f"sessions[{i}] range high")
            if not low < high:
                raise BayesobsInputError(
                    f"sessions[{i}] needs a name and a range [low, high] with low < high"
                )
            for k, v in s.items():
                if k == "trials":
                    whole_number(v, f"sessions[{i}].trials")
                elif k not in ("name", "range") and _is_number(v):
                    finite_number(v, f"sessions[{i}].{k}", low=None if k == "mean" else 0.0)
            check_distribution(
                low, high, {**spec.get("options", {}), **s}, f"sessions[{i}] ({s['name']})"
            )
        for table in ("options", "ablations"):
            values = spec.get(table, {})
            if not isinstance(values, dict):
                raise BayesobsInputError(f"[{table}] must be a table")
            for k, v in values.items():
                if k in _COUNT_KEYS:
                    whole_number(v, f"{table}.{k}", low=0)
                elif _is_number(v):
                    finite_number(v, f"{table}.{k}", low=None if k == "steer_bias" else 0.0)
        opts = spec.get("options", {})
        if "min_chars" in opts and "max_chars" in opts and opts["min_chars"] > opts["max_chars"]:
            raise BayesobsInputError("options.min_chars must not exceed options.max_chars")
    except BayesobsInputError as exc:
        raise BayesobsInputError(f"{where}: {exc}") from None


def _names(value, what: str) -> list[str]:
    """A non-empty list of texts (``modalities``, ``conditions``), or one clear error."""
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise BayesobsInputError(
            f'{what} must be a non-empty list of names, e.g. ["text"], not {value!r}'
        )
    return value


def check_task_values(spec: dict, where: str) -> None:
    """A spec's values against what its task can show.

    Each session range must lie within the task's ``value_range`` (a ratio
    task shows values from 0 to 1; numerosity at most 576 dots on its grid;
    search tasks as many distractors as their display holds), and each option
    the task bounds (``min_chars``/``max_chars``: the longest line its image
    holds) within ``option_bounds``; ``modalities`` and ``conditions`` are
    non-empty lists of names.

    Parameters
    ----------
    spec : dict
        A parsed task spec whose ``task`` names a known task.
    where : str
        Prefix of the error message (the file).

    Raises
    ------
    BayesobsInputError
        One line naming the file, the key and the allowed bounds.
    """
    task = task_classes()[spec["task"]]
    try:
        for key in ("modalities", "conditions"):
            if key in spec:
                _names(spec[key], key)
        if task.value_range is not None:
            lo, hi = task.value_range
            for i, sess in enumerate(spec["sessions"]):
                low, high = sess["range"]
                if low < lo or high > hi:
                    raise BayesobsInputError(
                        f"sessions[{i}] range [{low:g}, {high:g}] goes beyond the values task "
                        f"{task.name} can show, [{lo:g}, {hi:g}]"
                    )
        opts = spec.get("options", {})
        for key, (lo, hi) in task.option_bounds.items():
            if key in opts and not lo <= opts[key] <= hi:
                raise BayesobsInputError(
                    f"options.{key} = {opts[key]!r} is outside [{lo:g}, {hi:g}] for task "
                    f"{task.name} ({task.option_notes.get(key, 'its allowed values')})"
                )
    except BayesobsInputError as exc:
        raise BayesobsInputError(f"{where}: {exc}") from None


def load_spec(name: str | Path) -> dict[str, Any]:
    """Load and validate a task spec (TOML); errors name the file and key.

    Parameters
    ----------
    name : str or Path
        The spec's path or name (see :func:`find_spec`).

    Returns
    -------
    dict
        The spec's table, checked by :func:`check_spec_values`,
        :func:`check_task_values` and :func:`load_spec_checks`, with
        ``_path`` set to the file read.

    Raises
    ------
    BayesobsInputError
        For a missing, unreadable or malformed file, an unknown or missing
        key, an unknown task, or a value out of its range.
    """
    path = find_spec(name)
    spec = _read_toml(path)
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise BayesobsInputError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    tasks = task_classes()
    if "task" in spec and (not isinstance(spec["task"], str) or spec["task"] not in tasks):
        raise BayesobsInputError(
            f"{path}: unknown task {spec['task']!r}; choose from {', '.join(tasks)}"
        )
    prepare = getattr(tasks.get(spec.get("task")), "prepare_spec", None)
    if prepare is not None:  # a table task fills in what its table says (sessions, trials)
        try:
            prepare(spec, path)
        except BayesobsInputError as exc:
            raise BayesobsInputError(f"{path}: {exc}") from None
    elif "table" in spec:
        raise BayesobsInputError(f'{path}: [table] is for task = "table"')
    for key in ("task", "seed", "trials", "sessions"):
        if key not in spec:
            raise BayesobsInputError(f"{path}: missing key {key!r}")
    check_spec_values(spec, str(path))
    check_task_values(spec, str(path))
    load_spec_checks(spec, str(path))
    spec["_path"] = str(path)
    return spec


def load_protocol(path: str | Path) -> list[dict[str, Any]]:
    """A protocol file (e.g. ``tasks/bayesbench.toml``): a list of experiments.

    Each ``[[experiment]]`` table names a spec file (``spec = "FILE.toml"``,
    relative to the protocol) and may override its ``modalities`` and
    ``conditions``; a single task spec is read as a one-experiment protocol.

    Parameters
    ----------
    path : str or Path
        The protocol's path or name (see :func:`find_spec`).

    Returns
    -------
    list of dict
        One ``{"spec": spec}`` per experiment, each spec as :func:`load_spec`
        returns it (with the experiment's overrides).

    Raises
    ------
    BayesobsInputError
        For a file without experiments, an experiment that is not a table or
        names no spec, or a spec or override that does not load.
    """
    path = find_spec(path)
    proto = _read_toml(path)
    if "experiment" not in proto:
        if "task" in proto:  # a single task spec is a one-experiment protocol
            return [{"spec": load_spec(path)}]
        raise BayesobsInputError(f"{path}: no [[experiment]] tables")
    experiments = proto["experiment"]
    if not isinstance(experiments, list) or not experiments:
        raise BayesobsInputError(
            f"{path}: 'experiment' must be [[experiment]] tables (each with spec = \"FILE.toml\"), "
            f"not {experiments!r}"
        )
    out = []
    for i, exp in enumerate(experiments):
        if not isinstance(exp, dict):
            raise BayesobsInputError(
                f'{path}: experiment[{i}] must be a table with spec = "FILE.toml", not {exp!r}'
            )
        if "spec" not in exp:
            raise BayesobsInputError(f"{path}: experiment[{i}] has no 'spec'")
        if not isinstance(exp["spec"], str) or not exp["spec"].strip():
            raise BayesobsInputError(
                f"{path}: experiment[{i}] spec must name a spec file, not {exp['spec']!r}"
            )
        # a protocol from anyone reads specs beside it (or the task specs of spec_dirs) only
        target = (path.parent / exp["spec"]).resolve()
        if not any(target.is_relative_to(d.resolve()) for d in (path.parent, *spec_dirs())):
            raise BayesobsInputError(
                f"{path}: experiment[{i}] spec {exp['spec']!r} is outside the protocol's folder "
                "and the task spec folders: put the spec beside the protocol"
            )
        spec = load_spec(target)
        for key in ("modalities", "conditions"):
            if key in exp:
                try:
                    spec[key] = _names(exp[key], key)
                except BayesobsInputError as exc:
                    raise BayesobsInputError(f"{path}: experiment[{i}]: {exc}") from None
        load_spec_checks(spec, f"{path}: experiment[{i}]")
        out.append({"spec": spec})
    return out


def load_spec_checks(spec: dict, where: str) -> None:
    """Conditions and modalities of a spec exist and fit the task.

    Parameters
    ----------
    spec : dict
        A parsed task spec.
    where : str
        Prefix of the error message (the file, or file and experiment).

    Raises
    ------
    BayesobsInputError
        For an unknown condition, ``noise_text`` on a task without a text
        rendering to degrade, or a modality the task does not render.
    """
    for c in spec.get("conditions", ["base"]):
        try:
            condition(c, spec.get("ablations"))
        except BayesobsInputError as exc:
            raise BayesobsInputError(f"{where}: {exc}") from None
        if c == "noise_text" and spec["task"] not in TEXT_NOISE_TASKS:
            raise BayesobsInputError(
                f"{where}: noise_text degrades symbol runs and numbers of the text rendering; "
                f"task {spec['task']} has none (use it with {', '.join(TEXT_NOISE_TASKS)})"
            )
    try:
        check_modalities(
            spec["task"], spec.get("modalities", task_classes()[spec["task"]].modalities[:1])
        )
    except BayesobsInputError as exc:
        raise BayesobsInputError(f"{where}: {exc}") from None


def check_modalities(task: str | Task, modalities) -> None:
    """Each modality exists and the task renders it (e.g. duration is text only, search image only).

    Parameters
    ----------
    task : str or Task
        A task name (:func:`bayesobs.stimuli.task_classes`), or a task (a table
        task renders the modalities its table has columns for).
    modalities : iterable of str
        The modalities asked for.

    Raises
    ------
    BayesobsInputError
        For an unknown modality or one the task does not render.
    """
    allowed = task.modalities if isinstance(task, Task) else task_classes()[task].modalities
    task = task if isinstance(task, str) else task.name
    for m in modalities:
        if m not in MODALITIES:
            raise BayesobsInputError(f"unknown modality {m!r}; choose from {', '.join(MODALITIES)}")
        if m not in allowed:
            raise BayesobsInputError(
                f"task {task} takes modalities {', '.join(allowed)}; {m!r} asked"
            )


# ---------------------------------------------------------------- plans
@dataclass
class Session:
    """One session run: a subject, task, modality and condition over a planned stimulus sequence."""

    subject: str
    task: Task
    modality: str
    cond: Condition
    session: str
    run: int
    range: tuple[float, float]
    stimuli: list[Stimulus]
    blur: np.ndarray
    seed: int
    options: dict = field(default_factory=dict)
    distribution: str = "uniform"  # the session's stimulus distribution, as logged
    prior_mean: float | None = None  # its mean, for simulated observers (non-uniform only)

    @property
    def key(self) -> tuple:
        """(subject, task, modality, condition, session, run): the run's identity in the log."""
        return (self.subject, self.task.name, self.modality, self.cond.name, self.session, self.run)


HUMAN = "human"  # the participant of a human study's plan (bayesobs.run.presentation.human_plan)


def _make_run(task: Task, seed: int, low, high, n: int, options: dict, made) -> list[Stimulus]:
    """One session run's stimuli, made here; ``made`` counts its trials (per trial if the task reports)."""
    reported = [0]  # trials the task reported as made in this session run
    if made is not None:

        def count(k: int) -> None:
            reported[0] += k
            made(k)

        task.made = count  # a perception task calls it after each trial
    stimuli = task.generate(np.random.default_rng(seed), low, high, n, options)
    if made is not None and not reported[0]:
        made(n)
    return stimuli


def session_options(spec: dict, session: dict) -> dict:
    """A session's stimulus options: the spec's ``options`` and the session entry's other keys.

    Parameters
    ----------
    spec : dict
        A loaded task spec (:func:`load_spec`).
    session : dict
        One of its ``sessions`` entries.

    Returns
    -------
    dict
        The options its stimuli are made with (the entry's keys win).
    """
    extra = {k: v for k, v in session.items() if k not in ("name", "range", "trials")}
    return {**spec.get("options", {}), **extra}


def plan(
    spec: dict,
    subjects: list[str],
    modalities: list[str] | None = None,
    conditions: list[str] | None = None,
    trials: int | None = None,
    runs: int | None = None,
    ami: str | None = None,
    hvs: str | None = None,
    planned: Callable[[int], None] | None = None,
    made: Callable[[int], None] | None = None,
    workers: int | None = None,
) -> list[Session]:
    """Every session run of a spec for the given subjects (``hvs``: the task hvs's source folder).

    ``planned`` is called with the number of stimuli after each session run's
    stimuli are made (images are rendered here: a progress bar's hook).

    Each (session, run) draws its stimuli once, seeded by
    ``stable_seed((spec seed, task, session, run))``; every condition,
    modality and subject of that run shares them (reversed under a reverse
    condition).

    Parameters
    ----------
    spec : dict
        A task spec (:func:`load_spec`).
    subjects : list of str
        Subject specifiers (``sim:...``, ``openai:...``) or :data:`HUMAN`.
    modalities : list of str, optional
        Modalities to run; default the spec's, else the task's first.
    conditions : list of str, optional
        Conditions to run; default the spec's, else ``["base"]``.
    trials : int, optional
        Trials per run for every session (overrides the spec and its sessions).
    runs : int, optional
        Runs per session (overrides the spec's ``runs``, default 1).
    ami : str, optional
        A folder of the AMI corpus (task ``duration``).
    hvs : str, optional
        The source folder of task ``hvs``.
    planned : callable, optional
        Called with the number of stimuli after each session run is made.
    made : callable, optional
        Called with a number of trials whenever they are made: 1 per trial
        by a task that reports each (the perception tasks, whose images
        take time), else a session run's count once it is made (also when
        made by a worker process).
    workers : int, optional
        Processes making the stimuli of a task that renders its images
        while generating them (the perception tasks), when there are two or
        more session runs: default ``$BAYESOBS_WORKERS``, else up to 2
        (:func:`bayesobs.distributed.local_workers`), for 100 trials or
        more; 1 makes them all in this process
        (:mod:`bayesobs.run.parallel`).  The plan is the same either way.

    Returns
    -------
    list of Session
        One per (session, run, condition, modality, subject), in that nesting order.

    Raises
    ------
    BayesobsInputError
        For a trial or run count that is not a whole number >= 1, a modality
        the task does not render, an unknown condition, a ``hint`` condition
        on a task without hints, or a subject specifier that does not parse.
    """
    task = get_task(spec["task"], ami=ami, hvs=hvs, table=spec.get("table"))
    mods = modalities or spec.get("modalities", [task.modalities[0]])
    conds = conditions or spec.get("conditions", ["base"])
    # 0 is a value, not "the spec's default": it is refused below
    n = whole_number(
        trials if trials is not None else spec["trials"],
        "--trials" if trials is not None else "trials",
    )
    n_runs = whole_number(
        runs if runs is not None else spec.get("runs", 1), "--runs" if runs is not None else "runs"
    )
    check_modalities(task, mods)
    n_planned = n_runs * len(conds) * len(mods) * len(subjects)
    n_planned *= sum(n if trials is not None else s.get("trials", n) for s in spec["sessions"])
    check(
        "trials",
        n_planned,
        f"{task.name}: sessions x runs x trials x conditions x modalities x subjects =",
    )
    n_workers = local_workers(workers)  # checked here, whatever the task
    cond_objs = [condition(c, spec.get("ablations")) for c in conds]
    if any(c.hint for c in cond_objs) and not task.hints:  # the field hints of task hvs
        raise BayesobsInputError(f"task {task.name} has no hints: condition hint is for task hvs")
    for s in subjects:
        if s != HUMAN:  # a person in the web app or a jsPsych export: no subject object
            parse_subject(s)
    runs_of = []  # (session, low, high, options, trials, run, seed) of each session run, in order
    for sess in spec["sessions"]:
        low, high = map(float, sess["range"])
        # a session entry's other keys are stimulus options for that session (e.g. search = "large")
        options = session_options(spec, sess)
        # a session may set its own trial count (the paper's counts differ by variant);
        # --trials overrides every session
        n_sess = n if trials is not None else sess.get("trials", n)
        for r in range(n_runs):
            seed = stable_seed((spec["seed"], task.name, sess["name"], r))
            runs_of.append((sess, low, high, options, n_sess, r, seed))
    if workers is None and sum(run[4] for run in runs_of) < MIN_TRIALS:
        n_workers = 1  # too small to pay for a worker
    if len(runs_of) >= 2 and n_workers >= 2 and renders_in_generate(task):
        # images are rendered while the stimuli are made: independent runs in worker processes,
        # taken in order (the same plan, byte for byte)
        jobs = [
            (seed, low, high, n_sess, options) for _, low, high, options, n_sess, _, seed in runs_of
        ]
        made_runs = make_runs(task, jobs, n_workers)
        counted = made  # a session run's trials, counted as it arrives
    else:
        made_runs = (
            _make_run(task, seed, low, high, n_sess, options, made)
            for _, low, high, options, n_sess, _, seed in runs_of
        )
        counted = None
    out = []
    for (sess, low, high, options, n_sess, r, seed), stimuli in zip(
        runs_of, made_runs, strict=True
    ):
        if counted is not None:
            counted(n_sess)
        if planned is not None:
            planned(len(stimuli))
        dist = label(low, high, options)
        mean = None if dist == "uniform" else prior_mean(low, high, options)
        for c in cond_objs:
            seq = reverse_trials(task, stimuli) if c.reverse else stimuli
            # len(stimuli): a decomposed trial asks several questions (one stimulus each)
            blur = blur_schedule(c, len(stimuli), spec.get("ablations"))
            for m in mods:
                for subj in subjects:
                    out.append(
                        Session(
                            subj,
                            task,
                            m,
                            c,
                            sess["name"],
                            r,
                            (low, high),
                            seq,
                            blur,
                            seed,
                            spec.get("ablations") or {},
                            dist,
                            mean,
                        )
                    )
    return out


def plan_all(jobs: list[tuple[dict, dict]], progress: bool | str = False) -> list[Session]:
    """:func:`plan` of several ``(spec, keyword arguments)`` jobs, with a progress bar.

    Making the stimuli (rendering every image) is the slow part of a large
    protocol (Tunnel Vision's 1,475 questions per subject and modality); with
    ``progress`` a line naming the plan comes first
    (:func:`bayesobs.run.progress.plan_line`: tasks, subjects, cells, trials),
    then a bar over the session runs shows the stimuli being made, and a line
    gives the total planned.

    Parameters
    ----------
    jobs : list of (dict, dict)
        ``(spec, keyword arguments of plan)`` pairs.
    progress : bool or str, default False
        Show the lines and a bar on stderr (``"lines"``: plain lines instead
        of the bar, for a log file).

    Returns
    -------
    list of Session
        The session runs of every job, in order.
    """
    if not progress:
        return [x for spec, kw in jobs for x in plan(spec, **kw)]

    t0 = time.perf_counter()
    print(plan_line(jobs), file=sys.stderr, flush=True)
    c = plan_counts(jobs)
    tasks = ", ".join(c["tasks"])
    # trial by trial where images are rendered: the bar moves within seconds
    with progress_bar(progress, c["stimuli"], f"making stimuli ({tasks})", "trial") as b:
        sessions = [x for spec, kw in jobs for x in plan(spec, **kw, made=b.update)]
    n_trials = sum(len(x.stimuli) for x in sessions)
    print(
        f"planned {len(sessions):,} session(s), {n_trials:,} trial(s) in "
        f"{time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return sessions


def reverse_trials(task: Task, stimuli: list[Stimulus]) -> list[Stimulus]:
    """``stimuli`` in reverse order, each trial asked from its predecessor kept right after it.

    A stimulus for which ``task.follows`` is true is asked from the answer to
    the one before it (the decomposed scavenger hunt's steps), so a reversed
    condition reverses whole sequences, not the steps within one.

    Parameters
    ----------
    task : Task
        The task (its ``follows`` says which stimuli continue the one before).
    stimuli : list of Stimulus
        The planned order.

    Returns
    -------
    list of Stimulus
        The groups (a stimulus and its followers) in reverse order, each
        group's own order kept.
    """
    groups: list[list[Stimulus]] = []
    for stim in stimuli:
        if groups and task.follows(stim):
            groups[-1].append(stim)
        else:
            groups.append([stim])
    return [s for g in reversed(groups) for s in g]
