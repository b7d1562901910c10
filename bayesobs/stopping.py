"""The adaptive sweep's stopping rule: which cells' questions a round's scores leave open.

A question is open while the risk of stopping now is at least ``risk``: the
probability, under a normal approximation, that the fixed protocol (the cap's
runs) would reach a conclusion on the other side of the decision threshold
from the one the runs asked so far point to.  With ``d`` the estimate's
distance from the threshold in units of its standard error ``se_n`` at ``n``
of ``N`` runs (``f = n / N``), the cap's estimate is about
``Normal(d, 1 - f)`` in those units and its standard error ``sqrt(f)``, so

    risk = Phi((-c * sqrt(f) - |d|) / sqrt(1 - f))

where ``c`` is the cap's decision distance: 1 for a factor (its 68% interval
excludes 0.5) and ``Phi^-1((1 + sign_level) / 2)`` for a BCS sign (the
paper's ``s_p``, METHOD §9, reaching ``sign_level``).  ``se_n`` is the
bootstrap's, times ``sqrt(n / (n - 1))``: a session-run bootstrap of few runs
underestimates the spread.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pandas as pd

from .scores.bcs import BCS_ABLATIONS
from .trials import CELL_KEYS

EVIDENCE_THRESHOLD = 0.5  # METHOD §3: a factor wins a cell when P(f) > 0.5
_NORMAL = NormalDist()  # the standard normal (stdlib: `score` does not load scipy.stats)


def cell_name(cell: tuple) -> str:
    """``subject/task/modality/condition``: a cell as the manifest names it."""
    return "/".join(map(str, cell))


def stop_risk(distance: float, fraction: float, decide: float = 1.0) -> float:
    """P(the cap decides on the other side), ``distance`` in current standard errors, at ``fraction`` of the cap."""
    if fraction >= 1:
        return 0.0
    return float(
        _NORMAL.cdf((-decide * math.sqrt(fraction) - abs(distance)) / math.sqrt(1 - fraction))
    )


def _small_sample(n: int) -> float:
    """The bootstrap's standard error of ``n`` runs, scaled up by ``sqrt(n / (n - 1))``."""
    return math.sqrt(n / (n - 1)) if n > 1 else math.inf


def open_questions(
    evidence: pd.DataFrame, bcs: pd.DataFrame, runs: dict, risk: float, sign_level: float
) -> dict:
    """Open questions per cell; ``runs`` maps a cell (strings) to (runs asked, cap)."""
    out: dict[tuple, list[str]] = {}
    for row in evidence.itertuples(index=False):
        cell = tuple(str(getattr(row, k)) for k in CELL_KEYS)
        n, cap = runs[cell]
        questions = out.setdefault(cell, [])
        lo, hi = row.p_lo, row.p_hi
        if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(row.p)):
            questions.append(f"factor {row.factor}")
            continue
        se = max((hi - lo) / 2, 1e-9) * _small_sample(n)
        if stop_risk((row.p - EVIDENCE_THRESHOLD) / se, n / cap) >= risk:
            questions.append(f"factor {row.factor}")
    decide = _NORMAL.inv_cdf((1 + sign_level) / 2) if sign_level < 1 else math.inf
    for row in bcs.itertuples(index=False) if len(bcs) else ():
        if row.ablation not in BCS_ABLATIONS:
            continue
        mod = BCS_ABLATIONS[row.ablation]
        pair = [(str(row.subject), str(row.task), mod, c) for c in ("base", row.ablation)]
        if not all(c in runs for c in pair):
            continue
        n = min(runs[c][0] for c in pair)
        if np.isfinite(row.s_p):  # s_p = 2 Phi(z) - 1: z in standard errors
            z = _NORMAL.inv_cdf((min(max(row.s_p, -0.999), 0.999) + 1) / 2) / _small_sample(n)
            if stop_risk(z, n / runs[pair[0]][1], decide) < risk:
                continue
        for c in pair:
            out.setdefault(c, []).append(f"sign of delta_w_prior ({row.ablation})")
    return out


def conclusions(evidence: pd.DataFrame, bcs: pd.DataFrame, sign_level: float) -> dict:
    """Key -> (conclusion, decided): factor winners (P(f) > 0.5) per cell, the paper's BCS sign per pair.

    ``decided``: the factor's 68% interval excludes 0.5; the pair's ``|s_p|`` reaches ``sign_level``.
    """
    out = {}
    for row in evidence.itertuples(index=False):
        cell = tuple(getattr(row, k) for k in CELL_KEYS)
        won = None if not np.isfinite(row.p) else bool(row.p > EVIDENCE_THRESHOLD)
        decided = bool(row.p_lo > EVIDENCE_THRESHOLD or row.p_hi < EVIDENCE_THRESHOLD)
        out[("factor", *cell, row.factor)] = (won, decided)
    for row in bcs.itertuples(index=False) if len(bcs) else ():
        if row.ablation in BCS_ABLATIONS:
            sign = None if not np.isfinite(row.s) else int(row.s)
            decided = bool(np.isfinite(row.s_p) and abs(row.s_p) >= sign_level)
            out[("sign", row.subject, row.task, row.ablation)] = (sign, decided)
    return out


def same_conclusions(reference: dict, other: dict) -> dict:
    """Key of ``reference`` (:func:`conclusions`) -> whether ``other`` reaches its conclusion."""
    return {k: other.get(k, (None,))[0] == v[0] for k, v in reference.items()}
