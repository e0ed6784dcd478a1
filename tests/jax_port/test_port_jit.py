"""Port of JAX's callback tests: calls under `jax.jit`, results, arguments, caching.

JAX's `PythonCallbackTest` and `PureCallbackTest` (tests/python_callback_test.py, jax 0.10.2),
rewritten for `jaxbridge.host`. Each case runs in the three modes of `conftest.py`.
"""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import test_util as jtu
from jax.core import ShapedArray, eval_jaxpr

import jaxbridge

F32 = jnp.float32


def sds(shape, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype)


def test_scalar_values(mode):
    add_one = mode.host(lambda x: x + 1.0, result=sds(()))
    out = jax.jit(add_one)(0.0)
    jax.effects_barrier()
    assert out.dtype == F32 and float(out) == 1.0


def test_returning_custom_array(mode):
    """A host function may return any object NumPy converts (`__array__`), as a tf.Tensor."""

    class CustomArray:
        def __init__(self, a: np.ndarray):
            self.a = a

        @property
        def shape(self):
            return self.a.shape

        @property
        def dtype(self):
            return self.a.dtype

        def __array__(self, dtype=None, copy=None):
            return self.a if dtype is None else self.a.astype(dtype)

    f = mode.host(lambda x: CustomArray(np.array(42.0, np.float32)), result=sds(()))
    out = jax.jit(f)(0.0)
    jax.effects_barrier()
    assert float(out) == 42.0


def test_single_return_value(mode):
    f = mode.host(lambda: np.ones(4, np.float32), result=sds((4,)))
    out = jax.jit(lambda: f())()
    jax.effects_barrier()
    np.testing.assert_array_equal(out, np.ones(4, np.float32))


def test_multiple_return_values(mode):
    f = mode.host(
        lambda: (np.ones(4, np.float32), np.ones(5, np.int32)),
        result=(sds((4,)), sds((5,), jnp.int32)),
    )
    x, y = jax.jit(lambda: f())()
    jax.effects_barrier()
    np.testing.assert_array_equal(x, np.ones(4, np.float32))
    np.testing.assert_array_equal(y, np.ones(5, np.int32))
    assert (x.dtype, y.dtype) == (F32, jnp.int32)


def test_multiple_arguments_and_return_values(mode):
    f = mode.host(lambda x, y, z: (x, y + z), result=(sds((3,)), sds((3,))))
    x, y = jax.jit(f)(jnp.ones(3), jnp.arange(3.0), jnp.arange(3.0) + 1.0)
    jax.effects_barrier()
    np.testing.assert_array_equal(x, np.ones(3))
    np.testing.assert_array_equal(y, [1.0, 3.0, 5.0])


# -- zero-size arrays, in and out ------------------------------------------------------------


def test_send_zero_size_arrays(mode, lowering):
    result = np.full((2,), 42.0, np.float32)
    seen = []

    def fn(x):
        seen.append(x.shape)
        return result

    out = jax.jit(mode.host(fn, result=sds((2,))))(np.zeros((2, 0), np.float32))
    jax.effects_barrier()
    np.testing.assert_array_equal(out, result)
    assert seen[-1] == (2, 0)


def test_send_zero_size_and_nonzero_size_arrays(mode, lowering):
    x = np.zeros((2, 0), np.float32)
    y = np.full((2,), 42.0, np.float32)
    out = jax.jit(mode.host(lambda x, y: y, result=sds((2,))))(x, y)
    jax.effects_barrier()
    np.testing.assert_array_equal(out, y)


def test_receive_zero_size_arrays(mode, lowering):
    result = np.full((2, 0), 42.0, np.float32)
    out = jax.jit(mode.host(lambda _: result, result=sds((2, 0))))(np.zeros(2, np.float32))
    jax.effects_barrier()
    assert out.shape == (2, 0) and out.dtype == F32


def test_receive_zero_size_and_nonzero_size_arrays(mode, lowering):
    x = np.full((2,), 42.0, np.float32)

    def fn(x):
        return (
            np.ones((2, 0), np.float32),
            x,
            np.ones((3, 0), np.int32),
            np.concatenate([x, x]) + 1.0,
        )

    spec = (sds((2, 0)), sds((2,)), sds((3, 0), jnp.int32), sds((4,)))
    r0, r1, r2, r3 = jax.jit(mode.host(fn, result=spec))(x)
    jax.effects_barrier()
    assert (r0.shape, r2.shape, r2.dtype) == ((2, 0), (3, 0), jnp.int32)
    np.testing.assert_array_equal(r1, x)
    np.testing.assert_array_equal(r3, np.concatenate([x, x]) + 1.0)


