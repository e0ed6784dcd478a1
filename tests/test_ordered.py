"""ordered=True: program order, never dead-code eliminated, batches loop in order."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxbridge


def test_ordered_runs_in_program_order_inside_scan_and_is_not_removed():
    log = []
    # result=() declares "no result", so no probe call runs the side effect at trace time
    record = jaxbridge.host(lambda x: log.append(float(x)), ordered=True, result=())

    def body(c, _):
        record(c)  # result unused: must still run, in order
        return c + 1.0, None

    jax.jit(lambda: lax.scan(body, jnp.float32(0.0), None, length=5))()
    assert log == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_ordered_in_while_loop():
    log = []
    record = jaxbridge.host(lambda i: log.append(int(i)), ordered=True, result=())

    def body(i):
        record(i)
        return i + 1

    jax.jit(lambda: lax.while_loop(lambda i: i < 4, body, 0))()
    assert log == [0, 1, 2, 3]


def test_ordered_under_vmap_loops_in_order_as_one_call():
    log = []

    def fn(x):
        log.append(x.tolist())
        return x * 2

    f = jaxbridge.host(fn, ordered=True, result=lambda x: x)
    x = jnp.arange(6.0, dtype=jnp.float32).reshape(3, 2)
    out = jax.jit(jax.vmap(f))(x)
    np.testing.assert_allclose(out, x * 2)
    assert log[-3:] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    log.clear()
    out = jax.jit(jax.vmap(jax.vmap(f), in_axes=(1,)))(x)
    np.testing.assert_allclose(out, (x * 2).T)
    assert log[-6:] == [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]


def test_ordered_eager_call_runs_immediately():
    log = []
    jaxbridge.host(lambda x: log.append(1), ordered=True)(jnp.ones(2))
    assert log == [1]


def test_ordered_with_result_none_never_runs_the_side_effect_at_trace_time():
    # issue 12, item 5: result=None used to probe, i.e. call the function while tracing.
    # As `io_callback(f, None, x)`: no result, and whatever `f` returns is dropped.
    log = []
    record = jaxbridge.host(lambda x: log.append(float(x)) or len(log), ordered=True)
    fn = jax.jit(lambda x: (record(x), x + 1)[1])
    lowered = fn.trace(jnp.float32(1.0)).lower()
    assert log == []
    assert float(lowered.compile()(jnp.float32(2.0))) == 3.0
    assert log == [2.0]
    assert jax.jit(lambda x: record(x))(jnp.float32(4.0)) is None
    assert record(jnp.float32(5.0)) is None  # eagerly the same: no result
    assert log == [2.0, 4.0, 5.0]
    # and under vmap and scan, still nothing at trace time and one call per element
    log.clear()
    jax.jit(jax.vmap(record)).trace(jnp.ones(3)).lower()
    assert log == []
    jax.jit(jax.vmap(record))(jnp.arange(3.0))
    assert log == [0.0, 1.0, 2.0]


def test_ordered_with_a_declared_result_is_still_checked():
    f = jaxbridge.host(
        lambda x: np.zeros(4), ordered=True, result=jax.ShapeDtypeStruct((3,), jnp.float32)
    )
    with pytest.raises(Exception, match="expected f32\\[3\\], got f64\\[4\\]"):
        jax.block_until_ready(jax.jit(f)(jnp.ones(3)))
