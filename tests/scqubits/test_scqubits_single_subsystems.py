"""`model()` of an Oscillator, a KerrOscillator and a GenericQubit on their own, against
scqubits' own spectrum, Hamiltonian and matrix elements."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scqubits as scq

import jaxbridge.scqubits as jbq


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


OBJECTS = {
    "Oscillator": lambda: scq.Oscillator(E_osc=5.2, l_osc=0.8, truncated_dim=6),
    "KerrOscillator": lambda: scq.KerrOscillator(E_osc=5.2, K=0.07, l_osc=0.8, truncated_dim=6),
    "GenericQubit": lambda: scq.GenericQubit(E=4.3),
}
OPERATORS = {
    "Oscillator": ("annihilation_operator", "creation_operator", "n_operator", "phi_operator"),
    "KerrOscillator": ("annihilation_operator", "creation_operator", "phi_operator"),
    "GenericQubit": ("sx_operator", "sy_operator", "sz_operator", "sp_operator", "sm_operator"),
}


@pytest.mark.parametrize("kind", list(OBJECTS))
def test_equals_scqubits(kind):
    obj = OBJECTS[kind]()
    m = jbq.model(obj)
    assert isinstance(m, jbq.SubsystemModel) and m.dim == obj.hilbertdim()
    k = min(4, m.dim)
    np.testing.assert_allclose(m.eigenvals(evals_count=k), obj.eigenvals(k), atol=1e-12)
    # scqubits' oscillators have no `hamiltonian`: theirs is diagonal in the Fock basis
    want = obj.hamiltonian() if hasattr(obj, "hamiltonian") else np.diag(obj.eigenvals(m.dim))
    np.testing.assert_allclose(m.hamiltonian(), np.asarray(want), atol=1e-12)
    for name in OPERATORS[kind]:
        if kind == "GenericQubit":  # its table takes no evals_count: both levels
            want = obj.matrixelement_table(name)
        else:  # no table in scqubits: the operator in the Fock basis, its eigenbasis
            want = np.asarray(getattr(obj, name)())[:k, :k]
        got = m.matrixelements(name, evals_count=k)
        np.testing.assert_allclose(np.abs(got), np.abs(want), atol=1e-12, err_msg=name)


def test_parameters_batch_and_differentiate():
    m = jbq.model(OBJECTS["KerrOscillator"]())
    e = jnp.array([5.0, 6.0])
    w = m.eigenvals({"E_osc": e}, evals_count=3)
    assert w.shape == (2, 3)
    for i, value in enumerate((5.0, 6.0)):
        want = scq.KerrOscillator(E_osc=value, K=0.07, truncated_dim=6).eigenvals(3)
        np.testing.assert_allclose(w[i], want, atol=1e-12)
    # E_2 - E_0 = 2 (E_osc + K) - 4 K: its derivative in K is -2
    grad = jax.grad(lambda K: m.eigenvals({"K": K}, evals_count=3)[2])(0.07)
    np.testing.assert_allclose(float(grad), -2.0)


def test_bad_input_raises():
    m = jbq.model(scq.Oscillator(E_osc=5.0, truncated_dim=4))
    with pytest.raises(ValueError, match="no `l_osc`|l_osc"):
        m.matrixelements("n_operator")
    with pytest.raises(ValueError, match="unknown parameter \\['EJ'\\] for this `Oscillator`"):
        m.eigenvals({"EJ": 1.0})
    with pytest.raises(ValueError, match="sz_operator"):
        jbq.model(OBJECTS["GenericQubit"]()).matrixelements("n_operator")
