"""A jaxpr evaluated by NumPy on the host, over a batch: the coefficient functions of a
Hamiltonian and of its noise operators, and their forward-mode derivatives, inside a host call.

`batched(closed)` returns `evaluate(B, *args)`, which runs the jaxpr's equations with NumPy on
arguments that are either `(B, *shape)` (batched) or the jaxpr's own shape (shared by every
row), and returns each output as `(B, *shape)`. The rules follow `jax.vmap`'s: each value
carries whether its leading axis is the batch, and each primitive's parameters are shifted
past it. A jaxpr with any primitive outside the table gives None (the caller keeps that work
in JAX), so nothing is evaluated by a rule that does not exist.

NumPy computes each primitive as XLA's CPU backend does up to rounding: the same elementary
functions in the same dtypes (the jaxpr's own `convert_element_type`s), so a coefficient
agrees with its JAX value to a few ulps.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jax._src import core as jax_core

__all__ = ["batched"]

_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "neg": np.negative,
    "sign": np.sign,
    "abs": np.abs,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "cbrt": np.cbrt,
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "logistic": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "square": np.square,
    "real": np.real,
    "imag": np.imag,
    "conj": np.conj,
    "not": np.logical_not,
    "floor": np.floor,
    "ceil": np.ceil,
    "is_finite": np.isfinite,
    "copy": np.copy,
    "copy_p": np.copy,
    "stop_gradient": np.asarray,
}
_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "add_any": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "pow": np.power,
    "max": np.maximum,
    "min": np.minimum,
    "atan2": np.arctan2,
    "nextafter": np.nextafter,
    "complex": lambda a, b: a + 1j * b,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "and": np.logical_and,
    "or": np.logical_or,
}
_REDUCE = {
    "reduce_sum": np.sum,
    "reduce_max": np.max,
    "reduce_min": np.min,
    "reduce_prod": np.prod,
}
_STRUCTURAL = {
    "div",
    "integer_pow",
    "select_n",
    "convert_element_type",
    "broadcast_in_dim",
    "reshape",
    "squeeze",
    "expand_dims",
    "concatenate",
    "stack",
    "unstack",
    "slice",
    "iota",
    "transpose",
    "dot_general",
    "clamp",
    "split",
    "pjit",
    "jit",
    "closed_call",
    "custom_jvp_call",
}


def _inner(eqn: jax_core.JaxprEqn) -> jax_core.ClosedJaxpr | None:
    for key in ("jaxpr", "call_jaxpr"):
        sub = eqn.params.get(key)
        if isinstance(sub, jax_core.ClosedJaxpr):
            return sub
        if isinstance(sub, jax_core.Jaxpr):
            return jax_core.ClosedJaxpr(sub, ())
    return None


def _supported(jaxpr: jax_core.Jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _UNARY or name in _BINARY or name in _REDUCE:
            continue
        if name not in _STRUCTURAL:
            return False
        if name in ("pjit", "jit", "closed_call", "custom_jvp_call"):
            sub = _inner(eqn)
            if sub is None or not _supported(sub.jaxpr):
                return False
        if name == "reshape" and eqn.params.get("dimensions") is not None:
            return False  # a transposing reshape: no rule here
        if name == "dot_general" and eqn.params.get("preferred_element_type") not in (
            None,
            *(getattr(v.aval, "dtype", None) for v in eqn.outvars),
        ):
            return False
    return True


def batched(closed: jax_core.ClosedJaxpr) -> Callable[..., list[np.ndarray]] | None:
    """`evaluate(B, *args) -> [(B, *shape) outputs]` of `closed` on NumPy, or None where the
    jaxpr has a primitive this module has no rule for. The jaxpr is compiled once for each
    pattern of batched arguments: a list of NumPy calls, the nested jaxprs inlined and each
    call's parameters resolved, so an evaluation is those calls and nothing else."""
    if not _supported(closed.jaxpr):
        return None
    programs: dict[tuple[bool, ...], _Program] = {}

    def evaluate(B: int, *args: np.ndarray) -> list[np.ndarray]:
        arrays = [np.asarray(a) for a in args]
        flags = tuple(a.ndim == len(v.aval.shape) + 1 for a, v in zip(arrays, closed.jaxpr.invars))
        program = programs.get(flags)
        if program is None:
            program = programs[flags] = _Program(closed, flags)
        return program(B, arrays)

    return evaluate


