"""How many public functions have numpy ``Parameters``/``Returns`` sections.

``python tests/docstring_coverage.py [MODULE.py ...]`` prints, per module of the package (or
of the files given), ``documented/public`` and the names still missing a section, then the
total as "N of M public functions have Parameters/Returns".  A public function is a
module-level function or a method of a public class whose name is in the module's ``__all__``
(or, without ``__all__``, has no leading underscore);
it needs ``Parameters`` when it takes an argument besides ``self``/``cls`` and ``Returns``
(or ``Yields``) unless it is annotated ``-> None``, is ``__init__`` or a property.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "bayesobs"


def _section(doc: str, name: str) -> bool:
    return re.search(rf"^\s*{name}\n\s*-{{3,}}", doc, re.M) is not None


def public_functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The public functions and public methods of public classes of one module."""
    out = []
    body = ast.parse(path.read_text()).body
    listed = next(
        (
            set(ast.literal_eval(n.value))
            for n in body
            if isinstance(n, ast.Assign)
            and any(getattr(t, "id", "") == "__all__" for t in n.targets)
        ),
        None,
    )

    def public(name: str) -> bool:
        return name in listed if listed is not None else not name.startswith("_")

    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if public(node.name):
                out.append(node)
        elif isinstance(node, ast.ClassDef) and public(node.name):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    if not sub.name.startswith("_"):
                        out.append(sub)
    return out


def missing(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The sections a function's docstring lacks (empty when it is complete)."""
    doc = ast.get_docstring(fn) or ""
    args = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
    args += [a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None]
    takes = [a for a in args if a not in ("self", "cls")]
    decorators = {ast.unparse(d) for d in fn.decorator_list}
    returns_none = fn.returns is not None and ast.unparse(fn.returns) == "None"
    needs_returns = not (returns_none or "property" in decorators or fn.name == "__init__")
    gaps = []
    if takes and not _section(doc, "Parameters"):
        gaps.append("Parameters")
    if needs_returns and not (_section(doc, "Returns") or _section(doc, "Yields")):
        gaps.append("Returns")
    return gaps


def coverage(paths: list[Path]) -> dict[str, tuple[int, int, list[str]]]:
    """Per module: (documented, public, names missing a section)."""
    out = {}
    for path in paths:
        fns = public_functions(path)
        gaps = [f"{fn.name} ({', '.join(m)})" for fn in fns if (m := missing(fn))]
        out[str(path.relative_to(PACKAGE.parent))] = (len(fns) - len(gaps), len(fns), gaps)
    return out


def main(argv: list[str]) -> int:
    paths = [Path(a).resolve() for a in argv] or sorted(PACKAGE.rglob("*.py"))
    table = coverage(paths)
    for module, (done, total, gaps) in table.items():
        if total:
            print(f"{module:40s} {done:4d}/{total:<4d} {'; '.join(gaps)[:200]}")
    done = sum(d for d, _, _ in table.values())
    total = sum(t for _, t, _ in table.values())
    print(f"{done} of {total} public functions have Parameters/Returns")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
