"""Factor evidence from AIC (METHOD §3, the paper's appendix A.8)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..bootstrap import percentile_interval
from ..fits.observers.variants import FACTORS, NUISANCE, VARIANT_NAMES, VARIANTS
from ..fits.veridical import veridical_rows
from ..order import COLUMN as NO_ORDER
from ..order import NOTE as NO_ORDER_NOTE
from ..order import unordered
from ..trials import CELL_KEYS

if TYPE_CHECKING:  # fitting imports this module's neighbours; no runtime cycle
    from ..fits.fitresults import FitBatch


def _keyed_groups(factor: str) -> dict[tuple, tuple[list[int], list[int]]]:
    """Variant indices ``(f true, f false)`` of every nuisance group, by nuisance levels."""
    groups: dict[tuple, tuple[list[int], list[int]]] = {}
    for j, v in enumerate(VARIANTS):
        key = tuple(getattr(v, n) for n in NUISANCE[factor])
        side = 0 if getattr(v, factor) else 1
        groups.setdefault(key, ([], []))[side].append(j)
    return groups


def _groups(factor: str) -> list[tuple[list[int], list[int]]]:
    """Variant indices ``(f true, f false)`` of every nuisance group with both levels."""
    return [g for g in _keyed_groups(factor).values() if g[0] and g[1]]


_GROUPS = {f: _groups(f) for f in FACTORS}

# The veridical observers (bayesobs.fits.veridical), indices 10 and 11 of an extended
# AIC vector: (name, log).  Where each joins the comparison (docs/method.md):
# bayesian: the "no prior" side of the group of its noise scale; weber: the side of
# its scale in the group of ``linear`` (no prior, no update, no gain); gain: the "no
# gain" side of every group of its scale (it is the common limit of the non-gain
# Bayesian observers, static at w_prior = 0 and Kalman at rho = inf); sequential:
# left out (it has no prior, so whether a prior is updated has no answer).
REFERENCE_OBSERVERS: tuple[tuple[str, bool], ...] = (("veridical", False), ("veridical_log", True))


def _reference_groups(factor: str) -> list[tuple[list[int], list[int]]]:
    """:func:`_groups` over the ten variants and the two veridical observers."""
    keyed = {k: (list(t), list(f)) for k, (t, f) in _keyed_groups(factor).items()}
    names = NUISANCE[factor]
    for r, (_, log) in enumerate(REFERENCE_OBSERVERS):
        j = len(VARIANTS) + r
        for key, (t, f) in keyed.items():
            levels = dict(zip(names, key, strict=True))
            if factor == "bayesian" and levels["weber"] == log:
                f.append(j)
            elif factor == "weber" and not any(levels.values()):
                (t if log else f).append(j)
            elif factor == "gain" and levels["weber"] == log and levels["bayesian"]:
                f.append(j)
    return [g for g in keyed.values() if g[0] and g[1]]


_REFERENCE_GROUPS = {f: _reference_groups(f) for f in FACTORS}


def factor_evidence_array(aic: np.ndarray, reference: np.ndarray | None = None) -> np.ndarray:
    """``P(f)`` for each factor from AICs of the ten variants.

    Parameters
    ----------
    aic : array, shape (..., 10)
        AIC of each variant in :data:`bayesobs.fits.observers.VARIANTS` order;
        NaN marks a skipped variant.
    reference : array, shape (..., 2), optional
        AICs of the veridical observers (:data:`REFERENCE_OBSERVERS`): the
        evidence is then computed with them in the comparison set
        (``p_veridical``); NaN leaves one out.

    Returns
    -------
    array, shape (..., 4)
        Evidence for ``bayesian``, ``weber``, ``sequential``, ``gain``; NaN
        where no nuisance group has both levels fitted.
    """
    aic = np.asarray(aic, dtype=float)
    groups = _GROUPS
    if reference is not None:
        aic = np.concatenate([aic, np.asarray(reference, dtype=float)], axis=-1)
        groups = _REFERENCE_GROUPS
    fitted = np.isfinite(aic)
    best = np.min(np.where(fitted, aic, np.inf), axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        L = np.where(fitted, np.exp(-0.5 * (aic - best)), -np.inf)
    out = np.full(aic.shape[:-1] + (len(FACTORS),), np.nan)
    for i, f in enumerate(FACTORS):
        tot_t = np.zeros(aic.shape[:-1])
        tot_f = np.zeros(aic.shape[:-1])
        count = np.zeros(aic.shape[:-1])
        for t_idx, f_idx in groups[f]:
            lt = L[..., t_idx].max(axis=-1)
            lf = L[..., f_idx].max(axis=-1)
            ok = np.isfinite(lt) & np.isfinite(lf)
            tot_t += np.where(ok, lt, 0.0)
            tot_f += np.where(ok, lf, 0.0)
            count += ok
        # Equal averages over groups: the 1/|C| factors cancel in the ratio.
        with np.errstate(invalid="ignore", divide="ignore"):
            out[..., i] = np.where(count > 0, tot_t / (tot_t + tot_f), np.nan)
    return out


def factor_evidence(fits: pd.DataFrame) -> pd.DataFrame:
    """Evidence per cell and factor from a ``fits.csv``-style table.

    Parameters
    ----------
    fits : DataFrame
        Columns ``subject, task, modality, condition, variant, aic``.

    Returns
    -------
    DataFrame
        ``subject, task, modality, condition, factor, p``.
    """
    missing = [c for c in (*CELL_KEYS, "variant", "aic") if c not in fits.columns]
    if missing:
        raise ValueError(f"fits table lacks column(s) {', '.join(missing)}")
    unknown = set(fits["variant"]) - set(VARIANT_NAMES)
    if unknown:
        raise ValueError(f"unknown variant(s) in fits table: {', '.join(sorted(unknown))}")
    wide = fits.pivot_table(
        index=list(CELL_KEYS), columns="variant", values="aic", dropna=False, aggfunc="first"
    ).reindex(columns=list(VARIANT_NAMES))
    p = factor_evidence_array(wide.to_numpy(dtype=float))
    out = pd.DataFrame(p, index=wide.index, columns=list(FACTORS)).reset_index()
    return out.melt(id_vars=list(CELL_KEYS), var_name="factor", value_name="p")


def _name(family: str, log: bool, gain: bool) -> str:
    return family + ("_log" if log else "") + ("_gain" if gain else "")


# Which observer is a special case of which (same scale): (inner, outer).  static and
# kalman are the gain twins at g = 1, delta = 0; linear is static_gain at w_prior = 0
# and kalman_gain at rho = inf when its slope w >= 0 (g >= 0); the veridical observer
# is static at w_prior = 0, kalman at rho = inf, linear at w = 1, b = 0.
NESTED: tuple[tuple[str, str], ...] = tuple(
    pair
    for log in (False, True)
    for pair in (
        (_name("static", log, False), _name("static", log, True)),
        (_name("kalman", log, False), _name("kalman", log, True)),
        (_name("linear", log, False), _name("static", log, True)),
        (_name("linear", log, False), _name("kalman", log, True)),
        *(
            (_name("veridical", log, False), _name(o, log, g))
            for o, g in (
                ("static", False),
                ("kalman", False),
                ("linear", False),
                ("static", True),
                ("kalman", True),
            )
        ),
    )
)


def factor_bounds(
    k: np.ndarray, fitted: np.ndarray, slope_ok: np.ndarray, reference: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Floor and ceiling of each factor's evidence implied by nested variants.

    If variant ``t`` nests ``m`` with ``dk = k_t - k_m`` more parameters, its
    maximised likelihood is at least ``m``'s, so ``AIC_t <= AIC_m + 2 dk``
    and ``L_t >= exp(-dk) L_m``.  In a
    nuisance group where every fitted "f false" member is nested in some
    fitted "f true" member, ``max L_true >= exp(-A) max L_false`` (``A``:
    the largest of those members' smallest ``dk``), hence
    ``P(f) >= 1 / (1 + exp(A))`` with ``A`` the largest over the groups; the
    ceiling ``1 / (1 + exp(-B))`` follows the same way with the sides swapped
    (1 where some member is nested in none).

    Parameters
    ----------
    k : array, shape (..., N)
        Free parameters of each variant (``N = 10``, or 12 with the
        veridical observers appended when ``reference``).
    fitted : bool array, shape (..., N)
        Which variants were fitted.
    slope_ok : bool array, shape (..., 2)
        Whether the ``linear`` and ``linear_log`` fits have ``w >= 0`` (only
        then are they nested in the gain variants).
    reference : bool
        Bounds of ``p_veridical`` (the comparison set with the veridical
        observers) instead of ``p``.

    Returns
    -------
    floor, ceiling : arrays, shape (..., 4)
        NaN where the factor's evidence is NaN (no group with both levels).
    """
    names = list(VARIANT_NAMES) + ([n for n, _ in REFERENCE_OBSERVERS] if reference else [])
    idx = {n: i for i, n in enumerate(names)}
    k = np.asarray(k, dtype=float)
    fitted = np.asarray(fitted, dtype=bool)
    slope_ok = np.asarray(slope_ok, dtype=bool)
    lead = np.broadcast_shapes(k.shape[:-1], fitted.shape[:-1], slope_ok.shape[:-1])
    k = np.broadcast_to(k, (*lead, len(names)))
    fitted = np.broadcast_to(fitted, (*lead, len(names)))
    cond = {idx["linear"]: slope_ok[..., 0], idx["linear_log"]: slope_ok[..., 1]}
    nests = [(idx[a], idx[b]) for a, b in NESTED if a in idx and b in idx]  # (inner, outer) indices

    def worst(inner_side, outer_side):
        """Largest over fitted inner members of the smallest ``dk`` to a fitted outer one."""
        out = np.full(lead, -np.inf)
        for m in inner_side:
            best = np.full(lead, np.inf)
            for a, b in nests:
                if a == m and b in outer_side:
                    ok = fitted[..., b] & cond.get(m, True)
                    best = np.where(ok, np.minimum(best, k[..., b] - k[..., m]), best)
            out = np.where(fitted[..., m], np.maximum(out, best), out)
        return out

    groups = _REFERENCE_GROUPS if reference else _GROUPS
    floor = np.full((*lead, len(FACTORS)), np.nan)
    ceiling = np.full((*lead, len(FACTORS)), np.nan)
    for i, f in enumerate(FACTORS):
        A = np.full(lead, -np.inf)
        Bc = np.full(lead, -np.inf)
        any_group = np.zeros(lead, dtype=bool)
        for t_idx, f_idx in groups[f]:
            active = fitted[..., t_idx].any(-1) & fitted[..., f_idx].any(-1)
            A = np.where(active, np.maximum(A, worst(f_idx, t_idx)), A)
            Bc = np.where(active, np.maximum(Bc, worst(t_idx, f_idx)), Bc)
            any_group |= active
        with np.errstate(over="ignore"):
            floor[..., i] = np.where(any_group, 1.0 / (1.0 + np.exp(A)), np.nan)
            ceiling[..., i] = np.where(any_group, 1.0 / (1.0 + np.exp(-Bc)), np.nan)
    return floor, ceiling


