"""Dtypes with and without x64: what the host receives and what comes back."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import dtypes as _dtypes

import jaxbridge


def _seen():
    seen = []

    @jaxbridge.host
    def f(x, n, flag):
        seen.append((x.dtype, n.dtype, flag.dtype))
        return x * 2.0, n + 1, ~flag

    return f, seen


def test_x64_off_host_gets_32_bit_and_float64_results_are_narrowed(lowering):
    f, seen = _seen()
    x, n, flag = jax.jit(f)(1.5, 3, True)  # Python numbers are traced as weak scalars
    assert (x.dtype, n.dtype, flag.dtype) == (jnp.float32, jnp.int32, jnp.bool_)
    assert seen[-1] == (np.float32, np.int32, np.bool_)
    assert (float(x), int(n), bool(flag)) == (3.0, 4, False)


def test_x64_on_host_gets_64_bit(x64, lowering):
    f, seen = _seen()
    x, n, _ = jax.jit(f)(1.5, 3, True)
    assert (x.dtype, n.dtype) == (jnp.float64, jnp.int64)
    assert seen[-1][:2] == (np.float64, np.int64)
    # and float32 inputs stay float32
    g = jaxbridge.host(lambda x: x + np.float32(1))
    assert jax.jit(g)(jnp.ones(2, jnp.float32)).dtype == jnp.float32


@pytest.mark.parametrize(
    "dtype",
    [
        jnp.float16,
        jnp.bfloat16,
        jnp.float32,
        jnp.int8,
        jnp.uint8,
        jnp.int32,
        jnp.bool_,
        jnp.complex64,
    ],
)
def test_round_trip_of_each_dtype(dtype, lowering):
    f = jaxbridge.host(lambda x: x)
    x = jnp.asarray(np.arange(6).reshape(2, 3) % 2, dtype)
    y = jax.jit(f)(x)
    assert y.dtype == x.dtype
    as_f32 = lambda a: np.asarray(a).astype(np.complex64).real  # noqa: E731
    np.testing.assert_array_equal(as_f32(y), as_f32(x))
    np.testing.assert_array_equal(as_f32(jax.vmap(f)(x)), as_f32(x))


def test_zero_d_and_zero_size(lowering):
    f = jaxbridge.host(lambda x, y: (x * 2, y.sum(axis=-1)), vmap="vectorized")
    a, b = jax.jit(f)(jnp.float32(2.0), jnp.ones((0,)))
    assert (a.shape, b.shape, float(a), float(b)) == ((), (), 4.0, 0.0)
    a, b = jax.vmap(f)(jnp.ones(3), jnp.ones((3, 0)))
    assert (a.shape, b.shape) == ((3,), (3,))


def test_declared_result_dtype_is_honoured(x64):
    f = jaxbridge.host(lambda x: x, result=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.float32))
    assert jax.jit(f)(jnp.ones(2, jnp.float64)).dtype == jnp.float32


# --- every dtype JAX has, packed sub-byte ones included (issue 12, item 1) -----------------

_CANDIDATES = [0, 1, 2, 3, -1, -2, 0.5, 1.5, 4, 6, 7, -8, 0.25, 8, 16, 127]


def _jax_dtypes() -> list[np.dtype]:
    """Every dtype JAX defines, less the few XLA's CPU backend cannot hold at all."""
    names = [
        "bool",
        "int8",
        "uint8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    ]
    found = [np.dtype(n) for n in names]
    found += [np.dtype(d) for d in _dtypes._intn_dtypes]  # int2, int4, uint2, ..., int1
    found += [np.dtype(d) for d in _dtypes._custom_float_dtypes]  # bfloat16, float8, ...
    usable = []
    for dt in dict.fromkeys(found):
        if dt.name in _NOT_ON_CPU:
            continue
        usable.append(dt)
    return usable


# jax 0.10.2 itself cannot pass an int1/uint1 array to a jitted function (it compiles them as
# `pred`: "RuntimeProgramInputMismatch"), and XLA's CPU backend has no float6 types ("Invalid
# XLA PrimitiveType"); both checked in the test below.
_NOT_ON_CPU = {"int1", "uint1", "float6_e2m3fn", "float6_e3m2fn"}
JAX_DTYPES = _jax_dtypes()


def test_the_dtype_list_holds_the_packed_dtypes_and_only_cpu_gaps_are_left_out():
    names = {d.name for d in JAX_DTYPES}
    assert {"int2", "int4", "uint2", "uint4", "float4_e2m1fn", "bfloat16"} <= names
    for name in _NOT_ON_CPU:  # if JAX starts supporting one, it must join the list
        with pytest.raises(Exception):  # noqa: B017 - XLA's own error, any type
            jax.block_until_ready(jax.jit(lambda v: v)(np.zeros(4, name)))


def _values(dt: np.dtype, n: int = 8) -> np.ndarray:
    """`n` distinct values that `dt` holds exactly (reference computed by NumPy/ml_dtypes)."""
    if dt == np.bool_:
        return np.array([True, False] * (n // 2))
    out = []
    for v in _CANDIDATES:
        if isinstance(v, float) and dt.kind in "iu":
            continue
        if v < 0 and dt.kind == "u":
            continue
        with np.errstate(all="ignore"):
            c = np.array(v).astype(dt)
        if c.astype(np.complex128) == v and v not in out:
            out.append(v)
    if dt.kind == "c":
        out = [v * (1 - 0.5j) for v in out]
    return np.array((out * n)[:n]).astype(dt)


def _f64(a):
    return np.asarray(a).astype(np.complex128)


@pytest.mark.parametrize("dt", JAX_DTYPES, ids=lambda d: d.name)
def test_every_dtype_in_and_out_under_jit_vmap_and_strides(dt, lowering, x64):
    x = _values(dt)
    expected = _f64(x)
    c128 = jax.ShapeDtypeStruct(x.shape, np.complex128)  # holds every value of every dtype
    seen = []

    def reader(v):  # in: the host must see the real values
        seen.append(v.dtype)
        return v.astype(np.complex128)

    np.testing.assert_array_equal(jax.jit(jaxbridge.host(reader, result=c128))(x), expected)
    assert seen[-1] == dt
    # out: values computed on the host and written as `dt`
    write = jaxbridge.host(
        lambda v: (v if dt.kind == "c" else v.real).astype(dt),
        result=jax.ShapeDtypeStruct(x.shape, dt),
    )
    got = jax.jit(write)(expected)
    assert got.dtype == dt
    np.testing.assert_array_equal(_f64(got), expected)
    # in and out, with strides: a strided input slice and a reversed (negative-stride) result
    flip = jaxbridge.host(lambda v: v[::-1])
    np.testing.assert_array_equal(_f64(jax.jit(lambda v: flip(v[::2]))(x)), expected[::2][::-1])
    # under vmap (in_axes=1 of a transposed batch), both strategies, and the eager call
    m = x.reshape(2, 4)
    for strategy in ("sequential", "vectorized"):
        g = jaxbridge.host(lambda v: v[..., ::-1], vmap=strategy)
        np.testing.assert_array_equal(
            _f64(jax.jit(jax.vmap(g, in_axes=1, out_axes=1))(m.T)), _f64(m[:, ::-1]).T
        )
    np.testing.assert_array_equal(_f64(flip(x)), expected[::-1])


@pytest.mark.parametrize("dt", JAX_DTYPES, ids=lambda d: d.name)
def test_every_dtype_agrees_with_the_pure_lowering_under_ordered_and_io(dt, monkeypatch, x64):
    x = _values(dt)
    outs = {}
    for lowering in ("buffer", "pure"):
        monkeypatch.setenv("JAXBRIDGE_LOWERING", lowering)
        jax.clear_caches()
        flip = jaxbridge.host(lambda v: v[::-1])
        outs[lowering] = np.asarray(jax.jit(jax.vmap(flip))(x.reshape(2, 4)))
    np.testing.assert_array_equal(_f64(outs["buffer"]), _f64(outs["pure"]))
    for kind in ({"io": True}, {"ordered": True}):
        h = jaxbridge.host(lambda v: v[::-1], result=lambda v: v, **kind)
        np.testing.assert_array_equal(
            _f64(jax.jit(jax.vmap(h))(x.reshape(2, 4))), _f64(outs["pure"])
        )


def test_the_int4_example_of_the_issue(lowering):
    x = np.arange(8, dtype="int4")
    f = jax.jit(
        jaxbridge.host(
            lambda v: v.astype(np.float32), result=jax.ShapeDtypeStruct((8,), np.float32)
        )
    )
    np.testing.assert_array_equal(f(x), np.arange(8, dtype=np.float32))
    for _ in range(20):  # a corrupted heap used to crash within a few calls
        np.testing.assert_array_equal(f(x), np.arange(8, dtype=np.float32))