# -- layouts --------------------------------------------------------------------------------


def test_non_default_stride_result(mode, lowering):
    """A Fortran-ordered (or otherwise strided) result lands in XLA's row-major buffer."""
    x = jnp.arange(24, dtype=F32).reshape(2, 3, 4)
    f = mode.host(np.asfortranarray, result=jax.ShapeDtypeStruct(x.shape, x.dtype))
    np.testing.assert_array_equal(jax.jit(f)(x), x)
    g = mode.host(lambda x: x.T.copy().T, result=jax.ShapeDtypeStruct(x.shape, x.dtype))
    np.testing.assert_array_equal(jax.jit(g)(x), x)
    h = mode.host(lambda x: x[:, ::-1][:, ::-1], result=jax.ShapeDtypeStruct(x.shape, x.dtype))
    np.testing.assert_array_equal(jax.jit(h)(x), x)


def test_array_layout_is_preserved(mode):
    x = np.arange(6, dtype=np.int32).reshape(3, 2)
    f = mode.host(lambda x: x, result=sds((3, 2), jnp.int32))
    np.testing.assert_array_equal(f(x), x)
    np.testing.assert_array_equal(jax.jit(f)(x), x)


# -- what the host function receives --------------------------------------------------------


def test_eager_call_passes_read_only_numpy_arrays(mode):
    """Documented difference: `pure_callback` outside `jit` passes `jax.Array`s; jaxbridge
    passes read-only NumPy arrays everywhere, eagerly as under `jit`."""
    seen = []

    def fn(x):
        seen.append((type(x), x.flags.writeable))
        return x

    f = mode.host(fn, result=sds(()))
    f(jnp.array(2.0))
    jax.jit(f)(jnp.array(2.0))
    jax.effects_barrier()
    assert seen == [(np.ndarray, False), (np.ndarray, False)]


def test_arguments_kept_by_the_host_function_keep_their_values(mode, lowering):
    """JAX's io tests keep the host function's arguments (`x_lst.append(x)`) and read them
    after the call. jaxbridge's io and ordered calls hand over copies, which keep their values;
    a pure call under the zero-copy buffer lowering hands over views of XLA's buffers, and
    keeping one raises (documented in docs/host.md) instead of reading freed memory later."""
    kept = []

    def keep(x):
        kept.append(x)
        return x * 2

    f = jax.jit(mode.host(keep, result=sds((256,))))
    if mode.name == "pure" and lowering == "buffer":
        with pytest.raises(jax.errors.JaxRuntimeError, match="kept a reference to its argument"):
            jax.block_until_ready(f(jnp.full(256, 1.0)))
        return
    for i in range(4):
        jax.block_until_ready(f(jnp.full(256, float(i)) + 1.0))
    churn = jax.jit(lambda x: x * 3.0 + 7.0)
    for _ in range(8):  # reuse XLA's freed buffers
        jax.block_until_ready(churn(jnp.full(256, 99.0)))
    jax.effects_barrier()
    assert [float(k[0]) for k in kept] == [1.0, 2.0, 3.0, 4.0]
    assert all(np.all(k == k[0]) for k in kept)


def test_host_function_calling_jax_does_not_deadlock(mode):
    def fn(x):
        y = jnp.asarray(x) + 1
        return np.asarray(2 * jnp.log(y))

    x = jnp.array([1.0, 2.0, 3.0, 4.0])
    f = mode.host(fn, result=jax.ShapeDtypeStruct(x.shape, x.dtype))
    np.testing.assert_allclose(f(x), 2 * jnp.log(x + 1), rtol=1e-6)
    np.testing.assert_allclose(_in_thread(lambda: jax.jit(f)(x)), 2 * jnp.log(x + 1), rtol=1e-6)


def test_host_function_that_is_a_compiled_executable(mode):
    """JAX's reentrancy case: the host function is itself a compiled JAX executable."""
    compiled = jax.jit(jnp.sin).lower(jnp.float32(2.0)).compile()
    f = mode.host(compiled, result=sds(()))
    out = _in_thread(lambda: jax.jit(f)(jnp.float32(2.0)))
    np.testing.assert_allclose(out, np.sin(np.float32(2.0)), rtol=1e-6)


