"""Who answers: simulated observers, OpenAI-compatible chat models and Claude (Messages API)."""

from __future__ import annotations

from ...chat import FatalSubjectError, Reply, Request, SubjectError, Turn
from ...errors import BayesobsInputError
from ...hvs.subject import HvsSubject
from ...magnitude.subject import SimSubject
from ...paradigms import plugin_name, random_hook, resolve, sim_kinds, subject_kinds
from ...perceptv.subject import PerceptVSubject
from ...search.subject import SearchSubject
from ...seeds import stable_rng
from ...tunnel.subject import TunnelSubject


def __getattr__(name: str):
    """``SIM_KINDS``: the registered paradigms' kinds and random, when asked for (PEP 562)."""
    if name == "SIM_KINDS":  # on use, so that plug-ins (bayesobs.paradigms) load lazily
        return (*sim_kinds(), "random")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_subject(spec: str) -> tuple[str, str]:
    """``"sim:bayesian"`` -> ``("sim", "bayesian")``, validating the form.

    Parameters
    ----------
    spec : str
        ``KIND:NAME``: ``sim:<kind>`` with a kind of :data:`SIM_KINDS` or of a registered
        paradigm (:mod:`bayesobs.paradigms`),
        ``openai:<model>``, ``anthropic:<model>``, ``inspect:<provider>/<model>`` or
        ``python:<package.module>:<name>``.

    Returns
    -------
    kind, name : str
        The part before the first colon and the part after it.

    Raises
    ------
    BayesobsInputError
        When ``spec`` has no colon or no name, its kind is not ``sim``,
        ``openai``, ``anthropic``, ``inspect``, ``python`` or an installed one, or a ``sim``
        name is not a simulated kind.
    """
    kind, sep, name = spec.partition(":")
    known = (*sim_kinds(), "random")
    plugged = subject_kinds()  # installed packages' kinds (entry points bayesobs.subjects)
    if (
        not sep
        or not name
        or kind not in ("sim", "openai", "anthropic", "inspect", "python", *plugged)
    ):
        more = "".join(f", {k}:<name>" for k in plugged)
        raise BayesobsInputError(
            f"unknown subject {spec!r}: use sim:<kind> ({', '.join(known)}), openai:<model>{more}, "
            "anthropic:<model>, inspect:<provider>/<model> or python:<package.module>:<name>"
        )
    if kind == "sim" and name not in known:
        raise BayesobsInputError(
            f"unknown simulated subject {spec!r}; choose from {', '.join('sim:' + k for k in known)}"
        )
    return kind, name


def plugin_subject(spec: str, seed: int = 0):
    """A subject of a kind an installed package adds (entry points ``bayesobs.subjects``).

    Parameters
    ----------
    spec : str
        ``KIND:NAME`` with a kind of :func:`bayesobs.paradigms.subject_kinds`.
    seed : int
        The subject's seed.

    Returns
    -------
    object
        What the kind's factory returns, called as ``factory(NAME, seed=seed)``.

    Raises
    ------
    BayesobsInputError
        When the factory fails to load or refuses ``NAME`` (one line naming
        the distribution and the entry point).
    """
    kind, _, name = spec.partition(":")
    ep = subject_kinds()[kind]
    try:
        return ep.load()(name, seed=seed)
    except Exception as e:  # a third party's bug or a name it refuses: one line, exit 2
        raise BayesobsInputError(
            f"subject {spec!r}: {plugin_name(ep)} failed: {type(e).__name__}: {e}"
        ) from e


class RandomSubject:
    """``sim:random``: a random valid answer in the format of each paradigm.

    The paradigm that provides the trial's task answers through its
    ``random`` hook (:attr:`bayesobs.paradigms.Paradigm.random`): visual
    search a random cell or point, an HVSBench-style question the paper's
    random reply, Tunnel Vision a random valid answer of the task
    (``{yes}``/``{no}``, one of the 11 colours, a component shown),
    Percept-V the guesser's reply.  A task whose paradigm has none
    (magnitude) gets a number drawn uniformly in the session's range (the
    request's ``session_range``), blind to the stimulus.
    """

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.name = "sim:random"

    def answer(self, request: Request) -> str:
        """A random valid answer in the format of the trial's paradigm.

        Parameters
        ----------
        request : Request
            The trial's request.

        Returns
        -------
        str
            The paradigm's random reply, else a number uniform in the request's
            ``session_range`` (four significant digits).

        Raises
        ------
        FatalSubjectError
            When the task has no answer format here (no hook, no ``session_range``).
        """
        meta = request.meta
        hook = random_hook(meta["task"])
        if hook is not None:
            return resolve(hook)(request, self.seed)
        if request.session_range is None:
            raise FatalSubjectError(f"sim:random has no answer format for task {meta['task']}")
        low, high = request.session_range
        parts = ("task", "session", "run", "condition", "modality", "trial")
        rng = stable_rng((self.seed, "random", *(meta.get(k) for k in parts)))
        return f"{rng.uniform(low, high):.4g}"

    async def complete(self, request: Request) -> Reply:
        """The subject interface: :meth:`answer` as a :class:`Reply`.

        Parameters
        ----------
        request : Request
            The trial's request.

        Returns
        -------
        Reply
            :meth:`answer` as the reply text.

        Raises
        ------
        FatalSubjectError
            When the task has no answer format here.
        """
        return Reply(text=self.answer(request))


__all__ = [
    "SIM_KINDS",
    "FatalSubjectError",
    "HvsSubject",
    "PerceptVSubject",
    "RandomSubject",
    "Reply",
    "Request",
    "SearchSubject",
    "SimSubject",
    "SubjectError",
    "TunnelSubject",
    "Turn",
    "parse_subject",
    "plugin_subject",
]
