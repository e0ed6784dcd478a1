"""The import graph of `jaxbridge.scqubits`, read from the source: one way, no lazy imports.

Every import statement counts: at module level, under `TYPE_CHECKING`, or inside a function (a
lazy import still closes a circle, only later). `model()` dispatches from the top
(`_dispatch.py`); a `HilbertSpace`'s subsystems get their models from the modules below it.
"""

import ast
import pathlib

import jaxbridge.scqubits

PACKAGE = "jaxbridge.scqubits"
ROOT = pathlib.Path(jaxbridge.scqubits.__file__).parent
MODULES = {
    (PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"): path
    for path in sorted(ROOT.glob("*.py"))
}


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
        submodules = [f"{base}.{alias.name}" for alias in node.names]
        if base != PACKAGE:
            names = [base]
        elif all(n in MODULES for n in submodules):
            names = submodules  # `from . import _errors`
        else:
            names = [PACKAGE, *submodules]
    return [n for n in names if n in MODULES]


def _imports(module: str) -> tuple[set[str], list[tuple[int, str]]]:
    """(modules imported outside functions, (line, module) imported inside a function)."""
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
    assert len(graph) >= 15
    assert f"{PACKAGE}._dispatch" in graph[PACKAGE]  # `__init__` re-exports model
    assert f"{PACKAGE}._eigen" in graph[f"{PACKAGE}._model"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_imports_run_one_way():
    cycle = _cycle(_graph())
    assert cycle is None, "jaxbridge.scqubits imports in a circle: " + " -> ".join(
        m.removeprefix(f"{PACKAGE}.") for m in cycle
    )


def test_no_module_of_the_package_is_imported_inside_a_function():
    lazy = [
        f"{MODULES[m].name}:{line} imports {t.removeprefix(PACKAGE + '.')}"
        for m in MODULES
        for line, t in _imports(m)[1]
    ]
    assert not lazy, "imports inside functions: " + "; ".join(lazy)


def test_model_dispatches_from_the_top_and_the_solvers_sit_at_the_bottom():
    graph = _graph()
    dispatch = f"{PACKAGE}._dispatch"
    assert not any(dispatch in targets for m, targets in graph.items() if m != PACKAGE)
    # one eigensolver module, which imports no model
    assert graph[f"{PACKAGE}._eigen"] <= {f"{PACKAGE}._errors", f"{PACKAGE}._terms"}
    solvers = [m for m in MODULES if m.rsplit(".", 1)[1] in ("_eigh", "_eigpairs", "_solvers")]
    assert not solvers, solvers