Step = tuple[Callable[..., list[np.ndarray]], tuple[int, ...], tuple[int, ...]]


class _Program:
    """A jaxpr as a flat list of NumPy calls on numbered slots (see `batched`)."""

    def __init__(self, closed: jax_core.ClosedJaxpr, flags: Sequence[bool]) -> None:
        self.init: list[Any] = []
        self.flags: list[bool] = []
        self.known: list[bool] = []  # a value fixed when compiled: a constant, or folded
        self.steps: list[Step] = []
        self.inputs = [self._slot(None, b, False) for b in flags]
        self.outputs = self._inline(closed, self.inputs)
        self._prune()

    def _slot(self, value: Any, batched: bool, known: bool = True) -> int:
        self.init.append(value)
        self.flags.append(batched)
        self.known.append(known)
        return len(self.init) - 1

    def _prune(self) -> None:
        """Drops the steps no output needs (a jaxpr traced for several outputs, the jvp's
        primal copies)."""
        needed = set(self.outputs)
        kept: list[Step] = []
        for step in reversed(self.steps):
            if any(k in needed for k in step[2]):
                kept.append(step)
                needed.update(step[1])
        self.steps = kept[::-1]

    def _inline(self, closed: jax_core.ClosedJaxpr, ins: Sequence[int]) -> list[int]:
        jaxpr = closed.jaxpr
        env: dict[Any, int] = {}
        for v, c in zip(jaxpr.constvars, closed.consts):
            env[v] = self._slot(np.asarray(c), False)
        for v, k in zip(jaxpr.invars, ins):
            env[v] = k

        def read(v: Any) -> int:
            if isinstance(v, jax_core.Literal):
                aval: Any = v.aval
                return self._slot(np.asarray(v.val, aval.dtype), False)
            return env[v]

        for eqn in jaxpr.eqns:
            args = [read(v) for v in eqn.invars]
            sub = _inner(eqn) if eqn.primitive.name in _CALLS else None
            if sub is not None:
                outs = self._inline(sub, args[: len(sub.jaxpr.invars)])
            else:
                fn, out_flags = _rule(eqn, [self.flags[k] for k in args])
                if all(self.known[k] for k in args):  # constants only: folded now
                    values = fn(0, *[self.init[k] for k in args])
                    outs = [self._slot(np.asarray(x), False) for x in values]
                else:
                    outs = [self._slot(None, b, False) for b in out_flags]
                    self.steps.append((fn, tuple(args), tuple(outs)))
            for v, k in zip(eqn.outvars, outs):
                env[v] = k
        return [read(v) for v in jaxpr.outvars]

    def __call__(self, B: int, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        env = list(self.init)
        for k, a in zip(self.inputs, args):
            env[k] = a
        for fn, ins, outs in self.steps:
            values = fn(B, *[env[k] for k in ins])
            for k, x in zip(outs, values):
                env[k] = x
        return [
            np.array(env[k])
            if self.flags[k]
            else np.array(np.broadcast_to(env[k], (B, *np.shape(env[k]))))
            for k in self.outputs
        ]


_CALLS = ("pjit", "jit", "closed_call", "custom_jvp_call")


def _lift_index(flags: Sequence[bool], avals: Sequence[Any]) -> list[Any]:
    """How to align an elementwise primitive's operands for NumPy broadcasting: for a batched
    one of lower rank than the others (a scalar predicate of `select_n`), the index that puts
    unit axes after its batch axis (a view); None for the others."""
    rank = max((len(a.shape) for a in avals), default=0)
    return [
        (slice(None),) + (None,) * (rank - len(a.shape)) if b and len(a.shape) < rank else None
        for b, a in zip(flags, avals)
    ]


def _full(x: np.ndarray, b: bool, B: int) -> np.ndarray:
    return x if b else np.broadcast_to(x, (B, *np.shape(x)))


def _rule(
    eqn: jax_core.JaxprEqn, flags: list[bool]
) -> tuple[Callable[..., list[np.ndarray]], list[bool]]:
    """The NumPy call of one equation, `fn(B, *operands) -> outputs`, for operands batched as
    `flags` says, and whether each output is batched."""
    name, params = eqn.primitive.name, eqn.params
    avals: list[Any] = [v.aval for v in eqn.invars]
    b = any(flags)
    outs: list[Any] = [v.aval for v in eqn.outvars]
    dt: Any = outs[0].dtype if outs else None

    def cast(x: Any) -> np.ndarray:
        x = np.asarray(x)
        return x if x.dtype == dt else x.astype(dt)

    if name in _UNARY:
        f1 = _UNARY[name]
        return (lambda B, x: [cast(f1(x))]), [b]
    if name in _BINARY or name in ("div", "clamp", "select_n"):
        index = _lift_index(flags, avals)
        lifted = any(i is not None for i in index)
        if name in _BINARY or name == "div":
            if name in _BINARY:
                f2 = _BINARY[name]
            elif np.issubdtype(dt, np.integer):  # lax rounds towards zero
                f2 = lambda x, y: np.trunc(np.true_divide(x, y))
            else:
                f2 = np.true_divide
            ix, iy = index
            if ix is None and iy is None:
                return (lambda B, x, y: [cast(f2(x, y))]), [b]
            if iy is None:
                return (lambda B, x, y: [cast(f2(x[ix], y))]), [b]
            if ix is None:
                return (lambda B, x, y: [cast(f2(x, y[iy]))]), [b]
            return (lambda B, x, y: [cast(f2(x[ix], y[iy]))]), [b]
        if name == "clamp":
            op: Callable[..., Any] = lambda lo, x, hi: np.clip(x, lo, hi)
        elif len(avals) == 3 and avals[0].dtype == np.bool_:
            op = lambda which, no, yes: np.where(which, yes, no)
        elif len(avals) == 2:  # one case: it, whatever the predicate
            op = lambda which, only: np.broadcast_to(
                only, np.broadcast_shapes(which.shape, only.shape)
            )
        else:
            op = lambda which, *cases: np.choose(which.astype(np.intp), np.broadcast_arrays(*cases))
        if not lifted:
            return (lambda B, *xs: [cast(op(*xs))]), [b]

        def lift(*xs: np.ndarray) -> list[np.ndarray]:
            return [x if i is None else x[i] for x, i in zip(xs, index)]

        return (lambda B, *xs: [cast(op(*lift(*xs)))]), [b]
    if name == "integer_pow":
        y = int(params["y"])
        return (lambda B, x: [cast(np.power(x, y))]), [b]
    if name == "convert_element_type":
        new = np.dtype(params["new_dtype"])
        if new == np.dtype(avals[0].dtype):
            return (lambda B, x: [x]), [b]
        return (lambda B, x: [np.asarray(x).astype(new)]), [b]
    if name in _REDUCE:
        fr, axes = _REDUCE[name], tuple(a + b for a in params["axes"])
        return (lambda B, x: [cast(fr(x, axis=axes))]), [b]
    if name == "broadcast_in_dim":
        if len(avals) > 1:
            raise NotImplementedError("broadcast_in_dim with dynamic shapes")
        shape, dims = tuple(params["shape"]), tuple(params["broadcast_dimensions"])
        view = [1] * len(shape)
        for i, d in enumerate(dims):
            view[d] = avals[0].shape[i]
        out_dtype = dt

        def broadcast(B: int, x: np.ndarray) -> list[np.ndarray]:
            full = (B, *shape) if b else shape
            out = np.empty(full, out_dtype)
            out[...] = x.reshape((B, *view) if b else view)
            return [out]

        return broadcast, [b]
    if name == "reshape":
        new = tuple(params["new_sizes"])
        if b:
            return (lambda B, x, *_: [x.reshape((B, *new))]), [True]
        return (lambda B, x, *_: [x.reshape(new)]), [False]
    if name in ("squeeze", "expand_dims"):
        dims = tuple(d + b for d in params["dimensions"])
        f3 = np.squeeze if name == "squeeze" else np.expand_dims
        return (lambda B, x: [f3(x, dims)]), [b]
    if name in ("concatenate", "stack"):
        axis = params["dimension" if name == "concatenate" else "axis"] + b
        join = np.concatenate if name == "concatenate" else np.stack
        if b:
            return (
                lambda B, *xs: [join([_full(x, f, B) for x, f in zip(xs, flags)], axis=axis)]
            ), [True]
        return (lambda B, *xs: [join(xs, axis=axis)]), [False]
    if name == "unstack":
        axis = params["axis"] + b
        n = avals[0].shape[params["axis"]]
        return (lambda B, x: [np.take(x, i, axis=axis) for i in range(n)]), [b] * n
    if name == "split":
        cuts, axis = np.cumsum(params["sizes"])[:-1], params["axis"] + b
        return (lambda B, x: list(np.split(x, cuts, axis=axis))), [b] * len(params["sizes"])
    if name == "slice":
        strides = params["strides"] or (1,) * len(params["start_indices"])
        index = (slice(None),) * b + tuple(
            slice(s, e, st)
            for s, e, st in zip(params["start_indices"], params["limit_indices"], strides)
        )
        return (lambda B, x: [x[index]]), [b]
    if name == "iota":
        shape, dim = tuple(params["shape"]), params["dimension"]
        view = [1] * len(shape)
        view[dim] = shape[dim]
        value = np.broadcast_to(np.arange(shape[dim], dtype=params["dtype"]).reshape(view), shape)
        return (lambda B: [value]), [False]
    if name == "transpose":
        perm = tuple(params["permutation"])
        perm = (0, *(q + 1 for q in perm)) if b else perm
        return (lambda B, x: [np.transpose(x, perm)]), [b]
    if name == "dot_general":
        return (lambda B, x, y: [cast(_dot_general(x, y, flags, params, B))]), [b]
    raise NotImplementedError(name)  # unreachable: `_supported` checked the jaxpr


def _dot_general(
    x: np.ndarray, y: np.ndarray, flags: Sequence[bool], params: dict[str, Any], B: int
) -> np.ndarray:
    """`lax.dot_general` by `np.einsum`; a batched operand adds a leading batch dimension."""
    bx, by = flags
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    b = bx or by
    if b:
        x, y = _full(x, bx, B), _full(y, by, B)
        lc, rc = [c + 1 for c in lc], [c + 1 for c in rc]
        lb, rb = [0, *(d + 1 for d in lb)], [0, *(d + 1 for d in rb)]
    letters = iter(string.ascii_letters)
    xs = [""] * x.ndim
    ys = [""] * y.ndim
    for i, j in zip(lb, rb):
        xs[i] = ys[j] = next(letters)
    for i, j in zip(lc, rc):
        xs[i] = ys[j] = next(letters)
    for i in range(x.ndim):
        xs[i] = xs[i] or next(letters)
    for j in range(y.ndim):
        ys[j] = ys[j] or next(letters)
    batch = [xs[i] for i in lb]
    free_x = [xs[i] for i in range(x.ndim) if i not in lb and i not in lc]
    free_y = [ys[j] for j in range(y.ndim) if j not in rb and j not in rc]
    spec = f"{''.join(xs)},{''.join(ys)}->{''.join(batch + free_x + free_y)}"
    return np.asarray(np.einsum(spec, x, y))
