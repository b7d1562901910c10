"""Shared fixtures: seeds reset per test, the shared data folder, tolerances."""

from __future__ import annotations

import contextlib
import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

# One tolerance for comparisons with an independent reference.
RTOL = 1e-9
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# Debian's Chromium for the browser tests (Playwright's executable_path; .ci/run installs it),
# started as this machine allows: no sandbox as root, no background connections (no network)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextlib.contextmanager
def chromium_browser():
    """Debian's Chromium through Playwright, closed on exit; the test skips where it is absent."""
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(autouse=True)
def _reset_seeds():
    random.seed(0)
    np.random.seed(0)  # noqa: NPY002 - guard against code that uses the global state
    yield


@pytest.fixture(autouse=True, scope="session")
def _jax_cache_in_tmp(tmp_path_factory):
    """The CLI's JAX compilation cache (issue 32 §3) goes to a temporary folder, not ~/.cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("BAYESOBS_JAX_CACHE", str(tmp_path_factory.mktemp("jax-cache")))
    yield
    mp.undo()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA} (only present beside the repo)")
    return SHARED_DATA


def make_cell(
    rng,
    variant="static",
    params=None,
    n_per=40,
    ranges=((0.1, 0.5), (0.3, 0.7), (0.5, 0.9)),
    **keys,
):
    """A simulated cell: three sessions, one run each, as a trial DataFrame."""
    from bayesobs.fits.observers import simulate

    params = params or {"w_prior": 0.4, "sigma": 0.03}
    xs, runs = [], []
    for s, (lo, hi) in enumerate(ranges):
        xs.append(rng.uniform(lo, hi, n_per))
        runs += [f"s{s}"] * n_per
    x = np.concatenate(xs)
    run = np.array(runs)
    eps = 1e-3 * x.max()
    y = simulate(variant, params, x, run, eps=eps, rng=rng)
    df = pd.DataFrame({"session": run, "stimulus": x, "response": y, **keys})
    return df


# psignifit's demo_001: a 2AFC signal-detection experiment, 90 trials per level
PSIGNIFIT_DEMO_2AFC = np.array(
    [
        [0.0010, 45, 90],
        [0.0015, 50, 90],
        [0.0020, 44, 90],
        [0.0025, 44, 90],
        [0.0030, 52, 90],
        [0.0035, 53, 90],
        [0.0040, 62, 90],
        [0.0045, 64, 90],
        [0.0050, 76, 90],
        [0.0060, 79, 90],
        [0.0070, 88, 90],
        [0.0080, 90, 90],
        [0.0100, 90, 90],
    ]
)
