"""Bayesian Consistency Score (METHOD §5) and its robust companions (METHOD §9).

The sign of each ablation's shift in the static observer's prior weight,
per ``(subject, task, ablation)`` and bootstrap replicate: the paper's
``s_a`` (:func:`sign_score`), the robust sign with ties as 0
(:func:`robust_sign`) and its mean over replicates ``s_p``
(:func:`sign_probability`).  :mod:`bayesobs.scores` sums them into BCS and
BCS_p; ``noise_text`` and ``cot`` (:data:`EXTRA_ABLATIONS`) are scored the
same way, with the change in accuracy beside, but never enter the paper's 15
pairs.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from ..trials import CELL_KEYS

# METHOD §5: ablation -> modality its w_prior is measured in.
BCS_ABLATIONS: dict[str, str] = {
    "steer_verbal": "multimodal",
    "steer_numeric": "multimodal",
    "noise_constant": "image",
    "noise_gradual": "image",
    "context_long": "multimodal",
}
# Ablations scored like the BCS ablations but never inside the paper's 15 pairs:
# ablation -> modality its w_prior is measured in (bcs_extra.csv, extra bcs_tasks columns);
# a tuple: the first of these modalities where the task has both base and ablation cells
# (cot runs beside base for every task, duration in text only).
EXTRA_ABLATIONS: dict[str, str | tuple[str, ...]] = {
    "noise_text": "text",
    "cot": ("multimodal", "text", "image"),
}
PRIOR_DOMINANT = 0.9
BCS_MAX = 15.0
# METHOD §9: a shift smaller than this is a tie (sign 0).
TIE = 1e-9


def bcs_batch(cells: pd.DataFrame, w_prior: np.ndarray):
    """Per ``(subject, task, ablation)``: ``w_base``, ``w_ablation``, ``s``.

    Parameters
    ----------
    cells : DataFrame
        ``subject, task, modality, condition`` of each fitted cell.
    w_prior : array, shape (cells, 1 + B)
        ``w_prior`` of the ``static`` variant per cell and replicate.

    Returns
    -------
    rows : DataFrame
        ``subject, task, ablation, modality``.
    values : dict of arrays
        ``w_base``, ``w_ablation``, ``s``, ``delta_w`` and ``s_robust`` (the
        METHOD §9 sign of each replicate), each ``(rows, 1 + B)``; ``s_p``,
        shape ``(rows,)`` (NaN without replicates).
    missing : DataFrame
        ``subject, task, component, reason`` for ablations that could not be scored.
    """
    index = {tuple(r): i for i, r in enumerate(cells[list(CELL_KEYS)].itertuples(index=False))}
    rows, wb, wa, missing = [], [], [], []
    # Tasks with image or multimodal cells: in the BayesBench protocol exactly
    # the three multimodal tasks (duration is text-only and gets no BCS).
    visual = cells[cells["modality"].isin(["image", "multimodal"])]
    for subject, task in visual[["subject", "task"]].drop_duplicates().itertuples(index=False):
        for abl, mod in BCS_ABLATIONS.items():
            i_base = index.get((subject, task, mod, "base"))
            i_abl = index.get((subject, task, mod, abl))
            if i_base is None or i_abl is None:
                what = f"{mod} base" if i_base is None else f"{mod} {abl}"
                missing.append((subject, task, f"BCS {abl}", f"no {what} trials"))
                continue
            rows.append((subject, task, abl, mod))
            wb.append(w_prior[i_base])
            wa.append(w_prior[i_abl])
    out = pd.DataFrame(rows, columns=["subject", "task", "ablation", "modality"])
    shape = (0, w_prior.shape[1])
    wb = np.array(wb).reshape(-1, w_prior.shape[1]) if wb else np.empty(shape)
    wa = np.array(wa).reshape(-1, w_prior.shape[1]) if wa else np.empty(shape)
    s = sign_score(wb, wa)
    values = {
        "w_base": wb,
        "w_ablation": wa,
        "s": s,
        "delta_w": wa - wb,
        "s_robust": robust_sign(wb, wa),
        "s_p": sign_probability(wb[:, 1:], wa[:, 1:]),
    }
    return out, values, pd.DataFrame(missing, columns=["subject", "task", "component", "reason"])


def extra_ablations(
    cells: pd.DataFrame,
    w_prior: np.ndarray,
    acc_cells: pd.DataFrame | None = None,
    nrmse: np.ndarray | None = None,
) -> pd.DataFrame:
    """``bcs_extra.csv``: the :data:`EXTRA_ABLATIONS` scored like a BCS ablation.

    One row per ``(subject, task, ablation)`` with both the ablation and the
    base cell in the ablation's modality (the first such of a tuple):
    ``w_base``, ``w_ablation``, ``delta_w``, the paper's sign ``s`` and
    ``s_p`` (METHOD §9; NaN without replicates).  With the accuracy cells
    (``acc_cells`` and their full-data ``nrmse``, as
    :func:`bayesobs.scores.accuracy_batch` gives them) also
    ``nrmse_base``, ``nrmse_ablation`` and ``delta_nrmse`` (negative: the
    ablation made the answers more accurate).  These never enter the BCS,
    ``C`` or ``S``.

    Parameters
    ----------
    cells : DataFrame
        ``subject, task, modality, condition`` of each fitted cell.
    w_prior : numpy.ndarray, shape (cells, 1 + B)
        ``w_prior`` of the ``static`` variant per cell and replicate.
    acc_cells : DataFrame, optional
        The cells of the accuracy batch.
    nrmse : numpy.ndarray, shape (acc_cells, 1 + B), optional
        Their NRMSE; only the full-data column is read.

    Returns
    -------
    DataFrame
        ``subject, task, ablation, modality, w_base, w_ablation, delta_w, s,
        s_p`` and, with the accuracy cells, ``nrmse_base, nrmse_ablation,
        delta_nrmse``.
    """
    index = {tuple(r): i for i, r in enumerate(cells[list(CELL_KEYS)].itertuples(index=False))}
    rows, wb, wa = [], [], []
    for subject, task in cells[["subject", "task"]].drop_duplicates().itertuples(index=False):
        for abl, mods in EXTRA_ABLATIONS.items():
            for mod in (mods,) if isinstance(mods, str) else mods:
                i_base = index.get((subject, task, mod, "base"))
                i_abl = index.get((subject, task, mod, abl))
                if i_base is not None and i_abl is not None:
                    rows.append((subject, task, abl, mod))
                    wb.append(w_prior[i_base])
                    wa.append(w_prior[i_abl])
                    break
    out = pd.DataFrame(rows, columns=["subject", "task", "ablation", "modality"])
    R = w_prior.shape[1]
    wb = np.array(wb).reshape(-1, R)
    wa = np.array(wa).reshape(-1, R)
    out["w_base"] = wb[:, 0]
    out["w_ablation"] = wa[:, 0]
    out["delta_w"] = wa[:, 0] - wb[:, 0]
    out["s"] = sign_score(wb[:, 0], wa[:, 0])
    out["s_p"] = sign_probability(wb[:, 1:], wa[:, 1:])
    if acc_cells is not None and nrmse is not None:
        acc = {
            tuple(r): float(nrmse[i, 0])
            for i, r in enumerate(acc_cells[list(CELL_KEYS)].itertuples(index=False))
        }
        for name, cond in (("nrmse_base", None), ("nrmse_ablation", "ablation")):
            out[name] = [
                acc.get((r.subject, r.task, r.modality, r.ablation if cond else "base"), np.nan)
                for r in out.itertuples(index=False)
            ]
        out["delta_nrmse"] = out["nrmse_ablation"] - out["nrmse_base"]
    return out


def sign_score(w_base: np.ndarray, w_ablation: np.ndarray) -> np.ndarray:
    """``s_a``: 0 if ``w_ablation > 0.9``, else +1 if it did not fall, else -1; NaN if unknown.

    Parameters
    ----------
    w_base : array_like
        ``w_prior`` of the base cell.
    w_ablation : array_like
        ``w_prior`` of the ablation cell (same shape).

    Returns
    -------
    numpy.ndarray
        The sign, one of 1, -1, 0 or NaN, per element.
    """
    w_base = np.asarray(w_base, dtype=float)
    w_ablation = np.asarray(w_ablation, dtype=float)
    s = np.where(w_ablation - w_base >= 0, 1.0, -1.0)
    s = np.where(w_ablation > PRIOR_DOMINANT, 0.0, s)
    return np.where(np.isnan(w_base) | np.isnan(w_ablation), np.nan, s)


def robust_sign(w_base: np.ndarray, w_ablation: np.ndarray) -> np.ndarray:
    """METHOD §9 sign of one shift: ``sgn(Δw)`` with ties and a dominant prior as 0.

    0 where ``w_ablation > 0.9`` or ``|w_ablation - w_base| < 1e-9``, else the
    sign of the shift; NaN where either weight is unknown.

    Parameters
    ----------
    w_base : array_like
        ``w_prior`` of the base cell.
    w_ablation : array_like
        ``w_prior`` of the ablation cell (same shape).

    Returns
    -------
    numpy.ndarray
        The sign, one of 1, -1, 0 or NaN, per element.
    """
    w_base = np.asarray(w_base, dtype=float)
    w_ablation = np.asarray(w_ablation, dtype=float)
    d = w_ablation - w_base
    known = ~(np.isnan(w_base) | np.isnan(w_ablation))
    s = np.where(np.abs(np.where(known, d, 0.0)) < TIE, 0.0, np.sign(np.where(known, d, 0.0)))
    s = np.where(w_ablation > PRIOR_DOMINANT, 0.0, s)
    return np.where(known, s, np.nan)


def sign_probability(w_base: np.ndarray, w_ablation: np.ndarray) -> np.ndarray:
    """``s_p`` (METHOD §9): the mean robust sign over bootstrap replicates.

    Parameters
    ----------
    w_base, w_ablation : arrays, shape (rows, B)
        ``w_prior`` of the base and ablation fits in each replicate (the
        full-data column excluded).

    Returns
    -------
    ndarray, shape (rows,)
        ``(1/B) sum_b robust_sign(...)`` in ``[-1, 1]``.  Replicates where a
        weight is unknown are left out of the mean; NaN where none is known
        or ``B = 0``.
    """
    s = robust_sign(w_base, w_ablation)
    if s.shape[1] == 0:
        return np.full(s.shape[0], np.nan)
    known = ~np.isnan(s)
    count = known.sum(axis=1)
    total = np.where(known, s, 0.0).sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def nansum_or_nan(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """Sum ignoring NaN, but NaN where every value is NaN.

    Parameters
    ----------
    values : ndarray
        The values to sum.
    axis : int, default 0
        The axis to sum over.

    Returns
    -------
    ndarray
        ``numpy.nansum`` over ``axis``, NaN where every summed value is NaN.
    """
    return np.where(np.isnan(values).all(axis=axis), np.nan, np.nansum(values, axis=axis))


def sum_by(keys: pd.DataFrame, by: list[str], values: np.ndarray):
    """Sum rows of ``values`` within groups of ``keys[by]`` (NaN rows count as 0).

    Parameters
    ----------
    keys : DataFrame
        One row per row of ``values``, holding the ``by`` columns.
    by : list of str
        The grouping columns.
    values : ndarray
        Shape ``(len(keys), m)``; NaN entries count as 0.

    Returns
    -------
    groups : DataFrame
        The distinct ``keys[by]`` rows, sorted by ``by``, index reset.
    sums : ndarray
        Shape ``(len(groups), m)``: row ``g`` is the sum of the rows of group ``g``.
    """
    codes = keys.groupby(by, sort=True).ngroup().to_numpy()
    groups = keys[by].drop_duplicates().sort_values(by).reset_index(drop=True)
    out = np.zeros((len(groups), values.shape[1]))
    np.add.at(out, codes, np.nan_to_num(values))
    return groups, out


def bcs_agreement(bcs: pd.DataFrame, cells: pd.DataFrame, w_prior: np.ndarray) -> pd.DataFrame:
    """Beyond the paper: how consistently a subject's BCS signs agree.

    ``across_tasks``: over ablations, the fraction of pairs of tasks whose
    ``s_a`` agree.  ``across_modalities``: over (task, ablation), the fraction
    where ``s_a`` measured in the image modality equals ``s_a`` measured in the
    multimodal modality (each against its own base).

    Parameters
    ----------
    bcs : DataFrame
        BCS rows with ``subject, task, ablation, s``.
    cells : DataFrame
        ``subject, task, modality, condition`` of each fitted cell.
    w_prior : numpy.ndarray, shape (cells, 1 + B)
        ``w_prior`` of the ``static`` variant; only the full-data column is read.

    Returns
    -------
    DataFrame
        ``subject, across_tasks, task_pairs, across_modalities,
        modality_pairs``: the two fractions (NaN without a pair) and the
        number of pairs behind each.
    """
    index = {tuple(r): i for i, r in enumerate(cells[list(CELL_KEYS)].itertuples(index=False))}
    out = []
    for subject, sub in bcs.groupby("subject", sort=True):
        pairs = agree = 0
        for _, a in sub.groupby("ablation"):
            for s1, s2 in itertools.combinations(a["s"].to_numpy(), 2):
                pairs += 1
                agree += s1 == s2
        both = same = 0
        for task in sub["task"].unique():
            for abl in BCS_ABLATIONS:
                w = {}
                for mod in ("image", "multimodal"):
                    ib, ia = (
                        index.get((subject, task, mod, "base")),
                        index.get((subject, task, mod, abl)),
                    )
                    if ib is not None and ia is not None:
                        w[mod] = sign_score(w_prior[ib, 0], w_prior[ia, 0])
                if len(w) == 2:
                    both += 1
                    same += w["image"] == w["multimodal"]
        out.append(
            {
                "subject": subject,
                "across_tasks": agree / pairs if pairs else np.nan,
                "task_pairs": pairs,
                "across_modalities": same / both if both else np.nan,
                "modality_pairs": both,
            }
        )
    return pd.DataFrame(
        out,
        columns=["subject", "across_tasks", "task_pairs", "across_modalities", "modality_pairs"],
    )
