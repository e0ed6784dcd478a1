"""Host calls under a sharded `jit` (4 CPU devices from tests/conftest.py), auto and Explicit
mesh axes: a batched call runs once per device on that device's rows, its result keeps the
input's sharding and is right on every shard; an unbatched call sees the whole array once and
its result is right on every shard. The reference is the same computation in jax.numpy."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxbridge

pytestmark = pytest.mark.skipif(len(jax.devices()) < 4, reason="needs 4 devices")

MODES = [AxisType.Auto, AxisType.Explicit]


@pytest.fixture(params=MODES, ids=["auto", "explicit"])
def mode(request):
    return request.param


def mesh1(mode):
    return jax.make_mesh((4,), ("d",), axis_types=(mode,))


def mesh2(mode):
    return jax.make_mesh((2, 2), ("a", "b"), axis_types=(mode, mode))


class Seen:
    """What the host function received, call by call (calls run on XLA's device threads)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls: list[np.ndarray] = []

    def add(self, x):
        with self.lock:
            self.calls.append(np.array(x))

    def shapes(self):
        return sorted(c.shape for c in self.calls)

    def rows(self):
        return sorted(tuple(r) for c in self.calls for r in c.reshape(-1, c.shape[-1]))


def rows_of(x):
    return sorted(tuple(r) for r in np.asarray(x).reshape(-1, np.shape(x)[-1]))


def assert_right_everywhere(y, ref):
    """Every shard holds its own values, and the next jitted function takes the result."""
    ref = np.asarray(ref)
    assert y.shape == ref.shape
    for shard in y.addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), ref[shard.index])
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda a: a * 2)(y)), ref * 2)


def sin2(seen):
    def f(x):
        seen.add(x)
        return 2 * np.sin(x)

    return f


X = np.arange(48, dtype=np.float32).reshape(16, 3) / 7


@pytest.mark.parametrize(
    "vmap", ["vectorized", "sequential", jaxbridge.Threads(2)], ids=["vec", "seq", "threads"]
)
def test_batched_call_runs_once_per_device_on_its_rows(mode, vmap, capfd):
    seen = Seen()
    h = jaxbridge.host(sin2(seen), result=lambda x: x, vmap=vmap)
    sharding = NamedSharding(mesh1(mode), P("d"))
    x = jax.device_put(X, sharding)
    y = jax.jit(jax.vmap(h))(x)
    assert_right_everywhere(y, 2 * np.sin(X))
    assert y.sharding.is_equivalent_to(sharding, 2)  # no gather: the input's sharding
    assert seen.rows() == rows_of(X)  # every row once
    if vmap == "vectorized":  # one call per device, on exactly that device's rows
        assert sorted(map(rows_of, seen.calls)) == sorted(
            rows_of(X[i : i + 4]) for i in (0, 4, 8, 12)
        )
    assert "Involuntary full rematerialization" not in capfd.readouterr().err


def test_explicit_result_type_is_sharded_along_the_batch():
    seen = Seen()
    h = jaxbridge.host(sin2(seen), result=lambda x: x, vmap="vectorized")
    x = jax.device_put(X, NamedSharding(mesh1(AxisType.Explicit), P("d")))
    types = []

    def f(x):
        y = jax.vmap(h)(x)
        types.append(jax.typeof(y).sharding.spec)
        return y + x  # an explicitly sharded op on the result

    np.testing.assert_array_equal(np.asarray(jax.jit(f)(x)), 2 * np.sin(X) + X)
    assert types == [P("d", None)]


@pytest.mark.parametrize(
    "where",
    [(1, P()), (2, P(None, "b")), (2, P("a"))],
    ids=["replicated", "core-axis", "half-batch"],
)
def test_any_input_sharding_gives_right_rows(mode, where):
    """Whatever the input's actual sharding, each device's call gets a block of rows."""
    ndim, spec = where
    mesh = mesh1(mode) if ndim == 1 else mesh2(mode)
    x4 = np.arange(64, dtype=np.float32).reshape(16, 4) / 5
    seen = Seen()
    h = jaxbridge.host(sin2(seen), result=lambda x: x, vmap="vectorized")
    y = jax.jit(jax.vmap(h))(jax.device_put(x4, NamedSharding(mesh, spec)))
    assert_right_everywhere(y, 2 * np.sin(x4))
    assert seen.shapes() == [(4, 4)] * 4
    assert seen.rows() == rows_of(x4)


