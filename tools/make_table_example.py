"""Make the example table task: 40 images of a disc, their measured diameters, a CSV and a task file.

    python tools/make_table_example.py FOLDER

writes ``FOLDER/images/disc_NN.png`` (a grey disc on white, 256 x 256 px), ``FOLDER/discs.csv``
(``image``, ``magnitude``: the disc's diameter in pixels, measured from the drawn image as the
width of its row of most ink) and ``FOLDER/discs.toml`` (``task = "table"``, two overlapping
session ranges).  Nothing is downloaded; the same folder comes out every time.
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
    return folder / "discs.toml"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    print(make(ap.parse_args().folder))
