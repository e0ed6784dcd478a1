"""`scqubits.Circuit` from YAML, every ext_basis, against scqubits itself (float64)."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scqubits_cases import central_difference, dense

import jaxbridge.scqubits as jbq

scq = pytest.importorskip("scqubits")

# scqubits' YAML parser calls pyparsing's old camelCase names (pyparsing 3.3 warns).
pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated - use:DeprecationWarning")

FLUXONIUM = """branches:
- ["JJ", 1, 2, EJ=10, 1]
- ["L", 1, 2, EL=0.5]
- ["C", 1, 2, EC=1.2]
"""

TWO_TRANSMONS = """branches:
- ["JJ", 1, 2, EJ1=10, 1.5]
- ["JJ", 2, 0, EJ2=8, 1.3]
- ["C", 1, 0, EC2=0.9]
"""


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


def _circuit(yaml, basis="discretized", **values):
    c = scq.Circuit(yaml, from_file=False, ext_basis=basis)
    for name, value in values.items():
        setattr(c, name, value)
    return c


def _at(c, values):
    out = copy.deepcopy(c)
    for name, value in values.items():
        setattr(out, name, float(value))
    return out


@pytest.mark.parametrize("basis", ["discretized", "harmonic"])
def test_fluxonium_circuit_at_random_points(basis):
    c = _circuit(FLUXONIUM, basis, Φ1=0.3)
    m = jbq.model(c)
    assert m.params == {"EJ": 10.0, "EL": 0.5, "EC": 1.2, "Φ1": 0.3}
    rng = np.random.default_rng(3)
    for _ in range(2):
        values = {
            "EJ": rng.uniform(5, 12),
            "EL": rng.uniform(0.3, 1),
            "EC": rng.uniform(0.8, 2),
            "Φ1": rng.uniform(0, 1),
        }
        ref = _at(c, values)
        want = dense(ref.hamiltonian())
        np.testing.assert_allclose(m.hamiltonian(values), want, atol=1e-12 * np.abs(want).max())
        np.testing.assert_allclose(m.eigenvals(values, evals_count=4), ref.eigenvals(4), rtol=1e-10)


@pytest.mark.parametrize(
    ("basis", "name", "step"),
    [("harmonic", "EC", 1e-3), ("harmonic", "EL", 1e-3), ("discretized", "Φ1", 1e-4)],
)
def test_grad_of_f01_against_differences_of_scqubits(basis, name, step):
    # In the harmonic basis the oscillator length depends on EC and EL: a HermitianFactor.
    c = _circuit(FLUXONIUM, basis, Φ1=0.3)
    m = jbq.model(c)
    f = lambda v: jnp.diff(m.eigenvals({name: v}, evals_count=2))[0]
    theirs = lambda v: float(np.diff(_at(c, {name: v}).eigenvals(2))[0])
    x = m.params[name]
    np.testing.assert_allclose(
        jax.jit(jax.grad(f))(x), central_difference(theirs, x, step), rtol=1e-7, atol=1e-9
    )


def test_charge_basis_circuit_sweep_and_sparse_path():
    c = _circuit(TWO_TRANSMONS)
    m = jbq.model(c)
    assert set(m.params) == {"EJ1", "EJ2", "ng1", "ng2"}
    values = np.linspace(0.0, 0.5, 5)
    table = c.get_spectrum_vs_paramvals("ng1", values, evals_count=3, num_cpus=1).energy_table
    np.testing.assert_allclose(
        jax.vmap(lambda g: m.eigenvals({"ng1": g}, evals_count=3))(jnp.asarray(values)),
        table,
        rtol=1e-10,
    )
    np.testing.assert_allclose(
        m.eigenvals(evals_count=3, method="sparse"), c.eigenvals(3), rtol=1e-10
    )
    # EC2 was folded into numbers by scqubits: refused, not silently ignored.
    with pytest.raises(ValueError, match=r"\['EC2'\] cannot be varied"):
        m.eigenvals({"EC2": 1.0})


def test_matrixelements_by_name_and_sympy_expression():
    import sympy

    c = _circuit(FLUXONIUM, "harmonic", Φ1=0.3)
    m = jbq.model(c)
    by_name = m.matrixelements("θ1_operator", evals_count=3)
    expr = m.matrixelements(sympy.Symbol("θ1"), evals_count=3)
    np.testing.assert_allclose(
        np.abs(by_name), np.abs(c.matrixelement_table("θ1_operator", evals_count=3)), atol=1e-10
    )
    np.testing.assert_allclose(by_name, expr, atol=1e-12)
    # The charge operator depends on EC through the oscillator length: its derivative too.
    ours = lambda ec: jnp.abs(m.matrixelements("Q1_operator", {"EC": ec}, evals_count=2)[0, 1]) ** 2
    theirs = lambda ec: float(
        np.abs(_at(c, {"EC": ec}).matrixelement_table("Q1_operator", evals_count=2)[0, 1]) ** 2
    )
    np.testing.assert_allclose(ours(1.2), theirs(1.2), rtol=1e-9)
    np.testing.assert_allclose(
        jax.grad(ours)(1.2), central_difference(theirs, 1.2, 1e-3), rtol=1e-7
    )
