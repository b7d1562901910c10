"""The three Tunnel Vision tasks (Berman et al. 2025) as runner tasks over :mod:`bayesobs.tunnel`."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import ClassVar

from .. import tunnel
from ..stimuli.perception import PerceptionTask, Question, jsonable, png_bytes
from ..tunnel import circuits, hunt, reid
from ..tunnel import parse as tparse

# the model's answer formats, in a person's words (the braces a model must type are optional)
_YES_NO = re.compile(r"Respond with \{yes\} or \{no\}(?: \(inside the curly brackets\))?\.")
_BRACED = re.compile(r"Answer with (.+?) in curly braces, e\.?g\.? \{(.+?)\}\.")


def person_question(prompt: str) -> str:
    """A Tunnel Vision question with its answer format in a person's words (no braces)."""
    return _BRACED.sub(r"Type \1, e.g. \2.", _YES_NO.sub("Type yes or no.", prompt))


CHOICES = {
    "reid": ("yes", "no"),
    "hunt_colour": hunt.COLOURS,
    "hunt_cell": tuple(map(hunt.label_text, hunt.PAIRS)),
}


@lru_cache(maxsize=32)
def _demos(task: str, key) -> tuple:
    """The library's demonstrations as ``(prompt, PNGs, answer, text)`` (encoded once)."""
    if task == "object_reid":
        demos = reid.demos(key)
    elif task == "scavenger_hunt":
        demos = hunt.demos(key)
    else:
        demos = circuits.demos(key)
    return tuple((d.prompt, tuple(png_bytes(i) for i in d.images), d.answer, d.text) for d in demos)


@lru_cache(maxsize=256)
def _hunt_cells(seed: int) -> tuple[dict, ...]:
    """The cells of the decomposed hunt generated from ``seed``."""
    return tuple(hunt.make_trial("decomposed", seed, with_demos=False).meta["cells"])


class TunnelTask(PerceptionTask):
    """Common part of the Tunnel Vision tasks: the library trial -> question(s)."""

    columns: ClassVar[tuple[str, ...]]  # metadata logged per trial (the analyses' covariates)

    def parse(self, answer_format, reply):
        """The paper's extraction rule for ``answer_format`` (:mod:`bayesobs.tunnel.parse`)."""
        return tparse.parse(answer_format, reply)

    def _columns(self, meta: dict) -> dict:
        return {c: jsonable(meta[c]) for c in self.columns}

    def _chance(self, trial) -> float:
        raise NotImplementedError

    def _demo_key(self, trial):
        return trial.variant

    def questions(self, variant, seed):
        """The one question of the library trial generated from ``seed``."""
        trial = tunnel.make_trial(self.name, variant, seed, with_demos=False)
        images = tuple(png_bytes(i) for i in trial.images)
        stim = self.stimulus(
            self._size(trial),
            "",
            self._prompt(trial),
            variant=variant,
            seed=seed,
            gold=trial.answer,
            format=trial.answer_format,
            chance=self._chance(trial),
            columns=self._columns(trial.meta),
            n_images=len(images),
            n_demos=len(_demos(self.name, self._demo_key(trial))),
        )
        return [Question(stim, images, _demos(self.name, self._demo_key(trial)))]

    def _prompt(self, trial) -> str:
        return trial.prompt

    def human_question(self, stim):
        """The question with its answer format in a person's words (:func:`person_question`)."""
        return person_question(stim.prompt) if stim.prompt else None

    def answer_choices(self, stim):
        """The words a person may type: yes or no, a colour, a colour and a shape (else None)."""
        return CHOICES.get(stim.params["format"])


class ObjectReid(TunnelTask):
    """Object re-identification: is the object of image 1 the same object in image 2."""

    name = "object_reid"
    person_task = "see two pictures of shapes and say whether the object in the first picture appears in the second (yes or no)"
    seconds_per_answer = 15.0
    variants = reid.VARIANTS
    default_variant = "standard"
    max_tokens = reid.MAX_TOKENS
    columns = (
        "n_shapes",
        "positive",
        "n_changed",
        "n_distractors",
        "rotation_deg",
        "scale",
        "change_px",
    )
    covariates = ("n_distractors", "scale")

    def sizes(self, variant):
        """The problem sizes ``variant`` can produce."""
        return tuple(range(reid.N_SHAPES[0], reid.N_SHAPES[1] + 1))

    def _size(self, trial):
        return trial.meta["n_shapes"]

    def _chance(self, trial):
        return 0.5

    def _prompt(self, trial):
        # the test turn follows the two demonstrations: "Yes, that is correct. " + the question
        return reid.TEST_PREFIX + reid.base_prompt(trial.variant)

    def human_question(self, stim):
        """The question without the reply to the demonstrations a person is not shown."""
        return person_question(stim.prompt.removeprefix(reid.TEST_PREFIX)) if stim.prompt else None


