"""The import graph of the whole package, `src/jaxbridge/**`, read from the source: no circle.

Every import statement counts: at module level, under `if TYPE_CHECKING:`, and inside a
function (a lazy import hides a circle until the function runs; an annotation-only one is still
a layer reaching upward). A layer that needs something from above receives it as an argument
or through a protocol at the bottom (`jaxbridge._base`), as docs/architecture.md describes.

Importing `a.b.c` runs `a/b/__init__.py` first, but that implicit parent is not an edge here:
an edge is what a statement names (`from . import x` names `x` if it is a module, else the
package's `__init__`).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import jaxbridge

ROOT = pathlib.Path(jaxbridge.__file__).parent
PACKAGE = "jaxbridge"


def _modules() -> dict[str, pathlib.Path]:
    """Every module of the package: dotted name -> file (a package is its `__init__.py`)."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _targets(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    """The modules of the package that the statement `node` in `module` names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in MODULES]
    if node.level:
        package = module if _is_package(module) else module.rsplit(".", 1)[0]
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - node.level + 1])
        base = f"{base}.{node.module}" if node.module else base
    else:
        base = node.module or ""
    if base not in MODULES:
        return []
    if not _is_package(base):
        return [base]
    # `from .pkg import x`: `x` is a submodule (imported as such) or a name of `pkg/__init__`.
    names = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        names.append(sub if sub in MODULES else base)
    return names


def _edges() -> dict[str, dict[str, list[int]]]:
    """module -> imported module -> the lines of the statements that import it."""
    graph: dict[str, dict[str, list[int]]] = {m: {} for m in MODULES}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):  # every statement, nested ones included
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, module):
                    if target != module:
                        graph[module].setdefault(target, []).append(node.lineno)
    return graph


GRAPH = _edges()


def _components(graph: dict[str, dict[str, list[int]]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _cycles(graph: dict[str, dict[str, list[int]]], limit: int = 40) -> list[list[str]]:
    """Elementary circles, each listed once from its smallest module (at most `limit`)."""
    cycles: list[list[str]] = []
    for component in _components(graph):
        members = set(component)
        for start in component:
            # Circles through `start` among modules after it: each is found from its smallest.
            allowed = {m for m in members if m >= start}
            path = [start]

            def extend(v: str, allowed=allowed, path=path, start=start) -> None:
                for w in sorted(graph[v]):
                    if len(cycles) >= limit:
                        return
                    if w == start:
                        cycles.append([*path, start])
                    elif w in allowed and w not in path:
                        path.append(w)
                        extend(w)
                        path.pop()

            extend(start)
    return cycles


def _describe(cycle: list[str]) -> str:
    steps = []
    for a, b in zip(cycle, cycle[1:]):
        lines = ", ".join(str(n) for n in GRAPH[a][b])
        steps.append(f"    {a} -> {b}  ({MODULES[a].relative_to(ROOT.parent)}:{lines})")
    return "\n".join(steps)


def _report(graph: dict[str, dict[str, list[int]]]) -> str:
    cycles = _cycles(graph)
    text = [f"{len(cycles)} import circle(s) in the package, each edge with its import lines:"]
    for i, cycle in enumerate(cycles, 1):
        text.append(f"  circle {i}: {' -> '.join(cycle)}\n{_describe(cycle)}")
    return "\n".join(text)


def _restricted(keep) -> dict[str, dict[str, list[int]]]:
    return {m: {t: n for t, n in GRAPH[m].items() if keep(t)} for m in GRAPH if keep(m)}


def _is_core(module: str) -> bool:
    """`jaxbridge` itself and its `_name.py` files (not the subpackages, not `__main__`)."""
    if module == PACKAGE:
        return True
    rest = module.removeprefix(f"{PACKAGE}.")
    return (
        "." not in rest
        and rest.startswith("_")
        and rest != "__main__"
        and not (_is_package(module))
    )


def test_the_graph_is_read():
    """The reading finds the package's own imports (so an empty graph cannot pass)."""
    assert f"{PACKAGE}._base" in MODULES and f"{PACKAGE}.mujoco" in MODULES
    assert f"{PACKAGE}._spec" in GRAPH[f"{PACKAGE}._base"]
    assert f"{PACKAGE}._primitive" in GRAPH[f"{PACKAGE}._host"]
    assert f"{PACKAGE}._call" in GRAPH[f"{PACKAGE}._primitive"]


def test_a_circle_would_be_found():
    graph = {"a": {"b": [1]}, "b": {"c": [2]}, "c": {"a": [3], "d": [4]}, "d": {}}
    assert _components(graph) == [["a", "b", "c"]]
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    graph["d"] = {"c": [5]}
    assert _cycles(graph) == [["a", "b", "c", "a"], ["c", "d", "c"]]


def test_no_import_circle_in_the_core():
    core = _restricted(_is_core)
    if _components(core):
        pytest.fail(_report(core), pytrace=False)


def test_the_core_imports_no_subpackage():
    """The core sits at the bottom: integrations import it, never the other way."""
    upward = {
        (m, t, tuple(n))
        for m in GRAPH
        if _is_core(m)
        for t, n in GRAPH[m].items()
        if not _is_core(t)
    }
    assert not upward, upward


def test_no_import_circle_in_the_package():
    if _components(GRAPH):
        pytest.fail(_report(GRAPH), pytrace=False)
