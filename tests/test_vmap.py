"""vmap: every in_axes pattern and nesting is ONE host call; the host sees the right shapes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cases import CASES, STRATEGIES
from test_jit import assert_tree_close

import jaxbridge


def _batched(args, axes, size=4, seed=10):
    """Each argument stacked `size` times (with different values) along its axis, or as is."""
    rng = np.random.default_rng(seed)

    def stack(x, ax):
        noise = rng.integers(0, 3, size=(size, *x.shape)).astype(x.dtype)
        return jnp.asarray(np.moveaxis(np.stack([np.asarray(x)] * size) + noise, 0, ax))

    return [
        a if ax is None else jax.tree_util.tree_map(lambda x, ax=ax: stack(x, ax), a)
        for a, ax in zip(args, axes)
    ]


@pytest.mark.parametrize("case", CASES, ids=repr)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_vmap_all_in_axes_patterns(case, strategy, lowering):
    f = jaxbridge.host(case.host_fn, vmap=strategy)
    args = case.args()
    n = len(args)
    patterns = {(0,) * n, *[tuple(0 if i == j else None for i in range(n)) for j in range(n)]}
    for axes in sorted(patterns, key=str):
        b = _batched(args, axes)
        got = jax.jit(jax.vmap(f, in_axes=axes))(*b)
        assert_tree_close(got, jax.vmap(case.reference, in_axes=axes)(*b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_nested_vmap_and_out_axes_are_one_call(strategy, lowering):
    calls, shapes = [], []

    def fn(x, y):
        calls.append(1)
        shapes.append((x.shape, y.shape))
        return x * y

    f = jaxbridge.host(fn, vmap=strategy)
    x = jnp.arange(15.0, dtype=jnp.float32).reshape(5, 3)
    y = jnp.arange(21.0, dtype=jnp.float32).reshape(7, 3)
    inner = jax.vmap(f, in_axes=(0, None))
    outer = jax.jit(jax.vmap(inner, in_axes=(None, 0), out_axes=1))
    f(x[0], y[0])  # eager: no probe
    calls.clear()
    shapes.clear()
    got = outer(x, y)
    assert got.shape == (5, 7, 3)
    np.testing.assert_allclose(got, x[:, None, :] * y[None, :, :])
    n_probe = 1  # the probe call at trace time
    assert len(calls) == n_probe + (1 if strategy == "vectorized" else 35)
    if strategy == "vectorized":
        assert shapes[-1] == ((35, 3), (35, 3))  # flattened batch, broadcast
    else:
        assert set(shapes) == {((3,), (3,))}  # the host loop hands over single elements


def test_sequential_batch_is_one_xla_callback(lowering):
    """The host loops; XLA makes one callback (not one per element, as pure_callback does)."""
    entered = []

    class Counting(jaxbridge._batching.Sequential):
        def run(self, call, batch, ins, outs):
            entered.append(batch)
            super().run(call, batch, ins, outs)

    f = jaxbridge.host(lambda x: x + 1, vmap=Counting())
    jax.jit(jax.vmap(f))(jnp.ones((1000, 2))).block_until_ready()
    assert entered == [(1000,)]


def test_vmap_of_zero_size_batch(lowering):
    f = jaxbridge.host(lambda x: x * 2)
    assert jax.vmap(f)(jnp.ones((0, 3))).shape == (0, 3)
