"""The inspect tasks of bayesobs, found through inspect_ai's entry point: ``bayesobs/NAME``.

One ``@task`` per task spec and protocol of :func:`bayesobs.inspectai.tasks.spec_files`
(``inspect eval bayesobs/line_ratio``, ``inspect eval-set bayesobs/bayesbench``),
its arguments those of ``bayesobs run`` (``-T modality=text -T trials=5``).
"""

from __future__ import annotations

from inspect_ai import Task, task

from .tasks import bayesobs_task, spec_files


def _register(name: str):
    """The ``@task`` of one spec or protocol."""

    def make(modality=None, condition=None, trials=None, runs=None, ami=None, hvs=None) -> Task:
        return bayesobs_task(name, modality, condition, trials, runs, ami, hvs)

    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"bayesobs {name} (tasks/{name}.toml): one sample per session run."
    return task(name=name)(make)


TASKS = {name: _register(name) for name in spec_files()}
globals().update(TASKS)
