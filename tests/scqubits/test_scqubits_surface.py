"""docs/scqubits.md's table of scqubits' surface is true: every public method of scqubits'
classes has a row, a row that says served is a method of the model, one that says refused is
not, and the operators said to be taken by name are taken."""

from __future__ import annotations

import contextlib
import pathlib
import re
import warnings

import jax
import numpy as np
import pytest
import scqubits as scq

import jaxbridge.scqubits as jbq

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "scqubits.md"
QUBITS = ("Transmon", "TunableTransmon", "Fluxonium", "FluxQubit", "ZeroPi", "Cos2PhiQubit")
GROUPS = {"qubits": (*QUBITS, "Circuit")}
CLASSES = (*QUBITS, "Circuit", "HilbertSpace", "FullZeroPi", "Oscillator", "KerrOscillator",
           "GenericQubit")  # fmt: skip
STATUSES = ("served", "differently", "refused")


def _rows() -> list[tuple[list[str], list[str], str, str]]:
    """(methods, classes, status, note) of each row of the surface table."""
    text = DOC.read_text()
    start = text.index("## scqubits' surface, row by row")
    section = text[start : text.index("\n## ", start + 1)]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith("| scqubits |"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 4, line
        names, classes, status, note = cells
        methods = ["*"] if names == "every method" else re.findall(r"`(\w+)`", names)
        assert methods, line
        who = [c for part in classes.split(", ") for c in GROUPS.get(part, (part,))]
        assert status in STATUSES and set(who) <= set(CLASSES), line
        rows.append((methods, who, status, note))
    return rows


ROWS = _rows()


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n, None))}


def _objects() -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yaml = "branches:\n- [JJ, 1, 2, 4, 0.5]\n- [L, 1, 2, 1.3]\n- [C, 1, 2, 2]\n"
        circuit = scq.Circuit(yaml, from_file=False, ext_basis="discretized")
        circuit.cutoff_ext_1 = 30
        circuit.configure(generate_noise_methods=True)  # the channels the table says it has
        transmon = scq.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=6, truncated_dim=3)
        oscillator = scq.Oscillator(E_osc=5.0, l_osc=0.8, truncated_dim=3)
        space = scq.HilbertSpace([transmon, oscillator])
        space.add_interaction(
            g_strength=0.1, op1=transmon.n_operator, op2=oscillator.creation_operator,
            add_hc=True,
        )  # fmt: skip
        return {
            "Transmon": scq.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=6),
            "TunableTransmon": scq.TunableTransmon(
                EJmax=20.0, EC=0.3, d=0.1, flux=0.0, ng=0.0, ncut=6
            ),
            "Fluxonium": scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.33, cutoff=20),
            "FluxQubit": scq.FluxQubit(
                EJ1=1.0,
                EJ2=1.0,
                EJ3=0.8,
                ECJ1=0.016,
                ECJ2=0.016,
                ECJ3=0.021,
                ECg1=0.83,
                ECg2=0.83,
                ng1=0.0,
                ng2=0.0,
                flux=0.4,
                ncut=3,
            ),  # fmt: skip
            "ZeroPi": scq.ZeroPi(
                grid=scq.Grid1d(-6.0, 6.0, 30),
                EJ=10.0,
                EL=0.04,
                ECJ=20.0,
                EC=0.04,
                ng=0.1,
                flux=0.23,
                ncut=4,
            ),  # fmt: skip
            "Cos2PhiQubit": scq.Cos2PhiQubit(
                EJ=15.0,
                ECJ=2.0,
                EL=1.0,
                EC=0.04,
                dCJ=0.0,
                dL=0.6,
                dEJ=0.0,
                flux=0.5,
                ng=0.0,
                ncut=3,
                zeta_cut=4,
                phi_cut=4,
            ),  # fmt: skip
            "Circuit": circuit,
            "HilbertSpace": space,
            "FullZeroPi": scq.FullZeroPi(
                grid=scq.Grid1d(-6.0, 6.0, 20),
                EJ=10.0,
                EL=0.04,
                ECJ=20.0,
                EC=0.04,
                dEJ=0.05,
                dCJ=0.05,
                dC=0.08,
                dEL=0.05,
                ng=0.1,
                flux=0.23,
                ncut=4,
                zeta_cutoff=4,
                zeropi_cutoff=4,
            ),  # fmt: skip
            "Oscillator": oscillator,
            "KerrOscillator": scq.KerrOscillator(E_osc=5.0, K=0.05, l_osc=0.8, truncated_dim=3),
            "GenericQubit": scq.GenericQubit(E=5.0),
        }


