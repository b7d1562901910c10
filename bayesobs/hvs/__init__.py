"""HVSBench-style perception tasks: standardiser, MultiMatch, metrics, loaders, questions, sims.

HVSBench (Lin et al. 2024, "Do Multimodal Large Language Models See Like
Humans?") publishes neither code nor question files; everything here is an
"HVSBench-style" recreation from the paper's text and the public source
datasets (COCO-Search18, COCO-FreeView, SIS10K, a saliency-rank CSV).
Numbers produced with it are HVSBench-style, not HVSBench results.

Modules: :mod:`.standardise` (answer standardiser), :mod:`.multimatch`
(scanpath similarity), :mod:`.loaders` (source files and the ``--hvs DIR``
layout), :mod:`.fixture` (synthetic test/demo folder), :mod:`.questions`
(Q1-Q13), :mod:`.metrics` (scores, random baselines, ``hvs.csv``),
:mod:`.sims` (simulated subjects).
"""

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
