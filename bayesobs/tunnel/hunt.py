"""Visual Scavenger Hunt (Tunnel Vision, Sec. 3.2 and appendix A.2): follow written labels."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw

from ..stimuli.drawing import draw_centred_text, rgb, streams
from .common import Demo, Trial

SIZE = 400
GRID = 5
CELL = SIZE // GRID
HALF_SIZE = 0.35 * CELL
FONT_SIZE = 9
SHAPES = ("circle", "square", "triangle")
COLOURS = (
    "red",
    "orange",
    "yellow",
    "green",
    "blue",
    "purple",
    "magenta",
    "pink",
    "cyan",
    "gray",
    "lime",
)
PALETTE = {c: rgb(c) for c in COLOURS}
PAIRS = tuple((c, s) for s in SHAPES for c in COLOURS)  # (colour, shape)
VARIANTS = ("L2", "L3", "L4", "decomposed")
CHAIN_LENGTH = {"L2": 2, "L3": 3, "L4": 4, "decomposed": 3}
MAX_TOKENS = 100  # the authors' main.py asks with max_tokens=100
DEMO_SEED = 9201
_EXAMPLE = (
    ("blue", "triangle"),
    ("red", "square"),
    ("blue", "circle"),
    ("magenta", "triangle"),
    ("green", "circle"),
)


def cell_centre(row: int, col: int) -> tuple[float, float]:
    """Pixel centre ``(x, y)`` of grid cell ``(row, col)`` (from 0, top left)."""
    return col * CELL + CELL / 2, row * CELL + CELL / 2


def shape_outline(
    shape: str, x: float, y: float, half: float = HALF_SIZE
) -> list[tuple[float, float]]:
    """Polygon of a grid shape centred at ``(x, y)`` (circle: 96 points; triangle apex up)."""
    if shape == "circle":
        u = np.linspace(0, 2 * np.pi, 96, endpoint=False)
        return [(x + half * math.cos(a), y + half * math.sin(a)) for a in u]
    if shape == "square":
        return [
            (x - half, y - half),
            (x + half, y - half),
            (x + half, y + half),
            (x - half, y + half),
        ]
    if shape == "triangle":
        h = half * math.sqrt(3) / 2
        return [(x, y - half), (x - h, y + half / 2), (x + h, y + half / 2)]
    raise ValueError(f"unknown shape {shape!r}")


def label_text(pair: tuple[str, str]) -> str:
    """The label naming ``(colour, shape)``: ``"colour shape"``."""
    return f"{pair[0]} {pair[1]}"


def render(cells: list[dict]) -> Image.Image:
    """Draw the grid: each cell dict has ``row``, ``col``, ``shape``, ``colour``, ``label``."""
    img = Image.new("RGB", (SIZE, SIZE), "white")
    draw = ImageDraw.Draw(img)
    for c in cells:
        x, y = cell_centre(c["row"], c["col"])
        draw.polygon(shape_outline(c["shape"], x, y), fill=PALETTE[c["colour"]])
    for c in cells:
        draw_centred_text(draw, cell_centre(c["row"], c["col"]), c["label"], FONT_SIZE)
    return img


def grid_text(cells: list[dict]) -> str:
    """Text table of the grid (an extension of the paper: the image's content in words)."""
    lines = [
        f"The image is a grid of {GRID} rows and {GRID} columns. Each cell holds one coloured"
        " shape with a text label written on it.",
        "row | column | shape | colour | label",
    ]
    for c in sorted(cells, key=lambda d: (d["row"], d["col"])):
        lines.append(
            f"{c['row'] + 1} | {c['col'] + 1} | {c['shape']} | {c['colour']} | {c['label']}"
        )
    return "\n".join(lines)


def example_sentence(steps: int) -> str:
    """The prompt's worked example for ``steps`` steps (the paper's wording for 4 steps)."""
    items = [f"{c} {s}" for c, s in _EXAMPLE[: steps + 1]]
    parts = [f"you might start at a {items[0]}", f"then go to a {items[1]}"]
    parts += [f"then a {it}" for it in items[2:]]
    return (
        f"(For instance, in a different example of {steps} steps, "
        + ", ".join(parts)
        + f". The answer would be {_EXAMPLE[steps][0]}.)"
    )


def chain_prompt(start: tuple[str, str], steps: int) -> str:
    """The test prompt (appendix A.2) for a chain starting at ``start`` = (colour, shape)."""
    return (
        f"Starting at the {start[0]} {start[1]}, follow the labels for {steps} steps. "
        + example_sentence(steps)
        + " After those steps, what color are you on? Answer with the color in curly braces,"
        " e.g. {red}."
    )


def step_prompt(start: tuple[str, str], final: bool) -> str:
    """One single-step query of the decomposed variant (our wording; the paper prints none)."""
    head = f"Starting at the {start[0]} {start[1]}, follow the label for 1 step."
    if final:
        return (
            head
            + " After that step, what color are you on? Answer with the color in curly braces, e.g. {red}."
        )
    return (
        head + " What shape are you on now? Answer with its color and shape in curly braces,"
        " e.g. {red circle}."
    )


def step_answer(cells: list[dict], start: str, final: bool) -> str | None:
    """The right answer to one single-step query from cell ``start`` (``"colour shape"``)."""
    where = {label_text((c["colour"], c["shape"])): c for c in cells}
    here = where.get(start)
    there = where.get(here["label"]) if here is not None else None
    if there is None:
        return None
    return there["colour"] if final else label_text((there["colour"], there["shape"]))


def worked_answer(chain: list[tuple[str, str]]) -> str:
    """The demo's worked answer: ``We start at the A, and then go to the B, ... {colour}``."""
    parts = [f"We start at the {label_text(chain[0])}"]
    parts += [f"and then go to the {label_text(p)}" for p in chain[1:-1]]
    parts.append(f"and then end at the {label_text(chain[-1])}.")
    return ", ".join(parts) + f" {{{chain[-1][0]}}}"


def make_trial(
    variant: str, rng_or_seed: int | np.random.Generator, with_demos: bool = True
) -> Trial:
    """Generate one Visual Scavenger Hunt trial."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown scavenger_hunt variant {variant!r}; expected one of {VARIANTS}")
    steps = CHAIN_LENGTH[variant]
    r_grid, r_chain, r_labels = streams(rng_or_seed, 3)
    order = r_grid.permutation(len(PAIRS))[: GRID * GRID]
    pairs = [PAIRS[i] for i in order]
    positions = [(r, c) for r in range(GRID) for c in range(GRID)]
    chain_idx = [int(i) for i in r_chain.choice(GRID * GRID, size=steps + 1, replace=False)]
    chain = [pairs[i] for i in chain_idx]
    labels = {}
    for k in range(steps):
        labels[chain_idx[k]] = label_text(chain[k + 1])
    for i in range(GRID * GRID):
        if i not in labels:
            labels[i] = label_text(PAIRS[int(r_labels.integers(len(PAIRS)))])
    cells = [
        {"row": r, "col": c, "shape": p[1], "colour": p[0], "label": labels[i]}
        for i, ((r, c), p) in enumerate(zip(positions, pairs, strict=True))
    ]
    on_grid = {label_text(p) for p in pairs}
    counts = {col: sum(p[0] == col for p in pairs) for col in COLOURS}
    top = max(counts.values())
    meta = {
        "variant": variant,
        "L": steps,
        "chain": [label_text(p) for p in chain],
        "chain_cells": [positions[i] for i in chain_idx],
        "colour": chain[-1][0],
        "start": label_text(chain[0]),
        "cells": cells,
        "colour_counts": counts,
        "most_frequent": [c for c in COLOURS if counts[c] == top],
        "n_offgrid_labels": sum(c["label"] not in on_grid for c in cells),
    }
    if variant == "decomposed":
        meta["step_prompts"] = [step_prompt(chain[k], final=k == steps - 1) for k in range(steps)]
        meta["step_answers"] = [label_text(chain[k + 1]) for k in range(steps - 1)] + [chain[-1][0]]
        meta["step_formats"] = ["hunt_cell"] * (steps - 1) + ["hunt_colour"]
        prompt = meta["step_prompts"][0]
        demo_steps = 1
    else:
        prompt = chain_prompt(chain[0], steps)
        demo_steps = steps
    return Trial(
        task="scavenger_hunt",
        variant=variant,
        images=(render(cells),),
        prompt=prompt,
        demos=demos(demo_steps) if with_demos else (),
        answer=chain[-1][0],
        answer_format="hunt_cell" if variant == "decomposed" else "hunt_colour",
        max_tokens=MAX_TOKENS,
        meta=meta,
        text=grid_text(cells),
    )


def text_prompt(trial: Trial) -> str:
    """The trial's question asked about the text table instead of the image (extension)."""
    if trial.text is None:
        raise ValueError("the trial has no text rendering")
    return trial.text + "\n\n" + trial.prompt


@lru_cache(maxsize=8)
def demos(steps: int) -> tuple[Demo]:
    """The single worked demonstration for chain length ``steps`` (fixed grid, seed ``DEMO_SEED``)."""
    r_grid, r_chain, r_labels = streams(DEMO_SEED + steps, 3)
    order = r_grid.permutation(len(PAIRS))[: GRID * GRID]
    pairs = [PAIRS[i] for i in order]
    idx = [int(i) for i in r_chain.choice(GRID * GRID, size=steps + 1, replace=False)]
    chain = [pairs[i] for i in idx]
    labels = {idx[k]: label_text(chain[k + 1]) for k in range(steps)}
    cells = []
    for i, p in enumerate(pairs):
        lab = labels.get(i) or label_text(PAIRS[int(r_labels.integers(len(PAIRS)))])
        cells.append(
            {"row": i // GRID, "col": i % GRID, "shape": p[1], "colour": p[0], "label": lab}
        )
    prompt = chain_prompt(chain[0], steps) if steps > 1 else step_prompt(chain[0], final=True)
    return (Demo(prompt, (render(cells),), worked_answer(chain), text=grid_text(cells)),)
