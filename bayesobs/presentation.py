"""What a subject is shown on a trial, in one place for every front end.

The runner sends a model the system prompt of :func:`bayesobs.ablations.system_prompt`
(role, steering, the task's instruction, "Do not explain or reason ..."); a
person in the web app (``bayesobs serve``) or in the jsPsych export sees the
same prompt without the model's role line and without the instruction not to
reason, so a steering condition shows its steering text to people too.
"""

from __future__ import annotations

import numpy as np

from .ablations import system_prompt

NO_REASONING = " Do not explain or reason. Only output the final answer."


def human_instruction(sess, t: int) -> str:
    """The instruction a person sees on trial ``t`` of session run ``sess``.

    Parameters
    ----------
    sess : bayesobs.runner.Session
        A planned session run.
    t : int
        Trial index within the run (numerical steering reports the range of
        the trials shown before it).

    Returns
    -------
    str
        The trial's system prompt less the role sentence and the
        no-reasoning sentence.
    """
    previous = [s.value for s in sess.stimuli[:t]]
    text = system_prompt(sess.task, sess.cond, previous, sess.range, sess.options)
    role = f"You are a {sess.task.role}. "
    if text.startswith(role):
        text = text[len(role) :]
    return text.replace(NO_REASONING, "")


def human_plan(spec: dict, modalities=None, conditions=None, trials=None, ami=None) -> list:
    """The session runs a person does (one run each), as the runner plans them for a model.

    The web app and the jsPsych export both use this, so a person sees the
    stimuli, order and blur a model sees (``subject`` is ``"human"``; the web
    app replaces it by each participant's id).
    """
    from .runner import HUMAN, plan

    return plan(spec, [HUMAN], modalities, conditions, trials, 1, ami=ami)


def practice_stimulus(spec: dict, sess):
    """The practice trial of a human study: one stimulus of the task, never logged.

    Drawn from the task by its own generator in the first session's range,
    seeded by the spec's seed (the same practice in ``serve`` and the export).
    """
    rng = np.random.default_rng(spec["seed"] + 7919)
    return sess.task.generate(rng, *map(float, sess.range), 1, spec.get("options", {}))[0]


def stimulus_text(sess, stim, t: int) -> str | None:
    """The text a subject reads on trial ``t``: the text rendering and the question.

    ``None`` in the image modality unless the stimulus carries a question
    (``stim.prompt``, shown in every modality).  Under ``noise_text`` the
    rendering is degraded, seeded by the run and the trial, so a model and
    a person see the same smudges.  The runner, the web app and the jsPsych
    export all show this.
    """
    from .ablations import degrade_text
    from .runner import _seed

    text = stim.text if sess.modality in ("text", "multimodal") else None
    if text is not None and sess.cond.text_noise > 0:
        rng = np.random.default_rng(_seed(sess.seed, "noise_text", t, stim.key()))
        text = degrade_text(text, sess.cond.text_noise, rng)
    if stim.prompt:  # a question that goes with the stimulus in every modality
        text = stim.prompt if text is None else f"{text}\n\n{stim.prompt}"
    return text
