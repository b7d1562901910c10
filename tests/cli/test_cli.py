"""The command line as a package (issue 50): a module per command family, each command parsing and
printing only (the work lives in the library), ``bayesobs.cli`` itself only re-exporting."""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

import bayesobs.cli

CLI = Path(bayesobs.cli.__file__).parent
ROOT = CLI.parents[1]
MAX_BODY = 40  # lines of a cmd_* body after its docstring


def command_lengths() -> dict[str, int]:
    """``cmd_*`` function of the package -> lines of its body after the docstring."""
    out = {}
    for path in sorted(CLI.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("cmd_"):
                body = node.body[1:] if ast.get_docstring(node) is not None else node.body
                out[node.name] = body[-1].end_lineno - body[0].lineno + 1
    return out


def parser_commands() -> set[str]:
    """The ``func`` that each ``set_defaults`` of the parser's module names."""
    tree = ast.parse((CLI / "parser.py").read_text(encoding="utf-8"))
    return {
        kw.value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(".set_defaults")
        for kw in node.keywords
        if kw.arg == "func"
    }


def test_no_command_body_is_over_40_lines():
    lengths = command_lengths()
    # the scan sees every command the parser runs
    assert set(lengths) == parser_commands()
    long = {name: n for name, n in lengths.items() if n > MAX_BODY}
    assert not long, f"cmd_* bodies over {MAX_BODY} lines (move the work into the library): {long}"


def test_the_package_init_only_re_exports():
    tree = ast.parse((CLI / "__init__.py").read_text(encoding="utf-8"))
    defined = [
        type(n).__name__
        for n in tree.body
        if not isinstance(n, ast.ImportFrom | ast.Expr)
        and not (isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "__all__")
    ]
    assert defined == []
    for name in bayesobs.cli.__all__:
        assert getattr(bayesobs.cli, name).__module__.startswith("bayesobs.cli.")


def test_the_console_script_is_the_package_main():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["bayesobs"].partition(":")
    assert getattr(importlib.import_module(module), name) is bayesobs.cli.main
