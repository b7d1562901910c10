"""The architecture is enforced (issue 29): no import circles, no private cross-module imports,
no upward imports (import-linter's contracts in pyproject.toml), lazy imports only with a reason."""

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _checker():
    spec = importlib.util.spec_from_file_location(
        "check_imports", ROOT / "tools" / "check_imports.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_package_has_no_circle_no_private_import_no_unexplained_lazy_import():
    assert _checker().problems(ROOT / "bayesobs") == []


def _toy(tmp_path, files: dict) -> Path:
    pkg = tmp_path / "toy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, text in files.items():
        (pkg / f"{name}.py").write_text(text)
    return pkg


def test_the_checker_finds_circles_private_and_unexplained_lazy_imports(tmp_path, capsys):
    check = _checker()
    pkg = _toy(
        tmp_path,
        {
            "a": "from .b import helper\n",
            "b": "def helper():\n    from .a import x\n    return x\n",
            "c": "from .a import _hidden, __version__\n",
            "d": "def f():\n    # start-up time: only here\n    import json\n    import math\n    return json, math\n",
        },
    )
    sub = pkg / "sub"  # a subpackage shares its private helpers inside, never outside
    sub.mkdir()
    (sub / "__init__.py").write_text("from .y import _shared\n")
    (sub / "x.py").write_text("from .y import _shared\n")
    (sub / "y.py").write_text("_shared = 1\n")
    (pkg / "e.py").write_text("from .sub.y import _shared\n")
    found = check.problems(pkg)
    assert "private import: toy.e takes toy.sub.y._shared" in found
    assert "import circle: toy.a <-> toy.b" in found
    assert "private import: toy.c takes toy.a._hidden" in found
    assert "function-level import without a reason: toy.b line 2" in found
    assert not any("toy.d" in line or "__version__" in line for line in found)
    assert len(found) == 4
    assert check.main([str(pkg)]) == 1
    assert check.main([str(tmp_path / "nowhere")]) == 2


@pytest.mark.skipif(
    shutil.which("lint-imports") is None
    and not (Path(sys.executable).parent / "lint-imports").exists(),
    reason="import-linter not installed (dev extra)",
)
def test_import_linter_contracts_are_kept():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    proc = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "BROKEN" not in proc.stdout and "0 broken" in proc.stdout


def test_no_paradigm_imports_another():
    """The paradigms plug in (issue 50): an independence contract over their five packages."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    independent = [c["modules"] for c in config["contracts"] if c["type"] == "independence"]
    paradigms = {f"bayesobs.{p}" for p in ("magnitude", "search", "tunnel", "perceptv", "hvs")}
    assert any(paradigms <= set(modules) for modules in independent)


def test_the_wings_do_not_shadow_the_library_api():
    """``bayesobs.fit`` stays the function (the fit wing is ``bayesobs.fits``); old short names load lazily."""
    code = (
        "import importlib, pkgutil, bayesobs\n"
        "for m in pkgutil.walk_packages(bayesobs.__path__, 'bayesobs.'):\n"
        "    importlib.import_module(m.name)\n"
        "assert callable(bayesobs.fit) and callable(bayesobs.sweep)\n"
        "assert bayesobs.fits.posterior.__name__ == 'bayesobs.fits.posterior'\n"
        "assert bayesobs.run.runner.__name__ == 'bayesobs.run.runner'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]


# issue 50's house measures: a package a newcomer can read (41,543 lines when it closed, under
# 42,000; issues 51-54 then added inspect_ai both ways, python: subjects, table tasks, platform
# files, costs and budgets, adaptive sweeps and Bayesian psychometrics, ~5,000 lines)
BUDGET_LINES, MODULE_LINES = 48_000, 1_000


def _package_files() -> list[Path]:
    return [p for p in sorted((ROOT / "bayesobs").rglob("*.py")) if "testing" not in p.parts]


def _docstring_lines(tree: ast.Module) -> int:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return sum(
        node.body[0].end_lineno - node.body[0].lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    )


def test_the_package_keeps_its_line_budget_and_docstrings_are_at_most_a_quarter():
    lines = docs = 0
    for path in _package_files():
        text = path.read_text()
        lines += text.count("\n")
        docs += _docstring_lines(ast.parse(text))
    assert lines <= BUDGET_LINES, f"bayesobs/ (less testing/) is {lines} lines"
    assert docs <= lines / 4, f"{docs} of {lines} lines are docstrings"


def test_no_module_is_over_a_thousand_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in _package_files()
        if (n := p.read_text().count("\n")) > MODULE_LINES
    }
    assert not long, long


def test_no_private_module_of_another_library_is_imported():
    found = []
    for path in _package_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] != "bayesobs" and any(
                    p.startswith("_") and not p.startswith("__") for p in parts
                ):
                    found.append(f"{path.relative_to(ROOT)}: {name}")
    assert not found, found


def test_one_module_runs_work_elsewhere():
    """Issue 50: only bayesobs/distributed.py starts processes (grep -rln of the three names)."""
    pattern = re.compile(r"ProcessPoolExecutor|multiprocessing|subprocess\.Popen")
    found = {
        str(p.relative_to(ROOT))
        for p in (ROOT / "bayesobs").rglob("*.py")
        if pattern.search(p.read_text())
    }
    assert found == {"bayesobs/distributed.py"}
