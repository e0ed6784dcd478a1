"""The import graph of `jaxbridge.scqubits`, read from the source: one way, no lazy imports.

Every import statement counts: at module level, under `TYPE_CHECKING`, or inside a function (a
lazy import still closes a circle, only later). `model()` dispatches from the top
(`_dispatch.py`); a `HilbertSpace`'s subsystems get their models from the modules below it.
"""

from package_imports import Package, cycle

PACKAGE = "jaxbridge.scqubits"
PKG = Package(PACKAGE)


def test_the_reader_sees_the_package():
    graph = PKG.graph()
    assert len(graph) >= 15
    assert f"{PACKAGE}._dispatch" in graph[PACKAGE]  # `__init__` re-exports model
    assert f"{PACKAGE}._eigen" in graph[f"{PACKAGE}._model"]
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_imports_run_one_way():
    circle = PKG.circle()
    assert circle is None, f"jaxbridge.scqubits imports in a circle: {circle}"


def test_no_module_of_the_package_is_imported_inside_a_function():
    lazy = PKG.lazy()
    assert not lazy, "imports inside functions: " + "; ".join(lazy)


def test_model_dispatches_from_the_top_and_the_solvers_sit_at_the_bottom():
    graph = PKG.graph()
    dispatch = f"{PACKAGE}._dispatch"
    assert not any(dispatch in targets for m, targets in graph.items() if m != PACKAGE)
    # one eigensolver module, which imports no model
    assert graph[f"{PACKAGE}._eigen"] <= {f"{PACKAGE}._errors", f"{PACKAGE}._terms"}
    solvers = [m for m in PKG.modules if m.rsplit(".", 1)[1] in ("_eigh", "_eigpairs", "_solvers")]
    assert not solvers, solvers
