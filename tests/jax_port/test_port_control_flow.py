"""Port of JAX's callback tests: host calls inside `while_loop`, `cond`, `scan`, `fori_loop`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jaxbridge

F32 = jnp.float32


def _like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def test_inside_while_loop_of_scalars(mode):
    step = mode.host(lambda x: (x + 1.0).astype(x.dtype), result=jax.ShapeDtypeStruct((), F32))
    out = jax.jit(lambda x: lax.while_loop(lambda x: x < 10, step, x))(0.0)
    jax.effects_barrier()
    assert float(out) == 10.0


def test_inside_while_loop(mode):
    step = mode.host(lambda x: (x + 1.0).astype(x.dtype), result=jax.ShapeDtypeStruct((5,), F32))
    out = jax.jit(lambda x: lax.while_loop(lambda x: jnp.any(x < 10), step, x))(jnp.arange(5.0))
    jax.effects_barrier()
    np.testing.assert_array_equal(out, np.arange(10.0, 15.0))


def test_host_call_in_the_while_predicate():
    """JAX's pure case with the predicate itself computed on the host (a bool result)."""
    keep_going = jaxbridge.host(lambda x: np.any(x < 10), result=jax.ShapeDtypeStruct((), bool))
    step = jaxbridge.host(lambda x: (x + 1.0).astype(x.dtype), result=_like)
    out = jax.jit(lambda x: lax.while_loop(keep_going, step, x))(jnp.arange(5.0))
    np.testing.assert_array_equal(out, np.arange(10.0, 15.0))


def test_inside_cond_of_scalars(mode):
    up = mode.host(lambda x: (x + 1.0).astype(x.dtype), result=jax.ShapeDtypeStruct((), F32))
    down = mode.host(lambda x: (x - 1.0).astype(x.dtype), result=jax.ShapeDtypeStruct((), F32))
    f = jax.jit(lambda pred, x: lax.cond(pred, up, down, x))
    assert float(f(True, 1.0)) == 2.0
    assert float(f(False, 1.0)) == 0.0


def test_inside_cond(mode):
    up = mode.host(lambda x: x + 1.0, result=jax.ShapeDtypeStruct((2,), F32))
    down = mode.host(lambda x: x - 1.0, result=jax.ShapeDtypeStruct((2,), F32))
    f = jax.jit(lambda pred, x: lax.cond(pred, up, down, x))
    np.testing.assert_array_equal(f(True, jnp.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(f(False, jnp.ones(2)), [0.0, 0.0])


def test_cond_runs_only_the_taken_branch(mode):
    log = []
    up = mode.host(lambda x: log.append("up") or x + 1.0, result=jax.ShapeDtypeStruct((), F32))
    down = mode.host(lambda x: log.append("down") or x - 1.0, result=jax.ShapeDtypeStruct((), F32))
    f = jax.jit(lambda pred, x: lax.cond(pred, up, down, x))
    f(True, 1.0)
    f(False, 1.0)
    jax.effects_barrier()
    assert log == ["up", "down"]


def test_inside_scan_of_scalars(mode):
    step = mode.host(lambda x: (x + 1.0).astype(x.dtype), result=jax.ShapeDtypeStruct((), F32))
    out = jax.jit(lambda x: lax.scan(lambda c, _: (step(c), ()), x, jnp.arange(10))[0])(0.0)
    jax.effects_barrier()
    assert float(out) == 10.0


def test_inside_scan(mode):
    step = mode.host(lambda x: x + 1.0, result=jax.ShapeDtypeStruct((2,), F32))
    out = jax.jit(lambda x: lax.scan(lambda c, _: (step(c), ()), x, jnp.arange(10))[0])(
        jnp.arange(2.0)
    )
    jax.effects_barrier()
    np.testing.assert_array_equal(out, np.arange(2.0) + 10.0)


def test_inside_scan_with_stacked_outputs(mode):
    square = mode.host(lambda x: x * x, result=jax.ShapeDtypeStruct((), F32))
    _, ys = jax.jit(lambda xs: lax.scan(lambda c, x: (c, square(x)), 0.0, xs))(jnp.arange(5.0))
    jax.effects_barrier()
    np.testing.assert_array_equal(ys, np.arange(5.0) ** 2)


def test_inside_fori_loop(mode):
    """JAX's "immediate executable destruction" body, under jit (pmap is in test_port_sharding)."""
    add = mode.host(lambda y: y + np.ones(4, np.float32), result=jax.ShapeDtypeStruct((4,), F32))
    out = jax.jit(lambda: lax.fori_loop(0, 10, lambda i, x: add(x), jnp.ones(4, F32)))()
    jax.effects_barrier()
    np.testing.assert_array_equal(out, np.full(4, 11.0, np.float32))
