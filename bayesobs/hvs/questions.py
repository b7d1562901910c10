"""HVSBench-style questions Q1-Q13 rebuilt from the public sources."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd

from .loaders import SCREEN

FIELDS = {
    "Q1": "Prominence",
    "Q2": "Subitizing",
    **{q: "Prioritizing" for q in ("Q3", "Q4", "Q5", "Q6", "Q7")},
    **{q: "Free-viewing" for q in ("Q8", "Q9", "Q10")},
    **{q: "Searching" for q in ("Q11", "Q12", "Q13")},
}
QTYPES = tuple(FIELDS)
KIND = {q: "choice" for q in QTYPES} | {
    "Q2": "count",
    "Q3": "ranking",
    "Q9": "scanpath",
    "Q12": "scanpath",
}
LETTERS = "ABCDEFGHIJKLMNOPQ"
BOX_INTRO = (
    "Each option represents the bounding box (relative coordinates of x1, y1, x2, y2) of an "
    "object in the given image."
)
Q1_TEMPLATES = (
    "Which one is the most salient object?",
    "Which object is the most visually prominent in the image?",
    "Which object attracts the highest visual attention?",
)
ORDINALS = ("The most salient", "The second most salient", "The third most salient")
SALIENT_HINT = (
    "The detection of salient objects aims to simulate the human visual perception system by "
    "identifying and localizing the most visually striking object(s) in a scene. Previous "
    "research suggests that the most salient object is the one that attracts the highest "
    "proportion of fixations, as indicated by the agreement between fixation patterns and "
    "saliency judgments. In general, there are two primary priors: objects closer to the "
    "viewer are perceived as more salient, and salient objects often appear near the center "
    "of the scene. Additionally, cues such as color contrast, spatial bias, and depth contrast "
    "also influence saliency."
)
RANKING_HINT = (
    "Ranking the saliency is to simulate the sequential shifting of human attention across "
    "objects during non-task-oriented image viewing, reflecting the limited capacity of the "
    "human visual system to process multiple visual inputs simultaneously. In general, there "
    "are two primary priors: objects closer to the viewer are perceived as more salient, and "
    "salient objects often appear near the center of the scene. Additionally, cues such as "
    "color contrast, spatial bias, and depth contrast also influence saliency."
)
FIXATION_HINT = (
    "Human fixations refer to the temporal sequence of locations in an image where individuals "
    "focus their gaze. These fixations are typically recorded using an eye tracker under "
    "controlled laboratory conditions. A scanpath includes not only the fixation locations but "
    "also the associated durations at each location. Both low-level image properties and "
    "saliency, as well as high-level semantic information, serve as critical cues for "
    "predicting scanpaths. The scanpath often begins at the center of the image."
)
HINTS = (
    {"Q1": SALIENT_HINT, "Q2": SALIENT_HINT}
    | {q: RANKING_HINT for q in ("Q3", "Q4", "Q5", "Q6", "Q7")}
    | {q: FIXATION_HINT for q in ("Q8", "Q9", "Q10", "Q11", "Q12", "Q13")}
)
SEARCH_LENGTH = 6  # Q12 asks for 6 fixations


def choose_from(letters: str) -> str:
    """The paper's answer instruction for the given option letters."""
    return f"Please choose one answer from {', '.join(letters)} without bracket or explanation."


def rel_box(bbox: list[float], width: float, height: float) -> tuple[float, ...]:
    """COCO ``[x, y, w, h]`` px -> relative ``(x1, y1, x2, y2)`` clipped to [0, 1]."""
    x, y, w, h = bbox
    vals = (x / width, y / height, (x + w) / width, (y + h) / height)
    return tuple(min(1.0, max(0.0, v)) for v in vals)


def fmt_box(box: tuple[float, ...]) -> str:
    """``0.22,0.62,0.35,0.99`` (2 decimals)."""
    return ",".join(f"{v:.2f}" for v in box)


def rel_scanpath(rec: dict, width: float = SCREEN[0], height: float = SCREEN[1]) -> dict:
    """A fixation record as relative ``X``, ``Y`` and ``T`` (ms) lists."""
    return {
        "X": [x / width for x in rec["X"]],
        "Y": [y / height for y in rec["Y"]],
        "T": [float(t) for t in rec["T"]],
    }


