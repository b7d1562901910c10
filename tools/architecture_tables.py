"""The module tables of docs/architecture.md, drawn from the package's imports and docstrings.

``python tools/architecture_tables.py [PACKAGE_DIR]`` prints, for each layer of the
top-level import-linter contract in ``pyproject.toml`` (ground first), a Markdown table:
every module of that layer, the first line of its docstring, the package modules it
imports at module level and those it imports inside functions.  A subpackage of the
wings, scores, tasks, report or web gets one row per module; a paradigm library
(``magnitude``, ``search``, ``tunnel``, ``perceptv``, ``hvs``, ``choice``) one row, with only what it imports from outside
itself.  ``--check FILE`` exits 1 when FILE does not contain every table as printed.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

# subpackages shown as one row: self-contained libraries whose inner layout is their own
ONE_ROW = ("magnitude", "search", "tunnel", "perceptv", "hvs", "choice")


def contract_layers(pyproject: Path) -> list[list[str]]:
    """Top-level layers of the first import-linter contract, lowest first, each a list of names.

    Independent siblings (``a | b``) are given as separate layers, one table each.
    """
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    layers = config["tool"]["importlinter"]["contracts"][0]["layers"]
    out = []
    for layer in reversed(layers):
        out += [re.split(r"\s*:\s*", part.strip()) for part in layer.split("|")]
    return out


def modules(root: Path) -> dict[str, Path]:
    """Dotted name (without the package's own name) of every module -> its file."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = p.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _import_nodes(node: ast.AST, inside: bool = False):
    """Every import statement under ``node``, with whether it lies inside a function."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, inside
        else:
            fn = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            yield from _import_nodes(child, inside or fn)


def imports(name: str, path: Path, mods: dict[str, Path]) -> tuple[set[str], set[str]]:
    """Package modules one module imports: ``(at module level, inside functions)``."""
    tree = _tree(path)
    parts = [p for p in name.split(".") if p]
    pkg = parts if path.name == "__init__.py" else parts[:-1]
    top, lazy = set(), set()
    for node, inside in _import_nodes(tree):
        targets = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - node.level + 1]
                mod = ".".join([*base, *([node.module] if node.module else [])])
            elif (node.module or "").split(".")[0] == "bayesobs":
                mod = node.module.partition(".")[2]
            else:
                continue
            for alias in node.names:
                full = f"{mod}.{alias.name}" if mod else alias.name
                targets.append(full if full in mods else mod)
        elif isinstance(node, ast.Import):
            targets = [
                a.name.partition(".")[2] for a in node.names if a.name.split(".")[0] == "bayesobs"
            ]
        for t in targets:
            if t and t != name:
                (lazy if inside else top).add(t)
    return top, lazy - top


def summary(path: Path) -> str:
    """First line of a module's docstring, its reST roles made Markdown code."""
    doc = ast.get_docstring(_tree(path)) or ""
    line = doc.splitlines()[0] if doc else ""
    line = re.sub(r":\w+:`~?\.?([^`]+)`", r"`\1`", line)
    line = line.replace("``", "`").replace("|", "\\|")
    return line.rstrip(".")


def rows(root: Path, names: list[str]) -> list[tuple[str, str, str, str]]:
    """Table rows ``(module, what it holds, imports, imports inside functions)`` of one layer."""
    mods = modules(root)
    out = []
    for top in names:
        members = sorted(m for m in mods if m == top or m.startswith(top + "."))
        if top in ONE_ROW:
            own = set(members)
            pairs = [imports(m, mods[m], mods) for m in members]
            lo = {t for a, _ in pairs for t in a if t.split(".")[0] != top} - own
            la = {t for _, b in pairs for t in b if t.split(".")[0] != top} - own - lo
            inner = ", ".join(m.rpartition(".")[2] for m in members if m != top)
            what = f"{summary(mods[top])} (`{inner}`)"
            out.append((f"`{top}/`", what, ", ".join(sorted(lo)), ", ".join(sorted(la))))
            continue
        for m in members:
            lo, la = imports(m, mods[m], mods)
            label = f"`{m.replace('.', '/')}/`" if mods[m].name == "__init__.py" else f"`{m}`"
            out.append((label, summary(mods[m]), ", ".join(sorted(lo)), ", ".join(sorted(la))))
    return out


def tables(root: Path, pyproject: Path) -> list[str]:
    """One Markdown table per layer, lowest first."""
    out = []
    for names in contract_layers(pyproject):
        lines = [
            "| module | what it holds | imports | inside functions |",
            "|---|---|---|---|",
        ]
        lines += [f"| {a} | {b} | {c or '—'} | {d or '—'} |" for a, b, c, d in rows(root, names)]
        out.append("\n".join(lines))
    return out


def main(argv=None) -> int:
    """Print the tables, or check that a page holds them (1 when it does not)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("package", nargs="?", default="bayesobs", help="package folder")
    ap.add_argument("--check", metavar="FILE", help="fail unless FILE contains every table")
    args = ap.parse_args(argv)
    root = Path(args.package)
    if not (root / "__init__.py").is_file():
        print(f"architecture_tables: {root} is not a package folder", file=sys.stderr)
        return 2
    found = tables(root, root.resolve().parent / "pyproject.toml")
    if args.check:
        text = Path(args.check).read_text(encoding="utf-8")
        stale = [t.splitlines()[2].split("|")[1].strip() for t in found if t not in text]
        for first in stale:
            print(f"{args.check}: the table starting at {first} is out of date", file=sys.stderr)
        return 1 if stale else 0
    print("\n\n".join(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
