"""No import circles in app/: every import counts, function-level and TYPE_CHECKING ones too.

Fast: it reads the sources with ``ast`` and imports no model code."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.devtools.import_circles import circles, import_graph

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

ROOT = Path(__file__).resolve().parents[2]


def test_no_module_of_app_is_in_an_import_circle() -> None:
    graph = import_graph(ROOT, "app")
    assert "app.engine.engine" in graph  # the graph is the real one, not an empty folder
    assert circles(graph) == []


def test_a_function_level_or_typing_only_import_still_closes_a_circle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import B\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\nB = 1\n"
    )
    (package / "c.py").write_text("def f():\n    from .a import x\n")
    (package / "d.py").write_text("import pkg.a\n")
    assert circles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.b", "pkg.c"]]
