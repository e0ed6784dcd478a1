"""Port of JAX's callback tests: side effects, dead code, order, and batching of io calls.

`ordered=True` is `io_callback(ordered=True)`; `io=True` is `io_callback(ordered=False)`
(issue 12, item 7): never removed as dead code, but free to be reordered.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import io_callback

import jaxbridge

F32 = jnp.float32
I32 = jnp.int32

IO_MODES = [
    pytest.param({"ordered": True}, id="io_ordered"),
    pytest.param({"io": True}, id="io_unordered"),
]


def test_host_call_can_mutate_state(mode):
    count = 0

    def bump():
        nonlocal count
        count += 1
        return np.array(count, np.int32)

    f = mode.host(bump, result=jax.ShapeDtypeStruct((), I32))
    assert int(f()) == 1 and count == 1  # eagerly: runs at once
    assert int(f()) == 2 and count == 2
    g = jax.jit(lambda: f())
    assert int(g()) == 3 and int(g()) == 4
    jax.effects_barrier()
    assert count == 4


@pytest.mark.parametrize("options", IO_MODES)
def test_io_call_with_unused_result_is_not_removed(options):
    log = []
    f = jaxbridge.host(
        lambda x: log.append(float(x)) or x, result=jax.ShapeDtypeStruct((), F32), **options
    )

    @jax.jit
    def g(x):
        _ = f(x)  # unused: an io call still runs
        return x * 2.0

    g(1.0)
    g(2.0)
    jax.effects_barrier()
    assert sorted(log) == [1.0, 2.0]


@pytest.mark.parametrize("options", IO_MODES)
def test_identical_io_calls_are_not_merged(options):
    """Two io calls with the same arguments are two side effects: neither is merged away."""
    log = []
    f = jaxbridge.host(lambda x: log.append(float(x)), result=(), **options)

    @jax.jit
    def g(x):
        f(x)
        f(x)
        return x

    g(3.0)
    jax.effects_barrier()
    assert log == [3.0, 3.0]


@pytest.mark.parametrize("options", IO_MODES)
def test_io_call_returning_nothing_runs_once_per_call(options):
    log = []
    f = jaxbridge.host(lambda x: log.append(float(x)), result=(), **options)
    g = jax.jit(lambda x: f(x))
    g(1.0)
    g(2.0)
    jax.effects_barrier()
    assert sorted(log) == [1.0, 2.0]


@pytest.mark.parametrize("options", IO_MODES)
def test_io_call_with_result_none_does_not_run_at_trace_time(options):
    """Issue 12, item 5: `io_callback(f, None, x)` means "no result". With `result=None`
    jaxbridge must not probe (run) a side-effecting function while tracing: it either treats
    it as returning nothing or refuses with an error that says to declare `result=`."""
    log = []

    def record(x):
        log.append(float(x))

    f = jaxbridge.host(record, **options)
    g = jax.jit(lambda x: f(x))
    try:
        jax.make_jaxpr(g)(1.0)
    except Exception as e:
        assert "result=" in str(e)  # refused, naming the fix
    assert log == []  # never ran during tracing
    try:
        g(5.0)
        jax.effects_barrier()
    except Exception as e:
        assert "result=" in str(e)
        assert log == []
    else:
        assert log == [5.0]  # ran exactly once, at run time


def test_io_calls_under_vmap_run_once_per_element(mode):
    """JAX: an unordered io_callback can be batched; it runs once per element."""
    count = 0

    def cb(x):
        nonlocal count
        count += 1
        return x

    x = jnp.arange(4, dtype=I32)
    f = mode.host(cb, result=jax.ShapeDtypeStruct((), I32))
    np.testing.assert_array_equal(jax.vmap(f)(x), x)
    jax.effects_barrier()
    assert count == 4
    jax.vmap(f)(x)
    jax.effects_barrier()
    assert count == 8


def test_ordered_call_under_vmap_loops_over_the_batch_in_order():
    """Documented difference: JAX refuses ("Cannot `vmap` ordered IO callback"); jaxbridge's
    `ordered=True` runs the batch as one host call that loops over the elements in order."""
    with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
        jax.vmap(
            lambda x: io_callback(lambda x: x, jax.ShapeDtypeStruct((), I32), x, ordered=True)
        )(jnp.arange(4, dtype=I32))
    log = []
    f = jaxbridge.host(
        lambda x: log.append(int(x)) or x, ordered=True, result=jax.ShapeDtypeStruct((), I32)
    )
    np.testing.assert_array_equal(jax.vmap(f)(jnp.arange(4, dtype=I32)), np.arange(4))
    jax.effects_barrier()
    assert log == [0, 1, 2, 3]


@pytest.mark.parametrize("options", IO_MODES)
def test_batching_with_side_effects(options):
    """jax#20628: two io calls under vmap, each over the whole batch."""
    kept = []
    append = jaxbridge.host(kept.append, result=(), **options)

    @jax.jit
    def f(x):
        append(x)
        append(2 * x)

    jax.vmap(f)(jnp.arange(3.0))
    jax.effects_barrier()
    values = [float(v) for v in kept]
    if options.get("ordered"):
        assert values == [0.0, 1.0, 2.0, 0.0, 2.0, 4.0]
    else:  # unordered: the two calls may run in either order, each loops over its batch
        assert sorted([values[:3], values[3:]]) == [[0.0, 1.0, 2.0], [0.0, 2.0, 4.0]]


