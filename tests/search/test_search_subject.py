"""The simulated searcher's reading of an image: what a feature means where it is undefined."""

from __future__ import annotations

import numpy as np

from bayesobs.search.subject import segment_items


def _discs(shade: float) -> np.ndarray:
    """Two grey discs on white; the second lit from the left by ``shade`` grey levels."""
    h, w = 64, 128
    yy, xx = np.mgrid[:h, :w]
    img = np.full((h, w, 3), 255.0)
    for cx in (32, 96):
        # a disc and a notch: the centroid is not a whole pixel (its sums round)
        disc = ((xx - cx) ** 2 + (yy - 32) ** 2 <= 14**2) & ~((xx > cx + 5) & (yy < 29))
        level = 100.0 - (shade * (xx - cx) / 14 if cx == 96 else 0.0)
        img[disc] = np.stack([level] * 3, axis=-1)[disc] if np.ndim(level) else level
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def test_an_evenly_lit_item_has_no_light_direction_and_a_shaded_one_has_its_side():
    items = segment_items(_discs(40.0))
    order = np.argsort(items["x"])
    light = items["light"][order]
    # evenly lit: the luminance-weighted offset is rounding noise, so no direction
    np.testing.assert_array_equal(light[0], [0.0, 0.0])
    # shaded: brighter on the left, so the lit side points left (unit length)
    assert light[1][0] < -0.99 and abs(np.hypot(*light[1]) - 1) < 1e-9
