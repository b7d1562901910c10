"""Tunnel Vision generators: pixel measurements made by the tests themselves.

Shapes and components are counted with ``scipy.ndimage.label``, colours are
sampled at points the test computes from the paper's layout, and the wire
crossings are counted by the test's own segment-intersection routine.
"""

from __future__ import annotations

import math
from functools import cache

import matplotlib
import numpy as np
import pytest
from PIL import Image, ImageColor, ImageDraw, ImageFont
from scipy import ndimage

from bayesobs import tunnel
from bayesobs.tunnel import circuits, hunt, reid
from bayesobs.tunnel.parse import parse_cell, parse_colour, parse_component

EIGHT = np.ones((3, 3), bool)
REID_COLOURS = ["red", "green", "blue", "orange", "purple", "teal", "magenta", "gold"]
HUNT_COLOURS = [
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
]


def rgb(name):
    return tuple(ImageColor.getrgb(name)[:3])


def packed(arr):
    arr = arr.astype(np.int64)
    return (arr[..., 0] << 16) | (arr[..., 1] << 8) | arr[..., 2]


def nonwhite(img):
    return np.any(np.asarray(img) != 255, axis=-1)


def n_components(mask):
    return ndimage.label(mask, structure=EIGHT)[1]


@cache
def reid_pair(variant, seed):
    return (
        reid.make_trial(variant, seed, positive=True, with_demos=False),
        reid.make_trial(variant, seed, positive=False, with_demos=False),
    )


# ---------------------------------------------------------------- object re-identification


@pytest.mark.parametrize("variant", reid.VARIANTS)
def test_reid_positives_and_negatives_share_one_crisp_rasteriser(variant):
    """Authors' bug 1 (bicubic positives vs crisp negatives): every pixel is white or a palette colour."""
    allowed = {packed(np.array(rgb(c))) for c in [*REID_COLOURS, "white"]}
    for seed in range(4):
        for trial in reid_pair(variant, seed):
            for img in trial.images:
                assert set(np.unique(packed(np.asarray(img))).tolist()) <= allowed
    # the check catches the authors' approach: a bicubic-resampled positive
    img1 = reid_pair(variant, 0)[0].images[0]
    resampled = img1.rotate(33, resample=Image.Resampling.BICUBIC, fillcolor="white")
    assert not set(np.unique(packed(np.asarray(resampled))).tolist()) <= allowed


def _params_radius(shape):
    if "w" in shape:
        return math.hypot(shape["w"], shape["h"]) / 2
    return shape["size"]  # over-estimates every size-parameterised shape


@pytest.mark.parametrize("variant", reid.VARIANTS)
def test_reid_negative_differs_from_its_positive_only_in_the_altered_shapes(variant):
    """Authors' bug 2 (every component differs): only 1-2 shapes change; every shape is transformed."""
    for seed in range(5):
        pos, neg = reid_pair(variant, seed)
        assert pos.answer == "yes" and neg.answer == "no"
        assert pos.images[0] == neg.images[0]
        assert pos.meta["distractors"] == neg.meta["distractors"]
        changed = {c["index"] for c in neg.meta["changed"]}
        differing = {
            i
            for i, (a, b) in enumerate(zip(pos.meta["shapes2"], neg.meta["shapes2"], strict=True))
            if a != b
        }
        assert differing == changed and 1 <= len(changed) <= 2
        # every shape of the positive's image 2 is image 1's shape under the whole-object transform
        th, s = math.radians(pos.meta["rotation_deg"]), pos.meta["scale"]
        for a, b in zip(pos.meta["shapes1"], pos.meta["shapes2"], strict=True):
            dx, dy = a["x"] - 256, a["y"] - 256
            assert b["x"] == pytest.approx(256 + s * (math.cos(th) * dx - math.sin(th) * dy))
            assert b["y"] == pytest.approx(256 + s * (math.sin(th) * dx + math.cos(th) * dy))
            assert b["angle"] == pytest.approx(a["angle"] + th)
            for key in ("w", "h", "size"):
                if key in a:
                    assert b[key] == pytest.approx(a[key] * s)
        # pixels: the two images 2 differ, and only near the altered shapes (before or after)
        diff = np.any(np.asarray(pos.images[1]) != np.asarray(neg.images[1]), axis=-1)
        assert diff.sum() >= reid.MIN_CHANGE_PX
        ys, xs = np.nonzero(diff)
        near = np.zeros(len(xs), bool)
        for i in changed:
            for sh in (pos.meta["shapes2"][i], neg.meta["shapes2"][i]):
                near |= np.hypot(xs - sh["x"], ys - sh["y"]) <= _params_radius(sh) + 2
        assert near.all()