def slope_nonnegative(batch: FitBatch) -> np.ndarray:
    """``(rows, 2)``: whether ``linear`` and ``linear_log`` fitted ``w >= 0`` (full data).

    Parameters
    ----------
    batch : FitBatch
        Fits of every cell; only replicate 0 (the full data) is read.

    Returns
    -------
    numpy.ndarray
        Bool array of shape ``(rows, 2)``: ``w >= 0`` of ``linear``, then of
        ``linear_log`` (false where the variant was not fitted).
    """
    w = batch.params["w"][:, 0, :]
    return np.stack([w[:, VARIANT_NAMES.index(n)] >= 0 for n in ("linear", "linear_log")], axis=1)


LOG_RHO_BOUND = 18.0  # the ends of the engine's log-rho search


def bayes_boundary(batch: FitBatch) -> list[str]:
    """Per row, where the best Bayesian variant (lowest AIC) sits on a boundary.

    ``"static: w_prior=0"`` (or ``=1``, the ends of [0, 1]), ``"kalman:
    rho=inf"`` (or ``rho=0``, or ``|log rho| >= 18``, the ends of the
    search); ``""`` when it is inside, or no Bayesian variant was fitted.

    Parameters
    ----------
    batch : FitBatch
        Fits of every cell; only replicate 0 (the full data) is read.

    Returns
    -------
    list of str
        One label per row of ``batch.cells``, e.g. ``"static: w_prior=0"``, or ``""``.
    """
    aic = batch.aic[:, 0, :]
    bayes = np.array([v.bayesian for v in VARIANTS])
    masked = np.where(bayes & np.isfinite(aic), aic, np.inf)
    best = np.argmin(masked, axis=1)
    out = []
    for r, j in enumerate(best):
        if not np.isfinite(masked[r, j]):
            out.append("")
            continue
        v = VARIANTS[j]
        if v.family == "static":
            w = batch.params["w_prior"][r, 0, j]
            out.append(f"{v.name}: w_prior={w:g}" if w in (0.0, 1.0) else "")
        else:
            rho = batch.params["rho"][r, 0, j]
            edge = rho == 0 or np.isinf(rho) or abs(np.log(rho)) >= LOG_RHO_BOUND - 1e-9
            out.append(f"{v.name}: rho={rho:g}" if edge else "")
    return out


