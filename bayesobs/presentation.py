"""What a subject is shown on a trial, in one place for every front end.

The runner sends a model the system prompt of :func:`bayesobs.ablations.system_prompt`
(role, steering, the task's instruction, "Do not explain or reason ..."); a
person in the web app (``bayesobs serve``) or in the jsPsych export sees the
same prompt without the model's role line and without the instruction not to
reason, so a steering condition shows its steering text to people too.
"""

from __future__ import annotations

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
