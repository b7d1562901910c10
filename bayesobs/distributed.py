"""Running independent tasks here or on a Dask cluster (``bayesobs[distributed]``).

The default is this process, with no extra processes.  A Dask scheduler
address (``--scheduler tcp://HOST:8786``, or the ``BAYESOBS_SCHEDULER``
environment variable) sends the same tasks to that cluster instead: a
``dask.distributed.LocalCluster`` on this machine, or a SLURM/PBS cluster
started with ``dask-jobqueue`` (docs/scale.md, "Scale").  Every task is a pure
function of its inputs (seeds included), so the results are the same
wherever it runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

ENV = "BAYESOBS_SCHEDULER"
_CURRENT: ContextVar = ContextVar("bayesobs_scheduler", default=None)


@contextmanager
def use_scheduler(scheduler) -> Iterator[None]:
    """Within the block, library calls send their tasks to ``scheduler`` (None: no change)."""
    token = _CURRENT.set(scheduler or _CURRENT.get())
    try:
        yield
    finally:
        _CURRENT.reset(token)


def scheduler_address(scheduler=None):
    """``scheduler``, else the one of :func:`use_scheduler`, else ``$BAYESOBS_SCHEDULER``, else None."""
    if scheduler is not None and scheduler != "":
        return scheduler
    return _CURRENT.get() or os.environ.get(ENV) or None


def map_tasks(fn: Callable, items: Iterable, scheduler=None) -> list:
    """``[fn(x) for x in items]``, here or on the Dask cluster at ``scheduler``.

    Parameters
    ----------
    fn : callable
        A module-level (picklable) function of one task.
    items : iterable
        The tasks.
    scheduler : str or distributed.Client, optional
        A scheduler address (``tcp://host:8786``) or a connected ``Client``;
        default :func:`scheduler_address`.  None runs in this process.

    Returns
    -------
    list
        The results, in the order of ``items``.
    """
    items = list(items)
    address = scheduler_address(scheduler)
    if address is None or not items:
        return [fn(x) for x in items]
    try:
        # optional dependency: dask.distributed (the distributed extra)
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(
            "a Dask scheduler was given but dask.distributed is not installed: "
            "pip install 'bayesobs[distributed]'"
        ) from exc
    if isinstance(address, Client):
        return address.gather(address.map(fn, items, pure=False))
    with Client(address, set_as_default=False) as client:
        return client.gather(client.map(fn, items, pure=False))


__all__ = ["ENV", "map_tasks", "scheduler_address", "use_scheduler"]
