"""`jaxbridge.sympy.compile`: a SymPy expression to a pure JAX function.

The code generation is `_codegen`'s; with `derivatives="symbolic"` the function gets a
`custom_jvp` from `_symbolic`. Both sit below this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import jax

from . import _errors
from ._codegen import _generate
from ._symbolic import symbolic


def compile(  # noqa: A001 - the public name the issue pins
    expr: Any,
    args: Sequence[Any],
    *,
    cse: bool = True,
    derivatives: Literal["symbolic"] | None = None,
    extra_functions: Mapping[Any, Callable[..., jax.Array]] | None = None,
) -> Callable[..., Any]:
    """Compiles a SymPy expression into a pure JAX function.

    The result is plain `jax.numpy` code (no callbacks) except for functions JAX lacks, which
    run on the host through SciPy or mpmath with derivatives from `sympy.diff`. It works under
    `jit`, `vmap`, `grad`, `jvp` and at higher order, and broadcasts over leading batch
    dimensions of its arguments.

    Args:
        expr: a SymPy expression, `Matrix`, `ImmutableMatrix`, matrix expression, N-dim `Array`,
            or a pytree (list, tuple, dict) of them.
        args: the inputs, in call order (a list or tuple; a set is refused, its order would
            change from run to run): each a `Symbol` or `Indexed` element (a scalar argument),
            a `MatrixSymbol` (an `(m, n)` argument), an `IndexedBase` (an array argument of its
            `shape`, or without one the smallest shape holding every integer index used), or a
            nested sequence of Symbols (an array argument of that shape).
        cse: print each distinct subexpression once (linear in the size of the expression DAG).
            With False, every occurrence is printed separately, as `lambdify` does.
        derivatives: None for JAX's own differentiation of the printed code; "symbolic" to
            install a `custom_jvp` whose tangent is `sympy.diff` of the expression (small
            derivatives simplified), compiled the same way, at every order. Per argument: one
            whose partial SymPy leaves unevaluated (`floor`, `re` of a complex symbol, a Bessel
            order, an `extra_functions` callable) takes JAX's derivative instead.
        extra_functions: `{sympy_function: jax_callable}` for functions the table lacks, or to
            replace a translation; the callable receives the arguments as arrays.

    Returns:
        `f(*values)`: each value has the declared trailing shape after any batch dimensions;
        scalar outputs have the broadcast batch shape, Matrix and Array outputs have their own
        dimensions last. Integer inputs compute in the default float dtype; otherwise the
        dtype follows the inputs (float32, or float64 under x64). Constants are Python
        literals: a Float with more digits than the dtype holds is rounded to it, a Rational
        `p/q` is computed as a multiplication by `p` and a division by `q`, integer powers are
        `lax.integer_pow` (exact repeated multiplication). Complex arguments compute complex
        values: in JAX where it has the function, else on the host with SciPy's complex loops
        or mpmath; a function of reals only (`floor`, `Min`, `<`, `erfinv`) raises a
        TypeError naming it. A real argument whose value is complex gives NaN, as `sqrt(-1.0)`.

    Raises:
        ValueError: at compile time for an unknown function (naming it and `extra_functions`),
            free symbols missing from `args` (or there with other assumptions, saying which),
            or non-numeric constants; at call time for arguments whose shapes do not match
            `args` or do not broadcast.
        TypeError: `args` given as a set; at call time, a complex argument to a function of
            real arguments only.

    Warns:
        RuntimeWarning: on the CPU backend, when the printed program has more than 2,500
            operations and uses some value twice. XLA:CPU's default fusion emitter recomputes
            such values at each use; the message names the compiler option that keeps them.

    Example:
        >>> import jax, sympy
        >>> import jaxbridge.sympy as jbs
        >>> x, y = sympy.symbols("x y")
        >>> f = jbs.compile(sympy.sin(x) * y**2, [x, y])
        >>> f(0.5, 2.0)
        Array(1.9177..., dtype=float32)
        >>> round(float(jax.grad(f, argnums=1)(0.5, 2.0)), 4)
        1.9177
        >>> f(jax.numpy.zeros((4, 3)), 1.0).shape  # leading dimensions are batch dimensions
        (4, 3)
    """
    if derivatives not in (None, "symbolic"):
        raise ValueError(_errors.DERIVATIVES.format(got=derivatives))
    if derivatives == "symbolic":
        return symbolic(expr, args, cse=cse, extra_functions=extra_functions)
    return _generate(expr, args, cse, extra_functions)
