"""Paradigms as plug-ins (issue 29): one small interface and one registry.

A :class:`Paradigm` names everything that one experimental paradigm adds to
the package: how its rows of the trial table are recognised, its tasks, its
simulated subjects, its analysis (named score tables, written as
``NAME.csv``), its terminal summary and its report sections.  ``score``,
``report``, the CLI and :func:`bayesobs.run.engine.make_subjects` loop over
:func:`registered` instead of naming a paradigm.

The package's own paradigms are registered at one place, the end of this
module.  Their hooks are given as ``"module:attribute"`` references (the
syntax of entry points), resolved only when a layer asks for its own part:
the run wing resolves ``subjects``, the scores resolve ``analyse``, the
report resolves ``report_sections``, so this declaration sits at the ground
and no layer imports a higher one.  A paradigm defined elsewhere (a test, a
user's package) may give plain callables instead::

    register(Paradigm(name="toy", tasks={"toy_task": ToyTask}, ...))

An installed package plugs in through entry points (loaded on the registry's first use):
a :class:`Paradigm` in the group ``bayesobs.paradigms``, and a subject kind
(``KIND:NAME`` beside ``sim``, ``openai`` and ``anthropic``) in the group
``bayesobs.subjects``: a factory called as ``factory(NAME, seed=SEED)``.

Every paradigm of the package is registered: magnitude estimation (the
default paradigm: the rows no other claims, analysed by the observer fits of
:mod:`bayesobs.scores`), visual search, HVSBench-style questions, perception
(Tunnel Vision) and Percept-V (part of perception).  The names other modules
keep (``trials.PARADIGM_MARKERS``, ``dataset.DEFAULT_PARADIGM``,
``scores.psychometric.LEVELS``, ``run.subjects.SIM_KINDS``, ``stimuli.TASKS``)
are derived from here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import Any

import pandas as pd

from .errors import BayesobsInputError

Hook = Callable[..., Any] | str  # a callable, or "package.module:attribute"


def resolve(hook: Hook) -> Any:
    """The object a hook names: a callable as it is, ``"module:attribute"`` imported.

    Parameters
    ----------
    hook : callable or str
        A callable (or class), or a reference ``"package.module:attribute"``.

    Returns
    -------
    object
        The callable itself, or the attribute of the imported module.

    Raises
    ------
    ValueError
        A string without exactly one ``:``.
    """
    if not isinstance(hook, str):
        return hook
    module, sep, attr = hook.partition(":")
    if not sep or not module or not attr or ":" in attr:
        raise ValueError(f"a hook reference is 'package.module:attribute', not {hook!r}")
    obj = import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Paradigm:
    """One paradigm's parts, each a hook (a callable or a ``"module:attribute"`` reference).

    Parameters
    ----------
    name : str
        The paradigm's name: the trial table's ``paradigm`` column value of its rows.
    markers : tuple of str
        Columns that mark a row without a ``paradigm`` value (human CSVs,
        older logs) as one of this paradigm's when all are filled in; empty:
        only the ``paradigm`` column marks its rows.
    tasks : mapping of str to hook
        Task name -> its :class:`~bayesobs.stimuli.base.Task` class.
    subjects : mapping of str to hook
        Simulated subject kind (``sim:KIND``) -> a factory called as
        ``factory(kind, seed=SEED)``.
    tables : tuple of str
        The names of the tables ``analyse`` returns (``NAME.csv`` in a score folder).
    analyse : hook, optional
        ``analyse(trials) -> dict[str, DataFrame]``: the paradigm's score
        tables from its rows of the trial table.
    summary : hook, optional
        ``summary(tables, out) -> str``: the terminal text ``bayesobs score``
        prints (``out``: the score folder, for the files it names).
    report_sections : hook, optional
        ``report_sections(tables, trials, out, save, table_html) -> (sections, tail)``
        or ``-> (head, sections, tail)``: HTML blocks for the top of the
        report, figure sections ``(title, caption, [image paths])`` and HTML
        blocks after the figures; ``save(fig, path)`` writes a figure and
        returns its link, ``table_html(df)`` renders a table.
    random : hook, optional
        ``random(request, seed) -> str``: ``sim:random``'s reply to a trial of
        its tasks, a random valid answer in its format; without one,
        ``sim:random`` answers a number uniform in the request's ``session_range``.
    part_of : str, optional
        The name of the paradigm whose rows this one shares (its ``paradigm``
        column value): its rows are that paradigm's rows of its own
        :attr:`tasks`, analysed by both (e.g. Percept-V inside perception).
    level : str, optional
        The column that grades its trials' difficulty (a psychometric
        function's level, :mod:`bayesobs.scores.psychometric`); empty: none.
    default : bool
        The paradigm of every row no other paradigm claims (magnitude
        estimation, whose analysis is the observer fits of
        :mod:`bayesobs.scores`, not a hook); one at most.  ``registered()``
        leaves it out: the loops that route rows skip it.
    """

    name: str
    markers: tuple[str, ...] = ()
    tasks: Mapping[str, Hook] = field(default_factory=dict)
    subjects: Mapping[str, Hook] = field(default_factory=dict)
    tables: tuple[str, ...] = ()
    analyse: Hook | None = None
    summary: Hook | None = None
    report_sections: Hook | None = None
    random: Hook | None = None
    part_of: str = ""
    level: str = ""
    default: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"a paradigm's name is an identifier, not {self.name!r}")
        bad = [t for t in self.tables if not isinstance(t, str) or not t.isidentifier()]
        if bad:
            raise ValueError(f"paradigm {self.name}: table names are identifiers, not {bad}")
        object.__setattr__(self, "markers", tuple(self.markers))
        object.__setattr__(self, "tables", tuple(self.tables))
        object.__setattr__(self, "tasks", MappingProxyType(dict(self.tasks)))
        object.__setattr__(self, "subjects", MappingProxyType(dict(self.subjects)))

    def rows(self, trials: pd.DataFrame) -> pd.Series:
        """Which rows of ``trials`` are this paradigm's.

        The ``paradigm`` column decides where it is filled in; a row without
        it belongs here when it fills in every one of :attr:`markers`.  A
        paradigm :attr:`part_of` another has that one's rows of its own tasks.

        Parameters
        ----------
        trials : DataFrame
            A trial table.

        Returns
        -------
        pandas.Series
            One bool per row (the table's index).
        """
        if self.part_of:
            mine = trials["task"].astype(str).isin(list(self.tasks)) if "task" in trials else False
            return marked_rows(trials, self.part_of, self.markers) & mine
        return marked_rows(trials, self.name, self.markers)

    def task(self, name: str) -> Any:
        """The task class called ``name`` (a key of :attr:`tasks`).

        Parameters
        ----------
        name : str
            A task name of this paradigm.

        Returns
        -------
        type
            The task class (its hook resolved).
        """
        return resolve(self.tasks[name])

    def subject(self, kind: str, seed: int = 0) -> Any:
        """A new simulated subject of ``kind`` (a key of :attr:`subjects`).

        Parameters
        ----------
        kind : str
            A simulated subject kind of this paradigm (``sim:KIND``).
        seed : int
            The subject's seed.

        Returns
        -------
        object
            The subject, as its factory makes it.
        """
        return resolve(self.subjects[kind])(kind, seed=seed)

    def analysis(self, trials: pd.DataFrame) -> dict[str, pd.DataFrame]:
        """The paradigm's score tables from its rows (``{}`` without an analysis).

        Parameters
        ----------
        trials : DataFrame
            The paradigm's trial rows (normalised).

        Returns
        -------
        dict of str to DataFrame
            Each table by its name (written as ``NAME.csv``).
        """
        return dict(resolve(self.analyse)(trials)) if self.analyse is not None else {}

    def summary_text(self, tables: Mapping[str, pd.DataFrame], out) -> str:
        """The terminal text of ``tables`` (``""`` without a summary).

        Parameters
        ----------
        tables : mapping of str to DataFrame
            The paradigm's score tables.
        out : path
            The score folder they are written to.

        Returns
        -------
        str
            What ``bayesobs score`` prints for this paradigm.
        """
        return resolve(self.summary)(tables, out) if self.summary is not None else ""

    def sections(self, tables, trials, out, save, table_html) -> tuple[list, list]:
        """Report sections and tail blocks (``([], [])`` without any).

        Parameters
        ----------
        tables : mapping of str to DataFrame
            The paradigm's score tables.
        trials : DataFrame
            The trials behind them.
        out : path
            The report folder.
        save : callable
            The report's figure saver (figure, path -> relative link).
        table_html : callable
            The report's table renderer (DataFrame -> HTML).

        Returns
        -------
        sections : list
            Sections of the report's body.
        tail : list
            Blocks for the end of the report.
        """
        _, sections, tail = self.report_parts(tables, trials, out, save, table_html)
        return sections, tail

    def report_parts(self, tables, trials, out, save, table_html) -> tuple[list, list, list]:
        """Report head blocks, sections and tail blocks (``([], [], [])`` without any).

        Parameters
        ----------
        tables : mapping of str to DataFrame
            The paradigm's score tables.
        trials : DataFrame
            The trials behind them.
        out : path
            The report folder.
        save : callable
            The report's figure saver (figure, path -> relative link).
        table_html : callable
            The report's table renderer (DataFrame -> HTML).

        Returns
        -------
        head : list
            HTML blocks for the top of the report (empty when the hook gives two parts).
        sections : list
            Sections of the report's body.
        tail : list
            Blocks for the end of the report.
        """
        if self.report_sections is None:
            return [], [], []
        parts = tuple(resolve(self.report_sections)(tables, trials, out, save, table_html))
        head, sections, tail = parts if len(parts) == 3 else ([], *parts)
        return list(head), list(sections), list(tail)


def marked_rows(trials: pd.DataFrame, name: str, markers: tuple[str, ...] = ()) -> pd.Series:
    """Rows whose ``paradigm`` is ``name``, or, where it is empty or absent, that fill in ``markers``.

    Parameters
    ----------
    trials : DataFrame
        A trial table.
    name : str
        The paradigm's name.
    markers : tuple of str
        Columns that mark an unlabelled row (none: only the ``paradigm`` column counts).

    Returns
    -------
    pandas.Series
        One bool per row (the table's index).
    """
    if markers and set(markers) <= set(trials.columns):
        guessed = trials[list(markers)].notna().all(axis=1)
    else:
        guessed = pd.Series(False, index=trials.index)
    if "paradigm" not in trials.columns:
        return guessed.astype(bool)
    stated = trials["paradigm"]
    return (stated == name).where(stated.notna(), guessed).astype(bool)


_REGISTRY: dict[str, Paradigm] = {}
PARADIGMS_GROUP, SUBJECTS_GROUP = "bayesobs.paradigms", "bayesobs.subjects"
_plugged = False


def plugin_name(ep: EntryPoint) -> str:
    """An entry point named for a one-line message.

    Parameters
    ----------
    ep : importlib.metadata.EntryPoint
        An installed package's entry point.

    Returns
    -------
    str
        ``entry point GROUP: NAME = VALUE of DISTRIBUTION VERSION``.
    """
    dist = f" of {ep.dist.name} {ep.dist.version}" if ep.dist is not None else ""
    return f"entry point {ep.group}: {ep.name} = {ep.value}{dist}"


def _load_plugins() -> None:
    """Register the paradigms installed packages declare (group ``bayesobs.paradigms``), once."""
    global _plugged
    if _plugged:
        return
    _plugged = True
    for ep in entry_points(group=PARADIGMS_GROUP):
        try:
            paradigm = ep.load()
            if not isinstance(paradigm, Paradigm):
                raise TypeError(f"{type(paradigm).__name__} is not a bayesobs.paradigms.Paradigm")
            register(paradigm)
        except Exception as e:  # a third party's bug: one line, the other paradigms still work
            print(f"bayesobs: skipped {plugin_name(ep)}: {type(e).__name__}: {e}", file=sys.stderr)


def subject_kinds() -> dict[str, EntryPoint]:
    """Subject kinds installed packages add (entry points ``bayesobs.subjects``), not loaded.

    Returns
    -------
    dict of str to importlib.metadata.EntryPoint
        Kind (``KIND`` of ``KIND:NAME``) -> its entry point, which names a
        factory called as ``factory(NAME, seed=SEED)``; ``sim``, ``openai``
        ``anthropic`` and ``python`` are left out (the package's own).
    """
    builtin = ("sim", "openai", "anthropic", "python")
    return {ep.name: ep for ep in entry_points(group=SUBJECTS_GROUP) if ep.name not in builtin}


def register(paradigm: Paradigm, replace: bool = False) -> Paradigm:
    """Add ``paradigm`` to the registry; returns it.

    Parameters
    ----------
    paradigm : Paradigm
        The paradigm to add.
    replace : bool
        Replace a registered paradigm of the same name (otherwise an error).

    Returns
    -------
    Paradigm
        ``paradigm``.

    Raises
    ------
    BayesobsInputError
        Not a :class:`Paradigm`; its name, a task, a simulated subject kind
        or a table name already belongs to another registered paradigm.
    """
    if not isinstance(paradigm, Paradigm):
        raise BayesobsInputError(f"register takes a Paradigm, not {type(paradigm).__name__}")
    if paradigm.name in _REGISTRY and not replace:
        raise BayesobsInputError(f"paradigm {paradigm.name!r} is already registered")
    if paradigm.default and any(p.default and p.name != paradigm.name for p in _REGISTRY.values()):
        raise BayesobsInputError(f"paradigm {paradigm.name}: there is a default paradigm already")
    for other in _REGISTRY.values():
        if other.name == paradigm.name:
            continue
        for what, mine, theirs in (
            ("task", paradigm.tasks, other.tasks),
            ("simulated subject kind", paradigm.subjects, other.subjects),
            ("table", paradigm.tables, other.tables),
        ):
            clash = sorted(set(mine) & set(theirs))
            if clash:
                raise BayesobsInputError(
                    f"paradigm {paradigm.name}: {what} {', '.join(clash)} already belongs to "
                    f"paradigm {other.name}"
                )
    _REGISTRY[paradigm.name] = paradigm
    return paradigm


def unregister(name: str) -> None:
    """Remove the paradigm called ``name`` from the registry (nothing if it is not there).

    Parameters
    ----------
    name : str
        The paradigm's name.
    """
    _REGISTRY.pop(name, None)


def registered(default: bool = False) -> tuple[Paradigm, ...]:
    """The registered paradigms, in the order they were registered.

    Parameters
    ----------
    default : bool
        Include the default paradigm (magnitude: the rows no other claims,
        :attr:`Paradigm.default`); left out, the paradigms that claim rows.

    Returns
    -------
    tuple of Paradigm
        The package's own paradigms first, then any registered later.
    """
    _load_plugins()
    return tuple(p for p in _REGISTRY.values() if default or not p.default)


def default_paradigm() -> str:
    """The name of the default paradigm (the one of rows no other paradigm claims).

    Returns
    -------
    str
        Its name (``"magnitude"``).
    """
    return next(p.name for p in _REGISTRY.values() if p.default)


def markers() -> dict[str, tuple[str, ...]]:
    """The marker columns of each registered paradigm that has some.

    Returns
    -------
    dict of str to tuple of str
        Paradigm name -> the columns that mark an unlabelled row as its own.
    """
    return {p.name: p.markers for p in _REGISTRY.values() if p.markers}


def levels() -> dict[str, str]:
    """The level column of each registered paradigm that grades its trials.

    Returns
    -------
    dict of str to str
        Paradigm name -> its :attr:`Paradigm.level` column.
    """
    return {p.name: p.level for p in _REGISTRY.values() if p.level}


def by_name(name: str) -> Paradigm:
    """The registered paradigm called ``name``.

    Parameters
    ----------
    name : str
        A paradigm's name.

    Returns
    -------
    Paradigm
        The paradigm.

    Raises
    ------
    KeyError
        No registered paradigm has that name.
    """
    _load_plugins()
    return _REGISTRY[name]


def find_task(name: str) -> Any | None:
    """The task class called ``name`` from a registered paradigm, or None.

    Parameters
    ----------
    name : str
        A task name.

    Returns
    -------
    type or None
        The task class of the paradigm that provides it.
    """
    for p in registered(default=True):
        if name in p.tasks:
            return p.task(name)
    return None


def random_hook(task: str) -> Hook | None:
    """The :attr:`Paradigm.random` hook of the paradigm that provides ``task``, or None.

    Parameters
    ----------
    task : str
        A task name.

    Returns
    -------
    hook or None
        That paradigm's hook (unresolved); None when no registered paradigm
        provides ``task`` or its paradigm has none.
    """
    return next((p.random for p in registered(default=True) if task in p.tasks), None)


def sim_kinds() -> tuple[str, ...]:
    """Every simulated subject kind the registered paradigms provide.

    Returns
    -------
    tuple of str
        The kinds (``sim:KIND``), paradigm by paradigm.
    """
    return tuple(k for p in registered(default=True) for k in p.subjects)


def paradigm_tables_of(paradigm: Paradigm, tables: Mapping[str, Any]) -> dict[str, Any]:
    """The computed tables a paradigm's summary and report sections see.

    Its own :attr:`Paradigm.tables`, and for a paradigm :attr:`Paradigm.part_of`
    another, that one's too (both analyse the same rows).

    Parameters
    ----------
    paradigm : Paradigm
        The paradigm.
    tables : mapping of str to DataFrame or None
        Every score table by name (None: not computed).

    Returns
    -------
    dict of str to DataFrame
        The paradigm's tables that are not None, by name.
    """
    names = list(paradigm.tables)
    if paradigm.part_of in _REGISTRY:
        names = [*_REGISTRY[paradigm.part_of].tables, *names]
    return {n: tables[n] for n in dict.fromkeys(names) if tables.get(n) is not None}


def table_names() -> tuple[str, ...]:
    """Every table name the registered paradigms' analyses write (the default paradigm's aside).

    Returns
    -------
    tuple of str
        The table names, paradigm by paradigm.
    """
    return tuple(t for p in registered() for t in p.tables)


# ------------------------------------------------------------ the package's own
register(
    Paradigm(
        name="magnitude",  # BayesBench (METHOD): the rows no other paradigm claims
        default=True,
        tasks={
            "line_ratio": "bayesobs.magnitude.lines:LineRatio",
            "marker_location": "bayesobs.magnitude.lines:MarkerLocation",
            "maze_distance": "bayesobs.magnitude.maze:MazeDistance",
            "duration": "bayesobs.magnitude.duration:Duration",
            "numerosity": "bayesobs.magnitude.numerosity:Numerosity",
            "table": "bayesobs.magnitude.table:TableTask",
        },
        subjects={
            kind: "bayesobs.magnitude.subject:SimSubject"
            for kind in ("bayesian", "antibayes", "kalman", "linear", "anchor")
        },
        # the observer fits and scores of bayesobs.scores (they need the fit wing)
        tables=(
            "fits",
            "evidence",
            "accuracy",
            "cue",
            "bcs",
            "bayesbench",
            "bcs_tasks",
            "bcs_agreement",
            "cue_probe",
            "summary",
            "controls",
            "bcs_extra",
        ),
    )
)
register(
    Paradigm(
        name="search",
        markers=("set_size", "correct"),
        level="set_size",
        tasks={
            "circle_sizes": "bayesobs.search.tasks:CircleSizes",
            "two_among_five": "bayesobs.search.tasks:TwoAmongFive",
            "light_priors": "bayesobs.search.tasks:LightPriors",
        },
        subjects={
            "parallel": "bayesobs.search.subject:SearchSubject",
            "serial": "bayesobs.search.subject:SearchSubject",
            "graded": "bayesobs.search.subject:SearchSubject",
            "steep": "bayesobs.search.subject:SearchSubject",
        },
        tables=("search", "search_accuracy", "search_bias"),
        analyse="bayesobs.search.scores:search_scores",
        summary="bayesobs.leaderboard:search_text",
        report_sections="bayesobs.report.html:search_sections",
        random="bayesobs.search.subject:random_reply",
    )
)
register(
    Paradigm(
        name="hvs",
        tasks={"hvs": "bayesobs.hvs.tasks:HvsTask"},
        subjects={
            kind: "bayesobs.hvs.subject:HvsSubject" for kind in ("center", "saliency", "largest")
        },
        tables=("hvs",),
        analyse="bayesobs.hvs.logged:hvs_scores",
        summary="bayesobs.leaderboard:hvs_text",
        report_sections="bayesobs.hvs.report:hvs_report",
        random="bayesobs.hvs.subject:random_reply",
    )
)
register(
    Paradigm(
        name="perception",  # Tunnel Vision (Berman et al. 2025)
        markers=("problem_size", "gold"),
        level="problem_size",
        tasks={
            "object_reid": "bayesobs.tunnel.tasks:ObjectReid",
            "scavenger_hunt": "bayesobs.tunnel.tasks:ScavengerHunt",
            "circuits": "bayesobs.tunnel.tasks:Circuits",
        },
        subjects={
            kind: "bayesobs.tunnel.subject:TunnelSubject"
            for kind in (
                "matcher",
                "gist",
                "yes",
                "chainer",
                "frequent",
                "tracer",
                "colourcue",
                "nearest",
            )
        },
        tables=(
            "perception",
            "perception_size",
            "perception_effects",
            "perception_f1",
            "perception_chain",
        ),
        analyse="bayesobs.tunnel.scores:perception_scores",
        summary="bayesobs.leaderboard:perception_text",
        report_sections="bayesobs.report.perception:perception_report",
        random="bayesobs.tunnel.subject:random_reply",
    )
)
register(
    Paradigm(
        name="perceptv",  # Percept-V: its rows are perception rows of task percept_v
        part_of="perception",
        tasks={"percept_v": "bayesobs.perceptv.tasks:PerceptV"},
        subjects={
            kind: "bayesobs.perceptv.subject:PerceptVSubject"
            for kind in ("perceiver", "guesser", "sloppy")
        },
        tables=("perceptv_domains", "perceptv_skills", "perceptv_formats"),
        analyse="bayesobs.perceptv.score:perceptv_scores",
        report_sections="bayesobs.report.perception:perceptv_report",
        random="bayesobs.perceptv.subject:random_reply",
    )
)
register(
    Paradigm(
        name="choice",  # right/wrong tables: your own questions with a right answer and a level
        level="level",
        tasks={"table_choice": "bayesobs.choice.tasks:TableChoice"},
        subjects={"chooser": "bayesobs.choice.subject:ChoiceSubject"},
        tables=("choice",),
        analyse="bayesobs.choice.scores:choice_scores",
        random="bayesobs.choice.subject:random_reply",
    )
)
