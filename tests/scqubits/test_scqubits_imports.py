"""The import graph of `jaxbridge.scqubits`, read from the source: one way, no lazy imports.

Every import statement counts: at module level, under `TYPE_CHECKING`, or inside a function (a
lazy import still closes a circle, only later). `model()` dispatches from the top
(`_dispatch.py`); a `HilbertSpace`'s subsystems get their models from the modules below it.
Each qubit's file in `qubits/` sits on the bottom modules only (`_spec`, `noise._channel`, `_terms`,
`_params`), never on a model or the noise engine.
"""

from package_imports import Package, cycle

PACKAGE = "jaxbridge.scqubits"
PKG = Package(PACKAGE)


def test_the_reader_sees_the_package():
    graph = PKG.graph()
    assert len(graph) >= 15
    assert f"{PACKAGE}._dispatch" in graph[PACKAGE]  # `__init__` re-exports model
    assert f"{PACKAGE}._eigen" in graph[f"{PACKAGE}._model"]
    # the subpackage is read too: `from .. import` and `from . import` inside `qubits/`
    assert f"{PACKAGE}._spec" in graph[f"{PACKAGE}.qubits.fluxonium"]
    assert f"{PACKAGE}.qubits.fluxonium" in graph[f"{PACKAGE}.qubits._registry"]
    assert f"{PACKAGE}.qubits" in graph[f"{PACKAGE}._specs"]
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
    # one eigensolver module, which imports no model (its host coefficients: `_numpy_eval`)
    allowed = {f"{PACKAGE}.{m}" for m in ("_errors", "_terms", "_numpy_eval")}
    assert graph[f"{PACKAGE}._eigen"] <= allowed
    assert not graph[f"{PACKAGE}._numpy_eval"]
    solvers = [m for m in PKG.modules if m.rsplit(".", 1)[1] in ("_eigh", "_eigpairs", "_solvers")]
    assert not solvers, solvers


QUBIT_FILES = ("transmon", "fluxonium", "flux_qubit", "zero_pi", "cos2phi")
BOTTOM = {f"{PACKAGE}.{m}" for m in ("_spec", "noise._channel", "_terms", "_params")}


def test_each_qubit_file_sits_on_the_bottom_modules_only():
    graph = PKG.graph()
    sub = f"{PACKAGE}.qubits"
    files = {m for m in PKG.modules if m.startswith(f"{sub}.") and m != f"{sub}._registry"}
    assert files == {f"{sub}.{name}" for name in QUBIT_FILES}
    for m in sorted(files):
        assert graph[m] <= BOTTOM, f"{m} imports {sorted(graph[m] - BOTTOM)}"
    assert graph[f"{sub}._registry"] <= files | BOTTOM
    assert graph[sub] == {f"{sub}._registry"}  # `__init__` only re-exports the registry
    # the bottom imports no model: `Spec` over `Terms`, `Channel` over the spectral densities
    assert graph[f"{PACKAGE}._spec"] == {f"{PACKAGE}._terms"}
    channel = f"{PACKAGE}.noise._channel"
    assert graph[channel] == {f"{PACKAGE}.noise._densities", f"{PACKAGE}._terms"}
    assert graph[f"{PACKAGE}._params"] == set()
