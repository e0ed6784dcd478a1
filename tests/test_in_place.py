"""A strategy's buffer function that writes outputs into its inputs' buffers (`InPlace`).

XLA hands such a function the aliased input's buffer as that output's, so in a loop the output
goes back into the carry without a copy. Checked: the values under jit, vmap and scan; that
the function really writes into the input's buffer; that the caller's array, and an input the
program still reads after the call, keep their values (XLA copies them first); that the
compiled loop aliases the call's output to its operand; and a sharded jit (whose calls gain a
status output in front).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxbridge
from jaxbridge._base import AbstractBatching, AbstractCall, InPlace


class Doubling(AbstractBatching):
    """Vectorised `(2 x, x + y)`, whose buffer function writes `2 x` into `x`'s buffer."""

    name = "doubling"

    def __init__(self):
        self.shared: list[bool] = []  # per buffer call: was output 0 in x's buffer

    def run(
        self,
        call: AbstractCall,
        batch: tuple[int, ...],
        ins: Sequence[np.ndarray],
        outs: Sequence[Any],
    ) -> None:
        x, y = ins
        outs[0][...] = 2 * x
        outs[1][...] = x + y

    def buffer_call(
        self, call: AbstractCall, in_shapes: Sequence[tuple], out_shapes: Sequence[tuple]
    ) -> InPlace:
        def own(ctx: Any, outs: Any, x: Any, y: Any) -> None:
            del ctx
            x, y = x.__array__(), y.__array__()
            total = x + y  # every input read before any output is written
            doubled, summed = outs[0].__array__(), outs[1].__array__()
            self.shared.append(bool(np.shares_memory(doubled, x)))
            np.multiply(x, 2, out=doubled)
            summed[...] = total

        return InPlace(own, {0: 0})


def _doubling() -> tuple[Doubling, Any]:
    strategy = Doubling()

    @jaxbridge.host(vmap=strategy)
    def f(x, y):
        return 2 * x, x + y

    return strategy, f


X = np.arange(12.0).reshape(4, 3)
Y = np.linspace(-1.0, 1.0, 12).reshape(4, 3)


def test_values_and_the_callers_arrays(x64):
    strategy, f = _doubling()
    x, y = jnp.asarray(X), jnp.asarray(Y)
    doubled, summed = jax.jit(jax.vmap(f))(x, y)
    np.testing.assert_array_equal(doubled, 2 * X)
    np.testing.assert_array_equal(summed, X + Y)
    np.testing.assert_array_equal(x, X)  # XLA copied the caller's array first
    assert strategy.shared == [True]  # and the function wrote into the input's buffer


def test_an_input_read_after_the_call_keeps_its_value(x64):
    _, f = _doubling()

    @jax.jit
    def g(x, y):
        x = x + 1.0  # made inside the program: its buffer is XLA's to reuse
        doubled, _ = jax.vmap(f)(x, y)
        return doubled + x  # x is still read after the call

    np.testing.assert_array_equal(g(X, Y), 3 * (X + 1.0))


def test_a_scan_carries_the_output_in_the_inputs_buffer(x64):
    strategy, f = _doubling()

    def loop(x, y):
        def body(x, _):
            doubled, summed = jax.vmap(f)(x, y)
            return doubled, summed.sum()

        return jax.lax.scan(body, x, length=5)

    run = jax.jit(loop)
    out, sums = run(X, Y)
    np.testing.assert_array_equal(out, 32 * X)
    np.testing.assert_allclose(sums, [((2**t) * X + Y).sum() for t in range(5)], rtol=1e-12)
    assert strategy.shared and all(strategy.shared)
    hlo = run.lower(X, Y).compile().as_text()
    assert "output_to_operand_aliasing" in hlo


def test_a_sharded_jit_aliases_past_the_status_output(x64):
    strategy, f = _doubling()
    mesh = jax.make_mesh((jax.device_count(),), ("d",))
    rows = 2 * jax.device_count()
    x = jax.device_put(np.arange(rows * 3.0).reshape(rows, 3), NamedSharding(mesh, P("d")))
    y = jax.device_put(np.ones((rows, 3)), NamedSharding(mesh, P("d")))
    doubled, summed = jax.jit(jax.vmap(f))(x, y)
    np.testing.assert_array_equal(doubled, 2 * np.asarray(x))
    np.testing.assert_array_equal(summed, np.asarray(x) + 1.0)
    assert strategy.shared and all(strategy.shared)
