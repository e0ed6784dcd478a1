"""Threads, Processes and Ray under vmap: results, order, per-worker state, faults, shutdown.

Real pools and a real local Ray cluster (num_cpus=2, started once for the module). Pools are
shared by executors of the same size, so most tests reuse two worker processes.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import psutil
import pytest

import jaxbridge
from jaxbridge import _executors

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ray_cluster():
    """A real local Ray instance for this module, shut down at its end.

    `address="local"`: always a private instance, even when `ray start` has registered a
    cluster on this machine (Ray's ray_current_cluster file, live or stale), which plain
    `ray.init(num_cpus=...)` would try to join and fail.
    """
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


EXECUTORS = {
    "threads": lambda: jaxbridge.Threads(2),
    "threads-vec": lambda: jaxbridge.Threads(2, chunk_size=3, vectorized=True),
    "processes": lambda: jaxbridge.Processes(2),
    "processes-vec": lambda: jaxbridge.Processes(2, chunk_size=3, vectorized=True),
    "ray": lambda: jaxbridge.Ray(num_workers=2),
    "ray-vec": lambda: jaxbridge.Ray(num_workers=2, chunk_size=5, vectorized=True),
}


@pytest.fixture(params=list(EXECUTORS))
def executor(request):
    if request.param.startswith("ray"):
        request.getfixturevalue("ray_cluster")
    return EXECUTORS[request.param]()


# Module-level host functions: workers import this module to find them (by reference).


def affine(a, b, *, scale):
    """(3,), (2,), () -> a pytree; vectorized executors stack every argument: (chunk, ...)."""
    assert a.shape[-1:] == (3,) and b.shape[-1:] == (2,), (a.shape, b.shape)
    assert not a.flags.writeable and not b.flags.writeable
    y = np.tanh(a) * b.sum(-1, keepdims=True) * np.asarray(scale)[..., None]
    return {"y": y, "n": np.asarray(a.ndim, np.int32) + np.zeros(a.shape[:-1], np.int32)}


def test_matches_sequential_for_every_in_axes(executor):
    vectorized = executor.vectorized
    f = jaxbridge.host(affine, vmap=executor)
    ref = jaxbridge.host(affine)
    a = jnp.linspace(-1.0, 1.0, 7 * 3, dtype=jnp.float32).reshape(7, 3)
    b = jnp.arange(7 * 2, dtype=jnp.float32).reshape(7, 2)
    cases = [
        ((0, 0), (a, b)),
        ((0, None), (a, b[0])),
        ((None, 0), (a[0], b)),
    ]
    for in_axes, args in cases:
        got = jax.jit(jax.vmap(lambda x, y, f=f: f(x, y, scale=2.0), in_axes))(*args)
        want = jax.vmap(lambda x, y: ref(x, y, scale=2.0), in_axes)(*args)
        np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
        # What the host function saw: one element, or a stacked chunk.
        assert set(np.asarray(got["n"]).tolist()) == {2 if vectorized else 1}
    # Nested vmaps flatten into one batch of 5 * 7 elements, in order.
    nested = jax.vmap(jax.vmap(lambda x, y: f(x, y, scale=1.0), (0, None)), (None, 0))
    got = jax.jit(nested)(a, jnp.ones((5, 2), jnp.float32) * jnp.arange(5.0)[:, None])
    want = jax.vmap(jax.vmap(lambda x, y: ref(x, y, scale=1.0), (0, None)), (None, 0))(
        a, jnp.ones((5, 2), jnp.float32) * jnp.arange(5.0)[:, None]
    )
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
    assert got["y"].shape == (5, 7, 3)


def index_of(x):
    return np.asarray(x, np.int32) * 2


@pytest.mark.parametrize("chunk_size", [1, 5, 64])
def test_order_is_kept_across_chunks(chunk_size):
    f = jaxbridge.host(index_of, vmap=jaxbridge.Processes(2, chunk_size=chunk_size))
    g = jaxbridge.host(index_of, vmap=jaxbridge.Threads(2, chunk_size=chunk_size))
    x = jnp.arange(37, dtype=jnp.int32)
    assert jax.vmap(f)(x).tolist() == list(range(0, 74, 2))
    assert jax.vmap(g)(x).tolist() == list(range(0, 74, 2))


def test_threads_run_chunks_concurrently():
    barrier = threading.Barrier(2, timeout=20)

    @jaxbridge.host(vmap=jaxbridge.Threads(2, chunk_size=1), result=lambda x: x)
    def meet(x):
        barrier.wait()  # passes only if both elements run at the same time
        return x

    assert jax.vmap(meet)(jnp.arange(2.0)).tolist() == [0.0, 1.0]


def test_threads_calling_thread_runs_chunks_beside_the_pool():
    seen = []
    barrier = threading.Barrier(2, timeout=20)

    @jaxbridge.host(vmap=jaxbridge.Threads(2, chunk_size=1), result=lambda x: x)
    def where(x):
        seen.append(threading.get_ident())
        if len(seen) <= 2:
            barrier.wait()  # the first two chunks run at once: on two threads
        return x

    out = jax.jit(jax.vmap(where))(jnp.arange(6.0))
    assert out.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    # jit runs the host call in this thread: it took chunks, and one pool thread the others.
    assert threading.get_ident() in seen and len(set(seen)) == 2


def test_threads_batch_finishes_while_the_pool_is_busy_elsewhere():
    """Regression: a batch waited for pool threads busy with another caller's batch."""
    release, started = threading.Event(), threading.Barrier(3, timeout=20)

    @jaxbridge.host(vmap=jaxbridge.Threads(2, chunk_size=1), result=lambda x: x)
    def blocked(x):
        started.wait()
        release.wait(60)
        return x

    other = threading.Thread(target=lambda: jax.vmap(blocked)(jnp.arange(2.0)))
    other.start()  # its caller and the one pool thread of Threads(2) now block
    try:
        started.wait()
        g = jaxbridge.host(lambda x: x + 1, vmap=jaxbridge.Threads(2, chunk_size=1))
        done = []
        runner = threading.Thread(target=lambda: done.append(jax.vmap(g)(jnp.arange(4.0))))
        runner.start()
        runner.join(30)
        assert done and done[0].tolist() == [1.0, 2.0, 3.0, 4.0], "waited for the busy pool"
    finally:
        release.set()
        other.join(30)


BLAS_HOLD = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np, threadpoolctl
    import jaxbridge

    def blas_threads():
        info = threadpoolctl.threadpool_info()
        return [i["num_threads"] for i in info if i["user_api"] == "blas"]

    if not blas_threads():
        raise SystemExit("skip")
    inside = []

    # A declared result: no probing call, which runs unbatched, outside any batch.
    @jaxbridge.host(
        vmap=jaxbridge.Threads(2, chunk_size=1), result=jax.ShapeDtypeStruct((3,), jnp.float32)
    )
    def solve(a):
        inside.append(blas_threads())
        return np.linalg.solve(a + 3 * np.eye(3), np.ones(3))

    a = jnp.zeros((6, 3, 3))
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        out = np.asarray(jax.jit(jax.vmap(solve))(a))
        after = blas_threads()
    np.testing.assert_allclose(out, np.full((6, 3), 1 / 3), rtol=1e-6)
    assert before == after and set(before) == {2}, (before, after)  # the user's, outside
    assert all(set(n) == {1} for n in inside), inside  # one thread a call inside the batch
    print("ok")
    """
)


def test_threads_hold_blas_at_one_thread_during_a_batch_only():
    # In a fresh process: the hold is process-wide by design (OpenBLAS has one setting for
    # every thread), so a batch still running on another thread of this worker (an earlier
    # test's asynchronous dispatch) would set BLAS to one thread under this test's feet.
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", BLAS_HOLD], capture_output=True, text=True, env=env, timeout=120
    )
    if done.stdout.strip() == "" and "skip" in done.stderr:
        pytest.skip("no BLAS library that threadpoolctl controls")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def blas_env(x):
    return np.asarray(int(os.environ["OPENBLAS_NUM_THREADS"]), np.int32) + 0 * x


def test_processes_workers_get_their_share_of_blas_threads(monkeypatch):
    from jaxbridge import _processes

    for var in _processes._INNER_THREADS:
        monkeypatch.delenv(var, raising=False)
    # Processes(3): a pool no other test uses, so its workers start under this environment.
    f = jaxbridge.host(
        blas_env,
        vmap=jaxbridge.Processes(3, chunk_size=1),
        result=jax.ShapeDtypeStruct((), jnp.int32),  # no probe here, where the variable is unset
    )
    share = max(1, (os.cpu_count() or 1) // 3)
    assert jax.vmap(f)(jnp.zeros(3, jnp.int32)).tolist() == [share] * 3
    # A setting of the user's own passes to the workers unchanged.
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    env = _processes._worker_env(3)
    assert env["OMP_NUM_THREADS"] == "7" and env["OPENBLAS_NUM_THREADS"] == str(share)


# --- per-worker state ----------------------------------------------------------------------

made_states: list[dict] = []


def make_state():
    state = {"id": uuid.uuid4().hex, "pid": os.getpid(), "thread": None, "calls": 0}
    made_states.append(state)
    return state


def use_state(x, *, state):
    # Each state belongs to one worker: the thread (or process) that made it.
    thread = threading.get_ident()
    if state["thread"] is None:
        state["thread"] = thread
    assert state["thread"] == thread and state["pid"] == os.getpid()
    state["calls"] += 1
    del x  # only batches the call
    return np.array([state["pid"], int(state["id"][:6], 16), state["calls"]], np.int64)


@pytest.mark.parametrize("kind", ["threads", "processes", "ray"])
def test_init_state_is_per_worker(kind, request, x64):
    if kind == "ray":
        request.getfixturevalue("ray_cluster")
    executor = {
        "threads": lambda: jaxbridge.Threads(2, chunk_size=2),
        "processes": lambda: jaxbridge.Processes(2, chunk_size=2),
        "ray": lambda: jaxbridge.Ray(num_workers=2, chunk_size=2),
    }[kind]()
    # A declared result: no probing call in this thread, which runs chunks too under Threads.
    result = lambda x: jax.ShapeDtypeStruct((3,), jnp.int64)
    f = jaxbridge.host(use_state, vmap=executor, init=make_state, result=result)
    first = np.asarray(jax.vmap(f)(jnp.zeros((12, 3), jnp.int64)))
    # A second signature of the same function shares the workers' states.
    second = np.asarray(jax.vmap(f)(jnp.zeros((12, 5), jnp.int64)))
    rows = np.concatenate([first, second])
    pids, states = set(rows[:, 0].tolist()), set(rows[:, 1].tolist())
    if kind == "threads":
        assert pids == {os.getpid()}
    else:
        assert os.getpid() not in pids
    # At most one state per worker, reused across calls: every call on a state is counted.
    assert 1 <= len(states) <= 2 and len(states) >= len(pids)
    calls = {s: rows[rows[:, 1] == s, 2].max() for s in states}
    assert sum(calls.values()) == 24


# --- exceptions ----------------------------------------------------------------------------


class CustomError(Exception):
    pass


def explode(x):
    first = x[..., 0]
    if np.any(first >= 5):
        raise CustomError(f"boom at {float(first[first >= 5].min())}")
    return x


class Unpicklable(Exception):
    def __init__(self, msg):
        super().__init__(msg)
        self.lock = threading.Lock()


def explode_unpicklably(x):
    if np.any(x[..., 0] >= 5):
        raise Unpicklable("cannot travel")
    return x


def test_exception_keeps_type_message_and_host_traceback(executor):
    f = jaxbridge.host(explode, vmap=executor)
    xs = jnp.arange(8.0)[:, None] * jnp.ones((8, 2))
    with pytest.raises(jaxbridge.HostError) as info:
        jax.vmap(f)(xs)
    cause = info.value.__cause__
    assert type(cause) is CustomError
    assert str(cause) == "boom at 5.0"
    text = str(info.value)
    assert "raised test_executors.CustomError: boom at 5.0" in text
    # The host traceback is the worker's: this file, the raising line.
    assert re.search(r'test_executors\.py", line \d+, in explode\n +raise CustomError', text)
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"CustomError: boom at 5\.0"):
        jax.jit(jax.vmap(f))(xs)
    # The pool is still usable.
    assert jax.vmap(f)(xs[:5]).tolist() == xs[:5].tolist()


@pytest.mark.parametrize("kind", ["processes", "ray"])
def test_unpicklable_exception_keeps_its_name(kind, request):
    executor = EXECUTORS[kind]()
    if kind == "ray":
        request.getfixturevalue("ray_cluster")
    f = jaxbridge.host(explode_unpicklably, vmap=executor)
    with pytest.raises(jaxbridge.HostError, match=r"test_executors\.Unpicklable: cannot travel"):
        jax.vmap(f)(jnp.arange(8.0)[:, None] * jnp.ones((8, 2)))


def wrong_shape(x):
    return np.zeros(4)


def test_wrong_result_names_function_and_shapes():
    f = jaxbridge.host(wrong_shape, vmap=jaxbridge.Processes(2), result=lambda x: x)
    with pytest.raises(jaxbridge.HostError, match=r"expected f32\[3\], got f64\[4\]"):
        jax.vmap(f)(jnp.ones((4, 3)))


def test_unpicklable_static_argument_names_the_fix():
    lock = threading.Lock()
    f = jaxbridge.host(lambda x, lock: x, vmap=jaxbridge.Processes(2), result=lambda x, lock: x)
    with pytest.raises(jaxbridge.HostError, match=r"cloudpickle.*jaxbridge\.Threads\(\)"):
        jax.vmap(f, (0, None))(jnp.ones((4, 3)), lock)


# --- worker death --------------------------------------------------------------------------


def die(x, how):
    if x >= 6:
        if how == "exit":
            os._exit(3)
        os.kill(os.getpid(), signal.SIGKILL)
    return x


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("how", "said"), [("exit", "exited with code 3"), ("kill", "was killed by signal SIGKILL")]
)
def test_dead_worker_fails_promptly_and_is_replaced(how, said):
    f = jaxbridge.host(die, vmap=jaxbridge.Processes(2, chunk_size=2), static_argnums=1)
    x = jnp.arange(8.0)
    with pytest.raises(jaxbridge.HostError) as info:
        jax.vmap(f, (0, None))(x, how)
    assert isinstance(info.value.__cause__, jaxbridge.WorkerDiedError)
    message = str(info.value.__cause__)
    match = re.search(
        r"worker process (\d) \(pid (\d+)\) " + said + r" while running elements 6:8 "
        r"of host function 'die'",
        message,
    )
    assert match, message
    assert not psutil.pid_exists(int(match[2])) or psutil.Process(int(match[2])).status() == (
        psutil.STATUS_ZOMBIE
    )
    assert jax.vmap(f, (0, None))(x[:6], how).tolist() == x[:6].tolist()


def die_first_time(x, marker):
    if x == 3 and not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)
    return x


def test_ray_retries_a_dead_worker_then_fails_clearly(ray_cluster, tmp_path):
    marker = str(tmp_path / "died-once")
    f = jaxbridge.host(die_first_time, vmap=jaxbridge.Ray(num_workers=2), static_argnums=1)
    assert jax.vmap(f, (0, None))(jnp.arange(4.0), marker).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert os.path.exists(marker)  # it did die once: Ray's retry ran the chunk again

    g = jaxbridge.host(die, vmap=jaxbridge.Ray(num_workers=2, max_retries=1), static_argnums=1)
    with pytest.raises(jaxbridge.HostError) as info:
        jax.vmap(g, (0, None))(jnp.arange(8.0), "exit")
    assert isinstance(info.value.__cause__, jaxbridge.WorkerDiedError)
    assert re.match(
        r"jaxbridge\.Ray: the Ray task running elements 4:8 of host function 'die' failed after "
        r"Ray's retries \(max_retries=1\): WorkerCrashedError",
        str(info.value.__cause__),
    ), str(info.value.__cause__)


# --- derivatives, construction, shutdown ---------------------------------------------------


def sin_cube(x):
    return np.sin(x) ** 3


@pytest.mark.parametrize("kind", ["threads", "processes"])
def test_derivative_rules_run_through_the_executor(kind, x64):
    executor = EXECUTORS[kind]()
    f = jaxbridge.host(sin_cube, vmap=executor, derivative=jaxbridge.FiniteDifferences())
    x = jnp.linspace(0.1, 1.0, 6)
    got = jax.vmap(jax.grad(lambda v: f(v).sum()))(x[:, None] * jnp.ones((6, 2)))
    want = 3 * jnp.sin(x) ** 2 * jnp.cos(x)
    np.testing.assert_allclose(got[:, 0], want, rtol=1e-6)


def test_arguments_are_checked_and_named():
    with pytest.raises(ValueError, match=r"^`jaxbridge\.Threads\(n=\.\.\.\)` must be a positive"):
        jaxbridge.Threads(0)
    with pytest.raises(ValueError, match=r"`jaxbridge\.Processes\(chunk_size=\.\.\.\)`"):
        jaxbridge.Processes(chunk_size=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"`jaxbridge\.Ray\(max_retries=\.\.\.\)`"):
        jaxbridge.Ray(max_retries=-1)
    assert repr(jaxbridge.Processes(3, vectorized=True)) == (
        "jaxbridge.Processes(n=3, vectorized=True)"
    )


def test_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what a machine without Ray looks like
    with pytest.raises(ImportError) as info:
        jaxbridge.Ray()
    assert str(info.value) == "`jaxbridge.Ray` needs Ray: `pip install jaxbridge[ray]`"


WORKER_PIDS = textwrap.dedent(
    """
    import os, sys, jax, jax.numpy as jnp, numpy as np, jaxbridge
    f = jaxbridge.host(lambda x: np.asarray(os.getpid(), np.int32) + 0 * x,
                       vmap=jaxbridge.Processes(2, chunk_size=1))
    pids = sorted(set(jax.vmap(f)(jnp.zeros(8, jnp.int32)).tolist()))
    print(" ".join(map(str, pids)), flush=True)
    if sys.argv[1] == "hang":
        import time; time.sleep(60)
    """
)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("end", ["exit", "hang"])
def test_no_orphan_workers(end):
    """Workers stop at interpreter exit, and also when their parent is killed outright."""
    with subprocess.Popen(
        [sys.executable, "-c", WORKER_PIDS, end], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2 and proc.pid not in pids
        if end == "hang":
            proc.send_signal(signal.SIGKILL)  # no atexit: workers see their pipe close
        proc.wait(30)
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).wait(20)
        assert not psutil.pid_exists(pid)


def test_docs_code_runs(ray_cluster):
    """Every Python block of docs/batching.md runs, in order, in one namespace."""
    text = (ROOT / "docs" / "batching.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    namespace: dict = {"__name__": "docs_batching"}
    for block in blocks:
        exec(compile(block, "docs/batching.md", "exec"), namespace)


def test_public_names():
    assert jaxbridge.Threads is _executors.Threads
    assert jaxbridge.WorkerDiedError is _executors.WorkerDiedError
