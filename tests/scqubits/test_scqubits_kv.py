"""`jaxbridge.scqubits.noise._kv`: SciPy's scaled `K_0`, `K_1` on the host, with JAX derivatives."""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from jax.test_util import check_grads

from jaxbridge.scqubits.noise._kv import k0_sinh, k01e


def test_k0_sinh_equals_scipy_and_stays_finite(x64):
    x = np.concatenate([np.logspace(-8, 2.8, 200), [1.9999999, 2.0, 2.0000001]])
    got = k0_sinh(jnp.asarray(x))
    np.testing.assert_allclose(got, scipy.special.kv(0, x) * np.sinh(x), rtol=1e-13)
    assert np.isfinite(float(k0_sinh(jnp.asarray(1000.0))))  # sinh alone overflows there


def test_derivatives_are_the_bessel_recurrences(x64):
    x = np.logspace(-3, 2, 50)
    d = jax.vmap(jax.grad(lambda y: k0_sinh(y)))(jnp.asarray(x))
    want = -scipy.special.k1(x) * np.sinh(x) + scipy.special.k0(x) * np.cosh(x)
    np.testing.assert_allclose(d, want, rtol=1e-10)
    d2 = jax.vmap(jax.grad(lambda y: k01e(y)[1]))(jnp.asarray(x))  # (e^x K_1)' by its formula
    want2 = np.exp(x) * (scipy.special.k1(x) + scipy.special.kvp(1, x))
    np.testing.assert_allclose(d2, want2, rtol=1e-10)
    for point in (0.3, 4.0):  # first and second order, forward and reverse
        check_grads(k0_sinh, (jnp.asarray(point),), order=2, modes=("fwd", "rev"))


def test_jit_and_vmap_take_a_batch_in_one_call(x64):
    x = jnp.asarray([[0.5, 1.0], [2.0, 3.0]])
    eager = k0_sinh(x)
    np.testing.assert_allclose(jax.jit(jax.vmap(k0_sinh))(x), eager, rtol=1e-15)
    np.testing.assert_allclose(jax.vmap(jax.vmap(k0_sinh), in_axes=1, out_axes=1)(x), eager,
                               rtol=1e-15)  # fmt: skip
    assert k0_sinh(x.astype(jnp.float32)).dtype == jnp.float32
