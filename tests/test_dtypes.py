"""Dtypes with and without x64: what the host receives and what comes back."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxbridge


def _seen():
    seen = []

    @jaxbridge.host
    def f(x, n, flag):
        seen.append((x.dtype, n.dtype, flag.dtype))
        return x * 2.0, n + 1, ~flag

    return f, seen


def test_x64_off_host_gets_32_bit_and_float64_results_are_narrowed(lowering):
    f, seen = _seen()
    x, n, flag = jax.jit(f)(1.5, 3, True)  # Python numbers are traced as weak scalars
    assert (x.dtype, n.dtype, flag.dtype) == (jnp.float32, jnp.int32, jnp.bool_)
    assert seen[-1] == (np.float32, np.int32, np.bool_)
    assert (float(x), int(n), bool(flag)) == (3.0, 4, False)


def test_x64_on_host_gets_64_bit(x64, lowering):
    f, seen = _seen()
    x, n, _ = jax.jit(f)(1.5, 3, True)
    assert (x.dtype, n.dtype) == (jnp.float64, jnp.int64)
    assert seen[-1][:2] == (np.float64, np.int64)
    # and float32 inputs stay float32
    g = jaxbridge.host(lambda x: x + np.float32(1))
    assert jax.jit(g)(jnp.ones(2, jnp.float32)).dtype == jnp.float32


@pytest.mark.parametrize(
    "dtype",
    [
        jnp.float16,
        jnp.bfloat16,
        jnp.float32,
        jnp.int8,
        jnp.uint8,
        jnp.int32,
        jnp.bool_,
        jnp.complex64,
    ],
)
def test_round_trip_of_each_dtype(dtype, lowering):
    f = jaxbridge.host(lambda x: x)
    x = jnp.asarray(np.arange(6).reshape(2, 3) % 2, dtype)
    y = jax.jit(f)(x)
    assert y.dtype == x.dtype
    as_f32 = lambda a: np.asarray(a).astype(np.complex64).real  # noqa: E731
    np.testing.assert_array_equal(as_f32(y), as_f32(x))
    np.testing.assert_array_equal(as_f32(jax.vmap(f)(x)), as_f32(x))


def test_zero_d_and_zero_size(lowering):
    f = jaxbridge.host(lambda x, y: (x * 2, y.sum(axis=-1)), vmap="vectorized")
    a, b = jax.jit(f)(jnp.float32(2.0), jnp.ones((0,)))
    assert (a.shape, b.shape, float(a), float(b)) == ((), (), 4.0, 0.0)
    a, b = jax.vmap(f)(jnp.ones(3), jnp.ones((3, 0)))
    assert (a.shape, b.shape) == ((3,), (3,))


def test_declared_result_dtype_is_honoured(x64):
    f = jaxbridge.host(lambda x: x, result=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.float32))
    assert jax.jit(f)(jnp.ones(2, jnp.float64)).dtype == jnp.float32
