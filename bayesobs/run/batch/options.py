"""A batch run's options: ``--poll-max``, the subjects that have a batch API, the split limits."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...errors import BayesobsInputError

POLL_FIRST_S = 1.0  # the first poll, seconds after a round is submitted
POLL_MAX_S = 60.0  # --poll-max default: the longest wait between polls
MAX_BATCH_REQUESTS = 50_000  # OpenAI's limit per batch
MAX_BATCH_BYTES = 190 * 2**20  # under OpenAI's 200 MB per input file


def check_poll_max(value: Any) -> float:
    """``--poll-max``: a finite number of seconds > 0, else one clear error."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise BayesobsInputError(f"--poll-max must be a positive number of seconds, not {value!r}")
    return float(value)


def check_batch_subjects(subjects: list[str]) -> None:
    """Every subject of a ``--batch`` run has a batch API (``openai:``, ``anthropic:``); else one clear error."""
    for s in subjects:
        if not str(s).startswith(("openai:", "anthropic:")):
            raise BayesobsInputError(
                f"--batch sends requests through OpenAI's Batch API or Anthropic's Message "
                f"Batches, which {s} does not have; run it without --batch"
            )


@dataclass
class BatchOptions:
    """How a batch run polls and splits its requests (``--poll-max``)."""

    poll_max: float = POLL_MAX_S
    max_requests: int = MAX_BATCH_REQUESTS
    max_bytes: int = MAX_BATCH_BYTES

    def __post_init__(self) -> None:
        self.poll_max = check_poll_max(self.poll_max)
