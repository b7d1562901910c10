"""The docs site's promises that the code can break: complete docstrings, a complete layout."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import chromium_browser
from docs_pages import ROOT, page
from docstring_coverage import PACKAGE, coverage


# the modules of the API reference (docs/api): every public function there has numpy
# Parameters/Returns; a helper elsewhere has a one-line docstring (issue 50)
def _api_modules() -> list[str]:
    out = set()
    for ref in (ROOT / "docs" / "api").glob("*.md"):
        for name in re.findall(r"^::: bayesobs\.([\w.]+)$", ref.read_text(), re.M):
            path = name.replace(".", "/")
            out.add(f"{path}.py" if (PACKAGE / f"{path}.py").exists() else f"{path}/__init__.py")
    return sorted(out)


COMPLETE = _api_modules()


@pytest.mark.parametrize("module", COMPLETE)
def test_every_public_function_has_parameters_and_returns(module):
    ((_, (done, total, gaps)),) = coverage([PACKAGE / module]).items()
    assert not gaps, f"{module}: {gaps}"
    assert done == total


def test_the_architecture_page_places_every_module():
    text = page("architecture.md")
    names = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    names |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    placed = set(re.findall(r"`(\w+)/?`", text))
    assert not names - placed, (
        f"modules missing from docs/architecture.md: {sorted(names - placed)}"
    )


def test_the_api_reference_names_only_modules_that_exist():
    for ref in (ROOT / "docs" / "api").glob("*.md"):
        for module in re.findall(r"^::: ([\w.]+)$", ref.read_text(), re.M):
            parts = module.split(".")[1:]
            path = PACKAGE.joinpath(*parts)
            assert path.with_suffix(".py").exists() or (path / "__init__.py").exists(), module


def _tables_tool():
    spec = importlib.util.spec_from_file_location(
        "architecture_tables", ROOT / "tools" / "architecture_tables.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_architecture_tables_are_drawn_from_the_code_as_it_is():
    # after moving a module or changing its imports: python tools/architecture_tables.py
    tool = _tables_tool()
    text = page("architecture.md")
    stale = [
        t.splitlines()[2] for t in tool.tables(PACKAGE, ROOT / "pyproject.toml") if t not in text
    ]
    assert not stale, f"docs/architecture.md: tables out of date, first rows: {stale}"


def test_the_table_check_notices_a_changed_import(tmp_path, capsys):
    tool = _tables_tool()
    page_path = tmp_path / "architecture.md"
    good = (ROOT / "docs" / "architecture.md").read_text()
    page_path.write_text(good)
    assert tool.main([str(PACKAGE), "--check", str(page_path)]) == 0
    row = next(line for line in good.splitlines() if line.startswith("| `fits.lapse` |"))
    page_path.write_text(good.replace(row, row.replace("fits.kernel, ", "")))
    assert tool.main([str(PACKAGE), "--check", str(page_path)]) == 1
    assert "out of date" in capsys.readouterr().err


@pytest.mark.slow  # the build renders the API reference: about 15 s
def test_the_built_site_works_opened_from_disk_in_chromium(tmp_path):
    """README: `make docs`, then open site/index.html: every nav link reaches its page, offline."""
    pytest.importorskip("mkdocs", reason="the docs extra (mkdocs) is not installed")
    site = tmp_path / "site"
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "--site-dir", str(site)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, timeout=600)
    outside: list[str] = []
    with chromium_browser() as b:
        page_ = b.new_page()
        page_.route(
            re.compile(r"^(?!file:).*"), lambda r: (outside.append(r.request.url), r.abort())
        )
        page_.goto((site / "index.html").as_uri())
        nav = page_.eval_on_selector_all(
            "nav .wy-menu-vertical a.reference.internal",
            "as => as.map(a => [a.textContent.trim(), a.href])",
        )
        pages_ = [(t, h) for t, h in nav if "#" not in h]
        listed = re.findall(
            r"^\s*- [^:]+: ([\w/.-]+)\.md$", (ROOT / "mkdocs.yml").read_text(), re.M
        )
        want = {(site / f"{md}.html").as_uri() for md in listed} - {(site / "index.html").as_uri()}
        assert {h for _, h in pages_} == want  # every page of mkdocs.yml's nav, once
        for title, href in pages_:
            page_.goto(href)
            assert page_.url.endswith(".html"), (title, page_.url)  # not a directory listing
            assert Path(page_.url.removeprefix("file://")).is_file(), (title, page_.url)
            assert page_.title().startswith(title), (title, page_.title())
            assert page_.locator(".rst-content h1").count() >= 1, (title, page_.url)
        # the links inside the pages reach files too (404.html is for a web server: absolute)
        for html in set(site.rglob("*.html")) - {site / "404.html"}:
            for href in re.findall(r'href="([^"#:]+)(?:#[^"]*)?"', html.read_text()):
                assert (html.parent / href).exists(), (html.relative_to(site), href)
    assert not outside, f"requests left file://: {outside[:5]}"


def test_names_the_api_reference_re_exports_keep_parameters_and_returns():
    """A package face's ``__all__`` (``bayesobs.scores``, ``bayesobs.fits.posterior``, ...) lists
    functions defined elsewhere: the reference shows their docstrings, so they are complete too."""
    import ast
    import importlib
    import inspect

    from docstring_coverage import missing

    gaps = []
    for module in COMPLETE:
        name = "bayesobs." + module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        mod = importlib.import_module(name)
        for public in getattr(mod, "__all__", ()):
            obj = getattr(mod, public)
            if not inspect.isfunction(obj) or obj.__module__ == name:
                continue
            tree = ast.parse(inspect.getsource(obj))
            gaps += [f"{name}.{public}: {gap}" for gap in missing(tree.body[0])]
    assert not gaps, gaps
