"""`model(FullZeroPi)` against scqubits' FullZeroPi itself (float64): spectra at random points,
batched, matrix elements up to the states' phases, gradients, scqubits' derivative operators."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scqubits_cases import central_difference

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits import _errors

scq = pytest.importorskip("scqubits")

BOX = {"EJ": (8, 12), "EL": (0.03, 0.06), "EC": (0.03, 0.06), "flux": (0, 0.5),
       "ng": (0, 0.5), "dC": (0, 0.2), "dEL": (0, 0.2), "dEJ": (0, 0.1)}  # fmt: skip


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


@pytest.fixture(scope="module")
def obj():
    return scq.FullZeroPi(
        grid=scq.Grid1d(-6.0, 6.0, 20), EJ=10.0, EL=0.04, ECJ=20.0, EC=0.04, dEJ=0.05,
        dCJ=0.05, dC=0.08, dEL=0.05, ng=0.1, flux=0.23, ncut=4, zeta_cutoff=4,
        zeropi_cutoff=4,
    )  # fmt: skip


def _at(obj, values):
    out = copy.deepcopy(obj)
    for name, value in values.items():
        setattr(out, name, float(value))
    return out


def test_eigenvalues_equal_scqubits_at_random_points(obj):
    m = jbq.model(obj)
    assert m.dim == obj.hilbertdim()
    assert m.params == {name: float(getattr(obj, name)) for name in m.params}
    rng = np.random.default_rng(5)
    points = [{n: rng.uniform(*b) for n, b in BOX.items()} for _ in range(2)]
    batch = {n: jnp.array([p[n] for p in points]) for n in BOX}
    got = m.eigenvals(batch, evals_count=5)
    for i, p in enumerate(points):
        np.testing.assert_allclose(got[i], _at(obj, p).eigenvals(5), rtol=1e-10)


def test_matrix_elements_and_derivative_operators_up_to_phases(obj):
    m = jbq.model(obj)
    for name in ("phi_operator", "n_theta_operator", "i_d_dphi_operator"):
        got = np.abs(m.matrixelements(name, evals_count=3))
        want = np.abs(obj.matrixelement_table(name, evals_count=3))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * max(1.0, want.max()))
    w, v = m.eigensys(evals_count=3)
    got = v.conj().T @ m.d_hamiltonian("flux") @ v  # the exact derivative is scqubits' here
    want = obj.d_hamiltonian_d_flux(energy_esys=True)[:3, :3]
    np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=0, atol=1e-8 * np.abs(want).max())


def test_gradient_against_scqubits_differences(obj):
    m = jbq.model(obj)

    def gap(p):
        w = m.eigenvals({"dEL": p[0], "EL": p[1]}, evals_count=2)
        return w[1] - w[0]

    got = jax.jit(jax.grad(gap))(jnp.array([0.05, 0.04]))

    def ref(name, x):
        w = _at(obj, {name: x}).eigenvals(2)
        return w[1] - w[0]

    want = [central_difference(lambda x: ref("dEL", x), 0.05, 1e-3),
            central_difference(lambda x: ref("EL", x), 0.04, 1e-4)]  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_bad_input_raises(obj):
    m = jbq.model(obj)
    with pytest.raises(ValueError) as info:
        m.matrixelements("cos_theta_operator")
    want = _errors.FULL_ZERO_PI_OPERATOR.format(
        known=["phi_operator", "n_theta_operator", "i_d_dphi_operator"],
        name="cos_theta_operator",
    )
    assert str(info.value) == want
    with pytest.raises(ValueError) as info:
        m.d_hamiltonian("dC")
    known = ["EC", "ECJ", "EJ", "EL", "dCJ", "dEJ", "flux", "ng"]
    assert str(info.value) == _errors.FULL_ZERO_PI_D_HAMILTONIAN.format(name="dC", known=known)
    with pytest.raises(ValueError) as info:
        m.eigenvals(evals_count=17)
    want = _errors.EVALS_COUNT.format(method="eigenvals", most=16, minus="", got=17)
    assert str(info.value) == want
