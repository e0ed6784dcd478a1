"""`jaxbridge.sympy.operator_sum`: H(p) = sum_k c_k(p) O_k, compiled coefficients, fixed O_k.

A circuit Hamiltonian is a polynomial in operators (charge `n`, `cos(phi)`, ...) whose
coefficients are expressions in parameters (EJ, EC, ng). The operators are fixed matrices, so
only the coefficients need compiling; the matrix is one contraction of the coefficient vector
with the stacked operator products, which `jnp.linalg.eigh` differentiates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import sympy

from . import _errors
from ._compile import compile as compile_


def _operator_factors(term: sympy.Basic, symbols: set) -> tuple[sympy.Basic, tuple]:
    """Splits one expanded term into (coefficient, ordered operator factors with powers)."""
    coefficient, operators = [], []
    for factor in sympy.Mul.make_args(term):
        base, exponent = factor.as_base_exp() if isinstance(factor, sympy.Pow) else (factor, 1)
        if base in symbols:
            if not (sympy.sympify(exponent).is_Integer and exponent > 0):
                why = f"`{base}` appears with exponent `{exponent}`, not a positive integer"
                raise ValueError(_errors.OPERATOR_TERM.format(term=term, why=why))
            operators.append((base, int(exponent)))
        elif factor.free_symbols & symbols:
            why = f"`{factor}` mixes operators inside a function or a power"
            raise ValueError(_errors.OPERATOR_TERM.format(term=term, why=why))
        else:
            coefficient.append(factor)
    return sympy.Mul(*coefficient), tuple(operators)


def operator_sum(
    H: sympy.Basic,
    operators: Mapping[sympy.Basic, Any],
    params: Sequence[sympy.Symbol],
) -> Callable[..., jax.Array]:
    """Splits an operator polynomial into compiled coefficients and fixed operator matrices.

    Args:
        H: a polynomial in the operator keys, with coefficients that are expressions in
            `params`. A product or power of operators is their matrix product (in order, for
            non-commutative symbols); a term with no operator multiplies the identity.
        operators: maps each operator (a Symbol, commutative or not, or any subexpression such
            as `cos(phi)`) to a square NumPy or JAX matrix; all of one shape.
        params: the parameter symbols, in call order.

    Returns:
        `h(*param_values)`: the matrix `sum_k c_k(p) O_k`, with any leading batch dimensions of
        the parameters first. Its dtype is the promotion of the parameters' and the operators'
        (complex if an operator is). Gradients of `jnp.linalg.eigh(h(...))` work under `jit`,
        `vmap` and `grad`.

    Raises:
        ValueError: an operator that is not square or not the common shape, or a term that is
            not a coefficient times a product of operators.

    Example:
        >>> import numpy as np, sympy
        >>> import jaxbridge.sympy as jbs
        >>> a, b = sympy.symbols("a b")
        >>> sz = sympy.Symbol("sz", commutative=False)
        >>> h = jbs.operator_sum(a * sz + b, {sz: np.diag([1.0, -1.0])}, [a, b])
        >>> h(2.0, 0.5)
        Array([[ 2.5,  0. ],
               [ 0. , -1.5]], dtype=float32)
    """
    # Every key becomes a plain symbol first, so `cos(phi)` is one operator, not a function.
    keys = list(operators)
    stand_ins = {
        key: sympy.Symbol(f"_jaxbridge_op{i}", commutative=bool(key.is_commutative))
        for i, key in enumerate(keys)
    }
    matrices = {stand_ins[k]: np.asarray(operators[k]) for k in keys}
    shape = matrices[stand_ins[keys[0]]].shape if keys else (1, 1)
    for key in keys:
        got = matrices[stand_ins[key]].shape
        if len(got) != 2 or got[0] != got[1] or got != shape:
            raise ValueError(_errors.OPERATOR_SHAPE.format(key=key, shape=shape, got=got))
    expanded = sympy.expand(sympy.sympify(H).xreplace(stand_ins))
    symbols = set(matrices)

    coefficients: dict[tuple, sympy.Basic] = {}
    for term in sympy.Add.make_args(expanded):
        coefficient, product = _operator_factors(term, symbols)
        coefficients[product] = coefficients.get(product, 0) + coefficient

    products = list(coefficients)
    stacked = []
    for product in products:
        matrix = np.eye(shape[0])
        for symbol, power in product:
            matrix = matrix @ np.linalg.matrix_power(matrices[symbol], power)
        stacked.append(matrix)
    # Host-side products in float64/complex128; cast once to the parameters' dtype per call.
    stacked_operators = np.stack(stacked) if stacked else np.zeros((0, *shape))
    coefficient_fn = compile_([coefficients[p] for p in products], list(params))

    def h(*values: Any) -> jax.Array:
        cs = coefficient_fn(*values)
        c = jnp.stack(cs, axis=-1) if cs else jnp.zeros((0,))
        real = c.dtype
        dtype = (
            jnp.promote_types(real, jnp.complex64) if np.iscomplexobj(stacked_operators) else real
        )
        ops = jnp.asarray(stacked_operators, dtype=dtype)
        return jnp.tensordot(c.astype(dtype), ops, axes=1)

    return h
