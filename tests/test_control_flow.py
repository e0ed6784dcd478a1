"""Host calls inside scan, while_loop, cond and fori_loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cases import STRATEGIES
from jax import lax

import jaxbridge


@pytest.fixture(params=STRATEGIES)
def step(request, lowering):
    return jaxbridge.host(lambda x: np.cos(x) + 0.5, vmap=request.param)


def ref(x):
    return jnp.cos(x) + 0.5


def test_scan(step):
    x0 = jnp.linspace(0.0, 1.0, 3)
    got = jax.jit(lambda x: lax.scan(lambda c, _: (step(c), c), x, None, length=6))(x0)
    want = lax.scan(lambda c, _: (ref(c), c), x0, None, length=6)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_while_and_fori(step):
    x0 = jnp.linspace(0.0, 1.0, 3)

    def loop(f):
        def cond(c):
            return c[0] < 5

        def body(c):
            return c[0] + 1, f(c[1])

        return lax.while_loop(cond, body, (0, x0))[1]

    np.testing.assert_allclose(jax.jit(lambda: loop(step))(), loop(ref), rtol=1e-6)
    got = jax.jit(lambda x: lax.fori_loop(0, 4, lambda i, c: step(c), x))(x0)
    np.testing.assert_allclose(got, lax.fori_loop(0, 4, lambda i, c: ref(c), x0), rtol=1e-6)


def test_cond_runs_only_the_taken_branch(lowering):
    ran = []
    a = jaxbridge.host(lambda x: (ran.append("a"), x + 1)[1])
    b = jaxbridge.host(lambda x: (ran.append("b"), x - 1)[1])
    f = jax.jit(lambda p, x: lax.cond(p, a, b, x))
    x = jnp.ones(2)
    f(True, x)  # trace (probes both) + run
    ran.clear()
    np.testing.assert_allclose(f(True, x), [2, 2])
    np.testing.assert_allclose(f(False, x), [0, 0])
    assert ran == ["a", "b"]


def test_scan_of_vmap_and_vmap_of_scan(step):
    x0 = jnp.linspace(0.0, 1.0, 6).reshape(2, 3)

    def scanned(f):
        return lambda x: lax.scan(lambda c, _: (f(c), None), x, None, length=3)[0]

    np.testing.assert_allclose(
        jax.jit(jax.vmap(scanned(step)))(x0), jax.vmap(scanned(ref))(x0), rtol=1e-6
    )
    np.testing.assert_allclose(
        jax.jit(scanned(jax.vmap(step)))(x0), scanned(jax.vmap(ref))(x0), rtol=1e-6
    )
