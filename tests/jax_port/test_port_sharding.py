"""Port of JAX's callback tests: pmap, shard_map and jit over several CPU devices.

`tests/conftest.py` gives 4 CPU devices (`jax_num_cpu_devices`). JAX's `sharding=` argument
(which device runs the callback) has no counterpart in jaxbridge; those cases are skipped.
"""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxbridge

F32 = jnp.float32

pytestmark = pytest.mark.skipif(len(jax.devices()) < 2, reason="needs several CPU devices")

NO_SHARDING_ARG = (
    "jaxbridge.host has no `sharding=` (JAX's choice of the device that runs the callback): "
    "under plain jit jaxbridge always pins the call to one device, under shard_map it runs "
    "once per shard"
)


def _like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


@pytest.fixture
def mesh():
    return jax.sharding.Mesh(np.array(jax.devices()), ("x",))


def test_inside_pmap_of_scalars(mode):
    """JAX skips its ordered flavour here ("N/A"); jaxbridge runs all three modes."""
    n = jax.local_device_count()
    f = jax.pmap(mode.host(lambda x: (x + 1.0).astype(x.dtype), result=_like))
    out = f(jnp.arange(n, dtype=F32))
    jax.effects_barrier()
    np.testing.assert_array_equal(out, np.arange(n, dtype=np.float32) + 1.0)


def test_inside_pmap(mode):
    n = jax.local_device_count()
    f = jax.pmap(mode.host(lambda x: x + 1.0, result=_like))
    out = f(jnp.arange(2 * n, dtype=F32).reshape(-1, 2))
    jax.effects_barrier()
    np.testing.assert_array_equal(out, np.arange(2 * n).reshape(-1, 2) + 1.0)


def test_can_pmap_numpy_function(mode):
    n = jax.local_device_count()
    out = jax.pmap(mode.host(np.sin, result=_like))(jnp.arange(float(n)))
    np.testing.assert_allclose(out, np.sin(np.arange(n)), rtol=1e-6)


def test_executable_keeps_the_host_function_alive(mode):
    """JAX's "immediate executable destruction": the pmapped function is an ephemeral bound
    method whose fori_loop body calls the host; the execution must keep the call alive."""
    add = mode.host(lambda y: y + np.ones(4, np.float32), result=_like)

    class AClass:
        def f(self, ys):
            return lax.fori_loop(0, 10, lambda i, x: add(x), jnp.ones(4, F32))

    n = jax.local_device_count()
    out = jax.pmap(AClass().f)(np.ones((n,), np.float32))
    jax.effects_barrier()
    np.testing.assert_array_equal(out, np.full((n, 4), 11, np.float32))


def test_jit_with_sharded_input_calls_the_host_once_on_the_whole_array(mode, mesh):
    """JAX's "shard maximally": under jit with sharded inputs the host sees the whole array."""
    sharding = NamedSharding(mesh, P("x"))
    seen = []

    def func(x):
        seen.append(x.shape)
        return x + np.arange(x.shape[0], dtype=x.dtype)

    f = jax.jit(mode.host(func, result=_like), in_shardings=sharding, out_shardings=sharding)
    n = jax.local_device_count()
    out = jax.block_until_ready(f(jnp.arange(float(n))))
    jax.effects_barrier()
    np.testing.assert_array_equal(out, np.arange(n) * 2)
    assert seen == [(n,)]


@pytest.mark.skip(reason=NO_SHARDING_ARG)
def test_can_shard_maximally_with_sharding_argument():
    """JAX's `pure_callback(..., sharding=make_single_device_sharding(device))`."""


def test_shard_map_calls_the_host_once_per_shard(mode, mesh):
    """JAX's "shard manually": under shard_map each shard is its own host call."""
    spec = P("x")
    sharding = NamedSharding(mesh, spec)

    def func(x):
        return x + np.arange(x.shape[0], dtype=x.dtype)

    f = jax.shard_map(mode.host(func, result=_like), mesh=mesh, in_specs=(spec,), out_specs=spec)
    n = jax.local_device_count()
    inp = jnp.arange(float(n * 2))
    out = jax.block_until_ready(jax.jit(f, in_shardings=sharding, out_shardings=sharding)(inp))
    jax.effects_barrier()
    np.testing.assert_array_equal(out, inp + np.tile(np.arange(2, dtype=np.float32), n))