@pytest.fixture(scope="module")
def objects() -> dict[str, object]:
    return _objects()


@pytest.fixture(scope="module")
def models(objects) -> dict[str, object]:
    out = {}
    for name, obj in objects.items():
        with contextlib.suppress(TypeError, ValueError):  # test_whole_classes_refused's
            out[name] = jbq.model(obj)
    return out


@pytest.mark.parametrize("name", CLASSES)
def test_every_public_method_has_a_row(name):
    cls = getattr(scq, name)
    covered = {m for methods, who, _, _ in ROWS if name in who for m in methods}
    if "*" in covered:
        return
    missing = sorted(_public(cls) - covered)
    assert not missing, f"docs/scqubits.md's surface table has no row for {name}.{missing}"


def test_no_row_names_a_method_scqubits_does_not_have():
    for methods, who, _, _ in ROWS:
        for cls in who:
            extra = [m for m in methods if m != "*" and m not in _public(getattr(scq, cls))]
            assert not extra, f"{cls} has no {extra} (a stale row)"


def test_served_rows_are_methods_and_refused_rows_are_not(models):
    for methods, who, status, _ in ROWS:
        for cls in who:
            if cls not in models or methods == ["*"]:
                continue
            for method in methods:
                has = hasattr(models[cls], method)
                if status == "served":
                    assert has, f"the table says {cls}.{method} is served; the model has none"
                if status == "refused":
                    assert not has, f"the table says {cls}.{method} is refused; it is served"


def test_operators_said_to_be_taken_by_name_are(models):
    for methods, who, _, note in ROWS:
        if not note.startswith("by name in `matrixelements`"):
            continue
        for cls in who:
            for method in methods:
                # traced, not compiled: a name the model does not take raises while tracing
                m = models[cls]
                elements = jax.eval_shape(
                    lambda m=m, op=method: m.matrixelements(op, evals_count=2)
                )
                assert elements.shape == (2, 2), (cls, method)


def test_d_hamiltonian_rows_name_parameters_the_model_has(models):
    for methods, who, _, _ in ROWS:
        for cls in who:
            for method in methods:
                if method.startswith("d_hamiltonian_d_"):
                    name = method.removeprefix("d_hamiltonian_d_")
                    m = models[cls]
                    name = name if name in m.params else f"{name}max"  # TunableTransmon's EJmax
                    assert m.d_hamiltonian(name).shape == (m.dim, m.dim), (cls, method)


def test_whole_classes_refused(objects, models):
    for methods, who, status, _ in ROWS:
        if methods == ["*"]:
            assert status == "refused"
            for cls in who:
                assert cls not in models, f"model() takes {cls} now: update its row"
                with pytest.raises((TypeError, ValueError)):
                    jbq.model(objects[cls])


def test_operators_said_to_be_matrices_are(objects, models):
    for methods, who, _, note in ROWS:
        if "`operator(name, params)`" not in note:
            continue
        for cls in who:
            for method in methods:
                want = getattr(objects[cls], method)()
                got = np.asarray(models[cls].operator(method))  # float32 here: x64 is off
                want = np.asarray(want.toarray() if hasattr(want, "toarray") else want)
                assert np.abs(got - want).max() < 1e-5 * max(1.0, np.abs(want).max()), (cls, method)