@pytest.mark.parametrize("size,calls", [(10, [1, 3, 3, 3]), (3, [1, 1, 1])])
def test_uneven_batch(mode, size, calls, capfd):
    """A batch that does not divide over the devices: blocks of ceil(B/4) rows, the host sees
    only real rows (no padding reaches it), and the result is right and usable."""
    x = np.arange(size * 4, dtype=np.float32).reshape(size, 4)
    seen = Seen()
    h = jaxbridge.host(sin2(seen), result=lambda x: x, vmap="vectorized")
    for sharding in [NamedSharding(mesh1(mode), P()), NamedSharding(mesh2(mode), P(None, "b"))]:
        seen.calls.clear()
        y = jax.jit(jax.vmap(h))(jax.device_put(x, sharding))
        assert_right_everywhere(y, 2 * np.sin(x))
        assert sorted(c.shape[0] for c in seen.calls) == calls
        assert seen.rows() == rows_of(x)
    assert "Involuntary full rematerialization" not in capfd.readouterr().err


def test_half_sharded_uneven_batch(mode):
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    seen = Seen()
    h = jaxbridge.host(sin2(seen), result=lambda x: x, vmap="vectorized")
    sharding = NamedSharding(mesh2(mode), P("a"))
    y = jax.jit(jax.vmap(h))(jax.device_put(x, sharding))
    assert_right_everywhere(y, 2 * np.sin(x))
    assert seen.rows() == rows_of(x)


BITS = [
    np.array([np.nan, -0.0, np.inf, -1.5, 0.0, 3.0, -np.inf, 2.0], np.float32),
    np.array([3, -8, 7, 0, -1, 2, 5, -3], ml_dtypes.int4),
    np.array([1 - 2j, -0.0, 3j, 4, 5, 6, 7, 8], np.complex64),
    np.array([True, False, True, True, False, False, True, False]),
    np.array([-0.0, 1, 2, 3, 4, 5, 6, 7], ml_dtypes.bfloat16),
]


@pytest.mark.parametrize("value", BITS, ids=lambda v: str(v.dtype))
def test_unbatched_call_sees_the_whole_array_and_its_result_is_right_everywhere(mode, value):
    seen = Seen()

    def reverse(x):
        seen.add(x)
        return x[::-1].copy()

    h = jaxbridge.host(reverse, result=lambda x: x)
    x = jax.device_put(value, NamedSharding(mesh1(mode), P("d")))
    y = jax.jit(h)(x)
    want = value[::-1]
    for shard in y.addressable_shards:  # bit for bit: NaN, -0.0
        got = np.asarray(shard.data)
        assert got.tobytes() == want[shard.index].tobytes()
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda a: a)(y)), want)
    assert [c.shape for c in seen.calls] == [(8,)]  # once, whole


@pytest.mark.parametrize("rule", ["fd", "pair"])
def test_derivative_rules_are_partitioned_too(mode, rule, x64):
    seen = Seen()

    def f(x):
        seen.add(x)
        return np.sin(x) * x[..., :1]

    def f_jvp(x, t):
        seen.add(x)
        return np.cos(x) * x[..., :1] * t + np.sin(x) * t[..., :1]

    def f_vjp(x, ct):
        seen.add(x)
        g = np.cos(x) * x[..., :1] * ct
        g[..., 0] += (np.sin(x) * ct).sum(-1)
        return (g,)

    if rule == "fd":
        derivative = jaxbridge.FiniteDifferences()
        h = jaxbridge.host(f, result=lambda x: x, vmap="vectorized", derivative=derivative)
    else:
        h = jaxbridge.host(f, result=lambda x: x, vmap="vectorized", jvp=f_jvp, vjp=f_vjp)
    ref = lambda x: jnp.sin(x) * x[..., :1]  # noqa: E731
    x0 = np.linspace(0.1, 2.0, 48).reshape(16, 3)
    sharding = NamedSharding(mesh1(mode), P("d"))
    x = jax.device_put(x0, sharding)
    tol = 1e-8 if rule == "fd" else 1e-14

    grad = lambda g: jax.grad(lambda x: jax.vmap(g)(x).sum())  # noqa: E731
    g = jax.jit(grad(h))(x)
    np.testing.assert_allclose(np.asarray(g), grad(ref)(x0), rtol=tol, atol=tol)
    assert g.sharding.is_equivalent_to(sharding, 2)
    # The rule's own batched call, on each device's 4 rows (times 6 points for central
    # differences of 3 inputs).
    assert seen.shapes() == [(24 if rule == "fd" else 4, 3)] * 4

    seen.calls.clear()
    jvp = lambda g: lambda x: jax.jvp(jax.vmap(g), (x,), (jnp.ones_like(x),))[1]  # noqa: E731
    t = jax.jit(jvp(h))(x)
    for shard in t.addressable_shards:
        want = np.asarray(jvp(ref)(x0))[shard.index]
        np.testing.assert_allclose(np.asarray(shard.data), want, rtol=tol, atol=tol)
    assert len(seen.calls) == 4 and all(c.shape[0] in (4, 8) for c in seen.calls)


