"""Issue 50: the heavy optional parts are extras; a command that needs a missing one names it."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from bayesobs.cli import main
from bayesobs.errors import EXTRAS
from bayesobs.fits.synthetic import simulated_trials

ROOT = Path(__file__).resolve().parents[1]


def _without(monkeypatch, *modules: str) -> None:
    """As if ``modules`` were not installed: an import of any of them fails (None in sys.modules)."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def _fresh_subjects(monkeypatch) -> None:
    """``bayesobs.run.subjects``' modules imported afresh, as in a new process; all put back after.

    The package's attributes are put back too: a module imported afresh replaces its
    attribute, and a later test that patches ``subjects.openai_chat`` must patch the module
    the runner uses (the one ``sys.modules`` holds again).
    """
    import bayesobs.run.subjects as package

    for name in [m for m in sys.modules if m.startswith("bayesobs.run.subjects.")]:
        monkeypatch.delitem(sys.modules, name)
        child = name.rpartition(".")[2]
        if hasattr(package, child):
            monkeypatch.setattr(package, child, getattr(package, child))


def _one_line(capsys, argv: list[str], extra: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    found = re.search(
        rf"bayesobs {argv[0]} needs the \[{extra}\] extra \((\w+) is not installed\)", err
    )
    assert found and found[1] in EXTRAS[extra], err
    assert f"pip install 'bayesobs[{extra}]'" in err


def test_a_posterior_fit_without_the_posterior_extra(tmp_path, monkeypatch, capsys):
    path = tmp_path / "t.csv"
    simulated_trials(n_subjects=1, trials_per_session=10, seed=0).to_csv(path, index=False)
    _without(monkeypatch, *EXTRAS["posterior"])
    argv = ["fit", str(path), "--out", str(tmp_path / "o"), "--method", "posterior"]
    _one_line(capsys, [*argv, "--draws", "10", "--warmup", "10"], "posterior")
    assert (tmp_path / "o" / "fits.csv").exists()  # the maximum-likelihood fits are kept


def test_serve_without_the_web_extra(tmp_path, monkeypatch, capsys):
    _without(monkeypatch, *EXTRAS["web"])
    argv = ["serve", str(ROOT / "tasks" / "line_ratio.toml"), "--out", str(tmp_path / "s")]
    _one_line(capsys, [*argv, "--port", "1"], "web")


def test_an_api_subject_without_the_llm_extra(tmp_path, monkeypatch, capsys):
    _without(monkeypatch, *EXTRAS["llm"])
    _fresh_subjects(monkeypatch)
    argv = ["run", "line_ratio", "--subject", "openai:gpt-4o", "--trials", "1"]
    _one_line(capsys, [*argv, "--out", str(tmp_path / "r"), "--no-progress"], "llm")


def test_a_scheduler_without_the_distributed_extra(tmp_path, monkeypatch, capsys):
    path = tmp_path / "t.csv"
    simulated_trials(n_subjects=1, trials_per_session=10, seed=0).to_csv(path, index=False)
    _without(monkeypatch, *EXTRAS["distributed"])
    argv = ["fit", str(path), "--out", str(tmp_path / "o"), "--scheduler", "tcp://127.0.0.1:1"]
    _one_line(capsys, argv, "distributed")


def test_an_unrelated_missing_module_is_not_dressed_as_an_extra(tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    simulated_trials(n_subjects=1, trials_per_session=10, seed=0).to_csv(path, index=False)
    _without(monkeypatch, "jax", "numpyro")
    monkeypatch.setitem(EXTRAS, "posterior", ("arviz",))  # jax now belongs to no extra
    with pytest.raises(ImportError):
        main(["fit", str(path), "--out", str(tmp_path / "o"), "--method", "posterior"])


def test_the_extras_named_are_the_extras_in_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["optional-dependencies"]
    base = " ".join(project["dependencies"]).lower()
    for extra, modules in EXTRAS.items():
        assert extra in declared, extra
        for module in modules:  # a module of an extra is not a base dependency
            assert module.lower().replace("_", "-") not in base, (extra, module)


def test_an_inspect_subject_without_the_inspect_extra(tmp_path, monkeypatch, capsys):
    loaded = [m for m in sys.modules if m.startswith("inspect_ai.")]  # by an earlier test
    _without(monkeypatch, *EXTRAS["inspect"], *loaded)
    _fresh_subjects(monkeypatch)
    argv = ["run", "line_ratio", "--subject", "inspect:mockllm/model", "--trials", "1"]
    _one_line(capsys, [*argv, "--out", str(tmp_path / "r"), "--no-progress"], "inspect")
    assert not (tmp_path / "r" / "trials.jsonl").exists()