def fmt_scanpath(sp: dict) -> str:
    """A scanpath as the questions write it: ``(0.50, 0.51) for 186ms, (0.52, 0.66) for 162ms``."""
    parts = [
        f"({x:.2f}, {y:.2f}) for {round(t)}ms"
        for x, y, t in zip(sp["X"], sp["Y"], sp["T"], strict=True)
    ]
    return ", ".join(parts) + "."


def _example(sp: dict) -> str:
    xs = ", ".join(f"{v:.2f}" for v in sp["X"])
    ys = ", ".join(f"{v:.2f}" for v in sp["Y"])
    ts = ", ".join(str(round(v)) for v in sp["T"])
    return f"X = [{xs}] Y = [{ys}] T = [{ts}]"


def scanpath_request(what: str, n: int, example: dict) -> str:
    """The Q9/Q12 prompt (paper supplementary C)."""
    return (
        f"[Requirement] Predict eye fixation points for {what}. Output the fixation points as "
        f"three separate lists, each containing {n} values. The lists should represent -- X = "
        f"The X-coordinates of the fixation points, length {n}, normalized relative to the "
        "image width, formatted to two decimal places (range: 0.00 to 1.00). Y = The "
        f"Y-coordinates of the fixation points, length {n}, normalized relative to the image "
        "height, formatted to two decimal places (range: 0.00 to 1.00). T = The fixation "
        f"duration at each point in milliseconds, length {n}, sum not exceeding 5 seconds, "
        f"formatted as integers. [Example Output for Another Image] {_example(example)}"
    )


def _options_text(options: dict[str, str], sep: str = " ") -> str:
    return "\n".join(f"[{k}]{sep}{v}" for k, v in options.items())


def full_prompt(record: dict) -> str:
    """Hint (if any) and question as one user prompt."""
    return f"{record['system']}\n\n{record['prompt']}" if record.get("system") else record["prompt"]


