"""`jaxbridge.scqubits.noise._densities`: the host's spectral densities equal the JAX formulas, and
so do their first derivatives (the complex step) and second derivatives, for every density,
both `total` settings, defaults and given options; under `jit` and `vmap` in one host call."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbridge.scqubits.noise._densities import OPTION, density, spectral_sum, term

pytest.importorskip("scqubits")

FACTOR = 1e9  # GHz
KINDS = ("capacitive", "inductive", "charge_impedance", "flux_bias_line",
         "quasiparticle_tunneling")  # fmt: skip
GIVEN = {"Q_cap": 3e5, "Q_ind": 4e7, "Z": 60.0, "Y_qp": 2e-8}


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


def _options(kind, total, given, t):
    o = {"T": t, "total": total, "M": 380.0, "x_qp": 4e-6, "Delta": 3.2e-4, "Z": 50.0}
    o[OPTION[kind]] = GIVEN[OPTION[kind]] if given else (50.0 if OPTION[kind] == "Z" else None)
    return o


def _both(kind, total, given, fixed_t=False):
    """The host's and the JAX formula's `weight * S` as functions of (omega, E, T, option)."""

    def make(host):
        def f(x):
            omega, e, t, opt = x[0], x[1], x[2], x[3]
            o = _options(kind, total, given, t)
            if given:
                o[OPTION[kind]] = opt
            p = {"E": e}
            energy = lambda q: q["E"]  # noqa: E731
            if not host:
                return 0.7 * density(kind, omega, o, p, FACTOR, energy, fixed_t)
            found = term(kind, o, p, energy, fixed_t)
            assert found.on_host
            return spectral_sum([found], omega[None], jnp.asarray([0.7]), FACTOR)

        return f

    return make(True), make(False)


CASES = list(itertools.product(KINDS, (True, False), (False, True)))


@pytest.mark.parametrize(("kind", "total", "given"), CASES)
def test_host_equals_the_jax_formula_with_derivatives(kind, total, given):
    host, traced = _both(kind, total, given)
    opt = GIVEN[OPTION[kind]]
    for omega in (2 * np.pi * 0.9, -2 * np.pi * 4.5):  # both signs: total=False is uneven
        x = jnp.asarray([omega, 1.3, 0.02, opt])
        want = traced(x)
        assert np.isfinite(float(want)) and float(want) != 0.0
        np.testing.assert_allclose(host(x), want, rtol=1e-13)
        np.testing.assert_allclose(jax.jit(host)(x), want, rtol=1e-13)
        jac = jax.jacfwd(host)(x)
        np.testing.assert_allclose(jac, jax.jacfwd(traced)(x), rtol=1e-10, atol=0)
        np.testing.assert_allclose(jax.grad(host)(x), jac, rtol=1e-12)
        hess = jax.hessian(host)(x)
        want = jax.hessian(traced)(x)
        # central differences of exact first derivatives: to 1e-7, or 1e-9 of the entry's
        # natural size |dS/dx_j| / |x_k| where it vanishes (S is linear in Q, Z, Y)
        size = np.abs(np.asarray(jac))[:, None] / np.abs(np.asarray(x))[None, :]
        tol = 1e-7 * np.abs(want) + 1e-9 * (size + size.T)
        assert np.all(np.abs(hess - want) <= tol), (hess, want)
        # reverse over reverse, as grad(grad(...)) takes it
        assert np.all(np.abs(jax.jacrev(jax.grad(host))(x) - want) <= tol)


def test_fixed_temperature_and_branch_params():
    # Cos2PhiQubit's densities see 0.015 K whatever T is; branch_params replaces the energy
    host, traced = _both("capacitive", True, False, fixed_t=True)
    x = jnp.asarray([2 * np.pi * 0.9, 1.3, 0.05, 0.0])
    np.testing.assert_allclose(host(x), traced(x), rtol=1e-13)
    assert float(jax.grad(host)(x)[2]) == 0.0  # T is not seen
    o = {**_options("inductive", True, False, 0.02), "branch_params": 0.4}
    found = term("inductive", o, {"E": 9.0}, lambda q: q["E"])
    got = spectral_sum([found], jnp.asarray([3.0]), jnp.ones(1), FACTOR)
    want = density("inductive", jnp.asarray(3.0), o, {"E": 9.0}, FACTOR, lambda q: q["E"])
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_a_users_function_stays_on_the_jax_path():
    o = {**_options("capacitive", True, True, 0.02), "Q_cap": lambda w, t: 1e5 + 0 * w}
    found = term("capacitive", o, {"E": 1.0}, lambda q: q["E"])
    assert not found.on_host
    o2 = {**o, "Q_cap": 1e5}
    given = term("capacitive", o2, {"E": 1.0}, lambda q: q["E"])
    # the user's function beside a term the host serves, in one sum
    got = spectral_sum([found, given], jnp.asarray([3.0, 3.0]), jnp.asarray([1.0, 2.0]), FACTOR)
    want = density("capacitive", jnp.asarray(3.0), o2, {"E": 1.0}, FACTOR, lambda q: q["E"])
    np.testing.assert_allclose(got, 3 * want, rtol=1e-13)


def test_vmap_is_one_call_and_equals_each_point():
    host, _ = _both("quasiparticle_tunneling", True, False)
    xs = jnp.stack([jnp.asarray([w, 1.3, t, 0.0]) for w in (1.0, 4.0, 9.0) for t in (0.01, 0.03)])
    one = jnp.stack([host(x) for x in xs])
    np.testing.assert_allclose(jax.jit(jax.vmap(host))(xs), one, rtol=1e-13)
    np.testing.assert_allclose(jax.vmap(jax.grad(host))(xs),
                               jnp.stack([jax.grad(host)(x) for x in xs]), rtol=1e-12)  # fmt: skip
    text = jax.jit(jax.vmap(jax.grad(host))).lower(xs).as_text()
    assert text.count("custom_call_target") <= 2  # the values host and the Jacobian host
