"""Odd inputs: strided and read-only arrays, mutation, views, NaN/Inf, huge arrays, scalars.

The contract these pin: a host function receives read-only NumPy arrays (eagerly, under jit,
under vmap, on every executor); writing to one raises and never changes the caller's data; a
returned view of an input is copied out, so later changes to the caller's array do not leak
into the result.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cases import make_strategy

import jaxbridge

STRATEGIES = ["sequential", "vectorized", "threads", "processes"]


def make(name: str):
    return make_strategy(name, chunk_size=1)


def strided_inputs() -> dict[str, np.ndarray]:
    base = np.arange(24.0, dtype=np.float32).reshape(4, 6)
    return {
        "reversed": base[::-1],
        "reversed-columns": base[:, ::-1],
        "step-2": base[:, ::2],
        "transposed": base.T,
        "broadcast": np.broadcast_to(np.arange(6.0, dtype=np.float32), (4, 6)),
        "fortran": np.asfortranarray(base),
        "negative-step-2d": base[::-2, ::-3],
    }


@pytest.mark.parametrize("name", list(strided_inputs()))
def test_non_contiguous_and_reversed_stride_inputs(name, lowering):
    x = strided_inputs()[name]
    f = jaxbridge.host(lambda a: np.cumsum(a, axis=-1) * 2)
    want = np.cumsum(x, axis=-1) * 2
    np.testing.assert_array_equal(f(x), want)  # eager: the caller's own strided array
    np.testing.assert_array_equal(jax.jit(f)(x), want)
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), want)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_non_contiguous_and_reversed_stride_results(strategy, lowering):
    """A host function may return any strided view; it is copied into the result as is."""

    def fn(a):
        return {"rev": a[..., ::-1], "t": np.swapaxes(a[..., None], -1, -2)[..., 0, :]}

    f = jaxbridge.host(fn, vmap=make(strategy))
    x = jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4)
    got = jax.jit(jax.vmap(f))(x)
    np.testing.assert_array_equal(got["rev"], np.asarray(x)[:, ::-1])
    np.testing.assert_array_equal(got["t"], x)
    g = jaxbridge.host(lambda a: a.T[::-1])
    m = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(jax.jit(g)(m), m.T[::-1])


def test_read_only_arrays_are_accepted(lowering):
    x = np.arange(5.0, dtype=np.float32)
    x.flags.writeable = False
    seen = []

    def fn(a):
        seen.append(a.flags.writeable)
        return a * 2

    f = jaxbridge.host(fn)
    np.testing.assert_array_equal(f(x), x * 2)
    np.testing.assert_array_equal(jax.jit(f)(x), x * 2)
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(np.stack([x, x])), np.stack([x, x]) * 2)
    assert not any(seen)


CROSSED_XLA = (jaxbridge.HostError, jax.errors.JaxRuntimeError)


def _mutate(a):
    a[...] = -1.0  # documented: inputs are read-only; this raises ValueError
    return a


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_mutating_an_input_raises_and_spares_the_caller(strategy, lowering):
    f = jaxbridge.host(_mutate, vmap=make(strategy), result=jax.ShapeDtypeStruct((3,), "float32"))
    x_np = np.ones((4, 3), np.float32)
    x_jnp = jnp.ones((4, 3), jnp.float32)
    with pytest.raises(ValueError, match="read-only"):
        f(x_np[0])  # eagerly: the original exception
    # Under jit the error crosses XLA as text (see `jaxbridge.HostError`).
    with pytest.raises(CROSSED_XLA, match="ValueError: assignment destination is read-only"):
        jax.block_until_ready(jax.jit(f)(x_jnp[0]))
    with pytest.raises(CROSSED_XLA, match="ValueError: assignment destination is read-only"):
        jax.block_until_ready(jax.jit(jax.vmap(f))(x_jnp))
    with pytest.raises(jaxbridge.HostError, match="read-only"):
        jax.block_until_ready(jax.vmap(f)(x_np))
    np.testing.assert_array_equal(x_np, 1.0)
    np.testing.assert_array_equal(x_jnp, 1.0)


def test_in_place_work_on_a_copy_is_fine(lowering):
    def fn(a):
        b = a.copy()
        b[0] = 7.0
        return b

    f = jaxbridge.host(fn)
    x = jnp.zeros(3, jnp.float32)
    np.testing.assert_array_equal(jax.jit(f)(x), [7.0, 0.0, 0.0])
    np.testing.assert_array_equal(x, 0.0)


@pytest.mark.parametrize("view", ["identity", "slice", "reversed", "reshape"])
def test_returning_a_view_of_the_input_is_copied(view, lowering):
    views = {
        "identity": lambda a: a,
        "slice": lambda a: a[1:],
        "reversed": lambda a: a[::-1],
        "reshape": lambda a: a.reshape(2, 2),
    }
    f = jaxbridge.host(views[view])
    x = np.arange(4.0, dtype=np.float32)
    want = views[view](x.copy())
    eager, jitted = f(x), jax.jit(f)(x)
    x[...] = 100.0  # the caller changes its array afterwards: results must not follow
    np.testing.assert_array_equal(eager, want)
    np.testing.assert_array_equal(jitted, want)
    # Chained: the view returned by one host call feeds the next inside one program.
    g = jax.jit(lambda a: (f(f(a)), f(a)))
    y = jnp.arange(4.0, dtype=jnp.float32)
    twice, once = g(y)
    np.testing.assert_array_equal(twice, views[view](views[view](np.asarray(y))))
    np.testing.assert_array_equal(once, views[view](np.asarray(y)))


@pytest.mark.parametrize("strategy", ["sequential", "vectorized"])
def test_nan_and_inf_pass_through(strategy, lowering):
    f = jaxbridge.host(lambda a: a * 2, vmap=strategy)
    x = jnp.asarray([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e38], jnp.float32)
    with np.errstate(over="ignore"):
        want = np.asarray(x) * np.float32(2)
    np.testing.assert_array_equal(jax.jit(f)(x), want)
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), want)
    assert np.signbit(jax.jit(f)(x)[4])  # -0.0 keeps its sign


def test_nan_and_inf_in_derivatives(x64):
    """NaN flows through every rule as through JAX, with no crash or hang.

    A dense rule computes J·t: a NaN entry of J reaches every tangent component it multiplies,
    even by zero (IEEE: NaN·0 = NaN). Exact rules have NaN only where the host's Jacobian does;
    finite differences cannot tell a NaN input's column from its row, so they spread NaN
    further. `FiniteDifferences(check_finite=True)` turns that into an error.
    """
    x = jnp.asarray([1.0, np.nan, 2.0])
    ref = jax.grad(lambda v: jnp.sum(jnp.sqrt(v)))(x)
    exact = (
        jaxbridge.host(np.sqrt, jacobian=lambda v: np.diag(0.5 / np.sqrt(v))),
        jaxbridge.host(
            np.sqrt,
            jvp=lambda v, t: 0.5 * t / np.sqrt(v),
            vjp=lambda v, c: (0.5 * c / np.sqrt(v),),
        ),
    )
    for f in exact:
        got = jax.grad(lambda v, f=f: jnp.sum(f(v)))(x)
        np.testing.assert_allclose(got, ref, rtol=1e-6)
    fd = jaxbridge.host(np.sqrt, vmap="vectorized", derivative=jaxbridge.FiniteDifferences())
    assert np.isnan(jax.jit(jax.grad(lambda v: jnp.sum(fd(v))))(x)[1])
    inf = jnp.asarray([1.0, np.inf])
    assert jnp.isnan(jax.grad(lambda v: jnp.sum(fd(v)))(inf)[1])
    checked = jaxbridge.host(
        np.sqrt, vmap="vectorized", derivative=jaxbridge.FiniteDifferences(check_finite=True)
    )
    with pytest.raises(CROSSED_XLA, match="not finite"):
        jax.block_until_ready(jax.jit(jax.grad(lambda v: jnp.sum(checked(v))))(x))


def test_very_large_array(lowering):
    """400 MB in, a strided slice and a 400 MB result out (a few seconds on 2 cores)."""
    n = 100_000_000
    f = jaxbridge.host(
        lambda a: a[::1000] + 1, result=jax.ShapeDtypeStruct((n // 1000,), "float32")
    )
    x = jnp.zeros(n, jnp.float32)
    np.testing.assert_array_equal(jax.jit(f)(x), 1.0)
    y = jax.jit(jaxbridge.host(lambda a: a * 2))(x)
    assert y.shape == (n,) and float(y[-1]) == 0.0
    del x, y


def test_large_array_buffer_lowering_is_zero_copy():
    """50 MB through buffer lowering: the host sees XLA's buffer, not a copy of it."""
    addresses = []

    def fn(a):
        addresses.append(a.__array_interface__["data"][0])
        return a[:1]

    f = jaxbridge.host(fn, lowering="buffer", result=jax.ShapeDtypeStruct((1,), "float32"))
    x = jnp.ones(12_500_000, jnp.float32)
    jax.jit(f)(x).block_until_ready()
    assert addresses[-1] == x.unsafe_buffer_pointer()


