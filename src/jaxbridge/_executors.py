"""The executors' shared machinery: chunking a batch, running a chunk, and `Threads`.

Under `jax.vmap` a host call reaches the host as ONE call whose arguments carry the batch in
their leading dimensions (see `_batching`). An executor flattens that batch, splits it into
chunks of `chunk_size` elements, runs the chunks concurrently and writes each chunk's results
into its own rows of the output buffers, so order is kept by construction. A chunk loops over
its elements, or with `vectorized=True` is one call of the host function on stacked
`(chunk, *core)` arrays. `_Executor` does all but the running; `Threads` here, `Processes`
(`_processes`) and `Ray` (`_ray`) each run the chunks their own way.

Pools are persistent, shared by every executor of the same size, created on first use and shut
down at interpreter exit (`_at_shutdown`). Per-worker `init` state lives in the `HostCall` of
the worker: thread local for `Threads`, once per worker process for `Processes`, once per actor
for `Ray`.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import math
import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from . import _batching

if TYPE_CHECKING:
    from ._call import HostCall

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


def _mark_worker_process() -> None:
    # Set once in a `Processes` worker, where every thread is a worker's.
    global _in_worker_process
    _in_worker_process = True


# --- threads ------------------------------------------------------------------------------

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
        # JAX keeps `enable_x64` per thread: workers take the caller's, for host functions
        # that call JAX themselves.
        x64 = bool(jax.config.jax_enable_x64)
        with _lock:
            pool = _thread_pools.get(n)
            if pool is None:
                pool = _thread_pools[n] = concurrent.futures.ThreadPoolExecutor(
                    n, thread_name_prefix=f"jaxbridge-threads-{n}", initializer=_mark_worker
                )
        vec = self.vectorized
        futures = [
            pool.submit(_thread_chunk, call, flat_ins, flat_outs, lo, hi, vec, x64)
            for lo, hi in chunks
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


def _thread_chunk(call, flat_ins, flat_outs, lo, hi, vectorized, x64) -> Exception | None:
    # Returned, not raised: the pool's own frames would join the host traceback.
    try:
        with jax.enable_x64(x64):
            run_chunk(call, flat_ins, flat_outs, lo, hi, vectorized, call.local_state())
    except Exception as e:
        return e
    return None


# --- shutdown -----------------------------------------------------------------------------

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