class _Builder:
    def __init__(self, sources: dict, seed: int, hint: bool):
        self.rng = np.random.default_rng(seed)
        self.hint = hint
        self.out: list[dict] = []
        self.sources = sources

    def add(self, qtype: str, source: str, image: Any, stem: str, prompt: str, **kw) -> None:
        options = kw.pop("options", {})
        self.out.append(
            {
                "qid": f"{qtype}-{source}-{stem}",
                "qtype": qtype,
                "field": FIELDS[qtype],
                "source": source,
                "image": str(image),
                "prompt": prompt,
                "system": HINTS[qtype] if self.hint else "",
                "options": options,
                "answer": kw.pop("answer"),
                "kind": KIND[qtype],
                "n_options": len(options),
                "data": kw.pop("data", {}),
            }
        )

    # ------------------------------------------------------------ saliency ranks
    def ranks(self) -> None:
        rng = self.rng
        for name, entry in sorted(self.sources.get("ranks", {}).items()):
            inst = entry["instances"]
            w, h = entry["width"], entry["height"]
            img = entry.get("image", name)
            boxes = [rel_box(i["bbox"], w, h) for i in inst]  # index = rank - 1
            n = len(inst)
            size = {"width": w, "height": h}
            if n >= 2:  # Q1
                others = rng.permutation(np.arange(1, n))[:4]
                pick = rng.permutation(np.r_[0, others])
                opts = {LETTERS[k]: fmt_box(boxes[r]) for k, r in enumerate(pick)}
                q = Q1_TEMPLATES[int(rng.integers(len(Q1_TEMPLATES)))]
                prompt = f"{BOX_INTRO} {q} {choose_from(''.join(opts))}\n{_options_text(opts)}"
                ans = LETTERS[int(np.argmin(pick))]
                data = {"boxes": [boxes[r] for r in pick], **size}
                self.add("Q1", "ranks", img, name, prompt, options=opts, answer=ans, data=data)
            if n >= 1:  # Q2
                self.add("Q2", "ranks", img, name, _count_prompt(), answer=n, data=size)
            if n >= 3:  # Q3
                k = int(min(n, 4))
                pick = rng.permutation(n)[:k]
                opts = {LETTERS[j]: fmt_box(boxes[r]) for j, r in enumerate(pick)}
                prompt = (
                    f"{BOX_INTRO} Please rank the saliency of these objects. Please answer with "
                    "the order of the given options (e.g., DCBA) without bracket or explanation."
                    f"\n{_options_text(opts, '')}"
                )
                ans = "".join(LETTERS[j] for j in np.argsort(pick))
                data = {"boxes": [boxes[r] for r in pick], **size}
                self.add("Q3", "ranks", img, name, prompt, options=opts, answer=ans, data=data)
            if n >= 2:  # Q4
                pick = rng.permutation(n)[:2]
                opts = {LETTERS[j]: fmt_box(boxes[r]) for j, r in enumerate(pick)}
                prompt = (
                    f"{BOX_INTRO} Between the following two objects, please select the more "
                    f"salient option. {choose_from('AB')}\n{_options_text(opts, '')}"
                )
                ans = LETTERS[int(np.argmin(pick))]
                data = {"boxes": [boxes[r] for r in pick], **size}
                self.add("Q4", "ranks", img, name, prompt, options=opts, answer=ans, data=data)
            labels = [i["label"] for i in inst]
            distinct = [r for r in range(n) if labels[r] and labels.count(labels[r]) == 1]
            if len(distinct) >= 2:  # Q5
                pick = rng.permutation(distinct)[:2]
                opts = {LETTERS[j]: labels[r] for j, r in enumerate(pick)}
                prompt = (
                    f"Between these two objects — [A] {opts['A']} [B] {opts['B']} — please "
                    f"select the more salient option. {choose_from('AB')}"
                )
                ans = LETTERS[int(np.argmin(pick))]
                data = {"boxes": [boxes[r] for r in pick], **size}
                self.add("Q5", "ranks", img, name, prompt, options=opts, answer=ans, data=data)
            if n >= 3:  # Q6, Q7
                opts = {LETTERS[j]: ORDINALS[j] for j in range(3)}
                r = int(rng.integers(3))
                prompt = (
                    f"What is the saliency rank of the object within the bounding box "
                    f"{fmt_box(boxes[r])} (relative coordinates of x1, y1, x2, y2), among all "
                    f"salient objects in the entire image? {choose_from('ABC')}\n"
                    f"{_options_text(opts)}"
                )
                data = {"target_box": boxes[r], **size}
                self.add(
                    "Q6", "ranks", img, name, prompt, options=opts, answer=LETTERS[r], data=data
                )
                cand = [r for r in distinct if r < 3]
                if cand:
                    r = int(rng.choice(cand))
                    prompt = (
                        f"What is the saliency rank of {labels[r]} among all salient objects in "
                        f"the entire image? {choose_from('ABC')}\n{_options_text(opts)}"
                    )
                    data = {"target_box": boxes[r], **size}
                    self.add(
                        "Q7", "ranks", img, name, prompt, options=opts, answer=LETTERS[r], data=data
                    )

    def sis10k(self) -> None:
        for name, entry in sorted(self.sources.get("sis10k", {}).items()):
            n = len(entry["instances"])
            if n >= 1:
                size = {"width": entry["width"], "height": entry["height"]}
                img = entry.get("image", name)
                self.add("Q2", "sis10k", img, name, _count_prompt(), answer=n, data=size)

    # ------------------------------------------------------------ fixations
    def fixations(self, source: str) -> None:
        recs = self.sources.get(source, [])
        if not recs:
            return
        rng = self.rng
        search = source == "search"
        q_pick, q_pred, q_long = ("Q11", "Q12", "Q13") if search else ("Q8", "Q9", "Q10")
        groups: dict[tuple, list[dict]] = defaultdict(list)
        for r in recs:
            groups[(r["name"], r["task"] if search else "")].append(r)
        keys = sorted(groups)
        for key in keys:
            name, task = key
            mine = groups[key]
            img = mine[0].get("image", name)
            stem = f"{task}/{name}" if search else name
            others = [k for k in keys if k[0] != name]
            if search:
                same = [k for k in others if k[1] == task]
                others = same or others
            what = f"searching for a {task} in the provided image" if search else "free-viewing"
            humans = [rel_scanpath(r) for r in mine]
            own = humans[int(rng.integers(len(humans)))]
            if others:
                okey = others[int(rng.integers(len(others)))]
                other = rel_scanpath(groups[okey][int(rng.integers(len(groups[okey])))])
                # Q8 / Q11: pick the human scanpath of this image
                order = rng.permutation(2)
                paths = [own, other]
                opts = {LETTERS[j]: fmt_scanpath(paths[o]) for j, o in enumerate(order)}
                prompt = (
                    "You will be given two lists of fixation points from two subjects "
                    f"respectively during {what if search else 'free-viewing of the provided image'}"
                    ", with coordinates relative to the image size. Between these two fixation "
                    f"points, please select the more appropriate one. {choose_from('AB')}\n"
                    f"{_options_text(opts)}"
                )
                ans = LETTERS[int(np.argmin(order))]
                data = {"scanpaths": [paths[o] for o in order], "task": task}
                self.add(q_pick, source, img, stem, prompt, options=opts, answer=ans, data=data)
                # Q9 / Q12: predict a scanpath
                n = SEARCH_LENGTH if search else len(own["X"])
                ex = {k: v[:n] if search else v for k, v in other.items()}
                verb = what if search else "free-viewing of a provided image"
                prompt = scanpath_request(verb, n, ex)
                data = {"humans": humans, "n_fix": n, "task": task}
                self.add(q_pred, source, img, stem, prompt, answer=None, data=data)
            # Q10 / Q13: longest of four fixations (temporal order kept)
            cands = [h for h in humans if len(h["T"]) >= 4]
            if cands:
                sp = cands[int(rng.integers(len(cands)))]
                for _ in range(20):
                    idx = np.sort(rng.permutation(len(sp["T"]))[:4])
                    durs = [sp["T"][i] for i in idx]
                    if durs.count(max(durs)) == 1:
                        break
                else:
                    continue
                pts = [(sp["X"][i], sp["Y"][i], sp["T"][i]) for i in idx]
                opts = {LETTERS[j]: f"({x:.2f}, {y:.2f})" for j, (x, y, _) in enumerate(pts)}
                during = f"{what}" if search else "free viewing of the provided image"
                prompt = (
                    "You will be given 4 fixation points where a person gaze briefly paused "
                    f"during {during}. The coordinates are relative to the image dimensions. "
                    "Which fixation point may had the longest viewing duration? "
                    f"{choose_from('ABCD')}\n{_options_text(opts, '')}"
                )
                ans = LETTERS[int(np.argmax(durs))]
                data = {"points": [(x, y) for x, y, _ in pts], "task": task}
                self.add(q_long, source, img, stem, prompt, options=opts, answer=ans, data=data)


