"""The import graph of `jaxbridge.sympy`, read from the source: one way, no lazy imports.

Each module imports only modules below it; one that needs something from above (the host
fallback needs `compile` for its derivatives) receives it as an argument. An import inside a
function would hide a circle until that function runs, so there is none of a sibling module.
"""

from package_imports import Package, cycle

PACKAGE = "jaxbridge.sympy"
PKG = Package(PACKAGE)


def test_the_reader_sees_the_package():
    graph = PKG.graph()
    assert len(graph) >= 10
    assert f"{PACKAGE}._compile" in graph[PACKAGE]  # `__init__` re-exports compile
    assert f"{PACKAGE}._host_fallback" in graph[f"{PACKAGE}._printer"]
    # the reader's own circle finder finds a circle where there is one
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_imports_run_one_way():
    circle = PKG.circle()
    assert circle is None, f"jaxbridge.sympy imports in a circle: {circle}"


def test_no_module_of_the_package_is_imported_inside_a_function():
    lazy = PKG.lazy()
    assert not lazy, "imports inside functions: " + "; ".join(lazy)


def test_the_printer_vocabulary_lives_below_the_printer_and_its_rules():
    graph = PKG.graph()
    printer, nodes = f"{PACKAGE}._printer", f"{PACKAGE}._nodes"
    assert printer not in graph[nodes]
    assert f"{PACKAGE}._compile" not in graph[f"{PACKAGE}._host_fallback"]
    assert f"{PACKAGE}._compile" not in graph[f"{PACKAGE}._symbolic"]
