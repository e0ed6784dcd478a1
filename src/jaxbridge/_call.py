"""One host call: the host-side trampoline and its lowering into the JAX program.

A call is the primitive `host_call_p`. On CPU it lowers through
`jax.experimental.buffer_callback`: the host function reads XLA's input buffers as zero-copy
NumPy views and its result is written straight into XLA's output buffers. Elsewhere (GPU, where
`np.asarray` of a buffer fails, jax#38173), for packed sub-byte dtypes (int4, float4_e2m1fn,
...: see `is_packed`), or when asked, it lowers through `jax.pure_callback`. Under a `jit` over
several devices it lowers as a `shard_map` of one call per device (`_sharding.py`).
`io=True` is the same primitive carrying the effect of `io_callback(ordered=False)`, so JAX
never removes it as dead code, and XLA's custom call is marked as having a side effect.
`ordered=True` uses an ordered `jax.experimental.io_callback` inside a `custom_vmap`. Batching
follows the expand_dims convention (the batch is the leading dimensions, size 1 where an operand
is unbatched), so a batch is ONE host call.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import core as jax_core
from jax._src import callback as _jax_callback
from jax._src import dispatch, effects
from jax._src import dtypes as _dtypes
from jax._src.custom_batching import custom_vmap_p as _custom_vmap_p
from jax.experimental import io_callback
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from . import _errors, _sharding, _spec
from ._batching import AbstractBatching, Sequential, Vectorized

try:  # jax 0.10 ships it as experimental; keep working if it moves or goes
    from jax.experimental.buffer_callback import buffer_callback as _buffer_callback
except ImportError:  # pragma: no cover
    _buffer_callback = None

LOWERINGS = ("auto", "buffer", "pure")


def is_packed(dtype: Any) -> bool:
    """Whether XLA packs `dtype` several elements to a byte (int2, int4, float4_e2m1fn, ...).

    NumPy (through ml_dtypes) stores such dtypes one byte per element, so a packed XLA buffer
    cannot be viewed as a NumPy array: `np.asarray` of it would read and write past its end.
    """
    return _dtypes.itemsize_bits(dtype) < 8


def choose_lowering(preference: str, *, on_cpu: bool = True) -> str:
    """'buffer' or 'pure', from the argument, then JAXBRIDGE_LOWERING, then the platform."""
    if preference == "auto":
        preference = os.environ.get("JAXBRIDGE_LOWERING", "auto")
    if preference not in LOWERINGS:
        raise ValueError(_errors.BAD_LOWERING.format(got=preference))
    if preference == "auto":
        return "buffer" if _buffer_callback is not None and on_cpu else "pure"
    if preference == "buffer" and _buffer_callback is None:  # pragma: no cover
        raise RuntimeError("this jax has no jax.experimental.buffer_callback; use 'pure'.")
    return preference


class HostCall:
    """Everything the host needs to run one wrapped function at one input signature.

    Built once per signature at trace time; `__call__`-free and allocation-light because every
    call (and, under `Sequential`, every batch element) goes through it.
    """

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        split: _spec.Split,
        in_avals: Sequence[jax.ShapeDtypeStruct],
        spec: _spec.ResultSpec,
        batching: AbstractBatching,
        init: Callable[[], Any] | None = None,
        states: threading.local | None = None,
        discard: bool = False,
    ):
        self.name = name
        self.fn = fn
        self.split = split
        self.in_avals = tuple(in_avals)
        self.core_ndims = tuple(len(a.shape) for a in in_avals)
        self.spec = spec
        self.batching = batching
        self.init = init
        self.rule = f"host function {name!r}"
        # `io=True`/`ordered=True` with `result=None`: no result, whatever `fn` returns is
        # dropped (as `io_callback(fn, None, x)`).
        self.discard = discard
        # Per-thread `init()` state, shared by all signatures of one wrapped function.
        self._local = states if states is not None else threading.local()
        # `(primals, tangents) -> (primals_out, tangents_out)`: the function's derivative rule,
        # set by `jaxbridge.Host` for the JVP rule of `host_call_p`.
        self.jvp_rule: Callable[..., Any] | None = None
        # Fast paths for the common shapes of a call (every call is a hot path): positional
        # array arguments only, and a single array result.
        n = len(in_avals)
        self._positional_only = not any(
            v is not None for v in split.static_leaves
        ) and split.treedef == jax.tree_util.tree_structure((tuple(range(n)), {}))
        self._single = spec.treedef == jax.tree_util.tree_structure(0)

    # -- host side ------------------------------------------------------------------------

    def local_state(self) -> Any:
        """The calling thread's `init()` state (created on first use), or None."""
        if self.init is None:
            return None
        try:
            return self._local.state
        except AttributeError:
            self._local.state = self.init()
            return self._local.state

    def invoke(self, arrays: Sequence[Any], state: Any = None) -> Any:
        if self._positional_only and self.init is None:
            return self.fn(*arrays)
        args, kwargs = self.split.rebuild(arrays)
        if self.init is not None:
            kwargs["state"] = state
        return self.fn(*args, **kwargs)

    def check(self, value: Any, outs: Sequence[np.ndarray], lead: tuple[int, ...] = ()) -> None:
        if self.discard:
            return
        if self._single and type(value) is np.ndarray:
            aval = self.spec.avals[0]
            if value.dtype == aval.dtype and value.shape == lead + aval.shape:
                outs[0][...] = value
                return
        _spec.check_result(self.rule, self.spec, value, outs, lead)

    def batch_shape(self, ins: Sequence[np.ndarray], outs: Sequence[np.ndarray]) -> tuple:
        return self.batch_of([x.shape for x in ins], [o.shape for o in outs[:1]])

    def batch_of(self, in_shapes: Sequence[tuple], out_shapes: Sequence[tuple]) -> tuple:
        """The batch: the leading dimensions of inputs of these shapes (or of the first output)."""
        if in_shapes and all(len(s) == nd for s, nd in zip(in_shapes, self.core_ndims)):
            return ()
        if in_shapes:
            leads = [tuple(s[: len(s) - nd]) for s, nd in zip(in_shapes, self.core_ndims)]
            if leads.count(leads[0]) == len(leads):  # the common case, without NumPy's call
                return leads[0]
            return np.broadcast_shapes(*leads)
        if out_shapes:
            shape = tuple(out_shapes[0])
            return shape[: len(shape) - len(self.spec.avals[0].shape)]
        return ()

    def run(
        self, ins: Sequence[np.ndarray], outs: Sequence[np.ndarray], batch: tuple | None = None
    ) -> None:
        """One call from XLA: unbatched, or a batch handed to the batching strategy.

        `batch` is the leading dimensions when the caller knows them (from the lowering's
        shapes); None to read them from `ins`.
        """
        if batch is None:
            batch = self.batch_shape(ins, outs)
        if batch:
            self.batching.run(self, batch, ins, outs)
        else:
            self.check(self.invoke(ins, self.local_state()), outs)

    def fail(self, e: BaseException) -> BaseException:
        """The error a host call raises for `e`, raised in the host function (recorded, and
        named after the function); a strategy's own `buffer_call` raises it too."""
        _errors.record(e)
        return _errors.HostError(_errors.format_host_exception(self.name, e))

    def buffer_trampoline(
        self, in_shapes: Sequence[tuple], out_shapes: Sequence[tuple], *, io: bool = False
    ) -> Callable[..., None]:
        """The `buffer_callback` function of one lowering, whose buffer shapes are these: the
        batching strategy's own where it has one for them (`AbstractBatching.buffer_call`),
        else the generic one.

        The batch follows from the shapes, so it is found here once, not on every call.
        """
        batch = self.batch_of(in_shapes, out_shapes)
        if io:
            return functools.partial(self._io_buffer_call, batch)
        own = self.batching.buffer_call(self, in_shapes, out_shapes)
        if own is not None:
            return own
        return functools.partial(self._buffer_call, batch, len(out_shapes) == 1)

    def _buffer_call(self, batch: tuple, single: bool, ctx: Any, outs: Any, *ins: Any) -> None:
        """A pure call: the host function reads XLA's buffers through zero-copy views.

        XLA frees or reuses those buffers once the call returns, so a view the function keeps
        would silently change value. Every view of an input (`x[1:]`, a reshape, a vmap
        element) holds a reference to the array made here, so a reference count that grew
        during the call means the function kept one: that raises, naming the argument.
        """
        del ctx  # the CPU stream: nothing to synchronise with
        # A CPU `Buffer`'s own `__array__` makes the same zero-copy view as `np.asarray`
        # (whose array-protocol probing costs several times more) and ndarray's returns itself.
        arrays = [b.__array__() for b in ins]
        for a in arrays:
            # XLA owns these buffers: a host function that writes to its input must fail
            # loudly, not corrupt the caller's array.
            a.setflags(write=False)
        a = None  # only `arrays` holds them now: what `_kept` compares against
        # The per-call cost is one or two reference counts; `_kept` runs only when they differ.
        refcount = sys.getrefcount
        before = refcount(arrays[0]) if len(arrays) == 1 else sum(map(refcount, arrays))
        try:
            self.run(
                arrays, [outs[0].__array__()] if single else [b.__array__() for b in outs], batch
            )
        except Exception as e:
            raise self.fail(e) from e
        after = refcount(arrays[0]) if len(arrays) == 1 else sum(map(refcount, arrays))
        if after != before:
            kept = self._kept(arrays)
            if kept is not None:
                raise self.fail(_errors.KeptArgumentError(self._kept_message(kept)))

    def _kept(self, arrays: list[np.ndarray]) -> int | None:
        """The first of `arrays` referenced by more than the list that holds it, or None."""
        # jaxlib keeps a reference to the last NumPy array handed to JAX (`jnp.asarray(x)` or
        # a jitted call on `x` inside the host function) until the next transfer: make one.
        jax.device_put(np.zeros((), np.int8))
        control = [object() for _ in arrays]  # held by a list only, counted the same way
        # A pool's worker thread may drop its references to the chunks just after it reports
        # them done: give it a moment before calling a reference kept.
        for _ in range(50):
            counts = [sys.getrefcount(a) for a in arrays]
            baseline = [sys.getrefcount(c) for c in control]
            kept = [i for i in range(len(arrays)) if counts[i] > baseline[i]]
            if not kept:
                return None
            if isinstance(self.batching, (Sequential, Vectorized)):
                break  # every reference of these in-thread strategies is gone by now
            time.sleep(0.001)
        return kept[0]

    def _kept_message(self, i: int) -> str:
        return _errors.KEPT_ARGUMENT.format(name=self.name, arg=self.split.describe(i, self.fn))

    def _io_buffer_call(self, batch: tuple, ctx: Any, outs: Any, *ins: Any) -> None:
        """An io call: the host function gets copies it owns, so it may keep its arguments
        (`log.append(x)`, as JAX's own io tests do)."""
        del ctx
        arrays = [b.__array__().copy() for b in ins]
        for a in arrays:
            a.setflags(write=False)  # as in a pure call: writing to an argument is a bug
        try:
            self.run(arrays, [b.__array__() for b in outs], batch)
        except Exception as e:
            raise self.fail(e) from e

    def pure_trampoline(self, *ins: np.ndarray) -> list[np.ndarray]:
        arrays = [np.asarray(a) for a in ins]
        for a in arrays:
            a.flags.writeable = False
        try:
            batch = self.batch_shape(arrays, ())
            outs = [np.empty(batch + a.shape, a.dtype) for a in self.spec.avals]
            self.run(arrays, outs)
        except Exception as e:
            raise self.fail(e) from e
        return outs


