"""The Percept-V domain generators: pure functions ``(size, rng, **options) -> Drawn``."""

from __future__ import annotations

import itertools
from math import comb, factorial, perm

import numpy as np

from .common import N_SIZES, PALETTE20, SHAPES3, SHAPES4, Drawn
from .objects import (
    GRID_N,
    change_colour,
    circle_location,
    circle_right_triangle,
    comparing_size,
    coords,
    count_coloured_circles,
    counting_circles,
    counting_locations,
    counting_shapes,
    inside_circles,
    locate_circles_colour,
    locate_circles_shape,
    match_outline,
    match_shadow,
    mirror_image,
    sort_lines,
    vanishing_objects,
    water_image,
)
from .scenes import (
    IDENTIFY,
    LAYER_KINDS,
    circle_boxes,
    colours_present,
    cross_and_knots,
    graph_counting,
    grid_path,
    identifying_shapes,
    layered_colours,
    layered_shapes,
    list_colours,
    list_shapes,
    maze_solving,
    numbered_shapes,
    sort_circles,
)

# ----------------------------------------------------------------------------- answer priors
# A guess draws an answer uniformly from a finite answer space.  Count domains use one space for
# every size; list/set domains first draw a length L uniform on 1..20, then an answer of length L.
# chance(size) is then exact: 1/|space| or P(L = size)/|answers of length size|.


def _no_double_circle_count(L: int) -> int:
    """Sequences of length L over the 4 layer kinds with no two circles in a row."""
    c, p = 1, 3
    for _ in range(L - 1):
        c, p = p, 3 * (c + p)
    return c + p


def _layer_guess(rng, L):
    while True:
        seq = [LAYER_KINDS[int(k)] for k in rng.integers(0, 4, L)]
        if not any(a == b == "circle" for a, b in itertools.pairwise(seq)):
            return " ".join(seq)


def _maze_guess(rng, **_):
    L = int(rng.integers(1, N_SIZES + 1))
    inner = [str(k) for k in range(1, L) if rng.random() < 0.5]
    return " ".join(["s", *inner, str(L)])


def _graph_guess(rng, **_):
    L = int(rng.integers(1, N_SIZES + 1))
    hi = min(comb(L, 2), L + 5)
    return f"{L} {int(rng.integers(L - 1, hi + 1)) if L > 1 else 0}"


def _graph_chance(size, **_):
    hi = min(comb(size, 2), size + 5)
    return 1.0 / N_SIZES / (hi - (size - 1) + 1 if size > 1 else 1)


def _count_space(lo: int, hi: int):
    def guess(rng, **_):
        return str(int(rng.integers(lo, hi + 1)))

    def chance(size, **_):
        return 1.0 / (hi - lo + 1)

    return guess, chance


def _yes_no():
    return (lambda rng, **_: ("yes", "no")[int(rng.integers(0, 2))]), (lambda size, **_: 0.5)


def _list_space(n_answers, draw):
    """Length-mixed space: ``n_answers(L)`` answers of length L, ``draw(rng, L)`` one of them."""

    def guess(rng, **_):
        L = int(rng.integers(1, N_SIZES + 1))
        return draw(rng, L)

    def chance(size, **_):
        return 1.0 / N_SIZES / n_answers(size)

    return guess, chance


def _quadrant_guess(rng, **_):
    return f"{int(rng.integers(1, 5))} {int(rng.integers(1, 21))}"


def _locations_guess(rng, equal_counts=False, **_):
    L = int(rng.integers(1, N_SIZES + 1))
    a = L if equal_counts else int(rng.integers(0, 2 * L + 1))
    return f"{a} {2 * L - a}"


def _locations_chance(size, equal_counts=False, **_):
    return 1.0 / N_SIZES if equal_counts else 1.0 / N_SIZES / (2 * size + 1)


def _composition(rng, L, parts=3):
    """A uniform composition of L into ``parts`` non-negative parts (stars and bars)."""
    bars = np.sort(rng.choice(L + parts - 1, parts - 1, replace=False))
    edges = np.concatenate([[-1], bars, [L + parts - 1]])
    return " ".join(str(int(v)) for v in np.diff(edges) - 1)


def _cells(rng, L):
    picked = rng.choice(36, L, replace=False)
    return coords((int(c) // 6, int(c) % 6) for c in picked)


def _knot_guess(rng, **_):
    c = int(rng.integers(36))
    return f"({c // 6},{c % 6})"


def _knot_chance(size, **_):
    """A uniform guess among the 36 cells is right with probability E[#safe cells] / 36."""
    total = 0.0
    for i in range(GRID_N):
        for j in range(GRID_N):
            block = 1 + sum(
                0 <= a < GRID_N and 0 <= b < GRID_N
                for a, b in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1))
            )
            total += comb(36 - block, size) / comb(36, size)
    return total / 36


