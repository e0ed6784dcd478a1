"""Test configuration: strict JAX, several CPU devices, both lowerings."""

import os

import jax
import pytest

# Before any backend starts: several CPU devices for shard_map and sharded-jit tests.
jax.config.update("jax_num_cpu_devices", 4)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture
def x64():
    """Runs the test with 64-bit types on."""
    with jax.enable_x64(True):
        yield


@pytest.fixture(params=["buffer", "pure"])
def lowering(request, monkeypatch):
    """Runs the test under both lowerings, through the environment variable users set."""
    monkeypatch.setenv("JAXBRIDGE_LOWERING", request.param)
    # The variable is read when a function is traced: drop traces made under the other value.
    jax.clear_caches()
    yield request.param


def pytest_collection_modifyitems(config, items):
    if os.environ.get("JAXBRIDGE_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: set JAXBRIDGE_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
