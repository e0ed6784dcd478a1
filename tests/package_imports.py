"""One package's import graph, read from its source with `ast` (tests of sympy/ and scqubits/).

Every import statement counts: at module level, under `TYPE_CHECKING`, or inside a function (a
lazy import still closes a circle, only later). `tests/test_import_graph.py` reads the whole of
`jaxbridge` with line numbers for its report; this reader answers one package's questions.
"""

from __future__ import annotations

import ast
import importlib
import pathlib


class Package:
    """The modules of one package, its subpackages included, and their imports of each other."""

    def __init__(self, name: str):
        self.name = name
        self.root = pathlib.Path(importlib.import_module(name).__file__ or "").parent
        self.modules: dict[str, pathlib.Path] = {}
        for path in sorted(self.root.rglob("*.py")):
            parts = path.relative_to(self.root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            self.modules[".".join((name, *parts))] = path

    def is_package(self, module: str) -> bool:
        """Whether `module` is a package (its file an `__init__.py`)."""
        return self.modules[module].name == "__init__.py"

    def targets(self, node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
        """The modules of this package that `node` (in `module`) imports."""
        modules = self.modules
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            if node.level:
                package = module if self.is_package(module) else module.rsplit(".", 1)[0]
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            # `from . import _errors` imports the submodule (the package itself is always
            # imported first, as every submodule's parent); `from . import compile` would
            # import from the package's `__init__`; `from ._nodes import X` imports `_nodes`.
            submodules = [f"{base}.{alias.name}" for alias in node.names]
            if base not in modules or not self.is_package(base):
                names = [base]
            elif all(n in modules for n in submodules):
                names = submodules
            else:
                names = [base, *submodules]
        return [n for n in names if n in modules]

    def imports(self, module: str) -> tuple[set[str], list[tuple[int, str]]]:
        """(modules imported at module level, (line, module) imported inside a function)."""
        path = self.modules[module]
        tree = ast.parse(path.read_text(), filename=str(path))
        top: set[str] = set()
        nested: list[tuple[int, str]] = []

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                inside = in_function or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
                )
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    targets = [t for t in self.targets(child, module) if t != module]
                    if in_function:
                        nested.extend((child.lineno, t) for t in targets)
                    else:
                        top.update(targets)
                visit(child, inside)

        visit(tree, False)
        return top, nested

    def graph(self) -> dict[str, set[str]]:
        """Every import, at module level or inside a function."""
        graph = {}
        for m in self.modules:
            top, nested = self.imports(m)
            graph[m] = top | {t for _, t in nested}
        return graph

    def lazy(self) -> list[str]:
        """`file:line imports module` for each import of a sibling inside a function."""
        return [
            f"{self.modules[m].relative_to(self.root)}:{line} imports "
            f"{t.removeprefix(self.name + '.')}"
            for m in self.modules
            for line, t in self.imports(m)[1]
        ]

    def circle(self) -> str | None:
        """One circle of the graph as `a -> b -> a` (the package's prefix dropped), or None."""
        found = cycle(self.graph())
        return (
            None if found is None else " -> ".join(m.removeprefix(f"{self.name}.") for m in found)
        )


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of the graph, as a path that ends where it starts; None if acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                return path[path.index(t) :] + [t]
            if t not in state:
                found = walk(t)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = walk(m)
            if found:
                return found
    return None
