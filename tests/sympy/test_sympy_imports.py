"""The import graph of `jaxbridge.sympy`, read from the source: one way, no lazy imports.

Each module imports only modules below it; one that needs something from above (the host
fallback needs `compile` for its derivatives) receives it as an argument. An import inside a
function would hide a circle until that function runs, so there is none of a sibling module.
"""

import ast
import pathlib

import jaxbridge.sympy

PACKAGE = "jaxbridge.sympy"
ROOT = pathlib.Path(jaxbridge.sympy.__file__).parent


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in sorted(ROOT.glob("*.py")):
        name = PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"
        found[name] = path
    return found


MODULES = _modules()


def _targets(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    """The modules of this package that `node` (in `module`) imports."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            package = module if module == PACKAGE else module.rsplit(".", 1)[0]
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1])
            base = f"{base}.{node.module}" if node.module else base
        else:
            base = node.module or ""
        # `from . import _errors` imports the submodule (the package itself is always
        # imported first, as every submodule's parent); `from . import compile` would import
        # from the package's `__init__`; `from ._nodes import X` imports `_nodes`.
        submodules = [f"{base}.{alias.name}" for alias in node.names]
        if base != PACKAGE:
            names = [base]
        elif all(n in MODULES for n in submodules):
            names = submodules
        else:
            names = [PACKAGE, *submodules]
    return [n for n in names if n in MODULES]


def _imports(module: str) -> tuple[set[str], list[tuple[int, str]]]:
    """(modules imported at module level, (line, module) imported inside a function)."""
    tree = ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))
    top: set[str] = set()
    nested: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            )
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                targets = [t for t in _targets(child, module) if t != module]
                if in_function:
                    nested.extend((child.lineno, t) for t in targets)
                else:
                    top.update(targets)
            visit(child, inside)

    visit(tree, False)
    return top, nested


def _graph() -> dict[str, set[str]]:
    """Every import, at module level or inside a function (a lazy one still closes a circle)."""
    graph = {}
    for m in MODULES:
        top, nested = _imports(m)
        graph[m] = top | {t for _, t in nested}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
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


def test_the_reader_sees_the_package():
    graph = _graph()
    assert len(graph) >= 10
    assert f"{PACKAGE}._compile" in graph[PACKAGE]  # `__init__` re-exports compile
    assert f"{PACKAGE}._host_fallback" in graph[f"{PACKAGE}._printer"]
    # the reader's own circle finder finds a circle where there is one
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_imports_run_one_way():
    cycle = _cycle(_graph())
    assert cycle is None, "jaxbridge.sympy imports in a circle: " + " -> ".join(
        m.removeprefix(f"{PACKAGE}.") for m in cycle
    )


def test_no_module_of_the_package_is_imported_inside_a_function():
    lazy = [
        f"{MODULES[m].name}:{line} imports {t.removeprefix(PACKAGE + '.')}"
        for m in MODULES
        for line, t in _imports(m)[1]
    ]
    assert not lazy, "imports inside functions: " + "; ".join(lazy)


def test_the_printer_vocabulary_lives_below_the_printer_and_its_rules():
    graph = _graph()
    printer, nodes = f"{PACKAGE}._printer", f"{PACKAGE}._nodes"
    assert printer not in graph[nodes]
    assert f"{PACKAGE}._compile" not in graph[f"{PACKAGE}._host_fallback"]
    assert f"{PACKAGE}._compile" not in graph[f"{PACKAGE}._symbolic"]
