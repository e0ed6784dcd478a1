"""Port of JAX's callback tests: wrong arguments, wrong results, exceptions in the host.

JAX raises these from a jitted call as `RuntimeError`s (XLA's runtime error); jaxbridge's
errors under `jit` are the same, with jaxbridge's message inside. Eager calls raise the host's
own exception, or `jaxbridge.HostResultError` for a wrong result.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxbridge

F32 = jnp.float32


def sds(shape, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _run(f, *args):
    jax.block_until_ready(f(*args))
    jax.effects_barrier()


def test_wrong_number_of_arguments(mode):
    """A host function that expects `x`, called with no arguments."""
    f = mode.host(lambda x: np.ones(4, np.float32), result=sds((4,)))
    with pytest.raises(RuntimeError, match="missing 1 required positional argument"):
        _run(jax.jit(lambda: f()))


def test_wrong_number_of_returned_values(mode):
    f = mode.host(lambda x: (x, np.ones(4, np.float32)), result=sds(()))
    with pytest.raises(RuntimeError, match="wrong pytree structure"):
        _run(jax.jit(f), 2.0)
    with pytest.raises(jaxbridge.HostResultError, match="wrong pytree structure"):
        f(2.0)


def test_returning_nothing_where_two_results_are_declared(mode):
    """JAX's io_callback case: a function that returns `None` where two arrays are declared."""
    f = mode.host(lambda: None, result=(sds((1,)), sds((2,))))
    with pytest.raises(RuntimeError, match="wrong pytree structure"):
        _run(jax.jit(lambda: f()))


def test_wrong_shape_outputs(mode, lowering):
    f = mode.host(lambda: np.float32(1.0), result=sds((1,)))
    with pytest.raises(RuntimeError, match=r"expected f32\[1\], got f32\[\]"):
        _run(jax.jit(lambda: f()))


def test_vectorized_result_of_the_wrong_shape(mode):
    """JAX's expand_dims case: the host function reduces over the batch when it should not."""
    f = jax.jit(jax.vmap(mode.host(lambda x: np.sin(x).sum(), result=sds(()), vmap="vectorized")))
    with pytest.raises(RuntimeError, match=r"expected f32\[4\], got f32\[\]"):
        _run(f, jnp.arange(4.0))


def test_exception_in_the_host_function_carries_its_traceback(mode, lowering):
    """Documented difference: JAX logs "jax.pure_callback failed" with the host traceback at
    ERROR level and raises XLA's text; jaxbridge puts the exception's type, message and host
    traceback into the raised error itself, and logs nothing of its own."""

    def fail(x):
        raise RuntimeError("Ooops")

    f = jax.jit(mode.host(fail, result=sds(())))
    with pytest.raises(RuntimeError) as info:
        _run(f, 0.0)
    text = str(info.value)
    assert "host function 'test_exception_in_the_host_function_carries_its_traceback." in text
    assert "Host traceback (most recent call last)" in text
    assert 'raise RuntimeError("Ooops")' in text
    assert "RuntimeError: Ooops" in text
    np.testing.assert_array_equal(jax.jit(mode.host(lambda x: x, result=sds(())))(1.0), 1.0)


def test_error_propagation(mode):
    def throws(x):
        raise RuntimeError("Errors should propagate.")

    f = mode.host(throws, result=sds(()))
    with pytest.raises(Exception, match="Errors should propagate."):
        np.asarray(jax.jit(f)(2.0))
    with pytest.raises(RuntimeError, match="Errors should propagate."):
        f(2.0)  # eagerly: the host's own exception


def test_error_inside_control_flow_and_vmap(mode):
    def throws(x):
        if np.any(x > 2):
            raise ValueError(f"too large: {x}")
        return x

    f = mode.host(throws, result=lambda x: x)
    loop = jax.jit(lambda x: jax.lax.fori_loop(0, 5, lambda i, c: f(c) + 1.0, x))
    with pytest.raises(RuntimeError, match="ValueError: too large: 3.0"):
        _run(loop, 0.0)
    with pytest.raises(Exception, match="ValueError: too large"):
        _run(jax.jit(jax.vmap(f)), jnp.arange(5.0))
