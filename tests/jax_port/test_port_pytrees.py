"""Port of JAX's callback tests: pytree arguments and results."""

from __future__ import annotations

from typing import NamedTuple

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
    q: jax.Array
    n: jax.Array


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
