"""Result dtypes: value-changing casts raise, canonicalising ones are made (issue 12, item 2)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxbridge

VALUE_CHANGING = [
    # (returned, declared dtype, the value that does not fit)
    (np.array([1, 300]), np.int8, 300),
    (np.array([1.0, 1e6]), np.float16, 1000000.0),
    (np.array([-1, 2]), np.uint8, -1),
    (np.array([2**40, 1]), np.int32, 2**40),
    (np.array([1.0, 1e300]), np.float32, 1e300),
    (np.array([1 + 1j, 1e300j]), np.complex64, 1e300j),
    (np.array([3, 70000], np.uint32), np.int16, 70000),
    (np.array([1.0, 2.0**200]), jnp.bfloat16, 2.0**200),
]


def _wrapped(value, dtype, shape=(2,), **kwargs):
    spec = {"out": jax.ShapeDtypeStruct(shape, dtype)}

    def returns(x):
        return {"out": value}

    return jaxbridge.host(returns, result=spec, **kwargs)


def _message(value, dtype, value_shown):
    got = jax._src.dtypes.short_dtype_name(value.dtype)
    want = jax._src.dtypes.short_dtype_name(np.dtype(dtype))
    return (
        f"host function '_wrapped.<locals>.returns' returned a value at `['out']` that "
        f"{np.dtype(dtype).name} cannot hold: expected {want}[2], got {got}[2] containing "
        f"{value_shown!r}. Only conversions that keep every value are made (float64 to float32 "
        "may round, int64 to int32 must fit); convert explicitly, or declare a wider dtype in "
        "`result=`."
    )


@pytest.mark.parametrize("value, dtype, bad", VALUE_CHANGING, ids=lambda v: repr(v)[:20])
def test_a_value_changing_cast_raises_naming_function_path_expected_and_got(
    value, dtype, bad, lowering, x64
):
    f = _wrapped(value, dtype)
    with pytest.raises(jaxbridge.HostResultError) as info:
        f(jnp.ones(2))  # eager: the error itself
    assert str(info.value) == _message(value, dtype, bad)
    # under jit the error crosses XLA as text
    for transformed, arg in ((jax.jit(f), jnp.ones(2)), (jax.jit(jax.vmap(f)), jnp.ones((3, 2)))):
        with pytest.raises(Exception, match="cannot hold") as info:
            jax.block_until_ready(transformed(arg))
        assert _message(value, dtype, bad) in str(info.value)
    vec = _wrapped(np.stack([value] * 3), dtype, vmap="vectorized")
    with pytest.raises(Exception, match="cannot hold"):
        jax.block_until_ready(jax.jit(jax.vmap(vec))(jnp.ones((3, 2))))


def test_the_fast_path_results_are_exact(lowering):
    f = jaxbridge.host(lambda x: x + 1)
    np.testing.assert_array_equal(jax.jit(f)(jnp.arange(3.0)), [1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    "value, dtype",
    [
        (np.array([1 / 3, 1e-50, -2.5e38]), np.float32),  # rounds, underflows: allowed
        (np.array([-(2**31), 2**31 - 1, 0]), np.int32),  # int64 that fits int32
        (np.array([1, 2, 255]), np.uint8),  # a Python/NumPy int that fits uint8
        (np.array([np.nan, np.inf, -np.inf]), np.float16),  # not finite before either
        (np.array([1 + 2j, np.nan, 3j]), np.complex64),
        (np.array([1, 2, 3], np.int8), np.int32),  # widening
        (np.array([1, 2, 3], np.uint8), np.int16),
        (np.array([0.1, 2.0, 3.0], np.float16), np.float32),
    ],
    ids=repr,
)
def test_canonicalising_and_widening_casts_are_made(value, dtype, lowering, x64):
    f = jaxbridge.host(lambda x: value, result=jax.ShapeDtypeStruct(value.shape, dtype))
    expected = value.astype(dtype)
    for g in (f, jax.jit(f)):
        got = g(jnp.ones(2))
        assert got.dtype == dtype
        np.testing.assert_array_equal(np.asarray(got), expected)
    batched = jax.jit(jax.vmap(f))(jnp.ones((2, 2)))
    np.testing.assert_array_equal(np.asarray(batched), np.stack([expected, expected]))


def test_x64_off_float64_and_int64_results_are_canonicalised(lowering):
    f = jaxbridge.host(lambda x: (x.astype(np.float64) / 3, np.int64(7), np.arange(3)))
    y, n, r = jax.jit(f)(jnp.ones(2, jnp.float32))
    assert (y.dtype, n.dtype, r.dtype) == (jnp.float32, jnp.int32, jnp.int32)
    np.testing.assert_array_equal(y, np.float32(1 / 3))
    big = jaxbridge.host(lambda x: np.int64(2**40))
    with pytest.raises(Exception, match="int32 cannot hold"):
        jax.block_until_ready(jax.jit(big)(jnp.ones(2)))


def test_the_small_array_overflow_shortcut_agrees_with_the_exact_check():
    # small float arrays are checked with Python's min/max; NaN in any position, infinities
    # and values just past the target's range must give the exact answer
    from jaxbridge import _spec

    rng = np.random.default_rng(0)
    pool = np.array([np.nan, np.inf, -np.inf, 1.0, -2.0, 1e39, -1e39, 3e38, 70000.0, 65519.0])
    for _ in range(500):
        a = rng.choice(pool, rng.integers(1, 8))
        for dt in (np.float32, np.float16):
            with np.errstate(all="ignore"):
                exact = bool(np.any(np.isfinite(a) & ~np.isfinite(a.astype(dt))))
            assert (_spec._cast_into("float", a, np.empty(a.shape, dt)) is not None) == exact
