"""Visual Scavenger Hunt (Tunnel Vision, Sec. 3.2 and appendix A.2): follow written labels.

A 400 x 400 white image holds a 5 x 5 grid of 80 px cells; each cell has a
unique (shape, colour) pair from 3 shapes (circle, square, triangle) x 11
colours (red orange yellow green blue purple magenta pink cyan gray lime),
half-size 0.35 cell (28 px), and a black label ``"<colour> <shape>"``
centred on the cell.  A chain of ``L + 1`` distinct cells is labelled so
that each names the next; every other cell (and the chain's last cell)
carries a random label from all 33 pairs, so about 8/33 = 24% of them point
to a pair that is not on the grid.  The answer is the colour of the chain's
last cell.

Variants: ``"L2"``, ``"L3"``, ``"L4"`` (chain length; the paper runs
125 / 200 / 125 trials) and ``"decomposed"`` (L = 3 asked as three
single-step queries, 75 trials in the paper's Table 1: two intermediate
steps answered ``{colour shape}`` and a final step answered ``{colour}``;
each step after the first starts from the model's own previous answer,
graded by :func:`step_answer`; the paper does not print these prompts,
:func:`step_prompt` is ours).

Labels are drawn with DejaVu Sans at 9 px, the largest size at which the
widest label ("magenta triangle", 78 px) fits in a cell; the authors' font
(Pillow's default at 0.15 cell = 12 px) is narrower than DejaVu.

:func:`grid_text` (``Trial.text``) renders the same grid as a text table
(row, column, shape, colour, label) so the question can be asked without
the image -- an extension of the paper, which only shows images.
"""

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
    """Pixel centre ``(x, y)`` of grid cell ``(row, col)`` (from 0, top left).

    Parameters
    ----------
    row, col : int
        The cell's row and column, 0..4.

    Returns
    -------
    tuple of float
        ``(x, y)`` in pixels.
    """
    return col * CELL + CELL / 2, row * CELL + CELL / 2


def shape_outline(
    shape: str, x: float, y: float, half: float = HALF_SIZE
) -> list[tuple[float, float]]:
    """Polygon of a grid shape centred at ``(x, y)`` (circle: 96 points; triangle apex up).

    Parameters
    ----------
    shape : str
        ``"circle"``, ``"square"`` or ``"triangle"``.
    x, y : float
        The centre in pixels.
    half : float, default HALF_SIZE
        Half-size in pixels: the circle's radius, half the square's side, the
        triangle's circumradius (0.35 cell = 28 px by default).

    Returns
    -------
    list of tuple of float
        The polygon's vertices ``(x, y)``.

    Raises
    ------
    ValueError
        If ``shape`` is none of the three.
    """
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
    """The label naming ``(colour, shape)``: ``"colour shape"``.

    Parameters
    ----------
    pair : tuple of str
        ``(colour, shape)``.

    Returns
    -------
    str
        ``"colour shape"``, e.g. ``"blue triangle"``.
    """
    return f"{pair[0]} {pair[1]}"


def render(cells: list[dict]) -> Image.Image:
    """Draw the grid: each cell dict has ``row``, ``col``, ``shape``, ``colour``, ``label``.

    Parameters
    ----------
    cells : list of dict
        The cells; shapes are filled in their colour first, then every label
        is written in black on top.

    Returns
    -------
    PIL.Image.Image
        The 400 x 400 RGB image.
    """
    img = Image.new("RGB", (SIZE, SIZE), "white")
    draw = ImageDraw.Draw(img)
    for c in cells:
        x, y = cell_centre(c["row"], c["col"])
        draw.polygon(shape_outline(c["shape"], x, y), fill=PALETTE[c["colour"]])
    for c in cells:
        draw_centred_text(draw, cell_centre(c["row"], c["col"]), c["label"], FONT_SIZE)
    return img


def grid_text(cells: list[dict]) -> str:
    """Text table of the grid (an extension of the paper: the image's content in words).

    Parameters
    ----------
    cells : list of dict
        The cells, each with ``row``, ``col``, ``shape``, ``colour``, ``label``.

    Returns
    -------
    str
        A sentence describing the grid, then a header line
        ``row | column | shape | colour | label`` and one line per cell in
        reading order (rows and columns counted from 1).
    """
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
    """The prompt's worked example for ``steps`` steps (the paper's wording for 4 steps).

    Parameters
    ----------
    steps : int
        Chain length, 1..4.

    Returns
    -------
    str
        The parenthesised example: ``steps + 1`` cells visited and the
        colour it ends on.
    """
    items = [f"{c} {s}" for c, s in _EXAMPLE[: steps + 1]]
    parts = [f"you might start at a {items[0]}", f"then go to a {items[1]}"]
    parts += [f"then a {it}" for it in items[2:]]
    return (
        f"(For instance, in a different example of {steps} steps, "
        + ", ".join(parts)
        + f". The answer would be {_EXAMPLE[steps][0]}.)"
    )


