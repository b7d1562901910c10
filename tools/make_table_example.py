"""Make the example table tasks: 40 images of a disc with their measured diameters, and 40 pairs.

    python tools/make_table_example.py FOLDER

writes ``FOLDER/images/disc_NN.png`` (a grey disc on white, 256 x 256 px), ``FOLDER/discs.csv``
(``image``, ``magnitude``: the disc's diameter in pixels, measured from the drawn image as the
width of its row of most ink) and ``FOLDER/discs.toml`` (``task = "table"``, two overlapping
session ranges); and a right/wrong table, ``FOLDER/images/pair_NN.png`` (two discs, one larger
by 48% at level 1 down to 6% at level 8), ``FOLDER/larger.csv`` (``image``, ``answer``,
``choices``, ``level``) and ``FOLDER/larger.toml`` (``task = "table_choice"``).  Nothing is
downloaded; the same folder comes out every time.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
from PIL import Image

SIZE = 256
N = 40

TASK = """\
# A table task: your own images and their true values (docs/table-tasks.md)
description = "Diameter of a disc, in pixels"
task = "table"
seed = 7
trials = 20
modalities = ["image"]
conditions = ["base"]

[table]
path = "discs.csv"
unit = "pixels"
instruction = "Estimate the diameter of the grey disc in pixels, as a whole number."
answer_range = [0, 300]

[[sessions]]
name = "small"
range = [20, 130]
[[sessions]]
name = "large"
range = [70, 180]
"""

CHOICE_TASK = """\
# A right/wrong table: which disc is larger, at 8 levels of difficulty (docs/table-tasks.md)
task = "table_choice"
seed = 7
trials = 40
modalities = ["image"]

[table]
path = "larger.csv"
question = "Which disc is larger?"
"""


def pair_image(level: int, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """Two discs side by side, one larger by ``54 - 6 * level`` percent; and which one."""
    small = rng.uniform(40, 70)
    big = small * (1 + (54 - 6 * level) / 100)
    side = "left" if rng.random() < 0.5 else "right"
    img = np.full((SIZE, 2 * SIZE, 3), 255, dtype=np.uint8)
    yy, xx = np.mgrid[0:SIZE, 0 : 2 * SIZE]
    for cx, d in (
        (SIZE / 2, big if side == "left" else small),
        (1.5 * SIZE, big if side == "right" else small),
    ):
        img[(xx + 0.5 - cx) ** 2 + (yy + 0.5 - SIZE / 2) ** 2 <= (d / 2) ** 2] = (90, 90, 90)
    return img, side


def disc_image(diameter: float, rng: np.random.Generator) -> np.ndarray:
    """A white image with a grey disc of ``diameter`` px at a random place."""
    r = diameter / 2
    cx, cy = rng.uniform(r + 4, SIZE - r - 4, 2)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    img = np.full((SIZE, SIZE, 3), 255, dtype=np.uint8)
    img[(xx + 0.5 - cx) ** 2 + (yy + 0.5 - cy) ** 2 <= r * r] = (90, 90, 90)
    return img


def measured(img: np.ndarray) -> int:
    """The disc's diameter as measured: the most ink pixels in one row."""
    return int((img[..., 0] < 200).sum(axis=1).max())


def make(folder: Path) -> Path:
    """Write the images, the CSV and the task file into ``folder``; returns the task file."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2026)
    rows = []
    for k, d in enumerate(np.linspace(20, 180, N)):
        img = disc_image(d, rng)
        name = f"images/disc_{k:02d}.png"
        Image.fromarray(img).save(folder / name)
        rows.append({"image": name, "magnitude": measured(img)})
    with open(folder / "discs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["image", "magnitude"])
        w.writeheader()
        w.writerows(rows)
    (folder / "discs.toml").write_text(TASK)
    pairs = []
    for k in range(N):
        level = 1 + k % 8
        img, side = pair_image(level, rng)
        name = f"images/pair_{k:02d}.png"
        Image.fromarray(img).save(folder / name)
        pairs.append({"image": name, "answer": side, "choices": "left|right", "level": level})
    with open(folder / "larger.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["image", "answer", "choices", "level"])
        w.writeheader()
        w.writerows(pairs)
    (folder / "larger.toml").write_text(CHOICE_TASK)
    return folder / "discs.toml"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    print(make(ap.parse_args().folder))