def test_host_function_blocking_on_jax_does_not_deadlock(mode):
    """jax#24255 (JAX skips it as slow at 500x500): a host function that blocks on a jitted
    JAX computation, called repeatedly with its results accumulated asynchronously."""
    eig = jax.jit(jnp.linalg.eig)

    def fn(x):
        assert x.dtype == np.complex64
        return tuple(jax.block_until_ready(eig(x)))  # EigResult: see test_port_pytrees

    spec = (jax.ShapeDtypeStruct((8,), jnp.complex64), jax.ShapeDtypeStruct((8, 8), jnp.complex64))
    f = mode.host(fn, result=spec)
    a = jnp.eye(8, dtype=jnp.complex64) * 2.0

    def run():
        total = jnp.zeros((8, 8), jnp.complex64)
        for _ in range(3):
            total = total + jax.jit(f)(a)[1]
        return jax.block_until_ready(total)

    total = _in_thread(run)
    np.testing.assert_allclose(np.abs(total), 3 * np.eye(8), atol=1e-6)


def _in_thread(fn, seconds=60):
    """Runs `fn` in a thread and fails the test if it hangs (a deadlock); re-raises here
    what it raised there."""
    box: list = []

    def target():
        try:
            box.append(np.asarray(fn()))
        except BaseException as e:  # handed to the test's own thread
            box.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "deadlock: the call did not return"
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


# -- dead code, caching ---------------------------------------------------------------------


def test_pure_call_with_unused_result_is_removed_as_dead_code():
    log = []

    def fn(x):
        log.append("called")  # must not happen
        return x * 2.0

    f = jaxbridge.host(fn, result=sds(()))

    @jax.jit
    def g(x):
        _ = f(x)
        return x * 2.0

    assert float(g(2.0)) == 4.0
    assert log == []


def test_compilation_caching(mode):
    """JAX compiles an eager callback once for three calls; jaxbridge's eager calls do not
    compile at all (they call the function directly), and under `jit` it traces once."""
    calls, traces = [], []

    def fn(x):
        calls.append(1)
        return 2 * x

    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    f = mode.host(fn, result=jax.ShapeDtypeStruct(x.shape, x.dtype))

    @jax.jit
    def g(x):
        traces.append(1)
        return f(x)

    for _ in range(3):
        np.testing.assert_array_equal(f(x), 2 * x)
        np.testing.assert_array_equal(g(x), 2 * x)
    jax.effects_barrier()
    assert (len(calls), len(traces)) == (6, 1)


def test_jitted_call_stays_on_the_fast_path():
    """jax#31319: a second call of a jitted host call takes the C++ dispatch fast path.

    Pure calls only, as in JAX: a program with io effects never takes it, with
    `io_callback` too (its runtime tokens go through Python dispatch).
    """
    f = jax.jit(jaxbridge.host(lambda x: x, result=sds((5,))))
    x = jnp.arange(5.0)
    with jtu.count_pjit_cpp_cache_miss() as count:
        f(x)
        f(x)
    assert count() == 1


def test_eval_jaxpr_of_sequential_vmap_under_compile_time_eval():
    f = jaxbridge.host(lambda x: x, result=sds(()), vmap="sequential")
    jaxpr = jax.make_jaxpr(lambda: jax.vmap(f)(jnp.arange(8, dtype=F32)))()
    with jax.ensure_compile_time_eval():
        (out,) = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts)
    np.testing.assert_array_equal(out, np.arange(8, dtype=np.float32))


# -- result=: anything with .shape and .dtype (issue 12, item 6) ------------------------------


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), id="ShapeDtypeStruct"),
        pytest.param(lambda x: ShapedArray(x.shape, x.dtype), id="ShapedArray"),
        pytest.param(lambda x: np.zeros(x.shape, x.dtype), id="numpy"),
        pytest.param(lambda x: jnp.zeros(x.shape, x.dtype), id="jax_array"),
        pytest.param(lambda x: x, id="traced_argument"),
    ],
)
def test_result_accepts_anything_with_shape_and_dtype(mode, make):
    """`pure_callback(np.sin, x, x)`, JAX's most common idiom, and its relatives."""

    @jax.jit
    def f(x):
        return mode.host(np.sin, result=make(x))(x)

    x = jnp.arange(3.0)
    np.testing.assert_allclose(f(x), jnp.sin(x), rtol=1e-6)


def test_result_accepts_a_pytree_of_shaped_arrays(mode):
    spec = {"y": [ShapedArray((), F32)], "n": np.zeros(2, np.int32)}
    f = mode.host(lambda x: {"y": [x], "n": np.arange(2, dtype=np.int32)}, result=spec)
    out = jax.jit(f)(jnp.float32(2.0))
    jax.effects_barrier()
    assert float(out["y"][0]) == 2.0 and out["n"].tolist() == [0, 1]


def test_result_is_still_validated_at_wrap_time():
    with pytest.raises(TypeError, match=r"`int`.*`\[1\]`"):
        jaxbridge.host(np.sin, result=[sds((3,)), 3])
