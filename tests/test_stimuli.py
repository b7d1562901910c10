"""The shared stimulus pieces (bayesobs.stimuli): blur is a true Gaussian of its stated sigma."""

from __future__ import annotations

import itertools

import numpy as np
from PIL import Image, ImageDraw

from bayesobs.magnitude.subject import estimate_blur
from bayesobs.stimuli import blur, from_png, get_task
from bayesobs.stimuli.drawing import draw_centred_text, draw_left_text, render_text


def test_blur_is_a_true_gaussian_of_stated_sigma():
    img = np.zeros((81, 81, 3))
    img[40, 40] = 1.0
    for sigma in (1.0, 2.5, 4.0):
        out = blur(img, sigma)[..., 0]
        yy, xx = np.mgrid[0:81, 0:81]
        var_x = (out * (xx - 40) ** 2).sum() / out.sum()
        np.testing.assert_allclose(var_x, sigma**2, rtol=1e-3)
        ref = np.exp(-((xx - 40) ** 2 + (yy - 40) ** 2) / (2 * sigma**2))
        np.testing.assert_allclose(out / out.max(), ref / ref.max(), atol=2e-3)


def test_blur_grows_with_sigma():
    task = get_task("line_ratio")
    stim = task.generate(np.random.default_rng(3), 0.3, 0.7, 1, {})[0]
    sharp = [
        np.abs(np.diff(from_png(task.render_png(stim, s)).mean(2), axis=1)).max()
        for s in (0, 1, 2, 4, 8)
    ]
    assert all(a > b for a, b in itertools.pairwise(sharp))
    est = [estimate_blur(from_png(task.render_png(stim, s))) for s in (0, 2, 4, 8)]
    assert est == sorted(est) and est[0] == 0.0


def test_generators_draw_text_crisp_and_as_the_simulated_readers_render_it():
    """Text a generator draws is pure black ink, pixel for pixel the readers' template."""
    for draw_text, anchor, xy in (
        (draw_centred_text, "mm", (60, 20)),
        (draw_left_text, "lm", (0, 20)),
    ):
        img = Image.new("RGB", (120, 40), "white")
        draw_text(ImageDraw.Draw(img), xy, "C12", 18)
        grey = np.asarray(img.convert("L"))
        assert set(np.unique(grey)) == {0, 255}  # no antialiasing: ink is told from paper exactly
        np.testing.assert_array_equal(grey, render_text("C12", 18, (120, 40), anchor))
