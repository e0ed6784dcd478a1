"""Port of JAX's callback tests: pytree arguments and results."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

F32 = jnp.float32


def sds(shape, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype)


def test_pytree_arguments_and_return_values(mode):
    """JAX's case: a list argument, a `dict(y=[...])` result."""
    seen = []

    def fn(xs):
        seen.append(type(xs))
        return dict(y=[xs[0]])

    f = mode.host(fn, result=dict(y=[sds(())]))
    out = jax.jit(f)([jnp.float32(2.0)])
    jax.effects_barrier()
    assert list(out) == ["y"] and float(out["y"][0]) == 2.0
    assert seen[-1] is list  # the host function gets the caller's container back


class State(NamedTuple):
    q: Any  # an array, or its ShapeDtypeStruct in the result spec
    n: Any


def test_nested_pytrees_with_namedtuples_and_mixed_dtypes(mode):
    def fn(state, extra):
        return {"next": State(state.q * 2, state.n + 1), "sum": (state.q + extra["w"]).sum()}

    spec = {"next": State(sds((3,)), sds((), jnp.int32)), "sum": sds(())}
    f = mode.host(fn, result=spec)
    state = State(jnp.arange(3.0), jnp.int32(4))
    out = jax.jit(f)(state, {"w": jnp.ones(3)})
    jax.effects_barrier()
    assert isinstance(out["next"], State)
    np.testing.assert_array_equal(out["next"].q, [0.0, 2.0, 4.0])
    assert int(out["next"].n) == 5 and float(out["sum"]) == 6.0


def test_none_leaves_and_empty_containers_in_the_result(mode):
    """`None` is an empty subtree, as everywhere in JAX."""
    f = mode.host(lambda x: (x, None, {}), result=(sds((2,)), None, {}))
    y, none, empty = jax.jit(f)(jnp.ones(2))
    jax.effects_barrier()
    np.testing.assert_array_equal(y, 1.0)
    assert none is None and empty == {}


def test_pytree_results_under_vmap(mode):
    f = mode.host(lambda x: {"a": x + 1, "b": (x * 2,)}, result={"a": sds(()), "b": (sds(()),)})
    out = jax.jit(jax.vmap(f))(jnp.arange(3.0))
    jax.effects_barrier()
    np.testing.assert_array_equal(out["a"], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(out["b"][0], [0.0, 2.0, 4.0])


def test_namedtuple_result_where_a_tuple_is_declared(mode):
    """`pure_callback` checks only the result's leaves, so a NumPy 2 linalg result (a
    namedtuple such as `EighResult`) matches a declared tuple of the same length. A drop-in
    must accept it: `host(np.linalg.eigh, result=(w, v))` is the natural spelling."""
    a = jnp.array([[2.0, 1.0], [1.0, 3.0]], F32)
    spec = (sds((2,)), sds((2, 2)))
    w, v = jax.jit(mode.host(np.linalg.eigh, result=spec))(a)
    jax.effects_barrier()
    w_ref, v_ref = jnp.linalg.eigh(a)
    np.testing.assert_allclose(w, w_ref, rtol=1e-5)
    np.testing.assert_allclose(np.abs(v), np.abs(v_ref), rtol=1e-5)
    ref = jax.jit(lambda a: jax.pure_callback(np.linalg.eigh, spec, a))(a)
    np.testing.assert_allclose(w, ref[0], rtol=1e-6)


def test_list_result_where_a_tuple_is_declared_matches_pure_callback(mode):
    spec = (sds((2,)), sds((2,)))
    out = jax.jit(mode.host(lambda x: [x, 2 * x], result=spec))(jnp.ones(2))
    jax.effects_barrier()
    ref = jax.jit(lambda x: jax.pure_callback(lambda x: [x, 2 * x], spec, x))(jnp.ones(2))
    assert type(out) is type(ref) is tuple
    np.testing.assert_array_equal(out[1], ref[1])
