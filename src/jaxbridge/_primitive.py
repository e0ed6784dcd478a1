"""The host-call primitive `host_call_p`: its abstract evaluation, batching, JVP, transpose,
dead-code and lowering rules (the host side it calls is `_call.HostCall`).

On CPU a call lowers through `jax.experimental.buffer_callback`: the host function reads XLA's
input buffers as zero-copy NumPy views and its result is written straight into XLA's output
buffers. Elsewhere (GPU, where `np.asarray` of a buffer fails, jax#38173), for packed sub-byte
dtypes (int4, float4_e2m1fn, ...: see `is_packed`), or when asked, it lowers through
`jax.pure_callback`. Under a `jit` over several devices it lowers as a `shard_map` of one call
per device (`_sharding.py`). `io=True` is the same primitive carrying the effect of
`io_callback(ordered=False)`, so JAX never removes it as dead code, and XLA's custom call is
marked as having a side effect. `ordered=True` uses an ordered `jax.experimental.io_callback`
inside a `custom_vmap`. Batching follows the expand_dims convention (the batch is the leading
dimensions, size 1 where an operand is unbatched), so a batch is ONE host call.

Unused outputs are dead code (`_host_call_dce_rule`): a program that uses only some outputs of
a call stages `call.restrict(used)` in its place, whose XLA buffers are the used outputs only;
a pure call none of whose outputs is used is removed, an io call never is.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import core as jax_core
from jax._src import callback as _jax_callback
from jax._src import dispatch, effects
from jax._src import dtypes as _dtypes
from jax._src.custom_batching import custom_vmap_p as _custom_vmap_p
from jax._src.interpreters import partial_eval as pe
from jax.experimental import io_callback
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from . import _errors, _sharding
from ._base import InPlace, NativeCall
from ._call import HostCall

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


# XLA runs a callback on whichever of its threads reaches it: the caller's, or one of its own
# pool's (a program of more than a few kernels hands them out). A pool thread is not Python's,
# so CPython makes a thread state for the callback's GIL and deletes it again when the call
# returns: about 50 µs a call (a `scan` of 200 host calls on CheetahRun took 55 ms on a pool
# thread against 44.5 ms on the caller's), and every `threading.local` is lost between calls.
# The first call on a thread takes one more reference to its thread state, which it keeps, so
# later calls there reuse it. A thread counts once, and only so many: XLA's pools are fixed.
_KEPT_THREADS: set[int] = set()
_KEEP_AT_MOST = 256
_ensure = getattr(getattr(ctypes, "pythonapi", None), "PyGILState_Ensure", None)


def keep_thread_state() -> None:
    """Keeps the calling thread's Python thread state alive past this call (see above)."""
    ident = threading.get_ident()
    if ident in _KEPT_THREADS or _ensure is None or len(_KEPT_THREADS) >= _KEEP_AT_MOST:
        return
    _KEPT_THREADS.add(ident)
    _ensure()  # holds the GIL already: only counts one more use of this thread's state


def _on_any_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, keeping the thread state of each thread XLA calls it on."""
    kept = _KEPT_THREADS
    get_ident = threading.get_ident

    def call(*args: Any) -> Any:
        if get_ident() not in kept:
            keep_thread_state()
        return fn(*args)

    return call


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
    if not out_avals:  # an io call whose results are unused or that has none
        return out, []
    jvp_rule = call.full.jvp_rule
    if jvp_rule is None:
        raise ValueError(f"no derivative rule reaches host function {call.name!r}")
    core_avals = call.spec.avals  # every output of the host function, used or not
    n_batch = len(out_avals[0].shape) - len(call.out_avals[0].shape)
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
        _, t_out = jvp_rule(list(primals), full)
        # The tangents of the outputs this (restricted) call stages.
        return [
            t
            for t, a, u in zip(t_out, core_avals, call.used_outputs)
            if u and jnp.issubdtype(a.dtype, jnp.inexact)
        ]

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


def _host_call_dce_rule(used_outs, eqn):
    """Unused outputs are dead code: the call is restricted to the used ones.

    The host function still receives every input; a pure call none of whose outputs is used
    is removed (as JAX removes a `pure_callback`), an io call is kept (with no outputs) because
    its side effect is the point.
    """
    call, io = eqn.params["call"], eqn.params["io"]
    n_in = len(eqn.invars)
    if not any(used_outs) and not io:
        return [False] * n_in, None
    if all(used_outs):
        return [True] * n_in, eqn
    # `used_outs` flags this eqn's outputs, which are the used outputs of `call`.
    flags = iter(used_outs)
    used = [u and next(flags) for u in call.used_outputs]
    params = dict(
        eqn.params,
        call=call.restrict(used),
        out_avals=tuple(a for a, u in zip(eqn.params["out_avals"], used_outs) if u),
    )
    outvars = [v for v, u in zip(eqn.outvars, used_outs) if u]
    new_eqn = pe.new_jaxpr_eqn(
        eqn.invars, outvars, host_call_p, params, eqn.effects, eqn.source_info, eqn.ctx
    )
    return [True] * n_in, new_eqn


pe.dce_rules[host_call_p] = _host_call_dce_rule


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
        if isinstance(trampoline, NativeCall):
            if not guarded:  # compiled code: XLA calls it with the buffers, no Python
                return _lower_native(ctx, args, trampoline, out_avals)
            trampoline = trampoline.fallback  # a sharded call's status is the Python side's
        aliases = None
        if isinstance(trampoline, InPlace):  # outputs written into inputs' buffers
            aliases = dict(trampoline.aliases)
            trampoline = trampoline.fn
        if guarded:
            trampoline = _sharding.guard_buffer(trampoline)
            if aliases:  # the status is the first output
                aliases = {j: k + 1 for j, k in aliases.items()}
        fn = _buffer_callback(
            _on_any_thread(trampoline),
            result,
            has_side_effect=io,
            input_output_aliases=aliases or None,
        )
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
        callback = functools.partial(
            io_callback if io else jax.pure_callback, _on_any_thread(host), result
        )

        def fn(*a):
            out = callback(*(x.astype(w.dtype) for x, w in zip(a, wide_in)))
            if guarded:
                out = [out[0], *(o.astype(r.dtype) for o, r in zip(out[1:], out_avals))]
            return out

    return mlir.lower_fun(fn, multiple_results=True)(ctx, *args)


def _lower_native(ctx, args, native: NativeCall, out_avals):
    """A strategy's compiled call (`NativeCall`): one FFI custom call with its attributes."""
    result = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in out_avals]
    call = jax.ffi.ffi_call(
        native.target, result, input_output_aliases=dict(native.aliases) or None
    )

    def fn(*a):
        return call(*a, **native.attributes)

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
        host = _on_any_thread(call.pure_trampoline)
        return tuple(io_callback(host, list(avals), *dynamic, ordered=True))

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