@pytest.mark.parametrize("variant", reid.VARIANTS)
def test_reid_objects_components_and_distractors(variant):
    for seed in range(10, 16):
        for trial in reid_pair(variant, seed):
            img1, img2 = trial.images
            n_obj = n_components(nonwhite(img1))
            assert 2 <= trial.meta["n_shapes"] <= 5
            assert 1 <= trial.meta["n_distractors"] <= 3
            if variant == "standard":
                assert n_obj == 1  # the object is pixel-connected in image 1 ...
                assert (
                    n_components(nonwhite(img2)) == 1 + trial.meta["n_distractors"]
                )  # ... and in image 2
            if variant == "pixel_perfect" and trial.answer == "yes":
                a1, a2 = np.asarray(img1), np.asarray(img2)
                obj = nonwhite(img1)
                assert (a1[obj] == a2[obj]).all()  # pixel-for-pixel the same object
                extra = nonwhite(img2) & ~obj
                assert n_components(nonwhite(img2)) == n_obj + trial.meta["n_distractors"]
                assert (
                    ndimage.distance_transform_edt(~obj)[extra].min() >= 10
                )  # distractors keep 10 px away


def test_reid_prompts_and_demos():
    t = reid.make_trial("standard", 3)
    assert t.prompt.startswith(
        "Yes, that is correct. The first image shows an object made of connected"
    )
    assert t.prompt.endswith(
        "the answer is yes even if there are other shapes present. Please ignore any distractor objects."
    )
    assert (
        "up to a rigid translation, rotation, and scale of the ENTIRE object"
        in reid.base_prompt("unconnected")
    )
    assert "if a component shape were to be rotated or translated, it" in reid.base_prompt(
        "pixel_perfect"
    )
    (d1, d2) = t.demos
    assert d1.answer == "{yes}" and d2.answer == "{no}"
    assert d1.prompt == reid.base_prompt("standard")
    assert d2.prompt == "That is correct. " + reid.base_prompt("standard")
    assert len(d1.images) == len(d2.images) == 2 and t.max_tokens == 30
    again = reid.make_trial("standard", 3)
    assert np.array_equal(np.asarray(again.images[1]), np.asarray(t.images[1]))  # seeded
    with pytest.raises(ValueError, match="unknown object_reid variant"):
        reid.make_trial("rotated", 1)


# ---------------------------------------------------------------- scavenger hunt


def probe_cell(arr, row, col):
    """(colour, shape) of a hunt cell from three probe points (half-size 28 px, text on the middle line)."""
    cx, cy = col * 80 + 40, row * 80 + 40
    names = {rgb(c): c for c in HUNT_COLOURS}
    corner = tuple(int(v) for v in arr[cy - 24, cx + 24])
    low = tuple(int(v) for v in arr[cy + 20, cx])
    if corner in names:
        return names[corner], "square"
    if low in names:
        return names[low], "circle"
    return names[tuple(int(v) for v in arr[cy + 10, cx])], "triangle"