# `io=True` carries JAX's own effect of `io_callback(ordered=False)`, so JAX treats it exactly as
# that: never removed as dead code, allowed in control flow, refused by `vmap` of `cond` and of a
# `while_loop` with a batched predicate (where JAX would run the call for elements whose branch
# is not taken, or whose loop has finished), and by `jax.checkpoint`.
host_io_effect = _jax_callback._IOEffect


def emit(call: HostCall, dynamic: Sequence[Any], *, effect: str, lowering: str) -> list[jax.Array]:
    """Stages one host call into the current trace; returns the flat results.

    `effect` is "pure" (may be removed or duplicated), "io" (never removed, any order) or
    "ordered" (never removed, program order).
    """
    avals = tuple(call.spec.avals)
    if effect == "ordered":
        return list(_ordered(call, avals)(*dynamic))
    if lowering == "auto":  # resolved now, so the environment variable is read at trace time
        lowering = os.environ.get("JAXBRIDGE_LOWERING", "auto")
    io = effect == "io"
    return host_call_p.bind(*dynamic, call=call, out_avals=avals, lowering=lowering, io=io)


# A primitive of our own rather than calling buffer_callback/pure_callback while tracing: the
# lowering rule sees the platform and the device context, so the choice between the two is
# made per lowering, not guessed from jax.default_backend().
host_call_p = Primitive("host_call")
host_call_p.multiple_results = True