def chain_prompt(start: tuple[str, str], steps: int) -> str:
    """The test prompt (appendix A.2) for a chain starting at ``start`` = (colour, shape).

    Parameters
    ----------
    start : tuple of str
        The chain's first cell, ``(colour, shape)``.
    steps : int
        Number of labels to follow (the chain length L).

    Returns
    -------
    str
        The question, with :func:`example_sentence` and the request for the
        colour in curly braces.
    """
    return (
        f"Starting at the {start[0]} {start[1]}, follow the labels for {steps} steps. "
        + example_sentence(steps)
        + " After those steps, what color are you on? Answer with the color in curly braces,"
        " e.g. {red}."
    )


def step_prompt(start: tuple[str, str], final: bool) -> str:
    """One single-step query of the decomposed variant (our wording; the paper prints none).

    Intermediate steps ask for the cell reached (``{colour shape}``), the
    final step for its colour (``{colour}``), as the paper grades them.

    Parameters
    ----------
    start : tuple of str
        The cell to start from, ``(colour, shape)``.
    final : bool
        Whether this is the last step (ask for the colour).

    Returns
    -------
    str
        The query.
    """
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
    """The right answer to one single-step query from cell ``start`` (``"colour shape"``).

    The cell named by ``start``'s label: ``"colour shape"`` for an
    intermediate step, its colour for the final one; None when ``start`` is
    not on the grid or its label names a pair that is not (no right answer).

    Parameters
    ----------
    cells : list of dict
        The trial's cells (``meta["cells"]``).
    start : str
        The cell to start from, ``"colour shape"`` (the subject's previous
        answer, or the chain's start).
    final : bool
        Whether this is the last step.

    Returns
    -------
    str or None
        The right answer, or ``None`` when there is none.
    """
    where = {label_text((c["colour"], c["shape"])): c for c in cells}
    here = where.get(start)
    there = where.get(here["label"]) if here is not None else None
    if there is None:
        return None
    return there["colour"] if final else label_text((there["colour"], there["shape"]))


def worked_answer(chain: list[tuple[str, str]]) -> str:
    """The demo's worked answer: ``We start at the A, and then go to the B, ... {colour}``.

    Parameters
    ----------
    chain : list of tuple of str
        The chain's cells ``(colour, shape)``, start first, at least two.

    Returns
    -------
    str
        The worked answer, ending with the last cell's colour in braces.
    """
    parts = [f"We start at the {label_text(chain[0])}"]
    parts += [f"and then go to the {label_text(p)}" for p in chain[1:-1]]
    parts.append(f"and then end at the {label_text(chain[-1])}.")
    return ", ".join(parts) + f" {{{chain[-1][0]}}}"


def make_trial(
    variant: str, rng_or_seed: int | np.random.Generator, with_demos: bool = True
) -> Trial:
    """Generate one Visual Scavenger Hunt trial.

    Parameters
    ----------
    variant : str
        ``"L2"``, ``"L3"``, ``"L4"`` or ``"decomposed"`` (L = 3, three queries).
    rng_or_seed : int or numpy.random.Generator
        Seed, or a generator to draw one from.
    with_demos : bool
        Attach the one worked demonstration (a fixed grid of the same chain length).

    Returns
    -------
    Trial
        One image; ``answer`` the final colour; ``text`` the grid as a text
        table; ``meta``: ``L``, ``chain`` (labels of the L + 1 cells),
        ``chain_cells`` ((row, col) of each), ``colour``, ``start``,
        ``cells`` (every cell: row, col, shape, colour, label),
        ``colour_counts``, ``most_frequent`` (colours tied for most cells),
        ``n_offgrid_labels``; for ``decomposed`` also ``step_prompts`` (the
        gold-path prompts), ``step_answers`` and ``step_formats``.  The paper
        asks each step after the first from the model's own previous answer
        (Sec. 4.2): build those with :func:`step_prompt` and grade them with
        :func:`step_answer` (the runner does, :mod:`bayesobs.tunnel.tasks`).
    """
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
    """The trial's question asked about the text table instead of the image (extension).

    Parameters
    ----------
    trial : Trial
        A scavenger hunt trial.

    Returns
    -------
    str
        ``trial.text``, a blank line, then ``trial.prompt``.

    Raises
    ------
    ValueError
        If the trial has no text rendering.
    """
    if trial.text is None:
        raise ValueError("the trial has no text rendering")
    return trial.text + "\n\n" + trial.prompt


@lru_cache(maxsize=8)
def demos(steps: int) -> tuple[Demo]:
    """The single worked demonstration for chain length ``steps`` (fixed grid, seed ``DEMO_SEED``).

    Parameters
    ----------
    steps : int
        Chain length; the grid comes from seed ``DEMO_SEED + steps``, and
        ``steps = 1`` asks the final single-step query (:func:`step_prompt`).

    Returns
    -------
    tuple of Demo
        One demonstration, with its text rendering (cached per ``steps``).
    """
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