class ScavengerHunt(TunnelTask):
    """Scavenger hunt: follow the labels for L steps and name the colour reached."""

    name = "scavenger_hunt"
    person_task = "follow labels from shape to shape in a grid and name the colour you end on"
    seconds_per_answer = 30.0
    modalities = ("image", "text", "multimodal")
    variants = hunt.VARIANTS
    default_variant = "L3"
    max_tokens = hunt.MAX_TOKENS
    columns = ("L", "start", "colour", "n_offgrid_labels")

    def sizes(self, variant):
        """The problem sizes ``variant`` can produce."""
        return (hunt.CHAIN_LENGTH[variant],)

    def _size(self, trial):
        return trial.meta["L"]

    def _chance(self, trial):
        return 1 / len(hunt.COLOURS)

    def _demo_key(self, trial):
        return 1 if trial.variant == "decomposed" else trial.meta["L"]

    def questions(self, variant, seed):
        """One question, or the decomposed variant's three single-step questions."""
        trial = hunt.make_trial(variant, seed, with_demos=False)
        images = (png_bytes(trial.images[0]),)
        demos = _demos(self.name, self._demo_key(trial))
        base = {"variant": variant, "seed": seed, "n_images": 1, "n_demos": len(demos)}
        cols = self._columns(trial.meta)
        if variant != "decomposed":
            stim = self.stimulus(
                trial.meta["L"],
                trial.text,
                trial.prompt,
                **base,
                gold=trial.answer,
                format=trial.answer_format,
                chance=self._chance(trial),
                columns={**cols, "step": None, "n_steps": 1},
            )
            return [Question(stim, images, demos)]
        m = trial.meta
        out = []
        n_steps = len(m["step_prompts"])
        for k, (prompt, gold, fmt) in enumerate(
            zip(m["step_prompts"], m["step_answers"], m["step_formats"], strict=True)
        ):
            chance = 1 / len(hunt.COLOURS) if fmt == "hunt_colour" else 1 / len(hunt.PAIRS)
            stim = self.stimulus(
                trial.meta["L"],
                trial.text,
                prompt,
                **base,
                gold=gold,
                format=fmt,
                chance=chance,
                columns={
                    **cols,
                    "step": k + 1,
                    "n_steps": n_steps,
                    # where this step starts; steps after the first are re-asked from the
                    # subject's own previous answer (follow_up), graded from there
                    "step_start": m["chain"][k],
                    "step_start_from": "gold",
                    "path_answer": gold,
                },
            )
            out.append(Question(stim, images, demos))
        return out

    def follows(self, stim):
        """A decomposed step after the first: asked from the subject's answer to the step before."""
        cols = stim.params.get("columns") or {}
        return stim.params.get("variant") == "decomposed" and (cols.get("step") or 1) > 1

    def follow_up(self, stim, previous, record):
        """The step as the paper asks it: starting where the subject's previous answer said."""
        cols = dict(stim.params["columns"])
        said = record.get("response_value") if record.get("valid") else None
        params = {**stim.params, "question_of": stim.key()}
        cols.update(step_start=said, step_start_from="answer")
        if not isinstance(said, str):
            why = f"step {cols['step'] - 1} gave no answer to start from"
            return self.stimulus(  # no answer can be right: chance 0
                stim.value,
                stim.text,
                "",
                **{**params, "columns": cols, "not_asked": why, "chance": 0.0},
            )
        final = stim.params["format"] == "hunt_colour"
        colour, shape = said.split(" ", 1)
        gold = hunt.step_answer(_hunt_cells(int(stim.params["seed"])), said, final)
        return self.stimulus(
            stim.value,
            stim.text,
            hunt.step_prompt((colour, shape), final),
            **{
                **params,
                "gold": gold,
                "columns": cols,
                "chance": params["chance"] * (gold is not None),
            },
        )


class Circuits(TunnelTask):
    """Circuit connections: the component the wire from a breadboard port reaches."""

    name = "circuits"
    person_task = "follow a wire in a drawing of a circuit and name the component it leads to"
    seconds_per_answer = 25.0
    variants = circuits.COLOUR_MODES
    default_variant = "standard"
    max_tokens = circuits.MAX_TOKENS
    columns = (
        "colour_mode",
        "query_port",
        "distance_px",
        "path_length",
        "crossings",
        "crossings_earlier",
        "wire_colour",
        "n_components",
        "n_wires",
        "n_clutter",
    )
    covariates = ("distance_px", "crossings", "path_length")
    joint_covariates = ("distance_px", "crossings")  # which one explains the errors

    def sizes(self, variant):
        """The problem sizes ``variant`` can produce."""
        return tuple(range(circuits.N_COMPONENTS[0], circuits.N_COMPONENTS[1] + 1))

    def _size(self, trial):
        return trial.meta["n_components"]

    def _chance(self, trial):
        return 1 / trial.meta["n_components"]


TUNNEL_TASKS = {"object_reid": ObjectReid, "scavenger_hunt": ScavengerHunt, "circuits": Circuits}