def _host_call_abstract_eval(*args, call, out_avals, lowering, io):
    del lowering
    # With Explicit mesh axes a batched result is sharded along its batch as its inputs are
    # (the lowering splits the call so); elsewhere JAX's default.
    shardings = [_sharding.out_sharding(args, call.core_ndims, a.shape) for a in out_avals]
    avals = [
        jax_core.ShapedArray(a.shape, a.dtype)
        if s is None
        else jax_core.ShapedArray(a.shape, a.dtype, sharding=s)
        for a, s in zip(out_avals, shardings)
    ]
    return avals, ({host_io_effect} if io else effects.no_effects)


host_call_p.def_effectful_abstract_eval(_host_call_abstract_eval)
host_call_p.def_impl(functools.partial(dispatch.apply_primitive, host_call_p))


def _host_call_batch_rule(args, dims, *, call, out_avals, lowering, io):
    # The expand_dims convention: every operand gets the new batch dimension in front (size 1
    # where unbatched), so the trampoline reads the batch from the leading dimensions.
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    moved = [
        jnp.expand_dims(x, 0) if d is None else jnp.moveaxis(x, d, 0) for x, d in zip(args, dims)
    ]
    batched = tuple(jax.ShapeDtypeStruct((size, *a.shape), a.dtype) for a in out_avals)
    out = host_call_p.bind(*moved, call=call, out_avals=batched, lowering=lowering, io=io)
    return out, [0] * len(out)


