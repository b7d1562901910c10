"""The ``perception`` paradigm: tasks with a right answer (a word, a label, a list), not a magnitude."""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import numpy as np
from PIL import Image

from ..errors import BayesobsInputError
from .base import Demo, Stimulus, Task, blur, from_png, to_png

MAX_DRAWS = (
    200  # generated trials per requested trial before a session's sizes are declared unreachable
)


def png_bytes(img: Image.Image) -> bytes:
    """PNG of a PIL image (fast compression; the same bytes for the same image)."""
    buf = io.BytesIO()
    img.convert("RGB").save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


class Question(NamedTuple):
    """One question of a generated trial: its stimulus, images (PNG) and demonstrations."""

    stim: Stimulus
    images: tuple[bytes, ...]
    demos: tuple


class PerceptionTask(Task):
    """Base of the perception tasks: variants, seeded trials, stored images, parsed answers."""

    paradigm: ClassVar[str] = "perception"
    modalities: ClassVar[tuple[str, ...]] = ("image",)
    allow_reasoning: ClassVar[bool] = True
    role = "participant in a visual reasoning study"
    instruction = (
        "You may reason step by step before answering; end with the final answer in exactly "
        "the format the question asks for."
    )
    person_instruction = (
        "Look carefully at the picture (or pictures) and answer the question below it. There is "
        "no time limit."
    )
    seconds_per_answer = 20.0  # a picture to study and a short answer to type
    variants: ClassVar[tuple[str, ...]]
    default_variant: ClassVar[str]
    option_keys: ClassVar[tuple[str, ...]] = ("variant", "stratified")
    # trial columns whose effect on correctness perception_effects.csv estimates (besides problem_size)
    covariates: ClassVar[tuple[str, ...]] = ()
    # covariates also fitted together (each adjusted for the others), e.g. distance and crossings
    joint_covariates: ClassVar[tuple[str, ...]] = ()

    # called with 1 after each trial generated (a progress bar's hook, set by bayesobs.run.plan)
    made: Callable[[int], None] | None = None

    def __init__(self) -> None:
        self._images: dict[str, tuple[bytes, ...]] = {}
        self._demos: dict[str, tuple] = {}

    # ---- what a subclass provides
    def sizes(self, variant: str) -> tuple[int, ...]:
        """The problem sizes the generator can produce for ``variant``."""
        raise NotImplementedError

    def seed_size(self, variant: str, seed: int) -> int | None:
        """The problem size the trial of ``seed`` will have, when known without generating it."""
        return None

    def questions(self, variant: str, seed: int) -> list[Question]:
        """The question(s) of the trial generated from ``seed`` (library call)."""
        raise NotImplementedError

    def parse(self, answer_format: str, reply: str | None) -> tuple[Any, str | None]:
        """``(value, reason)`` of a reply in the named answer format."""
        raise NotImplementedError

    # ---- options and generation
    def check_options(self, options: dict) -> tuple[str, bool]:
        """The session's variant and stratification; unknown keys or values are refused."""
        unknown = set(options) - set(self.option_keys)
        if unknown:
            raise BayesobsInputError(
                f"{self.name}: unknown option(s) {', '.join(sorted(unknown))}; "
                f"the options are {', '.join(self.option_keys)}"
            )
        variant = options.get("variant", self.default_variant)
        if variant not in self.variants:
            raise BayesobsInputError(
                f"{self.name}: unknown variant {variant!r}; choose from {', '.join(self.variants)}"
            )
        stratified = options.get("stratified", False)
        if not isinstance(stratified, bool):
            raise BayesobsInputError(
                f"{self.name}: stratified must be true or false, not {stratified!r}"
            )
        return variant, stratified

    def generate(self, rng, low, high, n, options):
        """``n`` trials (more stimuli when a trial asks several questions) with sizes in ``[low, high]``."""
        variant, stratified = self.check_options(options)
        sizes = [s for s in self.sizes(variant) if low <= s <= high]
        if not sizes:
            raise BayesobsInputError(
                f"{self.name} ({variant}): no problem size in the session range [{low:g}, {high:g}]; "
                f"the sizes are {', '.join(map(str, self.sizes(variant)))}"
            )
        quota = None
        if stratified:
            if n % len(sizes):
                raise BayesobsInputError(
                    f"{self.name} ({variant}): stratified needs a trial count that is a multiple of "
                    f"the {len(sizes)} problem sizes {sizes}, not {n}"
                )
            quota = dict.fromkeys(sizes, n // len(sizes))
        out: list[Stimulus] = []
        made = 0
        for _ in range(MAX_DRAWS * n):
            if made == n:
                break
            seed = int(rng.integers(0, 2**62))
            known = self.seed_size(variant, seed)
            if known is not None and (
                known not in sizes or (quota is not None and quota[known] == 0)
            ):
                continue  # the seed's size is not wanted: skip rendering a trial to drop it
            qs = self.questions(variant, seed)
            size = int(qs[0][0].value)
            if size not in sizes or (quota is not None and quota[size] == 0):
                continue
            if quota is not None:
                quota[size] -= 1
            for stim, images, demos in qs:
                self._images[stim.key()] = images
                self._demos[stim.key()] = demos
                out.append(stim)
            made += 1
            if self.made is not None:  # a progress bar's hook (bayesobs.run.plan.plan)
                self.made(1)
        if made < n:
            raise BayesobsInputError(
                f"{self.name} ({variant}): could not draw {n} trials with problem sizes {sizes} "
                f"in {MAX_DRAWS * n} tries; widen the session range or drop stratified"
            )
        return out

    def made_trials(self, stimuli: list[Stimulus]) -> dict[str, tuple]:
        """The images and demonstrations :meth:`generate` kept for ``stimuli``, to hand on."""
        return {
            s.key(): (self._images[s.key()], self._demos[s.key()])
            for s in stimuli
            if s.key() in self._images
        }

    def keep_trials(self, trials: dict[str, tuple]) -> None:
        """Keep the images and demonstrations :meth:`made_trials` gave (another instance's)."""
        for key, (images, demos) in trials.items():
            self._images[key] = images
            self._demos[key] = demos

    def stimulus(self, value: float, text: str, prompt: str, **params) -> Stimulus:
        """A question's stimulus (``params``: variant, seed, gold, format, chance, columns, ...)."""
        return Stimulus(self.name, float(value), text, params, prompt=prompt)

    # ---- rendering and demonstrations
    def _question(self, stim: Stimulus):
        # a question built from an earlier answer (follow_up) shows its planned question's images
        key = stim.params.get("question_of") or stim.key()
        if key not in self._images:  # a stimulus made elsewhere: regenerate its trial
            for q in self.questions(stim.params["variant"], int(stim.params["seed"])):
                self._images[q[0].key()] = q[1]
                self._demos[q[0].key()] = q[2]
        return self._images[key], self._demos[key]

    def render_pngs(self, stim: Stimulus, blur_sigma: float = 0.0) -> tuple[bytes, ...]:
        """The trial's PNG images, in order (blurred by ``blur_sigma`` px if > 0)."""
        images = self._question(stim)[0]
        if blur_sigma > 0:
            return tuple(to_png(blur(from_png(p), blur_sigma)) for p in images)
        return images

    def render_png(self, stim: Stimulus, blur_sigma: float = 0.0) -> bytes:
        """The first image (the one-image interface of :class:`Task`)."""
        return self.render_pngs(stim, blur_sigma)[0]

    def demos(self, stim: Stimulus, modality: str) -> tuple[Demo, ...]:
        """The trial's demonstrations in the session's modality (text table, images or both)."""
        out = []
        for prompt, images, answer, text in self._question(stim)[1]:
            words = prompt if modality == "image" or text is None else f"{text}\n\n{prompt}"
            out.append(Demo(words, images if modality != "text" else (), answer))
        return tuple(out)

    def human_answer(self, stim: Stimulus) -> str:
        """The trial's gold answer as a person types it (a list joined by commas)."""
        gold = stim.params["gold"]
        return ", ".join(map(str, gold)) if isinstance(gold, (list, tuple)) else str(gold)

    # ---- scoring
    def record(self, stim: Stimulus, reply: str | None, truncated: bool = False) -> dict[str, Any]:
        """Score a reply: ``correct`` (1/0, None if invalid), the parsed value and the task's columns."""
        p = stim.params
        value, why = self.parse(p["format"], reply)
        valid = why is None
        correct = int(value == p["gold"]) if valid else None
        row: dict[str, Any] = {
            "variant": p["variant"],
            "problem_size": int(stim.value),
            "correct": correct,
            "gold": p["gold"],
            "response_value": value,
            "answer_format": p["format"],
            "chance": p["chance"],
            "trial_seed": p["seed"],
            **p.get("columns", {}),
        }
        if not valid:
            row["invalid_reason"] = why + (" (reply cut off by max_tokens)" if truncated else "")
        return {"response": float(correct) if valid else None, "valid": valid, **row}


def jsonable(v):
    """A metadata value as plain JSON (numpy scalars to Python, tuples to lists)."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return v
