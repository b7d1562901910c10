"""Accuracy, Bayesian Consistency Score and the BayesBench composite (METHOD §4–§7).

With the robust BCS_p, C_p, S_p beside them (METHOD §9; the signs are in
:mod:`bayesobs.scores.bcs`) and the flags of degenerate data (constant cells, fewer
than 2 runs per session type).

Every function returns DataFrames.  Bootstrap replicates share the draws of
:mod:`bayesobs.bootstrap` (per ``(subject, task, condition)`` group), so the
fits, the accuracy and the cue-combination numbers of replicate ``b`` all come
from the same resampled session runs.
"""

from .accuracy import accuracy_batch, accuracy_table, bias_variance, with_baseline
from .composite import NRMSE_MAX, PERFECT_REASON, ROBUST, SUMMARY
from .cue import (  # the cue probe lives beside the cue code (its API page); importable here too
    PROBE_MODELS,  # noqa: F401
    cue_predictions,  # noqa: F401
    cue_probe,  # noqa: F401
    cue_probe_table,  # noqa: F401
)
from .degenerate import CONSTANT_REASON, FEW_RUNS_REASON, constant_cells, few_runs_cells
from .results import SCORED_TRIALS, Scores
from .scoring import paradigm_tables, score, with_stratified

__all__ = [
    "CONSTANT_REASON",
    "FEW_RUNS_REASON",
    "NRMSE_MAX",
    "PERFECT_REASON",
    "ROBUST",
    "SCORED_TRIALS",
    "SUMMARY",
    "Scores",
    "accuracy_batch",
    "accuracy_table",
    "bias_variance",
    "constant_cells",
    "few_runs_cells",
    "paradigm_tables",
    "score",
    "with_baseline",
    "with_stratified",
]
