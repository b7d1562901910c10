"""The subject interface: a chat request in, a reply out (shared by the run wing and the paradigms' simulated subjects)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import FatalSubjectError, SubjectError

__all__ = ["COT_SENTENCE", "FatalSubjectError", "Reply", "Request", "SubjectError", "Turn"]

# the cot condition's sentence, in place of "Do not explain or reason. Only output the final
# answer." (bayesobs.run.ablations puts it in the system prompt; simulated subjects recognise it)
COT_SENTENCE = (
    "Think step by step before you answer. Then give your final answer on the last line, "
    "after 'Answer:', in the format asked above."
)


@dataclass(frozen=True)
class Turn:
    """One chat message: text and/or PNG images.

    ``png`` is the one image of a turn; a turn that shows several (object
    re-identification shows two) gives them all, in order, in ``images``
    (then ``png`` is the first of them).
    """

    role: str  # "user" or "assistant"
    text: str | None = None
    png: bytes | None = None
    images: tuple[bytes, ...] = ()

    @property
    def pngs(self) -> tuple[bytes, ...]:
        """Every image of the turn, in order (``images``, else ``png`` alone, else none)."""
        if self.images:
            return self.images
        return (self.png,) if self.png is not None else ()


@dataclass(frozen=True)
class Request:
    """What a subject is asked on one trial: system prompt, history, current stimulus.

    ``meta`` carries the trial's identity (task, modality, condition,
    session, run, trial, seed); subjects must not read the true value from it.
    """

    system: str
    turns: tuple[Turn, ...]
    meta: dict[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None  # the task's reply budget (perception tasks), else the subject's
    session_range: tuple[float, float] | None = None  # the session's stimulus range (sim:random)


@dataclass(frozen=True)
class Reply:
    """A subject's reply to one trial, with how it was obtained."""

    text: str
    latency_s: float = 0.0
    usage: dict[str, int] | None = None
    cached: bool = False
    attempts: int = 1
    finish_reason: str | None = None  # "length": cut off by max_tokens
    cached_from: str | None = None  # the folder a cached reply was first logged for
    # optional trial-row columns of API subjects (token_param, temperature_effective,
    # reasoning_tokens, cached_tokens); None for simulated subjects
    extra: dict[str, Any] | None = None