def label_ink(text):
    """Ink of ``text`` rendered by the test itself: crisp DejaVu Sans 9 px centred in an 80 x 20 band."""
    font = ImageFont.truetype(f"{matplotlib.get_data_path()}/fonts/ttf/DejaVuSans.ttf", 9)
    img = Image.new("L", (80, 20), 255)
    draw = ImageDraw.Draw(img)
    draw.fontmode = "1"
    draw.text((40, 10), text, font=font, fill=0, anchor="mm")
    return np.asarray(img) == 0


@pytest.mark.parametrize("variant", ["L2", "L3", "L4"])
def test_hunt_grid_chain_and_labels_by_pixels(variant):
    steps = int(variant[1])
    for seed in range(3):
        t = hunt.make_trial(variant, seed, with_demos=False)
        arr = np.asarray(t.images[0])
        assert arr.shape == (400, 400, 3)
        seen = {(r, c): probe_cell(arr, r, c) for r in range(5) for c in range(5)}
        assert len(set(seen.values())) == 25  # every (colour, shape) pair unique
        chain = t.meta["chain_cells"]
        assert len(chain) == steps + 1 == len(set(map(tuple, chain)))
        for k in range(steps):
            r, c = chain[k]
            nxt = seen[tuple(chain[k + 1])]
            band = np.all(arr[r * 80 + 30 : r * 80 + 50, c * 80 : c * 80 + 80] == 0, axis=-1)
            assert np.array_equal(
                band, label_ink(f"{nxt[0]} {nxt[1]}")
            )  # the label names the next cell
        assert t.answer == seen[tuple(chain[-1])][0]
        assert t.meta["start"] == " ".join(seen[tuple(chain[0])])
        assert (
            n_components(np.isin(packed(arr), [packed(np.array(rgb(c))) for c in HUNT_COLOURS]))
            >= 25
        )


def test_hunt_offgrid_labels_near_a_quarter():
    off = total = 0
    for seed in range(60):
        t = hunt.make_trial("L2", seed, with_demos=False)
        on_grid = {f"{c['colour']} {c['shape']}" for c in t.meta["cells"]}
        chain = {tuple(rc) for rc in t.meta["chain_cells"][:-1]}
        for c in t.meta["cells"]:
            if (c["row"], c["col"]) not in chain:
                total += 1
                off += c["label"] not in on_grid
    assert abs(off / total - 8 / 33) < 0.03


def test_hunt_prompts_demo_and_text_rendering():
    paper = (
        "Starting at the blue triangle, follow the labels for 4 steps. (For instance, in a different"
        " example of 4 steps, you might start at a blue triangle, then go to a red square, then a blue"
        " circle, then a magenta triangle, then a green circle. The answer would be green.) After those"
        " steps, what color are you on? Answer with the color in curly braces, e.g. {red}."
    )
    assert hunt.chain_prompt(("blue", "triangle"), 4) == paper
    t = hunt.make_trial("L3", 7)
    (demo,) = t.demos
    assert demo.answer.startswith("We start at the ") and ", and then end at the " in demo.answer
    assert parse_colour(demo.answer)[0] in HUNT_COLOURS and len(demo.images) == 1
    assert t.max_tokens == 100 and t.answer_format == "hunt_colour"
    rows = t.text.splitlines()[2:]
    assert len(rows) == 25
    arr = np.asarray(t.images[0])
    for line in rows:
        r, c, shape, colour, label = (x.strip() for x in line.split("|"))
        assert probe_cell(arr, int(r) - 1, int(c) - 1) == (colour, shape)
        assert label in {f"{a} {b}" for a in HUNT_COLOURS for b in ("circle", "square", "triangle")}
    assert hunt.text_prompt(t).endswith(t.prompt) and hunt.text_prompt(t).startswith(t.text)


