"""`compile(..., derivatives="symbolic")`: a `custom_jvp` whose tangent comes from `sympy.diff`.

The tangent of output `f` is the expression `sum_s diff(f, s) * ds`, with one fresh tangent
symbol `ds` per input symbol `s`, compiled like any expression (one CSE over all partials) and
itself with symbolic derivatives, so every order is symbolic. It is linear in the tangent
symbols, so JAX transposes it for reverse mode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import sympy
from sympy.tensor.array import NDimArray

from ._compile import _generate, _is_expr_leaf, normalize_args

# sympy.simplify is worth its (super-linear) cost only on small derivatives.
_SIMPLIFY_LIMIT = 40


def _size(expr: sympy.Basic, limit: int) -> int:
    """The number of distinct nodes of `expr`, counting no further than `limit`."""
    seen, stack = set(), [expr]
    while stack and len(seen) <= limit:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(node.args)
    return len(seen)


def _partial(expr: sympy.Basic, symbol: sympy.Basic) -> sympy.Basic:
    derivative = sympy.diff(expr, symbol)
    if derivative != 0 and _size(derivative, _SIMPLIFY_LIMIT) <= _SIMPLIFY_LIMIT:
        derivative = sympy.simplify(derivative)
    return derivative


def _explicit(expr: Any, matrices: dict) -> Any:
    """Matrix arguments as explicit matrices of their elements, so `diff` sees every entry."""
    if not matrices or not isinstance(expr, sympy.Basic):
        return expr
    return expr.xreplace(matrices).doit()


def _tangent_leaf(leaf: Any, pairs: list, matrices: dict) -> Any:
    def scalar(e):
        e = _explicit(sympy.sympify(e), matrices)
        return sympy.Add(*[_partial(e, s) * ds for s, ds in pairs])

    if isinstance(leaf, (sympy.MatrixBase, NDimArray)):
        return (
            sympy.ImmutableDenseNDimArray(leaf).applyfunc(scalar)
            if isinstance(leaf, NDimArray)
            else sympy.ImmutableMatrix(leaf).applyfunc(scalar)
        )
    if isinstance(leaf, sympy.MatrixExpr):
        explicit = _explicit(leaf, matrices).as_explicit()
        return sympy.ImmutableMatrix(explicit.applyfunc(lambda e: scalar(e)))
    return scalar(leaf)


def symbolic(
    expr: Any, args: Any, *, cse: bool, extra_functions: Mapping | None
) -> Callable[..., Any]:
    """The compiled function of `expr`, with symbolic derivatives at every order."""
    primal = _generate(expr, args, cse, extra_functions)
    if isinstance(args, (sympy.Symbol, sympy.MatrixSymbol)):
        args = [args]
    symbol_arrays = normalize_args(args)[3]
    matrices = {a: a.as_explicit() for a in args if isinstance(a, sympy.MatrixSymbol)}
    tangent_cache: list[Callable] = []  # built on the first derivative, then reused

    def tangent_function() -> Callable:
        if tangent_cache:
            return tangent_cache[0]
        tangent_args, pairs = [], []
        for i, (arg, symbols) in enumerate(zip(args, symbol_arrays, strict=True)):
            if isinstance(arg, sympy.MatrixSymbol):
                dot = sympy.MatrixSymbol(f"_d{i}_{id(arg)}", *arg.shape)
                pairs.extend((symbols[index], dot[index]) for index in np.ndindex(symbols.shape))
                tangent_args.append(dot)
                continue
            dots = np.empty(symbols.shape, dtype=object)
            for index in np.ndindex(symbols.shape):
                dots[index] = sympy.Dummy(f"d{i}_{'_'.join(map(str, index))}")
                pairs.append((symbols[index], dots[index]))
            tangent_args.append(dots[()] if dots.ndim == 0 else dots.tolist())
        outputs, treedef = jax.tree.flatten(expr, is_leaf=_is_expr_leaf)
        tangent_expr = jax.tree.unflatten(
            treedef, [_tangent_leaf(leaf, pairs, matrices) for leaf in outputs]
        )
        all_args = list(args) + tangent_args
        tangent_cache.append(
            symbolic(tangent_expr, all_args, cse=cse, extra_functions=extra_functions)
        )
        return tangent_cache[0]

    @jax.custom_jvp
    def fn(*values):
        return primal(*values)

    def fn_jvp(primals, tangents):
        tangents = [
            jnp.zeros(jnp.shape(t), jnp.result_type(float))
            if jnp.asarray(t).dtype == jax.dtypes.float0
            else t
            for t in tangents
        ]
        out = fn(*primals)
        tangent_out = tangent_function()(*primals, *tangents)
        tangent_out = jax.tree.map(lambda o, t: t.astype(o.dtype), out, tangent_out)
        return out, tangent_out

    fn.defjvp(fn_jvp)
    fn.source = primal.source  # type: ignore[attr-defined]
    fn.__name__ = primal.__name__
    fn.__doc__ = primal.__doc__
    return fn
