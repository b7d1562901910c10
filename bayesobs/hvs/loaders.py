"""Loaders for the public sources of the HVSBench-style questions."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from PIL import Image

from ..errors import BayesobsInputError

SCREEN = (1680, 1050)
SEARCH_SPLITS = ("train", "validation", "test")
SEARCH_FILES = tuple(f"coco_search18_fixations_TP_{s}.json" for s in SEARCH_SPLITS)
FREEVIEW_FILE = "COCOFreeView_fixations_trainval.json"
RANKS_FILE = "ranks.csv"
RANK_COLUMNS = ("image", "instance", "bbox", "rank")

_WHERE = {
    "coco_search18": (
        "COCO-Search18 target-present fixations (coco_search18_fixations_TP_{train,validation,test}"
        ".json) and images (1680x1050, images/<task>/<name>), from "
        "https://sites.google.com/view/cocosearch/"
    ),
    "coco_freeview": (
        "COCO-FreeView fixations (COCOFreeView_fixations_trainval.json) and images "
        "(images/<name>), from https://sites.google.com/view/cocosearch/coco-freeview"
    ),
    "sis10k": (
        "SIS10K salient-instance annotations (COCO-style instances JSON) and images, from the "
        "SIS10K release (see github.com/ssecv/OQTR)"
    ),
    "saliency_ranks": (
        "saliency ranks as a CSV with columns image,instance,bbox,rank[,label,width,height] "
        "(e.g. converted from SIFR) and the images"
    ),
}


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BayesobsInputError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise BayesobsInputError(f"{path}: not UTF-8 text ({e.reason})") from None
    if not text.strip():
        raise BayesobsInputError(f"{path}: empty file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BayesobsInputError(
            f"{path}: not valid JSON (truncated or corrupt?) at line {e.lineno} column "
            f"{e.colno}: {e.msg}"
        ) from None


def _numbers(path: Path, where: str, field: str, value: Any) -> list[float]:
    if not isinstance(value, list):
        raise BayesobsInputError(f"{path}: {where}: field {field!r} must be a list of numbers")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise BayesobsInputError(
                f"{path}: {where}: field {field!r} holds {v!r}, expected numbers"
            )
        out.append(float(v))
    return out


def load_fixations(path: str | Path, source: str = "search") -> list[dict]:
    """Read a COCO-Search18 (target present) or COCO-FreeView fixation file."""
    if source not in ("search", "freeview"):
        raise ValueError(f"source must be 'search' or 'freeview', got {source!r}")
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, list):
        keys = ", ".join(list(data)[:5]) if isinstance(data, dict) else type(data).__name__
        raise BayesobsInputError(
            f"{path}: expected a JSON list of scanpath records; got {keys} "
            "(another version of the dataset?)"
        )
    required = ["name", "subject", "X", "Y", "T", "length"]
    if source == "search":
        required += ["task", "condition", "bbox"]
    out = []
    for i, rec in enumerate(data):
        where = f"record {i}"
        if not isinstance(rec, dict):
            raise BayesobsInputError(f"{path}: {where}: expected an object")
        for field in required:
            if field not in rec:
                raise BayesobsInputError(f"{path}: {where}: missing field {field!r}")
        where = f"record {i} (name={rec['name']!r}, subject={rec['subject']!r})"
        xs, ys, ts = (_numbers(path, where, f, rec[f]) for f in ("X", "Y", "T"))
        length = rec["length"]
        if isinstance(length, bool) or not isinstance(length, int):
            raise BayesobsInputError(f"{path}: {where}: field 'length' must be an integer")
        if not (len(xs) == len(ys) == len(ts) == length):
            raise BayesobsInputError(
                f"{path}: {where}: fields X, Y, T have {len(xs)}, {len(ys)}, {len(ts)} values "
                f"but 'length' is {length}"
            )
        if length == 0:
            raise BayesobsInputError(f"{path}: {where}: empty scanpath (length 0)")
        bbox = rec.get("bbox")
        if source == "search":
            if rec["condition"] != "present":
                raise BayesobsInputError(
                    f"{path}: {where}: field 'condition' is {rec['condition']!r}; expected "
                    "'present' (this looks like a target-absent file, not the TP file)"
                )
            bbox = _numbers(path, where, "bbox", bbox)
            if len(bbox) != 4:
                raise BayesobsInputError(f"{path}: {where}: field 'bbox' needs 4 numbers [x,y,w,h]")
        out.append(
            {
                "name": str(rec["name"]),
                "subject": rec["subject"],
                "task": str(rec.get("task") or ""),
                "condition": rec.get("condition", "freeview" if source == "freeview" else None),
                "bbox": bbox,
                "X": xs,
                "Y": ys,
                "T": ts,
                "length": length,
                "split": rec.get("split"),
                "fixOnTarget": rec.get("fixOnTarget"),
                "correct": rec.get("correct"),
            }
        )
    if out:
        max_x = max(max(r["X"]) for r in out)
        max_y = max(max(r["Y"]) for r in out)
        max_t = max(max(r["T"]) for r in out)
        if max_x <= 512 and max_y <= 320:
            raise BayesobsInputError(
                f"{path}: fields X/Y never exceed 512x320 px; this looks like the rescaled "
                "(512x320) version, but the 1680x1050 original is expected"
            )
        if max_x > SCREEN[0] * 1.5 or max_y > SCREEN[1] * 1.5:
            raise BayesobsInputError(
                f"{path}: fields X/Y reach {max_x:.0f}x{max_y:.0f} px, far outside the "
                f"{SCREEN[0]}x{SCREEN[1]} screen (another version of the dataset?)"
            )
        if max_t < 20:
            raise BayesobsInputError(
                f"{path}: field T never exceeds {max_t:g}; durations look like seconds, "
                "milliseconds are expected (another version of the dataset?)"
            )
    return out


def load_sis10k(path: str | Path) -> dict[str, dict]:
    """Read a COCO-style SIS10K instances file."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict):
        raise BayesobsInputError(f"{path}: expected a COCO-style object with 'images' etc.")
    for section in ("images", "annotations", "categories"):
        if not isinstance(data.get(section), list):
            raise BayesobsInputError(f"{path}: missing section {section!r} (a list)")
    cats = {}
    for i, c in enumerate(data["categories"]):
        for field in ("id", "name"):
            if field not in c:
                raise BayesobsInputError(f"{path}: categories[{i}]: missing field {field!r}")
        cats[c["id"]] = str(c["name"])
    images: dict[Any, dict] = {}
    out: dict[str, dict] = {}
    for i, im in enumerate(data["images"]):
        for field in ("id", "file_name", "width", "height"):
            if field not in im:
                raise BayesobsInputError(f"{path}: images[{i}]: missing field {field!r}")
        entry = {"width": int(im["width"]), "height": int(im["height"]), "instances": []}
        images[im["id"]] = entry
        out[str(im["file_name"])] = entry
    for i, a in enumerate(data["annotations"]):
        for field in ("image_id", "category_id", "bbox"):
            if field not in a:
                raise BayesobsInputError(f"{path}: annotations[{i}]: missing field {field!r}")
        if a["image_id"] not in images:
            raise BayesobsInputError(
                f"{path}: annotations[{i}]: field 'image_id' {a['image_id']!r} names no image"
            )
        if a["category_id"] not in cats:
            raise BayesobsInputError(
                f"{path}: annotations[{i}]: field 'category_id' {a['category_id']!r} names no "
                "category"
            )
        bbox = _numbers(path, f"annotations[{i}]", "bbox", a["bbox"])
        if len(bbox) != 4:
            raise BayesobsInputError(f"{path}: annotations[{i}]: field 'bbox' needs 4 numbers")
        images[a["image_id"]]["instances"].append(
            {"bbox": bbox, "category": cats[a["category_id"]]}
        )
    return out