VERIDICAL_THRESHOLD = -2.0  # veridical_dAIC at or above: indistinguishable from veridical
ONE_RUN_NOTE = "one session run in the cell: no resampling behind an interval (left empty)"


def evidence_table(batch: FitBatch, trials: pd.DataFrame | None = None) -> pd.DataFrame:
    """``evidence.csv`` rows of a fit batch.

    Columns: the cell keys, ``factor``, ``p`` (METHOD §3); with replicates
    ``p_mean, p_lo, p_hi`` (METHOD §7; empty for a cell of one session run,
    where every replicate is the data, with ``interval_note`` saying so);
    ``level`` for an interleaved fit; then ``p_floor`` and ``p_ceiling``
    (:func:`factor_bounds`), ``boundary`` (:func:`bayes_boundary`) and, when
    ``trials`` (the fitted trials) are given, ``p_veridical`` (the evidence
    with the two veridical observers in the comparison set) and
    ``veridical_dAIC`` (AIC of the best of the ten minus AIC of the better
    veridical observer; see docs/method.md).

    Parameters
    ----------
    batch : FitBatch
        Fits of every cell (row) and bootstrap replicate.
    trials : DataFrame, optional
        The fitted trials; with them the veridical observers are fitted and
        ``p_veridical``, ``veridical_dAIC`` added.

    Returns
    -------
    DataFrame
        One row per cell (or level) and factor, with the columns above.
    """
    p = factor_evidence_array(batch.aic)  # (cells, 1 + B, 4)
    B = p.shape[1] - 1
    rows = []
    mean, lo, hi = percentile_interval(p[:, 1:, :], axis=1) if B else (None, None, None)
    one_run = batch.cells["n_runs"].to_numpy() < 2 if "n_runs" in batch.cells else None
    has_level = "level" in batch.cells.columns
    k = (
        np.array([v.k for v in VARIANTS], dtype=float)
        if batch.k is None
        else np.asarray(batch.k, dtype=float)
    )
    fitted = np.isfinite(batch.aic[:, 0, :])
    linear_d = linear_daic(batch.aic[:, 0, :])
    slope_ok = slope_nonnegative(batch)
    floor, ceiling = factor_bounds(k, fitted, slope_ok)
    boundary = bayes_boundary(batch)
    if trials is not None:
        lapse = "lapse" in batch.params and bool(np.isfinite(batch.params["lapse"]).any())
        ref = veridical_rows(trials, batch.cells, lapse=lapse)
        p_ver = factor_evidence_array(batch.aic[:, 0, :], ref)
        p_ver[~np.isfinite(ref).any(axis=1)] = np.nan  # not computed: no reference
        with np.errstate(invalid="ignore"):
            best10 = np.nanmin(np.where(fitted, batch.aic[:, 0, :], np.nan), axis=1, initial=np.inf)
            best_ref = np.nanmin(np.where(np.isfinite(ref), ref, np.nan), axis=1, initial=np.inf)
            d_aic = np.where(np.isfinite(best10) & np.isfinite(best_ref), best10 - best_ref, np.nan)
    no_order = None
    if trials is not None and NO_ORDER in trials:  # issue 47: rows in no presentation order
        flags = unordered(trials).groupby([trials[k] for k in CELL_KEYS], observed=True).any()
        no_order = [
            bool(flags.get(key, False))
            for key in zip(*(batch.cells[k] for k in CELL_KEYS), strict=True)
        ]
    # column values read once (element access on Arrow-backed columns is slow)
    key_cols = {kk: list(batch.cells[kk]) for kk in CELL_KEYS}
    level_col = list(batch.cells["level"]) if has_level else None
    for c in range(len(batch.cells)):
        key = {kk: col[c] for kk, col in key_cols.items()}
        for i, f in enumerate(FACTORS):
            row = {**key, "factor": f, "p": p[c, 0, i]}
            if B:
                empty = one_run is not None and one_run[c]
                row.update(
                    p_mean=np.nan if empty else mean[c, i],
                    p_lo=np.nan if empty else lo[c, i],
                    p_hi=np.nan if empty else hi[c, i],
                )
            if has_level:  # METHOD §10: the joint fit's evidence, on each level's row
                row["level"] = level_col[c]
            row.update(
                p_floor=floor[c, i],
                p_ceiling=ceiling[c, i],
                boundary=boundary[c],
                linear_dAIC=linear_d[c],
            )
            if trials is not None:
                row.update(p_veridical=p_ver[c, i], veridical_dAIC=d_aic[c])
            if B:
                row["interval_note"] = ONE_RUN_NOTE if one_run is not None and one_run[c] else ""
            if no_order is not None:
                row[NO_ORDER] = no_order[c]
            rows.append(row)
    return pd.DataFrame(rows)