batching.primitive_batchers[host_call_p] = _host_call_batch_rule


def _host_call_jvp_rule(primals, tangents, *, call, out_avals, lowering, io):
    """Routes a derivative of the bare primitive to the host function's own rule.

    JAX inlines a `custom_jvp` function that it partially evaluates with some inputs unknown
    (`partial_eval.py`: "we don't need to keep the custom JVP rule around"), as scan's partial
    evaluation under `grad` does; a second derivative then meets this primitive directly.
    """
    out = host_call_p.bind(*primals, call=call, out_avals=out_avals, lowering=lowering, io=io)
    if call.jvp_rule is None or not out_avals:
        raise ValueError(f"no derivative rule reaches host function {call.name!r}")
    core_avals = call.spec.avals
    n_batch = len(out_avals[0].shape) - len(core_avals[0].shape)
    lead = tuple(out_avals[0].shape[:n_batch])
    inexact = [jnp.issubdtype(a.dtype, jnp.inexact) for a in call.in_avals]
    nonzero = [i for i, t in enumerate(tangents) if type(t) is not ad.Zero and inexact[i]]

    def rule(primals, nz_tangents):
        full = [
            jax.custom_derivatives.SymbolicZero(
                jax_core.ShapedArray(a.shape, a.dtype).to_tangent_aval()
            )
            for a in call.in_avals
        ]
        for i, t in zip(nonzero, nz_tangents):
            full[i] = t
        _, t_out = call.jvp_rule(list(primals), full)
        return [t for t, a in zip(t_out, core_avals) if jnp.issubdtype(a.dtype, jnp.inexact)]

    # The expand_dims convention: leading dimensions (size 1 where unbatched) are the batch.
    bcast = lambda x, a: jnp.broadcast_to(x, lead + tuple(a.shape))  # noqa: E731
    ps = [bcast(p, a) for p, a in zip(primals, call.in_avals)]
    ts = [bcast(tangents[i], call.in_avals[i]) for i in nonzero]
    for _ in range(n_batch):
        rule = jax.vmap(rule)
    t_inexact = iter(rule(ps, ts))
    t_out = [
        next(t_inexact) if jnp.issubdtype(a.dtype, jnp.inexact) else ad.Zero(a.to_tangent_aval())
        for a in (jax_core.ShapedArray(a.shape, a.dtype) for a in out_avals)
    ]
    return out, t_out


