"""The `expr=` form of `HilbertSpace.add_interaction`, evaluated on JAX matrices.

scqubits evaluates the string with qutip `Qobj`s for the operators (after rewriting `cos(`,
`sin(`, `exp(` and `sqrt(` into `Qobj.cosm(`, ...), the `const` dict and the caller's
`__main__` namespace. Here the same string runs on `Op`, a small stand-in for `Qobj` over a
JAX matrix with qutip's arithmetic: `*` between operators is the matrix product, a number
added to an operator is that number times the identity, `**` an integer matrix power.

`expm` (and `cosm`, `sinm` through it) is a Taylor series with scaling and squaring, matrix
products only: `jax.scipy.linalg.expm` solves a Pade system with LAPACK's LU inside XLA, and
two batched LAPACK calls side by side in one XLA CPU program can wait for each other forever
(see `_eigen.py`).
"""

from __future__ import annotations

import ast
import importlib
from typing import Any

import jax
import jax.numpy as jnp

from . import _hs_errors as _errors

# scqubits' InteractionTermStr.qutip_dict, in its order.
_REWRITES = {
    "cosm(": "Qobj.cosm(",
    "expm(": "Qobj.expm(",
    "sinm(": "Qobj.sinm(",
    "sqrtm(": "Qobj.sqrtm(",
    "cos(": "Qobj.cosm(",
    "exp(": "Qobj.expm(",
    "sin(": "Qobj.sinm(",
    "sqrt(": "Qobj.sqrtm(",
}


def rewrite(expr: str) -> str:
    """scqubits' `parse_qutip_functions`: the string scqubits itself evaluates."""
    for item, value in _REWRITES.items():
        if item in expr:
            expr = expr.replace(item, value)
    return expr


def has_complex_literal(expr: str) -> bool:
    tree = ast.parse(rewrite(expr), mode="eval")
    return any(isinstance(n, ast.Constant) and isinstance(n.value, complex) for n in ast.walk(tree))


class Op:
    """A matrix with `Qobj`'s arithmetic (the subset `expr=` strings use)."""

    __array_priority__ = 1000  # NumPy scalars defer to Op's reflected operators

    def __init__(self, m: jax.Array) -> None:
        self.m = m

    def _other(self, x: Any) -> jax.Array:
        if isinstance(x, Op):
            return x.m
        x = jnp.asarray(x)
        if x.ndim == 0:
            return x.astype(self.m.dtype) * jnp.eye(self.m.shape[0], dtype=self.m.dtype)
        raise TypeError(f"cannot combine an operator with an array of shape {x.shape}")

    def _scalar(self, x: Any) -> jax.Array:
        return jnp.asarray(x).astype(self.m.dtype)

    def __add__(self, x: Any) -> Op:
        return Op(self.m + self._other(x))

    __radd__ = __add__

    def __sub__(self, x: Any) -> Op:
        return Op(self.m - self._other(x))

    def __rsub__(self, x: Any) -> Op:
        return Op(self._other(x) - self.m)

    def __neg__(self) -> Op:
        return Op(-self.m)

    def __mul__(self, x: Any) -> Op:
        if isinstance(x, Op):
            return Op(self.m @ x.m)
        return Op(self.m * self._scalar(x))

    def __rmul__(self, x: Any) -> Op:
        return Op(self._scalar(x) * self.m)

    def __matmul__(self, x: Op) -> Op:
        return Op(self.m @ x.m)

    def __truediv__(self, x: Any) -> Op:
        return Op(self.m / self._scalar(x))

    def __pow__(self, n: int) -> Op:
        if not isinstance(n, int) or n < 0:
            raise TypeError(f"an operator's power must be a non-negative integer; got {n!r}")
        return Op(jnp.linalg.matrix_power(self.m, n))

    def dag(self) -> Op:
        return Op(self.m.conj().T)

    def conj(self) -> Op:
        return Op(self.m.conj())

    def trans(self) -> Op:
        return Op(self.m.T)

    def expm(self) -> Op:
        return Op(expm(self.m))

    def cosm(self) -> Op:
        return Op(_trig(self.m, cos=True))

    def sinm(self) -> Op:
        return Op(_trig(self.m, cos=False))

    def sqrtm(self) -> Op:
        raise ValueError(_errors.HS_SQRTM)


# Taylor terms after scaling to a 1-norm at most 1/2: the remainder is below 0.5^17 / 17!, 3e-20
# relative. Squarings: up to 2^48 times that norm, far beyond any physical operator.
_TAYLOR_DEGREE = 16
_MAX_SQUARINGS = 48


def expm(m: jax.Array) -> jax.Array:
    """`exp(m)` of a square matrix by matrix products alone; differentiable in every mode."""
    norm = jnp.max(jnp.sum(jnp.abs(jax.lax.stop_gradient(m)), axis=0))
    squarings = jnp.clip(jnp.ceil(jnp.log2(jnp.maximum(norm, 1e-300) * 2.0)), 0, _MAX_SQUARINGS)
    x = m / (2.0**squarings).astype(m.dtype)
    eye = jnp.eye(m.shape[-1], dtype=m.dtype)
    out, power = eye, eye
    for n in range(1, _TAYLOR_DEGREE + 1):
        power = power @ x / n
        out = out + power

    def square(i: Any, e: jax.Array) -> jax.Array:
        return jax.lax.cond(i < squarings, lambda e: e @ e, lambda e: e, e)

    return jax.lax.fori_loop(0, _MAX_SQUARINGS, square, out)


def _trig(m: jax.Array, cos: bool) -> jax.Array:
    """`cos(M)` or `sin(M)` through `expm` (exact derivatives, also at degenerate spectra)."""
    c = m.astype(jnp.complex128 if m.dtype in (jnp.float64, jnp.complex128) else jnp.complex64)
    plus, minus = expm(1j * c), expm(-1j * c)
    out = 0.5 * (plus + minus) if cos else -0.5j * (plus - minus)
    return out if jnp.iscomplexobj(m) else jnp.real(out)


class _Qobj:
    """The name `Qobj` inside the string: its matrix functions as static methods."""

    @staticmethod
    def cosm(x: Op) -> Op:
        return x.cosm()

    @staticmethod
    def sinm(x: Op) -> Op:
        return x.sinm()

    @staticmethod
    def expm(x: Op) -> Op:
        return x.expm()

    @staticmethod
    def sqrtm(x: Op) -> Op:
        return x.sqrtm()


def evaluate(expr: str, operators: dict[str, jax.Array], const: dict[str, Any]) -> jax.Array:
    """The operator `expr` denotes, as scqubits' `InteractionTermStr.run_string_code` does."""
    main = importlib.import_module("__main__")
    names = {
        **main.__dict__,
        **{k: Op(v) for k, v in operators.items()},
        "Qobj": _Qobj,
        **const,
    }
    out = eval(rewrite(expr), names)  # noqa: S307 - scqubits evaluates the same string
    if not isinstance(out, Op):
        raise ValueError(_errors.HS_EXPR_RESULT.format(expr=expr, got=type(out).__name__))
    return out.m
