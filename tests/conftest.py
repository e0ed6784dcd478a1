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


#: The files that take a worker longest (measured, `--durations`), longest first: run first, so
#: that under `-n 2 --dist loadfile` the run does not end with one worker on a long file while
#: the other idles. Every other file keeps its place after them; tests keep their order.
FIRST = (
    "tests/test_demo.py",
    "tests/scqubits/test_scqubits_dynamics.py",
    "tests/test_docs.py",
    "tests/test_examples.py",
    "tests/test_ray_cluster.py",
    "tests/test_executors.py",
    "tests/test_properties.py",
    "tests/scqubits/test_scqubits_hilbertspace.py",
    "tests/test_bench_imports.py",
    "tests/scqubits/test_scqubits_normal_modes.py",
)


def _first(item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return FIRST.index(path) if path in FIRST else len(FIRST)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_first)  # stable: the other files and every file's tests keep their order
    if os.environ.get("JAXBRIDGE_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: set JAXBRIDGE_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