def _parse_bbox(text: str) -> list[float]:
    cleaned = text.strip().strip("[]()").replace(",", " ").replace(";", " ")
    return [float(v) for v in cleaned.split()]


def load_ranks(path: str | Path, images_dir: str | Path | None = None) -> dict[str, dict]:
    """Read a saliency-rank CSV (columns ``image,instance,bbox,rank``)."""
    path = Path(path)
    images_dir = Path(images_dir) if images_dir is not None else path.parent / "images"
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            missing = [c for c in RANK_COLUMNS if c not in header]
            if missing:
                raise BayesobsInputError(
                    f"{path}: missing column(s) {', '.join(missing)} (expected "
                    f"{','.join(RANK_COLUMNS)}[,label,width,height])"
                )
            rows = list(reader)
    except FileNotFoundError:
        raise BayesobsInputError(f"{path}: no such file") from None
    out: dict[str, dict] = {}
    for line, row in enumerate(rows, start=2):
        where = f"row {line}"
        if None in row:
            raise BayesobsInputError(
                f"{path}: {where}: more fields than the header has (quote a bbox that uses "
                'commas, e.g. "1,2,3,4")'
            )
        image = (row["image"] or "").strip()
        if not image:
            raise BayesobsInputError(f"{path}: {where}: field 'image' is empty")
        try:
            bbox = _parse_bbox(row["bbox"] or "")
        except ValueError:
            bbox = []
        if len(bbox) != 4 or bbox[2] <= 0 or bbox[3] <= 0:
            raise BayesobsInputError(
                f"{path}: {where}: field 'bbox' {row['bbox']!r} is not 'x y w h' with w, h > 0"
            )
        try:
            rank = int(str(row["rank"]).strip())
        except ValueError:
            raise BayesobsInputError(
                f"{path}: {where}: field 'rank' {row['rank']!r} is not an integer"
            ) from None
        entry = out.setdefault(image, {"width": None, "height": None, "instances": []})
        for dim in ("width", "height"):
            if row.get(dim):
                try:
                    entry[dim] = int(float(row[dim]))
                except ValueError:
                    raise BayesobsInputError(
                        f"{path}: {where}: field {dim!r} {row[dim]!r} is not a number"
                    ) from None
        entry["instances"].append(
            {
                "instance": (row["instance"] or "").strip(),
                "bbox": bbox,
                "rank": rank,
                "label": (row.get("label") or "").strip(),
            }
        )
    for image, entry in out.items():
        entry["instances"].sort(key=lambda r: r["rank"])
        ranks = [r["rank"] for r in entry["instances"]]
        if ranks != list(range(1, len(ranks) + 1)):
            raise BayesobsInputError(
                f"{path}: image {image!r}: field 'rank' values {sorted(ranks)} are not 1..n "
                "without gaps or repeats"
            )
        if entry["width"] is None or entry["height"] is None:
            img = images_dir / image
            try:
                with Image.open(img) as im:
                    entry["width"], entry["height"] = im.size
            except (FileNotFoundError, OSError):
                raise BayesobsInputError(
                    f"{path}: image {image!r}: no width/height columns and the image "
                    f"{img} cannot be read"
                ) from None
    return out