def test_hunt_decomposed_steps():
    t = hunt.make_trial("decomposed", 11)
    assert t.meta["L"] == 3 and len(t.meta["step_prompts"]) == 3
    chain = t.meta["chain"]
    assert t.meta["step_answers"][:2] == chain[1:3]
    assert t.meta["step_answers"][2] == t.answer == chain[3].split()[0]
    assert t.prompt == t.meta["step_prompts"][0] and f"Starting at the {chain[0]}," in t.prompt
    assert parse_cell("{" + chain[1] + "}") == (chain[1], None)
    assert "{red circle}" in t.meta["step_prompts"][1] and "{red}" in t.meta["step_prompts"][2]


# ---------------------------------------------------------------- circuits


def cross(s, t):
    """Proper crossing of two segments by solving p + a (q - p) = r + b (u - r), 0 < a, b < 1."""
    (p, q), (r, u) = np.asarray(s, float), np.asarray(t, float)
    m = np.column_stack([q - p, r - u])
    if abs(np.linalg.det(m)) < 1e-12:
        return False
    a, b = np.linalg.solve(m, r - p)
    return 1e-9 < a < 1 - 1e-9 and 1e-9 < b < 1 - 1e-9


def test_crossings_counted_on_a_hand_built_layout():
    query = [(0, 0), (100, 100), (200, 0)]  # a V
    across = [(0, 50), (200, 50)]  # crosses both arms
    parallel = [(0, 10), (90, 100)]  # runs beside the first arm
    touching = [(100, 100), (100, 200)]  # shares the bend point only
    assert circuits.count_crossings(query, [across]) == 2
    assert circuits.count_crossings(query, [parallel, touching]) == 0
    assert circuits.count_crossings(query, [across, across, parallel]) == 4
    assert circuits.count_crossings(across, [query]) == 2


def test_circuit_metadata_counts_crossings_against_all_wires():
    differs = 0
    for seed in range(25):
        t = circuits.make_trial("standard", seed, with_demos=False)
        wires = t.meta["wires"]
        q = next(w for w in wires if w["port"] == t.meta["query_port"])
        segs = list(zip(q["path"][:-1], q["path"][1:], strict=True))
        mine = sum(
            cross(s, u)
            for w in wires
            if w is not q
            for s in segs
            for u in zip(w["path"][:-1], w["path"][1:], strict=True)
        )
        assert t.meta["crossings"] == mine >= t.meta["crossings_earlier"]
        differs += mine != t.meta["crossings_earlier"]
        assert t.meta["distance_px"] == pytest.approx(math.dist(q["path"][0], q["path"][-1]))
        assert t.meta["path_length"] == pytest.approx(
            sum(math.dist(a, b) for a, b in zip(q["path"][:-1], q["path"][1:], strict=True))
        )
    assert differs > 0  # the authors' earlier-wires-only count would differ


def test_circuit_layout_and_wire_endpoints_by_pixels():
    step = 320 / 6
    layout = [
        (int(300 + f * 200), int(140 + step * (i + 1))) for f in (0.25, 0.75) for i in range(5)
    ]
    fills = [packed(np.array(rgb(c))) for c in circuits.COMPONENT_FILLS]
    for seed in range(8):
        t = circuits.make_trial("unique", seed, with_demos=False)
        arr = np.asarray(t.images[0])
        assert arr.shape == (600, 800, 3)
        assert t.meta["bb_ports"] == layout
        ys, xs = np.nonzero(np.all(arr == (224, 224, 224), axis=-1))  # the breadboard's grey
        assert (xs.min(), xs.max(), ys.min(), ys.max()) == (
            302,
            498,
            142,
            458,
        )  # inside a 2 px outline
        blobs, n = ndimage.label(np.isin(packed(arr), fills))
        big = 1 + np.flatnonzero(
            ndimage.sum_labels(np.ones_like(blobs), blobs, range(1, n + 1)) > 1000
        )
        boxes = [
            sl for k, sl in enumerate(ndimage.find_objects(blobs), start=1) if k in big
        ]  # not glyph holes
        assert len(boxes) == t.meta["n_components"] and 4 <= len(boxes) <= 10
        for sl in boxes:  # 100 x 60 boxes (inside a 2 px outline)
            assert sl[1].stop - sl[1].start <= 97 and sl[0].stop - sl[0].start == 57
        comp_ports = {tuple(p) for c in t.meta["components"] for p in c["ports"]}
        colours = [w["colour"] for w in t.meta["wires"]]
        assert len(set(colours)) == len(colours)
        for w in t.meta["wires"]:
            a, b = (tuple(int(v) for v in p) for p in (w["path"][0], w["path"][-1]))
            for end in (a, b):  # both ends on a declared port, in the wire's colour
                assert end in comp_ports or end in layout
                assert tuple(arr[end[1], end[0]]) == rgb(w["colour"])
            if w["kind"] == "breadboard":
                assert a == layout[w["port"] - 1]
                owner = next(c for c in t.meta["components"] if c["label"] == w["component"])
                assert list(b) in [list(p) for p in owner["ports"]]
        # the queried wire is drawn along its path (crossing wires on top hide a few px)
        q = next(w for w in t.meta["wires"] if w["port"] == t.meta["query_port"])
        pts = [
            np.asarray(p0) + u * (np.asarray(p1) - np.asarray(p0))
            for p0, p1 in zip(q["path"][:-1], q["path"][1:], strict=True)
            for u in np.linspace(0, 1, 60)
        ]
        on = [tuple(arr[round(y), round(x)]) == rgb(q["colour"]) for x, y in pts]
        assert np.mean(on) > 0.85


