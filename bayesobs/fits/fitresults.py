"""Fit results and their table encoding: :class:`FitBatch` and ``fits.csv`` rows."""

from __future__ import annotations

import json
import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..trials import CELL_KEYS
from .observers.variants import FACTORS, VARIANTS


class FitBatch(NamedTuple):
    """Fits of every cell and bootstrap replicate.

    Arrays have shape ``(rows, 1 + B, 10)``; replicate 0 is the full data.
    A row is a cell, or with an interleaved column (METHOD §10) one level of
    a cell: ``cells`` then has a ``level`` column (``COL=value``), ``params``
    hold that level's parameters and ``loglik``, ``aic``, ``n`` and ``k`` are
    those of the joint fit, repeated on each level's row.  ``params`` maps
    each parameter name to such an array (NaN where the parameter does not
    belong to the variant or the variant was skipped).
    """

    cells: pd.DataFrame
    loglik: np.ndarray
    aic: np.ndarray
    n: np.ndarray
    params: dict[str, np.ndarray]
    skipped: np.ndarray  # (rows, 10) reason string or ""
    k: np.ndarray | None = None  # (rows, 10) free parameters; None: the variants' own k


def collapse_levels(batch: FitBatch) -> FitBatch:
    """One row per cell of an interleaved fit (METHOD §10); other batches unchanged.

    ``loglik``, ``aic``, ``n`` and ``k`` are the joint fit's (the same on
    every level's row); the per-level parameters have no single value per
    cell and become NaN.

    Parameters
    ----------
    batch : FitBatch
        Fits, one row per cell or (interleaved) one row per level of a cell.

    Returns
    -------
    FitBatch
        ``batch`` itself when it has no ``level`` column or fewer than two
        levels; else one row per cell (the first level's row, without the
        ``level`` and ``n_level`` columns), parameters NaN.
    """
    if "level" not in batch.cells.columns or len(batch.cells.attrs.get("levels", [])) < 2:
        return batch
    first = ~batch.cells.duplicated(list(CELL_KEYS)).to_numpy()
    cells = batch.cells.loc[first].drop(columns=["level", "n_level"]).reset_index(drop=True)
    return FitBatch(
        cells,
        batch.loglik[first],
        batch.aic[first],
        batch.n[first],
        {p: np.full_like(v[first], np.nan) for p, v in batch.params.items()},
        batch.skipped[first],
        None if batch.k is None else batch.k[first],
    )


def encode_params(params: dict) -> str:
    """``params`` as strict JSON: an infinite value becomes ``null`` plus a flag.

    ``rho = inf`` (the Kalman filter that copies the stimulus) is written
    ``"rho": null, "rho_limit": "inf"``, so R, JavaScript and every other
    strict JSON parser can read ``fits.csv``; :func:`decode_params` restores it.

    Parameters
    ----------
    params : dict
        Parameter name to value (floats, or the ``skipped`` reason string).

    Returns
    -------
    str
        A JSON object with no NaN or infinity in it.

    Raises
    ------
    ValueError
        For a NaN value (strict JSON has no NaN).
    """
    out = {}
    for name, value in params.items():
        if isinstance(value, float) and math.isinf(value):
            out[name] = None
            out[f"{name}_limit"] = "inf" if value > 0 else "-inf"
        else:
            out[name] = value
    return json.dumps(out, allow_nan=False)


def decode_params(text: str) -> dict:
    """Parameters written by :func:`encode_params` (``*_limit`` flags restored).

    Parameters
    ----------
    text : str
        The ``params`` field of a ``fits.csv`` row; empty gives ``{}``.

    Returns
    -------
    dict
        Parameter name to value; each ``NAME_limit`` flag is removed and
        ``NAME`` set to ``inf`` or ``-inf``.
    """
    params = json.loads(text) if text else {}
    for name in [k for k in params if k.endswith("_limit")]:
        params[name[: -len("_limit")]] = float(params.pop(name))
    return params


def fits_table(batch: FitBatch) -> pd.DataFrame:
    """``fits.csv`` rows (DESIGN contract) of the full-data fits.

    Parameters
    ----------
    batch : FitBatch
        Fits of every cell; only replicate 0 (the full data) is written.

    Returns
    -------
    DataFrame
        One row per cell (or level) and variant: the cell keys, ``variant``,
        the variant's factor flags, ``n``, ``k``, ``loglik``, ``aic``,
        ``params`` (JSON by :func:`encode_params`, ``{"skipped": reason}`` for
        a skipped variant, plus ``lapse`` when fitted) and, for an interleaved
        fit, ``level`` and ``n_level``.
    """
    rows = []
    cells = batch.cells
    # column values read once (element access on Arrow-backed columns is slow)
    key_cols = {k: list(cells[k]) for k in CELL_KEYS}
    extra_cols = {k: list(cells[k]) for k in ("level", "n_level") if k in cells.columns}
    lapse = batch.params.get("lapse")
    for c in range(len(cells)):
        key = {k: col[c] for k, col in key_cols.items()}
        extra = {k: col[c] for k, col in extra_cols.items()}
        for j, v in enumerate(VARIANTS):
            if batch.skipped[c, j]:
                params = {"skipped": batch.skipped[c, j]}
            else:
                params = {p: float(batch.params[p][c, 0, j]) for p in v.param_names}
                if lapse is not None and np.isfinite(lapse[c, 0, j]):
                    params["lapse"] = float(lapse[c, 0, j])
            rows.append(
                {
                    **key,
                    "variant": v.name,
                    **{f: bool(getattr(v, f)) for f in FACTORS},
                    "n": int(batch.n[c, 0, j]),
                    "k": v.k if batch.k is None else int(batch.k[c, j]),
                    "loglik": batch.loglik[c, 0, j],
                    "aic": batch.aic[c, 0, j],
                    "params": encode_params(params),
                    **extra,
                }
            )
    return pd.DataFrame(rows)
