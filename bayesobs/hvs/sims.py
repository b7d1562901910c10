"""Simulated subjects for HVSBench-style questions: pure functions of image + question.

:func:`answer` returns a reply string the standardiser reads (a letter, a
letter string, an integer, or ``X = [...] Y = [...] T = [...]``).  The
subjects:

``center``
    Centre bias: the box (or fixation) nearest the image centre; a count of
    1; scanpaths drawn around the centre; of two scanpaths, the one closer
    to the centre.
``saliency``
    Spectral-residual saliency (Hou & Zhang 2007), computed on the
    luminance and two colour-opponent channels of the image downsampled to
    128 px wide, summed, blurred and scaled to [0, 1].  The most salient box
    (peak saliency inside it); counts connected blobs above half the
    map's maximum; ranks boxes by saliency; a box's rank is one plus the
    number of blobs outside it with a higher peak (capped at the options);
    scanpaths start at the centre then visit saliency maxima with
    inhibition of return (a Gaussian of 0.08 image widths removed around
    each fixation), durations ``150 + 350 * saliency`` ms; of two
    scanpaths, the one with the higher mean saliency at its fixations;
    the longest fixation is the most salient one.
``largest``
    Size and centrality: box score ``area * exp(-d^2 / (2 * 0.3^2))``
    (``d``: distance of the box centre from the image centre, relative);
    counts the foreground regions (pixels at least 20 grey levels from the
    background mode) larger than 0.5% of the image; for fixation
    questions it falls back to ``center``.
``random``
    Uniform letter; uniform permutation; a count drawn from the question
    set's count distribution (``context["counts"]``); a human scanpath of
    another image (``context["pool"]``).  Its expected accuracy is the
    random baseline of :mod:`bayesobs.hvs.metrics`.

Q5 and Q7 describe objects in words; a simulated subject cannot read the
description, so it is given the described objects' boxes (``data``).
Draws are seeded by ``seed`` and the question id.
"""

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
    """Spectral-residual saliency map (Hou & Zhang 2007), scaled to [0, 1].

    Parameters
    ----------
    rgb : ndarray, shape (H, W, 3)
        Image, values 0..255.
    width : int
        Width of the map (the image is downsampled to it).
    blur : float
        Standard deviation of the Gaussian blur, in map widths.

    Returns
    -------
    ndarray, shape (h, width)
        Saliency, maximum 1 (all zeros for a flat image).
    """
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
    """The image (H, W, 3 uint8) and its saliency map, cached by file content.

    Parameters
    ----------
    path : str or Path
        The image file.

    Returns
    -------
    rgb : numpy.ndarray
        The image, shape (H, W, 3), uint8.
    saliency : numpy.ndarray
        Its :func:`spectral_residual` map.

    Raises
    ------
    FileNotFoundError
        When ``path`` is not a file.
    """
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
    """Saliency mass (sum of the map) inside a relative ``(x1, y1, x2, y2)`` box.

    Parameters
    ----------
    sal : numpy.ndarray
        A saliency map.
    box : sequence of float
        The box as fractions of the map's width and height; it covers at
        least one map cell.

    Returns
    -------
    float
        The sum of the map over the box.
    """
    return float(sal[_box_slice(sal, box)].sum())


def point_saliency(sal: np.ndarray, x: float, y: float) -> float:
    """Saliency at a relative point.

    Parameters
    ----------
    sal : numpy.ndarray
        A saliency map.
    x, y : float
        The point as fractions of the map's width and height (clipped to the map).

    Returns
    -------
    float
        The map's value in the cell holding the point.
    """
    h, w = sal.shape
    return float(sal[min(h - 1, max(0, int(y * h))), min(w - 1, max(0, int(x * w)))])


def salient_blobs(sal: np.ndarray, level: float = 0.5) -> list[tuple[float, np.ndarray]]:
    """Connected regions of ``sal >= level * max``: (mass, mask) pairs, largest mass first.

    Parameters
    ----------
    sal : numpy.ndarray
        A saliency map.
    level : float
        The threshold as a fraction of the map's maximum.

    Returns
    -------
    list of tuple
        ``(mass, mask)`` per region: the map's sum over it and a boolean mask
        of the map's shape; empty for a map without a positive value.
    """
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
    """Centre start, then saliency maxima with inhibition of return (relative x, y; ms).

    Parameters
    ----------
    sal : numpy.ndarray
        A saliency map.
    n : int
        Number of fixations, the centre included.

    Returns
    -------
    xs : list of float
        Fixation x positions as fractions of the map's width.
    ys : list of float
        Fixation y positions as fractions of the map's height.
    ts : list of float
        Durations in ms, ``150 + 350 * saliency`` at each fixation.
    """
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
    """What the ``random`` subject draws from: the counts and the human scanpaths by image.

    Parameters
    ----------
    records : sequence of dict
        The question set's trial records.

    Returns
    -------
    dict
        ``counts`` (the Q2 answers) and ``pool``
        (:func:`bayesobs.hvs.metrics.scanpath_pool` of the records).
    """
    counts = [r["answer"] for r in records if r["qtype"] == "Q2"]
    return {"counts": counts, "pool": scanpath_pool(records)}


def answer(
    sim: str,
    record: dict,
    image: np.ndarray | None = None,
    seed: int = 0,
    context: dict | None = None,
) -> str:
    """A simulated subject's reply to one HVSBench-style question.

    Parameters
    ----------
    sim : {"center", "saliency", "largest", "random"}
        The subject.
    record : dict
        A trial record from :func:`bayesobs.hvs.questions.build_questions`.
    image : ndarray, optional
        The image (H, W, 3); read from ``record["image"]`` when needed and
        not given.
    seed : int
        Seed (with the question id) for random draws.
    context : dict, optional
        For ``random``: :func:`sim_context` of the question set (needed for
        Q2, Q9, Q12).

    Returns
    -------
    str
        The reply text.
    """
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
    """Replies of one simulated subject to a question set (``context`` defaults to its own).

    Parameters
    ----------
    sim : {"center", "saliency", "largest", "random"}
        The subject.
    records : sequence of dict
        Trial records of :func:`bayesobs.hvs.questions.build_questions`.
    seed : int
        Seed (with each question id) for random draws.
    context : dict, optional
        :func:`sim_context` of a question set; the records' own by default.

    Returns
    -------
    list of str
        One reply per record, in order (see :func:`answer`).
    """
    ctx = context if context is not None else sim_context(records)
    return [answer(sim, r, seed=seed, context=ctx) for r in records]
