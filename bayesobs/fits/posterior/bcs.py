"""Posterior BCS: P(w_prior rose under an ablation) from two posteriors of the static observer."""

from __future__ import annotations

import numpy as np


def bcs_posterior(idatas: dict, base_key: tuple, ablation_key: tuple) -> float:
    """P(w_prior rose under the ablation) from two independent posteriors of ``static``.

    Parameters
    ----------
    idatas : dict
        :func:`fit_posterior`'s fits, keyed ``(*cell key, variant)``.
    base_key, ablation_key : tuple
        Cell keys of the baseline and the ablated condition; both need a
        ``static`` fit.

    Returns
    -------
    float
        The share of paired draws (first ``n`` of each, flattened) in which
        the ablation's ``w_prior`` exceeds the baseline's.
    """
    a = np.asarray(idatas[(*base_key, "static")].posterior["w_prior"]).ravel()
    b = np.asarray(idatas[(*ablation_key, "static")].posterior["w_prior"]).ravel()
    n = min(len(a), len(b))
    return float(np.mean(b[:n] > a[:n]))