def expected_files(root: str | Path) -> list[tuple[Path, str]]:
    """The files and folders an HVS source folder must hold, with what each is."""
    root = Path(root)
    s18 = root / "coco_search18"
    out = [(s18 / f, "coco_search18") for f in SEARCH_FILES]
    out.append((s18 / "images", "coco_search18"))
    out.append((root / "coco_freeview" / FREEVIEW_FILE, "coco_freeview"))
    out.append((root / "coco_freeview" / "images", "coco_freeview"))
    out.append((root / "sis10k" / "annotations", "sis10k"))
    out.append((root / "sis10k" / "images", "sis10k"))
    out.append((root / "saliency_ranks" / RANKS_FILE, "saliency_ranks"))
    out.append((root / "saliency_ranks" / "images", "saliency_ranks"))
    return out


def missing_files(root: str | Path) -> list[Path]:
    """Expected files or folders absent from ``root`` (see :func:`expected_files`)."""
    missing = []
    for p, _ in expected_files(root):
        if p.name == "annotations":
            if not (p.is_dir() and any(p.glob("*.json"))):
                missing.append(p)
        elif not p.exists():
            missing.append(p)
    return missing


def missing_report(root: str | Path) -> str:
    """Text saying exactly which expected files are missing and where to put them."""
    root = Path(root)
    missing = set(missing_files(root))
    if not missing:
        return ""
    lines = [f"HVS sources: {len(missing)} expected file(s) or folder(s) missing under {root}:"]
    for p, key in expected_files(root):
        if p in missing:
            kind = "folder" if p.suffix == "" else "file"
            lines.append(f"  missing {kind} {p}  <- {_WHERE[key]}")
    lines.append("Expected layout:")
    for p, _ in expected_files(root):
        lines.append(f"  {p.relative_to(root)}{'/' if p.suffix == '' else ''}")
    return "\n".join(lines)


def find_image(images_dir: Path, name: str, task: str = "") -> Path | None:
    """Locate an image as ``images/<task>/<name>`` or ``images/<name>`` (None if absent)."""
    for cand in ((images_dir / task / name) if task else None, images_dir / name):
        if cand is not None and cand.is_file():
            return cand
    return None


def load_folder(root: str | Path) -> dict[str, Any]:
    """Load every source of an HVS folder (all must be present)."""
    root = Path(root)
    report = missing_report(root)
    if report:
        raise BayesobsInputError(report)
    s18 = root / "coco_search18"
    search: list[dict] = []
    for f in SEARCH_FILES:
        search += load_fixations(s18 / f, "search")
    freeview = load_fixations(root / "coco_freeview" / FREEVIEW_FILE, "freeview")
    for recs, folder, src in (
        (search, s18 / "images", s18 / SEARCH_FILES[0]),
        (freeview, root / "coco_freeview" / "images", root / "coco_freeview" / FREEVIEW_FILE),
    ):
        for r in recs:
            img = find_image(folder, r["name"], r["task"])
            if img is None:
                raise BayesobsInputError(
                    f"{src}: image {r['name']!r} (task {r['task']!r}) not found under {folder}"
                )
            r["image"] = img
    sis: dict[str, dict] = {}
    for f in sorted((root / "sis10k" / "annotations").glob("*.json")):
        sis.update(load_sis10k(f))
    for name, entry in sis.items():
        img = root / "sis10k" / "images" / name
        if not img.is_file():
            raise BayesobsInputError(f"{root / 'sis10k' / 'annotations'}: image {img} not found")
        entry["image"] = img
    ranks = load_ranks(root / "saliency_ranks" / RANKS_FILE)
    for name, entry in ranks.items():
        img = root / "saliency_ranks" / "images" / name
        if not img.is_file():
            raise BayesobsInputError(
                f"{root / 'saliency_ranks' / RANKS_FILE}: image {img} not found"
            )
        entry["image"] = img
    return {"root": root, "search": search, "freeview": freeview, "sis10k": sis, "ranks": ranks}