def test_circuit_colour_modes_prompt_and_demos():
    single = circuits.make_trial("single", 4)
    assert len({w["colour"] for w in single.meta["wires"]}) == 1
    standard = [circuits.make_trial("standard", s, with_demos=False) for s in range(5)]
    assert all(w["colour"] in circuits.WIRE_COLOURS for t in standard for w in t.meta["wires"])
    paper = (
        "Which component does the wire from port 7 on the breadboard, which is the gray rectangle with"
        " numbered ports, connect to? A wire is a series of connected, same colored lines that go from"
        " the center of a port, represented on the screen as a white circle, to another port. Each wire"
        " only connects two ports, one at either end. A wire will NEVER turn at the same spot that it"
        " intersects another wire, and wires do not change colors. Answer with the component label in"
        " curly braces, e.g {C0}."
    )
    assert circuits.prompt(7) == paper
    assert single.prompt == circuits.prompt(single.meta["query_port"])
    assert len(single.demos) == 2 and single.max_tokens == 150
    for d in single.demos:
        assert d.answer.startswith("After following the wire, it connects to C")
        assert parse_component(d.answer)[0] == d.answer.split()[-2].rstrip(".")
    assert (
        single.answer == single.meta["component"]
        and parse_component("{" + single.answer + "}")[0] == single.answer
    )
    for t in standard:
        assert 1 <= t.meta["n_wires"] <= 10 and 0 <= t.meta["n_clutter"] <= 6


@pytest.mark.parametrize(
    ("task", "variant"),
    [("object_reid", "unconnected"), ("scavenger_hunt", "L2"), ("circuits", "single")],
)
def test_generators_are_seeded_and_validate_input(task, variant):
    a = tunnel.make_trial(task, variant, 123, with_demos=False)
    b = tunnel.make_trial(task, variant, np.random.default_rng(5), with_demos=False)
    c = tunnel.make_trial(task, variant, 123, with_demos=False)
    assert all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(a.images, c.images, strict=True)
    )
    assert a.prompt == c.prompt and a.answer == c.answer
    assert any(
        not np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(a.images, b.images, strict=True)
    )
    assert a.task == task and a.variant == variant and a.demos == ()
    with pytest.raises(ValueError, match="unknown"):
        tunnel.make_trial(task, "nonsense", 1)
    with pytest.raises(TypeError, match="int seed or a numpy Generator"):
        tunnel.make_trial(task, variant, "seed")
    with pytest.raises(ValueError, match="unknown task"):
        tunnel.make_trial("maze", variant, 1)