ad.primitive_jvps[host_call_p] = _host_call_jvp_rule


def _host_call_transpose_rule(cts, *args, call, out_avals, lowering, io):
    # What JAX raises for its callbacks ("Pure callbacks do not support transpose"), naming
    # the function: a host function is not known to be linear.
    del cts, args, out_avals, lowering
    raise ValueError(_errors.NO_TRANSPOSE.format(name=call.name, kind="io" if io else "pure"))


ad.primitive_transposes[host_call_p] = _host_call_transpose_rule


def _host_call_lowering(ctx, *args, call, out_avals, lowering, io):
    if _sharding.is_spread(ctx):
        # A jit over several devices: a shard_map of the per-device call (each device's rows,
        # or one whole-array call broadcast to all), lowered again inside it per device.
        def bind(*ops, out_avals):
            status, *outs = host_shard_call_p.bind(
                *ops, call=call, out_avals=out_avals, lowering=lowering, io=io
            )
            return status, tuple(outs)

        on_cpu = tuple(ctx.module_context.platforms) == ("cpu",)
        buffer = _buffer_callback if choose_lowering(lowering, on_cpu=on_cpu) == "buffer" else None
        check = functools.partial(_sharding.check, name=call.name, io=io, buffer_callback=buffer)
        return _sharding.lower(
            ctx, args, core_ndims=call.core_ndims, out_avals=out_avals, bind=bind, check=check
        )
    return _lower_local(ctx, args, call, out_avals, lowering, io, guarded=False)


def _lower_local(ctx, args, call, out_avals, lowering, io, *, guarded):
    """One callback on each device that runs this computation.

    `guarded`: exceptions do not fail the callback; its first result is a status (0, or the
    number under which `_sharding` keeps the exception), for a sharded call's devices to fail
    together (see `_sharding.check`).
    """
    on_cpu = tuple(ctx.module_context.platforms) == ("cpu",)
    # Packed sub-byte buffers cannot be NumPy views; pure_callback hands over unpacked copies.
    packed = any(is_packed(a.dtype) for a in (*ctx.avals_in, *out_avals))
    result = [_sharding.STATUS, *out_avals] if guarded else list(out_avals)
    if not packed and choose_lowering(lowering, on_cpu=on_cpu) == "buffer":
        assert _buffer_callback is not None
        # has_side_effect: XLA must not remove an io call whose results are unused.
        trampoline = call.buffer_trampoline(
            [a.shape for a in ctx.avals_in], [a.shape for a in out_avals], io=io
        )
        if guarded:
            trampoline = _sharding.guard_buffer(trampoline)
        fn = _buffer_callback(trampoline, result, has_side_effect=io)
    else:
        host = call.pure_trampoline
        wide_in = list(ctx.avals_in)
        if guarded:
            # Packed buffers through pure_callback left a sharded jit's other devices waiting
            # in their collectives (jax 0.10.2): they cross in a wider type both ways, and the
            # host function still receives and returns its own dtypes.
            wide_in = [_sharding.unpacked(a) for a in ctx.avals_in]
            wide_out = [_sharding.unpacked(a) for a in out_avals]
            host = _sharding.guard_pure(host, ctx.avals_in, wide_out)
            result = [_sharding.STATUS, *wide_out]
        callback = functools.partial(io_callback if io else jax.pure_callback, host, result)

        def fn(*a):
            out = callback(*(x.astype(w.dtype) for x, w in zip(a, wide_in)))
            if guarded:
                out = [out[0], *(o.astype(r.dtype) for o, r in zip(out[1:], out_avals))]
            return out

    return mlir.lower_fun(fn, multiple_results=True)(ctx, *args)


