"""Port of JAX's callback tests: `vmap` of host calls, and jaxbridge's two batching methods.

JAX's `vmap_method="sequential"` is jaxbridge's `vmap="sequential"` (the default). JAX's
`"expand_dims"`, `"broadcast_all"` and `"legacy_vectorized"` all map to `vmap="vectorized"`,
which hands the host function every array argument stacked or broadcast to `(B, *shape)`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxbridge

F32 = jnp.float32


def _like(*args):
    return jax.ShapeDtypeStruct(args[0].shape, args[0].dtype)


def _sin_plus(x, y):
    return np.sin(x) + y


def test_can_vmap(mode):
    sin = mode.host(np.sin, result=_like)
    np.testing.assert_allclose(
        jax.jit(jax.vmap(sin))(jnp.arange(4.0)), np.sin(np.arange(4.0)), rtol=1e-6
    )
    x = jnp.arange(8.0).reshape(4, 2)
    out = jax.vmap(jax.jit(sin), in_axes=1)(x)
    np.testing.assert_allclose(out, np.sin(np.asarray(x)).T, rtol=1e-6)


@pytest.mark.parametrize("vmap", ["sequential", "vectorized"])
def test_can_vmap_with_unbatched_and_batched_arguments(mode, vmap):
    f = mode.host(_sin_plus, result=_like, vmap=vmap)
    x, y = jnp.arange(4.0), jnp.arange(10.0, 14.0)
    expected = np.sin(np.arange(4.0)) + np.arange(10.0, 14.0)
    out = jax.jit(jax.vmap(f, in_axes=(0, None)))(x, 4.0)
    np.testing.assert_allclose(out, np.sin(np.arange(4.0)) + 4.0, rtol=1e-6)
    np.testing.assert_allclose(jax.jit(jax.vmap(f))(x, y), expected, rtol=1e-6)
    out = jax.jit(jax.vmap(f, in_axes=1, out_axes=1))(x[None], y[None])
    np.testing.assert_allclose(out, expected[None], rtol=1e-6)
    out = jax.jit(jax.vmap(f, in_axes=(None, 0)))(2.0, y)
    np.testing.assert_allclose(out, np.sin(np.float32(2.0)) + np.arange(10.0, 14.0), rtol=1e-6)


def test_sequential_host_function_sees_unbatched_shapes(mode):
    shapes = []

    def fn(x):
        shapes.append(x.shape)
        return np.sin(x)

    f = jax.jit(jax.vmap(mode.host(fn, result=_like, vmap="sequential")))
    np.testing.assert_allclose(f(jnp.arange(4.0)), np.sin(np.arange(4.0)), rtol=1e-6)
    jax.effects_barrier()
    assert shapes == [()] * 4


def test_vectorized_host_function_sees_the_stacked_batch(mode):
    shapes = []

    def fn(x):
        shapes.append(x.shape)
        return np.sin(x)

    f = jax.jit(jax.vmap(mode.host(fn, result=_like, vmap="vectorized")))
    np.testing.assert_allclose(f(jnp.arange(4.0)), np.sin(np.arange(4.0)), rtol=1e-6)
    jax.effects_barrier()
    assert shapes == [(4,)]


def test_vectorized_with_an_unbatched_argument_like_expand_dims(mode):
    """Documented difference: JAX's `expand_dims` hands an unbatched argument over with a
    size-1 batch dimension (`y.shape == (1,)`); jaxbridge's `vectorized` broadcasts it to the
    batch, as JAX's `broadcast_all` does, so every argument has the same leading size."""
    seen = []

    def fn(x, y):
        seen.append((x.shape, y.shape))
        return x + y

    f = mode.host(fn, result=_like, vmap="vectorized")
    out = jax.vmap(f, in_axes=(0, None))(jnp.arange(4.0), 1.0)
    jax.effects_barrier()
    np.testing.assert_array_equal(out, np.arange(4.0) + 1.0)
    assert seen == [((4,), (4,))]


def test_vectorized_like_broadcast_all(mode):
    seen = []

    def fn(x, y):
        seen.append((x.shape, y.shape))
        return x + y

    f = mode.host(fn, result=_like, vmap="vectorized")
    jax.vmap(f, in_axes=(0, None))(jnp.arange(4.0), jnp.ones(()))
    jax.effects_barrier()
    assert seen == [((4,), (4,))]


def test_vectorized_like_legacy_vectorized_with_out_axes(mode):
    """JAX's `legacy_vectorized` passes the unbatched `y` as the scalar it is, so
    `np.sin(x) + y` broadcasts; jaxbridge broadcasts `y` to `(B,)` (documented difference),
    so a vectorized host function aligns the batch axis itself."""
    seen = []

    def fn(x, y):
        seen.append((x.shape, y.shape))
        return np.sin(x) + y[..., None]

    f = mode.host(fn, result=_like, vmap="vectorized")
    g = jax.jit(jax.vmap(f, in_axes=(1, None), out_axes=1))
    out = g(jnp.arange(4.0)[None], 4.0)
    jax.effects_barrier()
    np.testing.assert_allclose(out, np.sin(np.arange(4.0)[None]) + 4.0, rtol=1e-6)
    assert seen == [((4, 1), (4,))]


def test_nested_vmap_is_one_host_call(mode):
    shapes = []

    def fn(x, y):
        shapes.append((x.shape, y.shape))
        return x * y

    f = mode.host(fn, result=_like, vmap="vectorized")
    x = jnp.arange(6.0).reshape(2, 3)
    out = jax.jit(jax.vmap(jax.vmap(f, in_axes=(0, None)), in_axes=(0, 0)))(x, jnp.arange(2.0))
    jax.effects_barrier()
    np.testing.assert_array_equal(out, np.asarray(x) * np.arange(2.0)[:, None])
    assert shapes == [((6,), (6,))]


def test_vmap_without_a_method_is_sequential():
    """Documented difference: `pure_callback` without `vmap_method` refuses `vmap`
    (NotImplementedError "vmap is only supported..."); jaxbridge's default is
    `vmap="sequential"`, which is always correct for a function of unbatched arguments."""
    with pytest.raises(NotImplementedError, match="vmap is only supported"):
        jax.vmap(lambda x: jax.pure_callback(np.sin, x, x))(jnp.arange(4.0))
    f = jaxbridge.host(np.sin, result=_like)
    np.testing.assert_allclose(jax.vmap(f)(jnp.arange(4.0)), np.sin(np.arange(4.0)), rtol=1e-6)


def test_vmap_matches_pure_callback_sequential(mode):
    """The sampled comparison: the same function through `pure_callback(vmap_method=
    "sequential")` and through each jaxbridge mode, over in_axes and batch sizes."""
    rng = np.random.default_rng(0)
    f = mode.host(_sin_plus, result=_like)

    def reference(x, y):
        return jax.pure_callback(_sin_plus, _like(x), x, y, vmap_method="sequential")

    for in_axes in [(0, None), (None, 0), (0, 0), (1, 0)]:
        n = int(rng.integers(1, 5))
        x = jnp.asarray(rng.normal(size=(n, n) if in_axes[0] == 1 else (n,)), F32)
        y = jnp.asarray(rng.normal(size=(n,)), F32)
        x = x if in_axes[0] is not None else x[0]
        y = y if in_axes[1] is not None else y[0]
        vf = functools.partial(jax.vmap, in_axes=in_axes)
        np.testing.assert_allclose(jax.jit(vf(f))(x, y), jax.jit(vf(reference))(x, y), rtol=1e-6)
