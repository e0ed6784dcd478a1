"""Host calls in a sharded jit across two processes joined by `jax.distributed` (CPU, gloo
collectives, two CPU devices each), started by the test: each process's host function sees
exactly the rows of its own devices, every addressable shard of the result is right, an
unbatched call runs once (in the process owning device 0), and an exception in one process's
call raises in both."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

WORKER = textwrap.dedent(
    """
    import sys, threading
    import jax

    pid, port = int(sys.argv[1]), sys.argv[2]
    jax.config.update("jax_num_cpu_devices", 2)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid)

    import numpy as np
    from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
    import jaxbridge

    assert jax.process_count() == 2 and len(jax.devices()) == 4
    X = np.arange(48, dtype=np.float32).reshape(16, 3) / 7
    lock, seen = threading.Lock(), []

    def record(a):
        with lock:
            seen.append(np.array(a))

    def rows(arrays):
        return sorted(tuple(r) for a in arrays for r in np.asarray(a).reshape(-1, 3))

    def check_shards(y, want):
        for s in y.addressable_shards:
            np.testing.assert_array_equal(np.asarray(s.data), want[s.index])

    def sin2(a):
        record(a)
        return 2 * np.sin(a)

    def reverse(a):
        record(a)
        return a[::-1].copy()

    batched = jaxbridge.host(sin2, result=lambda a: a, vmap="vectorized")
    whole = jaxbridge.host(reverse, result=lambda a: a)
    for mode in (AxisType.Auto, AxisType.Explicit):
        sharding = NamedSharding(jax.make_mesh((4,), ("d",), axis_types=(mode,)), P("d"))
        x = jax.make_array_from_callback(X.shape, sharding, lambda i: X[i])
        local = rows(X[s.index] for s in x.addressable_shards)

        seen.clear()
        y = jax.jit(jax.vmap(batched))(x)
        check_shards(y, 2 * np.sin(X))
        assert y.sharding.is_equivalent_to(sharding, 2), y.sharding
        # one call per local device, on exactly this process's rows
        assert [a.shape for a in seen] == [(4, 3), (4, 3)], [a.shape for a in seen]
        assert rows(seen) == local
        check_shards(jax.jit(lambda a: a * 2)(y), 4 * np.sin(X))  # feeds the next jit

        seen.clear()
        w = jax.jit(whole)(x)
        check_shards(w, X[::-1])
        check_shards(jax.jit(lambda a: a + 1)(w), X[::-1] + 1)
        assert [a.shape for a in seen] == ([(16, 3)] if pid == 0 else []), [a.shape for a in seen]

    def bad(a):
        if (a >= 24 / 7).any():  # rows 8 to 15: process 1's
            raise ValueError("a row of process 1")
        return a

    failing = jaxbridge.host(bad, result=lambda a: a, vmap="vectorized")
    try:
        jax.block_until_ready(jax.jit(lambda x: jax.vmap(failing)(x).sum())(x))
    except Exception as e:
        text = str(e)
    else:
        raise AssertionError("no exception")
    want = "a row of process 1" if pid == 1 else "raised on a device of another process"
    assert want in text, text
    try:  # the failed computation's runtime token holds its error too
        jax.effects_barrier()
    except Exception:
        pass
    jax.distributed.shutdown()  # together: the coordinator lives in process 0
    print("WORKER OK", pid, flush=True)
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_each_call_their_own_rows(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = str(_free_port())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    env["OPENBLAS_NUM_THREADS"] = "1"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(i), port],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outputs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=180)
            outputs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for i, (p, out) in enumerate(zip(procs, outputs)):
        if p.returncode != 0 or f"WORKER OK {i}" not in out:
            other = outputs[1 - i][-3000:]
            pytest.fail(f"process {i} exited with {p.returncode}:\n{out[-3000:]}\n---\n{other}")
