"""Host calls in a `jit` over several devices: one call per device, on that device's rows.

Under plain `jit` with sharded inputs XLA's partitioner sees a custom call it cannot split.
`jax.pure_callback` pins it to device 0 (`{maximal device=0}`): the batch is gathered there,
and the result's other shards hold wrong values (jax#38164, jax#38968). Instead, the lowering of
`host_call_p` lowers a `shard_map` of the per-device call, so JAX's own partitioner does the
splitting (`jax.experimental.custom_partitioning` segfaults with a callback inside on jax
0.10.2):

- **A batched call** (leading batch dimensions, the expand_dims convention of `_primitive.py`) is
  split along one batch dimension over every device of the computation: each device's call
  sees its block of rows. The shard_map's `in_specs` name the split, and XLA moves data only
  where the input's actual sharding differs, so values are right whatever that sharding is.
  A batch that does not divide evenly reaches every device whole; each device calls the host
  on its block of ceil(B / devices) rows (the last ones on fewer, or not at all).
- **An unbatched call** sees the whole array, as before: device 0 calls the host and the
  result is broadcast to every device, bit for bit.
- **Failures.** A device whose callback raises stops, and the others would wait for it in the
  next collective until XLA aborts the process. Each device's call reports a status instead;
  the devices agree on it, and all raise the host's exception together, or none does.

Which mesh: the context mesh (`jax.set_mesh`) when there is one, else the mesh of an input
whose type carries Explicit axes, else a one-axis mesh over the computation's devices (auto
axes: the input's sharding is not known while lowering). With Explicit axes the split follows
the batch dimension's own axes first, so each device's rows are a block of what it holds.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import dtypes as _dtypes
from jax._src import sharding_impls
from jax.experimental import io_callback
from jax.interpreters import mlir
from jax.sharding import AbstractMesh, AxisType
from jax.sharding import PartitionSpec as P

from . import _errors

#: The mesh axis of the devices when no mesh names them (auto axes).
AXIS = "jaxbridge_devices"

#: A guarded call's first result: 0, or the key of its exception in `_FAILURES`.
STATUS = jax.ShapeDtypeStruct((), np.int32)

OTHER_PROCESS = (
    "host function {name!r} raised on a device of another process of this sharded computation; "
    "that process reports the exception."
)

# `bind(*operands, out_avals=...) -> (status, results)`: one device's guarded call.
Bind = Callable[..., tuple[Any, Sequence[Any]]]
# `check(failed) -> token`: raises on every device where any device's call failed.
Check = Callable[[Any], Any]


def is_spread(ctx: Any) -> bool:
    """Whether this lowering is of a `jit` over several devices, outside any `shard_map`."""
    axis_context = ctx.module_context.axis_context
    return isinstance(axis_context, sharding_impls.ShardingContext) and (
        axis_context.num_devices > 1
    )


def lower(
    ctx: Any,
    args: Sequence[Any],
    *,
    core_ndims: Sequence[int],
    out_avals: Sequence[jax.ShapeDtypeStruct],
    bind: Bind,
    check: Check,
) -> Sequence[Any]:
    """Lowers one host call of a sharded `jit` as a `shard_map` over all its devices.

    Args:
        ctx: the lowering rule's context.
        args: the lowered operands.
        core_ndims: each operand's unbatched rank (its leading dimensions beyond are batch).
        out_avals: the call's results, batch dimensions included.
        bind: `bind(*operands, out_avals=...)` stages the guarded call on one device's
            operands; it returns the status and the results.
        check: `check(failed)` stages the check that raises the call's exception on every
            device (see `check`).

    Returns:
        The lowered results.
    """
    n = ctx.module_context.axis_context.num_devices
    plan = _plan(list(ctx.avals_in), core_ndims, out_avals, n, list(ctx.avals_out))
    return mlir.lower_fun(plan.function(bind, check), multiple_results=True)(ctx, *args)


def out_sharding(in_avals: Sequence[Any], core_ndims: Sequence[int], shape: tuple) -> Any:
    """With Explicit axes, a result's sharding: each batch dimension sharded as the inputs'
    are, the rest replicated. None without Explicit axes (JAX's default)."""
    mesh = _explicit_mesh(in_avals)
    if mesh is None:
        return None
    n_lead = min(_n_lead(in_avals, core_ndims), len(shape))
    spec = [_dim_spec(in_avals, d, shape[d]) for d in range(n_lead)]
    spec += [None] * (len(shape) - n_lead)
    return jax.sharding.NamedSharding(mesh, P(*spec))


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How one call is split: the mesh, its axes in split order, and the batch dimension."""

    mesh: AbstractMesh
    axes: tuple[str, ...]
    in_avals: tuple[Any, ...]
    out_avals: tuple[jax.ShapeDtypeStruct, ...]
    dim: int | None  # the split batch dimension; None: one whole-array call
    explicit: bool  # the mesh has Explicit axes: types must match at every step
    out_shardings: tuple[Any, ...]  # the results' declared shardings (Explicit axes)

    def function(self, bind: Bind, check: Check) -> Callable[..., list[Any]]:
        if self.dim is None:
            return self._whole(bind, check)
        return self._split(bind, check)

    def _settle(self, check: Check, status: Any, outs: Sequence[Any]) -> tuple[Any, ...]:
        """The results, once every device's call is known to have succeeded.

        A device whose callback fails stops, while the others wait for it in the next
        collective until XLA aborts the whole process. So no call fails alone: every device
        takes the largest status and all raise together, or none does. Never inside a `cond`:
        every device must reach the same collectives.
        """
        failed = lax.pmax(status, self.axes)
        # The check's callback runs only where a call failed: every device takes the same
        # branch, since all hold the same `failed`.
        token = lax.cond(failed != 0, check, lambda f: jnp.zeros((), STATUS.dtype), failed)
        # The results depend on the check (whose token is always 0), so nothing after it runs
        # before it; an optimization_barrier's unused token was removed by XLA, check and all.
        ok = token == 0
        return tuple(lax.select(jnp.broadcast_to(ok, o.shape), o, jnp.zeros_like(o)) for o in outs)

    def _split(self, bind: Bind, check: Check) -> Callable[..., list[Any]]:
        k = self.dim
        assert k is not None
        size = self.out_avals[0].shape[k] if self.out_avals else _size(self.in_avals, k)
        n = self.mesh.size
        rows = -(-size // n)
        full, rest = divmod(size, rows)  # `full` devices get `rows` rows, the next `rest`
        even = rows * n == size
        spec = P(*([None] * k), self.axes)
        split = [a.shape[k] == size for a in self.in_avals]  # size 1 there: not batched

        def call(ops: Sequence[Any], m: int) -> tuple[Any, tuple[Any, ...]]:
            status, outs = bind(*ops, out_avals=tuple(_with_dim(a, k, m) for a in self.out_avals))
            return status, tuple(_pad(o, k, rows) for o in outs)

        def rows_of(ops: Sequence[Any], start: Any, m: int) -> tuple[Any, tuple[Any, ...]]:
            part = [
                lax.dynamic_slice_in_dim(x, start, m, axis=k) if s else x
                for x, s in zip(ops, split)
            ]
            return call(part, m)

        def empty() -> tuple[Any, tuple[Any, ...]]:
            zeros = tuple(jnp.zeros(_with_dim(a, k, rows).shape, a.dtype) for a in self.out_avals)
            return jnp.zeros((), STATUS.dtype), zeros

        def body(*ops: Any) -> tuple[Any, ...]:
            if even:
                return self._settle(check, *call(ops, rows))
            # Uneven: every device holds the whole batch and takes its rows; the last devices
            # have fewer or none, and their result rows past the batch are padding.
            i = lax.axis_index(self.axes)
            branches = [
                lambda: rows_of(ops, i * rows, rows),
                (lambda: rows_of(ops, full * rows, rest)) if rest else empty,
                empty,
            ]
            which = jnp.where(i < full, 0, jnp.where(i == full, 1, 2))
            return self._settle(check, *lax.switch(which, branches))

        # An uneven batch reaches every device whole: padding a sharded input in place made
        # XLA fall back to "Involuntary full rematerialization" when it was sharded elsewhere.
        mapped = jax.shard_map(
            body,
            mesh=self.mesh,
            in_specs=tuple(spec if s and even else P() for s in split),
            out_specs=tuple(spec for _ in self.out_avals),
            check_vma=False,
        )

        def f(*xs: Any) -> list[Any]:
            ins = [self._reshard(x, spec if s and even else P()) for x, s in zip(xs, split)]
            outs = mapped(*ins)
            if not even:
                outs = [_take(self._reshard(o, P()), k, size) for o in outs]
            return self._typed(outs)

        return f

    def _whole(self, bind: Bind, check: Check) -> Callable[..., list[Any]]:
        def body(*ops: Any) -> tuple[Any, ...]:
            def zeros() -> tuple[Any, tuple[Any, ...]]:
                outs = tuple(jnp.zeros(a.shape, a.dtype) for a in self.out_avals)
                return jnp.zeros((), STATUS.dtype), outs

            first = lax.axis_index(self.axes) == 0
            status, outs = lax.cond(
                first, lambda: tuple(bind(*ops, out_avals=self.out_avals)), zeros
            )
            return tuple(_from_first(o, self.axes) for o in self._settle(check, status, outs))

        mapped = jax.shard_map(
            body,
            mesh=self.mesh,
            in_specs=tuple(P() for _ in self.in_avals),
            out_specs=tuple(P() for _ in self.out_avals),
            check_vma=False,
        )
        return lambda *xs: self._typed(mapped(*[self._reshard(x, P()) for x in xs]))

    def _reshard(self, x: Any, spec: P) -> Any:
        """With Explicit axes, `x` resharded to `spec` (shard_map takes only matching types);
        with auto axes `x` itself, the shard_map's `in_specs` say it."""
        if not self.explicit:
            return x
        return jax.reshard(x, jax.sharding.NamedSharding(self.mesh, spec))

    def _typed(self, outs: Sequence[Any]) -> list[Any]:
        """The results with the types the call declared (Explicit axes), or as they are."""
        if not self.explicit:
            return list(outs)
        return [
            o if t is None or t.mesh.empty else jax.reshard(o, t)
            for o, t in zip(outs, self.out_shardings)
        ]


def _plan(
    in_avals: list[Any],
    core_ndims: Sequence[int],
    out_avals: Sequence[Any],
    n: int,
    out_types: Sequence[Any],
) -> _Plan:
    n_lead = _n_lead(in_avals, core_ndims)
    batch = tuple(out_avals[0].shape[:n_lead]) if out_avals else _lead(in_avals, n_lead)
    context = jax.sharding.get_abstract_mesh()
    explicit = _explicit_mesh(in_avals)
    if not context.empty and context.size == n:
        mesh = context
    elif explicit is not None and explicit.size == n:
        mesh = explicit
    else:
        mesh = AbstractMesh((n,), (AXIS,))
    dim = _choose_dim(in_avals, batch, n)
    axes = tuple(mesh.axis_names)
    if dim is not None:
        # The batch dimension's own axes first: each device's rows are a block of its shard.
        own = _axes_of(_dim_spec(in_avals, dim, batch[dim]))
        axes = tuple(a for a in own if a in axes) + tuple(a for a in axes if a not in own)
    explicit = any(t == AxisType.Explicit for t in mesh.axis_types)
    out_shardings = tuple(getattr(t, "sharding", None) for t in out_types)
    return _Plan(mesh, axes, tuple(in_avals), tuple(out_avals), dim, explicit, out_shardings)


def _choose_dim(in_avals: list[Any], batch: tuple, n: int) -> int | None:
    """The batch dimension to split: a sharded one (Explicit axes), else the first that
    divides evenly over the devices, else the largest; None for a batch of one (or none)."""
    for d, size in enumerate(batch):
        if size > 1 and _axes_of(_dim_spec(in_avals, d, size)):
            return d
    for d, size in enumerate(batch):
        if size > 1 and size % n == 0:
            return d
    if batch and max(batch) > 1:
        return batch.index(max(batch))
    return None


def _n_lead(in_avals: Sequence[Any], core_ndims: Sequence[int]) -> int:
    return max((len(a.shape) - nd for a, nd in zip(in_avals, core_ndims)), default=0)


def _lead(in_avals: Sequence[Any], n_lead: int) -> tuple[int, ...]:
    return tuple(max(a.shape[d] for a in in_avals) for d in range(n_lead))


def _size(in_avals: Sequence[Any], k: int) -> int:
    return max(a.shape[k] for a in in_avals)


def _explicit_mesh(in_avals: Sequence[Any]) -> AbstractMesh | None:
    """The mesh of the first input whose type carries Explicit axes, or None."""
    for a in in_avals:
        mesh = getattr(getattr(a, "sharding", None), "mesh", None)
        if not isinstance(mesh, AbstractMesh) or mesh.empty:
            continue
        if any(t == AxisType.Explicit for t in mesh.axis_types):
            return mesh
    return None


def _dim_spec(in_avals: Sequence[Any], d: int, size: int) -> Any:
    """The spec entry of dimension `d` of the first input of that size sharded there."""
    for a in in_avals:
        sharding = getattr(a, "sharding", None)
        spec = getattr(sharding, "spec", None) or ()
        if len(spec) > d and spec[d] is not None and a.shape[d] == size:
            return spec[d]
    return None


def _axes_of(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


def _with_dim(a: Any, k: int, m: int) -> jax.ShapeDtypeStruct:
    shape = list(a.shape)
    shape[k] = m
    return jax.ShapeDtypeStruct(tuple(shape), a.dtype)


def _take(x: Any, k: int, m: int) -> Any:
    return x if x.shape[k] == m else lax.slice_in_dim(x, 0, m, axis=k)


def _pad(x: Any, k: int, m: int) -> Any:
    if x.shape[k] == m:
        return x
    widths = [(0, 0)] * x.ndim
    widths[k] = (0, m - x.shape[k])
    return jnp.pad(x, widths)


def _from_first(x: Any, axes: tuple[str, ...]) -> Any:
    """`x` of the first device on every device, bit for bit; the others hold zeros.

    A sum of the bits as unsigned integers: exact for every dtype (NaN payloads, -0.0), where
    a float sum would turn -0.0 + 0.0 into 0.0. (`lax.pbroadcast` has no CPU lowering.)
    """
    dtype = jnp.dtype(x.dtype)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return lax.complex(_from_first(jnp.real(x), axes), _from_first(jnp.imag(x), axes))
    if dtype == jnp.bool_:
        return lax.psum(x.astype(jnp.uint8), axes).astype(jnp.bool_)
    bits = dtype.itemsize * 8 if _dtypes.itemsize_bits(dtype) >= 8 else 0
    if bits == 0:  # packed sub-byte types: their values are exact in a wider type
        wide = jnp.int8 if jnp.issubdtype(dtype, jnp.integer) else jnp.float32
        return _from_first(x.astype(wide), axes).astype(dtype)
    if jnp.issubdtype(dtype, jnp.integer):
        return lax.psum(x, axes)
    unsigned = jnp.dtype(f"uint{bits}")
    return lax.bitcast_convert_type(lax.psum(lax.bitcast_convert_type(x, unsigned), axes), dtype)


# Exceptions of guarded calls, by the status that reported them: random keys, so a key from
# another process (or a stale one) never names an exception of this one.
_FAILURES: dict[int, BaseException] = {}
_FAILURES_LOCK = threading.Lock()


def _remember(e: BaseException) -> int:
    key = secrets.randbits(31) or 1
    with _FAILURES_LOCK:
        _FAILURES[key] = e
        while len(_FAILURES) > 64:  # only the latest few can still be asked for
            del _FAILURES[next(iter(_FAILURES))]
    return key


def guard_buffer(trampoline: Callable[..., None]) -> Callable[..., None]:
    """A `buffer_callback` function whose first output is the status of `trampoline`'s."""

    def guarded(ctx: Any, outs: Any, *ins: Any) -> None:
        status = outs[0].__array__()
        try:
            trampoline(ctx, outs[1:], *ins)
        except Exception as e:
            status[...] = _remember(e)
            return
        status[...] = 0

    return guarded


def unpacked(aval: Any) -> jax.ShapeDtypeStruct:
    """`aval`, with a packed sub-byte dtype (int4, float4_e2m1fn, ...) widened to one that
    holds each of its values exactly."""
    dtype = np.dtype(aval.dtype)
    if _dtypes.itemsize_bits(dtype) >= 8:
        return jax.ShapeDtypeStruct(aval.shape, dtype)
    if jnp.issubdtype(dtype, jnp.unsignedinteger):
        return jax.ShapeDtypeStruct(aval.shape, np.uint8)
    wide = np.int8 if jnp.issubdtype(dtype, jnp.integer) else np.float32
    return jax.ShapeDtypeStruct(aval.shape, wide)


def guard_pure(
    host: Callable[..., Any], in_avals: Sequence[Any], out_avals: Sequence[Any]
) -> Callable[..., list[Any]]:
    """A `pure_callback` function returning the status of `host`'s call, then its results.

    `host` receives its inputs as `in_avals`' dtypes and its results are returned as
    `out_avals`' (the callback's own may be wider: see `unpacked`).
    """

    def guarded(*ins: Any) -> list[Any]:
        try:
            ins = tuple(np.asarray(x).astype(a.dtype, copy=False) for x, a in zip(ins, in_avals))
            outs = host(*ins)
        except Exception as e:
            zeros = [np.zeros(a.shape, a.dtype) for a in out_avals]
            return [np.asarray(_remember(e), STATUS.dtype), *zeros]
        outs = [np.asarray(o).astype(a.dtype, copy=False) for o, a in zip(outs, out_avals)]
        return [np.zeros((), STATUS.dtype), *outs]

    return guarded


def check(failed: Any, *, name: str, io: bool, buffer_callback: Any) -> Any:
    """Stages, on every device, a callback raising the exception of status `failed` (the
    largest of all devices' statuses), or `OTHER_PROCESS` where this process never saw it.

    Returns a token for the results to depend on. `io`: the call has effects, so its check
    must not be removed with unused results. `buffer_callback`: None for `pure_callback`.
    """

    def raise_if(key: int) -> None:
        if key:
            with _FAILURES_LOCK:
                e = _FAILURES.get(key)
            if e is None:
                raise _errors.HostError(OTHER_PROCESS.format(name=name))
            # A new exception per device: the devices raise it at once, in their own threads.
            raise type(e)(*e.args) if isinstance(e, _errors.HostError) else e

    if buffer_callback is not None:

        def on_buffers(ctx: Any, out: Any, key: Any) -> None:
            del ctx
            raise_if(int(key.__array__()))
            out[0].__array__()[...] = 0

        return buffer_callback(on_buffers, [STATUS], has_side_effect=io)(failed)[0]

    def on_arrays(key: Any) -> np.ndarray:
        raise_if(int(key))
        return np.zeros((), STATUS.dtype)

    if io:
        return io_callback(on_arrays, STATUS, failed)
    return jax.pure_callback(on_arrays, STATUS, failed)