LINEAR_THRESHOLD = 2.0  # linear_dAIC at or below it: the gain evidence is a linear observer's
_LINEAR = [VARIANT_NAMES.index(n) for n in ("linear", "linear_log")]
_GAIN = [j for j, v in enumerate(VARIANTS) if v.gain]


def linear_daic(aic: np.ndarray) -> np.ndarray:
    """AIC of the better ``linear`` variant minus AIC of the best gain variant, per cell.

    At or below :data:`LINEAR_THRESHOLD` a plain linear function of the
    stimulus (no prior) explains the responses as well as the gain variants
    do (they reach it at ``w_prior = 0`` or ``rho = inf`` with a free slope and
    offset), so a high ``P(gain)`` says "linear", not "a Bayesian observer
    with a gain stage" (docs/method.md).  NaN where either side is not fitted.

    Parameters
    ----------
    aic : numpy.ndarray, shape (..., 10)
        AIC of each variant in :data:`bayesobs.fits.observers.VARIANTS` order; NaN
        marks a variant not fitted.

    Returns
    -------
    numpy.ndarray, shape (...)
        The difference in AIC units, NaN where either side is not fitted.
    """
    aic = np.asarray(aic, dtype=float)
    fitted = np.isfinite(aic)
    lin = np.min(np.where(fitted[..., _LINEAR], aic[..., _LINEAR], np.inf), axis=-1)
    gain = np.min(np.where(fitted[..., _GAIN], aic[..., _GAIN], np.inf), axis=-1)
    ok = np.isfinite(lin) & np.isfinite(gain)
    return np.where(ok, lin - np.where(ok, gain, 0.0), np.nan)


