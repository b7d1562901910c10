"""HVSBench-style perception tasks: standardiser, MultiMatch, metrics, loaders, questions, sims.

HVSBench (Lin et al. 2024, "Do Multimodal Large Language Models See Like
Humans?") publishes neither code nor question files; everything here is an
"HVSBench-style" recreation from the paper's text and the public source
datasets (COCO-Search18, COCO-FreeView, SIS10K, a saliency-rank CSV).
Numbers produced with it are HVSBench-style, not HVSBench results.
"""

from .multimatch import multimatch
from .standardise import DEFAULT_SCANPATH, GT_MEAN_COUNT, KINDS, standardise

__all__ = ["DEFAULT_SCANPATH", "GT_MEAN_COUNT", "KINDS", "multimatch", "standardise"]