@pytest.mark.parametrize("options", [{"ordered": True}, {"io": True}], ids=["ordered", "unordered"])
def test_io_calls_in_jit_over_a_mesh(options, mesh):
    """JAX's io_callback in pjit, without `sharding=` (see the skip below)."""
    collected: list[int] = []
    cb = jaxbridge.host(lambda x: collected.append(int(x.sum())), result=(), **options)

    def f(x):
        cb(x)
        cb(x + 1)
        return x

    f = jax.jit(
        f,
        in_shardings=NamedSharding(mesh, P("x")),
        out_shardings=NamedSharding(mesh, P()),
    )
    x = jnp.arange(len(jax.devices()))
    f(x)
    f(x + 5)
    jax.effects_barrier()
    expected = [int(x.sum()), int((x + 1).sum()), int((x + 5).sum()), int((x + 6).sum())]
    if options.get("ordered"):
        assert collected == expected
    else:
        assert sorted(collected) == sorted(expected)


@pytest.mark.skip(reason=NO_SHARDING_ARG)
def test_io_calls_in_jit_with_sharding_argument():
    """JAX's `io_callback(..., sharding=make_single_device_sharding(devices[-1]))`."""


def test_ordered_io_call_with_sharded_input_and_replicated_output(mesh):
    """JAX's "ordered io callback maximal token"."""
    f = jax.jit(
        jaxbridge.host(lambda x: x + 1.0, ordered=True, result=_like),
        in_shardings=NamedSharding(mesh, P("x")),
        out_shardings=NamedSharding(mesh, P()),
    )
    x = jnp.arange(len(jax.devices()), dtype=F32)
    np.testing.assert_array_equal(f(x), x + 1.0)


def test_ordered_io_calls_across_device_assignments():
    """JAX's sequence of jitted ordered io calls, each pair on a different pair of devices."""
    collected: list[int] = []
    cb = jaxbridge.host(lambda i, x: collected.append(int(x.sum())), ordered=True, result=())

    def f_base(i, x):
        cb(i, x)
        cb(i, x + 1)

    devices = jax.devices()
    expected = []
    for i in range(4):
        pair = [devices[i % len(devices)], devices[(i + 1) % len(devices)]]
        mesh = jax.sharding.Mesh(np.array(pair), ("dev",))
        f = jax.jit(
            f_base,
            in_shardings=(NamedSharding(mesh, P()), NamedSharding(mesh, P("dev"))),
            out_shardings=NamedSharding(mesh, P()),
        )
        x = jax.device_put(np.arange(2, dtype=np.int32) + 10 * i, NamedSharding(mesh, P("dev")))
        f(i, x)
        f(i, x + 5)
        expected += [int(x.sum()), int((x + 1).sum()), int((x + 5).sum()), int((x + 6).sum())]
    jax.effects_barrier()
    assert collected == expected


@pytest.mark.parametrize("single_device", [False, True], ids=["multi_device", "single_device"])
def test_ordered_io_calls_in_shard_map_keep_order_within_each_shard(single_device):
    """JAX's "shard io callback manually": no order across shards, program order within one."""
    devices = jax.devices()[:1] if single_device else jax.devices()
    mesh = jax.sharding.Mesh(np.array(devices), ("x",))
    spec = P("x")
    collected = collections.defaultdict(list)
    cb = jaxbridge.host(
        lambda shard_id, x: collected[shard_id.item()].append(x), ordered=True, result=()
    )

    def f(shard_ids, x):
        cb(shard_ids, x)
        cb(shard_ids, x + 1)

    f = jax.shard_map(f, mesh=mesh, in_specs=spec, out_specs=None)
    shard_ids = jnp.arange(mesh.devices.size)
    inp = jnp.arange(2 * jax.local_device_count())
    sharding = NamedSharding(mesh, spec)
    jax.jit(f, in_shardings=sharding, out_shardings=None)(shard_ids, inp)
    jax.effects_barrier()
    assert len(collected) == mesh.devices.size
    for shard in collected.values():
        assert len(shard) == 2
        np.testing.assert_array_equal(shard[0] + 1, shard[1])