def test_scan_and_while_loop_keep_a_sharded_carry(mode):
    seen = Seen()
    h = jaxbridge.host(sin2(seen), result=lambda x: x, vmap="vectorized")
    sharding = NamedSharding(mesh1(mode), P("d"))
    x = jax.device_put(X, sharding)
    ref = X
    for _ in range(3):
        ref = 2 * np.sin(ref)

    def step(c, _):
        return jax.vmap(h)(c), None

    scanned = jax.jit(lambda c: jax.lax.scan(step, c, length=3)[0])(x)
    np.testing.assert_allclose(np.asarray(scanned), ref, rtol=1e-6)
    assert scanned.sharding.is_equivalent_to(sharding, 2)
    assert seen.shapes() == [(4, 3)] * 12

    seen.calls.clear()
    loop = jax.jit(
        lambda c: jax.lax.while_loop(
            lambda s: s[0] < 3, lambda s: (s[0] + 1, jax.vmap(h)(s[1])), (0, c)
        )[1]
    )(x)
    np.testing.assert_allclose(np.asarray(loop), ref, rtol=1e-6)
    assert loop.sharding.is_equivalent_to(sharding, 2)
    assert seen.shapes() == [(4, 3)] * 12


def test_in_axes_and_nested_vmap(mode):
    seen = Seen()

    def scale(x, b):
        seen.add(x)
        return x * b.sum(-1, keepdims=True)

    h = jaxbridge.host(scale, result=lambda x, b: x, vmap="vectorized")
    x = jax.device_put(X, NamedSharding(mesh1(mode), P("d")))
    b = jnp.arange(3.0, dtype=jnp.float32)
    assert_right_everywhere(jax.jit(jax.vmap(h, in_axes=(0, None)))(x, b), X * 3.0)
    assert seen.shapes() == [(4, 3)] * 4

    seen.calls.clear()
    x3 = X.reshape(4, 4, 3)
    y = jax.jit(jax.vmap(jax.vmap(h, in_axes=(0, None)), in_axes=(0, None)))(
        jax.device_put(x3, NamedSharding(mesh1(mode), P("d"))), b
    )
    assert_right_everywhere(y, x3 * 3.0)
    assert seen.shapes() == [(4, 3)] * 4  # each device: its (1, 4) batch, flattened


def test_io_calls_run_per_device():
    seen = Seen()
    log = jaxbridge.host(seen.add, io=True, vmap="vectorized")
    x = jax.device_put(X, NamedSharding(mesh1(AxisType.Auto), P("d")))
    jax.jit(jax.vmap(log))(x)  # no result: never removed, one call per device
    jax.effects_barrier()
    assert seen.shapes() == [(4, 3)] * 4
    assert seen.rows() == rows_of(X)


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_an_exception_on_one_device_raises_everywhere(batched):
    """The devices agree before any fails: a failing call on one device followed by a
    collective must raise the host's exception, not leave the others waiting (which aborts
    the process)."""

    def f(x):
        if (x > 40).any():
            raise ValueError("row out of range")
        return x

    h = jaxbridge.host(f, result=lambda x: x, vmap="vectorized")
    x = jax.device_put(
        np.arange(48.0, dtype=np.float32).reshape(16, 3),
        NamedSharding(mesh1(AxisType.Auto), P("d")),
    )
    g = jax.vmap(h) if batched else h
    with pytest.raises(Exception, match="row out of range"):
        jax.block_until_ready(jax.jit(lambda x: g(x).sum())(x))
    # and the same call on good rows still works
    good = jax.device_put(np.ones((16, 3), np.float32), NamedSharding(mesh1(AxisType.Auto), P("d")))
    assert float(jax.jit(lambda x: g(x).sum())(good)) == 48.0


def test_pure_callback_lowering_is_split_and_guarded_too():
    """`lowering="pure"` (what GPUs use): an exception raises, and the same split."""

    def f(x):
        if (x > 6).any():  # the last device's rows
            raise ValueError("too large")
        return x

    bad = jaxbridge.host(f, result=lambda x: x, vmap="vectorized", lowering="pure")
    x = jax.device_put(X, NamedSharding(mesh1(AxisType.Auto), P("d")))
    with pytest.raises(Exception, match="too large"):
        jax.block_until_ready(jax.jit(lambda x: jax.vmap(bad)(x).sum())(x))

    # A good run after it (which also replaces the failed run's runtime token, that JAX would
    # otherwise report again at exit).
    seen = Seen()
    h = jaxbridge.host(sin2(seen), result=lambda x: x, vmap="vectorized", lowering="pure")
    assert_right_everywhere(jax.jit(jax.vmap(h))(x), 2 * np.sin(X))
    assert seen.shapes() == [(4, 3)] * 4
