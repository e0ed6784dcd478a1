"""Hierarchical Circuits with a subsystem purely harmonic in two or more variables.

scqubits solves such a subsystem in its normal modes (`_diagonalize_purely_harmonic_hamiltonian`,
its test `test_eigenvals_harmonic`); `jaxbridge.scqubits.composite._normal_modes` does the same
in JAX.
Every number here is compared with scqubits evaluated directly at the same point.
"""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy
from jax.test_util import check_grads
from scqubits_cases import central_difference, dense

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits.composite import _hs_errors
from jaxbridge.scqubits.composite._normal_modes import NormalModesPart, normal_modes

scq = pytest.importorskip("scqubits")


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


def _circuit(yaml, **kwargs):
    with warnings.catch_warnings():  # scqubits' YAML parser calls pyparsing's deprecated names
        warnings.simplefilter("ignore", DeprecationWarning)
        return scq.Circuit(yaml, from_file=False, **kwargs)


def eigenvals_harmonic(cutoffs=(20, 10, 10), dims=(20, 30)):
    """scqubits' `test_eigenvals_harmonic`: a transmon beside two coupled LC modes."""
    yaml = """branches:
- [JJ, 0, 1, 1, 15]
- [C, 1, 2, 2]
- [L, 2, 0, 0.4]
- [C, 2, 0, 0.2]
- [C, 2, 3, 0.5]
- [L, 3, 0, 0.5]
"""
    circ = _circuit(yaml, ext_basis="discretized")
    circ.configure(transformation_matrix=np.array([[1, 0, 0], [0, 1, 0], [0, 1, 1]]))
    circ.cutoff_n_1, circ.cutoff_ext_2, circ.cutoff_ext_3 = cutoffs
    circ.configure(system_hierarchy=[[1], [2, 3]], subsystem_trunc_dims=list(dims))
    circ.ng1 = 0.5
    return circ


def transmon_and_two_lc():
    """A transmon (node 1) capacitively coupled to two LC oscillators coupled to each other."""
    yaml = """branches:
- [JJ, 0, 1, EJ=12, 10]
- [C, 1, 2, 1.5]
- [L, 2, 0, 0.4]
- [C, 2, 0, 0.3]
- [C, 2, 3, 0.5]
- [L, 3, 0, 0.5]
- [C, 3, 0, 0.8]
"""
    circ = _circuit(yaml, ext_basis="discretized")
    circ.configure(transformation_matrix=np.eye(3, dtype=int))
    circ.cutoff_n_1, circ.cutoff_ext_2, circ.cutoff_ext_3 = 8, 8, 8
    circ.configure(system_hierarchy=[[1], [2, 3]], subsystem_trunc_dims=[8, 12])
    circ.ng1 = 0.3
    return circ


def lc_loop_beside_a_transmon():
    """The two LC modes in an inductive loop: the subsystem holds the external flux Φ1."""
    yaml = """branches:
- [JJ, 0, 1, EJ=12, 10]
- [C, 1, 2, 1.5]
- [L, 2, 0, 0.4]
- [C, 2, 0, 0.3]
- [L, 2, 3, 0.6]
- [L, 3, 0, 0.5]
- [C, 3, 0, 0.8]
"""
    circ = _circuit(yaml, ext_basis="discretized")
    circ.configure(transformation_matrix=np.eye(3, dtype=int))
    circ.cutoff_n_1, circ.cutoff_ext_2, circ.cutoff_ext_3 = 6, 7, 7
    circ.configure(system_hierarchy=[[1], [2, 3]], subsystem_trunc_dims=[6, 10])
    circ.ng1, circ.Φ1 = 0.2, 0.3
    return circ


def test_a_flux_in_the_normal_mode_subsystem():
    circ = lc_loop_beside_a_transmon()
    m = jbq.model(circ)
    assert "Φ1" in m.params
    flux = jnp.array([0.1, 0.45])
    sweep = jax.jit(lambda f: m.eigenvals({"Φ1": f, "ng1": 0.35}, evals_count=6))(flux)
    circ.ng1 = 0.35
    for f, got in zip(flux, sweep):
        circ.Φ1 = float(f)
        np.testing.assert_allclose(got, circ.eigenvals(6), rtol=1e-9)


def test_scqubits_test_eigenvals_harmonic():
    circ = eigenvals_harmonic()
    m = jbq.model(circ)
    assert m.dim == circ.hilbertdim() == 600
    np.testing.assert_allclose(m.eigenvals(evals_count=6), circ.eigenvals(6), rtol=1e-9)


def test_two_lc_beside_a_transmon_eigensys_and_hamiltonian():
    circ = transmon_and_two_lc()
    m = jbq.model(circ)
    assert sorted(m.params) == ["EJ", "ng1"]
    w, v = m.eigensys(evals_count=5)
    want_w, want_v = circ.eigensys(5)
    np.testing.assert_allclose(w, want_w, rtol=1e-9)
    # the same states in the same bare product basis, up to each bare state's phase
    np.testing.assert_allclose(np.abs(v), np.abs(want_v), atol=1e-8)
    theirs = np.abs(dense(circ.hamiltonian()))
    np.testing.assert_allclose(np.abs(m.hamiltonian()), theirs, atol=1e-9)
    # a vmapped sweep equals scqubits point by point
    ng = jnp.array([0.1, 0.45])
    sweep = m.eigenvals({"ng1": ng}, evals_count=4)
    for x, got in zip(ng, sweep):
        circ.ng1 = float(x)
        np.testing.assert_allclose(got, circ.eigenvals(4), rtol=1e-9)