mlir.register_lowering(host_call_p, _host_call_lowering)


# One device's part of a call in a sharded jit, staged only by `_sharding` while lowering: a
# host call whose exceptions become a status result (first), so that no device fails alone
# and leaves the others waiting in a collective (XLA aborts the process after 40 s).
host_shard_call_p = Primitive("host_shard_call")
host_shard_call_p.multiple_results = True


def _host_shard_call_abstract_eval(*args, call, out_avals, lowering, io):
    del args, call, lowering
    avals = [jax_core.ShapedArray(a.shape, a.dtype) for a in (_sharding.STATUS, *out_avals)]
    return avals, ({host_io_effect} if io else effects.no_effects)


host_shard_call_p.def_effectful_abstract_eval(_host_shard_call_abstract_eval)


def _host_shard_call_lowering(ctx, *args, call, out_avals, lowering, io):
    return _lower_local(ctx, args, call, out_avals, lowering, io, guarded=True)


mlir.register_lowering(host_shard_call_p, _host_shard_call_lowering)


@functools.lru_cache(maxsize=4096)
def _ordered(call: HostCall, avals: tuple[jax.ShapeDtypeStruct, ...]) -> Callable[..., Any]:
    """An ordered io_callback that batches as one host call.

    JAX refuses to vmap an ordered effect; `custom_vmap` lets the batched call stay one
    ordered callback whose host side loops over the batch in order. Nested vmaps recurse.
    """

    @jax.custom_batching.custom_vmap
    def f(*dynamic):
        return tuple(io_callback(call.pure_trampoline, list(avals), *dynamic, ordered=True))

    def _rule(axis_size, in_batched, *dynamic):
        moved = [x if b else jnp.expand_dims(x, 0) for x, b in zip(dynamic, in_batched)]
        batched = tuple(jax.ShapeDtypeStruct((axis_size, *a.shape), a.dtype) for a in avals)
        out = _ordered(call, batched)(*moved)
        return out, tuple(True for _ in out)

    # custom_vmap copies the rule's attributes onto the `rule` parameter of its primitive: the
    # transpose rule below finds the host function's name there.
    _rule.jaxbridge_host_name = call.name  # pyright: ignore[reportFunctionMemberAccess]
    f.def_vmap(_rule)
    return f


def _ordered_transpose_rule(cts, *args, rule, **params):
    """`custom_vmap_call` has no transpose in JAX; for an ordered host call say so by name."""
    del cts, args, params
    name = getattr(rule, "jaxbridge_host_name", None)
    if name is None:  # someone else's custom_vmap: JAX's own error
        raise NotImplementedError(
            "Transpose rule (for reverse-mode differentiation) for 'custom_vmap_call' not "
            "implemented"
        )
    raise ValueError(_errors.NO_TRANSPOSE.format(name=name, kind="ordered io"))


if _custom_vmap_p not in ad.primitive_transposes:  # never replace a rule JAX may add
    ad.primitive_transposes[_custom_vmap_p] = _ordered_transpose_rule
