"""Executors for batched host calls: `Threads`, `Processes` and `Ray`.

Under `jax.vmap` a host call reaches the host as ONE call whose arguments carry the batch in
their leading dimensions (see `_batching`). An executor flattens that batch, splits it into
chunks of `chunk_size` elements, runs the chunks concurrently and writes each chunk's results
into its own rows of the output buffers, so order is kept by construction. A chunk loops over
its elements, or with `vectorized=True` is one call of the host function on stacked
`(chunk, *core)` arrays.

Pools are persistent, shared by every executor of the same size, created on first use and shut
down at interpreter exit. Per-worker `init` state lives in the `HostCall` of the worker: thread
local for `Threads`, once per worker process for `Processes`, once per actor for `Ray`.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import functools
import importlib.util
import inspect
import json
import linecache
import math
import multiprocessing.connection as mpc
import os
import pickle
import signal
import subprocess
import sys
import threading
import traceback
import types
import uuid
import warnings
import weakref
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _batching, _errors

if TYPE_CHECKING:
    from ._call import HostCall

RAY_MISSING = "`jaxbridge.Ray` needs Ray: `pip install jaxbridge[ray]`"
CLOUDPICKLE_MISSING = "`jaxbridge.Processes` needs cloudpickle: `pip install cloudpickle`"
NOT_PICKLABLE = (
    "{executor} sends host function {name!r}, its static arguments and `init` to its workers "
    "with cloudpickle, which failed: {etype}: {emsg}. Make them picklable, or use "
    "`vmap=jaxbridge.Threads()` to stay in this process."
)
WORKER_DIED = (
    "jaxbridge.Processes: worker process {index} (pid {pid}) {how} while running elements "
    "{lo}:{hi} of host function {name!r}; a fresh worker replaces it. A host function that "
    "exits its process (os._exit, sys.exit), crashes or is killed (out of memory) takes its "
    "worker with it: run it with vmap='sequential' to see the failure in this process."
)
RAY_FAILED = (
    "jaxbridge.Ray: the Ray {what} running elements {lo}:{hi} of host function {name!r} "
    "failed after Ray's retries ({retries}): {etype}: {emsg}"
)


class WorkerDiedError(RuntimeError):
    """A worker process or Ray worker died while running a chunk of a batched host call.

    The message names the worker and the elements it was running. The pool stays usable: the
    dead worker is replaced before the next call.
    """


WorkerDiedError.__module__ = "jaxbridge"  # shown as jaxbridge.WorkerDiedError in messages


def _check_count(api: str, arg: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{api}({arg}=...)` must be a positive int or None; got {value!r}.")
    return value


class _Executor(_batching.AbstractBatching):
    """Chunks one batched call and runs the chunks on workers (`_run_chunks`)."""

    #: Chunks per worker when `chunk_size` is None and chunks loop: a few, to balance load.
    chunks_per_worker = 4

    def __init__(self, n: int | None, chunk_size: int | None, vectorized: bool):
        api = f"jaxbridge.{type(self).__name__}"
        self.n = _check_count(api, "n", n)
        self.chunk_size = _check_count(api, "chunk_size", chunk_size)
        self.vectorized = bool(vectorized)

    def __repr__(self) -> str:
        args = {k: v for k, v in self._repr_args().items() if v not in (None, False)}
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        return f"jaxbridge.{type(self).__name__}({shown})"

    def _repr_args(self) -> dict[str, Any]:
        return {"n": self.n, "chunk_size": self.chunk_size, "vectorized": self.vectorized}

    def workers(self) -> int:
        return self.n or os.cpu_count() or 1

    def chunks(self, size: int, workers: int) -> list[tuple[int, int]]:
        """`(lo, hi)` ranges covering `range(size)`, in order."""
        per = self.chunk_size
        if per is None:
            # One call per worker amortises a vectorised call best; loops balance better
            # with a few chunks each.
            parts = workers if self.vectorized else workers * self.chunks_per_worker
            per = math.ceil(size / parts)
        return [(lo, min(lo + per, size)) for lo in range(0, size, per)]

    def run(self, call, batch, ins, outs):
        size = math.prod(batch)
        if size == 0:
            return
        flat_ins = [
            _batching.flatten_batch(x, nd, batch)
            for x, nd in zip(ins, call.core_ndims, strict=True)
        ]
        for x in flat_ins:  # a partly broadcast input is a fresh copy: read-only like the rest
            x.flags.writeable = False
        # XLA's output buffers are contiguous, so these are views: chunks write in place.
        flat_outs = [o.reshape((size, *o.shape[len(batch) :])) for o in outs]
        shared = [
            all(d == 1 for d in x.shape[: x.ndim - nd])
            for x, nd in zip(ins, call.core_ndims, strict=True)
        ]
        chunks = self.chunks(size, self.workers())
        if len(chunks) == 1 or _in_worker():
            # Nothing to share out, or a host function calling another from inside a worker:
            # running inline cannot deadlock on a pool that this very worker belongs to.
            run_chunk(call, flat_ins, flat_outs, 0, size, self.vectorized, call.local_state())
            return
        self._run_chunks(call, flat_ins, shared, flat_outs, chunks)

    def _run_chunks(self, call, flat_ins, shared, flat_outs, chunks) -> None:
        raise NotImplementedError


def run_chunk(
    call: HostCall,
    flat_ins: Sequence[np.ndarray],
    flat_outs: Sequence[np.ndarray],
    lo: int,
    hi: int,
    vectorized: bool,
    state: Any,
) -> None:
    """Fills rows `lo:hi` of `flat_outs` (each `(size, *core)`) from those of `flat_ins`."""
    ins = [x[lo:hi] for x in flat_ins]
    outs = [o[lo:hi] for o in flat_outs]
    if vectorized:
        call.check(call.invoke(ins, state), outs, lead=(hi - lo,))
    else:
        _batching.run_elements(call, ins, outs, ((i,) for i in range(hi - lo)), state)


_local = threading.local()  # `in_worker`: this thread is one of our pool's workers
_in_worker_process = False


def _in_worker() -> bool:
    return _in_worker_process or getattr(_local, "in_worker", False)


def _mark_worker() -> None:
    _local.in_worker = True


# --- threads ------------------------------------------------------------------------------

_lock = threading.Lock()
_thread_pools: dict[int, concurrent.futures.ThreadPoolExecutor] = {}


class Threads(_Executor):
    """Runs a batch on a persistent thread pool: for host code that releases the GIL.

    NumPy's linear algebra, SciPy's solvers, MuJoCo and most C extensions release the GIL, so
    their elements run in parallel. Pure-Python host code holds it: use `Processes` there.

    Args:
        n: threads in the pool (default: the machine's cores). Executors of the same `n` share
            one pool, created on first use.
        chunk_size: elements per task (default: the batch split into four chunks per thread,
            or one chunk per thread when `vectorized`).
        vectorized: hand each chunk to the host function as stacked `(chunk, *core)` arrays
            in one call, instead of one call per element.

    Under `jax.vmap` the host function receives what it receives under `jit` (or stacked
    chunks when `vectorized`); results keep the batch order. `init` state is per thread.
    Derivative rules of the host function run their batched calls through the same pool.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np, jaxbridge
        >>> solve = jaxbridge.host(
        ...     np.linalg.solve, vmap=jaxbridge.Threads(2), result=lambda a, b: b
        ... )
        >>> a = jnp.broadcast_to(2.0 * jnp.eye(3), (8, 3, 3))
        >>> jax.vmap(solve)(a, jnp.ones((8, 3)))[5].tolist()
        [0.5, 0.5, 0.5]
    """

    name = "threads"

    def __init__(
        self, n: int | None = None, chunk_size: int | None = None, vectorized: bool = False
    ):
        super().__init__(n, chunk_size, vectorized)

    def _run_chunks(self, call, flat_ins, shared, flat_outs, chunks):
        n = self.workers()
        with _lock:
            pool = _thread_pools.get(n)
            if pool is None:
                pool = _thread_pools[n] = concurrent.futures.ThreadPoolExecutor(
                    n, thread_name_prefix=f"jaxbridge-threads-{n}", initializer=_mark_worker
                )
        vec = self.vectorized
        futures = [
            pool.submit(_thread_chunk, call, flat_ins, flat_outs, lo, hi, vec) for lo, hi in chunks
        ]
        pending = set(futures)
        while pending:
            done, pending = concurrent.futures.wait(pending, return_when="FIRST_COMPLETED")
            if any(f.result() is not None for f in done):
                for f in pending:  # a chunk failed: start nothing more
                    f.cancel()
                # ... but let running chunks finish: returning while a thread still writes to
                # XLA's buffers would corrupt them.
                concurrent.futures.wait(pending)
                break
        for f in futures:  # the first failed chunk in batch order, for a deterministic error
            if not f.cancelled() and f.result() is not None:
                raise f.result()


def _thread_chunk(call, flat_ins, flat_outs, lo, hi, vectorized) -> Exception | None:
    # Returned, not raised: the pool's own frames would join the host traceback.
    try:
        run_chunk(call, flat_ins, flat_outs, lo, hi, vectorized, call.local_state())
    except Exception as e:
        return e
    return None


# --- what travels to worker processes and Ray workers -------------------------------------

_payloads: weakref.WeakKeyDictionary[Any, tuple[str, bytes]] = weakref.WeakKeyDictionary()
_dead_keys: set[str] = set()  # HostCalls collected here: workers may drop their copies


def _payload(call: HostCall, executor: str) -> tuple[str, bytes]:
    """A key and the cloudpickled host call, made once per `HostCall`, sent once per worker."""
    with _lock:
        found = _payloads.get(call)
    if found is not None:
        return found
    try:
        import cloudpickle
    except ImportError as e:  # pragma: no cover - checked when the executor is built
        raise ImportError(CLOUDPICKLE_MISSING) from e
    parts = (call.name, call.fn, call.split, call.in_avals, call.spec, call.init)
    try:
        blob = cloudpickle.dumps(parts)
    except Exception as e:
        raise TypeError(
            NOT_PICKLABLE.format(executor=executor, name=call.name, etype=type(e).__name__, emsg=e)
        ) from e
    # `init` state is per wrapped function (its signatures share `call._local`): so in a
    # worker too, where the group names the state that the signatures share.
    with _lock:
        group = _state_groups.setdefault(call._local, uuid.uuid4().hex)
    # The worker's sys.path first: functions of importable modules travel by reference.
    found = (uuid.uuid4().hex, pickle.dumps((sys.path, group, blob)))
    with _lock:
        _payloads[call] = found
    weakref.finalize(call, _dead_keys.add, found[0])
    return found


def _load_call(payload: bytes) -> HostCall:
    from ._call import HostCall

    path, group, blob = pickle.loads(payload)
    sys.path[:] = path + [p for p in sys.path if p not in path]
    name, fn, split, in_avals, spec, init = pickle.loads(blob)
    states = _remote_states.setdefault(group, threading.local())
    return HostCall(name, fn, split, in_avals, spec, _batching.SEQUENTIAL, init, states)


_state_groups: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_remote_calls: dict[str, HostCall] = {}  # in a worker: the host calls it has been sent
_remote_states: dict[str, threading.local] = {}  # ... and the init states they share


def _remote_run(key, payload, n, arrays, shared, vectorized) -> tuple[str, Any]:
    """Runs one chunk in a worker: `("ok", outs)` or `("error", packed exception)`."""
    try:
        call = _remote_calls.get(key)
        if call is None:
            if payload is None:
                raise RuntimeError(f"jaxbridge worker was not sent host call {key}")
            call = _remote_calls[key] = _load_call(payload)
        ins = [
            np.broadcast_to(a, (n, *a.shape)) if s else a
            for a, s in zip(arrays, shared, strict=True)
        ]
        outs = [np.empty((n, *a.shape), a.dtype) for a in call.spec.avals]
        run_chunk(call, ins, outs, 0, n, vectorized, call.local_state())
        return "ok", outs
    except Exception as e:
        return "error", _pack_exception(e)


def _chunk_arrays(flat_ins, shared, lo, hi) -> list[np.ndarray]:
    # An argument that is not batched travels once per chunk as its core, not as copies.
    return [
        _contiguous(x[0, ...] if s else x[lo:hi]) for x, s in zip(flat_ins, shared, strict=True)
    ]


def _contiguous(x: np.ndarray) -> np.ndarray:
    # Not np.ascontiguousarray: it turns a 0-d array into shape (1,).
    return x if x.flags.c_contiguous else x.copy()


def _pack_exception(e: BaseException) -> tuple[bytes | None, str, str, list]:
    frames = [
        (f.filename, f.lineno or 1, f.name)
        for f in traceback.extract_tb(e.__traceback__)
        if "/jaxbridge/_" not in f.filename.replace("\\", "/")
    ]
    try:
        import cloudpickle

        blob = cloudpickle.dumps(e)
        pickle.loads(blob)
    except Exception:
        blob = None
    etype = f"{type(e).__module__}.{type(e).__qualname__}"
    return blob, etype, str(e), frames


def _unpack_exception(
    packed: tuple[bytes | None, str, str, list], where: str, call: HostCall
) -> BaseException:
    """The worker's exception, of its own type where it unpickles, with the worker's frames."""
    blob, etype, message, frames = packed
    # cloudpickle renames the file of code it sends by value (a script's or notebook's
    # functions) to <dynamic-code>; most such code sits in the host function's own file.
    code = getattr(inspect.unwrap(call.fn), "__code__", None)
    if code is not None:
        frames = [(code.co_filename if f == "<dynamic-code>" else f, n, m) for f, n, m in frames]
    exc: BaseException | None = None
    if blob is not None:
        try:
            exc = pickle.loads(blob)
        except Exception:
            exc = None
    if exc is None:
        exc = _errors.HostError(f"{etype}: {message}")
    exc.add_note(f"Raised in {where}.")
    return _replay_traceback(exc, frames)


def _replay_traceback(exc: BaseException, frames: list) -> BaseException:
    """Gives `exc` a traceback made of the worker's frames (jinja2's trick).

    The trampoline shows the host traceback of an exception from its frames; for an exception
    from another process those are the worker's, so we raise it once from code compiled at each
    worker frame's file and line. Source lines then show as for a local exception.
    """
    tb = None
    for filename, lineno, name in reversed(frames):
        try:
            code = compile(_raise_at(filename, lineno), filename, "exec")
            code = code.replace(co_name=name, co_qualname=name)
        except Exception:  # pragma: no cover - an odd filename or line
            continue
        exc.__traceback__ = None
        try:
            exec(code, {"__exc__": exc})
        except BaseException as raised:
            here = raised.__traceback__.tb_next  # type: ignore[union-attr]  # skip our frame
            tb = types.TracebackType(tb, here.tb_frame, here.tb_lasti, here.tb_lineno)  # type: ignore[union-attr]
    exc.__context__ = None
    return exc.with_traceback(tb)


def _raise_at(filename: str, lineno: int) -> str:
    """Source raising `__exc__` at `lineno`, spanning the real line so no carets show."""
    line = linecache.getline(filename, lineno)
    width, indent = len(line.strip()), len(line) - len(line.lstrip())
    stmt = "raise __exc__"
    if width > len(stmt) + 2:
        stmt = "raise (__exc__" + " " * (width - len(stmt) - 2) + ")"
    if indent and lineno > 1:  # an indented line needs a block to sit in
        return "\n" * (lineno - 2) + "if 1:\n" + " " * indent + stmt
    return "\n" * (lineno - 1) + stmt


# --- processes ----------------------------------------------------------------------------

_WORKER_CODE = (
    "import json, os, sys; "
    "p = json.loads(os.environ.pop('JAXBRIDGE_WORKER_PATH')); "
    "sys.path[:] = p + [x for x in sys.path if x not in p]; "
    "from jaxbridge._executors import _worker_main; _worker_main(int(sys.argv[1]))"
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
    global _in_worker_process
    _in_worker_process = True
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


class _Worker:
    def __init__(self, index: int):
        self.index = index
        self.conn, child = mpc.Pipe()
        env = dict(os.environ, JAXBRIDGE_WORKER_PATH=json.dumps(sys.path))
        # Host code runs NumPy on the CPU; a worker must not claim an accelerator.
        env["JAX_PLATFORMS"] = "cpu"
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
            w = self.slots[i] = _Worker(i)
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
    runs there, in a loop.

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
            for conn in mpc.wait(list(busy), timeout=1.0) or self._dead(busy):
                w, lo, hi = busy.pop(conn)  # type: ignore[index]
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


# --- Ray ----------------------------------------------------------------------------------

_ray_started = False
# Actors per wrapped function (its signatures share `init` state, keyed by `call._local`).
_actors: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


def _ray_module(address: str | None) -> Any:
    """Ray, imported and connected (to `address`, or a local cluster started now)."""
    global _ray_started
    try:
        import ray
    except ImportError as e:
        raise ImportError(RAY_MISSING) from e
    with _lock:
        if not ray.is_initialized():
            ray.init(address=address)
            _ray_started = True
    return ray


@functools.cache
def _ray_remotes(ray: Any) -> tuple[Any, Any]:
    def run(key, payload, lo, hi, shared, vectorized, *arrays):
        # The payload ref is nested, so Ray does not fetch it: only a worker that lacks it.
        payload = ray.get(payload[0]) if key not in _remote_calls else None
        # Ray hands each top-level array ref over as a read-only view of the object store.
        arrays = [a if s else a[lo:hi] for a, s in zip(arrays, shared, strict=True)]
        return _remote_run(key, payload, hi - lo, arrays, shared, vectorized)

    class Actor:
        """Holds per-actor `init` state: the `HostCall` it loads lives as long as the actor."""

        def run(self, *args):
            return run(*args)

    return ray.remote(run), ray.remote(Actor)


class Ray(_Executor):
    """Runs a batch as Ray tasks, or on Ray actors when the host function has `init` state.

    Args:
        address: the cluster to connect to when Ray is not initialised yet; `None` starts a
            local one on demand (or joins the one named by `RAY_ADDRESS`). An already
            initialised Ray is used as it is.
        num_workers: tasks (or actors) to split a batch over (default: the cluster's CPUs).
        chunk_size: elements per task (default: the batch split evenly over `num_workers`).
        vectorized: hand each chunk to the host function as stacked `(chunk, *core)` arrays.
        max_retries: Ray's `max_retries` for a task whose worker dies (default: Ray's own, 3).
            Application exceptions are never retried.

    The host function and its static arguments go to the object store once per input
    signature and are unpickled once per Ray worker; each batched input is put once and
    sliced by the tasks. With `init=`, `num_workers` actors are made per signature, each
    holding its own state. Exceptions reach the caller as from `Processes`; a task whose worker
    keeps dying fails with `jaxbridge.WorkerDiedError` after Ray's retries.

    Example:
        >>> import jaxbridge
        >>> jaxbridge.Ray(num_workers=4, vectorized=True)  # Ray starts on the first batch
        jaxbridge.Ray(num_workers=4, vectorized=True)
    """

    name = "ray"
    chunks_per_worker = 1  # each task costs about a millisecond: as few as keep all busy

    def __init__(
        self,
        address: str | None = None,
        num_workers: int | None = None,
        chunk_size: int | None = None,
        vectorized: bool = False,
        max_retries: int | None = None,
    ):
        if importlib.util.find_spec("ray") is None:
            raise ImportError(RAY_MISSING)
        super().__init__(num_workers, chunk_size, vectorized)
        self.address = address
        if max_retries is not None and (not isinstance(max_retries, int) or max_retries < 0):
            raise ValueError(
                f"`jaxbridge.Ray(max_retries=...)` must be a non-negative int or None; got "
                f"{max_retries!r}."
            )
        self.max_retries = max_retries

    def _repr_args(self):
        return {
            "address": self.address,
            "num_workers": self.n,
            "chunk_size": self.chunk_size,
            "vectorized": self.vectorized,
            "max_retries": self.max_retries,
        }

    def workers(self) -> int:
        if self.n is not None:
            return self.n
        return max(1, int(_ray_module(self.address).cluster_resources().get("CPU", 1)))

    def run(self, call, batch, ins, outs):
        _ray_module(self.address)
        super().run(call, batch, ins, outs)

    def _run_chunks(self, call, flat_ins, shared, flat_outs, chunks):
        ray = _ray_module(self.address)
        task, actor_cls = _ray_remotes(ray)
        key, payload = _payload(call, repr(self))
        with _lock:
            ref = _payload_refs.get(call)
            if ref is None:
                ref = _payload_refs[call] = ray.put(payload)
        # Each batched input goes to the object store once; tasks slice it without copying.
        puts = [
            ray.put(_contiguous(x[0, ...] if s else x))
            for x, s in zip(flat_ins, shared, strict=True)
        ]
        actors = self._actors(call, actor_cls) if call.init is not None else None
        refs = []
        for i, (lo, hi) in enumerate(chunks):
            args = (key, [ref], lo, hi, shared, self.vectorized, *puts)
            if actors is not None:
                refs.append(actors[i % len(actors)].run.remote(*args))
            else:
                options = {} if self.max_retries is None else {"max_retries": self.max_retries}
                refs.append(task.options(**options).remote(*args))
        errors = []
        for (lo, hi), r in zip(chunks, refs, strict=True):
            try:
                status, value = ray.get(r)
            except ray.exceptions.RayError as e:
                if actors is not None:
                    self._drop_actors(call, ray)
                what = "actor" if actors is not None else "task"
                retries = (
                    "the actor is not restarted"
                    if actors is not None
                    else (
                        f"max_retries={self.max_retries}"
                        if self.max_retries is not None
                        else "Ray's default max_retries"
                    )
                )
                errors.append(
                    WorkerDiedError(
                        RAY_FAILED.format(
                            what=what,
                            lo=lo,
                            hi=hi,
                            name=call.name,
                            retries=retries,
                            etype=type(e).__name__,
                            emsg=str(e).strip().splitlines()[0] if str(e) else "",
                        )
                    )
                )
                break
            if status == "error":
                where = f"a Ray worker (elements {lo}:{hi})"
                errors.append(_unpack_exception(value, where, call))
                break
            for o, v in zip(flat_outs, value, strict=True):
                o[lo:hi] = v
        if errors:
            # Chunks still running finish and are dropped: they write nothing of ours, and
            # cancelling tasks that may be retrying trips Ray up.
            raise errors[0]

    def _actors(self, call, actor_cls) -> list[Any]:
        with _lock:
            found = _actors.get(call._local)
            if found is None:
                found = _actors[call._local] = [actor_cls.remote() for _ in range(self.workers())]
        return found

    @staticmethod
    def _drop_actors(call, ray) -> None:
        with _lock:
            dead = _actors.pop(call._local, [])
        for a in dead:  # the next call makes fresh actors, with fresh state
            with contextlib.suppress(Exception):
                ray.kill(a)


_payload_refs: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


# --- shutdown -----------------------------------------------------------------------------


@atexit.register
def _shutdown() -> None:
    """Stops every pool this process started; workers also exit when their pipe closes."""
    for pool in list(_thread_pools.values()):
        pool.shutdown(wait=False, cancel_futures=True)
    for pool in list(_process_pools.values()):
        pool.shutdown()
    _process_pools.clear()
    if _ray_started:
        import ray

        if ray.is_initialized():
            ray.shutdown()
