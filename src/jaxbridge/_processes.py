"""`Processes`: runs a batch's chunks on persistent worker processes, for pure-Python host code.

Each worker is a fresh interpreter (`_worker_main`) that talks to this process over a pipe:
chunks go out and results come back as pickle protocol 5 messages whose array buffers travel
uncopied (`_send`, `_recv`). `_ProcessPool` keeps `n` worker slots and replaces a worker that
died; `Processes` shares chunks out over the pool and turns a death into `WorkerDiedError`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import multiprocessing.connection as mpc
import os
import pickle
import signal
import subprocess
import sys
import threading
import warnings
from collections import deque
from typing import Any, cast

from ._executors import (
    CLOUDPICKLE_MISSING,
    WorkerDiedError,
    _at_shutdown,
    _Executor,
    _lock,
    _mark_worker_process,
)
from ._remote import (
    _chunk_arrays,
    _dead_keys,
    _payload,
    _remote_calls,
    _remote_run,
    _unpack_exception,
)

WORKER_DIED = (
    "jaxbridge.Processes: worker process {index} (pid {pid}) {how} while running elements "
    "{lo}:{hi} of host function {name!r}; a fresh worker replaces it. A host function that "
    "exits its process (os._exit, sys.exit), crashes or is killed (out of memory) takes its "
    "worker with it: run it with vmap='sequential' to see the failure in this process."
)

# What a worker runs: `python -c` in a fresh interpreter, so it imports this module by path.
_WORKER_CODE = (
    "import json, os, sys; "
    "p = json.loads(os.environ.pop('JAXBRIDGE_WORKER_PATH')); "
    "sys.path[:] = p + [x for x in sys.path if x not in p]; "
    "from jaxbridge._processes import _worker_main; _worker_main(int(sys.argv[1]))"
)


def _send(conn: mpc.Connection, obj: Any) -> None:
    """Pickle protocol 5 with out-of-band buffers: array bytes go to the pipe uncopied."""
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    conn.send_bytes(len(buffers).to_bytes(4, "little") + head)
    for b in buffers:
        conn.send_bytes(b.raw())


def _recv(conn: mpc.Connection) -> Any:
    msg = conn.recv_bytes()
    count = int.from_bytes(msg[:4], "little")
    buffers = [conn.recv_bytes() for _ in range(count)]
    return pickle.loads(memoryview(msg)[4:], buffers=buffers)


def _worker_main(fd: int) -> None:
    """A worker process: runs chunks until its pipe closes (the parent exited or stopped it)."""
    _mark_worker_process()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    conn = mpc.Connection(fd)
    while True:
        try:
            msg = _recv(conn)
        except (EOFError, OSError):
            return
        if msg is None:
            return
        key, payload, n, arrays, shared, vectorized, forget = msg
        for k in forget:
            _remote_calls.pop(k, None)
        _send(conn, _remote_run(key, payload, n, arrays, shared, vectorized))


# Inner thread pools a worker would start one thread per core for (OpenBLAS, OpenMP, MKL...).
_INNER_THREADS = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def _worker_env(workers: int) -> dict[str, str]:
    env = dict(os.environ, JAXBRIDGE_WORKER_PATH=json.dumps(sys.path))
    # As joblib does: `workers` processes each with a thread per core would oversubscribe the
    # cores, and OpenBLAS's idle threads spin for a while after every call. Each worker gets
    # its share of the cores, unless the user set the variable (then theirs holds).
    share = str(max(1, (os.cpu_count() or 1) // workers))
    for var in _INNER_THREADS:
        env.setdefault(var, share)
    # Host code runs NumPy on the CPU; a worker must not claim an accelerator.
    env["JAX_PLATFORMS"] = "cpu"
    return env


class _Worker:
    def __init__(self, index: int, workers: int):
        self.index = index
        self.conn, child = mpc.Pipe()
        env = _worker_env(workers)
        # A fresh interpreter (not fork: JAX is multithreaded; not multiprocessing's spawn,
        # which re-runs the user's unguarded __main__).
        with warnings.catch_warnings():
            # JAX warns at every fork; this one execs a fresh interpreter straight away.
            warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_CODE, str(child.fileno())],
                pass_fds=[child.fileno()],
                env=env,
            )
        child.close()
        self.keys: set[str] = set()  # host calls this worker has been sent

    def close(self, timeout: float = 2.0) -> None:
        with contextlib.suppress(OSError):
            _send(self.conn, None)
        self.conn.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def died(self) -> str:
        try:
            code = self.proc.wait(5.0)  # its pipe closed: it is exiting, if not gone already
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "stopped answering"
        if code < 0:
            try:
                return f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with code {code}"


class _ProcessPool:
    """`n` worker slots; a slot's process starts on first use and again after it died."""

    def __init__(self, n: int):
        self.slots: list[_Worker | None] = [None] * n
        self.idle = list(range(n - 1, -1, -1))
        self.cond = threading.Condition()

    def acquire(self, block: bool) -> _Worker | None:
        with self.cond:
            while not self.idle:
                if not block:
                    return None
                self.cond.wait()
            i = self.idle.pop()
        w = self.slots[i]
        if w is None or w.proc.poll() is not None:  # first use, or died while idle
            w = self.slots[i] = _Worker(i, len(self.slots))
        return w

    def release(self, w: _Worker, dead: bool = False) -> None:
        if dead:
            self.slots[w.index] = None
            w.conn.close()
        with self.cond:
            self.idle.append(w.index)
            self.cond.notify()

    def shutdown(self) -> None:
        for w in self.slots:
            if w is not None:
                w.close()