def _yes_subset(rng, L):
    chosen = set(rng.choice(20, L, replace=False).tolist())
    return " ".join("yes" if k in chosen else "no" for k in range(20))


def _shape_set_guess(rng, **_):
    """A uniform non-empty subset of the four shape types (15 sets)."""
    mask = int(rng.integers(1, 16))
    return " ".join(sorted(k for b, k in enumerate(SHAPES4) if mask >> b & 1))


def _numbered_guess(rng, **_):
    """Length L ~ U{1..20}, then L distinct labels from 1..2L, sorted as strings."""
    L = int(rng.integers(1, N_SIZES + 1))
    return " ".join(sorted(str(int(v) + 1) for v in rng.choice(2 * L, L, replace=False)))


def _numbered_chance(size, **_):
    return 1.0 / N_SIZES / comb(2 * size, size)


PRIORS = {
    "counting_circles": _count_space(1, 20),
    "count_coloured_circles": _count_space(1, 20),
    "change_colour": _count_space(1, 20),
    "vanishing_objects": _count_space(1, 20),
    "mirror_image": _count_space(1, 20),
    "water_image": _count_space(1, 20),
    "match_outline": _count_space(0, 20),
    "match_shadow": _count_space(0, 20),
    "inside_circles": _yes_no(),
    "circle_right_triangle": _yes_no(),
    "circle_location": (_quadrant_guess, lambda size, **_: 1.0 / 80),
    "counting_locations": (_locations_guess, _locations_chance),
    "counting_shapes": _list_space(lambda L: comb(L + 2, 2), _composition),
    "comparing_size": _list_space(
        lambda L: 2**L,
        lambda rng, L: " ".join(("blue", "green")[int(k)] for k in rng.integers(0, 2, L)),
    ),
    "sort_lines": _list_space(
        factorial, lambda rng, L: " ".join(str(int(v) + 1) for v in rng.permutation(L))
    ),
    "locate_circles_colour": _list_space(lambda L: comb(36, L), _cells),
    "circle_boxes": _count_space(0, 20),
    "identifying_shapes": _list_space(
        lambda L: 5**L,
        lambda rng, L: " ".join(list(IDENTIFY)[int(k)] for k in rng.integers(0, 5, L)),
    ),
    "cross_and_knots": (_knot_guess, _knot_chance),
    "layered_colours": _list_space(
        lambda L: perm(20, L),
        lambda rng, L: " ".join(list(PALETTE20)[int(k)] for k in rng.choice(20, L, replace=False)),
    ),
    "colours_present": _list_space(lambda L: comb(20, L), _yes_subset),
    "list_colours": _list_space(
        lambda L: comb(20, L),
        lambda rng, L: " ".join(
            sorted(list(PALETTE20)[int(k)] for k in rng.choice(20, L, replace=False))
        ),
    ),
    "graph_counting": (_graph_guess, _graph_chance),
    "grid_path": _list_space(
        lambda L: 3**L, lambda rng, L: " ".join(SHAPES3[int(k)] for k in rng.integers(0, 3, L))
    ),
    "maze_solving": (_maze_guess, lambda size, **_: 1.0 / N_SIZES / 2 ** (size - 1)),
    "layered_shapes": _list_space(_no_double_circle_count, _layer_guess),
    "list_shapes": (_shape_set_guess, lambda size, **_: 1.0 / 15),
    "numbered_shapes": (_numbered_guess, _numbered_chance),
    "sort_circles": _list_space(
        factorial, lambda rng, L: " ".join(str(int(v) + 1) for v in rng.permutation(L))
    ),
    "locate_circles_shape": _list_space(lambda L: comb(36, L), _cells),
}

GENERATORS = {
    "grid_path": grid_path,
    "maze_solving": maze_solving,
    "layered_shapes": layered_shapes,
    "graph_counting": graph_counting,
    "list_colours": list_colours,
    "layered_colours": layered_colours,
    "colours_present": colours_present,
    "list_shapes": list_shapes,
    "numbered_shapes": numbered_shapes,
    "circle_boxes": circle_boxes,
    "identifying_shapes": identifying_shapes,
    "cross_and_knots": cross_and_knots,
    "sort_circles": sort_circles,
    "change_colour": change_colour,
    "circle_location": circle_location,
    "circle_right_triangle": circle_right_triangle,
    "comparing_size": comparing_size,
    "count_coloured_circles": count_coloured_circles,
    "counting_circles": counting_circles,
    "counting_locations": counting_locations,
    "counting_shapes": counting_shapes,
    "inside_circles": inside_circles,
    "locate_circles_colour": locate_circles_colour,
    "locate_circles_shape": locate_circles_shape,
    "match_outline": match_outline,
    "match_shadow": match_shadow,
    "mirror_image": mirror_image,
    "sort_lines": sort_lines,
    "vanishing_objects": vanishing_objects,
    "water_image": water_image,
}

__all__ = ["GENERATORS", "PRIORS", "Drawn"]
