"""Port of JAX's callback tests: every dtype in and out, 64-bit declarations, sub-byte types.

Sub-byte dtypes and value-changing casts are issue 12, items 1 and 2.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxbridge

F32 = jnp.float32

# JAX's `jtu.dtypes.all`: every floating, signed, unsigned, complex and boolean type; the
# 64-bit ones run with x64 on (with x64 off JAX has no such arrays).
DTYPES_32 = [
    jnp.bfloat16,
    np.float16,
    np.float32,
    np.int8,
    np.int16,
    np.int32,
    np.uint8,
    np.uint16,
    np.uint32,
    np.complex64,
    np.bool_,
]
DTYPES_64 = [np.float64, np.int64, np.uint64, np.complex128]
# The ML float types JAX has beyond `jtu.dtypes.all`: round-trips must keep their values too.
CUSTOM_FLOATS = [
    ml_dtypes.float8_e4m3fn,
    ml_dtypes.float8_e5m2,
    ml_dtypes.float8_e4m3b11fnuz,
    ml_dtypes.float8_e4m3fnuz,
    ml_dtypes.float8_e5m2fnuz,
    ml_dtypes.float8_e3m4,
    ml_dtypes.float8_e4m3,
    ml_dtypes.float8_e8m0fnu,
]
SUB_BYTE = ["int2", "int4", "uint2", "uint4", "float4_e2m1fn"]


def _host_func(x):
    return ~x if x.dtype == np.bool_ else x + x


def _check_all_types(mode, dtype):
    received = []

    def fn(x):
        received.append(np.array(x))
        return _host_func(x)

    x = np.array([True, False, True, True]) if dtype == np.bool_ else np.arange(4, dtype=dtype)
    f = jax.jit(mode.host(fn, result=jax.ShapeDtypeStruct(x.shape, x.dtype)))
    out = f(x)
    jax.effects_barrier()
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(out), _host_func(x))
    assert received[-1].dtype == x.dtype
    np.testing.assert_array_equal(received[-1], x)


@pytest.mark.parametrize("dtype", DTYPES_32, ids=lambda d: np.dtype(d).name)
def test_works_with_all_types(mode, lowering, dtype):
    _check_all_types(mode, dtype)


@pytest.mark.parametrize("dtype", DTYPES_64, ids=lambda d: np.dtype(d).name)
def test_works_with_all_64_bit_types(mode, lowering, dtype, x64):
    _check_all_types(mode, dtype)


@pytest.mark.parametrize("dtype", CUSTOM_FLOATS, ids=lambda d: np.dtype(d).name)
def test_round_trip_of_ml_float_types(lowering, dtype):
    x = np.array([0.5, 1.0, 2.0, 4.0], dtype=dtype)
    f = jax.jit(jaxbridge.host(lambda x: x, result=jax.ShapeDtypeStruct(x.shape, x.dtype)))
    out = f(x)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(out).astype(np.float32), x.astype(np.float32))


# -- Python literals and 64-bit declarations ------------------------------------------------


@pytest.mark.parametrize("x64_on", [False, True], ids=["x64_off", "x64_on"])
@pytest.mark.parametrize("expect_dtype", [np.int32, np.int64, np.float32, np.float64])
def test_returning_python_literal(mode, expect_dtype, x64_on):
    """Documented difference: JAX raises for a 64-bit `result` with x64 off ("cannot specify
    64-bit types") and for a 32-bit one with x64 on ("Incorrect output dtype"). jaxbridge
    canonicalises the declared dtype as `jnp.asarray` would and converts the literal when the
    value is unchanged, so 42 comes back in every case."""
    literal = 42 if np.dtype(expect_dtype).kind == "i" else 42.0
    with jax.enable_x64(x64_on):
        f = jax.jit(mode.host(lambda x: literal, result=jax.ShapeDtypeStruct((), expect_dtype)))
        out = f(0.0)
        jax.effects_barrier()
        expected = jax.dtypes.canonicalize_dtype(expect_dtype)
        assert out.dtype == expected and np.asarray(out) == literal


def test_float64_result_declared_float32(mode, x64):
    """JAX raises "Incorrect output dtype" with x64 on; jaxbridge converts within a kind when
    the value is unchanged (with x64 off the conversion is JAX's own canonicalisation)."""
    f = jax.jit(
        mode.host(lambda: np.array([1.0], np.float64), result=jax.ShapeDtypeStruct((1,), F32))
    )
    out = f()
    jax.effects_barrier()
    assert out.dtype == F32
    np.testing.assert_array_equal(out, [1.0])


def test_float64_result_declared_float32_with_x64_off(mode):
    f = jax.jit(
        mode.host(lambda: np.array([1.0], np.float64), result=jax.ShapeDtypeStruct((1,), F32))
    )
    out = f()
    jax.effects_barrier()
    assert out.dtype == F32
    np.testing.assert_array_equal(out, [1.0])


def test_wrongly_specified_64_bit_dtype_with_x64_off(mode):
    """JAX raises ValueError for `result_shape_dtypes` of float64 with x64 off; jaxbridge
    canonicalises the declaration to float32 (documented difference)."""
    f = jax.jit(mode.host(lambda: np.float64(1.0), result=jax.ShapeDtypeStruct((), np.float64)))
    out = f()
    jax.effects_barrier()
    assert out.dtype == F32 and float(out) == 1.0


# -- value-changing casts raise (issue 12, item 2) --------------------------------------------


@pytest.mark.parametrize(
    ("value", "dtype", "expected", "got"),
    [
        pytest.param(np.int32(300), np.int8, "i8[3]", "i32[3]", id="300_to_int8"),
        pytest.param(np.float32(1e6), np.float16, "f16[3]", "f32[3]", id="1e6_to_float16"),
        pytest.param(np.int32(-1), np.uint8, "u8[3]", "i32[3]", id="minus1_to_uint8"),
        pytest.param(np.float64(1e300), np.float32, "f32[3]", "f64[3]", id="1e300_to_float32"),
    ],
)
def test_value_changing_cast_raises(mode, lowering, value, dtype, expected, got):
    """Issue 12, item 2: `pure_callback` raises for all of these; so does jaxbridge, naming
    the function, expected and got."""

    def returns_value(x):
        return np.full(3, value)

    f = jax.jit(mode.host(returns_value, result=jax.ShapeDtypeStruct((3,), dtype)))
    with pytest.raises(Exception) as info:
        jax.block_until_ready(f(jnp.ones(3)))
        jax.effects_barrier()
    text = str(info.value)
    assert "returns_value" in text
    assert f"expected {expected}" in text
    assert f"got {got}" in text


def test_value_changing_cast_raises_host_result_error_eagerly():
    f = jaxbridge.host(lambda x: np.full(3, 300), result=jax.ShapeDtypeStruct((3,), np.int8))
    with pytest.raises(jaxbridge.HostResultError, match=r"i8\[3\]"):
        f(jnp.ones(3))


def test_value_preserving_narrowing_stays_allowed(lowering):
    f = jaxbridge.host(
        lambda x: (np.full(3, 100), np.full(3, 0.5)),
        result=(jax.ShapeDtypeStruct((3,), np.int8), jax.ShapeDtypeStruct((3,), np.float16)),
    )
    a, b = jax.jit(f)(jnp.ones(3))
    assert (a.dtype, b.dtype) == (np.int8, np.float16)
    assert a.tolist() == [100] * 3 and b.tolist() == [0.5] * 3


# -- sub-byte types (issue 12, item 1) -----------------------------------------------------------


@pytest.mark.parametrize("dtype", SUB_BYTE)
def test_sub_byte_operands(lowering, dtype):
    seen = []

    def get(x):
        seen.append(np.array(x))
        return x

    x = np.arange(8, dtype=dtype) if dtype != "float4_e2m1fn" else np.linspace(0, 3, 8, dtype=dtype)
    f = jax.jit(jaxbridge.host(get, result=jax.ShapeDtypeStruct((8,), dtype)))
    np.testing.assert_array_equal(f(x), x)
    np.testing.assert_array_equal(seen[-1], x)
    assert seen[-1].dtype == x.dtype


@pytest.mark.parametrize("dtype", SUB_BYTE)
def test_sub_byte_operand_converted_on_the_host(lowering, dtype):
    """Issue 12's reproducer: int4 in, float32 out."""
    x = np.arange(8, dtype=dtype) if dtype != "float4_e2m1fn" else np.linspace(0, 3, 8, dtype=dtype)
    f = jax.jit(
        jaxbridge.host(lambda v: v.astype(np.float32), result=jax.ShapeDtypeStruct((8,), F32))
    )
    np.testing.assert_array_equal(f(x), x.astype(np.float32))


@pytest.mark.parametrize("dtype", SUB_BYTE)
def test_sub_byte_results(lowering, dtype):
    x = np.arange(8, dtype=dtype) if dtype != "float4_e2m1fn" else np.linspace(0, 3, 8, dtype=dtype)
    f = jax.jit(jaxbridge.host(lambda: x, result=jax.ShapeDtypeStruct((8,), dtype)))
    out = f()
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("dtype", SUB_BYTE)
def test_non_default_stride_sub_byte_results(lowering, dtype):
    base = np.arange(24) % (4 if dtype in ("int2", "uint2") else 8)
    x = jnp.asarray(base.astype(dtype).reshape(2, 3, 4))
    seen = []

    def fortran(v):
        seen.append(np.array(v))
        return np.asfortranarray(v)

    f = jax.jit(jaxbridge.host(fortran, result=jax.ShapeDtypeStruct(x.shape, x.dtype)))
    np.testing.assert_array_equal(f(x), x)
    np.testing.assert_array_equal(seen[-1], np.asarray(x))  # what the host read


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_sub_byte_under_vmap(lowering, dtype):
    x = jnp.asarray((np.arange(12) % 8).reshape(3, 4).astype(dtype))
    seen = []

    def keep(v):
        seen.append(np.array(v))
        return v

    f = jaxbridge.host(keep, result=jax.ShapeDtypeStruct((4,), dtype))
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), x)
    np.testing.assert_array_equal(np.stack(seen[-3:]), np.asarray(x))