def test_batching_with_side_effects_in_while_loop():
    """jax#20628: vmap of a while_loop (unbatched predicate) whose body makes io calls. JAX's
    `io_callback(ordered=False)` runs it; so must `io=True` (issue 12, item 7)."""
    kept = []
    append = jaxbridge.host(kept.append, io=True, result=())

    @jax.jit
    def f(x):
        def body(i):
            append(x)
            append(2 * x)
            return i + 1

        lax.while_loop(lambda i: i < 2, body, 0)

    jax.vmap(f)(jnp.arange(3.0))
    jax.effects_barrier()
    assert sorted(float(v) for v in kept) == sorted([0.0, 1.0, 2.0, 0.0, 2.0, 4.0] * 2)


@pytest.mark.parametrize("options", IO_MODES)
def test_vmap_of_cond_with_a_batched_predicate_runs_only_the_taken_branches(options):
    """Under vmap a batched predicate turns `cond` into `select`, which runs both branches.
    JAX refuses io effects there ("IO effect not supported in vmap-of-cond"). jaxbridge must
    refuse too, or run exactly the taken branch's side effect per element: never the others."""
    log = []
    yes = jaxbridge.host(lambda x: log.append(("yes", float(x))), result=(), **options)
    no = jaxbridge.host(lambda x: log.append(("no", float(x))), result=(), **options)

    def f(pred, x):
        return lax.cond(pred, lambda: yes(x), lambda: no(x))

    try:
        jax.vmap(f)(jnp.array([True, False, True]), jnp.arange(3.0))
        jax.effects_barrier()
    except NotImplementedError as e:
        assert "vmap-of-cond" in str(e)
        assert log == []
    else:
        assert sorted(log) == [("no", 1.0), ("yes", 0.0), ("yes", 2.0)]


@pytest.mark.parametrize("options", IO_MODES)
def test_vmap_of_while_with_a_batched_predicate_runs_only_live_iterations(options):
    """A batched predicate keeps the loop going until every element is done; JAX refuses io
    effects there ("... not supported in while_loop with batched predicate", or for ordered
    ones "... not supported in vmap"). jaxbridge must refuse too, or run the body's side effect
    only for elements whose own loop is still running."""
    log = []
    check = jaxbridge.host(lambda i: log.append(int(i)), result=(), **options)

    def f(i):
        def body(i):
            check(i)
            return i + 1

        return lax.while_loop(lambda i: i < 5, body, i)

    try:
        out = jax.vmap(f)(jnp.array([0, 4]))
        jax.effects_barrier()
    except Exception as e:
        assert "not supported in" in str(e)
        assert log == []
    else:
        np.testing.assert_array_equal(out, [5, 5])
        assert sorted(log) == [0, 1, 2, 3, 4, 4]


def test_ordered_calls_keep_program_order_across_calls():
    """JAX's ordered-sequence case on one device: many calls of two ordered host calls, with
    host work of different lengths, keep program order."""
    kept = []

    def record(i, x):
        for _ in range([200, 2000, 20000][len(kept) % 3]):  # uneven host work
            pass
        kept.append(int(x.sum()))

    f = jaxbridge.host(record, ordered=True, result=())

    @jax.jit
    def g(i, x):
        f(i, x)
        f(i, x + 1)

    expected = []
    for i in range(6):
        x = jnp.arange(2, dtype=I32) + 10 * i
        g(i, x)
        g(i, x + 5)
        expected += [int(x.sum()), int((x + 1).sum()), int((x + 5).sum()), int((x + 6).sum())]
    jax.effects_barrier()
    assert kept == expected
