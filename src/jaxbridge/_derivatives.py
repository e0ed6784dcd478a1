"""Derivative rules for host functions: none, Jacobian, JVP/VJP pair, finite differences.

Each rule wraps a signature's staged host call in a `jax.custom_jvp` (with symbolic zeros, so
integer, keyword and untouched arguments cost nothing). The tangent is always something JAX can
transpose and batch: J·t in jax.numpy for Jacobians and finite differences, the
`host_linear_p` primitive (whose transpose is the VJP) for JVP/VJP pairs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from . import _errors, _spec
from ._base import AbstractHost, AbstractSignature
from ._linear import _Fn, linear_call

NO_RULE = (
    "differentiating host function {name!r} needs a derivative rule: pass `jacobian=`, "
    "`jvp=` and `vjp=`, or `derivative=jaxbridge.FiniteDifferences()` to `jaxbridge.host`."
)
NEEDS_VJP = (
    "reverse mode (grad, vjp, jacrev) of host function {name!r} needs `vjp=` (or `jacobian=`) "
    "in `jaxbridge.host`; it has only `jvp=`."
)
NEEDS_JVP = (
    "forward mode (jvp, jacfwd) of host function {name!r} needs `jvp=` (or `jacobian=`) in "
    "`jaxbridge.host`; it has only `vjp=`."
)
VJP_NOT_A_TUPLE = (
    "{rule} must return a tuple with one cotangent per positional array argument ({n} here, "
    "`None` for an integer one); got {got}."
)
KEYWORD_TANGENT = (
    "host function {name!r} is differentiated with respect to the keyword argument "
    "`{key}`; derivative rules cover positional arguments only. Pass it positionally."
)


@dataclasses.dataclass(frozen=True)
class FiniteDifferences:
    """Derivatives of a host function by finite differences, all points in one batched call.

    Args:
        step: the step, or `None` for `eps**(1/2)` (forward) or `eps**(1/3)` (central) of the
            input's dtype, scaled by `max(|x|, 1)`.
        scheme: `"central"` (error O(step²), 2n evaluations) or `"forward"` (O(step), n).
        check_finite: raise a `HostError` if a difference is NaN or infinite, instead of
            letting it propagate.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np, jaxbridge
        >>> f = jaxbridge.host(np.sin, vmap="vectorized",
        ...                    derivative=jaxbridge.FiniteDifferences())
        >>> round(float(jax.grad(lambda x: f(x).sum())(jnp.zeros(3))[0]), 4)
        1.0
    """

    step: float | None = None
    scheme: str = "central"
    check_finite: bool = False

    def __post_init__(self):
        if self.scheme not in ("central", "forward"):
            raise ValueError(
                f"`FiniteDifferences(scheme=...)` must be 'central' or 'forward'; got "
                f"{self.scheme!r}."
            )
        if self.step is not None and not self.step > 0:
            raise ValueError(f"`FiniteDifferences(step=...)` must be positive; got {self.step}.")


def make_rule(host: AbstractHost, *, jacobian, jvp, vjp, derivative) -> _Rule:
    given = [
        n
        for n, v in (("jacobian", jacobian), ("jvp", jvp), ("derivative", derivative))
        if v is not None
    ]
    if vjp is not None and "jvp" not in given:
        given.append("vjp")
    if len(given) > 1 and set(given) != {"jvp"}:
        raise ValueError(
            f"`jaxbridge.host` takes one derivative rule: `jacobian=`, `jvp=`/`vjp=` or "
            f"`derivative=`; got {', '.join(given)}."
        )
    for name, f in (("jacobian", jacobian), ("jvp", jvp), ("vjp", vjp)):
        if f is not None and not callable(f):
            raise TypeError(
                f"`jaxbridge.host({name}=...)` must be callable; got {type(f).__name__}."
            )
    if derivative is not None and not isinstance(derivative, FiniteDifferences):
        raise TypeError(
            "`jaxbridge.host(derivative=...)` must be a jaxbridge.FiniteDifferences; got "
            f"`{type(derivative).__name__}`."
        )
    if jacobian is not None:
        return _JacobianRule(host, jacobian)
    if jvp is not None or vjp is not None:
        return _PairRule(host, jvp, vjp)
    if derivative is not None:
        return _FiniteDifferenceRule(host, derivative)
    return _Rule(host)


class _Rule:
    """No rule: a `custom_jvp` whose rule raises, so the error names what to pass."""

    def __init__(self, host: AbstractHost):
        self.host = host

    def wrap(self, entry: AbstractSignature) -> Callable[..., list[Any]]:
        f = jax.custom_jvp(entry.emit)
        f.defjvp(lambda primals, tangents: self.jvp(entry, primals, tangents), symbolic_zeros=True)
        return lambda *dynamic: list(f(*dynamic))

    def jvp(self, entry: AbstractSignature, primals, tangents):
        # ValueError: what JAX raises for `grad` of a `pure_callback` without a rule.
        raise ValueError(NO_RULE.format(name=self.host.name))

    # -- shared by the rules -------------------------------------------------------------

    def diff_leaves(self, entry: AbstractSignature, tangents) -> list[int]:
        """Dynamic leaves with a nonzero inexact tangent; errors for keyword arguments."""
        n_pos = n_positional(entry)
        index = []
        for i, (t, aval) in enumerate(zip(tangents, entry.call.in_avals)):
            if isinstance(t, SymbolicZero) or not _is_inexact(aval.dtype):
                continue
            if i >= n_pos:
                raise TypeError(KEYWORD_TANGENT.format(name=self.host.name, key=_key_of(entry, i)))
            index.append(i)
        return index

    def zero_tangents_out(self, entry: AbstractSignature) -> list[Any]:
        return [_zeros_tangent(a) for a in entry.call.spec.avals]


def _is_inexact(dtype: Any) -> bool:
    return jnp.issubdtype(dtype, jnp.inexact)


def _zeros_tangent(aval: jax.ShapeDtypeStruct) -> Any:
    if _is_inexact(aval.dtype):
        return jnp.zeros(aval.shape, aval.dtype)
    return np.zeros(aval.shape, jax.dtypes.float0)


def arg_trees(entry: AbstractSignature, values: list[Any]) -> list[Any]:
    """The positional arguments that hold traced leaves, with `values` (one per traced leaf)
    in place of those leaves and `None` in place of static ones: the layout of tangents,
    cotangents and Jacobian blocks."""
    split = entry.call.split
    leaves: list[Any] = [None] * split.treedef.num_leaves
    for i, v in zip(split.dynamic_index, values, strict=True):
        leaves[i] = v
    args, _ = jax.tree_util.tree_unflatten(split.treedef, leaves)
    return [a for a in args if jax.tree_util.tree_leaves(a)]


def n_positional(entry: AbstractSignature) -> int:
    """How many traced leaves belong to positional arguments (they come first)."""
    markers = list(range(len(entry.call.in_avals)))
    return sum(len(jax.tree_util.tree_leaves(a)) for a in arg_trees(entry, markers))


def _key_of(entry: AbstractSignature, j: int) -> str:
    split = entry.call.split
    paths, _ = jax.tree_util.tree_flatten_with_path(
        jax.tree_util.tree_unflatten(split.treedef, [0] * split.treedef.num_leaves)
    )
    keys = paths[split.dynamic_index[j]][0][1:]  # drop the (args, kwargs) index
    return f"{getattr(keys[0], 'key', keys[0])}{jax.tree_util.keystr(keys[1:])}"


def _tangent_dtype(aval: jax.ShapeDtypeStruct) -> np.dtype:
    if _is_inexact(aval.dtype):
        return aval.dtype
    return _spec.canonical_dtype(0.0)


def _tangent_avals(avals: Any) -> list[jax.ShapeDtypeStruct]:
    return [jax.ShapeDtypeStruct(a.shape, _tangent_dtype(a)) for a in avals]


class _JacobianRule(_Rule):
    """`jacobian=`: the tangent is J·t in jax.numpy, so every mode and vmap come free."""

    def __init__(self, host: AbstractHost, jacobian: Callable[..., Any]):
        super().__init__(host)
        self.jacobian = jacobian

    def jacobian_spec(self, entry: AbstractSignature) -> _spec.ResultSpec:
        """The `jax.jacfwd` layout: per output leaf, per differentiable argument, its tree."""
        trees = arg_trees(entry, list(entry.call.in_avals))

        def per_output(o: jax.ShapeDtypeStruct) -> Any:
            dtype = _tangent_dtype(o)
            blocks = [
                jax.tree_util.tree_map(lambda i: jax.ShapeDtypeStruct(o.shape + i.shape, dtype), t)
                for t in trees
            ]
            return blocks[0] if len(blocks) == 1 else tuple(blocks)

        return _spec.spec_from_tree(jax.tree_util.tree_map(per_output, entry.call.spec.tree))

    def jacobian_call(self, entry: AbstractSignature, primals: Any) -> list[Any]:
        args, kwargs = entry.call.split.rebuild(list(primals))
        rule = self.jacobian
        if not isinstance(rule, AbstractHost):
            rule = entry.extra.get("jacobian")
            if rule is None:
                name = getattr(self.jacobian, "__name__", "jacobian")
                rule = self.host.sibling(
                    self.jacobian,
                    name=f"{name} (jacobian= of {self.host.name})",
                    result=self.jacobian_spec(entry).tree,
                    init=self.host.init,
                )
                entry.extra["jacobian"] = rule
        # A jacobian that is itself a jaxbridge.host with a rule gives second order.
        return jax.tree_util.tree_leaves(rule(*args, **kwargs))

    def jvp(self, entry, primals, tangents):
        index = self.diff_leaves(entry, tangents)
        out = entry.traced(*primals)
        jac = self.jacobian_call(entry, primals)
        n_in = n_positional(entry)
        t_out = []
        for o, aval in enumerate(entry.call.spec.avals):
            if not _is_inexact(aval.dtype):
                t_out.append(_zeros_tangent(aval))
                continue
            acc = jnp.zeros(aval.shape, aval.dtype)
            for j in index:
                t = tangents[j].astype(aval.dtype)
                acc = acc + jnp.tensordot(jac[o * n_in + j].astype(aval.dtype), t, axes=t.ndim)
            t_out.append(acc)
        return out, t_out


class _PairRule(_Rule):
    """`jvp=` and/or `vjp=`: the tangent is `host_linear_p`, transposed by the VJP."""

    def __init__(
        self, host: AbstractHost, jvp: Callable[..., Any] | None, vjp: Callable[..., Any] | None
    ):
        super().__init__(host)
        self.jvp_fn, self.vjp_fn = jvp, vjp

    def _rule_host(self, fn: Callable[..., Any], kind: str, result: Any) -> AbstractHost:
        name = getattr(self.jvp_fn if kind == "jvp" else self.vjp_fn, "__name__", kind)
        return self.host.sibling(fn, name=f"{name} ({kind}= of {self.host.name})", result=result)

    def linear_fns(self, entry: AbstractSignature) -> tuple[_Fn, _Fn, list[int]]:
        if "pair" in entry.extra:
            return entry.extra["pair"]
        call = entry.call
        n_dyn, n_pos = len(call.in_avals), n_positional(entry)
        diff = [j for j in range(n_pos) if _is_inexact(call.in_avals[j].dtype)]
        t_in = _tangent_avals(call.in_avals)
        out_tree = jax.tree_util.tree_unflatten(call.spec.treedef, _tangent_avals(call.spec.avals))
        jvp_fn, vjp_fn = self.jvp_fn, self.vjp_fn
        fwd: Callable[..., list[Any]] | None = None
        bwd: Callable[..., list[Any]] | None = None
        if jvp_fn is not None:
            jvp_host = self._rule_host(
                lambda args, kwargs, ts: jvp_fn(*args, *ts, **kwargs), "jvp", out_tree
            )

            def fwd_fn(*ops):
                primals, lin = ops[:n_dyn], dict(zip(diff, ops[n_dyn:]))
                full = [lin.get(j, jnp.zeros(a.shape, a.dtype)) for j, a in enumerate(t_in)]
                args, kwargs = call.split.rebuild(list(primals))
                out = jvp_host(args, kwargs, arg_trees(entry, full))
                return jax.tree_util.tree_leaves(out)

            fwd = fwd_fn

        if vjp_fn is not None:
            expected = tuple(arg_trees(entry, t_in))
            integer_only = [
                not any(_is_inexact(a.dtype) for a in jax.tree_util.tree_leaves(t))
                for t in arg_trees(entry, list(call.in_avals))
            ]

            rule_name = f"`vjp=` of host function {self.host.name!r}"

            def vjp_adapter(args, kwargs, ct):
                cts = _cotangent_tuple(rule_name, vjp_fn(*args, ct, **kwargs), len(expected))
                # `None` for an integer argument, as jax.vjp's float0: ignored, so fill zeros.
                return (
                    tuple(
                        jax.tree_util.tree_map(lambda a: np.zeros(a.shape, a.dtype), want)
                        if got is None and k < len(integer_only) and integer_only[k]
                        else got
                        for k, (got, want) in enumerate(zip(cts, expected))
                    )
                    + cts[len(expected) :]
                )

            vjp_host = self._rule_host(vjp_adapter, "vjp", expected)

            def bwd_fn(*ops):
                primals, cts = ops[:n_dyn], ops[n_dyn:]
                args, kwargs = call.split.rebuild(list(primals))
                ct = jax.tree_util.tree_unflatten(call.spec.treedef, list(cts))
                got = jax.tree_util.tree_leaves(vjp_host(args, kwargs, ct))
                return [got[j] for j in diff]

            bwd = bwd_fn

        pair = (
            _Fn(fwd, NEEDS_JVP.format(name=self.host.name)),
            _Fn(bwd, NEEDS_VJP.format(name=self.host.name)),
            diff,
        )
        entry.extra["pair"] = pair
        return pair

    def jvp(self, entry, primals, tangents):
        self.diff_leaves(entry, tangents)  # rejects keyword-argument tangents
        fwd, bwd, diff = self.linear_fns(entry)
        out = entry.traced(*primals)
        lin = [
            jnp.zeros(entry.call.in_avals[j].shape, entry.call.in_avals[j].dtype)
            if isinstance(tangents[j], SymbolicZero)
            else tangents[j]
            for j in diff
        ]
        avals = entry.call.spec.avals
        t_out = linear_call(fwd, bwd, list(primals), lin, tuple(_tangent_avals(avals)))
        return out, [t if _is_inexact(a.dtype) else _zeros_tangent(a) for t, a in zip(t_out, avals)]


def _cotangent_tuple(rule: str, got: Any, n: int) -> tuple[Any, ...]:
    """`vjp=`'s return value as a tuple of `n` cotangents, one per positional argument.

    A bare cotangent is accepted where there is one positional array argument (as
    torch.autograd.Function accepts for one input); `tuple()` of it would iterate over its
    first axis.
    """
    if isinstance(got, (tuple, list)) and (len(got) == n or n != 1):
        if len(got) != n:
            raise _errors.HostResultError(
                VJP_NOT_A_TUPLE.format(rule=rule, n=n, got=f"a {type(got).__name__} of {len(got)}")
            )
        return tuple(got)
    if n == 1:
        return (got,)
    raise _errors.HostResultError(
        VJP_NOT_A_TUPLE.format(rule=rule, n=n, got=f"`{type(got).__name__}`")
    )


class _FiniteDifferenceRule(_Rule):
    """Finite differences through `host_linear_p`: forward mode differences along the tangent
    (2 points, or 1 for "forward", in one batched call); reverse mode builds the Jacobian from
    all 2n (or n) perturbed points in one batched call. Evaluations go through the function's
    own rule, so differentiating again differences this rule."""

    def __init__(self, host: AbstractHost, fd: FiniteDifferences):
        super().__init__(host)
        self.fd = fd
        self.central = fd.scheme == "central"

    def jvp(self, entry, primals, tangents):
        index = self.diff_leaves(entry, tangents)
        out = entry.traced(*primals)
        if not index:
            return out, self.zero_tangents_out(entry)
        key = ("fd", tuple(index))
        if key not in entry.extra:
            entry.extra[key] = (
                _Fn(lambda *ops: self.directional(entry, index, ops), ""),
                _Fn(lambda *ops: self.transposed(entry, index, ops), ""),
            )
        fwd, bwd = entry.extra[key]
        avals = entry.call.spec.avals
        lin = [tangents[i] for i in index]
        t_out = linear_call(fwd, bwd, list(primals), lin, tuple(_tangent_avals(avals)))
        return out, [t if _is_inexact(a.dtype) else _zeros_tangent(a) for t, a in zip(t_out, avals)]

    def _step(self, dtype: Any) -> float:
        eps = float(jnp.finfo(dtype).eps)
        return self.fd.step if self.fd.step is not None else eps ** (1 / 3 if self.central else 0.5)

    def _at(self, entry: AbstractSignature, primals: Any, index: list[int], p: Any) -> list[Any]:
        """The call's outputs with the differentiated leaves set from the raveled point `p`."""
        values, offset = list(primals), 0
        for i in index:
            shape = jnp.shape(primals[i])
            size = int(np.prod(shape))
            values[i] = p[offset : offset + size].reshape(shape).astype(values[i].dtype)
            offset += size
        return entry.traced(*values)

    def _evaluate(
        self, entry: AbstractSignature, primals: Any, index: list[int], points: Any, dtype: Any
    ) -> jax.Array:
        """All `points` (rows: the differentiated leaves, raveled) in one batched call, the
        outputs raveled into one row per point."""
        at = lambda p: _ravel_out(entry, self._at(entry, primals, index, p), dtype)  # noqa: E731
        return jax.vmap(at)(points)

    def _evaluate_each(
        self, entry: AbstractSignature, primals: Any, index: list[int], points: Any, dtype: Any
    ) -> list[jax.Array]:
        """As `_evaluate`, one array per output (leading axis: the points), so that an output
        the program does not use stays dead code."""
        at = lambda p: [o.astype(dtype) for o in self._at(entry, primals, index, p)]  # noqa: E731
        return jax.vmap(at)(points)

    def _unravel_out(self, entry: AbstractSignature, flat: Any) -> list[Any]:
        result, offset = [], 0
        for aval in entry.call.spec.avals:
            size = int(np.prod(aval.shape))
            dtype = _tangent_dtype(aval)
            result.append(flat[offset : offset + size].reshape(aval.shape).astype(dtype))
            offset += size
        return result

    def directional(self, entry: AbstractSignature, index: list[int], ops: Any) -> list[Any]:
        primals, lin = ops[: len(entry.call.in_avals)], ops[len(entry.call.in_avals) :]
        dtype = jnp.result_type(*[primals[i] for i in index])
        x = jnp.concatenate([jnp.ravel(primals[i]).astype(dtype) for i in index])
        t = jnp.concatenate([jnp.ravel(v).astype(dtype) for v in lin])
        t_size = jnp.max(jnp.abs(t))
        moving = t_size > 0
        h = self._step(dtype) * jnp.maximum(jnp.max(jnp.abs(x)), 1.0)
        h = h / jnp.where(moving, t_size, 1.0)
        ht = ((x + h * t) - x) if self.central else (x + h * t) - x  # exactly representable
        points = jnp.stack([x + ht, x - ht] if self.central else [x + ht, x])
        width = 2 * h if self.central else h
        if self.fd.check_finite:  # the check reads every output: one raveled row
            both = self._evaluate(entry, primals, index, points, dtype)
            flat = jnp.where(moving, (both[0] - both[1]) / width, 0.0).astype(dtype)
            return self._unravel_out(entry, self._checked(flat))
        # Each output differenced apart, so one the program does not use stays dead code.
        both = self._evaluate_each(entry, primals, index, points, dtype)
        return [
            jnp.where(moving, (b[0] - b[1]) / width, 0.0).astype(_tangent_dtype(a))
            for b, a in zip(both, entry.call.spec.avals)
        ]

    def transposed(self, entry: AbstractSignature, index: list[int], ops: Any) -> list[Any]:
        primals, cts = ops[: len(entry.call.in_avals)], ops[len(entry.call.in_avals) :]
        jac = self.jacobian(entry, list(primals), index)  # (n_out, n_in)
        ct = jnp.concatenate([jnp.ravel(c).astype(jac.dtype) for c in cts])
        flat = ct @ jac
        result, offset = [], 0
        for i in index:
            aval = entry.call.in_avals[i]
            size = int(np.prod(aval.shape))
            result.append(flat[offset : offset + size].reshape(aval.shape).astype(aval.dtype))
            offset += size
        return result

    def jacobian(self, entry: AbstractSignature, primals: list[Any], index: list[int]) -> jax.Array:
        dtype = jnp.result_type(*[primals[i] for i in index])
        x = jnp.concatenate([jnp.ravel(primals[i]).astype(dtype) for i in index])
        h = self._step(dtype) * jnp.maximum(jnp.abs(x), 1.0)
        h = (x + h) - x  # a step the dtype represents exactly
        n = x.shape[0]
        eye = jnp.eye(n, dtype=dtype) * h[None, :]
        if self.central:
            evaluated = self._evaluate(
                entry, primals, index, jnp.concatenate([x[None] + eye, x[None] - eye]), dtype
            )
            diff = (evaluated[:n] - evaluated[n:]) / (2 * h[:, None])
        else:
            evaluated = self._evaluate(
                entry, primals, index, jnp.concatenate([x[None] + eye, x[None]]), dtype
            )
            diff = (evaluated[:n] - evaluated[n:]) / h[:, None]
        return self._checked(diff.T)

    def _checked(self, value: jax.Array) -> jax.Array:
        return _check_finite(self.host)(value) if self.fd.check_finite else value


def _ravel_out(entry: AbstractSignature, out: list[Any], dtype: Any) -> jax.Array:
    parts = [jnp.ravel(o).astype(dtype) for o in out]
    return jnp.concatenate(parts) if parts else jnp.zeros(0, dtype)


def _check_finite(host: AbstractHost) -> Callable[[jax.Array], jax.Array]:
    name = host.name

    def check(value: np.ndarray) -> np.ndarray:
        if not np.all(np.isfinite(value)):
            bad = tuple(np.argwhere(~np.isfinite(value))[0])
            where = (
                f"the Jacobian entry d out[{bad[0]}] / d in[{bad[1]}]"
                if value.ndim == 2
                else f"the directional difference of out[{bad[0]}]"
            )
            raise FloatingPointError(
                f"finite differences of host function {name!r} are not finite: the first bad "
                f"value is {where} = {value[bad]}. Move the point away from the singularity, "
                "or use a smaller `step` or scheme='forward'."
            )
        return value

    return host.sibling(
        check,
        name=f"FiniteDifferences(check_finite=True) of {name!r}",
        result=None,
        vmap="sequential",
    )
