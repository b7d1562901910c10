"""Posterior BCS: P(w_prior rose under an ablation) from two posteriors of the static observer."""

from __future__ import annotations

import numpy as np


def bcs_posterior(idatas: dict, base_key: tuple, ablation_key: tuple) -> float:
    """P(w_prior rose under the ablation) from two independent posteriors of ``static``."""
    a = np.asarray(idatas[(*base_key, "static")].posterior["w_prior"]).ravel()
    b = np.asarray(idatas[(*ablation_key, "static")].posterior["w_prior"]).ravel()
    n = min(len(a), len(b))
    return float(np.mean(b[:n] > a[:n]))
