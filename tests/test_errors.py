"""Every error path: host exceptions, wrong results, bad arguments. Messages are pinned."""

import collections
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxbridge


class SimulatorDiverged(Exception):
    pass


def _explode(x):
    if np.any(x > 1):
        raise SimulatorDiverged(f"state {x.max():.1f} too large")
    return x


boom = jaxbridge.host(_explode)
ok = jnp.zeros(3)
bad = jnp.full(3, 2.0)


def test_eager_call_raises_the_original_exception():
    with pytest.raises(SimulatorDiverged, match="state 2.0 too large"):
        boom(bad)


def test_eager_vmap_chains_the_original(lowering):
    with pytest.raises(jaxbridge.HostError) as info:
        jax.vmap(boom)(jnp.stack([ok, bad]))
    assert isinstance(info.value.__cause__, SimulatorDiverged)
    assert "SimulatorDiverged: state 2.0 too large" in str(info.value)
    assert "in _explode" in str(info.value)  # the host traceback line


@pytest.mark.parametrize("where", ["jit", "vmap", "scan"])
def test_under_jit_the_message_keeps_type_text_and_host_traceback(where, lowering):
    fns = {
        "jit": jax.jit(boom),
        "vmap": jax.jit(jax.vmap(boom)),
        "scan": jax.jit(lambda x: lax.scan(lambda c, _: (boom(c), None), x, None, length=2)[0]),
    }
    arg = jnp.stack([ok, bad]) if where == "vmap" else bad
    with pytest.raises(Exception) as info:
        jax.block_until_ready(fns[where](arg))
    text = str(info.value)
    assert "SimulatorDiverged: state 2.0 too large" in text
    assert "host function '_explode' raised" in text
    assert 'raise SimulatorDiverged(f"state {x.max():.1f} too large")' in text
    # and the next call works
    np.testing.assert_allclose(fns[where](jnp.stack([ok, ok]) if where == "vmap" else ok), 0)


def test_wrong_results_name_function_path_expected_and_got(lowering):
    spec = {"a": jax.ShapeDtypeStruct((3,), jnp.float32)}

    def run(value):
        f = jaxbridge.host(lambda x: value, result=spec)
        with pytest.raises(Exception) as info:
            jax.block_until_ready(jax.jit(f)(ok))
        return str(info.value)

    msg = run({"a": np.zeros(4, np.float32)})
    assert (
        "run.<locals>.<lambda>' returned a wrong array at `['a']`: expected f32[3], got "
        "f32[4]." in msg
    )
    msg = run({"a": np.zeros(3, np.complex64)})
    assert "expected f32[3], got c64[3]. Only conversions within a kind" in msg
    assert "expected f32[3], got i32[3]" in run({"a": np.zeros(3, np.int32)})
    assert "returned the wrong pytree structure" in run([np.zeros(3, np.float32)])


def test_safe_conversions_within_a_kind_are_made():
    f = jaxbridge.host(lambda x: (x.astype(np.float64), np.int64(7)))
    y, n = jax.jit(f)(jnp.ones(2, jnp.float32))
    assert (y.dtype, n.dtype) == (jnp.float32, jnp.int32)


def test_probe_failure_message_is_pinned():
    def needs_positive(x):
        raise ValueError("x must be positive")

    with pytest.raises(jaxbridge.HostError) as info:
        jax.jit(jaxbridge.host(needs_positive))(jnp.ones(3))
    assert str(info.value) == (
        "jaxbridge.host could not find the result shapes of "
        "'test_probe_failure_message_is_pinned.<locals>.needs_positive': calling it once on "
        "zero-filled arrays of the traced shapes (f32[3]) raised ValueError: x must be "
        "positive. Pass `result=` (a pytree of jax.ShapeDtypeStruct, or a function of the "
        "argument ShapeDtypeStructs returning one) so no probe call is needed."
    )
    assert isinstance(info.value.__cause__, ValueError)


def test_bad_host_arguments_fail_at_wrap_time_with_pinned_messages():
    with pytest.raises(TypeError) as info:
        jaxbridge.host(np.sin, result=[jax.ShapeDtypeStruct((3,), jnp.float32), (3,)])
    assert str(info.value) == (
        "`jaxbridge.host(result=...)` must be a pytree of `jax.ShapeDtypeStruct` (or of anything "
        "with `.shape` and `.dtype`); got `int` at `[1][0]`. Build one with `jax.eval_shape` or "
        "pass `result=None` to probe."
    )
    with pytest.raises(ValueError) as info:
        jaxbridge.host(vmap="parallel")
    assert str(info.value) == (
        "`jaxbridge.host(vmap=...)` must be 'sequential', 'vectorized' or an executor "
        "(jaxbridge.Threads, jaxbridge.Processes, jaxbridge.Ray); got 'parallel'."
    )
    with pytest.raises(ValueError) as info:
        jaxbridge.host(np.sin, lowering="gpu")
    assert str(info.value) == (
        "`jaxbridge.host(lowering=...)` must be 'auto', 'buffer' or 'pure'; got 'gpu'. The "
        "environment variable JAXBRIDGE_LOWERING takes the same values."
    )
    with pytest.raises(TypeError) as info:
        jaxbridge.host(3)  # type: ignore[call-overload]
    assert str(info.value) == "`jaxbridge.host` wraps a callable; got `int`."