@pytest.mark.parametrize(("name", "x0"), [("ng1", 0.3), ("EJ", 12.0)])
def test_gradients_against_differences_of_scqubits(name, x0):
    circ = transmon_and_two_lc()
    m = jbq.model(circ)

    def theirs(x):
        setattr(circ, name, x)
        return float(np.diff(circ.eigenvals(3))[1])

    ours = lambda x: jnp.diff(m.eigenvals({name: x}, evals_count=3))[1]
    want = central_difference(theirs, x0, 1e-3 * max(abs(x0), 1.0))
    grad = jax.jit(jax.grad(ours))(x0)
    np.testing.assert_allclose(grad, want, rtol=1e-7)
    np.testing.assert_allclose(jax.jacfwd(ours)(x0), grad, rtol=1e-9)
    check_grads(ours, (x0,), order=1, modes=("fwd", "rev"), eps=1e-4, atol=1e-6, rtol=1e-5)


def _matrices(x):
    """A parameter-dependent EC and EL (symmetric, positive definite) of three modes."""
    ec = jnp.array([[0.9, 0.3, 0.1], [0.3, 1.6, 0.2], [0.1, 0.2, 1.1]]) * x[0]
    el = jnp.array([[0.45, -0.2, 0.0], [-0.2, 0.5, 0.1], [0.0, 0.1, 0.7]]) + x[1] * jnp.eye(3)
    return ec, el


def test_normal_modes_under_jit_vmap_and_grad():
    def frequencies(x):
        ec, el = _matrices(x)
        a, b = normal_modes(ec, el)
        # in the modes, EC' = B^T EC B and EL' = A^T EL A are diagonal: f_j = sqrt(8 EC'_jj EL'_jj)
        return jnp.sqrt(8 * jnp.diagonal(b.T @ ec @ b) * jnp.diagonal(a.T @ el @ a))

    xs = jnp.array([[1.0, 0.0], [0.7, 0.3], [1.3, 0.1]])
    got = jax.jit(jax.vmap(frequencies))(xs)
    for x, f in zip(xs, got):
        ec, el = (np.asarray(m) for m in _matrices(x))
        want = np.sort(np.sqrt(np.linalg.eigvals(8 * ec @ el).real))  # scqubits' definition
        np.testing.assert_allclose(f, want, rtol=1e-12)
        a, b = normal_modes(*_matrices(x))
        np.testing.assert_allclose(a @ b.T, np.eye(3), atol=1e-12)  # θ and Q stay conjugate
        off = a.T @ _matrices(x)[1] @ a
        np.testing.assert_allclose(off - jnp.diag(jnp.diagonal(off)), 0, atol=1e-12)
    check_grads(jax.jit(frequencies), (xs[1],), order=1, modes=("fwd", "rev"))


def _assert_no_solver_call(fn, *args):
    """No LAPACK custom call in the compiled program (tests/scqubits/test_scqubits_no_hang.py)."""
    text = jax.jit(fn).lower(*args).compile().as_text() or ""
    targets = re.findall(r'custom_call_target="([^"]+)"', text)
    assert targets, "the eigensolvers are host calls: custom calls expected"
    assert not [t for t in targets if "lapack" in t.lower()], targets


def test_programs_call_no_lapack_inside_xla():
    m = jbq.model(transmon_and_two_lc())
    f01 = lambda ng: jnp.diff(m.eigenvals({"ng1": ng}, evals_count=2))[0]
    _assert_no_solver_call(jax.vmap(jax.grad(f01)), jnp.linspace(0.1, 0.4, 8))
    _assert_no_solver_call(
        jax.vmap(lambda ng: m.eigensys({"ng1": ng}, 3)), jnp.linspace(0.1, 0.4, 8)
    )

    def modes(x):
        a, b = normal_modes(*_matrices(x))
        return jnp.sum(a**2) + jnp.sum(b**2)

    _assert_no_solver_call(jax.vmap(jax.grad(modes)), jnp.ones((8, 2)))


def test_unequal_cutoffs_are_refused_with_the_reason():
    circ = eigenvals_harmonic(cutoffs=(4, 4, 5), dims=(4, 6))
    with pytest.raises(ValueError) as info:
        jbq.model(circ)
    assert str(info.value) == _hs_errors.HD_NORMAL_MODES_CUTOFFS.format(
        indices=[2, 3], cutoffs=[4, 5]
    )


def test_operators_in_the_modes_and_the_refused_factors():
    circ = transmon_and_two_lc()
    sub = circ.subsystems[1]
    part = NormalModesPart(sub)
    p = {n: jnp.asarray(v) for n, v in part.defaults.items()}
    for name in ("Q2", "θ3"):
        fn, _ = part.lifted(sympy.Symbol(name))
        theirs = dense(getattr(sub, f"{name}_operator")())
        # the same matrix up to each mode's sign (a parity of that mode)
        np.testing.assert_allclose(np.abs(fn(p)), np.abs(theirs), atol=1e-12)
    q2, t3 = sympy.Symbol("Q2"), sympy.Symbol("θ3")
    with pytest.raises(ValueError) as info:
        part.lifted(q2 * t3)
    assert str(info.value) == _hs_errors.HD_NORMAL_MODES_MIXED.format(
        indices=[2, 3], what=f"the operator `{q2 * t3}`", term=q2 * t3
    )
    with pytest.raises(ValueError) as info:
        part.lifted(sympy.cos(t3))
    assert str(info.value) == _hs_errors.HD_NORMAL_MODES_EXPR.format(
        indices=[2, 3], what=f"the operator `{sympy.cos(t3)}`", expr=sympy.cos(t3)
    )
