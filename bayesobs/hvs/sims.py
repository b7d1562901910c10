"""Simulated subjects for HVSBench-style questions: pure functions of image + question."""

from __future__ import annotations

import hashlib
import io
import math
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image
from scipy import ndimage

from .metrics import scanpath_pool

SIMS = ("center", "saliency", "largest", "random")
MAP_WIDTH = 128
BLUR = 1 / 16  # Gaussian blur of the map, in map widths
IOR_SIGMA = 0.08


def _rng(seed: int, qid: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(qid.encode())])


def spectral_residual(rgb: np.ndarray, width: int = MAP_WIDTH, blur: float = BLUR) -> np.ndarray:
    """Spectral-residual saliency map (Hou & Zhang 2007), scaled to [0, 1]."""
    h, w = rgb.shape[:2]
    height = max(1, round(h * width / w))
    arr = rgb if rgb.dtype == np.uint8 else np.clip(rgb, 0, 255).astype(np.uint8)
    small = np.asarray(
        Image.fromarray(arr).resize((width, height), Image.Resampling.BILINEAR), dtype=float
    )
    r, g, b = small[..., 0], small[..., 1], small[..., 2]
    channels = ((r + g + b) / 3.0, r - g, b - (r + g) / 2.0)
    total = np.zeros((height, width))
    for ch in channels:
        if np.ptp(ch) < 1e-9:
            continue
        f = np.fft.fft2(ch)
        amp = np.log(np.abs(f) + 1e-9)
        phase = np.angle(f)
        residual = amp - ndimage.uniform_filter(amp, size=3, mode="wrap")
        total += np.abs(np.fft.ifft2(np.exp(residual + 1j * phase))) ** 2
    total = ndimage.gaussian_filter(total, sigma=width * blur)
    top = total.max()
    return total / top if top > 0 else total


_CACHE: dict[str, tuple[np.ndarray, np.ndarray]] = {}
_CACHE_SIZE = 64


