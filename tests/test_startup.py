"""Issue 32 §4: a command imports only what it needs (no timing: which modules a process loads)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bayesobs.cli import main
from bayesobs.errors import EXTRAS

# modules that a light command must not load: figures, the random forest, the browser, and
# every optional extra's (the JAX stack, the API clients, the web server, Dask; issue 50)
HEAVY = ("matplotlib", "sklearn", "playwright", *(m for ms in EXTRAS.values() for m in ms))


def loaded_after(args: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    """The modules of ``HEAVY + extra`` that ``bayesobs ARGS`` has loaded when it returns."""
    code = (
        "import json, sys\n"
        "from bayesobs.cli import main\n"
        "try:\n"
        f"    code = main({args!r})\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "assert code in (0, None), code\n"
        f"print(json.dumps([m for m in {HEAVY + extra!r} if m in sys.modules]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_help_loads_no_numerics():
    assert loaded_after(["--help"], ("numpy", "pandas", "scipy", "pyarrow", "PIL")) == []


def test_the_cli_starts_without_asyncio():
    """Only the runner needs asyncio (~0.1-0.2 s to import): `fit`, `score`, `report` never load it."""
    assert loaded_after(["--help"], ("asyncio",)) == []


@pytest.fixture
def tiny_trials(tmp_path):
    from bayesobs.fits.synthetic import simulated_trials

    path = tmp_path / "tiny.csv"
    simulated_trials(n_subjects=1, trials_per_session=10, seed=0).to_csv(path, index=False)
    return path


def test_fit_loads_no_jax_figures_or_clients(tiny_trials, tmp_path):
    fit = ["fit", str(tiny_trials), "--out", str(tmp_path / "f")]
    assert loaded_after(fit, ("PIL", "asyncio")) == []
    assert (tmp_path / "f" / "fits.csv").exists()


def test_sweep_with_simulated_subjects_loads_no_clients_or_figures(tmp_path):
    out = tmp_path / "run"
    args = ["run", "circle_sizes", "--subject", "sim:parallel", "--trials", "2", "--out", str(out)]
    assert loaded_after([*args, "--no-progress"]) == []
    assert (out / "trials.jsonl").read_text().count("\n") >= 2


def test_score_of_magnitude_trials_loads_no_scipy_stats(tiny_trials, tmp_path):
    # scipy.stats costs ~0.7 s to import; magnitude scores (no probe) never need it
    args = ["score", str(tiny_trials), "--no-probe", "--bootstrap", "2", "--out", str(tmp_path)]
    assert loaded_after(args, ("scipy.stats", "sklearn")) == []
    assert (tmp_path / "bayesbench.csv").exists()


def test_report_without_a_posterior_loads_no_extra(tiny_trials, tmp_path):
    """`report` of a score folder (no posterior) runs on the base install (issue 50)."""
    score = [
        "score",
        str(tiny_trials),
        "--no-probe",
        "--bootstrap",
        "2",
        "--out",
        str(tmp_path / "s"),
    ]
    assert main(score) == 0
    loaded = loaded_after(["report", str(tmp_path / "s"), "--out", str(tmp_path / "r")])
    assert not [m for ms in EXTRAS.values() for m in ms if m in loaded], loaded  # figures are fine
    assert (tmp_path / "r" / "index.html").exists()
