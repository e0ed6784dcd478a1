"""`Model.operator(name, params)`: every `*_operator` of every class as scqubits' matrix at the
same params (float64), in the native basis and the eigenbasis, batched, jitted, differentiated."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scqubits_cases import KINDS, at, central_difference, dense, make

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits import _errors
from jaxbridge.scqubits.composite import _hs_errors

scq = pytest.importorskip("scqubits")


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


def _names(obj):
    return sorted(n for n in dir(obj) if n.endswith("_operator") and not n.startswith("_"))


@pytest.mark.parametrize("kind", KINDS)
def test_every_operator_equals_scqubits_at_a_random_point(kind):
    obj, box = make(kind)
    rng = np.random.default_rng(sum(map(ord, kind)) + 7)
    values = {name: rng.uniform(*bounds) for name, bounds in box.items()}
    m, ref = jbq.model(obj), at(obj, values)
    for name in _names(obj):
        want = dense(getattr(ref, name)())
        got = np.asarray(m.operator(name, values))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("kind", ["Transmon", "Fluxonium", "FluxQubit"])
def test_eigenbasis_equals_scqubits_up_to_the_states_phases(kind):
    obj, _ = make(kind)
    m = jbq.model(obj)
    for name in _names(obj)[:3]:
        want = np.asarray(getattr(obj, name)(energy_esys=True))  # truncated_dim = 6 levels
        got = np.asarray(m.operator(name, eigenbasis=True, evals_count=want.shape[0]))
        np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=0, atol=1e-9)


def test_batch_jit_and_gradient_of_a_parameter_dependent_operator():
    obj = scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.33, cutoff=20)
    m = jbq.model(obj)
    ecs = jnp.array([1.5, 2.5])
    batch = m.operator("phi_operator", {"EC": ecs})
    jitted = jax.jit(lambda ec: m.operator("n_operator", {"EC": ec}))(1.5)
    assert batch.shape == (2, 20, 20)
    mapped = jax.vmap(lambda ec: m.operator("phi_operator", {"EC": ec}))(ecs)
    np.testing.assert_allclose(mapped, batch, rtol=0, atol=1e-14)
    np.testing.assert_allclose(batch[0], at(obj, {"EC": 1.5}).phi_operator(), atol=1e-12)
    np.testing.assert_allclose(jitted, at(obj, {"EC": 1.5}).n_operator(), atol=1e-12)

    def element(el):
        return jnp.real(m.operator("cos_phi_operator", {"EL": el})[0, 2])

    want = central_difference(lambda el: at(obj, {"EL": el}).cos_phi_operator()[0, 2], 0.5, 1e-3)
    np.testing.assert_allclose(jax.grad(element)(0.5), want, rtol=1e-7)


@pytest.mark.filterwarnings("ignore:.*deprecated - use:DeprecationWarning")  # scqubits' YAML
def test_circuit_operators_by_name():
    yaml = "branches:\n- [JJ, 1, 2, 4, 0.5]\n- [L, 1, 2, 1.3]\n- [C, 1, 2, 2]\n"
    circuit = scq.Circuit(yaml, from_file=False, ext_basis="discretized")
    circuit.cutoff_ext_1 = 20
    m = jbq.model(circuit)
    for name in ("θ1_operator", "Q1_operator", "cosθ1_operator", "Qs1_operator"):
        want = dense(getattr(circuit, name)())
        np.testing.assert_allclose(m.operator(name), want, rtol=0, atol=1e-12)


def test_unknown_operator_and_not_a_name_raise():
    obj, _ = make("Fluxonium")
    m = jbq.model(obj)
    with pytest.raises(ValueError) as info:
        m.operator("spam_operator")
    want = _errors.UNKNOWN_OPERATOR.format(
        kind="Fluxonium", name="spam_operator", known=sorted(m._spec.operators), dim=m.dim
    )
    assert str(info.value) == want
    with pytest.raises(ValueError) as info:
        m.operator(np.eye(m.dim))
    assert str(info.value) == _errors.OPERATOR_NAME.format(got="ndarray")


def test_oscillator_and_generic_qubit_operators():
    osc = scq.Oscillator(E_osc=5.0, l_osc=0.8, truncated_dim=4)
    m = jbq.model(osc)
    for name in ("annihilation_operator", "creation_operator", "n_operator", "phi_operator"):
        np.testing.assert_allclose(m.operator(name), getattr(osc, name)(), atol=1e-14)
    batch = m.operator("phi_operator", {"l_osc": jnp.array([0.8, 1.2])})
    np.testing.assert_allclose(batch[1], scq.Oscillator(E_osc=5.0, l_osc=1.2, truncated_dim=4)
                               .phi_operator(), atol=1e-14)  # fmt: skip
    qubit = scq.GenericQubit(E=5.0)
    np.testing.assert_allclose(jbq.model(qubit).operator("sy_operator"), qubit.sy_operator())
    with pytest.raises(ValueError) as info:
        m.operator("spam")
    known = ["annihilation_operator", "creation_operator", "n_operator", "phi_operator"]
    want = _hs_errors.HS_UNKNOWN_OPERATOR.format(
        where="operator", id_str=osc.id_str, name="spam", known=known
    )
    assert str(info.value) == want
