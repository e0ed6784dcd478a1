"""Per-node printing rules: what each SymPy node depends on, and the line of code it becomes.

`deps(node, ctx)` lists the (child, context) pairs that must be printed first; `code(node, ctx,
codes)` receives their code (variable names or literals) and returns one expression. Both are
called once per distinct node by the printer's iterative walk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sympy
from sympy.matrices.expressions import matexpr

from . import _errors, _functions
from ._atoms import Mask, is_function, literal, unknown_function

_SUM_LIMIT = 10_000

_RELATIONAL = {
    sympy.Eq: "equal",
    sympy.Ne: "not_equal",
    sympy.Lt: "less",
    sympy.Le: "less_equal",
    sympy.Gt: "greater",
    sympy.Ge: "greater_equal",
}
_BOOLEAN = {sympy.And: "logical_and", sympy.Or: "logical_or", sympy.Xor: "logical_xor"}


def _chain(op: str, codes: list[str]) -> str:

    if len(codes) == 1:
        return codes[0]
    helper = {"+": "add", "*": "mul"}[op]
    return f"_rt.{helper}({', '.join(codes)})"


class NodeRules:
    """Mixed into the printer: dispatch on the type of each node."""

    if TYPE_CHECKING:  # provided by the printer
        leaves: dict[Any, Any]
        extra_functions: dict[Any, Any]
        missing: set[Any]

        def rewrite(self, node: Any, fn: Callable[[Any], Any]) -> Any: ...
        def context(self, parent: Any, piecewise: Any, k: int) -> Any: ...
        def register(self, prefix: str, value: object) -> str: ...

    # Dependencies.

    def deps(self, node: Any, ctx: Any) -> list[tuple[Any, Any]]:
        if isinstance(node, Mask):
            pairs: Any = node.piecewise.args
            return [(pair.cond, ctx) for pair in pairs[: node.k + 1]]
        if node in self.leaves:
            if ctx.parent is None:
                return []
            return [(node, ctx.parent), (ctx.mask, ctx.parent)]
        if isinstance(node, (sympy.MatrixSymbol, sympy.Indexed)):
            return []  # not an argument: reported as missing
        if node.is_Atom:
            if literal(node) is None and not node.is_Symbol:
                raise ValueError(_errors.NON_NUMERIC.format(node=node))
            return []
        if isinstance(node, (sympy.Sum, sympy.Product, sympy.Derivative, sympy.Subs)):
            return [(self.rewrite(node, _rewrite), ctx)]
        if isinstance(node, sympy.MatrixBase):
            return [(e, ctx) for e in node]
        if isinstance(node, matexpr.MatrixExpr) and not isinstance(node, matexpr.MatrixElement):
            return [
                (a, ctx) for a in node.args if not a.is_Integer or isinstance(node, sympy.MatMul)
            ]
        if isinstance(node, sympy.Piecewise):
            pairs = node.args
            conds = [(pair.cond, ctx) for pair in pairs]
            return conds + [(pair.expr, self.context(ctx, node, k)) for k, pair in enumerate(pairs)]
        if isinstance(node, sympy.Mul):
            return [(b, ctx) for b in self._mul_parts(node)[2]]
        if isinstance(node, sympy.Pow):
            return [(node.base, ctx)] + ([] if node.exp.is_Number else [(node.exp, ctx)])
        if isinstance(node, matexpr.MatrixElement):
            return [(node.parent, ctx)]
        if isinstance(node, sympy.MatrixBase):
            return [(e, ctx) for e in node]
        if isinstance(node, (sympy.Identity, sympy.ZeroMatrix, sympy.OneMatrix)):
            return []
        if is_function(node):
            if node.func not in self.extra_functions and node.func not in _functions.NATIVE:
                raise unknown_function(node)
            if node.func in self.extra_functions:
                return [(a, ctx) for a in node.args]
            return [(a, ctx) for a in _functions.host_arguments(node)]
        if isinstance(node, sympy.Integral):
            symbols = ", ".join(sorted(str(s) for s in node.free_symbols))
            raise ValueError(_errors.INTEGRAL.format(node=node, symbols=symbols))
        return [(a, ctx) for a in node.args]

    # Code.

    def code(self, node: Any, ctx: Any, codes: list[str]) -> str:
        if isinstance(node, Mask):
            return f"_rt.taken([{', '.join(codes)}], {node.k})"
        if node in self.leaves:
            leaf = self.leaves[node]
            if ctx.parent is not None:
                return f"_rt.guard({codes[1]}, {codes[0]}, {leaf.matrix_dims})"
            if not leaf.index:
                return leaf.var
            return f"{leaf.var}[..., {', '.join(map(str, leaf.index))}]"
        if isinstance(node, (sympy.MatrixSymbol, sympy.Indexed)):
            self.missing.add(node)
            return "jnp.nan"
        if node.is_Atom:
            code = literal(node)
            if code is None:  # a free symbol that is not an argument
                self.missing.add(node)
                return "jnp.nan"
            return code
        if isinstance(node, (sympy.Sum, sympy.Product, sympy.Derivative, sympy.Subs)):
            return codes[0]
        if isinstance(node, matexpr.MatrixExpr):
            matrix = self._matrix(node, codes)
            if matrix is None:
                raise unknown_function(node)
            return matrix
        if isinstance(node, sympy.Piecewise):
            n = len(node.args)
            return f"_rt.piecewise([{', '.join(codes[:n])}], [{', '.join(codes[n:])}])"
        if isinstance(node, sympy.Add):
            return _chain("+", codes)
        if isinstance(node, sympy.Mul):
            return self._mul(node, codes)
        if isinstance(node, sympy.Pow):
            return self._pow(node, codes)
        if isinstance(node, sympy.Tuple):
            raise ValueError(_errors.BAD_EXPR.format(type="Tuple", value=node))
        if type(node) in _RELATIONAL:
            op = _RELATIONAL[type(node)]
            if op in ("equal", "not_equal"):
                return f"jnp.{op}({codes[0]}, {codes[1]})"
            return f"_rt.compare({op!r}, {codes[0]}, {codes[1]})"  # real arguments only
        if type(node) in _BOOLEAN:
            return f"_rt.reduce({_BOOLEAN[type(node)]!r}, {', '.join(codes)})"
        if isinstance(node, sympy.Not):
            return f"jnp.logical_not({codes[0]})"
        if isinstance(node, sympy.Implies):
            return f"jnp.logical_or(jnp.logical_not({codes[0]}), {codes[1]})"
        if isinstance(node, sympy.Equivalent):
            return f"_rt.reduce('equal', {', '.join(codes)})"
        if isinstance(node, sympy.ITE):
            return f"jnp.where({codes[0]}, {codes[1]}, {codes[2]})"
        matrix = self._matrix(node, codes)
        if matrix is not None:
            return matrix
        if is_function(node):
            if node.func in self.extra_functions:
                name = self.register("_x", self.extra_functions[node.func])
                return f"{name}({', '.join(codes)})"
            return _functions.NATIVE[node.func](node, codes, self)
        raise unknown_function(node)

    # Products and powers, exactly.

    def _mul_parts(self, node: Any) -> tuple[Any, list[Any], list[Any], list[Any]]:
        """(coefficient, numerator nodes, all child nodes, denominator (node, exponent) pairs)."""
        coefficient, numerator, denominator = sympy.S.One, [], []
        for factor in node.args:
            if factor.is_Rational:
                coefficient = factor
            elif isinstance(factor, sympy.Pow) and factor.exp.is_Rational and factor.exp < 0:
                denominator.append((factor.base, -factor.exp))
            else:
                numerator.append(factor)
        return coefficient, numerator, numerator + [b for b, _ in denominator], denominator

    def _mul(self, node: Any, codes: list[str]) -> str:
        coefficient, numerator, _, denominator = self._mul_parts(node)
        num = codes[: len(numerator)]
        den = [
            _power(code, exponent)
            for code, (_, exponent) in zip(codes[len(numerator) :], denominator, strict=True)
        ]
        # A Rational coefficient p/q is a multiplication by p and a division by q, never a
        # rounded float: (2/3)*x is 2*x/3.
        p, q = coefficient.p, coefficient.q
        if p == -1 and num:
            num_code = f"_rt.neg({_chain('*', num)})"
        else:
            num_code = _chain("*", ([literal_int(p)] if p != 1 or not num else []) + num)
        if q != 1:
            den.insert(0, literal_int(q))
        if not den:
            return num_code
        return f"_rt.div({num_code}, {_chain('*', den)})"

    def _pow(self, node: Any, codes: list[str]) -> str:
        exponent = node.exp
        if exponent.is_Rational and exponent < 0:
            return f"_rt.div(1.0, {_power(codes[0], -exponent)})"
        if exponent.is_Number:
            return _power(codes[0], exponent)
        return f"jnp.power({codes[0]}, {codes[1]})"

    # Matrix expressions, as arrays with the matrix dimensions last.

    def _matrix(self, node: Any, codes: list[str]) -> str | None:
        if isinstance(node, matexpr.MatrixElement):
            return f"{codes[0]}[..., {_int(node.i)}, {_int(node.j)}]"
        if isinstance(node, sympy.MatrixBase):
            return f"_rt.stack([{', '.join(codes)}], {tuple(node.shape)}, _bs, _dt)"
        if isinstance(node, sympy.Identity):
            return f"_rt.eye({_int(node.rows)}, _dt)"
        if isinstance(node, (sympy.ZeroMatrix, sympy.OneMatrix)):
            fill = "zeros" if isinstance(node, sympy.ZeroMatrix) else "ones"
            return f"jnp.{fill}(({_int(node.rows)}, {_int(node.cols)}), _dt)"
        if isinstance(node, sympy.MatAdd):
            return _chain("+", codes)
        if isinstance(node, sympy.HadamardProduct):
            return _chain("*", codes)
        if isinstance(node, sympy.MatMul):
            matrices = [c for a, c in zip(node.args, codes, strict=True) if a.is_Matrix]
            scalars = [c for a, c in zip(node.args, codes, strict=True) if not a.is_Matrix]
            product = " @ ".join(matrices)
            if scalars:
                product = f"jnp.asarray({_chain('*', scalars)})[..., None, None] * ({product})"
            return product
        if isinstance(node, sympy.Transpose):
            return f"jnp.swapaxes({codes[0]}, -1, -2)"
        if isinstance(node, sympy.Adjoint):
            return f"jnp.conj(jnp.swapaxes({codes[0]}, -1, -2))"
        if isinstance(node, sympy.Inverse):
            return f"jnp.linalg.inv({codes[0]})"
        if isinstance(node, sympy.Determinant):
            return f"jnp.linalg.det({codes[0]})"
        if isinstance(node, sympy.Trace):
            return f"jnp.trace({codes[0]}, axis1=-2, axis2=-1)"
        if isinstance(node, sympy.MatPow) and node.exp.is_Integer:
            return f"jnp.linalg.matrix_power({codes[0]}, {_int(node.exp)})"
        return None


def _int(value: Any) -> int:
    return int(value)  # a SymPy Integer (typed as Basic)


def literal_int(value: int) -> str:
    # A float literal: weakly typed like the int, and accepted by `lax` arithmetic.
    return repr(float(value))


def _power(code: str, exponent: Any) -> str:
    """`code ** exponent` for a positive Rational: integer powers stay exact multiplications."""
    if not exponent.is_Rational:
        return f"jnp.power({code}, {float(exponent)!r})"
    if exponent == 1:
        return code
    if exponent.is_Integer:
        return f"_rt.integer_pow({code}, {int(exponent)})"
    if exponent == sympy.S.Half:
        return f"_rt.sqrt({code})"
    if exponent.q == 2:
        return f"_rt.integer_pow(_rt.sqrt({code}), {int(exponent.p)})"
    return f"jnp.power({code}, {float(exponent)!r})"


def _rewrite(node: Any) -> sympy.Basic:
    if isinstance(node, (sympy.Sum, sympy.Product)):
        return _expand(node)
    result = node.doit()
    if isinstance(result, (sympy.Derivative, sympy.Subs)) or result == node:
        raise ValueError(_errors.UNEVALUATED_DERIVATIVE.format(node=node))
    return result


def _expand(node: Any) -> sympy.Basic:
    terms = [node.function]
    for index, lower, upper in node.limits:
        if not (lower.is_Integer and upper.is_Integer) or upper - lower >= _SUM_LIMIT:
            raise ValueError(
                _errors.SUM_BOUNDS.format(node=node, limit=_SUM_LIMIT, bounds=(lower, upper))
            )
        values = [sympy.Integer(i) for i in range(int(lower), int(upper) + 1)]
        terms = [t.xreplace({index: v}) for t in terms for v in values]
    combine = sympy.Add if isinstance(node, sympy.Sum) else sympy.Mul
    return combine(*terms)
