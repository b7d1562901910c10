"""JAX's persistent compilation cache for the commands that compile (issue 32 §3)."""

from __future__ import annotations

import os
from pathlib import Path

ENV = "BAYESOBS_JAX_CACHE"
OFF = ("", "0", "off", "none", "false", "no")
# cache every program that took this long to compile (JAX's default, 1 s, leaves out the
# NumPyro kernels of small cells, which are the ones compiled again and again)
MIN_COMPILE_SECONDS = 0.1


def cache_dir(environ: dict[str, str] | None = None) -> Path | None:
    """The cache folder from the environment, or None when the cache is turned off."""
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
    """Point JAX's persistent compilation cache at :func:`cache_dir`; return the folder used."""
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