def text_column(col: pd.Series) -> pd.Series:
    """A text column with ``""`` for missing values (an empty column read from CSV is NaN).

    Parameters
    ----------
    col : pandas.Series
        A text column.

    Returns
    -------
    pandas.Series
        The column as objects, with ``""`` where it was missing.
    """
    return col.astype(object).where(col.notna(), "")


def _cell_label(row) -> str:
    return "/".join(str(row[k]) for k in CELL_KEYS)


def bounds_line(evidence: pd.DataFrame) -> str:
    """One line: each factor's floor and ceiling (``p_floor``, ``p_ceiling``) of the table.

    The most common pair per factor; where cells differ (variants skipped,
    a negative ``linear`` slope) the share of cells with it is added.

    Parameters
    ----------
    evidence : DataFrame
        An ``evidence.csv`` table with ``factor``, ``p_floor`` and ``p_ceiling``.

    Returns
    -------
    str
        The line; a factor whose floor is NaN in every cell is left out.
    """
    parts = []
    for f in FACTORS:
        sel = evidence[(evidence["factor"] == f) & evidence["p_floor"].notna()]
        # one row per cell (an interleaved fit has one per level): its lowest floor, highest ceiling
        keys = [c for c in CELL_KEYS if c in sel]
        if keys:
            sel = sel.groupby(keys, dropna=False).agg({"p_floor": "min", "p_ceiling": "max"})
        if not len(sel):
            continue
        pairs = list(zip(sel["p_floor"].round(4), sel["p_ceiling"].round(4), strict=True))
        (lo, hi), count = (
            pd.Series(pairs).value_counts().index[0],
            pd.Series(pairs).value_counts().iat[0],
        )
        share = "" if count == len(pairs) else f" in {count} of {len(pairs)} cells"
        parts.append(f"{f} [{lo:.4g}, {hi:.4g}]{share}")
    return (
        "factor evidence can only reach (nested variants; p_floor, p_ceiling in evidence.csv): "
        + ", ".join(parts)
        + "; P(sequential) is 0.5 where static and Kalman both sit at their common veridical "
        "limit (w_prior = 0, rho = inf)"
    )


