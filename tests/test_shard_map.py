"""Host calls over several devices (tests/conftest.py gives 4 CPU devices): `shard_map` makes
one host call per shard; under a plain `jit` with sharded inputs an unbatched call sees the
whole array once, and a batched one (under `vmap`) runs once per device on its rows
(tests/test_sharding.py covers those per-device calls)."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxbridge

pytestmark = pytest.mark.skipif(len(jax.devices()) < 4, reason="needs 4 devices")


@pytest.fixture
def mesh():
    return jax.make_mesh((4,), ("x",))


def sharded(mesh, x):
    return jax.device_put(x, NamedSharding(mesh, P("x")))


def test_shard_map_makes_one_concurrent_host_call_per_shard(mesh, lowering):
    seen = []
    barrier = threading.Barrier(4, timeout=20)

    @jaxbridge.host(result=lambda x: x)
    def double(x):
        seen.append((x.shape, threading.get_ident()))
        barrier.wait()  # passes only if the four shards' calls run at the same time
        return x * 2

    f = jax.jit(jax.shard_map(double, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    x = jnp.arange(16.0)
    out = f(sharded(mesh, x))
    np.testing.assert_array_equal(out, 2 * x)
    assert [shape for shape, _ in seen] == [(4,)] * 4  # each call sees its own shard
    assert len({thread for _, thread in seen}) == 4


def test_shard_map_of_vmap_shares_one_process_pool(mesh):
    """Four shards' batched calls arrive at once and share the two worker processes."""

    def poly(x):
        return x**3 - x

    f = jaxbridge.host(poly, vmap=jaxbridge.Processes(2, chunk_size=2))
    g = jax.jit(jax.shard_map(jax.vmap(f), mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    x = jnp.linspace(-2.0, 2.0, 32).reshape(16, 2)
    np.testing.assert_allclose(g(sharded(mesh, x)), x**3 - x, rtol=1e-6)


def test_plain_jit_with_sharded_inputs(mesh, lowering):
    """Without shard_map an unbatched host call sees the whole array, exactly once.

    Over several devices the call lowers as a `shard_map` over the computation's devices
    (`jaxbridge._sharding`), under either lowering: an unbatched call runs on device 0 with the
    whole array and its result is broadcast to every device, bit for bit. A batched call would
    run once per device on that device's rows; `shard_map` gives one call per shard here.
    """
    seen = []

    @jaxbridge.host(result=lambda x: x)
    def double(x):
        seen.append(x.shape)
        return x * 2

    x = jnp.arange(16.0)
    out = jax.jit(double)(sharded(mesh, x)).block_until_ready()
    np.testing.assert_array_equal(out, 2 * x)
    assert seen == [(16,)]
