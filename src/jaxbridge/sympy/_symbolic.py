"""`compile(..., derivatives="symbolic")`: a `custom_jvp` whose tangent comes from `sympy.diff`.

The tangent of output `f` is the expression `sum_s diff(f, s) * ds`, with one fresh tangent
symbol `ds` per input symbol `s`, compiled like any expression (one CSE over all partials) and
itself with symbolic derivatives, so every order is symbolic. It is linear in the tangent
symbols, so JAX transposes it for reverse mode.

Per argument: an argument for which SymPy leaves a partial unevaluated (`floor`, `re` of a
complex symbol, a Bessel order, an `extra_functions` callable) takes JAX's derivative of the
compiled code instead, as without `derivatives=`; the other arguments keep theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import sympy
from sympy.tensor.array import NDimArray

from . import _functions
from ._codegen import _generate, _is_expr_leaf, normalize_args

# sympy.simplify is worth its (super-linear) cost only on small derivatives.
_SIMPLIFY_LIMIT = 40


def _nodes(expr: sympy.Basic, limit: int | None = None) -> set[sympy.Basic]:
    """The distinct nodes of `expr` (a DAG walk, linear), stopping past `limit` if given."""
    seen: set[sympy.Basic] = set()
    stack = [expr]
    while stack and (limit is None or len(seen) <= limit):
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(node.args)
    return seen


def _branch_points(nodes: set[sympy.Basic]) -> set[sympy.Basic]:
    """Fractional powers of possibly negative bases: NaN in JAX where SymPy means complex."""
    return {
        n
        for n in nodes
        if isinstance(n, sympy.Pow) and not n.exp.is_integer and n.base.is_nonnegative is not True
    }


def _printable(nodes: set[sympy.Basic], extra_functions: Mapping) -> bool:
    """Whether the printer can translate a partial (SymPy may leave parts unevaluated)."""
    for node in nodes:
        if isinstance(node, (sympy.Derivative, sympy.Subs, sympy.Integral)):
            return False
        if (
            isinstance(node, sympy.Function)
            and not isinstance(node, sympy.Piecewise)  # a construct of the printer's own
            and not (node.func in _functions.NATIVE or node.func in extra_functions)
        ):
            return False
    return True


def _partial(expr: sympy.Basic, symbol: sympy.Basic) -> sympy.Basic:
    if any(isinstance(n, sympy.sinc) for n in _nodes(expr)):
        # SymPy's sinc' = cos(x)/x - sin(x)/x**2 is NaN at 0; JAX's sinc series is not.
        expr = expr.replace(sympy.sinc, lambda u: _functions.SincDerivative(0, u))
    derivative = sympy.diff(expr, symbol)
    if derivative != 0 and len(_nodes(derivative, _SIMPLIFY_LIMIT)) <= _SIMPLIFY_LIMIT:
        try:
            simplified = sympy.simplify(derivative)
        except Exception:  # noqa: BLE001 - optional; SymPy 1.14 raises KeyError on Mod(1.0*x, c)
            simplified = derivative
        # simplify may fold Abs(x)**(2/3) into Abs(x**(2/3)): equal, but NaN in JAX at x < 0.
        if not _branch_points(_nodes(simplified)) - _branch_points(_nodes(derivative)):
            derivative = simplified
    return sympy.sympify(derivative)


def _explicit(expr: Any, matrices: dict) -> Any:
    """Matrix arguments as explicit matrices of their elements, so `diff` sees every entry."""
    if not matrices or not isinstance(expr, sympy.Basic):
        return expr
    return expr.xreplace(matrices).doit()


def _scalars(leaf: Any, matrices: dict) -> tuple[list[Any], Callable[[list], Any]]:
    """The scalar elements of an output leaf, and how to rebuild the leaf from new ones."""
    if isinstance(leaf, (sympy.MatrixBase, NDimArray)):
        shape = tuple(leaf.shape)
        elements = [_explicit(sympy.sympify(leaf[i]), matrices) for i in np.ndindex(shape)]
        if isinstance(leaf, NDimArray):
            return elements, lambda new: sympy.ImmutableDenseNDimArray(new, shape)
        return elements, lambda new: sympy.ImmutableMatrix(*shape, new)
    if isinstance(leaf, sympy.MatrixExpr):
        explicit = sympy.ImmutableMatrix(_explicit(leaf, matrices).as_explicit())
        shape = tuple(explicit.shape)
        return [explicit[i] for i in range(len(explicit))], lambda new: sympy.ImmutableMatrix(
            *shape, new
        )
    return [_explicit(sympy.sympify(leaf), matrices)], lambda new: new[0]


class _Plan:
    """Which arguments have SymPy partials, and the compiled tangent of those."""

    def __init__(self, expr: Any, args: list, cse: bool, extra_functions: Mapping) -> None:
        symbol_arrays = normalize_args(args, expr)[3]
        matrices = {a: a.as_explicit() for a in args if isinstance(a, sympy.MatrixSymbol)}
        outputs, treedef = jax.tree.flatten(expr, is_leaf=_is_expr_leaf)
        scalars = [_scalars(leaf, matrices) for leaf in outputs]
        terms: list[list[list[Any]]] = [[[] for _ in e] for e, _ in scalars]
        self.symbolic: list[int] = []  # argument positions with SymPy partials
        self.jax: list[int] = []  # the others: JAX's derivative of the compiled code
        tangent_args = []
        for i, (arg, symbols) in enumerate(zip(args, symbol_arrays, strict=True)):
            if isinstance(arg, sympy.MatrixSymbol):
                dot = sympy.MatrixSymbol(f"_d{i}_{id(arg)}", *arg.shape)
                dots = np.empty(symbols.shape, dtype=object)
                for index in np.ndindex(symbols.shape):
                    dots[index] = dot[index]
                tangent_arg: Any = dot
            else:
                dots = np.empty(symbols.shape, dtype=object)
                for index in np.ndindex(symbols.shape):
                    dots[index] = sympy.Dummy(f"d{i}_{'_'.join(map(str, index))}")
                tangent_arg = dots[()] if dots.ndim == 0 else dots.tolist()
            partials = [
                [(_partial(e, symbols[index]), dots[index]) for index in np.ndindex(symbols.shape)]
                for e in (e for elements, _ in scalars for e in elements)
            ]
            if all(_printable(_nodes(d), extra_functions) for row in partials for d, _ in row):
                self.symbolic.append(i)
                tangent_args.append(tangent_arg)
                flat = iter(partials)
                for k, (elements, _) in enumerate(scalars):
                    for j in range(len(elements)):
                        terms[k][j].extend(d * ds for d, ds in next(flat))
            else:
                self.jax.append(i)
        self.tangent: Callable[..., Any] | None = None
        if self.symbolic:
            leaves = [
                rebuild([sympy.Add(*t) for t in terms[k]]) for k, (_, rebuild) in enumerate(scalars)
            ]
            tangent_expr = jax.tree.unflatten(treedef, leaves)
            self.tangent = symbolic(
                tangent_expr, list(args) + tangent_args, cse=cse, extra_functions=extra_functions
            )


def _float_zeros(x: Any) -> jax.Array:
    dtype = jnp.asarray(x).dtype
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    return jnp.zeros(jnp.shape(x), dtype)


def _tangent_like(out: jax.Array, t: jax.Array | None) -> Any:
    if not jnp.issubdtype(out.dtype, jnp.inexact):
        return np.zeros(out.shape, jax.dtypes.float0)  # booleans have no tangent
    if t is None:
        return jnp.zeros_like(out)
    return jnp.broadcast_to(t, out.shape).astype(out.dtype)


def symbolic(
    expr: Any, args: Any, *, cse: bool, extra_functions: Mapping | None
) -> Callable[..., Any]:
    """The compiled function of `expr`, with symbolic derivatives at every order."""
    primal = _generate(expr, args, cse, extra_functions)
    if isinstance(args, (sympy.Symbol, sympy.MatrixSymbol, sympy.IndexedBase, sympy.Indexed)):
        args = [args]
    args = list(args)
    extra = dict(extra_functions or {})
    plans: list[_Plan] = []  # built on the first derivative, then reused

    @jax.custom_jvp
    def fn(*values: Any) -> Any:
        return primal(*values)

    def fn_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        if not plans:
            plans.append(_Plan(expr, args, cse, extra))
        plan = plans[0]
        is_zero = [type(t) is jax.custom_derivatives.SymbolicZero for t in tangents]
        out = fn(*primals)
        parts = []
        if plan.tangent is not None and not all(is_zero[i] for i in plan.symbolic):
            dots = [_float_zeros(primals[i]) if is_zero[i] else tangents[i] for i in plan.symbolic]
            parts.append(plan.tangent(*primals, *dots))
        moving = [i for i in plan.jax if not is_zero[i]]
        if moving:

            def of_moving(*moved: Any) -> Any:
                full = list(primals)
                for i, v in zip(moving, moved, strict=True):
                    full[i] = v
                return primal(*full)

            parts.append(
                jax.jvp(of_moving, [primals[i] for i in moving], [tangents[i] for i in moving])[1]
            )
        out_leaves, treedef = jax.tree.flatten(out)
        sums: list[jax.Array | None] = [None] * len(out_leaves)
        for part in parts:
            for k, t in enumerate(treedef.flatten_up_to(part)):
                o = out_leaves[k]
                if not jnp.issubdtype(o.dtype, jnp.inexact):
                    continue
                if jnp.iscomplexobj(t) and not jnp.iscomplexobj(o):
                    t = jnp.real(t)  # a real output of complex inputs: its tangent is real
                t = jnp.asarray(t).astype(o.dtype)
                previous = sums[k]
                sums[k] = t if previous is None else previous + t
        tangent_out = [_tangent_like(o, t) for o, t in zip(out_leaves, sums, strict=True)]
        return out, jax.tree.unflatten(treedef, tangent_out)

    fn.defjvp(fn_jvp, symbolic_zeros=True)
    setattr(fn, "source", primal.source)  # noqa: B010 - custom_jvp has no declared attribute
    setattr(fn, "__name__", primal.__name__)  # noqa: B010
    fn.__doc__ = primal.__doc__
    return fn
