"""The model scale, shared by the maximum-likelihood and the posterior fits.

Log (Weber) variants model ``z = log(x + eps)`` and ``u = log(y + eps)``
(METHOD §2), with the Jacobian ``-log(y + eps)`` per observed response in
their likelihood; the others model ``x`` and ``y`` as they are.  Both fits
then centre ``z`` and ``u`` by the cell's mean ``z`` (the posterior also
divides by its SD); :func:`cell_moments` gives those constants.
"""

from __future__ import annotations

import numpy as np


def model_scale(
    x: np.ndarray,
    y: np.ndarray,
    present: np.ndarray,
    eps: np.ndarray | float,
    log: bool,
    ok: np.ndarray | bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stimuli and responses on the model's scale.

    Parameters
    ----------
    x, y : arrays, shape (runs, T)
        Stimuli and responses (NaN for a missing response), padded.
    present : bool array, shape (runs, T)
        Which trials exist.
    eps : float or array broadcasting to (runs, T)
        The cell's log offset.
    log : bool
        A log (Weber) variant.
    ok : bool or bool array broadcasting to (runs, T)
        Where the log transform applies (false for cells whose log variants
        are skipped: ``z`` and ``u`` are 0 there).

    Returns
    -------
    z, u : arrays, shape (runs, T)
        The stimuli and responses on the model scale, 0 where absent.
    obs : bool array
        Observed responses (present and not missing).
    jac : array
        ``log(y + eps)`` per observed response of a log variant, else 0
        (the likelihood subtracts it).
    """
    obs = present & ~np.isnan(y)
    if not log:
        return np.where(present, x, 0.0), np.where(obs, y, 0.0), obs, np.zeros(np.shape(x))
    use_x, use_y = present & ok, obs & ok
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(use_x, np.log(np.where(use_x, x + eps, 1.0)), 0.0)
        u = np.where(use_y, np.log(np.where(use_y, y + eps, 1.0)), 0.0)
    return z, u, obs, u.copy()


def cell_moments(
    z: np.ndarray, present: np.ndarray, cell: np.ndarray, n_cells: int
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (population) SD of the present ``z`` of each cell.

    ``cell`` gives each run's cell index; a cell without trials gets NaN.

    Parameters
    ----------
    z : array, shape (runs, T)
        Stimuli on the model's scale.
    present : bool array, shape (runs, T)
        Which trials exist.
    cell : array of int, shape (runs,)
        Each run's cell.
    n_cells : int
        Number of cells.

    Returns
    -------
    mean, sd : ndarray, shape (n_cells,)
        Each cell's mean and population SD.
    """
    w = present.astype(float)
    cnt = np.bincount(cell, weights=w.sum(1), minlength=n_cells)
    tot = np.bincount(cell, weights=(w * z).sum(1), minlength=n_cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = tot / cnt
        dev = np.where(present, z - mean[cell][:, None], 0.0)
        var = np.bincount(cell, weights=(dev * dev).sum(1), minlength=n_cells) / cnt
    return mean, np.sqrt(var)
