"""Every third-party module the package imports is a declared dependency.

`make demo` installs `bayesobs` without the dev extras; a module imported by
the package but installed only by `dev` (httpx once was) breaks it on a fresh
machine while the test suite, which has the extras, passes.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _imported_top_levels() -> dict[str, str]:
    """Top-level module -> one file that imports it (absolute imports only)."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "bayesobs").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for n in names:
                found.setdefault(n.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_imported_distribution_is_a_runtime_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_name(r) for r in project["dependencies"]}
    # the extras (posterior, web, llm, distributed) are imported only by the commands that need
    # them, with one line naming the extra when missing (tests/test_extras.py)
    extras = project["optional-dependencies"]
    optional = {_name(r) for k, reqs in extras.items() if k not in ("dev", "docs") for r in reqs}
    optional |= {"dask", "distributed", "dask-jobqueue"}
    dists = packages_distributions()
    missing = []
    for module, where in _imported_top_levels().items():
        if module == "bayesobs" or module in sys.stdlib_module_names:
            continue
        owners = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if not owners & (declared | optional):
            missing.append(f"{module} ({where}; distribution {', '.join(sorted(owners))})")
    assert not missing, "imported but not in [project] dependencies: " + "; ".join(missing)
