"""The BayesBench composite per subject: A, E, C, S and BCS (METHOD §6), BCS_p, C_p, S_p (§9)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..bootstrap import add_interval
from .bcs import BCS_MAX, nansum_or_nan

NRMSE_MAX = 2.0
SUMMARY = ("A", "E", "C", "S", "BCS")
# METHOD §9: the robust companions of BCS, C and S (columns after the contract ones).
ROBUST = ("BCS_p", "C_p", "S_p")
PERFECT_REASON = (
    "RRE is 0/0: the multimodal answers and the Bayesian combination of text and image both have "
    "zero error (answers equal to the stimuli), so efficiency is undefined"
)


def composite(
    subjects, acc_cells, nrmse, cue_groups, cue_vals, bcs_rows, bcs_vals, B, missing
) -> pd.DataFrame:
    """A, E, C, S and BCS per subject and replicate (METHOD §6), then BCS_p, C_p, S_p (§9)."""
    R = 1 + B
    rows = []
    for subject in subjects:
        # A: per task, mean over modalities of clip(1 - NRMSE/2, 0, 1) on base
        sel = (acc_cells["subject"] == subject) & (acc_cells["condition"] == "base")
        a_task = []
        for task, idx in acc_cells[sel].groupby("task").groups.items():
            score = np.clip(1 - nrmse[list(idx)] / NRMSE_MAX, 0, 1)
            with warnings.catch_warnings():
                # a replicate drawing only runs without a response: NaN, as in bootstrap.interval
                warnings.simplefilter("ignore", RuntimeWarning)
                a_task.append(np.nanmean(score, axis=0) if len(idx) else np.full(R, np.nan))
            del task
        A = np.mean(a_task, axis=0) if a_task else np.full(R, np.nan)
        if not a_task:
            missing.append((subject, "", "A", "no base-condition trials"))
        # E: per multimodal task, mean of RRE(oracle) and RRE(non-oracle) on base
        if len(cue_groups):
            sel = (cue_groups["subject"] == subject) & (cue_groups["condition"] == "base")
            idx = np.flatnonzero(sel.to_numpy())
        else:
            idx = np.array([], dtype=int)
        if len(idx):
            e_task = (cue_vals["rre_bayes_oracle"][idx] + cue_vals["rre_bayes_non_oracle"][idx]) / 2
            E = np.mean(e_task, axis=0)
            if np.isnan(E[0]):  # say why E (and with it S) is not computed
                exact = (cue_vals["nrmse_multimodal"][idx, 0] == 0).any()
                missing.append((subject, "", "E", PERFECT_REASON if exact else "an RRE is NaN"))
        else:
            E = np.full(R, np.nan)
            missing.append(
                (subject, "", "E", "no base condition with text, image and multimodal trials")
            )
        # BCS: sum over tasks and ablations
        sel = (bcs_rows["subject"] == subject).to_numpy()
        if sel.any():
            s = bcs_vals["s"][sel]
            BCS = np.where(np.isnan(s).all(axis=0), np.nan, np.nansum(s, axis=0))
        else:
            BCS = np.full(R, np.nan)
            missing.append((subject, "", "C", "no multimodal task with base and ablation fits"))
        C = (BCS + BCS_MAX) / (2 * BCS_MAX)
        S = (A + E + C) / 3
        # METHOD §9: the point estimate sums s_p; replicate b sums its own robust
        # signs (their mean over b is BCS_p), which gives the interval columns.
        if sel.any() and B:
            BCS_p = np.concatenate(
                [
                    [nansum_or_nan(bcs_vals["s_p"][sel])],
                    nansum_or_nan(bcs_vals["s_robust"][sel, 1:]),
                ]
            )
        else:
            BCS_p = np.full(R, np.nan)
        if np.isnan(S[0]) and not np.isnan(A[0] + C[0]) and np.isnan(E[0]):
            missing.append((subject, "", "S", "needs E, which is not computed (see E)"))
        C_p = (BCS_p + BCS_MAX) / (2 * BCS_MAX)
        S_p = (A + E + C_p) / 3
        rows.append(
            (
                subject,
                {
                    "A": A,
                    "E": E,
                    "C": C,
                    "S": S,
                    "BCS": BCS,
                    "BCS_p": BCS_p,
                    "C_p": C_p,
                    "S_p": S_p,
                },
            )
        )
    out = pd.DataFrame({"subject": [r[0] for r in rows]})
    for name in SUMMARY:
        out[name] = [r[1][name][0] for r in rows]
    if B:
        for name in SUMMARY:
            add_interval(out, name, np.array([r[1][name][1:] for r in rows]).reshape(len(rows), B))
    for name in ROBUST:  # after every contract column
        out[name] = [r[1][name][0] for r in rows]
    if B:
        for name in ROBUST:
            add_interval(out, name, np.array([r[1][name][1:] for r in rows]).reshape(len(rows), B))
    return out


def subject_summary(subjects, cells, nrmse, p_bayes, cue_groups, cue_vals, B) -> pd.DataFrame:
    """Per subject, over its base-condition cells: the paper's Figure 8 axes."""
    rows = []
    base = (cells["condition"] == "base").to_numpy()
    for subject in subjects:
        sel = base & (cells["subject"] == subject).to_numpy()
        vals = {"nrmse": nrmse[sel], "p_bayesian": p_bayes[sel]}
        if len(cue_groups):
            csel = (
                (cue_groups["subject"] == subject) & (cue_groups["condition"] == "base")
            ).to_numpy()
            vals["rre_bayes_oracle"] = cue_vals["rre_bayes_oracle"][csel]
            vals["nrmse_multimodal"] = cue_vals["nrmse_multimodal"][csel]
        rows.append((subject, vals))
    out = pd.DataFrame({"subject": [r[0] for r in rows]})
    names = ("nrmse", "p_bayesian", "rre_bayes_oracle", "nrmse_multimodal")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # subjects without a piece: NaN
        per = {
            n: np.array(
                [
                    np.nanmean(r[1][n], axis=0)
                    if n in r[1] and len(r[1][n])
                    else np.full(1 + B, np.nan)
                    for r in rows
                ]
            )
            for n in names
        }
    for n in names:
        out[n] = per[n][:, 0]
    if B:
        for n in names:
            add_interval(out, n, per[n][:, 1:])
    return out
