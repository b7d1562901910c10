"""What a subject is shown on a trial, in one place for every front end.

The runner sends a model the system prompt of :func:`bayesobs.run.ablations.system_prompt`
(role, steering, the task's instruction, "Do not explain or reason ..."); a
person in the web app (``bayesobs serve``) or in the jsPsych export sees the
same prompt without the model's role line and without the instruction not to
reason, with the task's instruction in a person's words
(``Task.person_text``), so a steering condition shows its steering text to
people too.
"""

from __future__ import annotations

import numpy as np

from ..seeds import stable_seed
from .ablations import degrade_text, system_prompt
from .plan import HUMAN, plan

NO_REASONING = " Do not explain or reason. Only output the final answer."


def human_instruction(sess, t: int) -> str:
    """The instruction a person sees on trial ``t`` of session run ``sess``.

    Parameters
    ----------
    sess : bayesobs.run.runner.Session
        A planned session run.
    t : int
        Trial index within the run (numerical steering reports the range of
        the trials shown before it).

    Returns
    -------
    str
        The trial's system prompt less the role sentence and the
        no-reasoning sentence, with the task's instruction in a person's
        words (``Task.person_text``: the perception tasks' "You may reason
        step by step ..." and the search tasks' "Answer in exactly the
        format ..." are a model's).
    """
    previous = [s.value for s in sess.stimuli[:t]]
    text = system_prompt(sess.task, sess.cond, previous, sess.range, sess.options)
    role = f"You are a {sess.task.role}. "
    if text.startswith(role):
        text = text[len(role) :]
    text = text.replace(NO_REASONING, "")
    return text.replace(sess.task.instruction, sess.task.person_text())


def human_plan(spec: dict, modalities=None, conditions=None, trials=None, ami=None) -> list:
    """The session runs a person does (one run each), as the runner plans them for a model.

    The web app and the jsPsych export both use this, so a person sees the
    stimuli, order and blur a model sees (``subject`` is ``"human"``; the web
    app replaces it by each participant's id).

    Parameters
    ----------
    spec : dict
        A task spec (:func:`bayesobs.run.plan.load_spec`).
    modalities, conditions : list of str, optional
        Override the spec's modalities and conditions.
    trials : int, optional
        Trials per run (overrides the spec).
    ami : str, optional
        A folder of the AMI corpus (task ``duration``).

    Returns
    -------
    list of Session
        One run per (session, condition, modality), subject :data:`HUMAN`.

    Raises
    ------
    BayesobsInputError
        As :func:`bayesobs.run.plan.plan` raises.
    """
    return plan(spec, [HUMAN], modalities, conditions, trials, 1, ami=ami)


def practice_stimulus(spec: dict, sess):
    """The practice trial of a human study: one stimulus of the task, never logged.

    Drawn from the task by its own generator in the first session's range,
    seeded by the spec's seed (the same practice in ``serve`` and the export).

    Parameters
    ----------
    spec : dict
        The task spec (its ``seed`` and ``options``).
    sess : Session
        The first session run (its task and range).

    Returns
    -------
    Stimulus
        One stimulus drawn with seed ``spec["seed"] + 7919``.
    """
    rng = np.random.default_rng(spec["seed"] + 7919)
    return sess.task.generate(rng, *map(float, sess.range), 1, spec.get("options", {}))[0]


def stimulus_parts(sess, stim, t: int) -> tuple[str | None, str | None]:
    """The two texts of trial ``t``: the stimulus rendering and the question.

    The rendering is ``None`` in the image modality; under ``noise_text`` it
    is degraded, seeded by the run and the trial, so a model and a person
    see the same smudges.  The question (``stim.prompt``: search and
    perception tasks) goes with the stimulus in every modality.  The web app
    lays the two out apart (a question wraps, a rendering never does).

    Parameters
    ----------
    sess : Session
        The session run (its modality, condition and seed).
    stim : Stimulus
        The trial's stimulus.
    t : int
        Trial index within the run.

    Returns
    -------
    rendering : str or None
        The stimulus text (degraded under ``noise_text``); None in the image modality.
    question : str or None
        ``stim.prompt``, or None when the task asks none.
    """
    text = stim.text if sess.modality in ("text", "multimodal") else None
    if text is not None and sess.cond.text_noise > 0:
        rng = np.random.default_rng(stable_seed((sess.seed, "noise_text", t, stim.key())))
        text = degrade_text(text, sess.cond.text_noise, rng)
    return text, (stim.prompt or None)


def stimulus_text(sess, stim, t: int) -> str | None:
    """The text a subject reads on trial ``t``: the rendering, a blank line, the question.

    See :func:`stimulus_parts`.  The runner sends this to a model; the web
    app and the jsPsych export show the same two parts.

    Parameters
    ----------
    sess : Session
        The session run.
    stim : Stimulus
        The trial's stimulus.
    t : int
        Trial index within the run.

    Returns
    -------
    str or None
        The rendering and the question joined by a blank line, either alone
        when the other is missing; None when there is neither.
    """
    text, question = stimulus_parts(sess, stim, t)
    if question:
        text = question if text is None else f"{text}\n\n{question}"
    return text


def trial_blur(sess, t: int) -> float:
    """The Gaussian blur (pixels) of trial ``t``'s image: the run's schedule; 0 in the text modality.

    Parameters
    ----------
    sess : Session
        The session run (its ``blur`` schedule).
    t : int
        Trial index within the run.

    Returns
    -------
    float
        The blur SD in pixels, 0.0 in the text modality.
    """
    return float(sess.blur[t]) if sess.modality != "text" else 0.0


def stimulus_images(sess, stim, blur: float) -> tuple[bytes, ...]:
    """The PNG images a subject sees with a stimulus, in order, at ``blur``.

    Nothing (an empty tuple) in the text modality; in the image and multimodal modalities the
    task's rendering (one image for the magnitude and search tasks, two for
    object re-identification).  The runner, the web app and the jsPsych
    export all show these.

    Parameters
    ----------
    sess : Session
        The session run (its modality and task).
    stim : Stimulus
        The trial's stimulus.
    blur : float
        Gaussian blur SD in pixels (:func:`trial_blur`).

    Returns
    -------
    tuple of bytes
        The PNG images; empty in the text modality.
    """
    if sess.modality not in ("image", "multimodal"):
        return ()
    return tuple(sess.task.render_pngs(stim, blur))