def test_bad_environment_lowering(monkeypatch):
    monkeypatch.setenv("JAXBRIDGE_LOWERING", "fast")
    with pytest.raises(ValueError, match="got 'fast'"):
        jax.jit(jaxbridge.host(np.sin))(ok)


def test_a_host_function_returning_a_non_array():
    f = jaxbridge.host(lambda x: "text")
    with pytest.raises(jaxbridge.HostResultError) as info:
        f(ok)
    assert str(info.value) == (
        "host function 'test_a_host_function_returning_a_non_array.<locals>.<lambda>' returned "
        "`str` at ``; host functions return NumPy arrays, "
        "Python numbers or pytrees of them."
    )


def _with_timeout(fn, seconds=60):
    box = []
    t = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "hung"
    return box[0]


@pytest.mark.parametrize("strategy", ["sequential", "vectorized"])
def test_host_function_calling_jax_does_not_hang(strategy, lowering):
    inner = jax.jit(lambda x: x * 2)
    f = jaxbridge.host(lambda x: np.asarray(inner(x)), vmap=strategy)
    got = _with_timeout(lambda: np.asarray(jax.jit(f)(jnp.ones(3))))
    np.testing.assert_allclose(got, 2)
    got = _with_timeout(lambda: np.asarray(jax.jit(jax.vmap(f))(jnp.ones((4, 3)))))
    np.testing.assert_allclose(got, 2)


Eigh = collections.namedtuple("Eigh", ["w", "v"])


@pytest.mark.parametrize(
    "returned",
    [lambda x: [x, 2 * x], lambda x: Eigh(x, 2 * x), lambda x: (x, 2 * x)],
    ids=["list", "namedtuple", "tuple"],
)
@pytest.mark.parametrize("declared", [tuple, list], ids=["declared-tuple", "declared-list"])
def test_sequences_of_the_same_length_match_as_in_pure_callback(returned, declared, lowering):
    spec = declared([jax.ShapeDtypeStruct((2,), jnp.float32)] * 2)
    f = jaxbridge.host(returned, result=spec)
    for out in (jax.jit(f)(jnp.ones(2)), f(jnp.ones(2))):
        assert type(out) is declared  # the declared structure, as pure_callback gives
        np.testing.assert_array_equal(out[1], [2.0, 2.0])
    ref = jax.pure_callback(returned, spec, jnp.ones(2))
    assert type(ref) is declared


@pytest.mark.parametrize(
    ("returned", "declared", "got"),
    [
        (lambda x: (x, x, x), (0, 0), "PyTreeDef((*, *, *))"),  # another number of leaves
        (lambda x: [x, [x]], (0, 0), "PyTreeDef([*, [*]])"),  # another nesting
        (lambda x: {"b": x, "a": x}, {"a": 0, "c": 0}, "PyTreeDef({'a': *, 'b': *})"),
        (lambda x: {"a": x, "b": x}, (0, 0), "PyTreeDef({'a': *, 'b': *})"),  # dict for tuple
        (lambda x: Eigh(x, x), {"w": 0, "v": 0}, "namedtuple[Eigh]"),
    ],
    ids=["leaves", "nesting", "keys", "dict-for-tuple", "namedtuple-for-dict"],
)
def test_real_structure_mismatches_still_raise(returned, declared, got):
    spec = jax.tree_util.tree_map(lambda _: jax.ShapeDtypeStruct((2,), jnp.float32), declared)
    f = jaxbridge.host(returned, result=spec)
    with pytest.raises(jaxbridge.HostResultError, match="returned the wrong pytree structure") as e:
        f(jnp.ones(2))
    assert got in str(e.value)


@pytest.mark.parametrize("options", [{}, {"io": True}, {"ordered": True}], ids=str)
def test_linear_transpose_message_is_pinned(options):
    def double(x):
        return 2 * x

    f = jaxbridge.host(double, result=lambda x: x, **options)
    kind = {"io": "io", "ordered": "ordered io"}.get(next(iter(options), ""), "pure")
    expected = (
        f"`jax.linear_transpose` of host function "
        f"'test_linear_transpose_message_is_pinned.<locals>.double': {kind} host calls do not "
        "support transpose, as JAX's callbacks do not; a host function is not known to be "
        "linear. Use `jax.vjp` with a derivative rule (`vjp=` or `jacobian=` in "
        "`jaxbridge.host`) instead: for a linear function the VJP is its transpose."
    )
    with pytest.raises(ValueError) as info:
        jax.linear_transpose(f, jnp.ones(2))(jnp.ones(2))
    assert str(info.value) == expected
    # someone else's custom_vmap keeps JAX's own error
    other = jax.custom_batching.custom_vmap(lambda x: 2 * x)
    other.def_vmap(lambda size, batched, x: (2 * x, batched[0]))
    with pytest.raises(NotImplementedError, match="'custom_vmap_call' not implemented"):
        jax.linear_transpose(other, jnp.ones(2))(jnp.ones(2))