def _count_prompt() -> str:
    return (
        "How many salient objects are there in the following image? Please answer with a "
        "positive integer without explanation."
    )


def build_questions(
    sources: dict, seed: int = 0, hint: bool = False, types: tuple[str, ...] | None = None
) -> list[dict]:
    """Build HVSBench-style questions Q1-Q13 from loaded sources."""
    if types is not None:
        bad = [t for t in types if t not in FIELDS]
        if bad:
            raise ValueError(f"unknown question type(s) {bad}: allowed {', '.join(QTYPES)}")
    b = _Builder(sources, seed, hint)
    b.ranks()
    b.sis10k()
    b.fixations("freeview")
    b.fixations("search")
    out = b.out
    if types is not None:
        out = [r for r in out if r["qtype"] in types]
    return out


def to_frame(records: list[dict]) -> pd.DataFrame:
    """Trial records as a DataFrame (one row per question)."""
    return pd.DataFrame.from_records(records)


def n_choice_chance(record: dict) -> float:
    """Chance of a uniform random guess: ``1/k`` (choice) or ``1/k!`` (ranking)."""
    k = record["n_options"]
    if record["kind"] == "choice":
        return 1.0 / k
    if record["kind"] == "ranking":
        return 1.0 / math.factorial(k)
    raise ValueError(f"{record['qid']}: no chance level for kind {record['kind']!r}")