def veridical_lead(evidence: pd.DataFrame) -> list[str]:
    """The line that leads where ``p`` and ``p_veridical`` of ``bayesian`` disagree about 0.5.

    Among the ten variants alone (the paper's ``p``, METHOD Part I) an
    observer without a prior (response = stimulus + noise) is best described
    by a Bayesian variant at ``w_prior = 0`` or ``rho = inf``, which has
    fewer parameters than the linear one, so it can read as Bayesian;
    ``p_veridical`` puts the veridical observer in the comparison (issue 49).

    Parameters
    ----------
    evidence : DataFrame
        An ``evidence.csv`` table (``factor``, ``p``, optional
        ``p_veridical``).

    Returns
    -------
    list of str
        One line (how many cells disagree, an example, the mean of both and
        why the veridical reading leads), or none where every cell agrees or
        there is no ``p_veridical``.
    """
    if not len(evidence) or "p_veridical" not in evidence.columns:
        return []
    cells = evidence[evidence["factor"] == "bayesian"].drop_duplicates(list(CELL_KEYS))
    p, pv = cells["p"].astype(float), cells["p_veridical"].astype(float)
    split = cells[(p - 0.5) * (pv - 0.5) < 0]
    if not len(split):
        return []
    first = split.iloc[0]
    return [
        f"P(bayesian) read with the veridical observers compared (p_veridical): in {len(split)} "
        f"of {int((p.notna() & pv.notna()).sum())} cell(s) the paper's p and p_veridical fall "
        f"on different sides of 0.5, e.g. {_cell_label(first)} (p {first['p']:.3f}, "
        f"p_veridical {first['p_veridical']:.3f}): among the ten variants alone an observer "
        "without a prior (response = stimulus + noise) is a Bayesian one at w_prior = 0 or "
        "rho = inf, with fewer parameters than the linear one, so p can count it as Bayesian; "
        f"mean P(bayesian) {pv.mean():.3f} with the veridical observers compared, "
        f"{p.mean():.3f} by the paper's p (both in evidence.csv)"
    ]


