"""Pixel readers of the simulated Percept-V perceiver: colour masks, blobs, shapes, grid lines, numerals."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from ..stimuli.drawing import render_text

EIGHT = np.ones((3, 3), bool)  # 8-connectivity


def rgb_array(img) -> np.ndarray:
    """The image as an RGB uint8 array."""
    return np.asarray(img.convert("RGB"))


def colour_mask(arr: np.ndarray, colour) -> np.ndarray:
    """Pixels exactly of ``colour``."""
    r, g, b = (np.uint8(v) for v in colour)
    # channel by channel: ten times faster than np.all(arr == colour, axis=-1), the same mask
    mask = arr[..., 0] == r
    mask &= arr[..., 1] == g
    mask &= arr[..., 2] == b
    return mask


def packed(arr: np.ndarray) -> np.ndarray:
    """RGB packed into one int32 per pixel (fast colour comparisons)."""
    a = arr.astype(np.int32)
    return (a[..., 0] << 16) | (a[..., 1] << 8) | a[..., 2]


def pack(colour) -> int:
    """An RGB colour packed into one int."""
    r, g, b = colour
    return (int(r) << 16) | (int(g) << 8) | int(b)


def ink_mask(arr: np.ndarray) -> np.ndarray:
    """Everything that is not white."""
    # channel by channel: ten times faster than np.any(arr != 255, axis=-1), the same mask
    mask = arr[..., 0] != 255
    mask |= arr[..., 1] != 255
    mask |= arr[..., 2] != 255
    return mask


def blobs(mask: np.ndarray, min_px: int = 20) -> list[dict]:
    """Connected components (8-connected) of at least ``min_px`` pixels: centroid, area, box, mask."""
    lab, _n = ndimage.label(mask, structure=EIGHT)
    out = []
    for k, sl in enumerate(ndimage.find_objects(lab)):
        m = lab[sl] == k + 1
        area = int(m.sum())
        if area < min_px:
            continue
        ys, xs = np.nonzero(m)
        out.append(
            {
                "x": float(xs.mean() + sl[1].start),
                "y": float(ys.mean() + sl[0].start),
                "area": area,
                "slice": sl,
                "mask": m,
            }
        )
    return out


def shape_kind(mask: np.ndarray) -> str:
    """Circle / triangle / square / pentagon from the filled area over the bounding box."""
    filled = ndimage.binary_fill_holes(mask)
    ratio = filled.sum() / filled.size
    if ratio < 0.6:
        return "triangle"
    if ratio < 0.74:
        return "pentagon"
    if ratio < 0.9:
        return "circle"
    return "square"


def line_positions(profile: np.ndarray, threshold: float) -> list[float]:
    """Centres of the runs where a projection profile exceeds ``threshold``."""
    on = profile > threshold
    lab, n = ndimage.label(on)
    return [float(np.mean(np.nonzero(lab == k + 1)[0])) for k in range(n)]


def read_number(
    grey_ink: np.ndarray, cx: float, cy: float, size: int, candidates, half_w: float | None = None
) -> str:
    """The numeral drawn centred near ``(cx, cy)``: template matching against DejaVu renderings."""
    h, w = grey_ink.shape
    half_w, half_h = (2 * size if half_w is None else half_w), size
    x0, x1 = max(int(cx - half_w), 0), min(int(cx + half_w), w)
    y0, y1 = max(int(cy - half_h), 0), min(int(cy + half_h), h)
    crop = grey_ink[y0:y1, x0:x1]
    ys, xs = np.nonzero(crop)
    if len(xs) == 0:
        return ""
    crop = crop[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]
    best, best_d = "", None
    for c in candidates:
        t = render_text(str(c), size, (4 * size, 2 * size)) < 128
        ty, tx = np.nonzero(t)
        t = t[ty.min() : ty.max() + 1, tx.min() : tx.max() + 1]
        if t.shape != crop.shape:
            d = abs(t.shape[0] - crop.shape[0]) * 1000 + abs(t.shape[1] - crop.shape[1]) * 1000
        else:
            d = int(np.sum(t != crop))
        if best_d is None or d < best_d:
            best, best_d = str(c), d
    return best


def grid_lines(arr: np.ndarray) -> tuple[list[float], list[float]]:
    """X and y positions of the long black grid lines."""
    black = colour_mask(arr, (0, 0, 0))
    xs = line_positions(black.sum(axis=0), 0.5 * arr.shape[0] * 0.8)
    ys = line_positions(black.sum(axis=1), 0.5 * arr.shape[1] * 0.8)
    return xs, ys


def cell_of(x: float, y: float, xs, ys) -> tuple[int, int]:
    """The (row, column) grid cell of a point from the grid line positions."""
    return int(np.searchsorted(ys, y)) - 1, int(np.searchsorted(xs, x)) - 1
