"""The faster code of issue 32 gives exactly what the straightforward code gives.

Each rewrite is compared with the straightforward version it replaced (kept
here as the reference): the simulated searchers' segmentation
(:func:`segment_items`, :func:`fill_holes`, :func:`contrast`), the digit
drawing, the PNG encoding, the channel mean and the simulated observers'
percepts (kept per run instead of re-perceived on every trial). Masks, labels,
counts and pixels exactly; a float computed by another numpy or scipy routine
than ours to a stated tolerance (issue 50), so that a numpy release summing in
another order fails nothing.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scipy import ndimage

from bayesobs.run.subjects import Request, SimSubject, Turn
from bayesobs.search.subject import contrast, fill_holes, segment_items
from bayesobs.search.tasks import (
    STROKE,
    CircleSizes,
    LightPriors,
    TwoAmongFive,
    draw_digit,
    glyph_segments,
)
from bayesobs.stimuli import from_png, to_png
from bayesobs.stimuli.base import canvas, channel_mean, segment


def straightforward_segment_items(img: np.ndarray, shading: bool = False) -> dict:
    """segment_items as it was before issue 32 (whole-image reductions, binary_fill_holes)."""
    lum = img.mean(axis=2)
    hist = np.bincount(np.clip(lum, 0, 255).astype(int).ravel(), minlength=256)
    bg_lum = int(np.argmax(hist))
    bg = img[np.abs(lum - bg_lum) < 1].mean(axis=0)
    ink = np.abs(img - bg).max(axis=2)
    mask = ink > 40
    if shading:
        mask |= ndimage.gaussian_gradient_magnitude(lum, 1.0) > 1.5
    labels, n = ndimage.label(mask)
    idx = np.arange(1, n + 1)
    area = ndimage.sum(mask, labels, idx)
    edge = np.isin(idx, np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]]))
    frame = edge & (area > 8 * np.median(area)) if n else edge
    mask = ndimage.binary_fill_holes(mask & ~np.isin(labels, idx[frame]))
    labels, n = ndimage.label(mask)
    lab = labels.ravel()
    h, w = lum.shape
    yy, xx = np.divmod(np.arange(h * w), w)

    def per_item(v):
        return np.bincount(lab, weights=v, minlength=n + 1)[1:]

    area = np.bincount(lab, minlength=n + 1)[1:].astype(float)
    keep = area >= 20
    if not keep.any():
        return {"x": np.empty(0), "ink": ink}
    L = lum.ravel()
    cx, cy = per_item(xx) / area, per_item(yy) / area
    colour = np.column_stack([per_item(img[..., c].ravel()) for c in range(3)]) / area[:, None]
    sl = per_item(L)
    lx = per_item(L * xx) - cx * sl
    ly = per_item(L * yy) - cy * sl
    norm = np.hypot(lx, ly)
    light = np.column_stack([lx, ly]) / np.where(norm > 0, norm, 1.0)[:, None]
    # an evenly lit item's offset is the rounding error of two equal sums (~1e-16 of them): its
    # direction is noise that any other summing order changes; a shaded item's is 5e-3 and up
    lit = norm > 1e-6 * np.hypot(per_item(L * xx), per_item(L * yy))
    return {
        "x": cx[keep],
        "y": cy[keep],
        "area": area[keep],
        "colour": colour[keep],
        "light": light[keep],
        "ink": ink,
        "lit": lit[keep],
    }


def search_images(n: int = 4, seed: int = 0, blur: float = 0.0) -> list[tuple[bytes, bool]]:
    """PNGs of every search task (``n`` each, all set sizes), with their ``shading`` flag."""
    rng = np.random.default_rng(seed)
    out = []
    for task, search, top in (
        (CircleSizes(), "small", 49),
        (TwoAmongFive(), "shape_colour_conjunctive", 99),
        (LightPriors(), "left", 17),
    ):
        for stim in task.generate(rng, 0, top, n, {"search": search}):
            out.append((task.render_png(stim, blur), isinstance(task, LightPriors)))
    return out


def assert_same(a: dict, b: dict) -> None:
    """``b`` (the rewrite's) is ``a`` (the straightforward code's), the light of lit items only."""
    for key in a.keys() - {"lit"}:
        assert b[key].dtype == a[key].dtype and b[key].shape == a[key].shape, key
        want, got, atol = a[key], b[key], 1e-9
        if key == "light":  # a difference of sums: rounding / offset (<= 1e-6) reaches ~1e-8
            want, got, atol = want[a["lit"]], got[a["lit"]], 1e-6
        # features in pixels, levels 0-255 or unit vectors: these tolerances are far below what
        # a searcher tells apart and above a reordered sum's rounding; areas are whole counts,
        # so one pixel more or less in an item still fails
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=atol, err_msg=key)


@pytest.mark.parametrize("blur", [0.0, 3.0])
def test_segment_items_equals_the_straightforward_code(blur):
    for png, _ in search_images(blur=blur):
        for shading in (False, True):
            want = straightforward_segment_items(from_png(png), shading)
            assert_same(want, segment_items(from_png(png), shading))  # float path
            assert_same(want, segment_items(from_png(png, dtype=np.uint8), shading))  # 8-bit


def test_segment_items_float_path_on_fractional_values():
    """A float image whose values are not whole numbers (no 8-bit shortcut) still matches."""
    rng = np.random.default_rng(1)
    png, _ = search_images(n=1)[0]
    img = from_png(png) + rng.uniform(-0.49, 0.49, (400, 400, 3))
    lum, ink = contrast(img)
    want = straightforward_segment_items(img)
    np.testing.assert_allclose(ink, want["ink"], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(
        lum, img.mean(axis=2), rtol=1e-14
    )  # another summing order: last bits
    assert_same(want, segment_items(img))


def test_fill_holes_equals_scipy():
    rng = np.random.default_rng(2)
    for density in (0.2, 0.45, 0.6, 0.8):
        mask = rng.uniform(size=(60, 70)) < density
        np.testing.assert_array_equal(fill_holes(mask), ndimage.binary_fill_holes(mask))
    ring = np.zeros((9, 9), bool)  # a ring around a hole, and one open to the edge
    ring[2:7, 2:7] = True
    ring[3:6, 3:6] = False
    ring[0:4, 7] = True
    np.testing.assert_array_equal(fill_holes(ring), ndimage.binary_fill_holes(ring))
    assert fill_holes(ring)[4, 4]
    assert not fill_holes(np.zeros((5, 5), bool)).any()
    assert fill_holes(np.ones((5, 5), bool)).all()


def test_draw_digit_equals_stroke_by_stroke():
    rng = np.random.default_rng(3)
    for _ in range(40):
        digit = str(rng.choice(["2", "5"]))
        x, y = rng.uniform(8, 32, 2)  # some strokes cut by the edges
        angle = float(np.round(rng.uniform(0, 360), 1))
        want, got = canvas(40, 40), canvas(40, 40)
        for x0, y0, x1, y1 in glyph_segments(digit, x, y, angle):
            segment(want, x0, y0, x1, y1, STROKE, (20, 150, 20))
        draw_digit(got, digit, x, y, angle, (20, 150, 20))
        np.testing.assert_array_equal(got, want)


def test_to_png_equals_round_then_clip():
    rng = np.random.default_rng(4)
    img = rng.uniform(-30, 290, (37, 23, 3))
    img[0, 0] = (0.5, 1.5, 254.5)  # halves round to even
    png = to_png(img)
    want = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(want, mode="RGB").save(buf, format="PNG", compress_level=1)
    assert png == buf.getvalue()
    np.testing.assert_array_equal(from_png(png, dtype=np.uint8), want)


def test_channel_mean_is_numpys_mean_to_rounding():
    rng = np.random.default_rng(5)
    for shape in ((400, 400, 3), (7, 5, 3), (1, 1, 3)):
        img = rng.uniform(0, 255, shape)
        got, want = channel_mean(img), img.mean(axis=2)
        assert got.dtype == want.dtype and got.shape == want.shape
        # three terms summed in another order differ in the last bits only (1e-14 is ~45 ulp),
        # far below the one-level luminance step the segmentation thresholds
        np.testing.assert_allclose(got, want, rtol=1e-14)


def run_requests(kind: str) -> list[Request]:
    """A text run of 12 trials with a growing context, then one image trial, as the runner asks."""
    rng = np.random.default_rng(6)
    texts = [f"A: {'-' * int(a)}\nB: {'-' * int(b)}" for a, b in rng.integers(5, 60, (12, 2))]
    out = []
    for t in range(len(texts)):
        turns = []
        for past in range(t):
            turns += [Turn("user", text=texts[past]), Turn("assistant", text="0.5")]
        meta = dict(
            task="line_ratio",
            modality="text",
            condition="context_long",
            session="s",
            run=0,
            trial=t,
        )
        out.append(Request(f"system {kind}", (*turns, Turn("user", text=texts[t])), meta))
    return out


@pytest.mark.parametrize("kind", ["bayesian", "antibayes", "kalman", "linear", "anchor"])
def test_kept_percepts_give_the_answers_of_fresh_subjects(kind):
    """One subject answering a whole run equals a fresh subject per trial (nothing kept)."""
    requests = run_requests(kind)
    kept = SimSubject(kind, seed=3)
    answers = [kept.answer(r) for r in requests]
    assert answers == [SimSubject(kind, seed=3).answer(r) for r in requests]
    assert len(set(answers)) == len(answers)
    reseeded = SimSubject(kind, seed=3)
    reseeded.answer(requests[-1])
    reseeded.seed = 4  # a changed seed is a different percept, never a kept one
    assert reseeded.answer(requests[-1]) == SimSubject(kind, seed=4).answer(requests[-1])


def straightforward_measure_image(task: str, img: np.ndarray) -> float:
    """measure_image as it was before issue 32 (every map computed, full index grids)."""
    from bayesobs.magnitude.maze import UNIT_PX

    def _half_max_extent(profile):
        half = profile.max() / 2
        above = np.flatnonzero(profile >= half)
        i, j = above[0], above[-1]
        left = i - (profile[i] - half) / (profile[i] - profile[i - 1]) if i > 0 else float(i)
        n = len(profile)
        right = j + (profile[j] - half) / (profile[j] - profile[j + 1]) if j + 1 < n else float(j)
        return left, right

    def centroid(weight):
        w = np.where(weight >= 0.5 * weight.max(), weight, 0.0)
        yy, xx = np.mgrid[0 : w.shape[0], 0 : w.shape[1]]
        return float((w * xx).sum() / w.sum()), float((w * yy).sum() / w.sum())

    dark = 255.0 - img.mean(axis=2)
    red = np.clip(img[..., 0] - (img[..., 1] + img[..., 2]) / 2, 0, None)
    green = np.clip(img[..., 1] - (img[..., 0] + img[..., 2]) / 2, 0, None)
    if task == "line_ratio":
        mid = img.shape[0] // 2
        lengths = []
        for band in (dark[:mid], dark[mid:]):
            left, right = _half_max_extent(band[int(np.argmax(band.sum(axis=1)))])
            lengths.append(right - left)
        return min(lengths) / max(lengths)
    if task == "marker_location":
        r = int(np.argmax(np.clip(dark - 2 * red, 0, None).sum(axis=1)))
        left, right = _half_max_extent(np.maximum(dark[r], red[r]))
        return (centroid(red)[0] - (left + 0.5)) / ((right - 0.5) - (left + 0.5))
    if task == "numerosity":
        return float(ndimage.label(dark > 0.5 * dark.max())[1])
    (gx, gy), (rx, ry) = centroid(green), centroid(red)
    return math.hypot(rx - gx, ry - gy) / UNIT_PX


@pytest.mark.parametrize("task", ["line_ratio", "marker_location", "numerosity", "maze_distance"])
def test_measure_image_equals_the_straightforward_code(task):
    from bayesobs.magnitude.subject import measure_image
    from bayesobs.stimuli import get_task

    t = get_task(task)
    lo, hi = t.value_range or (0.1, 0.9)
    rng = np.random.default_rng(7)
    for stim in t.generate(rng, lo, hi, 3, {}):
        for sigma in (0.0, 3.0):
            img = from_png(t.render_png(stim, sigma))
            assert measure_image(task, img) == straightforward_measure_image(task, img)


def test_identical_bootstrap_draws_are_fitted_once_with_the_same_numbers(monkeypatch):
    """fit_batch fits each distinct draw of runs once (issue 32): the numbers of fitting every one."""
    import bayesobs.fits.fitting as fitting
    import bayesobs.fits.kernel as kernel
    from bayesobs.fits.runtable import build_runs, dataset_matrix
    from bayesobs.fits.synthetic import simulated_trials
    from bayesobs.trials import normalize_trials

    trials = normalize_trials(simulated_trials(n_subjects=2, trials_per_session=20, seed=1))
    trials = trials[trials["condition"].isin(["base", "noise_constant"])]
    once = fitting.fit_batch(trials, bootstrap=12, seed=4)
    calls = []

    def every_row(W):
        calls.append(W.shape[0])
        return np.arange(W.shape[0]), np.arange(W.shape[0])

    monkeypatch.setattr(kernel, "_distinct_rows", every_row)
    each = fitting.fit_batch(trials, bootstrap=12, seed=4)
    assert calls  # the Kalman fits went through the patched (no sharing) path
    np.testing.assert_array_equal(once.loglik, each.loglik)
    for name in once.params:
        np.testing.assert_array_equal(once.params[name], each.params[name], err_msg=name)
    monkeypatch.undo()
    # three runs per cell: at most ten distinct draws of 13 datasets, so copies were shared
    rows, inverse = kernel._distinct_rows(dataset_matrix(trials, *build_runs(trials, None), 12, 4))
    assert len(rows) < len(inverse)


def test_distinct_rows_are_those_of_comparing_every_row_in_turn():
    """The vectorised grouping of bootstrap draws equals a plain loop over the rows (issue 32).

    Rows of different lengths, equal columns with other counts, equal
    counts on other columns, repeats far apart, and the empty matrix.
    """
    import scipy.sparse as sp

    from bayesobs.fits.kernel import _distinct_rows
    from bayesobs.fits.runtable import build_runs, dataset_matrix
    from bayesobs.fits.synthetic import simulated_trials
    from bayesobs.trials import normalize_trials

    def by_loop(W):
        W = W.tocsr()
        seen, rows, inverse = {}, [], []
        for i in range(W.shape[0]):
            a, b = W.indptr[i], W.indptr[i + 1]
            key = (W.indices[a:b].tobytes(), W.data[a:b].tobytes())
            if key not in seen:
                seen[key] = len(rows)
                rows.append(i)
            inverse.append(seen[key])
        return np.array(rows, dtype=np.int64), np.array(inverse, dtype=np.int64)

    dense = np.array(
        [[1, 0, 2], [0, 0, 3], [1, 0, 2], [2, 0, 1], [0, 3, 0], [0, 0, 3], [1, 0, 2], [0, 1, 2]],
        dtype=float,
    )
    trials = normalize_trials(simulated_trials(n_subjects=2, trials_per_session=20, seed=1))
    for W in (
        sp.csr_matrix(dense),
        dataset_matrix(trials, *build_runs(trials, None), 30, 7),
        sp.csr_matrix((0, 4)),
    ):
        rows, inverse = _distinct_rows(W)
        want_rows, want_inverse = by_loop(W)
        np.testing.assert_array_equal(rows, want_rows)
        np.testing.assert_array_equal(inverse, want_inverse)
        assert rows.dtype == inverse.dtype == np.int64
        if W.shape[0]:
            assert (W.tocsr()[rows][inverse] != W.tocsr()).nnz == 0


@pytest.mark.parametrize(
    "shape, axis", [((300, 30), -1), ((50, 30, 4), 1), ((6, 2, 31), 0), ((9, 1), 1)]
)
def test_nan_percentiles_are_numpys_to_rounding(shape, axis):
    import warnings

    from bayesobs.bootstrap import nan_percentiles

    rng = np.random.default_rng(8)
    a = rng.normal(size=shape) * 10.0 ** rng.uniform(-5, 5, size=shape)
    a[rng.uniform(size=shape) < 0.05] = np.nan
    a[(0,) * len(shape)] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices
        want = np.nanpercentile(a, [16, 84], axis=axis)
        got = nan_percentiles(a, [16, 84], axis=axis)
    assert got.dtype == want.dtype and got.shape == want.shape
    # numpy.percentile and numpy.nanpercentile may interpolate in another order: bounds are
    # printed to 3-4 digits, 1e-12 relative is far below them; NaN (all-NaN slices) where numpy's
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_disc_on_open_grids_equals_full_grids():
    from bayesobs.stimuli.base import disc

    rng = np.random.default_rng(9)
    for _ in range(30):
        cx, cy = rng.uniform(-5, 45, 2)
        r = float(rng.uniform(0.5, 15))
        want, got = canvas(40, 30), canvas(40, 30)
        yy, xx = np.mgrid[0:30, 0:40]
        want[(xx - cx) ** 2 + (yy - cy) ** 2 <= r * r] = (30, 30, 220)
        disc(got, cx, cy, r, (30, 30, 220))
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("R", [0, 7, 600, 8192 + 1000, 3 * 8192 + 924])
def test_kalman_moments_in_blocks_and_threads_equal_the_plain_recursion(R):
    # issue 32: equal blocks per thread, the grid's columns in two threads, one gain per rho;
    # the recursion is column by column, so any split gives the same bits
    from bayesobs.fits.kernel import (
        kalman_moments,
        kalman_moments_blocked,
        kalman_moments_grid,
    )

    rng = np.random.default_rng(R)
    T = 12
    z, u = rng.normal(size=(T, R)), rng.normal(size=(T, R))
    obs = rng.random((T, R)) > 0.2
    rho = np.exp(rng.uniform(-18, 18, R))
    rho[:: max(1, R // 5)] = np.inf
    want = [np.asarray(a) for a in kalman_moments(z, u, obs, np.broadcast_to(rho, (1, R)))]
    for got, ref in zip(kalman_moments_blocked(z, u, obs, rho), want, strict=True):
        np.testing.assert_array_equal(got, ref[0])
    if R > 2000:  # the grid's (C, R) arrays stay small
        return
    grid = np.exp(np.array([-np.inf, -3.0, 0.0, 2.5, np.inf]))
    full = np.broadcast_to(grid[:, None], (5, R))  # the old form: one rho per element
    for got, ref in zip(
        kalman_moments_grid(z, u, obs, grid), kalman_moments(z, u, obs, full), strict=True
    ):
        np.testing.assert_array_equal(got, ref)


def _fits_table_by_rows(batch):
    """``fits_table`` as it was: a dict per row, ``json.dumps`` per row (the reference)."""
    from bayesobs.fits.fitresults import _encode_json  # every value through json.dumps
    from bayesobs.fits.observers.variants import FACTORS, VARIANTS
    from bayesobs.trials import CELL_KEYS

    rows, cells = [], batch.cells
    lapse = batch.params.get("lapse")
    for c in range(len(cells)):
        key = {k: cells[k].iloc[c] for k in CELL_KEYS}
        extra = {k: cells[k].iloc[c] for k in ("level", "n_level") if k in cells.columns}
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
                    "params": _encode_json(params),
                    **extra,
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.slow  # about 5 s: a fits table built twice (the fast suite's 5-minute budget)
def test_fits_table_equals_the_row_by_row_table_with_json_dumps(tmp_path):
    """The column-wise ``fits_table`` and ``encode_params``' direct floats (issue 32).

    The same frame (values, dtypes, column order) and the same ``fits.csv``
    bytes as a dict per row through ``json.dumps``: plain fits with
    ``rho = inf`` limits and skipped variants (a constant cell), a lapse
    fit, an interleaved fit (levels), and no cells at all.
    """
    from bayesobs.fits.fitresults import _encode_json, encode_params, fits_table
    from bayesobs.fits.fitting import fit_batch
    from bayesobs.fits.synthetic import simulated_trials
    from bayesobs.trials import normalize_trials

    trials = normalize_trials(simulated_trials(n_subjects=2, trials_per_session=12, seed=5))
    constant = trials["condition"] == trials["condition"].iloc[0]
    trials.loc[constant & (trials["subject"] == trials["subject"].iloc[0]), "response"] = 0.5
    inter = trials.assign(coherence=np.where(trials.index % 2, "low", "high"))
    batches = [
        fit_batch(trials),
        fit_batch(trials.iloc[:300], lapse=True),
        fit_batch(inter, interleaved="coherence"),
    ]
    b = batches[0]
    rho = b.params["rho"].copy()  # the limit rho = inf where a Kalman variant was fitted
    rho[np.isfinite(rho)[:, 0, :].any(1).nonzero()[0][0], 0, :] = np.inf
    batches[0] = b = b._replace(params={**b.params, "rho": np.where(np.isnan(rho), np.nan, rho)})
    batches.append(  # no cells
        b._replace(
            cells=b.cells.iloc[:0],
            loglik=b.loglik[:0],
            aic=b.aic[:0],
            n=b.n[:0],
            params={p: v[:0] for p, v in b.params.items()},
            skipped=b.skipped[:0],
        )
    )
    for batch in batches:
        got, want = fits_table(batch), _fits_table_by_rows(batch)
        pd.testing.assert_frame_equal(got, want)
        got.to_csv(tmp_path / "a.csv", index=False)
        want.to_csv(tmp_path / "b.csv", index=False)
        assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert '"rho": null, "rho_limit": "inf"' in "".join(fits_table(batches[0])["params"])
    assert "skipped" in "".join(fits_table(batches[0])["params"])
    for params in (
        {"w": 0.1 + 0.2, "b": -0.0, "sigma": 1e-300, "g": 12345678.9},
        {"rho": float("-inf"), "w": 0.5},
        {"w": 1, "ok": True, "skipped": 'a reason with "quotes" and é'},
        {"naïve": 0.5, 'q"uote': 1.5},
        {},
    ):
        assert encode_params(params) == _encode_json(params)  # json.dumps
    for bad in ({"w": float("nan")}, {"skipped": "x", "w": float("nan")}):
        with pytest.raises(ValueError):
            encode_params(bad)
