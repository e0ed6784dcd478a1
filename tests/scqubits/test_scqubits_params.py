"""`jaxbridge.scqubits._params`: the parameter helpers every model shares."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbridge.scqubits import _params


def _unknown(names):
    return f"unknown {names}"


def test_values_fill_defaults_cast_and_name_unknown_keys(x64):
    out = _params.values({"b": 2}, {"a": 1.0, "b": 0.5}, _unknown)
    assert list(out) == ["a", "b"]
    assert all(v.dtype == jnp.float64 and not v.weak_type for v in out.values())
    assert float(out["a"]) == 1.0 and float(out["b"]) == 2.0
    with pytest.raises(ValueError, match=r"^unknown \['c', 'd'\]$"):
        _params.values({"d": 1, "c": 2, "a": 3}, {"a": 1.0}, _unknown)
    cast = _params.values(None, {"a": 1.0}, _unknown, lambda n, v, d: jnp.asarray([v, d]))
    np.testing.assert_array_equal(cast["a"], [1.0, 1.0])


def test_evals_count_checks_range_and_type():
    message = "`{method}(evals_count=...)` between 1 and {most}; got {got!r}."
    assert _params.evals_count(np.int64(3), 4, message, method="m") == 3
    for bad in (0, 5, 2.0, "2"):
        with pytest.raises(ValueError) as info:
            _params.evals_count(bad, 4, message, method="m")
        assert str(info.value) == message.format(method="m", most=4, got=bad)


def test_map_batch_broadcasts_params_and_core_dimensions(x64):
    values = {"a": jnp.arange(3.0)[:, None], "b": jnp.arange(2.0)}
    out = _params.map_batch(lambda p: (p["a"] * 10 + p["b"], p["a"]), values)
    np.testing.assert_array_equal(out[0], np.arange(3.0)[:, None] * 10 + np.arange(2.0))
    assert out[1].shape == (3, 2)
    # unbatched: `fn` runs once on the values as given
    assert _params.map_batch(lambda p: p["a"] + 1, {"a": jnp.asarray(1.0)}).shape == ()
    # a leaf with core dimensions (levels, states) beside batched parameters
    w, v = jnp.ones((2, 4)), jnp.ones((4, 4))

    def fn(p, esys):
        assert esys[0].shape == (4,) and esys[1].shape == (4, 4)
        return p["a"] + esys[0].sum() + esys[1].sum()

    got = _params.map_batch(fn, {"a": jnp.arange(2.0)}, (w, v), core_ndims=(0, (1, 2)))
    np.testing.assert_array_equal(got, np.arange(2.0) + 4 + 16)
    jitted = jax.jit(lambda a: _params.map_batch(fn, {"a": a}, (w, v), core_ndims=(0, (1, 2))))
    np.testing.assert_array_equal(jitted(jnp.arange(2.0)), got)


def test_read_defaults_are_the_objects_values_as_floats():
    class Obj:
        EJ, ng = 20, np.float32(0.25)

    out = _params.read_defaults(Obj(), ["EJ", "ng"])
    assert out == {"EJ": 20.0, "ng": 0.25} and all(type(v) is float for v in out.values())
