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
    Finite floats under plain names (every fitted parameter) are written
    directly, as ``json.dumps`` writes them (``float.__repr__``, ``", "`` and
    ``": "``); anything else goes through ``json.dumps``.

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
    parts = []
    for name, value in params.items():
        if not (isinstance(value, float) and math.isfinite(value) and _plain(name)):
            return _encode_json(params)
        parts.append(f'"{name}": {float.__repr__(value)}')
    return "{" + ", ".join(parts) + "}"


def _plain(name) -> bool:
    """Whether ``json.dumps`` writes the key ``name`` as ``"name"`` (an ASCII identifier)."""
    return type(name) is str and name.isascii() and name.isidentifier()


def _encode_json(params: dict) -> str:
    """:func:`encode_params` through ``json.dumps`` (strings, infinities, NaN, other keys)."""
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
    cells = batch.cells
    n_cells, n_var = len(cells), len(VARIANTS)
    if n_cells == 0:
        return pd.DataFrame()  # no rows, no columns (as ever)

    def per_row(values: list) -> list:  # each cell's value on its ten rows
        return [x for x in values for _ in range(n_var)]

    # column values read once (element access on Arrow-backed columns is slow)
    table = {k: per_row(list(cells[k])) for k in CELL_KEYS}
    table["variant"] = [v.name for v in VARIANTS] * n_cells
    for f in FACTORS:
        table[f] = [bool(getattr(v, f)) for v in VARIANTS] * n_cells
    table["n"] = batch.n[:, 0, :].astype(np.int64).ravel().tolist()
    k = [v.k for v in VARIANTS] * n_cells if batch.k is None else batch.k.ravel().tolist()
    table["k"] = [int(x) for x in k]
    table["loglik"] = batch.loglik[:, 0, :].ravel()
    table["aic"] = batch.aic[:, 0, :].ravel()
    lapse = batch.params.get("lapse")
    values = {p: a[:, 0, :].tolist() for p, a in batch.params.items()}  # Python floats
    params = []
    for c in range(n_cells):
        for j, v in enumerate(VARIANTS):
            if batch.skipped[c, j]:
                params.append(encode_params({"skipped": batch.skipped[c, j]}))
                continue
            p = {name: values[name][c][j] for name in v.param_names}
            if lapse is not None and np.isfinite(lapse[c, 0, j]):
                p["lapse"] = values["lapse"][c][j]
            params.append(encode_params(p))
    table["params"] = params
    for col in ("level", "n_level"):
        if col in cells.columns:
            table[col] = per_row(list(cells[col]))
    return pd.DataFrame(table)
