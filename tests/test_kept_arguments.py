"""Arguments a host function keeps after it returns (issue 12, JAX's `x_lst.append(x)`).

A pure call under the zero-copy buffer lowering hands over views of XLA's buffers, which XLA
frees or reuses after the call: keeping one raises, naming the function and the argument. An
`io=True` or `ordered=True` call hands over copies, which keep their values.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxbridge

F32 = jnp.float32
KEPT = (
    "host function 'test_keeping_an_argument_raises_the_pinned_message.<locals>.keep' kept a "
    "reference to its argument `x` (position 0) after returning. "
    "Under the default zero-copy lowering it is a view of an XLA buffer that is freed after the "
    "call, so what it kept would silently change value. Copy what you keep (`np.array(x)` or "
    '`x.copy()`), or pass `lowering="pure"`; `io=True` and `ordered=True` calls receive copies '
    "they may keep."
)


def _message(error: BaseException) -> str:
    """The HostError's own line of a JaxRuntimeError's text."""
    return next(line for line in str(error).splitlines() if "kept a reference" in line)


def test_keeping_an_argument_raises_the_pinned_message():
    kept = []

    def keep(x):
        kept.append(x)
        return x

    f = jax.jit(jaxbridge.host(keep, result=jax.ShapeDtypeStruct((4,), F32), lowering="buffer"))
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.block_until_ready(f(jnp.ones(4)))
    assert _message(info.value) == f"HostError: {KEPT}"


@pytest.mark.parametrize(
    "keep",
    [
        lambda x: x[1:],  # a slice
        lambda x: x.reshape(2, 2),
        lambda x: x.T,
        lambda x: np.broadcast_to(x, (3, 4)),
        lambda x: memoryview(x),
        lambda x: {"nested": [x]},
    ],
    ids=["slice", "reshape", "transpose", "broadcast", "memoryview", "nested"],
)
def test_views_derived_from_an_argument_are_found(keep):
    kept = []
    f = jaxbridge.host(
        lambda x: kept.append(keep(x)) or x + 1, result=lambda x: x, lowering="buffer"
    )
    with pytest.raises(jax.errors.JaxRuntimeError, match="kept a reference to its argument `x`"):
        jax.block_until_ready(jax.jit(f)(jnp.ones(4)))


@pytest.mark.parametrize("strategy", ["sequential", "vectorized", jaxbridge.Threads(2)])
def test_vmap_elements_kept_are_found(strategy):
    kept = []
    f = jaxbridge.host(
        lambda x: kept.append(x) or x + 1, result=lambda x: x, vmap=strategy, lowering="buffer"
    )
    with pytest.raises(jax.errors.JaxRuntimeError, match="kept a reference"):
        jax.block_until_ready(jax.jit(jax.vmap(f))(jnp.ones((8, 3))))
    # eager vmap: jaxbridge's own error, of its own type (a HostError)
    with pytest.raises(jaxbridge.KeptArgumentError, match="kept a reference"):
        jax.vmap(f)(jnp.ones((8, 3)))


def test_the_argument_is_named_by_keyword_and_pytree_path():
    kept = []

    def fn(a, xs, *, w):
        kept.append(xs[1])
        return a

    f = jax.jit(jaxbridge.host(fn, result=lambda a, xs, w: a, lowering="buffer"))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"its argument `xs\[1\]` \(position 1\)"):
        jax.block_until_ready(f(jnp.ones(2), [jnp.ones(2), jnp.ones(2)], w=jnp.ones(2)))
    g = jax.jit(jaxbridge.host(lambda a, *, w: kept.append(w) or a, lowering="buffer"))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"its argument `w` \(keyword\)"):
        jax.block_until_ready(g(jnp.ones(2), w=jnp.ones(2)))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x,  # the identity returns its argument: not kept
        lambda x: x[::-1],  # a view returned: copied into the result, not kept
        lambda x: np.asarray(x) * 2,
        lambda x: np.asarray(jnp.asarray(x) + 1),  # JAX on the argument
        lambda x: np.asarray(jax.jit(jnp.sin)(x)),
    ],
    ids=["identity", "view-returned", "numpy", "jnp.asarray", "jit"],
)
@pytest.mark.parametrize("vmapped", [False, True])
def test_no_false_alarm_when_nothing_is_kept(fn, vmapped):
    f = jaxbridge.host(fn, result=lambda x: x, lowering="buffer")
    g = jax.jit(jax.vmap(f) if vmapped else f)
    x = jnp.arange(6.0, dtype=F32).reshape(2, 3) if vmapped else jnp.arange(3.0, dtype=F32)
    for _ in range(5):
        expected = [fn(row) for row in np.asarray(x)] if vmapped else fn(np.asarray(x))
        np.testing.assert_allclose(g(x), np.asarray(expected), rtol=1e-6)


def test_copies_may_be_kept():
    kept = []
    f = jaxbridge.host(lambda x: kept.append(np.array(x)) or x, result=lambda x: x)
    f = jax.jit(f)
    for i in range(3):
        jax.block_until_ready(f(jnp.full(4, float(i))))
    assert [float(k[0]) for k in kept] == [0.0, 1.0, 2.0]


def test_a_failing_function_raises_its_own_error():
    kept = []

    def fail(x):
        kept.append(x)
        raise KeyError("own error")

    f = jax.jit(jaxbridge.host(fail, result=lambda x: x, lowering="buffer"))
    with pytest.raises(jax.errors.JaxRuntimeError, match="KeyError: 'own error'") as info:
        jax.block_until_ready(f(jnp.ones(2)))
    assert "kept a reference" not in str(info.value)


@pytest.mark.parametrize("kind", ["io", "ordered"])
def test_io_and_ordered_calls_get_copies_they_may_keep(kind, lowering):
    kept = []
    f = jax.jit(
        jaxbridge.host(
            lambda x: kept.append(x) or x * 2,
            result=jax.ShapeDtypeStruct((64,), F32),
            **{kind: True},
        )
    )
    for i in range(4):
        jax.block_until_ready(f(jnp.full(64, float(i))))
    churn = jax.jit(lambda x: x * 3.0 + 7.0)
    for _ in range(8):  # reuse XLA's freed buffers
        jax.block_until_ready(churn(jnp.full(64, 99.0)))
    jax.effects_barrier()
    assert [float(k[0]) for k in kept] == [0.0, 1.0, 2.0, 3.0]
    assert all(np.all(k == k[0]) for k in kept)
    with pytest.raises(ValueError, match="read-only"):
        kept[0][0] = 1.0  # as in a pure call, arguments are not for writing
