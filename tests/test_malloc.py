"""glibc's malloc thresholds (`jaxbridge._malloc`): set by the first `jaxbridge.host`, seen in
behaviour (a large free keeps its memory, a host call stops page-faulting), opt-out, the
user's own settings, other C libraries.

Malloc settings are process-wide and set once, so each case runs in a fresh interpreter.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from jaxbridge import _malloc

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or _malloc._glibc() is None,
    reason="glibc's malloc on Linux (RSS from /proc/self/statm)",
)

# Runs in a fresh interpreter: how much of a freed 48 MiB block goes back to the system, and
# the minor page faults of a batched host call of issue 24's kernel after it compiled.
PROBE = textwrap.dedent(
    """
    import json, os, resource, sys
    import numpy as np

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def returned(nbytes=48 << 20):
        a = np.ones(nbytes // 8)  # above glibc's largest dynamic mmap threshold (32 MiB)
        before = rss()
        del a
        return (before - rss()) / nbytes

    import jax, jax.numpy as jnp
    import jaxbridge
    from jaxbridge import _malloc

    out = {"status_at_import": _malloc.status(), "returned_at_import": returned()}

    def kernel(b):
        y = np.repeat(b, 1000, axis=-1)
        return np.sort(np.sin(y) * np.cos(y), axis=-1)[..., ::1000].astype(np.float32)

    f = jax.jit(jax.vmap(jaxbridge.host(kernel, result=lambda b: b)))
    x = jnp.asarray(np.random.default_rng(0).standard_normal((16, 300)), jnp.float32)
    f(x).block_until_ready()
    f(x).block_until_ready()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        f(x).block_until_ready()
    out["faults_per_call"] = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / 3
    out["status"] = _malloc.status()
    out["returned"] = returned()
    print(json.dumps(out))
    """
)


def _probe(**env):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    environ.pop(_malloc.ENV, None)
    environ.update(env)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=environ, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@glibc
def test_the_first_host_raises_the_thresholds():
    out = _probe()
    # `import jaxbridge` alone leaves malloc as it was: a 48 MiB block is mmapped and unmapped.
    assert out["status_at_import"] is None
    assert out["returned_at_import"] > 0.9
    # After `jaxbridge.host`: blocks below 64 MiB come from the heap and stay when freed ...
    assert out["status"] == _malloc.APPLIED
    assert out["returned"] < 0.1
    # ... so the kernel's few-MiB temporaries on the calling thread stop faulting in at every
    # call (about 550 faults a row, 16 rows, without the setting: the opt-out case below).
    assert out["faults_per_call"] < 200


@glibc
def test_opting_out_keeps_glibcs_own_thresholds():
    out = _probe(JAXBRIDGE_MALLOPT="0")
    assert out["status"] == _malloc.OPTED_OUT
    assert out["returned"] > 0.9
    assert out["faults_per_call"] > 4000  # 8,864 measured


@glibc
def test_the_users_own_malloc_variables_win():
    # The user's trim threshold alone: glibc keeps its 128 KiB mmap threshold, so the freed
    # block goes back to the system, as the user's setting says it should.
    out = _probe(MALLOC_TRIM_THRESHOLD_=str(256 << 20))
    assert out["status"] == _malloc.USER_SETTINGS
    assert out["returned"] > 0.9


def test_the_environment_decides_first():
    assert _malloc._user_decided({}) is None
    assert _malloc._user_decided({"JAXBRIDGE_MALLOPT": "1"}) is None
    for value in ("0", "off", "False", " no "):
        assert _malloc._user_decided({"JAXBRIDGE_MALLOPT": value}) == _malloc.OPTED_OUT
    assert _malloc._user_decided({"MALLOC_ARENA_MAX": "4"}) == _malloc.USER_SETTINGS
    tunables = "glibc.malloc.arena_max=2:glibc.rtld.nns=2"
    assert _malloc._user_decided({"GLIBC_TUNABLES": tunables}) == _malloc.USER_SETTINGS
    assert _malloc._user_decided({"GLIBC_TUNABLES": "glibc.rtld.nns=2"}) is None


@pytest.mark.parametrize("confstr", ["raises", "musl", "none"])
def test_another_c_library_is_left_alone(monkeypatch, confstr):
    def fake(name):
        if confstr == "raises":  # musl and macOS: no CS_GNU_LIBC_VERSION
            raise ValueError("unrecognized configuration name")
        return None if confstr == "none" else "musl 1.2"

    monkeypatch.setattr(os, "confstr", fake)
    monkeypatch.delenv(_malloc.ENV, raising=False)
    for name in _malloc.GLIBC_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert _malloc._glibc() is None
    assert _malloc._apply() == _malloc.NOT_GLIBC


@glibc
def test_processes_workers_raise_them_too():
    import jax
    import jax.numpy as jnp

    import jaxbridge

    def status(x):
        from jaxbridge import _malloc as worker_malloc

        return np.asarray(worker_malloc.status() == worker_malloc.APPLIED, np.int32) + 0 * x

    f = jaxbridge.host(status, vmap=jaxbridge.Processes(1), result=lambda x: x)
    assert jax.vmap(f)(jnp.zeros(2, jnp.int32)).tolist() == [1, 1]
