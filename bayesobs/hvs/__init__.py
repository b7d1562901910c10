"""HVSBench-style perception tasks: standardiser, MultiMatch, metrics, loaders, questions, sims."""

from .fixture import write_fixture
from .loaders import (
    load_fixations,
    load_folder,
    load_ranks,
    load_sis10k,
    missing_files,
    missing_report,
)
from .metrics import (
    accuracy_by_type,
    count_metrics,
    hvs_table,
    random_baseline_scores,
    scanpath_score,
    score_replies,
    write_hvs_csv,
)
from .multimatch import multimatch
from .questions import build_questions, full_prompt, to_frame
from .sims import SIMS, answer, sim_context, spectral_residual
from .standardise import DEFAULT_SCANPATH, GT_MEAN_COUNT, KINDS, standardise

__all__ = [
    "DEFAULT_SCANPATH",
    "GT_MEAN_COUNT",
    "KINDS",
    "SIMS",
    "accuracy_by_type",
    "answer",
    "build_questions",
    "count_metrics",
    "full_prompt",
    "hvs_table",
    "load_fixations",
    "load_folder",
    "load_ranks",
    "load_sis10k",
    "missing_files",
    "missing_report",
    "multimatch",
    "random_baseline_scores",
    "scanpath_score",
    "score_replies",
    "sim_context",
    "spectral_residual",
    "standardise",
    "to_frame",
    "write_fixture",
    "write_hvs_csv",
]