def evidence_notes(evidence: pd.DataFrame) -> list[str]:
    """Lines for the fit summary and the report on an ``evidence.csv`` table.

    First :func:`veridical_lead` where ``p`` and ``p_veridical`` disagree;
    the structural bounds (:func:`bounds_line`); with ``veridical_dAIC``, how
    many cells are indistinguishable from the veridical observer
    (``veridical_dAIC >= -2``) and the mean ``p`` and ``p_veridical`` of
    ``bayesian``; how many cells' best Bayesian fit sits on a boundary.

    Parameters
    ----------
    evidence : DataFrame
        An ``evidence.csv`` table (as written by :func:`evidence_table`).

    Returns
    -------
    list of str
        The lines; empty for an empty table or one without ``p_floor``.
    """
    if not len(evidence) or "p_floor" not in evidence.columns or evidence["p"].isna().all():
        return []  # nothing fitted: no bounds to name
    lead = veridical_lead(evidence)
    lines = [*lead, bounds_line(evidence)]
    cells = evidence[evidence["factor"] == "bayesian"].drop_duplicates(list(CELL_KEYS))
    if "veridical_dAIC" in evidence.columns:
        d = cells["veridical_dAIC"]
        if d.notna().any():
            close = cells[d >= VERIDICAL_THRESHOLD]
            eg = f", e.g. {_cell_label(close.iloc[0])}" if len(close) else ""
            lines.append(
                f"{len(close)} of {int(d.notna().sum())} cell(s) indistinguishable from a "
                f"veridical observer (response = stimulus + noise, or its log twin): "
                f"veridical_dAIC >= {VERIDICAL_THRESHOLD:g}, i.e. the best of the ten variants "
                f"beats it by less than {-VERIDICAL_THRESHOLD:g} AIC units{eg}"
                + (
                    ""
                    if lead  # the lead line gives both means, the veridical one first
                    else f"; mean P(bayesian) {cells['p'].mean():.3f}, "
                    f"{cells['p_veridical'].mean():.3f} with the veridical observers compared "
                    "(p_veridical)"
                )
            )
        else:
            lines.append("veridical reference not computed (see docs/method.md; e.g. --lapse)")
    if "linear_dAIC" in evidence.columns:
        gain = evidence[evidence["factor"] == "gain"].drop_duplicates(list(CELL_KEYS))
        flagged = gain[(gain["p"] > 0.5) & (gain["linear_dAIC"] <= LINEAR_THRESHOLD)]
        if len(flagged):
            lines.append(
                f"P(gain) > 0.5 in {len(flagged)} of {len(gain)} cell(s) where a linear observer "
                f"(no prior) fits as well: linear_dAIC <= {LINEAR_THRESHOLD:g} (the better linear "
                "variant's AIC minus the best gain variant's), e.g. "
                f"{_cell_label(flagged.iloc[0])}; there P(gain) says the answers are a linear "
                "function of the stimulus, not that a Bayesian observer has a gain stage"
            )
    if unordered(cells).any():
        n = int(unordered(cells).sum())
        lines.append(f"{n} of {len(cells)} cell(s) with {NO_ORDER_NOTE} (evidence.csv {NO_ORDER})")
    edge = cells[text_column(cells["boundary"]) != ""]
    if len(edge):
        lines.append(
            f"best Bayesian fit on a boundary (w_prior = 0 or 1, rho = 0 or inf) in {len(edge)} "
            f"of {len(cells)} cell(s), e.g. {_cell_label(edge.iloc[0])} {edge['boundary'].iat[0]} "
            "(evidence.csv boundary)"
        )
    return lines
