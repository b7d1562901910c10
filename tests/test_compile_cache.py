"""Issue 32 §3: JAX's persistent compilation cache, in the user's cache folder, set by the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bayesobs.compile_cache import cache_dir


def test_the_folder_follows_the_environment(tmp_path):
    home = Path.home()
    assert cache_dir({}) == home / ".cache" / "bayesobs" / "jax"
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "bayesobs" / "jax"
    env = {"XDG_CACHE_HOME": "/elsewhere", "BAYESOBS_JAX_CACHE": str(tmp_path / "c")}
    assert cache_dir(env) == tmp_path / "c"
    for off in ("off", "0", "", "none"):
        assert cache_dir({"BAYESOBS_JAX_CACHE": off}) is None


def test_importing_the_package_sets_no_jax_option():
    code = "import sys, bayesobs.cli, bayesobs.compile_cache; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_enable_makes_a_compiled_program_land_in_the_folder(tmp_path):
    folder = tmp_path / "jax"
    code = (
        "import jax, jax.numpy as jnp\n"
        "from bayesobs.compile_cache import enable\n"
        f"assert str(enable({{'BAYESOBS_JAX_CACHE': {str(folder)!r}}}, 0.0)) == {str(folder)!r}\n"
        "f = jax.jit(lambda x: jnp.cumsum(jnp.sin(x) ** 2) @ jnp.cos(x))\n"
        "print(float(f(jnp.arange(1000.0))))\n"
    )
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    files = sorted(p.name for p in folder.rglob("*") if p.is_file())
    assert files, "no cache entry written"
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert sorted(p.name for p in folder.rglob("*") if p.is_file()) == files  # read, not rewritten
