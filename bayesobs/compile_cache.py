"""JAX's persistent compilation cache for the commands that compile (issue 32 §3).

``fit --method posterior`` and ``calibrate`` compile the NumPyro models with
XLA; the same programs recur from run to run, so the CLI turns on JAX's
persistent compilation cache before those commands run (:func:`enable`).
Nothing here runs at import time and nothing imports JAX until
:func:`enable` is called: a library user decides for themselves.

The folder is ``$BAYESOBS_JAX_CACHE`` when set, else
``$XDG_CACHE_HOME/bayesobs/jax``, else ``~/.cache/bayesobs/jax``;
``BAYESOBS_JAX_CACHE=off`` (or ``0``, ``none``, empty) turns the cache off.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "BAYESOBS_JAX_CACHE"
OFF = ("", "0", "off", "none", "false", "no")
# cache every program that took this long to compile (JAX's default, 1 s, leaves out the
# NumPyro kernels of small cells, which are the ones compiled again and again)
MIN_COMPILE_SECONDS = 0.1


def cache_dir(environ: dict[str, str] | None = None) -> Path | None:
    """The cache folder from the environment, or None when the cache is turned off.

    Parameters
    ----------
    environ : dict of str to str, optional
        The environment to read (``BAYESOBS_JAX_CACHE``, ``XDG_CACHE_HOME``);
        ``os.environ`` when None.

    Returns
    -------
    pathlib.Path or None
        ``$BAYESOBS_JAX_CACHE`` (``~`` expanded) when set, else
        ``$XDG_CACHE_HOME/bayesobs/jax``, else ``~/.cache/bayesobs/jax``;
        None when ``BAYESOBS_JAX_CACHE`` is one of :data:`OFF` (``off``,
        ``0``, ``none``, ``false``, ``no`` or empty, any case).  Nothing is
        created.
    """
    env = os.environ if environ is None else environ
    if ENV in env:
        value = env[ENV].strip()
        return None if value.lower() in OFF else Path(value).expanduser()
    base = env.get("XDG_CACHE_HOME", "").strip()
    root = Path(base).expanduser() if base else Path.home() / ".cache"
    return root / "bayesobs" / "jax"


def enable(
    environ: dict[str, str] | None = None, min_compile_seconds: float = MIN_COMPILE_SECONDS
) -> Path | None:
    """Point JAX's persistent compilation cache at :func:`cache_dir`; return the folder used.

    Programs that took at least ``min_compile_seconds`` to compile are kept,
    whatever their size.  Imports JAX (only here).

    Parameters
    ----------
    environ : dict of str to str, optional
        The environment :func:`cache_dir` reads; ``os.environ`` when None.
    min_compile_seconds : float
        The shortest compile time (seconds) of a program worth caching;
        default :data:`MIN_COMPILE_SECONDS` (0.1 s, below JAX's 1 s).

    Returns
    -------
    pathlib.Path or None
        The folder now used (created if absent); None (and JAX's settings
        unchanged) when the cache is turned off, or when the folder cannot be
        created (a read-only home: the run goes on without a cache).
    """
    folder = cache_dir(environ)
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    import jax  # only for the commands that compile; jax costs ~1 s of start-up

    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder
