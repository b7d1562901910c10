"""HVSBench-style perception questions as a task of the runner (task ``hvs``, paradigm ``hvs``)."""

from __future__ import annotations

import io
import json
import math
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from ..errors import BayesobsInputError
from ..hvs import (
    DEFAULT_SCANPATH,
    GT_MEAN_COUNT,
    build_questions,
    load_folder,
    missing_report,
    random_baseline_scores,
    scanpath_score,
    sim_context,
    standardise,
)
from ..hvs.fixture import FIXTURE_NOTE
from ..stimuli.base import Stimulus, Task, blur, to_png

QTYPES = tuple(f"Q{i}" for i in range(1, 14))
OPTION_KEYS = ("questions", "question_seed")
DATA_FIXTURE = "fixture"
DATA_PUBLIC = "public sources"


def is_fixture(root: str | Path) -> bool:
    """Whether ``root`` is the synthetic fixture (its ``README.txt`` starts with the fixture note)."""
    readme = Path(root) / "README.txt"
    try:
        return readme.is_file() and readme.read_text(encoding="utf-8").startswith(FIXTURE_NOTE)
    except OSError:
        return False


def no_folder_message() -> str:
    """The error of an ``hvs`` run without ``--hvs DIR``: what to download and where."""
    return (
        "task hvs needs --hvs DIR, a folder holding the public source datasets the "
        "HVSBench-style questions are built from (see docs/hvs.md). " + missing_report(Path("DIR"))
    )


