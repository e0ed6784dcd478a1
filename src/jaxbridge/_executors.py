"""The executors' shared machinery: chunking a batch, running a chunk, and `Threads`.

Under `jax.vmap` a host call reaches the host as ONE call whose arguments carry the batch in
their leading dimensions (see `_batching`). An executor flattens that batch, splits it into
chunks of `chunk_size` elements, runs the chunks concurrently and writes each chunk's results
into its own rows of the output buffers, so order is kept by construction. A chunk loops over
its elements, or with `vectorized=True` is one call of the host function on stacked
`(chunk, *core)` arrays. `_Executor` does all but the running; `Threads` here, `Processes`
(`_processes`) and `Ray` (`_ray`) each run the chunks their own way.

Pools are persistent, shared by every executor of the same size, created on first use and shut
down at interpreter exit (`_at_shutdown`). Per-worker `init` state lives in the host call of
the worker: thread local for `Threads`, once per worker process for `Processes`, once per actor
for `Ray`.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import math
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from . import _batching, _malloc
from ._base import AbstractCall

# Messages more than one executor module raises.
CLOUDPICKLE_MISSING = "`jaxbridge.Processes` needs cloudpickle: `pip install cloudpickle`"
NOT_PICKLABLE = (
    "{executor} sends host function {name!r}, its static arguments and `init` to its workers "
    "with cloudpickle, which failed: {etype}: {emsg}. Make them picklable, or use "
    "`vmap=jaxbridge.Threads()` to stay in this process."
)

# One lock for the registries of every executor module: each is touched briefly.
_lock = threading.Lock()


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
    handles_unused_outputs = True

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
        flat_outs = _batching.flatten_outs(outs, batch)  # views: chunks write in place
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
        with _exit_guard:
            self._run_chunks(call, flat_ins, shared, flat_outs, chunks)

    def _run_chunks(self, call, flat_ins, shared, flat_outs, chunks) -> None:
        raise NotImplementedError


def run_chunk(
    call: AbstractCall,
    flat_ins: Sequence[np.ndarray],
    flat_outs: Sequence[Any],
    lo: int,
    hi: int,
    vectorized: bool,
    state: Any,
) -> None:
    """Fills rows `lo:hi` of `flat_outs` (each `(size, *core)`, or `None` for an output the
    program does not use) from those of `flat_ins`."""
    ins = [x[lo:hi] for x in flat_ins]
    outs = [None if o is None else o[lo:hi] for o in flat_outs]
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


def _mark_worker_process() -> None:
    # Set once in a `Processes` worker, where every thread is a worker's. The worker runs its
    # chunks on its main thread, so it raises glibc's malloc thresholds as the parent did.
    global _in_worker_process
    _in_worker_process = True
    _malloc.tune()


# --- inner thread pools ------------------------------------------------------------------

# After a multi-threaded call OpenBLAS's own pool threads spin on the cores for a while before
# they sleep, and OpenBLAS runs concurrent callers' threaded calls one at a time (measured by
# benchmarks/batching.py; the figures are in docs/performance.md). Worker threads that call BLAS
# would share the cores with spinning BLAS threads, so while a batch runs, BLAS runs one thread
# per call, as joblib limits the inner threads of its workers.


class _InnerThreads:
    """Holds BLAS libraries at one thread a call while any `Threads` batch runs.

    OpenBLAS's thread count is process-global (one setting for every thread), so the limit
    spans the batch: set when the first concurrent batch starts, restored when the last one
    ends. Outside batches the user's settings are untouched. OpenMP's setting is per thread,
    so it is limited in the threads that run chunks only (`thread_limit`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._limiter: Any = None
        self._controller: Any = None
        self._seen = -1  # len(sys.modules) when the controller looked for libraries

    def controller(self) -> Any:
        """threadpoolctl's view of the loaded libraries, refreshed after new imports."""
        if self._seen != len(sys.modules):  # a new extension may have loaded a library
            self._seen = len(sys.modules)
            try:
                import threadpoolctl
            except ImportError:  # pragma: no cover - a dependency of jaxbridge
                return None
            self._controller = threadpoolctl.ThreadpoolController()
        return self._controller

    def __enter__(self) -> None:
        with self._lock:
            self._active += 1
            if self._active == 1:
                ctl = self.controller()
                blas = ctl and ctl.select(user_api="blas")
                if blas and any(lib.num_threads > 1 for lib in blas.lib_controllers):
                    self._limiter = blas.limit(limits=1)

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0 and self._limiter is not None:
                self._limiter.restore_original_limits()
                self._limiter = None

    def thread_limit(self) -> Any:
        """A context limiting OpenMP to one thread in the calling thread (its setting only)."""
        ctl = self.controller()
        openmp = ctl and ctl.select(user_api="openmp")
        if openmp and any(lib.num_threads > 1 for lib in openmp.lib_controllers):
            return openmp.limit(limits=1)
        return contextlib.nullcontext()


inner_threads = _InnerThreads()


# --- threads ------------------------------------------------------------------------------

_thread_pools: dict[int, concurrent.futures.ThreadPoolExecutor] = {}


class Threads(_Executor):
    """Runs a batch on persistent threads: for host code that releases the GIL.

    NumPy's linear algebra, SciPy's solvers, MuJoCo and most C extensions release the GIL, so
    their elements run in parallel. Pure-Python host code holds it: use `Processes` there.

    Args:
        n: threads that run a batch (default: the machine's cores): the calling thread and
            `n - 1` pool threads, which executors of the same `n` share (created on first use).
        chunk_size: elements per task (default: the batch split into four chunks per thread,
            or one chunk per thread when `vectorized`).
        vectorized: hand each chunk to the host function as stacked `(chunk, *core)` arrays
            in one call, instead of one call per element.

    Under `jax.vmap` the host function receives what it receives under `jit` (or stacked
    chunks when `vectorized`); results keep the batch order. `init` state is per thread.
    Derivative rules of the host function run their batched calls through the same pool.

    While a batch runs, BLAS (OpenBLAS, MKL, BLIS) runs one thread per call and OpenMP one
    thread in the threads running chunks: the elements are the parallelism, and BLAS's own
    threads would compete with them for the cores. OpenBLAS's setting is process-global, so
    BLAS called from other threads of the process meanwhile runs single-threaded too; the
    previous settings are back when the last concurrent batch ends.

    The calling thread runs chunks too. With glibc it would page-fault a host function's large
    temporaries in again at every call (its main arena trims eagerly), so the first
    `jaxbridge.host` of a process raises glibc's malloc thresholds (`JAXBRIDGE_MALLOPT=0`
    opts out; docs/batching.md, "Threads and memory").

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
        n = min(self.workers(), len(chunks))
        batch = _Batch(call, flat_ins, flat_outs, chunks, self.vectorized)
        futures: list[concurrent.futures.Future] = []
        with inner_threads if n > 1 else contextlib.nullcontext():
            if n > 1:
                pool = _thread_pool(self.workers() - 1)
                for _ in range(n - 1):
                    try:
                        futures.append(pool.submit(batch.drain))
                    except RuntimeError:  # the pool stopped (interpreter exit): run them here
                        break
            # The calling thread takes chunks too, rather than waiting idle for the pool.
            was_worker = getattr(_local, "in_worker", False)
            _local.in_worker = True
            try:
                batch.drain()
            finally:
                _local.in_worker = was_worker
            batch.wait()
        # A drain still queued behind another caller's batch would find no chunk left, but it
        # would hold this batch, and so views of XLA's buffers, past the call: drop both.
        for future in futures:
            future.cancel()
        batch.release()
        batch.raise_first()


def _thread_pool(size: int) -> concurrent.futures.ThreadPoolExecutor:
    with _lock:
        pool = _thread_pools.get(size)
        if pool is None:
            pool = _thread_pools[size] = concurrent.futures.ThreadPoolExecutor(
                size, thread_name_prefix=f"jaxbridge-threads-{size}", initializer=_mark_worker
            )
    return pool


_NO_STATE = object()


class _Batch:
    """One batch's chunks, taken in order by every thread that `drain`s it.

    Threads take the next chunk until none is left, so a late pool thread finds nothing and
    returns at once; `wait` waits for the chunks already running only. After a failure no
    chunk starts; `raise_first` raises the failed chunk first in batch order.
    """

    def __init__(self, call, flat_ins, flat_outs, chunks, vectorized):
        self.call, self.flat_ins, self.flat_outs = call, flat_ins, flat_outs
        self.chunks, self.vectorized = chunks, vectorized
        # JAX keeps `enable_x64` per thread: pool threads take the caller's, for host
        # functions that call JAX themselves.
        self.x64 = bool(jax.config.read("jax_enable_x64"))
        self.next = 0
        self.running = 0
        self.errors: dict[int, Exception] = {}
        self.cond = threading.Condition()

    def drain(self) -> None:
        # Exceptions are kept, not raised: the pool's own frames would join the traceback.
        with jax.enable_x64(self.x64), inner_threads.thread_limit():
            state = _NO_STATE  # made on this thread's first chunk: a late thread makes none
            while True:
                with self.cond:
                    if _exit_guard.exiting and not self.errors and self.next < len(self.chunks):
                        self.errors[self.next] = InterpreterExitError(EXITING)
                    if self.errors or self.next >= len(self.chunks):
                        return
                    i, self.next = self.next, self.next + 1
                    self.running += 1
                lo, hi = self.chunks[i]
                try:
                    if state is _NO_STATE:
                        state = self.call.local_state()
                    run_chunk(
                        self.call, self.flat_ins, self.flat_outs, lo, hi, self.vectorized, state
                    )
                except Exception as e:
                    with self.cond:
                        self.errors[i] = e
                finally:
                    with self.cond:
                        self.running -= 1
                        self.cond.notify_all()

    def wait(self) -> None:
        # Returning while a thread still writes to XLA's buffers would corrupt them.
        with self.cond:
            while self.running:
                self.cond.wait()

    def release(self) -> None:
        """Drops the batch's buffers once every chunk is done (none is left to take)."""
        with self.cond:
            self.next = len(self.chunks)
            self.flat_ins = self.flat_outs = ()

    def raise_first(self) -> None:
        if self.errors:
            raise self.errors[min(self.errors)]


# --- shutdown -----------------------------------------------------------------------------


class InterpreterExitError(RuntimeError):
    """A batch was cut short because the interpreter is exiting."""


class _ExitGuard:
    """Counts the batches in flight, so that interpreter exit can wait for them.

    A thread still inside a host call (a daemon thread's `jit`) when the interpreter tears
    JAX's runtime down makes the process crash (SIGSEGV, with no Python frame). At exit no
    new chunk starts, and `wait` gives the running ones a bounded time to finish; their batch
    raises `InterpreterExitError`, never returns partial results.

    A batch that has just ended is not yet out of XLA either: its caller still has to return
    from the computation (or go on to its next host call, as a `scan` does), and a daemon
    thread that takes the GIL back once finalisation has begun is stopped inside XLA's C++
    frames, which aborts the process ("FATAL: exception not rethrown"). So daemon threads that
    left a batch in the last `RECENT` seconds are joined too, for at most `RECENT` seconds.
    """

    RECENT = 1.0

    def __init__(self) -> None:
        self.exiting = False
        self.registered = False
        self.active: dict[threading.Thread, int] = {}  # calling thread -> batches in flight
        # calling thread -> when it last left a batch (weak: ended threads drop out)
        self.left: weakref.WeakKeyDictionary[threading.Thread, float] = weakref.WeakKeyDictionary()
        self.cond = threading.Condition()

    def __enter__(self) -> None:
        with self.cond:
            if self.exiting:
                raise InterpreterExitError(EXITING)
            if not self.registered:
                # atexit runs handlers last-in first-out, and JAX registers its runtime's
                # teardown when the backend starts: registered now, after that, this runs first.
                atexit.register(self.wait, timeout=10.0)
                self.registered = True
            me = threading.current_thread()
            self.active[me] = self.active.get(me, 0) + 1

    def __exit__(self, *exc: object) -> None:
        with self.cond:
            me = threading.current_thread()
            self.active[me] -= 1
            if not self.active[me]:
                del self.active[me]
            self.left[me] = time.monotonic()
            self.cond.notify_all()

    def wait(self, timeout: float) -> None:
        start = time.monotonic()
        deadline = start + timeout
        me = threading.current_thread()
        with self.cond:
            self.exiting = True
            callers = [t for t in self.active if t is not me]
            recent = [
                t
                for t, left in list(self.left.items())
                if start - left < self.RECENT and t is not me and t not in self.active
            ]
            self.cond.wait_for(lambda: not self.active, timeout)
        # Out of the batch is not yet out of XLA: the caller's computation still has to return
        # (with the batch's error) before the runtime goes. Daemon callers are joined, bounded.
        for t in callers:
            if _joinable(t):
                t.join(max(0.0, deadline - time.monotonic()))
        # Those that had just left a batch: most end (or fail at their next one) at once; one
        # that lives on doing other work delays the exit by at most RECENT seconds in all.
        recent_deadline = min(deadline, time.monotonic() + self.RECENT)
        for t in recent:
            if _joinable(t):
                t.join(max(0.0, recent_deadline - time.monotonic()))


def _joinable(t: threading.Thread) -> bool:
    """A daemon thread that Python started: XLA's own threads (which run the host calls of a
    `shard_map` or a sharded jit) appear as dummy threads, which cannot be joined."""
    return t.daemon and not isinstance(t, threading._DummyThread)


EXITING = "the interpreter is exiting: the batch was stopped before all its elements ran"
_exit_guard = _ExitGuard()

_shutdown_hooks: list[Callable[[], None]] = []


def _at_shutdown(hook: Callable[[], None]) -> Callable[[], None]:
    """Registers `hook` to run at exit, after the thread pools stop, in registration order.

    One atexit handler for every executor module, so pools stop in a fixed order: threads,
    then worker processes, then Ray.
    """
    _shutdown_hooks.append(hook)
    return hook


@atexit.register
def _shutdown() -> None:
    """Stops every pool this process started; workers also exit when their pipe closes."""
    for pool in list(_thread_pools.values()):
        pool.shutdown(wait=False, cancel_futures=True)
    for hook in _shutdown_hooks:
        hook()
