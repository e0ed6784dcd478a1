"""A linear call whose transpose is another function, with a batching rule.

`host_linear_p` computes `fwd(*residuals, *linear)`, linear in `linear`; its transpose computes
`bwd(*residuals, *cotangents)`. A host JVP cannot be transposed by JAX (jax#30401), and
`jax.custom_derivatives.linear_call` has no batching rule, so jaxbridge carries its own. `fwd`
and `bwd` are JAX-traceable functions (typically staging a host call), so batching is `vmap` of
them and the batched host call is still ONE call.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import core as jax_core
from jax._src.interpreters import partial_eval as pe
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

host_linear_p = Primitive("host_linear")
host_linear_p.multiple_results = True


class _Fn:
    """A function as a primitive parameter: hashable by identity, with a name for messages."""

    __slots__ = ("fn", "missing", "__weakref__")

    def __init__(self, fn: Callable[..., Any] | None, missing: str):
        self.fn = fn
        self.missing = missing  # the error when `fn` is None and the mode is asked for

    def __call__(self, *args: Any) -> list[Any]:
        if self.fn is None:
            raise ValueError(self.missing)  # a missing derivative rule, as JAX's own
        return list(self.fn(*args))


def linear_call(
    fwd: _Fn,
    bwd: _Fn,
    residuals: list[Any],
    linear: list[Any],
    out_avals: tuple[jax.ShapeDtypeStruct, ...],
) -> list[Any]:
    lin_avals = tuple(jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)) for x in linear)
    return host_linear_p.bind(
        *residuals,
        *linear,
        fwd=fwd,
        bwd=bwd,
        n_res=len(residuals),
        out_avals=tuple(out_avals),
        lin_avals=lin_avals,
    )


def _host_linear_abstract_eval(*args, fwd, bwd, n_res, out_avals, lin_avals):
    del args, fwd, bwd, n_res, lin_avals
    return [jax_core.ShapedArray(a.shape, a.dtype) for a in out_avals]


host_linear_p.def_abstract_eval(_host_linear_abstract_eval)


def _host_linear_impl(*args, fwd, bwd, n_res, out_avals, lin_avals):
    del bwd, n_res, out_avals, lin_avals
    return fwd(*args)


host_linear_p.def_impl(_host_linear_impl)


def _host_linear_lowering(ctx, *args, fwd, bwd, n_res, out_avals, lin_avals):
    del bwd, n_res, out_avals, lin_avals
    return mlir.lower_fun(fwd, multiple_results=True)(ctx, *args)


mlir.register_lowering(host_linear_p, _host_linear_lowering)


def _host_linear_transpose_rule(cts, *args, fwd, bwd, n_res, out_avals, lin_avals):
    residuals = args[:n_res]
    if any(ad.is_undefined_primal(r) for r in residuals):
        raise ValueError("host_linear: residual operands must be known when transposing.")
    cts = [
        jnp.zeros(a.shape, a.dtype) if type(ct) is ad.Zero else ct for ct, a in zip(cts, out_avals)
    ]
    ct_in = host_linear_p.bind(
        *residuals,
        *cts,
        fwd=bwd,
        bwd=fwd,
        n_res=n_res,
        out_avals=lin_avals,
        lin_avals=out_avals,
    )
    return [None] * n_res + list(ct_in)


ad.primitive_transposes[host_linear_p] = _host_linear_transpose_rule


def _host_linear_batch_rule(args, dims, *, fwd, bwd, n_res, out_avals, lin_avals):
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    moved = []
    in_axes = []
    for i, (x, d) in enumerate(zip(args, dims)):
        if d is None:
            if i >= n_res:  # linear operands are batched alike, so the transpose is too
                x = jnp.broadcast_to(x, (size, *jnp.shape(x)))
                in_axes.append(0)
            else:
                in_axes.append(None)
        else:
            x = jnp.moveaxis(x, d, 0)
            in_axes.append(0)
        moved.append(x)
    res_axes = tuple(in_axes[:n_res])

    def vmapped(f: _Fn, lin_count: int) -> _Fn:
        if f.fn is None:
            return f
        axes = res_axes + (0,) * lin_count
        inner = jax.vmap(f.fn, in_axes=axes)
        return _Fn(lambda *xs: inner(*_batched_alike(list(xs), axes)), f.missing)

    def batched(avals):
        return tuple(jax.ShapeDtypeStruct((size, *a.shape), a.dtype) for a in avals)

    out = host_linear_p.bind(
        *moved,
        fwd=vmapped(fwd, len(lin_avals)),
        bwd=vmapped(bwd, len(out_avals)),
        n_res=n_res,
        out_avals=batched(out_avals),
        lin_avals=batched(lin_avals),
    )
    return out, [0] * len(out)


batching.primitive_batchers[host_linear_p] = _host_linear_batch_rule


def _batched_alike(xs: list[Any], axes: tuple[Any, ...]) -> list[Any]:
    """The batched operands (batch first) sharded along the batch alike, where one's type
    carries an Explicit mesh axis there: vmap refuses operands whose batch is sharded apart
    (a cotangent or a broadcast tangent comes unsharded)."""
    for x, axis in zip(xs, axes):
        sharding = getattr(jax.typeof(x), "sharding", None) if axis == 0 else None
        spec = getattr(sharding, "spec", None) or ()
        if sharding is None or not spec or spec[0] is None:
            continue
        if not any(t == jax.sharding.AxisType.Explicit for t in sharding.mesh.axis_types):
            continue
        P = jax.sharding.PartitionSpec
        return [
            jax.sharding.reshard(y, jax.sharding.NamedSharding(sharding.mesh, P(spec[0])))
            if a == 0
            else y
            for y, a in zip(xs, axes)
        ]
    return xs


def _host_linear_jvp_rule(primals, tangents, *, fwd, bwd, n_res, out_avals, lin_avals):
    """d fwd(r, t) = fwd(r, dt) + ∂_r fwd(r, t)·dr: the first term is this primitive again
    (still transposable), the second differentiates `fwd` itself, which for finite
    differences differences the rule once more (second order)."""
    params = dict(fwd=fwd, bwd=bwd, n_res=n_res, out_avals=out_avals, lin_avals=lin_avals)
    res, lin = list(primals[:n_res]), list(primals[n_res:])
    out = host_linear_p.bind(*primals, **params)
    d_res, d_lin = tangents[:n_res], tangents[n_res:]
    t_out = [jnp.zeros(a.shape, a.dtype) for a in out_avals]
    if not all(type(t) is ad.Zero for t in d_lin):
        d_lin = [ad.instantiate_zeros(t) for t in d_lin]
        t_out = host_linear_p.bind(*res, *d_lin, **params)
    if not all(type(t) is ad.Zero for t in d_res):
        if fwd.fn is None:
            raise ValueError(fwd.missing)
        d_res = [ad.instantiate_zeros(t) for t in d_res]
        _, extra = jax.jvp(lambda *r: tuple(fwd(*r, *lin)), tuple(res), tuple(d_res))
        t_out = [t + e for t, e in zip(t_out, extra)]
    return out, list(t_out)


ad.primitive_jvps[host_linear_p] = _host_linear_jvp_rule


# `(fwd, bwd)` restricted to some outputs, once per function and flags: parameters compare by
# identity, so one restriction is one object however often dead-code elimination meets it.
_restricted: weakref.WeakKeyDictionary[_Fn, dict[Any, tuple[_Fn, _Fn]]] = (
    weakref.WeakKeyDictionary()
)


def _restrict(
    fwd: _Fn, bwd: _Fn, used: tuple[bool, ...], out_avals: tuple[Any, ...]
) -> tuple[_Fn, _Fn]:
    """`fwd` computing only the used outputs, and its transpose `bwd` taking only their
    cotangents (zeros for the others)."""
    found = _restricted.setdefault(fwd, {}).get((bwd, used))
    if found is not None:
        return found
    fwd_fn, bwd_fn = fwd.fn, bwd.fn

    def fwd_used(*ops):
        assert fwd_fn is not None
        # Traced and cut to the used outputs, so the host calls inside lose theirs too.
        closed = jax.make_jaxpr(fwd_fn)(*ops)
        jaxpr, _ = pe.dce_jaxpr(closed.jaxpr, list(used), instantiate=True)
        return jax_core.eval_jaxpr(jaxpr, closed.consts, *ops)

    def bwd_used(*ops):
        assert bwd_fn is not None
        n_res = len(ops) - sum(used)
        given = iter(ops[n_res:])
        cts = [next(given) if u else jnp.zeros(a.shape, a.dtype) for u, a in zip(used, out_avals)]
        return bwd_fn(*ops[:n_res], *cts)

    found = (
        _Fn(fwd_used if fwd_fn is not None else None, fwd.missing),
        _Fn(bwd_used if bwd_fn is not None else None, bwd.missing),
    )
    _restricted[fwd][(bwd, used)] = found
    return found


def _host_linear_dce_rule(used_outs, eqn):
    """Unused outputs are dead code, inside `fwd` too (its host calls produce only the used
    ones); every operand stays, as `bwd` may read any."""
    n_in = len(eqn.invars)
    if not any(used_outs):
        return [False] * n_in, None
    if all(used_outs):
        return [True] * n_in, eqn
    used = tuple(used_outs)
    out_avals = eqn.params["out_avals"]
    fwd, bwd = _restrict(eqn.params["fwd"], eqn.params["bwd"], used, out_avals)
    params = dict(
        eqn.params,
        fwd=fwd,
        bwd=bwd,
        out_avals=tuple(a for a, u in zip(out_avals, used) if u),
    )
    outvars = [v for v, u in zip(eqn.outvars, used) if u]
    new_eqn = pe.new_jaxpr_eqn(
        eqn.invars, outvars, host_linear_p, params, eqn.effects, eqn.source_info, eqn.ctx
    )
    return [True] * n_in, new_eqn


pe.dce_rules[host_linear_p] = _host_linear_dce_rule
