"""Read a package's imports and fail on import circles and private cross-module imports.

Run by ``make lint`` (beside import-linter's layer contracts in pyproject.toml)::

    python tools/check_imports.py [PACKAGE_DIR] [--graph]

Every ``import`` and ``from ... import`` inside the package counts, at module
level or inside a function, so a circle hidden in a function-level import is
still a circle.  A *private cross-module import* is ``from X import _name``
where ``X`` is a module of another subpackage (dunder names such as
``__version__`` are not private).  An import inside a function must say why
in a comment on its line or the line above (an optional dependency, start-up
time), or follow such an import directly; the modules in ``LAZY_EXEMPT``
are not checked for that.  ``--graph`` prints each module's imports and the
counts.  Exit status 1 when there is a circle, a private import or an
unexplained function-level import.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

# the CLI imports each command's modules when the command runs: that is its start-up design
LAZY_EXEMPT = ("bayesobs.cli",)


def module_names(root: Path) -> dict[str, Path]:
    """Dotted name of every module under ``root`` (a package folder) -> its file."""
    mods = {}
    for p in sorted(root.rglob("*.py")):
        parts = p.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts)
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        mods[name] = p
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]):
    """``(statement, target, imported_name, inside_function)`` of each internal import of one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top = next(iter(mods)).split(".")[0]
    inner = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    inner.add(id(sub))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != top:
                continue
            for alias in node.names:
                full = f"{mod}.{alias.name}"
                target = full if full in mods else mod
                yield id(node), target, (None if full in mods else alias.name), id(node) in inner
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == top:
                    yield id(node), alias.name, None, id(node) in inner


def _one_subpackage(a: str, b: str) -> bool:
    """Whether modules ``a`` and ``b`` lie in one subpackage (below the top package)."""
    parent = a.rpartition(".")[0]
    return "." in parent and parent == b.rpartition(".")[0]


def read_graph(root: Path):
    """Module graph, private cross-module imports and import counts of a package folder.

    Returns ``(edges, private, total, inner)``: ``edges`` maps each module to
    the set of modules it imports, ``private`` lists ``(module, target, name)``;
    ``total`` and ``inner`` count import statements, all and inside functions.
    """
    mods = module_names(root)
    edges: dict[str, set[str]] = defaultdict(set)
    private, total, inner = [], 0, 0
    for name, path in mods.items():
        seen = set()
        for statement, target, imported, in_function in _imports(name, path, mods):
            if statement not in seen:
                seen.add(statement)
                total += 1
                inner += in_function
            if target != name:
                edges[name].add(target)
            if (
                imported is not None
                and imported.startswith("_")
                and not (imported.startswith("__") and imported.endswith("__"))
                and target != name
                and not _one_subpackage(name, target)
            ):
                private.append((name, target, imported))
    return dict(edges), private, total, inner


def unexplained_lazy_imports(root: Path, exempt=LAZY_EXEMPT) -> list[tuple[str, int]]:
    """``(module, line)`` of each function-level import without a reason comment.

    A reason is a comment on the import's first line or on the line above;
    an import that directly follows an explained one shares its reason.
    """
    out = []
    for name, path in module_names(root).items():
        if name in exempt:
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text)
        seen = set()
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            explained_end = -1  # last line of the latest explained import of this body
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in seen:
                    continue
                seen.add(node.lineno)
                first, above = lines[node.lineno - 1], lines[node.lineno - 2].strip()
                if "#" in first or above.startswith("#") or node.lineno - 1 == explained_end:
                    explained_end = node.end_lineno
                else:
                    out.append((name, node.lineno))
    return sorted(out)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted.

    A package's ``__init__`` importing its own submodules is not a circle by
    itself; it is one only where a submodule imports the package back.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(out)


def problems(root: Path) -> list[str]:
    """One line per circle, private cross-module import and unexplained function-level import."""
    edges, private, _, _ = read_graph(root)
    lines = [f"import circle: {' <-> '.join(c)}" for c in circles(edges)]
    lines += [f"private import: {m} takes {t}.{n}" for m, t, n in private]
    lines += [
        f"function-level import without a reason: {m} line {n}"
        for m, n in unexplained_lazy_imports(root)
    ]
    return lines


def main(argv=None) -> int:
    """Print the problems of a package's imports; 1 if there are any."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("package", nargs="?", default="bayesobs", help="package folder")
    ap.add_argument("--graph", action="store_true", help="print the module graph and counts")
    args = ap.parse_args(argv)
    root = Path(args.package)
    if not (root / "__init__.py").is_file():
        print(f"check_imports: {root} is not a package folder", file=sys.stderr)
        return 2
    edges, private, total, inner = read_graph(root)
    if args.graph:
        for m in sorted(edges):
            print(m, "->", " ".join(sorted(edges[m])))
        print(
            f"modules: {len(module_names(root))}  internal import statements: {total}  "
            f"inside functions: {inner}  private: {len(private)}  circles: {len(circles(edges))}"
        )
    found = problems(root)
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
