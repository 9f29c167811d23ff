"""Import circles in a package: the strongly connected components of its module graph.

Every ``import`` and ``from ... import`` statement counts, wherever it stands: at module level,
inside a function, or under ``if TYPE_CHECKING:``. A circle hidden behind a function-level or a
typing-only import is still a circle a reader has to hold in their head.

    python -m app.devtools.import_circles        # prints every circle in app/, exits 1 if any
    python -m app.devtools.import_circles --edges  # also each module's imports inside a circle
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from pathlib import Path

Graph = dict[str, set[str]]


def _module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package under ``root``, by dotted name."""
    names: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name a (possibly relative) ``from`` names."""
    if level == 0:
        return target or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``module`` imports, anywhere in its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def nearest(name: str) -> str | None:
        # `import a.b.c` or `from a.b import name`: the deepest module of ours that it names
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                hit = nearest(alias.name)
                if hit:
                    found.add(hit)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module)
            for alias in node.names:
                hit = nearest(f"{base}.{alias.name}") if alias.name != "*" else None
                hit = hit or nearest(base)
                if hit:
                    found.add(hit)
    found.discard(module)
    return found


def import_graph(root: Path, package: str = "app") -> Graph:
    """Module → the package's modules it imports (function-level and typing-only included)."""
    names = _module_names(root, package)
    known = set(names)
    return {name: _imported(name, path, known) for name, path in names.items()}


def circles(graph: Graph) -> list[list[str]]:
    """The strongly connected components with more than one module, each sorted, largest first.

    Tarjan's algorithm, iterative so that a deep graph cannot exhaust the recursion limit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in graph:
                    continue
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", default="app")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--edges", action="store_true", help="show the imports inside each circle")
    args = parser.parse_args(argv)
    graph = import_graph(args.root, args.package)
    found = circles(graph)
    print(f"{len(graph)} modules in {args.package}, {len(found)} import circle(s)")
    for component in found:
        print(f"- {len(component)} modules: " + ", ".join(component))
        if args.edges:
            members = set(component)
            for module in component:
                inside = sorted(graph[module] & members)
                print(f"    {module} -> " + ", ".join(inside))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
