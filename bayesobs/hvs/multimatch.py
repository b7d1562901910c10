"""MultiMatch scanpath similarity (Jarodzka, Holmqvist & Nystroem 2010; Dewhurst et al. 2012)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

DIMENSIONS = ("vector", "direction", "length", "position", "duration")
SCREEN = (1680, 1050)  # COCO-Search18 / COCO-FreeView display, px


def _as_fixations(path: Sequence, name: str) -> np.ndarray:
    arr = np.asarray(path, dtype=float)
    if arr.size == 0:
        raise ValueError(f"{name}: a scanpath needs at least one fixation")
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(f"{name}: expected a sequence of (x, y, duration) fixations")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: fixations must be finite numbers")
    if np.any(arr[:, 2] < 0):
        raise ValueError(f"{name}: fixation durations must not be negative")
    if len(arr) == 1:
        arr = np.vstack([arr, arr])
    return arr


def align(v1: np.ndarray, v2: np.ndarray) -> list[tuple[int, int]]:
    """Cheapest monotone alignment of two saccade-vector sequences."""
    cost = np.linalg.norm(v1[:, None, :] - v2[None, :, :], axis=2)
    n, m = cost.shape
    acc = np.full((n, m), np.inf)
    acc[0, 0] = cost[0, 0]
    for i in range(n):
        for j in range(m):
            if i == 0 and j == 0:
                continue
            best = min(
                acc[i - 1, j - 1] if i and j else np.inf,
                acc[i - 1, j] if i else np.inf,
                acc[i, j - 1] if j else np.inf,
            )
            acc[i, j] = cost[i, j] + best
    path = [(n - 1, m - 1)]
    i, j = n - 1, m - 1
    while (i, j) != (0, 0):
        options = []
        if i and j:
            options.append((acc[i - 1, j - 1], i - 1, j - 1))
        if i:
            options.append((acc[i - 1, j], i - 1, j))
        if j:
            options.append((acc[i, j - 1], i, j - 1))
        low = min(o[0] for o in options)
        _, i, j = next(o for o in options if o[0] == low)
        path.append((i, j))
    return path[::-1]


def multimatch(
    pred: Sequence, human: Sequence, screen: tuple[float, float] = SCREEN
) -> dict[str, float]:
    """MultiMatch similarities of two scanpaths."""
    a = _as_fixations(pred, "pred")
    b = _as_fixations(human, "human")
    width, height = float(screen[0]), float(screen[1])
    if not (width > 0 and height > 0):
        raise ValueError(f"screen: width and height must be positive, got {screen!r}")
    diag = math.hypot(width, height)
    va, vb = np.diff(a[:, :2], axis=0), np.diff(b[:, :2], axis=0)
    path = align(va, vb)
    ia = np.array([p[0] for p in path])
    ib = np.array([p[1] for p in path])
    vec = np.linalg.norm(va[ia] - vb[ib], axis=1)
    ta = np.arctan2(va[ia, 1], va[ia, 0])
    tb = np.arctan2(vb[ib, 1], vb[ib, 0])
    ang = np.abs(ta - tb) % (2 * np.pi)
    ang = np.minimum(ang, 2 * np.pi - ang)
    length = np.abs(np.linalg.norm(va[ia], axis=1) - np.linalg.norm(vb[ib], axis=1))
    pos = np.linalg.norm(a[ia, :2] - b[ib, :2], axis=1)
    da, db = a[ia, 2], b[ib, 2]
    top = np.maximum(da, db)
    dur = np.divide(np.abs(da - db), top, out=np.zeros_like(top), where=top > 0)
    raw = {
        "vector": np.median(vec) / (2 * diag),
        "direction": np.median(ang) / np.pi,
        "length": np.median(length) / diag,
        "position": np.median(pos) / diag,
        "duration": np.median(dur),
    }
    return {k: float(np.clip(1.0 - raw[k], 0.0, 1.0)) for k in DIMENSIONS}
