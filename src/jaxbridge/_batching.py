"""What one batched host call does on the host: loop, or call the vectorised function once.

Under `jax.vmap` the callback is lowered with `vmap_method="expand_dims"`, so a batched call
reaches the host as ONE call whose arguments carry leading batch dimensions (size 1 where an
argument is not batched at that level; nested vmaps add one leading dimension each). The
trampoline knows each argument's unbatched shape from trace time, so the leading dimensions are
the batch. A strategy turns that one call into calls of the user's function. Executors (threads,
processes, Ray) are strategies too, in `_executors.py`, `_processes.py` and `_ray.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _errors, _malloc
from ._base import AbstractBatching as AbstractBatching
from ._base import AbstractCall


def broadcast_views(
    ins: Sequence[np.ndarray], core_ndims: Sequence[int], batch: tuple[int, ...]
) -> list[np.ndarray]:
    """Each input as a read-only view of shape `batch + core` (no copy)."""
    return [np.broadcast_to(x, batch + x.shape[x.ndim - nd :]) for x, nd in zip(ins, core_ndims)]


def flatten_batch(x: np.ndarray, nd: int, batch: tuple[int, ...]) -> np.ndarray:
    """`x` with its leading dimensions broadcast to `batch` and flattened into one."""
    core = x.shape[x.ndim - nd :]
    size = math.prod(batch)
    lead = x.shape[: x.ndim - nd]
    if lead == batch:
        return x.reshape((size, *core))  # a view when x is contiguous, as XLA's buffers are
    if all(d == 1 for d in lead):
        return np.broadcast_to(x.reshape(core), (size, *core))
    out = np.broadcast_to(x, batch + core).reshape((size, *core))  # a copy: keep it read-only
    out.flags.writeable = False
    return out


def run_elements(
    call: AbstractCall,
    views: Sequence[np.ndarray],
    outs: Sequence[Any],
    indices: Any,
    state: Any = None,
) -> None:
    """Calls the host function once per batch index, in order, writing into `outs` (`None`
    for an output the program does not use)."""
    invoke, check = call.invoke, call.check
    for idx in indices:
        elem = [v[idx] for v in views]
        value = invoke(elem, state)
        cell = idx + (Ellipsis,)  # keeps 0-d cells as writable views, not NumPy scalars
        check(value, [None if o is None else o[cell] for o in outs])


def flatten_outs(outs: Sequence[Any], batch: tuple[int, ...]) -> list[Any]:
    """Each output of shape `batch + core` as a `(prod(batch), *core)` view (`None` stays)."""
    size = math.prod(batch)
    # XLA's output buffers are contiguous, so these are views: writes land in place.
    return [None if o is None else o.reshape((size, *o.shape[len(batch) :])) for o in outs]


class Sequential(AbstractBatching):
    """A batch is one host call that loops over the elements in order."""

    name = "sequential"
    handles_unused_outputs = True

    def run(self, call, batch, ins, outs):
        views = broadcast_views(ins, call.core_ndims, batch)
        run_elements(call, views, outs, np.ndindex(*batch), call.local_state())


class Vectorized(AbstractBatching):
    """A batch is one call of the host function on stacked arrays of shape `(B, *core)`."""

    name = "vectorized"
    handles_unused_outputs = True

    def run(self, call, batch, ins, outs):
        flat = [flatten_batch(x, nd, batch) for x, nd in zip(ins, call.core_ndims)]
        value = call.invoke(flat, call.local_state())
        call.check(value, flatten_outs(outs, batch), lead=(math.prod(batch),))


SEQUENTIAL = Sequential()
VECTORIZED = Vectorized()


def resolve(vmap: Any) -> AbstractBatching:
    """The strategy for `host(vmap=...)`; raises with the accepted values otherwise.

    Every `jaxbridge.host` resolves its strategy here once, so this is also where a process
    that runs host functions gets glibc's malloc thresholds raised (`_malloc.tune`, once).
    """
    _malloc.tune()

    if isinstance(vmap, AbstractBatching):
        return vmap
    if vmap == "sequential":
        return SEQUENTIAL
    if vmap == "vectorized":
        return VECTORIZED
    raise ValueError(_errors.BAD_VMAP.format(got=vmap))