_process_pools: dict[int, _ProcessPool] = {}


class Processes(_Executor):
    """Runs a batch on persistent worker processes: for pure-Python host code.

    The host function, its static arguments and `init` travel by cloudpickle once per worker
    (not once per call); arrays travel as pickle protocol 5 buffers over a pipe, without
    intermediate copies; an argument that is not batched travels once per chunk. Workers are
    fresh interpreters that import jaxbridge (about a second, once) and use JAX on the CPU only.

    Args:
        n: worker processes (default: the machine's cores). Executors of the same `n` share
            one pool, started on first use.
        chunk_size: elements per task (default: four chunks per worker, or one chunk per
            worker when `vectorized`).
        vectorized: hand each chunk to the host function as stacked `(chunk, *core)` arrays.

    An exception in a worker reaches the caller with its own type (where it unpickles), its
    message and the worker's traceback. A worker that dies (`os._exit`, a signal, a crash)
    fails the call promptly with `jaxbridge.WorkerDiedError` naming it, and is replaced.
    `init` state is made once per worker process. A host function called from inside a worker
    runs there, in a loop. Each worker's BLAS and OpenMP get its share of the cores
    (`OPENBLAS_NUM_THREADS`, `OMP_NUM_THREADS`, ... set to cores // n in the worker), unless
    those variables are set in this process: then the workers inherit them.

    Example:
        >>> import jax, jax.numpy as jnp, jaxbridge
        >>> @jaxbridge.host(vmap=jaxbridge.Processes(2))
        ... def collatz_steps(n):
        ...     n, steps = max(int(n), 1), 0
        ...     while n != 1:
        ...         n, steps = (n // 2 if n % 2 == 0 else 3 * n + 1), steps + 1
        ...     return steps
        >>> jax.vmap(collatz_steps)(jnp.arange(1, 9)).tolist()
        [0, 1, 7, 2, 5, 8, 16, 3]
    """

    name = "processes"

    def __init__(
        self, n: int | None = None, chunk_size: int | None = None, vectorized: bool = False
    ):
        if importlib.util.find_spec("cloudpickle") is None:
            raise ImportError(CLOUDPICKLE_MISSING)
        super().__init__(n, chunk_size, vectorized)

    def _run_chunks(self, call, flat_ins, shared, flat_outs, chunks):
        n = self.workers()
        with _lock:
            pool = _process_pools.get(n)
            if pool is None:
                pool = _process_pools[n] = _ProcessPool(n)
        key, payload = _payload(call, repr(self))
        todo = deque(chunks)
        busy: dict[mpc.Connection, tuple[_Worker, int, int]] = {}
        errors: dict[int, BaseException] = {}
        while todo or busy:
            while todo and not errors:  # after a failure, start nothing more
                w = pool.acquire(block=not busy)
                if w is None:
                    break
                lo, hi = todo.popleft()
                forget = sorted(w.keys & _dead_keys)
                w.keys -= set(forget)
                msg = (
                    key,
                    None if key in w.keys else payload,
                    hi - lo,
                    _chunk_arrays(flat_ins, shared, lo, hi),
                    shared,
                    self.vectorized,
                    forget,
                )
                try:
                    _send(w.conn, msg)
                except OSError:
                    errors[lo] = self._died(w, pool, call, lo, hi)
                    continue
                w.keys.add(key)
                busy[w.conn] = (w, lo, hi)
            if not busy:
                break
            # A dead worker's pipe reads as EOF; the timeout also catches one whose pipe a
            # grandchild process keeps open.
            ready = cast("list[mpc.Connection]", mpc.wait(list(busy), timeout=1.0))
            for conn in ready or self._dead(busy):
                w, lo, hi = busy.pop(conn)
                try:
                    status, value = _recv(w.conn)
                except (EOFError, OSError):
                    errors[lo] = self._died(w, pool, call, lo, hi)
                    continue
                pool.release(w)
                if status == "error":
                    where = f"jaxbridge.Processes worker {w.index} (pid {w.proc.pid})"
                    errors[lo] = _unpack_exception(value, where, call)
                elif not errors:
                    for o, v in zip(flat_outs, value, strict=True):
                        if o is not None:  # None: an output the program does not use
                            o[lo:hi] = v
        if errors:
            raise errors[min(errors)]

    @staticmethod
    def _dead(busy) -> list[mpc.Connection]:
        return [c for c, (w, _, _) in busy.items() if w.proc.poll() is not None]

    @staticmethod
    def _died(w: _Worker, pool: _ProcessPool, call, lo: int, hi: int) -> WorkerDiedError:
        how = w.died()
        pool.release(w, dead=True)
        return WorkerDiedError(
            WORKER_DIED.format(index=w.index, pid=w.proc.pid, how=how, lo=lo, hi=hi, name=call.name)
        )


@_at_shutdown
def _shutdown() -> None:
    for pool in list(_process_pools.values()):
        pool.shutdown()
    _process_pools.clear()
