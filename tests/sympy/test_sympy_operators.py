"""operator_sum: a transmon in the charge basis against NumPy, gradients against differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy

import jaxbridge.sympy as jbs

EJ, EC, ng = sympy.symbols("E_J E_C n_g")
n = sympy.Symbol("n", commutative=False)
phi = sympy.Symbol("phi", commutative=False)
H = 4 * EC * (n - ng) ** 2 - EJ * sympy.cos(phi)


def _operators(ncut):
    size = 2 * ncut + 1
    charge = np.diag(np.arange(-ncut, ncut + 1.0))
    cos_phi = 0.5 * (np.eye(size, k=1) + np.eye(size, k=-1))
    return charge, cos_phi


def _numpy_energies(ej, ec, g, ncut):
    charge, cos_phi = _operators(ncut)
    shifted = charge - g * np.eye(2 * ncut + 1)
    return np.linalg.eigvalsh(4 * ec * shifted @ shifted - ej * cos_phi)


@pytest.mark.parametrize("ncut", [10, 20, 30])
def test_transmon_eigenenergies_and_gradients(ncut, x64):
    charge, cos_phi = _operators(ncut)
    h = jbs.operator_sum(H, {n: charge, sympy.cos(phi): cos_phi}, [EJ, EC, ng])
    params = (20.0, 0.3, 0.2)
    energies = np.asarray(jnp.linalg.eigvalsh(h(*params)))
    want = _numpy_energies(*params, ncut)
    np.testing.assert_allclose(energies, want, rtol=1e-10)

    def transition(p):
        e = jnp.linalg.eigvalsh(h(*p))
        return e[1] - e[0]

    grad = np.asarray(jax.jit(jax.grad(transition))(jnp.asarray(params)))
    step = 1e-5
    numeric = []
    for i in range(3):
        up, down = list(params), list(params)
        up[i] += step
        down[i] -= step
        e_up, e_down = _numpy_energies(*up, ncut), _numpy_energies(*down, ncut)
        numeric.append(((e_up[1] - e_up[0]) - (e_down[1] - e_down[0])) / (2 * step))
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_batched_parameters_and_commuting_and_identity_terms():
    a, b = sympy.symbols("a b")
    sx, sz = sympy.symbols("sx sz")  # commutative symbols: products in canonical order
    X = np.array([[0.0, 1.0], [1.0, 0.0]])
    Z = np.diag([1.0, -1.0])
    h = jbs.operator_sum(a * sz + b * sx**2 + a * b, {sx: X, sz: Z}, [a, b])
    out = h(jnp.array([1.0, 2.0]), 3.0)
    assert out.shape == (2, 2, 2)
    np.testing.assert_allclose(out[1], 2 * Z + 3 * np.eye(2) + 6 * np.eye(2))
    energies = jax.vmap(lambda p: jnp.linalg.eigvalsh(h(p, 1.0)))(jnp.arange(3.0))
    assert energies.shape == (3, 2)


def test_noncommutative_products_keep_their_order():
    a = sympy.Symbol("a")
    p, q = sympy.symbols("p q", commutative=False)
    P = np.array([[0.0, 1.0], [0.0, 0.0]])
    Q = np.array([[0.0, 0.0], [1.0, 0.0]])
    h = jbs.operator_sum(a * p * q, {p: P, q: Q}, [a])
    np.testing.assert_allclose(h(2.0), 2 * P @ Q)


def test_operator_errors():
    a = sympy.Symbol("a")
    p = sympy.Symbol("p", commutative=False)
    with pytest.raises(ValueError, match="must be a square matrix"):
        jbs.operator_sum(a * p, {p: np.ones((2, 3))}, [a])
    with pytest.raises(ValueError, match="mixes operators inside a function"):
        jbs.operator_sum(sympy.exp(a * p), {p: np.eye(2)}, [a])
