"""Percept-V generators and parsers: gold answers recomputed from the drawn pixels by the tests.

Counts come from connected components (``scipy.ndimage.label``), colours from
sampling, positions from centroids and shape kinds from the filled area over
the bounding box; the tests know the layouts only as the docs state them
(canvas sizes, grid geometry), never from the generators' metadata except
where noted (inside_circles' ring geometry, verified against the pixels).
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import pytest
from PIL import ImageColor
from scipy import ndimage

from bayesobs import perceptv as pv
from bayesobs.perceptv import parse as P
from bayesobs.perceptv.common import FORMAT_LINES
from bayesobs.perceptv.prompts import BULLETS

EIGHT = np.ones((3, 3), bool)
SIZES = (1, 2, 7, 13, 20)
SEEDS = range(3)


@cache
def trial(domain, size, seed, **opts):
    return pv.make_trial(domain, size, 7_000 + seed, **opts)


def cases(domain):
    return [trial(domain, s, k) for s in SIZES for k in SEEDS]


def arr(img):
    return np.asarray(img.convert("RGB")).astype(int)


def colour(a, name):
    c = ImageColor.getrgb(name)
    return np.all(a == c, axis=-1)


def ink(a):
    return np.any(a != 255, axis=-1)


def components(mask, min_px=15):
    lab, _n = ndimage.label(mask, structure=EIGHT)
    out = []
    for k, sl in enumerate(ndimage.find_objects(lab)):
        m = lab[sl] == k + 1
        if m.sum() < min_px:
            continue
        cy, cx = ndimage.center_of_mass(m)
        out.append((cx + sl[1].start, cy + sl[0].start, m, sl))
    return out


def kind(m):
    f = ndimage.binary_fill_holes(m)
    ratio = f.sum() / f.size
    return (
        "triangle"
        if ratio < 0.6
        else "pentagon"
        if ratio < 0.74
        else "circle"
        if ratio < 0.9
        else "square"
    )


# ----------------------------------------------------------------------------- registry & prompts


def test_registry_covers_first_14_and_all_types_and_skills():
    assert set(pv.FIRST_14) <= set(pv.DOMAINS)
    assert {d.answer_type for d in pv.DOMAINS.values()} == {"single", "fixed", "list", "set"}
    skills = {s for d in pv.DOMAINS.values() for s in d.skills}
    assert skills == set(pv.published.SKILLS)
    assert len(pv.ALL_DOMAINS) == 30
    # Table 2: 11 single, 6 fixed, 8 list, 5 set over all 30 domains
    types = [pv._FORMATS[d][0] for d in pv.ALL_DOMAINS]
    assert [types.count(t) for t in ("single", "fixed", "list", "set")] == [11, 6, 8, 5]


@pytest.mark.parametrize("domain", sorted(pv.DOMAINS))
def test_prompt_is_the_papers(domain):
    t = trial(domain, 3, 0)
    lines = t.prompt.splitlines()
    assert lines[-2:] == list(FORMAT_LINES)
    assert lines[:-2] == ["- " + b for b in BULLETS[domain]]
    assert len(t.images) == (2 if domain in pv.TWO_IMAGE else 1)
    if len(t.images) == 2:
        assert t.images[0].size == t.images[1].size
    assert t.answer_type == pv.DOMAINS[domain].answer_type
    assert t.skills and t.max_tokens > 0


@pytest.mark.parametrize("domain", sorted(pv.DOMAINS))
def test_seeded_and_deterministic(domain):
    a, b = pv.make_trial(domain, 9, 123), pv.make_trial(domain, 9, 123)
    assert a.answer == b.answer and a.meta == b.meta
    assert all(x.tobytes() == y.tobytes() for x, y in zip(a.images, b.images, strict=True))
    c = pv.make_trial(domain, 9, 124)
    assert c.images[0].tobytes() != a.images[0].tobytes()
    # only white, black and the drawing colours: no antialiasing blends
    colours = np.unique(packed(arr(a.images[0])))
    if domain == "layered_shapes":
        assert len(colours) <= 10  # white and the 9 layer colours
    elif domain in ("colours_present", "layered_colours"):
        assert len(colours) <= 22  # white, black and the 20 palette colours of the legend
    elif domain not in ("list_shapes", "list_colours"):  # (a smooth colour field background)
        assert len(colours) <= 12


def test_protocol_is_stratified_and_seeded():
    items = list(pv.protocol(["counting_circles", "sort_lines"], per_size=3, seed=5))
    assert len(items) == 2 * 20 * 3
    sizes = [s for d, s, _ in items if d == "sort_lines"]
    assert all(sizes.count(s) == 3 for s in range(1, 21))
    again = list(pv.protocol(["counting_circles", "sort_lines"], per_size=3, seed=5))
    t1 = pv.make_trial(*items[7][:2], items[7][2])
    t2 = pv.make_trial(*again[7][:2], again[7][2])
    assert t1.images[0].tobytes() == t2.images[0].tobytes()
    assert len(list(pv.protocol(per_size=10))) == 200 * len(pv.DOMAINS)


def test_bad_arguments():
    with pytest.raises(ValueError):
        pv.make_trial("nope", 3, 0)
    with pytest.raises(ValueError):
        pv.make_trial("counting_circles", 21, 0)


# ----------------------------------------------------------------------------- generators vs pixels


def test_counting_circles():
    for t in cases("counting_circles"):
        assert t.images[0].size == (500, 300)
        assert len(components(ink(arr(t.images[0])))) == int(t.answer) == t.size


def test_count_coloured_circles():
    for t in cases("count_coloured_circles"):
        a = arr(t.images[0])
        assert len(components(colour(a, "red"))) == int(t.answer) == t.size
        assert len(components(ink(a))) == 2 * t.size


def test_counting_shapes():
    for t in cases("counting_shapes"):
        kinds = [kind(m) for *_, m, _ in components(ink(arr(t.images[0])))]
        assert len(kinds) == t.size
        assert t.answer == " ".join(str(kinds.count(k)) for k in ("circle", "triangle", "square"))


def _above_below(t):
    a = arr(t.images[0])
    rows = np.nonzero(colour(a, "brown").any(axis=1))[0]
    cs = components(colour(a, "black"), 10)
    return sum(y < rows.min() for _, y, *_ in cs), sum(y > rows.max() for _, y, *_ in cs)


def test_counting_locations_default_and_authors_option():
    unequal = 0
    for t in cases("counting_locations"):
        up, down = _above_below(t)
        assert t.answer == f"{up} {down}" and up + down == 2 * t.size
        unequal += up != down
    assert (
        unequal >= len(cases("counting_locations")) // 2
    )  # the authors' ABOVE == BELOW flaw is gone
    for s in (1, 8, 20):
        t = pv.make_trial("counting_locations", s, 11, equal_counts=True)
        assert _above_below(t) == (s, s) and t.answer == f"{s} {s}"


def test_circle_location():
    for t in cases("circle_location"):
        a = arr(t.images[0])
        h, w = a.shape[:2]
        counts = [0, 0, 0, 0]
        for x, y, *_ in components(colour(a, "black")):
            q = (1 if y < h / 2 else 4) if x > w / 2 else (2 if y < h / 2 else 3)
            counts[q - 1] += 1
        assert sum(counts) == t.size
        best = max(range(4), key=lambda k: (counts[k], -k))
        assert t.answer == f"{best + 1} {counts[best]}"


def test_inside_circles():
    answers = set()
    for t in cases("inside_circles"):
        a = arr(t.images[0])
        red = components(colour(a, "red"))
        assert len(red) == 1
        dx, dy = red[0][0], red[0][1]
        assert np.hypot(dx - t.meta["dot"][0], dy - t.meta["dot"][1]) < 1.5
        black = colour(a, "black")
        inside = False
        for cx, cy, r in t.meta["circles"]:  # the ring geometry, checked against the pixels
            th = np.linspace(0, 2 * np.pi, 90, endpoint=False)
            xs = np.clip(np.round(cx + (r - 1) * np.cos(th)).astype(int), 0, a.shape[1] - 1)
            ys = np.clip(np.round(cy + (r - 1) * np.sin(th)).astype(int), 0, a.shape[0] - 1)
            on = black[ys, xs] | colour(a, "red")[ys, xs]
            assert on.mean() > 0.9
            inside |= np.hypot(dx - cx, dy - cy) < r
        assert t.answer == ("yes" if inside else "no")
        answers.add(t.answer)
        if t.size == 1:  # one ring: inside iff the dot's white region is enclosed
            free, _ = ndimage.label(~black)
            face = free == free[int(dy), int(dx) + 0]
            enclosed = not (
                face[0].any() or face[-1].any() or face[:, 0].any() or face[:, -1].any()
            )
            assert enclosed == (t.answer == "yes")
    assert answers == {"yes", "no"}


def _grid_cell(x, y, m, c):
    return int((y - m) // c), int((x - m) // c)


def test_circle_right_triangle():
    answers = set()
    for t in cases("circle_right_triangle"):
        a = arr(t.images[0])
        circ = {_grid_cell(x, y, 10, 130) for x, y, *_ in components(colour(a, "blue"))}
        tri = {_grid_cell(x, y, 10, 130) for x, y, *_ in components(colour(a, "red"))}
        assert len(circ) == t.size and len(tri) == min(t.size, 36 - t.size)
        yes = any((i, j + 1) in circ for i, j in tri)
        assert t.answer == ("yes" if yes else "no")
        answers.add(t.answer)
    assert answers == {"yes", "no"}


def test_comparing_size():
    for t in cases("comparing_size"):
        a = arr(t.images[0])
        assert a.shape[0] == 120 * t.size
        out = []
        for i in range(t.size):
            band = a[120 * i : 120 * (i + 1)]
            assert (
                len(components(colour(band, "blue"))) == 1 == len(components(colour(band, "green")))
            )
            out.append(
                "blue" if colour(band, "blue").sum() > colour(band, "green").sum() else "green"
            )
        assert t.answer == " ".join(out)


def test_sort_lines():
    for t in cases("sort_lines"):
        a = arr(t.images[0])
        black = colour(a, "black")
        lines = [(x, m.shape[0], sl) for x, _, m, sl in components(black) if m.shape[0] > 200]
        assert len(lines) == t.size
        lines.sort()
        for _, _length, sl in lines:
            assert sl[0].stop == 991  # base at y 990
            assert black[sl[0].start - 30 : sl[0].start - 4, sl[1]].any()  # a label above
        lengths = [ln for _, ln, _ in lines]
        assert min(np.diff(sorted(lengths)), default=20) >= 20
        order = np.argsort(lengths, kind="stable") + 1  # labels are 1..n left to right
        assert t.answer == " ".join(map(str, order))


def test_change_colour():
    for t in cases("change_colour"):
        a1, a2 = arr(t.images[0]), arr(t.images[1])
        assert (ink(a1) == ink(a2)).all()
        cs = components(ink(a1))
        assert len(cs) == 2 * t.size
        changed = sum(int((a1[int(y), int(x)] != a2[int(y), int(x)]).any()) for x, y, *_ in cs)
        assert changed == int(t.answer) == t.size


def test_vanishing_objects():
    for t in cases("vanishing_objects"):
        n1 = len(components(ink(arr(t.images[0]))))
        n2 = len(components(ink(arr(t.images[1]))))
        assert n1 == 2 * t.size and n1 - n2 == int(t.answer) == t.size


@pytest.mark.parametrize("domain", ["mirror_image", "water_image"])
def test_mirror_and_water(domain):
    for t in cases(domain):
        a1, a2 = arr(t.images[0]), arr(t.images[1])
        h, w = a1.shape[:2]
        vertical = domain == "mirror_image"
        shapes1 = components(ink(a1) & ~colour(a1, "blue"), 10)
        shapes2 = components(ink(a2) & ~colour(a2, "blue"), 10)
        assert len(shapes1) == len(shapes2) == 2 * t.size
        assert all((x < w / 2) if vertical else (y < h / 2) for x, y, *_ in shapes1)
        moved = [(x, y) for x, y, *_ in shapes2 if ((x > w / 2) if vertical else (y > h / 2))]
        assert len(moved) == int(t.answer) == t.size
        for x, y in moved:  # each is the reflection of a first-image shape, same colour
            rx, ry = (w - 1 - x, y) if vertical else (x, h - 1 - y)
            assert min(np.hypot(rx - a, ry - b) for a, b, *_ in shapes1) < 2.5
            c2 = a2[round(y), round(x)]
            c1 = a1[round(ry), round(rx)]
            assert (c1 == c2).all()


@pytest.mark.parametrize("domain", ["match_outline", "match_shadow"])
def test_match(domain):
    for t in cases(domain):
        k = []
        for img in t.images:
            a = arr(img)
            assert a.shape[0] == 100 * t.size
            rows = []
            for i in range(t.size):
                band = a[100 * i + 4 : 100 * (i + 1) - 4]
                cs = components(ink(band))
                assert len(cs) == 1
                rows.append(kind(cs[0][2]))
            k.append(rows)
        assert int(t.answer) == sum(a == b for a, b in zip(*k, strict=True))
        if domain == "match_shadow":
            assert colour(arr(t.images[1]), "gray").any() and colour(arr(t.images[0]), "red").any()


@pytest.mark.parametrize("domain", ["locate_circles_colour", "locate_circles_shape"])
def test_locate_circles(domain):
    for t in cases(domain):
        a = arr(t.images[0])
        objs = components(ink(a) & ~colour(a, "black"))
        assert len(objs) == t.size + min(t.size, 36 - t.size)
        if domain == "locate_circles_colour":
            hits = [
                (x, y) for x, y, m, sl in objs if (a[sl][m] == ImageColor.getrgb("green")).all()
            ]
        else:
            assert all((a[sl][m] == ImageColor.getrgb("green")).all() for *_, m, sl in objs)
            hits = [(x, y) for x, y, m, _ in objs if kind(m) == "circle"]
        cells = sorted(_grid_cell(x, y, 40, 100) for x, y in hits)
        assert t.answer == " ".join(f"({i},{j})" for i, j in cells)
        assert len(cells) == t.size


def test_circle_boxes():
    for t in cases("circle_boxes"):
        a = arr(t.images[0])
        line_x = np.nonzero(colour(a, "blue").any(axis=0))[0].mean()
        reds = components(colour(a, "red"))
        left = sum(x < line_x for x, *_ in reds)
        assert len(reds) == 2 * t.size
        assert int(t.answer) == abs(left - (len(reds) - left)) // 2


def test_identifying_shapes():
    named = {
        "blue": "circle",
        "red": "triangle",
        "green": "diamond",
        "cyan": "pentagon",
        "magenta": "hexagon",
    }
    for t in cases("identifying_shapes"):
        a = arr(t.images[0])
        rows = []
        for i in range(t.size):
            band = a[100 * i : 100 * (i + 1) - 6]
            found = [(n, components(colour(band, c))) for c, n in named.items()]
            found = [(n, cs) for n, cs in found if cs]
            assert len(found) == 1 and len(found[0][1]) == 1
            name, ((*_, m, _),) = found[0]
            if name in ("circle", "triangle"):
                assert kind(m) == name
            rows.append(name)
        assert t.answer == " ".join(rows)


def test_cross_and_knots():
    nones = 0
    for t in cases("cross_and_knots"):
        black = colour(arr(t.images[0]), "black")
        crosses = set()
        for i in range(6):
            for j in range(6):
                cell = black[
                    10 + 100 * i + 5 : 10 + 100 * (i + 1) - 4,
                    10 + 100 * j + 5 : 10 + 100 * (j + 1) - 4,
                ]
                assert cell.sum() > 20  # an X or a label
                if cell.sum() > 500:
                    crosses.add((i, j))
        assert len(crosses) == t.size
        safe = {
            f"({i},{j})"
            for i in range(6)
            for j in range(6)
            if not {(i, j), (i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)} & crosses
        }
        assert t.accept == (frozenset(safe) or {"none"})
        assert t.answer in t.accept
        nones += t.answer == "none"
    assert nones < len(cases("cross_and_knots"))
    # at size 20 about a third of the grids have no safe cell (simulated: 35% of 4,000)
    n20 = [pv.make_trial("cross_and_knots", 20, k).answer == "none" for k in range(30)]
    assert 3 <= sum(n20) <= 20


def test_sort_circles():
    for t in cases("sort_circles"):
        a = arr(t.images[0])
        black = colour(a, "black")
        circles = components(black, 100)
        assert len(circles) == t.size
        measured = []
        for x, y, m, _ in circles:
            filled = ndimage.binary_fill_holes(m)
            assert (filled & ~m).sum() > 5  # a white label inside
            (label,) = [c[3] for c in t.meta["circles"] if np.hypot(c[0] - x, c[1] - y) < 1.5]
            measured.append((filled.sum(), label))
        areas = sorted(a for a, _ in measured)
        assert all(b > a for a, b in itertools.pairwise(areas))
        assert t.answer == " ".join(str(lab) for _, lab in sorted(measured))


PALETTE = [
    "black",
    "gray",
    "brown",
    "maroon",
    "red",
    "coral",
    "tan",
    "orange",
    "ivory",
    "goldenrod",
    "yellow",
    "green",
    "olive",
    "turquoise",
    "skyblue",
    "blue",
    "lavender",
    "purple",
    "pink",
    "fuchsia",
]


def below_line(a):
    full = np.nonzero(colour(a, "black").sum(axis=1) > 0.95 * a.shape[1])[0]
    assert len(full)  # the legend's separator line
    return a[full.max() + 1 :]


def test_layered_colours():
    for t in cases("layered_colours"):
        a = below_line(arr(t.images[0]))
        assert a.shape[:2] == (802, 800)  # the line ends at y 127; the circles fill the last 800
        a = a[2:]
        # sample the colour at the middle of each ring along the ray to the right of the centre
        radii = np.linspace(0.9, 0.05, t.size) * 400 if t.size > 1 else np.array([360.0])
        edges = [0.0, *sorted(radii)]
        seq = []
        for r0, r1 in itertools.pairwise(edges):
            px = a[400, 400 + int((r0 + r1) / 2)]
            (name,) = [n for n in PALETTE if tuple(px) == ImageColor.getrgb(n)]
            seq.append(name)
        assert len(set(seq)) == t.size
        assert t.answer == " ".join(seq)


@pytest.mark.slow
def test_colours_present():
    for t in cases("colours_present"):
        a = below_line(arr(t.images[0]))
        values, counts = np.unique(packed(a), return_counts=True)
        pixels = dict(zip(values.tolist(), counts.tolist(), strict=True))
        present = []
        for name in PALETTE:
            on = pixels.get(int(packed(np.array(ImageColor.getrgb(name)))), 0) > 200
            if on:
                assert len(components(colour(a, name), 200)) == 1
            present.append("yes" if on else "no")
        assert present.count("yes") == t.size
        assert t.answer == " ".join(present)


@pytest.mark.slow
def test_list_shapes_and_authors_white_background():
    for t in [trial("list_shapes", s, k) for s in (1, 9, 20) for k in SEEDS]:
        a = arr(t.images[0])
        kinds = []
        for c in ("red", "green", "blue"):
            kinds += [kind(m) for *_, m, _ in components(colour(a, c), 200)]
        assert len(kinds) == t.size
        assert t.answer == " ".join(sorted(set(kinds)))
        assert len(np.unique(packed(a[::4, ::4]))) > 1000  # a textured background
    plain = pv.make_trial("list_shapes", 5, 1, photo=False)
    assert len(np.unique(packed(arr(plain.images[0])))) <= 4


def packed(a):
    return (a[..., 0] << 16) | (a[..., 1] << 8) | a[..., 2]


@pytest.mark.slow
def test_list_colours():
    for t in [trial("list_colours", s, k) for s in (1, 9, 20) for k in SEEDS]:
        a = below_line(arr(t.images[0]))
        values, counts = np.unique(packed(a[::2, ::2]), return_counts=True)
        pixels = dict(zip(values.tolist(), counts.tolist(), strict=True))
        seen = [
            n for n in PALETTE if pixels.get(int(packed(np.array(ImageColor.getrgb(n)))), 0) > 300
        ]
        assert len(seen) == t.size
        for n in seen:
            assert len(components(colour(a, n), 500)) == 1
        assert t.answer == " ".join(sorted(seen))
    plain = pv.make_trial("list_colours", 4, 2, photo=False)
    assert plain.answer == pv.make_trial("list_colours", 4, 2).answer


def test_graph_counting():
    for t in cases("graph_counting"):
        a = arr(t.images[0])
        nodes = [(x, y) for x, y, *_ in components(colour(a, "blue"), 100)]
        assert len(nodes) == t.size
        ink_px = ink(a)
        edges = 0
        for i in range(len(nodes)):
            for j in range(i + 1, len(nodes)):
                (x0, y0), (x1, y1) = nodes[i], nodes[j]
                dist = np.hypot(x1 - x0, y1 - y0)
                ts = np.linspace(20 / dist, 1 - 20 / dist, 80)
                xs = np.round(x0 + ts * (x1 - x0)).astype(int)
                ys = np.round(y0 + ts * (y1 - y0)).astype(int)
                edges += ink_px[ys, xs].mean() > 0.9
        lo, hi = t.size - 1, min(t.size * (t.size - 1) // 2, t.size + 5)
        assert lo <= edges <= max(hi, 0)
        assert t.answer == f"{t.size} {edges}"
        # every drawn black pixel lies on a counted edge: no stray lines
        assert colour(a, "black").any() == (edges > 0)


def _area(kind_, r):
    return (
        {"circle": np.pi, "diamond": 2.0, "hexagon": 1.5 * np.sqrt(3), "octagon": 2 * np.sqrt(2)}[
            kind_
        ]
        * r
        * r
    )


def _perimeter(kind_, r):
    n = {"circle": None, "diamond": 4, "hexagon": 6, "octagon": 8}[kind_]
    return 2 * np.pi * r if n is None else 2 * n * r * np.sin(np.pi / n)


def test_layered_shapes():
    for t in cases("layered_shapes"):
        a = arr(t.images[0])
        p = packed(a)
        kinds, radii = t.meta["outside_in"], t.meta["radii"]
        assert radii[0] == 800 and radii[-1] >= 24
        for k, (kd, r, c) in enumerate(zip(kinds, radii, t.meta["colours"], strict=True)):
            assert not (k and kd == kinds[k - 1] == "circle")
            n_px = int(np.count_nonzero(p == int(packed(np.array(c)))))
            inner = _area(kinds[k + 1], radii[k + 1]) if k + 1 < len(kinds) else 0.0
            want = _area(kd, r) - inner
            slack = 1.5 * (
                _perimeter(kd, r) + (_perimeter(kinds[k + 1], radii[k + 1]) if inner else 0)
            )
            assert abs(n_px - want) <= slack, (kd, n_px, want)
            # inscribed: the next shape's circumradius is this shape's inradius
            if k + 1 < len(kinds):
                n = {"circle": 0, "diamond": 4, "hexagon": 6, "octagon": 8}[kd]
                assert radii[k + 1] == pytest.approx(
                    r * (np.cos(np.pi / n) if n else 1.0), abs=0.01
                )
        # nothing else is drawn
        assert len(np.unique(p[::3, ::3])) <= t.size + 1
        assert t.answer == " ".join(reversed(kinds))


def test_grid_path():
    for t in cases("grid_path"):
        a = arr(t.images[0])
        black = colour(a, "black")
        m, c = 10, 130
        links = {}
        for i in range(6):
            for j in range(6):
                for di, dj in ((0, 1), (1, 0)):
                    i2, j2 = i + di, j + dj
                    if i2 > 5 or j2 > 5:
                        continue
                    if dj:  # border at x = m + (j + 1) c, the row's centre line
                        x, y = m + (j + 1) * c, m + int((i + 0.5) * c)
                        on = black[y, x - 15] and black[y, x + 15]
                    else:
                        x, y = m + int((j + 0.5) * c), m + (i + 1) * c
                        on = black[y - 15, x] and black[y + 15, x]
                    if on:
                        links.setdefault((i, j), set()).add((i2, j2))
                        links.setdefault((i2, j2), set()).add((i, j))
        corner_s = [
            (i, j)
            for i in range(6)
            for j in range(6)
            if black[m + i * c + 6 : m + i * c + 26, m + j * c + 6 : m + j * c + 26].any()
        ]
        corner_e = [
            (i, j)
            for i in range(6)
            for j in range(6)
            if black[
                m + (i + 1) * c - 26 : m + (i + 1) * c - 6,
                m + (j + 1) * c - 26 : m + (j + 1) * c - 6,
            ].any()
        ]
        assert len(corner_s) == 1 and len(corner_e) == 1
        path, prev = [corner_s[0]], None
        while True:
            nxt = [q for q in links.get(path[-1], ()) if q != prev]
            assert len(nxt) <= 1  # a simple path
            if not nxt:
                break
            prev = path[-1]
            path.append(nxt[0])
        assert len(path) == t.size and path[-1] == corner_e[0]
        kinds = []
        for i, j in path:
            y, x = m + int((i + 0.5) * c), m + int((j + 0.5) * c)
            sub = (
                ink(a[y - 30 : y + 31, x - 30 : x + 31]) & ~black[y - 30 : y + 31, x - 30 : x + 31]
            )
            (*_, shape_mask, _), *_rest = sorted(components(sub), key=lambda q: -q[2].sum())
            kinds.append(kind(shape_mask))
        assert t.answer == " ".join(kinds)


def test_maze_solving():
    from collections import deque

    for t in cases("maze_solving"):
        black = colour(arr(t.images[0]), "black")
        assert black.shape == (440, 440)
        cells = black.reshape(11, 40, 11, 40).mean(axis=(1, 3))
        open_ = cells < 0.8
        num = np.array(t.meta["numbers"])
        assert (open_ == (num >= 0)).all()  # the walls drawn are the uncarved cells
        assert open_.sum() == 49 and open_[1, 1]
        assert all(
            0 < cells[i, j] < 0.3 for i, j in zip(*np.nonzero(open_), strict=True)
        )  # labelled
        (end,) = [tuple(c) for c in np.argwhere(num == t.size)]
        prev, queue = {(1, 1): None}, deque([(1, 1)])
        while queue:
            i, j = queue.popleft()
            for c in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)):
                if 0 <= c[0] < 11 and 0 <= c[1] < 11 and open_[c] and c not in prev:
                    prev[c] = (i, j)
                    queue.append(c)
        path, c = [], end
        while c is not None:
            path.append(c)
            c = prev[c]
        inner = [str(num[c]) for c in reversed(path[1:-1])]
        assert t.answer == " ".join(["s", *inner, "e"])
        assert " ".join(["0", *inner, str(t.size)]) in t.accept


@pytest.mark.slow
def test_numbered_shapes():
    light = ("lightblue", "lightgreen", "khaki", "lightpink", "lightgray", "wheat")
    for t in cases("numbered_shapes"):
        a = arr(t.images[0])
        black = colour(a, "black")
        shapes = [c for n in light for c in components(colour(a, n), 200)]
        assert len(shapes) == 2 * t.size
        circles = []
        for x, y, m, sl in shapes:
            assert (black[sl] & ndimage.binary_fill_holes(m)).sum() > 10  # a number on it
            (label,) = [s[1] for s in t.meta["shapes"] if np.hypot(s[2] - x, s[3] - y) < 12]
            if kind(m) == "circle":
                circles.append(str(label))
        assert len(circles) == t.size
        assert t.answer == " ".join(sorted(circles))


# ----------------------------------------------------------------------------- parsers


GOOD = {
    "count": ("COUNT:7", "7"),
    "answer_number": ("Let me see.\nANSWER: 3", "3"),
    "answer_yes_no": ("ANSWER: yes", "yes"),
    "yes_no_line": ("The triangle at (2,3)...\n**YES**", "yes"),
    "quadrant": ("QUADRANT:2 COUNT:5", "2 5"),
    "above_below": ("ABOVE: 4, BELOW: 6", "4 6"),
    "shape_counts": ("CIRCLES:1 TRIANGLES:0 SQUARES:12", "1 0 12"),
    "colour_words": ("ANSWER: Blue green BLUE", "blue green blue"),
    "labels": ("reasoning\n3 1 2", "3 1 2"),
    "coords": ("(2,3) (0,1) (2,3)", "(0,1) (2,3)"),
    "shape_words": ("ANSWER: Circle HEXAGON diamond", "circle hexagon diamond"),
    "cell_or_none": ("The cell (0,0) has no X next to it.\n(4, 5)", "(4,5)"),
    "colour_list": ("COLOURS: Red , SkyBlue, ivory", "red skyblue ivory"),
    "yes_no_list": (
        "ANSWER: " + ", ".join(["yes"] * 3 + ["No"] * 17),
        " ".join(["yes"] * 3 + ["no"] * 17),
    ),
    "shape_set": ("Shapes seen:\n{'square', 'circle', 'square'}", "circle square"),
    "circle_labels": ("CIRCLES: [12, 3, 5]", "12 3 5"),
    "colour_set": ("The colours are:\n['Red', 'skyblue', 'red']", "red skyblue"),
    "nodes_edges": ("NODES: 5 EDGES: 7", "5 7"),
    "shape_list": ("SHAPES : Circle , Octagon , Diamond", "circle octagon diamond"),
    "cell_path": ("Path found.\nS, 3, 4, E", "s 3 4 e"),
}
BAD = {
    "count": ["7", "count is seven", ""],
    "answer_number": ["3 shapes match", None],
    "answer_yes_no": ["Yes", "ANSWER: maybe"],
    "yes_no_line": ["YES, there is one.", "It is no"],
    "quadrant": ["quadrant 2 with 5", "QUADRANT:2"],
    "above_below": ["ABOVE:4", "4 above 6 below"],
    "shape_counts": ["CIRCLES:1 TRIANGLES:0", "1 0 12"],
    "colour_words": ["ANSWER: Blue Red", "Blue Green", "ANSWER:"],
    "labels": ["The order is 3 1 2", "3, 1, two"],
    "coords": ["(0,1) and (2,3)", "cells 0,1", "None"],
    "shape_words": ["ANSWER: Circle Square", "Circle Triangle"],
    "cell_or_none": ["(0,1) (2,3)", "cell (0,1)", "Nothing"],
    "colour_list": ["COLOURS: red, cyan", "red, blue"],
    "yes_no_list": ["ANSWER: yes, no", "ANSWER: " + ", ".join(["maybe"] * 20)],
    "shape_set": ["{circle, hexagon}", "I see circles and squares"],
    "circle_labels": ["CIRCLES: none", "3 5 12"],
    "colour_set": ["red, cyan", "I see red and blue"],
    "nodes_edges": ["5 nodes and 7 edges", "NODES:5"],
    "shape_list": ["SHAPES: Circle, Star", "Circle, Octagon"],
    "cell_path": ["S -> 3 -> E", "The path is S, 3, E"],
}


def test_cell_or_none_reads_none():
    assert P.parse("cell_or_none", "None.") == ("none", None)


@pytest.mark.parametrize("fmt", sorted(P.PARSERS))
def test_parsers(fmt):
    reply, value = GOOD[fmt]
    assert P.parse(fmt, reply) == (value, None)
    for bad in BAD[fmt]:
        v, why = P.parse(fmt, bad)
        assert v is None and why
    assert P.parse(fmt, P.format_reply(fmt, value)) == (value, None)
    v, why = P.parse(fmt, P.malformed_reply(value))
    assert v is None and why


@pytest.mark.parametrize("domain", sorted(pv.DOMAINS))
def test_parser_on_domain_correct_wrong_malformed(domain):
    t = trial(domain, 5, 1)
    fmt = t.answer_format
    v, why = P.parse(fmt, "Thinking step by step...\n" + P.format_reply(fmt, t.answer))
    assert why is None and t.is_correct(v)
    wrong = None
    rng = np.random.default_rng(0)
    for _ in range(200):
        g = pv.DOMAINS[domain].guess(rng)
        if g != t.answer:
            wrong = g
            break
    v, why = P.parse(fmt, P.format_reply(fmt, wrong))
    assert why is None and not t.is_correct(v)
    v, why = P.parse(fmt, P.malformed_reply(t.answer))
    assert v is None and not t.is_correct(v)


def test_last_key_wins_and_case():
    assert P.parse("count", "COUNT:3 ... no wait\ncount: 4")[0] == "4"
    assert P.parse("answer_yes_no", "answer: NO")[0] == "no"
