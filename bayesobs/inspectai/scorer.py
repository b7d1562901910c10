"""The scorer: each trial of a sample's run (stimulus, parsed response, gold, validity) in its score."""

from __future__ import annotations

from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState

from .solver import TRIALS_KEY

SHOWN = ("trial", "stimulus", "response", "gold", "valid", "invalid_reason", "raw_response")


def trial_score(rows: list[dict]) -> Score:
    """A run's score: the share of valid replies, each trial's fields in the metadata."""
    trials = [{k: r.get(k, r["stimulus"] if k == "gold" else None) for k in SHOWN} for r in rows]
    valid = sum(bool(r["valid"]) for r in rows)
    why = sorted({r["invalid_reason"] for r in trials if not r["valid"] and r["invalid_reason"]})
    return Score(
        value=valid / len(rows) if rows else 0.0,
        answer=rows[-1].get("raw_response") if rows else None,
        explanation=f"{valid} of {len(rows)} replies valid"
        + (f" (invalid: {'; '.join(why)})" if why else ""),
        metadata={"trials": trials},
    )


@scorer(metrics=[mean(), stderr()])
def trial_scorer():
    """Record every trial of the sample's run in its score; the value is the share of valid replies.

    Returns
    -------
    Scorer
        Reads the trial rows the solver put in the sample store
        (:data:`bayesobs.inspectai.solver.TRIALS_KEY`).
    """

    async def score(state: TaskState, target: Target) -> Score:
        return trial_score(state.store.get(TRIALS_KEY, []))

    return score