def load_image(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """The image (H, W, 3 uint8) and its saliency map, cached by file content."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: image not found")
    data = p.read_bytes()
    key = hashlib.sha1(data).hexdigest()
    if key not in _CACHE:
        with Image.open(io.BytesIO(data)) as im:
            rgb = np.asarray(im.convert("RGB"))
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = (rgb, spectral_residual(rgb))
    return _CACHE[key]


def _box_slice(sal: np.ndarray, box: Sequence[float]):
    h, w = sal.shape
    x1, y1, x2, y2 = box
    c0, c1 = math.floor(x1 * w), max(math.ceil(x2 * w), math.floor(x1 * w) + 1)
    r0, r1 = math.floor(y1 * h), max(math.ceil(y2 * h), math.floor(y1 * h) + 1)
    return slice(max(0, r0), min(h, r1)), slice(max(0, c0), min(w, c1))


def box_saliency(sal: np.ndarray, box: Sequence[float]) -> float:
    """Saliency mass (sum of the map) inside a relative ``(x1, y1, x2, y2)`` box."""
    return float(sal[_box_slice(sal, box)].sum())


def point_saliency(sal: np.ndarray, x: float, y: float) -> float:
    """Saliency at a relative point."""
    h, w = sal.shape
    return float(sal[min(h - 1, max(0, int(y * h))), min(w - 1, max(0, int(x * w)))])


def salient_blobs(sal: np.ndarray, level: float = 0.5) -> list[tuple[float, np.ndarray]]:
    """Connected regions of ``sal >= level * max``: (mass, mask) pairs, largest mass first."""
    if sal.max() <= 0:
        return []
    lab, n = ndimage.label(sal >= level * sal.max())
    blobs = [(float(sal[lab == i].sum()), lab == i) for i in range(1, n + 1)]
    return sorted(blobs, key=lambda b: -b[0])


def _centre_dist(box: Sequence[float]) -> float:
    x1, y1, x2, y2 = box
    return math.hypot((x1 + x2) / 2 - 0.5, (y1 + y2) / 2 - 0.5)


def _fmt_scanpath(xs, ys, ts) -> str:
    return (
        "X = [" + ", ".join(f"{v:.2f}" for v in xs) + "] "
        "Y = [" + ", ".join(f"{v:.2f}" for v in ys) + "] "
        "T = [" + ", ".join(str(round(v)) for v in ts) + "]"
    )


def _order_letters(scores: Sequence[float], descending: bool = True) -> str:
    idx = np.argsort(-np.asarray(scores) if descending else np.asarray(scores), kind="stable")
    return "".join("ABCDEFGHIJKLMNOPQ"[i] for i in idx)


def saliency_scanpath(sal: np.ndarray, n: int) -> tuple[list[float], list[float], list[float]]:
    """Centre start, then saliency maxima with inhibition of return (relative x, y; ms)."""
    h, w = sal.shape
    yy, xx = np.mgrid[0:h, 0:w]
    xx, yy = (xx + 0.5) / w, (yy + 0.5) / h
    work = sal.copy()
    xs, ys, ts = [0.5], [0.5], [150 + 350 * point_saliency(sal, 0.5, 0.5)]
    aspect = h / w
    for _ in range(n - 1):
        work *= 1 - np.exp(
            -((xx - xs[-1]) ** 2 + ((yy - ys[-1]) * aspect) ** 2) / (2 * IOR_SIGMA**2)
        )
        i = int(np.argmax(work))
        x, y = float(xx.flat[i]), float(yy.flat[i])
        xs.append(x)
        ys.append(y)
        ts.append(150 + 350 * float(sal.flat[i]))
    return xs, ys, ts


def sim_context(records: Sequence[dict]) -> dict:
    """What the ``random`` subject draws from: the counts and the human scanpaths by image."""
    counts = [r["answer"] for r in records if r["qtype"] == "Q2"]
    return {"counts": counts, "pool": scanpath_pool(records)}


def answer(
    sim: str,
    record: dict,
    image: np.ndarray | None = None,
    seed: int = 0,
    context: dict | None = None,
) -> str:
    """A simulated subject's reply to one HVSBench-style question."""
    if sim not in SIMS:
        raise ValueError(f"unknown simulated subject {sim!r}: allowed {', '.join(SIMS)}")
    rng = _rng(seed, record["qid"])
    q, data = record["qtype"], record["data"]
    if sim == "random":
        return _random(record, rng, context)
    if sim == "largest" and q not in ("Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7"):
        sim = "center"
    sal = None
    if sim == "saliency" or (sim == "largest" and q == "Q2"):
        rgb, sal = (
            load_image(record["image"]) if image is None else (image, spectral_residual(image))
        )
        if sim == "largest":
            return str(_foreground_regions(rgb))
    if q in ("Q1", "Q3", "Q4", "Q5"):
        boxes = data["boxes"]
        if sim == "center":
            scores = [-_centre_dist(b) for b in boxes]
        elif sim == "largest":
            scores = [_largest_score(b) for b in boxes]
        else:
            scores = [box_saliency(sal, b) for b in boxes]
        order = _order_letters(scores)
        return order if q == "Q3" else order[0]
    if q in ("Q6", "Q7"):
        box = data["target_box"]
        k = record["n_options"]
        if sim == "center":
            rank = min(k, 1 + int(_centre_dist(box) / 0.15))
        elif sim == "largest":
            x1, y1, x2, y2 = box
            area = (x2 - x1) * (y2 - y1)
            rank = 1 if area >= 0.04 else (2 if area >= 0.01 else 3)
            rank = min(k, rank)
        else:
            mass = box_saliency(sal, box)
            inside = np.zeros_like(sal, dtype=bool)
            inside[_box_slice(sal, box)] = True
            higher = sum(1 for p, m in salient_blobs(sal) if p > mass and not (m & inside).any())
            rank = min(k, 1 + higher)
        return "ABC"[rank - 1]
    if q == "Q2":
        return "1" if sim == "center" else str(max(1, len(salient_blobs(sal))))
    if q in ("Q8", "Q11"):
        paths = data["scanpaths"]
        if sim == "center":
            scores = [
                -float(np.mean(np.hypot(np.asarray(p["X"]) - 0.5, np.asarray(p["Y"]) - 0.5)))
                for p in paths
            ]
        else:
            scores = [
                float(
                    np.mean(
                        [point_saliency(sal, x, y) for x, y in zip(p["X"], p["Y"], strict=True)]
                    )
                )
                for p in paths
            ]
        return _order_letters(scores)[0]
    if q in ("Q10", "Q13"):
        pts = data["points"]
        if sim == "center":
            scores = [-math.hypot(x - 0.5, y - 0.5) for x, y in pts]
        else:
            scores = [point_saliency(sal, x, y) for x, y in pts]
        return _order_letters(scores)[0]
    if q in ("Q9", "Q12"):
        n = int(data["n_fix"])
        if sim == "center":
            xs = [0.5, *np.clip(rng.normal(0.5, 0.12, n - 1), 0, 1)]
            ys = [0.5, *np.clip(rng.normal(0.5, 0.12, n - 1), 0, 1)]
            ts = [float(v) for v in rng.uniform(150, 350, n)]
        else:
            xs, ys, ts = saliency_scanpath(sal, n)
        return _fmt_scanpath(xs, ys, ts)
    raise ValueError(f"{record['qid']}: unknown question type {q!r}")


def _largest_score(box: Sequence[float]) -> float:
    x1, y1, x2, y2 = box
    return (x2 - x1) * (y2 - y1) * math.exp(-(_centre_dist(box) ** 2) / (2 * 0.3**2))


def _foreground_regions(rgb: np.ndarray) -> int:
    step = max(1, rgb.shape[1] // 420)  # count on a ~420 px wide copy
    grey = rgb[::step, ::step].astype(float).mean(axis=2)
    freq = np.bincount(np.round(grey).astype(int).ravel(), minlength=256)
    background = int(np.argmax(freq))
    lab, n = ndimage.label(np.abs(grey - background) >= 20)
    if n == 0:
        return 1
    sizes = ndimage.sum_labels(np.ones_like(grey), lab, index=np.arange(1, n + 1))
    return max(1, int(np.sum(sizes >= 0.005 * grey.size)))


def _random(record: dict, rng: np.random.Generator, context: dict | None) -> str:
    kind, k = record["kind"], record["n_options"]
    letters = "ABCDEFGHIJKLMNOPQ"[:k]
    if kind == "choice":
        return letters[int(rng.integers(k))]
    if kind == "ranking":
        return "".join(letters[i] for i in rng.permutation(k))
    if context is None:
        raise ValueError(f"{record['qid']}: the random subject needs sim_context(records)")
    if kind == "count":
        counts = context["counts"]
        return str(counts[int(rng.integers(len(counts)))])
    pool = context["pool"][record["qtype"]]
    others = [im for im in pool if im != record["image"]]
    if not others:
        raise ValueError(f"{record['qid']}: no other image's scanpath to answer with")
    im = others[int(rng.integers(len(others)))]
    sp = pool[im][int(rng.integers(len(pool[im])))]
    return _fmt_scanpath(sp["X"], sp["Y"], sp["T"])


def run(sim: str, records: Sequence[dict], seed: int = 0, context: dict | None = None) -> list[str]:
    """Replies of one simulated subject to a question set (``context`` defaults to its own)."""
    ctx = context if context is not None else sim_context(records)
    return [answer(sim, r, seed=seed, context=ctx) for r in records]
