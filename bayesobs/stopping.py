"""The adaptive sweep's stopping rule: which cells' questions a round's scores leave open."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .scores.bcs import BCS_ABLATIONS
from .trials import CELL_KEYS

EVIDENCE_THRESHOLD = 0.5  # METHOD §3: a factor wins a cell when P(f) > 0.5


def cell_name(cell: tuple) -> str:
    """``subject/task/modality/condition``: a cell as the manifest names it."""
    return "/".join(map(str, cell))


def open_questions(evidence: pd.DataFrame, bcs: pd.DataFrame, sign_level: float) -> dict:
    """Open questions per cell: a factor whose interval spans 0.5, an ablation pair with ``|s_p| < sign_level``."""
    out: dict[tuple, list[str]] = {}
    for row in evidence.itertuples(index=False):
        cell = tuple(getattr(row, k) for k in CELL_KEYS)
        lo, hi = row.p_lo, row.p_hi
        if not (np.isfinite(lo) and np.isfinite(hi)) or lo <= EVIDENCE_THRESHOLD <= hi:
            out.setdefault(cell, []).append(f"factor {row.factor}")
        else:
            out.setdefault(cell, [])
    for row in bcs.itertuples(index=False) if len(bcs) else ():
        if row.ablation not in BCS_ABLATIONS:
            continue
        if not (np.isfinite(row.s_p) and abs(row.s_p) >= sign_level):
            mod = BCS_ABLATIONS[row.ablation]
            for cond in ("base", row.ablation):  # both cells of the pair
                out.setdefault((row.subject, row.task, mod, cond), []).append(
                    f"sign of delta_w_prior ({row.ablation})"
                )
    return out


def conclusions(evidence: pd.DataFrame, bcs: pd.DataFrame) -> dict:
    """The conclusions a sweep's scores reach: factor winner per cell, BCS sign per ablation pair."""
    out = {}
    for row in evidence.itertuples(index=False):
        cell = tuple(getattr(row, k) for k in CELL_KEYS)
        out[("factor", *cell, row.factor)] = (
            None if not np.isfinite(row.p) else bool(row.p > EVIDENCE_THRESHOLD)
        )
    for row in bcs.itertuples(index=False) if len(bcs) else ():
        if row.ablation in BCS_ABLATIONS:
            out[("sign", row.subject, row.task, row.ablation)] = (
                None if not np.isfinite(row.s) else int(row.s)
            )
    return out