def _json_safe(value: Any) -> Any:
    """Tuples to lists, numpy scalars to Python numbers (records are hashed and logged as JSON)."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


class HvsTask(Task):
    """HVSBench-style questions Q1-Q13 on the images of ``--hvs DIR`` (image only)."""

    name = "hvs"
    paradigm = "hvs"
    modalities: ClassVar[tuple[str, ...]] = ("image",)
    role = "participant in a study of human visual perception"
    instruction = "Answer in exactly the format the question asks for."
    hints: ClassVar[bool] = True  # the task has a ``hint`` condition

    def __init__(self, hvs: str | Path | None = None):
        self.root = Path(hvs) if hvs else None
        self._sources: dict | None = None
        self._sets: dict[tuple, dict] = {}  # (types, question_seed) -> question set
        self._png: OrderedDict[tuple, bytes] = OrderedDict()

    # ------------------------------------------------------------ the question set
    def sources(self) -> dict:
        """The loaded source folder (an error naming what to download when it is absent)."""
        if self.root is None:
            raise BayesobsInputError(no_folder_message())
        if self._sources is None:
            self._sources = load_folder(self.root)
        return self._sources

    def _options(self, options: dict) -> tuple[tuple[str, ...], int]:
        unknown = set(options) - set(OPTION_KEYS)
        if unknown:
            raise BayesobsInputError(
                f"hvs: unknown option(s) {', '.join(sorted(unknown))}; the options are "
                f"{', '.join(OPTION_KEYS)}"
            )
        types = options.get("questions", list(QTYPES))
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, list) or not types:
            raise BayesobsInputError("hvs: questions must be a non-empty list such as ['Q1', 'Q2']")
        bad = [t for t in types if t not in QTYPES]
        if bad:
            raise BayesobsInputError(
                f"hvs: unknown question type(s) {', '.join(map(str, bad))}; choose from Q1 to Q13"
            )
        seed = options.get("question_seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise BayesobsInputError(
                f"hvs: question_seed must be a whole number >= 0, not {seed!r}"
            )
        return tuple(t for t in QTYPES if t in types), seed

    def question_set(self, types: tuple[str, ...], seed: int) -> dict:
        """The questions of ``types`` built with ``seed``, their random baseline and sim context."""
        key = (types, seed)
        if key not in self._sets:
            src = self.sources()
            full = build_questions(src, seed=seed, hint=True, types=types)
            if not full:
                raise BayesobsInputError(
                    f"hvs: no question of type(s) {', '.join(types)} can be built from {self.root}"
                )
            base = random_baseline_scores(full, seed=seed)
            chance = {}
            for r in base.itertuples(index=False):
                chance[r.qid] = {
                    "chance_correct": _num(r.correct),
                    "chance_abs_err": _num(r.abs_err),
                    "chance_m_dir": _num(r.m_dir),
                    "chance_m_pos": _num(r.m_pos),
                }
            root = Path(src["root"]).resolve()
            records = []
            for rec in full:
                rel = Path(rec["image"]).resolve().relative_to(root).as_posix()
                records.append(_json_safe({**rec, "image": rel}))
            self._sets[key] = {
                "records": records,
                "baseline": chance,
                "context": sim_context(full),
                "data": DATA_FIXTURE if is_fixture(self.root) else DATA_PUBLIC,
            }
        return self._sets[key]

    def generate(self, rng, low, high, n, options):
        """``n`` questions of the session's types, drawn with the run's seed (each asked once before any repeats)."""
        types, seed = self._options(options)
        qs = self.question_set(types, seed)
        records = qs["records"]
        N = len(records)
        order: list[int] = []
        while len(order) < n:
            order += [int(i) for i in rng.permutation(N)]
        order = order[:n]
        if n > N:
            warnings.warn(
                f"hvs: {n} trials per session asked but {self.root} yields only {N} question(s) of "
                f"type(s) {', '.join(types)}: every question is asked once before any is asked "
                f"again ({n - N} repeat(s), column 'repeat')",
                UserWarning,
                stacklevel=2,
            )
        out = []
        seen: dict[int, int] = {}
        for i in order:
            rec = records[i]
            rep = seen.get(i, 0)
            seen[i] = rep + 1
            params = {
                "record": rec,
                "questions": list(types),
                "question_seed": seed,
                "repeat": rep,
                "source": rec["source"],
            }
            out.append(
                Stimulus(self.name, float(rec["qtype"][1:]), "", params, prompt=rec["prompt"])
            )
        return out

    def _set_of(self, stim: Stimulus) -> dict:
        p = stim.params
        return self.question_set(tuple(p["questions"]), int(p["question_seed"]))

    # ------------------------------------------------------------ runner hooks
    def image_path(self, stim: Stimulus) -> Path:
        """The question's image file in the ``--hvs`` folder."""
        if self.root is None:
            raise BayesobsInputError(no_folder_message())
        return self.root / stim.params["record"]["image"]

    def question(self, stim: Stimulus) -> dict:
        """The question record with its absolute image path (what simulated subjects read)."""
        return {**stim.params["record"], "image": str(self.image_path(stim))}

    def request_meta(self, stim: Stimulus) -> dict[str, Any]:
        """Extra request fields for simulated subjects (not logged, not sent, not cache-keyed)."""
        return {"question": self.question(stim), "hvs_context": self._set_of(stim)["context"]}

    def system_extra(self, stim: Stimulus, cond) -> str:
        """The question's field hint under the ``hint`` condition, else ``""``."""
        return stim.params["record"]["system"] if getattr(cond, "hint", False) else ""

    def draw(self, stim: Stimulus) -> np.ndarray:
        """The question's image as an ``(H, W, 3)`` array, at its own size."""
        path = self.image_path(stim)
        try:
            with Image.open(path) as im:
                return np.asarray(im.convert("RGB"), dtype=float)
        except OSError as exc:
            raise BayesobsInputError(f"{path}: cannot read the image ({exc})") from None

    def render_png(self, stim: Stimulus, blur_sigma: float = 0.0) -> bytes:
        """The image as PNG (a PNG file unchanged when unblurred; other formats encoded once)."""
        # many questions share an image: encode each (image, blur) once
        key = (str(self.image_path(stim)), float(blur_sigma))
        png = self._png.get(key)
        if png is None:
            png = self._png[key] = self._encode(stim, blur_sigma)
            if len(self._png) > 16:
                self._png.popitem(last=False)
        else:
            self._png.move_to_end(key)
        return png

    def _encode(self, stim: Stimulus, blur_sigma: float) -> bytes:
        if blur_sigma > 0:
            return to_png(blur(self.draw(stim), blur_sigma))
        path = self.image_path(stim)
        try:
            data = path.read_bytes()
            with Image.open(io.BytesIO(data)) as im:
                if im.format == "PNG" and im.mode == "RGB":
                    return data  # already what the runner sends: the file itself
                buf = io.BytesIO()
                im.convert("RGB").save(buf, format="PNG", compress_level=1)
                return buf.getvalue()
        except OSError as exc:
            raise BayesobsInputError(f"{path}: cannot read the image ({exc})") from None

    # ------------------------------------------------------------ scoring
    def record(self, stim: Stimulus, reply: str | None, truncated: bool = False) -> dict:
        """Standardise the reply (choice, count, ranking or scanpath) and score it against the gold answer."""
        rec = stim.params["record"]
        kind, qtype = rec["kind"], rec["qtype"]
        pred = standardise(kind, reply)
        row: dict[str, Any] = {
            "qid": rec["qid"],
            "qtype": qtype,
            "field": rec["field"],
            "kind": kind,
            "n_options": rec["n_options"],
            "gold": "" if rec["answer"] is None else str(rec["answer"]),
            "correct": None,
            "m_dir": None,
            "m_pos": None,
            "abs_err": None,
            "repeat": stim.params["repeat"],
            "hvs_data": self._set_of(stim)["data"],
            **self._set_of(stim)["baseline"][rec["qid"]],
        }
        reason = None
        letters = "".join(rec["options"])
        if kind == "scanpath":
            row["answer_std"] = json.dumps(pred, separators=(",", ":"))
            row.update(
                {k: round(v, 6) for k, v in scanpath_score(pred, rec["data"]["humans"]).items()}
            )
            if pred == DEFAULT_SCANPATH:
                reason = "no readable X/Y/T lists (scored as the default central fixation)"
            response = None
        else:
            row["answer_std"] = str(pred)
            correct = int(pred == rec["answer"])
            row["correct"] = correct
            response = float(correct)
            if kind == "count":
                row["abs_err"] = round(abs(float(pred) - float(rec["answer"])), 6)
                if pred == GT_MEAN_COUNT and not float(pred).is_integer():
                    reason = f"no number (scored as the mean count {GT_MEAN_COUNT})"
            elif kind == "ranking":
                if sorted(pred) != sorted(letters):
                    reason = f"not a ranking of the options {letters} (scored wrong)"
            elif pred not in tuple(letters):
                reason = f"no option letter of {letters} (scored wrong)"
        if reason and truncated:
            reason += "; the reply was cut off by max_tokens"
        out = {"response": response, "valid": reason is None, **row}
        if reason:
            out["invalid_reason"] = reason
        return out


def _num(v) -> float | None:
    v = float(v)
    return None if math.isnan(v) else round(v, 6)
