"""Synthetic HVS source folder: a TEST / DEMO FIXTURE, never a benchmark."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from .loaders import FREEVIEW_FILE, RANKS_FILE, SCREEN, SEARCH_FILES

FIXTURE_NOTE = "synthetic test/demo fixture (bayesobs.hvs.fixture); not a benchmark"
SHAPES = ("disc", "box")
COLOURS = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 70, 220),
    "yellow": (235, 215, 40),
    "black": (20, 20, 20),
    "white": (245, 245, 245),
}
SALIENT_THRESHOLD = 0.15
N_SUBJECTS = 10
BACKGROUND = 128


def _luma(rgb) -> float:
    r, g, b = rgb
    return (0.299 * r + 0.587 * g + 0.114 * b) / 255.0


def _objects(rng: np.random.Generator, k: int) -> list[dict]:
    w, h = SCREEN
    objs: list[dict] = []
    tries = 0
    while len(objs) < k and tries < 1000:
        tries += 1
        size = float(rng.choice([40, 70, 110, 160]) * rng.uniform(0.8, 1.2))
        cx, cy = rng.uniform(size + 20, w - size - 20), rng.uniform(size + 20, h - size - 20)
        if any(math.hypot(cx - o["cx"], cy - o["cy"]) < size + o["size"] + 30 for o in objs):
            continue
        colour = str(rng.choice(list(COLOURS)))
        # contrast: blend the colour towards the background grey
        mix = float(rng.choice([0.25, 0.55, 1.0]))
        rgb = tuple(round(BACKGROUND + mix * (c - BACKGROUND)) for c in COLOURS[colour])
        shape = str(rng.choice(SHAPES))
        objs.append(
            {"cx": cx, "cy": cy, "size": size, "rgb": rgb, "shape": shape, "colour": colour}
        )
    amax = max((o["size"] ** 2 for o in objs), default=1.0)
    for o in objs:
        contrast = min(1.0, 2.5 * abs(_luma(o["rgb"]) - BACKGROUND / 255.0) + 0.6 * _chroma(o))
        d = math.hypot((o["cx"] - w / 2) / w, (o["cy"] - h / 2) / w)
        o["contrast"] = contrast
        o["salience"] = contrast * math.sqrt(o["size"] ** 2 / amax) * math.exp(-(d**2) / 0.18)
        s = o["size"]
        o["bbox"] = [o["cx"] - s, o["cy"] - s, 2 * s, 2 * s]
        o["label"] = f"the {o['colour']} {'disc' if o['shape'] == 'disc' else 'square'}"
        o["category"] = o["shape"]
    return objs


def _chroma(o: dict) -> float:
    r, g, b = o["rgb"]
    return (max(r, g, b) - min(r, g, b)) / 255.0


def draw_image(objs: list[dict], rng: np.random.Generator) -> Image.Image:
    """Draw the objects on a grey background with faint large texture patches."""
    w, h = SCREEN
    im = Image.new("RGB", (w, h), (BACKGROUND,) * 3)
    dr = ImageDraw.Draw(im)
    for _ in range(6):  # low-contrast background patches (not objects)
        x0, y0 = rng.uniform(0, w - 300), rng.uniform(0, h - 200)
        g = BACKGROUND + int(rng.choice([-8, 8]))
        dr.rectangle(
            [x0, y0, x0 + rng.uniform(200, 420), y0 + rng.uniform(150, 300)], fill=(g, g, g)
        )
    for o in objs:
        x0, y0, bw, bh = o["bbox"]
        box = [x0, y0, x0 + bw, y0 + bh]
        if o["shape"] == "disc":
            dr.ellipse(box, fill=o["rgb"])
        else:
            dr.rectangle(box, fill=o["rgb"])
    return im


def simulate_scanpath(
    objs: list[dict],
    rng: np.random.Generator,
    n: int,
    target: int | None = None,
    centre_bias: float = 0.25,
) -> tuple[list[float], list[float], list[float]]:
    """Simulated fixations (px, ms): centre start, salience-driven with inhibition of return."""
    w, h = SCREEN
    xs, ys, ts = [w / 2 + rng.normal(0, 15)], [h / 2 + rng.normal(0, 15)], []
    ts.append(float(rng.uniform(150, 300)))
    sal = np.array([o["salience"] for o in objs]) + 0.02
    recent: list[int] = []
    found = False
    for _ in range(n - 1):
        weights = sal**2
        if target is not None:
            weights = weights.copy()
            weights[target] += 3 * weights.sum() * (len(xs) / n)
        weights[recent[-2:]] = 0.0
        if rng.random() < centre_bias or weights.sum() == 0:
            x = float(np.clip(rng.normal(w / 2, w / 5), 0, w - 1))
            y = float(np.clip(rng.normal(h / 2, h / 5), 0, h - 1))
            dur = rng.uniform(120, 260)
            idx = None
        else:
            idx = int(rng.choice(len(objs), p=weights / weights.sum()))
            o = objs[idx]
            x = float(np.clip(o["cx"] + rng.normal(0, o["size"] / 3), 0, w - 1))
            y = float(np.clip(o["cy"] + rng.normal(0, o["size"] / 3), 0, h - 1))
            dur = 180 + 500 * o["salience"] * rng.uniform(0.7, 1.3)
            recent.append(idx)
        xs.append(round(x, 1))
        ys.append(round(y, 1))
        ts.append(float(round(dur)))
        if target is not None and idx == target:
            found = True
            break
    if target is not None and not found:  # a target-present search ends on the target
        o = objs[target]
        xs.append(round(float(o["cx"] + rng.normal(0, o["size"] / 4)), 1))
        ys.append(round(float(o["cy"] + rng.normal(0, o["size"] / 4)), 1))
        ts.append(float(round(200 + 300 * rng.uniform())))
    xs[0], ys[0], ts[0] = round(xs[0], 1), round(ys[0], 1), float(round(ts[0]))
    return xs, ys, ts


def write_fixture(root: str | Path, seed: int = 0, n_images: int = 6) -> Path:
    """Write the synthetic HVS source folder (test / demo only)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    dirs = {
        "s18": root / "coco_search18",
        "fv": root / "coco_freeview",
        "sis": root / "sis10k",
        "rk": root / "saliency_ranks",
    }
    for d in dirs.values():
        (d / "images").mkdir(parents=True, exist_ok=True)
    (dirs["sis"] / "annotations").mkdir(parents=True, exist_ok=True)
    search: dict[str, list] = {f: [] for f in SEARCH_FILES}
    freeview: list[dict] = []
    sis = {
        "info": {"description": FIXTURE_NOTE},
        "images": [],
        "annotations": [],
        "categories": [{"id": i + 1, "name": s} for i, s in enumerate(SHAPES)],
    }
    rank_rows: list[dict] = []
    for i in range(n_images):
        objs = _objects(rng, int(rng.integers(3, 7)))
        name = f"fixture_{i:03d}.png"
        im = draw_image(objs, rng)
        target = int(rng.integers(len(objs)))
        task = objs[target]["shape"]
        split_file = SEARCH_FILES[i % len(SEARCH_FILES)]
        split = split_file.split("_")[-1].removesuffix(".json")
        (dirs["s18"] / "images" / task).mkdir(exist_ok=True)
        for path in (
            dirs["s18"] / "images" / task / name,
            dirs["fv"] / "images" / name,
            dirs["sis"] / "images" / name,
            dirs["rk"] / "images" / name,
        ):
            im.save(path, format="PNG", compress_level=1)
        for subj in range(1, N_SUBJECTS + 1):
            xs, ys, ts = simulate_scanpath(objs, rng, int(rng.integers(5, 13)))
            freeview.append(
                {
                    "name": name,
                    "subject": subj,
                    "task": "freeview",
                    "condition": "freeview",
                    "X": xs,
                    "Y": ys,
                    "T": ts,
                    "length": len(xs),
                    "split": "train",
                }
            )
            xs, ys, ts = simulate_scanpath(objs, rng, int(rng.integers(3, 8)), target=target)
            o = objs[target]
            on = abs(xs[-1] - o["cx"]) <= o["size"] and abs(ys[-1] - o["cy"]) <= o["size"]
            search[split_file].append(
                {
                    "name": name,
                    "subject": subj,
                    "task": task,
                    "condition": "present",
                    "bbox": [round(v, 1) for v in o["bbox"]],
                    "X": xs,
                    "Y": ys,
                    "T": ts,
                    "length": len(xs),
                    "fixOnTarget": bool(on),
                    "correct": 1,
                    "split": split,
                }
            )
        sis["images"].append(
            {"id": i + 1, "file_name": name, "width": SCREEN[0], "height": SCREEN[1]}
        )
        salient = sorted(
            (o for o in objs if o["salience"] >= SALIENT_THRESHOLD),
            key=lambda o: -o["salience"],
        )
        if not salient:  # every image has at least one salient instance
            salient = [max(objs, key=lambda o: o["salience"])]
        for o in salient:
            sis["annotations"].append(
                {
                    "id": len(sis["annotations"]) + 1,
                    "image_id": i + 1,
                    "category_id": SHAPES.index(o["shape"]) + 1,
                    "bbox": [round(v, 1) for v in o["bbox"]],
                    "area": round(o["bbox"][2] * o["bbox"][3], 1),
                    "iscrowd": 0,
                }
            )
        for r, o in enumerate(sorted(objs, key=lambda o: -o["salience"]), start=1):
            rank_rows.append(
                {
                    "image": name,
                    "instance": f"{i}_{r}",
                    "bbox": " ".join(f"{v:.1f}" for v in o["bbox"]),
                    "rank": r,
                    "label": o["label"],
                    "width": SCREEN[0],
                    "height": SCREEN[1],
                }
            )
    for f, recs in search.items():
        (dirs["s18"] / f).write_text(json.dumps(recs), encoding="utf-8")
    (dirs["fv"] / FREEVIEW_FILE).write_text(json.dumps(freeview), encoding="utf-8")
    (dirs["sis"] / "annotations" / "fixture_instances.json").write_text(
        json.dumps(sis), encoding="utf-8"
    )
    with (dirs["rk"] / RANKS_FILE).open("w", newline="", encoding="utf-8") as fh:
        wr = csv.DictWriter(
            fh, fieldnames=["image", "instance", "bbox", "rank", "label", "width", "height"]
        )
        wr.writeheader()
        wr.writerows(rank_rows)
    (root / "README.txt").write_text(
        f"{FIXTURE_NOTE}\nseed={seed} n_images={n_images}\n", encoding="utf-8"
    )
    return root
