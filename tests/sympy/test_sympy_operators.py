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
        e_up = _numpy_energies(up[0], up[1], up[2], ncut)
        e_down = _numpy_energies(down[0], down[1], down[2], ncut)
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


# What issue 14 taught operator_sum: shifted cosines, dead keys, sparse operators, the split, and
# parameter-dependent matrix functions of a fixed Hermitian factor.

flux = sympy.Symbol("flux")


def test_shifted_cosine_is_expanded_over_cos_and_sin(x64):
    charge, cos_phi = _operators(5)
    sin_phi = 0.5j * (np.eye(11, k=1) - np.eye(11, k=-1))  # scqubits' sign convention
    # An asymmetric SQUID: the flux cannot be gauged away.
    H2 = 4 * EC * n**2 - EJ * sympy.cos(phi + 2 * sympy.pi * flux) - 3 * sympy.cos(phi)
    h = jbs.operator_sum(
        H2, {n: charge, sympy.cos(phi): cos_phi, sympy.sin(phi): sin_phi}, [EJ, EC, flux]
    )
    angle = 2 * np.pi * 0.3
    want = 4 * 0.3 * charge @ charge - 20.0 * (np.cos(angle) * cos_phi - np.sin(angle) * sin_phi)
    want = want - 3 * cos_phi
    np.testing.assert_allclose(h(20.0, 0.3, 0.3), want, atol=1e-12)
    # The flux enters through compiled coefficients, so its gradient is alive.
    e0 = lambda f: jnp.linalg.eigvalsh(h(2.0, 0.3, f))[0]
    step = 1e-5
    numeric = (e0(0.3 + step) - e0(0.3 - step)) / (2 * step)
    np.testing.assert_allclose(jax.grad(e0)(0.3), numeric, rtol=1e-6)


def test_shifted_cosine_without_sin_key_names_the_fix():
    H2 = -EJ * sympy.cos(phi + 2 * sympy.pi * flux)
    with pytest.raises(ValueError, match=r"needs the operator key\(s\) sin\(phi\)"):
        jbs.operator_sum(H2, {sympy.cos(phi): np.eye(3)}, [EJ, flux])


def test_operator_key_with_a_parameter_is_refused():
    key = sympy.cos(phi + 2 * sympy.pi * flux)
    with pytest.raises(
        ValueError,
        match=r"the operator key `cos\(2\*pi\*flux \+ phi\)` contains the parameter\(s\) flux",
    ):
        jbs.operator_sum(-EJ * key, {key: np.eye(3)}, [EJ, flux])


def test_scipy_sparse_operators(x64):
    import scipy.sparse as sparse

    charge, cos_phi = _operators(6)
    h_sparse = jbs.operator_sum(
        H, {n: sparse.csr_array(charge), sympy.cos(phi): sparse.csc_matrix(cos_phi)}, [EJ, EC, ng]
    )
    h_dense = jbs.operator_sum(H, {n: charge, sympy.cos(phi): cos_phi}, [EJ, EC, ng])
    np.testing.assert_allclose(h_sparse(20.0, 0.3, 0.2), h_dense(20.0, 0.3, 0.2), atol=1e-12)
    assert all(sparse.issparse(o) for o, p in zip(h_sparse.operators, h_sparse.products) if p)


def test_the_split_coefficients_operators_and_d_hamiltonian(x64):
    charge, cos_phi = _operators(4)
    h = jbs.operator_sum(H, {n: charge, sympy.cos(phi): cos_phi}, [EJ, EC, ng])
    values = (20.0, 0.3, 0.2)
    c = h.coefficients(*values)
    assert c.shape == (len(h.operators),)
    rebuilt = sum(
        ci * np.asarray(o.toarray() if hasattr(o, "toarray") else o)
        for ci, o in zip(np.asarray(c), h.operators)
    )
    np.testing.assert_allclose(rebuilt, h(*values), atol=1e-12)
    for i, p in enumerate([EJ, EC, ng]):
        want = jax.jacfwd(lambda v, i=i: h(*[v if j == i else x for j, x in enumerate(values)]))(
            values[i]
        )
        np.testing.assert_allclose(h.d_hamiltonian(p, *values), want, atol=1e-12)
    np.testing.assert_allclose(
        h.d_hamiltonian(ng, *values), -8 * 0.3 * charge + 8 * 0.3 * 0.2 * np.eye(9), atol=1e-12
    )


def _fluxonium_reference(ej, ec, el, f, dim):
    import scipy.linalg

    a = np.diag(np.sqrt(np.arange(1.0, dim)), k=1)
    x = (a + a.T) / np.sqrt(2)
    length = (8 * ec / el) ** 0.25
    lc = np.sqrt(8 * ec * el) * np.diag(np.arange(dim) + 0.5)
    return lc - ej * scipy.linalg.cosm(length * x + 2 * np.pi * f * np.eye(dim)), x


def test_hermitian_factor_matrix_function_with_parameter_dependent_length(x64):
    EL, x = sympy.symbols("E_L x")
    dim = 30
    _, X = _fluxonium_reference(1, 1, 1, 0, dim)
    N = sympy.Symbol("N")
    length = (8 * EC / EL) ** sympy.Rational(1, 4)
    H3 = sympy.sqrt(8 * EC * EL) * (N + sympy.Rational(1, 2)) - EJ * sympy.cos(
        length * x + 2 * sympy.pi * flux
    )
    h = jbs.operator_sum(
        H3, {N: np.diag(np.arange(dim * 1.0)), x: jbs.HermitianFactor(X)}, [EJ, EC, EL, flux]
    )
    assert len(h.spectral) == 1
    values = (8.9, 2.5, 0.5, 0.33)
    want, _ = _fluxonium_reference(*values, dim)
    np.testing.assert_allclose(h(*values), want, atol=1e-11)
    e01 = lambda ec: jnp.diff(jnp.linalg.eigvalsh(h(8.9, ec, 0.5, 0.33))[:2])[0]
    step = 1e-4
    numeric = [
        np.diff(np.linalg.eigvalsh(_fluxonium_reference(8.9, ec, 0.5, 0.33, dim)[0])[:2])[0]
        for ec in (2.5 - step, 2.5 + step)
    ]
    np.testing.assert_allclose(
        jax.grad(e01)(2.5), (numeric[1] - numeric[0]) / (2 * step), rtol=1e-6
    )
    # On one tensor factor: kron(I_2, f(X), I_3), batched parameters.
    h2 = jbs.operator_sum(
        sympy.cos(length * x), {x: jbs.HermitianFactor(X[:4, :4], left=2, right=3)}, [EC, EL]
    )
    out = h2(jnp.array([1.0, 2.0]), 0.5)
    assert out.shape == (2, 24, 24)
    import scipy.linalg

    np.testing.assert_allclose(
        out[1],
        np.kron(np.kron(np.eye(2), scipy.linalg.cosm(32.0**0.25 * X[:4, :4])), np.eye(3)),
        atol=1e-12,
    )


def test_hermitian_factor_errors():
    x = sympy.Symbol("x")
    with pytest.raises(ValueError, match="must be square and Hermitian"):
        jbs.HermitianFactor(np.array([[0.0, 1.0], [0.0, 0.0]]))
    X = jbs.HermitianFactor(np.eye(2))
    p = sympy.Symbol("p", commutative=False)
    with pytest.raises(ValueError, match="multiplied by other operators"):
        jbs.operator_sum(EJ * sympy.cos(EJ * x) * p, {x: X, p: np.eye(2)}, [EJ])
