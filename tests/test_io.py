"""The three kinds of host call (pure, io=True, ordered=True) under each transformation.

Every cell of README.md's table "Side effects: pure, io=True, ordered=True" is tested here.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxbridge

KINDS = ["pure", "io", "ordered"]


def _recorder(kind, **kwargs):
    """A host function that logs what it receives and returns x + 1."""
    log = []

    def fn(x):
        log.append(np.asarray(x).tolist())
        return x + 1

    options = {} if kind == "pure" else {kind: True}
    return jaxbridge.host(fn, result=lambda x: x, **options, **kwargs), log


@pytest.mark.parametrize("kind", KINDS)
def test_jit_values_and_dead_code(kind, lowering):
    f, log = _recorder(kind)
    np.testing.assert_array_equal(jax.jit(f)(jnp.arange(3)), [1, 2, 3])
    log.clear()
    jax.block_until_ready(jax.jit(lambda x: (f(x), x * 2)[1])(jnp.arange(3)))  # result unused
    if kind == "pure":
        assert log == []  # removed as dead code, as pure_callback may be
    else:
        assert log == [[0, 1, 2]]  # never removed


@pytest.mark.parametrize("kind", KINDS)
def test_io_and_ordered_with_result_none_return_nothing_and_never_run_at_trace_time(kind):
    log = []
    options = {} if kind == "pure" else {kind: True}
    record = jaxbridge.host(lambda x: log.append(float(x)) or "ignored", **options)
    if kind == "pure":
        return  # result=None probes a pure function; covered by test_jit.py
    traced = jax.jit(lambda x: record(x)).trace(jnp.float32(1.0))
    assert log == []  # tracing ran nothing: no probe call
    assert traced.lower().compile()(jnp.float32(2.0)) is None
    assert log == [2.0]
    assert record(jnp.float32(3.0)) is None  # eagerly too: no result
    assert log == [2.0, 3.0]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("strategy", ["sequential", "vectorized"])
def test_vmap_is_one_host_call_in_order(kind, strategy, lowering):
    f, log = _recorder(kind, vmap=strategy)
    x = jnp.arange(6).reshape(3, 2)
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), x + 1)
    if strategy == "sequential":
        assert log == [[0, 1], [2, 3], [4, 5]]
    else:
        assert log == [[[0, 1], [2, 3], [4, 5]]]


@pytest.mark.parametrize("kind", KINDS)
def test_scan_while_loop_and_cond(kind, lowering):
    f, log = _recorder(kind)
    scanned = jax.jit(lambda c: lax.scan(lambda c, _: (f(c), None), c, None, length=3)[0])
    assert int(scanned(jnp.int32(0))) == 3
    looped = jax.jit(lambda c: lax.while_loop(lambda c: c < 4, f, c))
    assert int(looped(jnp.int32(1))) == 4
    branched = jax.jit(lambda p, c: lax.cond(p, f, lambda c: c - 1, c))
    assert (int(branched(True, jnp.int32(5))), int(branched(False, jnp.int32(5)))) == (6, 4)
    if kind != "pure":  # each iteration and only the taken branch ran, in order
        assert log == [0, 1, 2, 1, 2, 3, 5]


@pytest.mark.parametrize("kind", KINDS)
def test_vmap_of_while_loop(kind, lowering):
    f, log = _recorder(kind)

    def count_up(n):  # a batched predicate: each element stops at its own n
        return lax.while_loop(lambda c: c < n, f, jnp.int32(0))

    def fixed(c):  # an unbatched predicate, as in jax's own io_callback tests
        return lax.while_loop(lambda i: i[0] < 2, lambda i: (i[0] + 1, f(i[1])), (0, c))[1]

    if kind == "ordered":
        with pytest.raises(Exception, match="Ordered IO effects not supported in vmap"):
            jax.jit(jax.vmap(count_up))(jnp.array([2, 4]))
        with pytest.raises(Exception, match="Ordered IO effects not supported in vmap"):
            jax.jit(jax.vmap(fixed))(jnp.array([10, 20]))
        return
    if kind == "io":
        # as io_callback(ordered=False): a batched predicate would run the body for elements
        # whose loop has finished, so JAX refuses it at trace time, before anything runs
        with pytest.raises(Exception, match="Unordered IO effects not supported in while_loop"):
            jax.jit(jax.vmap(count_up))(jnp.array([2, 4]))
        assert log == []
    else:
        np.testing.assert_array_equal(jax.jit(jax.vmap(count_up))(jnp.array([2, 4])), [2, 4])
    log.clear()
    np.testing.assert_array_equal(jax.jit(jax.vmap(fixed))(jnp.array([10, 20])), [12, 22])
    if kind == "io":
        assert log == [10, 20, 11, 21]  # an unbatched predicate: only live iterations ran


@pytest.mark.parametrize("kind", KINDS)
def test_vmap_of_cond(kind, lowering):
    f, log = _recorder(kind)
    branched = lambda p, c: lax.cond(p, f, lambda c: c - 1, c)  # noqa: E731
    ps, cs = jnp.array([True, False]), jnp.array([10, 20])
    if kind != "pure":
        # as io_callback: JAX refuses io effects in vmap of cond whatever the predicate, since
        # a batched one would run both branches for every element
        with pytest.raises(NotImplementedError, match="IO effect not supported in vmap-of-cond"):
            jax.jit(jax.vmap(branched))(ps, cs)
        with pytest.raises(NotImplementedError, match="IO effect not supported in vmap-of-cond"):
            jax.jit(jax.vmap(branched, in_axes=(None, 0)))(True, cs)
        assert log == []
        # the fix: the cond outside the vmap, where the predicate is one value
        outside = jax.jit(lambda p, c: lax.cond(p, jax.vmap(f), lambda c: c - 1, c))
        np.testing.assert_array_equal(outside(True, cs), cs + 1)
        jax.effects_barrier()
        assert log == [10, 20]
        return
    np.testing.assert_array_equal(jax.jit(jax.vmap(branched))(ps, cs), [11, 19])
    np.testing.assert_array_equal(jax.jit(jax.vmap(branched, in_axes=(None, 0)))(False, cs), cs - 1)
    np.testing.assert_array_equal(jax.jit(jax.vmap(branched, in_axes=(None, 0)))(True, cs), cs + 1)


@pytest.mark.parametrize("kind", KINDS)
def test_derivatives_with_a_rule(kind, lowering):
    options = {} if kind == "pure" else {kind: True}
    f = jaxbridge.host(np.sin, result=lambda x: x, jacobian=lambda x: np.diag(np.cos(x)), **options)
    x = jnp.linspace(0.1, 0.9, 3)
    loss = lambda x: f(x).sum()  # noqa: E731
    expected = np.cos(np.asarray(x))
    np.testing.assert_allclose(jax.grad(loss)(x), expected, rtol=1e-6)
    np.testing.assert_allclose(jax.jit(jax.grad(loss))(x), expected, rtol=1e-6)
    np.testing.assert_allclose(
        jax.vmap(jax.grad(loss))(jnp.stack([x, x])), [expected] * 2, rtol=1e-6
    )
    np.testing.assert_allclose(jax.jvp(f, (x,), (jnp.ones(3),))[1], expected, rtol=1e-6)
    no_rule = jaxbridge.host(np.sin, result=lambda x: x, **options)
    with pytest.raises(ValueError, match="needs a derivative rule"):
        jax.grad(lambda x: no_rule(x).sum())(x)


@pytest.mark.parametrize("kind", KINDS)
def test_checkpoint_takes_pure_calls_and_refuses_side_effects(kind):
    # rematerialising would run the side effect twice; JAX refuses its own io_callback too
    f, _ = _recorder(kind, jacobian=lambda x: np.eye(x.size))
    loss = jax.checkpoint(lambda x: f(x).sum())
    if kind == "pure":
        np.testing.assert_allclose(jax.grad(loss)(jnp.ones(2)), [1.0, 1.0])
        return
    with pytest.raises(NotImplementedError, match="Effects not supported in partial-eval"):
        jax.grad(loss)(jnp.ones(2))


def test_io_decorator_form_and_no_retrace():
    log = []

    @jaxbridge.host(io=True)
    def note(x):
        log.append(float(x))

    traces = []

    @jax.jit
    def f(x):
        traces.append(1)
        note(x)
        return x * 2

    for v in (1.0, 2.0, 3.0):
        f(jnp.float32(v))
    assert (log, len(traces)) == ([1.0, 2.0, 3.0], 1)
    assert note.__name__ == "note"