SCALARS = [
    ("int", 3, "int32"),
    ("negative int", -7, "int32"),
    ("float", 2.5, "float32"),
    ("complex", 1 + 2j, "complex64"),
    ("bool", True, "bool"),
    ("np.float16", np.float16(1.5), "float16"),
    ("np.float32", np.float32(1.5), "float32"),
    ("np.float64", np.float64(1.5), "float32"),
    ("np.int8", np.int8(-3), "int8"),
    ("np.uint8", np.uint8(250), "uint8"),
    ("np.int64", np.int64(5), "int32"),
    ("np.bool_", np.bool_(False), "bool"),
    ("np.complex128", np.complex128(1 - 1j), "complex64"),
    ("0-d array", np.asarray(4.0), "float32"),
]


@pytest.mark.parametrize("value, dtype", [s[1:] for s in SCALARS], ids=[s[0] for s in SCALARS])
def test_python_and_numpy_scalars_of_every_kind(value, dtype, lowering):
    seen = []

    def fn(a):
        seen.append((type(a), a.shape, a.dtype))
        return a

    f = jaxbridge.host(fn)
    for got in (f(value), jax.jit(f)(value)):
        assert got.shape == () and got.dtype == np.dtype(dtype)
        assert got == jnp.asarray(value, dtype)
    assert set(seen) == {(np.ndarray, (), np.dtype(dtype))}


@pytest.mark.parametrize("value, dtype", [s[1:] for s in SCALARS], ids=[s[0] for s in SCALARS])
def test_scalars_with_x64(value, dtype, x64):
    f = jaxbridge.host(lambda a: a)
    want = jnp.asarray(value)
    for got in (f(value), jax.jit(f)(value)):
        assert got.dtype == want.dtype and got == want


@pytest.mark.parametrize(
    "value", [1, 1.5, 2j, True, np.float32(0.5), np.int16(3)], ids=lambda v: type(v).__name__
)
def test_scalars_returned_by_the_host(value, lowering):
    f = jaxbridge.host(lambda a: value)
    want = jnp.asarray(value)
    for got in (f(jnp.zeros(())), jax.jit(f)(jnp.zeros(()))):
        assert got.shape == () and got.dtype == want.dtype and got == want


def test_scalars_that_do_not_fit_raise_like_jax():
    f = jaxbridge.host(lambda a: a)
    with pytest.raises(OverflowError):
        jnp.asarray(2**40)
    with pytest.raises(OverflowError):
        f(2**40)
    with pytest.raises(OverflowError):
        jax.jit(f)(2**40)
    with pytest.raises(OverflowError):
        f(2**70)
