"""`jaxbridge.sympy.operator_sum`: H(p) = sum_k c_k(p) O_k, compiled coefficients, fixed O_k.

A circuit Hamiltonian is a polynomial in operators (charge `n`, `cos(phi)`, ...) whose
coefficients are expressions in parameters (EJ, EC, ng). The operators are fixed matrices, so
only the coefficients need compiling; the matrix is one contraction of the coefficient vector
with the stacked operator products, which `jnp.linalg.eigh` differentiates.

Two more forms reduce to that one:

- `cos(A + B)` and `sin(A + B)`, `A` in the operators and `B` in the parameters (a flux bias),
  are expanded into `cos(A) cos(B) - sin(A) sin(B)` and `sin(A) cos(B) + cos(A) sin(B)`.
- A `HermitianFactor` operator `X` may appear inside any function `f(alpha(p) X + beta(p))`:
  with `X = V diag(x) V^H` (decomposed once), that term is `V diag(f(alpha x + beta)) V^H`, a
  coefficient vector `f(alpha(p) x + beta(p))` times the fixed projectors on `X`'s eigenvectors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import sympy

from . import _errors
from ._compile import compile as compile_

# The messages of the errors this module adds (sympy/_errors.py holds the older ones).
OPERATOR_KEY_PARAM = (
    "`jaxbridge.sympy.operator_sum`: the operator key `{key}` contains the parameter(s) "
    "{params}. An operator matrix is fixed, so the key would make them dead inputs (their "
    "gradient silently 0). Use keys free of parameters (`cos(phi)`, not `cos(phi + 2*pi*flux)`: "
    "shifted cosines are expanded over `cos(phi)` and `sin(phi)`), or a `HermitianFactor`."
)

OPERATOR_SHIFT = (
    "`jaxbridge.sympy.operator_sum`: `{node}` shifts the operator argument `{a}` by parameters; "
    "it is expanded as cos(A)cos(B) - sin(A)sin(B), which needs the operator key(s) {missing}. "
    "Add them to `operators`, or declare the operator a `HermitianFactor`."
)

HERMITIAN_FACTOR = (
    "`jaxbridge.sympy.HermitianFactor`: the matrix must be square and Hermitian; got one of "
    "shape {shape} that is not. Pass the Hermitian generator X, not a function of it."
)


@dataclasses.dataclass(frozen=True, eq=False)
class HermitianFactor:
    """The operator `kron(I_left, X, I_right)` for a fixed Hermitian `X`.

    As an `operator_sum` operator it may appear in powers and inside functions of
    `alpha(p) * X + beta(p)`, `alpha` and `beta` expressions in the parameters: the function is
    applied through `X`'s eigendecomposition (computed once), not through a Taylor series.

    Args:
        matrix: the Hermitian `(d, d)` matrix `X` (dense or `scipy.sparse`).
        left: the size of the identity before it in the tensor product.
        right: the size of the identity after it.

    Example:
        >>> import numpy as np, sympy
        >>> import jaxbridge.sympy as jbs
        >>> a, x = sympy.symbols("a x")
        >>> X = jbs.HermitianFactor(np.diag([0.0, np.pi]))
        >>> h = jbs.operator_sum(sympy.cos(a * x), {x: X}, [a])
        >>> h(1.0).round(3)
        Array([[ 1.,  0.],
               [ 0., -1.]], dtype=float32)
    """

    matrix: Any
    left: int = 1
    right: int = 1
    eigenvalues: np.ndarray = dataclasses.field(init=False, repr=False)
    eigenvectors: np.ndarray = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        x = _dense(self.matrix)
        if x.ndim != 2 or x.shape[0] != x.shape[1] or not np.allclose(x, x.conj().T):
            raise ValueError(HERMITIAN_FACTOR.format(shape=x.shape))
        values, vectors = np.linalg.eigh(x)
        object.__setattr__(self, "eigenvalues", values)
        object.__setattr__(self, "eigenvectors", vectors)

    @property
    def shape(self) -> tuple[int, int]:
        n = self.left * _dense(self.matrix).shape[0] * self.right
        return (n, n)

    def full(self, power: int = 1) -> np.ndarray:
        """`kron(I_left, X^power, I_right)`."""
        x = np.linalg.matrix_power(_dense(self.matrix), power)
        return np.kron(np.kron(np.eye(self.left), x), np.eye(self.right))


@dataclasses.dataclass(frozen=True, eq=False)
class SpectralTerm:
    """`coefficient(p) * kron(I_left, V diag(f(alpha(p) x + beta(p))) V^H, I_right)`."""

    factor: HermitianFactor
    expression: sympy.Basic  # coefficient * f(alpha * _x + beta), in params and `_x`


_X = sympy.Dummy("x")


def _dense(m: Any) -> np.ndarray:
    return np.asarray(m.toarray() if hasattr(m, "toarray") else m)


def _is_sparse(m: Any) -> bool:
    return hasattr(m, "tocsr") and hasattr(m, "nnz")


def _split_argument(arg: Any, symbols: set) -> tuple[Any, Any]:
    """`arg = A + B`: A the terms with operator symbols, B the rest."""
    a, b = [], []
    for term in sympy.Add.make_args(sympy.expand(arg)):
        (a if term.free_symbols & symbols else b).append(term)
    return sympy.Add(*a), sympy.Add(*b)


def trig_keys(a: Any) -> tuple[Any, Any, int]:
    """The operator keys `cos(A)`, `sin(A)` of the operator part `A` of a cos/sin argument.

    SymPy writes `cos(-x)` as `cos(x)` and `sin(-x)` as `-sin(x)`, a product rather than a
    `sin`; so `A` is taken with the sign SymPy keeps (`-A` where it can extract a minus sign),
    and the sign `s` with `A = s * A'` is returned.
    """
    sign = -1 if sympy.sympify(a).could_extract_minus_sign() else 1
    a = sign * a
    return sympy.cos(a), sympy.sin(a), sign


def _expand_shifted_trig(
    H: sympy.Basic, keys: set, op_symbols: set, factor_symbols: set
) -> sympy.Basic:
    """Rewrites `cos(A + B)`, `sin(A + B)` with parameters in B over the keys `cos(A)`, `sin(A)`."""

    def rewrite(node: sympy.Basic) -> sympy.Basic:
        if not isinstance(node, sympy.cos | sympy.sin) or node in keys:
            return node
        a, b = _split_argument(node.args[0], op_symbols)
        if a == 0 or a.free_symbols & factor_symbols:
            return node  # no operator, or a HermitianFactor function: kept whole
        cos_a, sin_a, sign = trig_keys(a)
        if b == 0 and sign == 1:
            return node  # cos(A) or sin(A) itself: a key or an error below
        missing = [k for k in (cos_a, sin_a) if k not in keys]
        if missing:
            raise ValueError(
                OPERATOR_SHIFT.format(node=node, a=a, missing=", ".join(map(str, missing)))
            )
        b = sign * b  # cos(A + B) = cos(A' + B'), sin(A + B) = sign * sin(A' + B')
        if isinstance(node, sympy.cos):
            return cos_a * sympy.cos(b) - sin_a * sympy.sin(b)
        return sign * (sin_a * sympy.cos(b) + cos_a * sympy.sin(b))

    return sympy.sympify(H).replace(
        lambda e: isinstance(e, sympy.cos | sympy.sin), rewrite, map=False
    )


class OperatorTermError(ValueError):
    """`operator_sum`'s error for a term it cannot split.

    It keeps the term and the offending part as SymPy expressions, so a caller that rewrote
    its own variables before calling `operator_sum` can name them again with `renamed`.
    """

    def __init__(self, term: Any, why: str, **parts: Any) -> None:
        self.term, self.why, self.parts = term, why, parts
        super().__init__(_errors.OPERATOR_TERM.format(term=term, why=why.format(**parts)))

    def renamed(
        self, rename: Callable[[Any], Any], bare: Mapping[Any, Any] | None = None
    ) -> OperatorTermError:
        """The same error with `rename` applied to its expressions.

        Args:
            rename: expression -> the same expression in the caller's own variables.
            bare: symbol -> name for a part that is that symbol alone (an operator raised to
                a bad power), where the plain name reads better than the renamed form.
        """

        def part(e: Any) -> Any:
            return bare[e] if bare and e in bare else rename(e)

        parts = {k: part(v) for k, v in self.parts.items()}
        return OperatorTermError(rename(self.term), self.why, **parts)


def _operator_factors(
    term: Any, symbols: set, factors: Mapping[Any, HermitianFactor]
) -> tuple[Any, tuple, SpectralTerm | None]:
    """Splits one expanded term into (coefficient, operator factors with powers, spectral)."""
    coefficient, operators, spectral = [], [], None
    for factor in sympy.Mul.make_args(term):
        base, exponent = factor.as_base_exp() if isinstance(factor, sympy.Pow) else (factor, 1)
        if base in symbols:
            if not (sympy.sympify(exponent).is_Integer and exponent > 0):
                why = "`{base}` appears with exponent `{exponent}`, not a positive integer"
                raise OperatorTermError(term, why, base=base, exponent=exponent)
            operators.append((base, int(exponent)))
        elif factor.free_symbols & set(factors) and isinstance(factor, sympy.Function):
            inner = factor.free_symbols & set(factors)
            x: Any = next(iter(inner)) if len(inner) == 1 else None
            arg: Any = factor.args[0] if len(factor.args) == 1 else None
            linear = x is not None and arg is not None and sympy.degree(arg, x) == 1
            others = factor.free_symbols & (symbols - set(factors))
            if not linear or spectral is not None or others:
                why = (
                    "`{factor}` is not one function of `alpha * X + beta` for a single "
                    "HermitianFactor `X`, or is multiplied by a second such function"
                )
                raise OperatorTermError(term, why, factor=factor)
            alpha, beta = sympy.Poly(arg, x).all_coeffs()
            func: Any = factor.func
            spectral = SpectralTerm(factors[x], func(alpha * _X + beta))
        elif factor.free_symbols & symbols:
            why = "`{factor}` mixes operators inside a function or a power"
            raise OperatorTermError(term, why, factor=factor)
        else:
            coefficient.append(factor)
    if spectral is not None and operators:
        why = "a function of a HermitianFactor is multiplied by other operators"
        raise OperatorTermError(term, why)
    return sympy.Mul(*coefficient), tuple(operators), spectral


class OperatorSum:
    """`H(p) = sum_k c_k(p) O_k`, split: compiled coefficients and fixed operators.

    Made by `operator_sum`; calling it returns the dense matrix.

    Attributes:
        params: the parameter symbols, in call order.
        products: one entry per fixed operator: a tuple of `(operator key, power)`, `()` for
            the identity.
        operators: the fixed operator matrices, one per product (sparse where every factor
            was `scipy.sparse`, else dense NumPy).
        spectral: the `SpectralTerm`s (functions of a `HermitianFactor`).
        dim: the matrix size.
    """

    def __init__(
        self,
        products: list[tuple],
        operators: list[Any],
        coefficients: list[sympy.Basic],
        spectral: list[SpectralTerm],
        params: Sequence[sympy.Symbol],
        dim: int,
    ) -> None:
        self.products = products
        self.operators = operators
        self.spectral = spectral
        self.params = list(params)
        self.dim = dim
        self.coefficient_expressions = coefficients
        self._fixed = compile_(coefficients, self.params)
        self._spectral = [compile_(t.expression, [*self.params, _X]) for t in spectral]
        self._stacked: np.ndarray | None = None

    @property
    def stacked_operators(self) -> np.ndarray:
        """The fixed operators as one dense `(K, N, N)` array (made on first use)."""
        if self._stacked is None:
            dense = [_dense(o) for o in self.operators]
            self._stacked = np.stack(dense) if dense else np.zeros((0, self.dim, self.dim))
        return self._stacked

    @property
    def is_complex(self) -> bool:
        ops = [_dense(o) for o in self.operators] + [t.factor.eigenvectors for t in self.spectral]
        return any(np.iscomplexobj(o) for o in ops)

    def coefficients(self, *values: Any) -> jax.Array:
        """The fixed operators' coefficients `c_k(p)`: `(*batch, K)`."""
        cs = self._fixed(*values)
        if cs:
            return jnp.stack(jnp.broadcast_arrays(*cs), axis=-1)
        batch = jnp.broadcast_shapes(*(jnp.shape(v) for v in values))
        return jnp.zeros((*batch, 0), jnp.asarray(values[0]).dtype if values else None)

    def spectral_coefficients(self, *values: Any) -> list[jax.Array]:
        """For each `SpectralTerm`, `coefficient * f(alpha x_m + beta)`: `(*batch, d)`."""
        out = []
        for term, fn in zip(self.spectral, self._spectral):
            x = jnp.asarray(term.factor.eigenvalues, dtype=jnp.asarray(values[0]).dtype)
            batched = [jnp.asarray(v)[..., None] for v in values]
            out.append(fn(*batched, x))
        return out

    def __call__(self, *values: Any) -> jax.Array:
        c = self.coefficients(*values)
        real = c.dtype if c.size or not values else jnp.asarray(values[0]).dtype
        dtype = _complex_of(real) if self.is_complex else real
        h = jnp.tensordot(c.astype(dtype), jnp.asarray(self.stacked_operators, dtype), axes=1)
        batch = jnp.broadcast_shapes(*(jnp.shape(v) for v in values))
        h = jnp.broadcast_to(h, (*batch, self.dim, self.dim))
        for term, s in zip(self.spectral, self.spectral_coefficients(*values)):
            v = jnp.asarray(term.factor.eigenvectors, dtype)
            middle = jnp.einsum("im,...m,jm->...ij", v, s.astype(dtype), v.conj())
            f = term.factor
            eye_l, eye_r = jnp.eye(f.left, dtype=dtype), jnp.eye(f.right, dtype=dtype)
            full = jnp.einsum("ab,...ij,cd->...aicbjd", eye_l, middle, eye_r)
            h = h + full.reshape(*middle.shape[:-2], self.dim, self.dim)
        return h

    def d_hamiltonian(self, param: sympy.Symbol, *values: Any) -> jax.Array:
        """`dH/dp` for the parameter `param` at `values` (exact, by forward mode)."""
        i = self.params.index(param)

        def h(value: Any) -> jax.Array:
            vs = list(values)
            vs[i] = value
            return self(*vs)

        value = jnp.asarray(values[i])
        return jax.jvp(h, (value,), (jnp.ones_like(value),))[1]


def _complex_of(dtype: Any) -> Any:
    return jnp.complex128 if jnp.dtype(dtype) == jnp.float64 else jnp.complex64


def operator_sum(
    H: sympy.Basic,
    operators: Mapping[sympy.Basic, Any],
    params: Sequence[sympy.Symbol],
) -> OperatorSum:
    """Splits an operator polynomial into compiled coefficients and fixed operator matrices.

    Args:
        H: a polynomial in the operator keys, with coefficients that are expressions in
            `params`. A product or power of operators is their matrix product (in order, for
            non-commutative symbols); a term with no operator multiplies the identity.
            `cos(A + B)` and `sin(A + B)` with `A` in the operators and `B` in the parameters
            are expanded over the keys `cos(A)` and `sin(A)` (both must be given). A
            `HermitianFactor` key may also appear as `f(alpha(p) * X + beta(p))`.
        operators: maps each operator (a Symbol, commutative or not, or any subexpression such
            as `cos(phi)`, free of parameters) to a square NumPy, JAX or `scipy.sparse` matrix,
            or a `HermitianFactor`; all of one shape.
        params: the parameter symbols, in call order.

    Returns:
        An `OperatorSum` `h`: `h(*param_values)` is the matrix `sum_k c_k(p) O_k`, with any
        leading batch dimensions of the parameters first. Its dtype is the promotion of the
        parameters' and the operators' (complex if an operator is). Gradients of
        `jnp.linalg.eigh(h(...))` work under `jit`, `vmap` and `grad`. `h.coefficients`,
        `h.operators` and `h.d_hamiltonian` give the split.

    Raises:
        ValueError: an operator that is not square or not the common shape, an operator key
            that contains a parameter (its gradient would silently be zero), a shifted
            `cos`/`sin` whose `cos(A)` or `sin(A)` key is missing, or a term that is not a
            coefficient times a product of operators.

    Example:
        >>> import numpy as np, sympy
        >>> import jaxbridge.sympy as jbs
        >>> a, b = sympy.symbols("a b")
        >>> sz = sympy.Symbol("sz", commutative=False)
        >>> h = jbs.operator_sum(a * sz + b, {sz: np.diag([1.0, -1.0])}, [a, b])
        >>> h(2.0, 0.5)
        Array([[ 2.5,  0. ],
               [ 0. , -1.5]], dtype=float32)
        >>> sorted(h.coefficients(2.0, 0.5).tolist())  # one per product: a (sz), b (identity)
        [0.5, 2.0]
    """
    params = list(params)
    param_set = set(params)
    keys = list(operators)
    for key in keys:
        inside = sympy.sympify(key).free_symbols & param_set
        if inside:
            names = ", ".join(sorted(map(str, inside)))
            raise ValueError(OPERATOR_KEY_PARAM.format(key=key, params=names))
    factors = {k: v for k, v in operators.items() if isinstance(v, HermitianFactor)}
    plain = [k for k in keys if k not in factors]

    def matrix(value: Any) -> Any:
        if _is_sparse(value):
            return value.tocsr()
        return np.asarray(value)

    matrices_by_key = {k: matrix(operators[k]) for k in plain}
    shapes = {k: getattr(matrices_by_key.get(k, factors.get(k)), "shape", ()) for k in keys}
    shape: tuple[int, ...] = tuple(shapes[keys[0]]) if keys else (1, 1)
    for key in keys:
        got = tuple(shapes[key])
        if len(got) != 2 or got[0] != got[1] or got != tuple(shape):
            raise ValueError(_errors.OPERATOR_SHAPE.format(key=key, shape=shape, got=got))

    op_symbols = set().union(*(sympy.sympify(k).free_symbols for k in keys)) if keys else set()
    expanded_trig = _expand_shifted_trig(H, set(keys), op_symbols, set(factors))

    # Every non-factor key becomes a plain symbol first, so `cos(phi)` is one operator.
    stand_ins = {
        key: sympy.Symbol(f"_jaxbridge_op{i}", commutative=bool(key.is_commutative))
        for i, key in enumerate(plain)
    }
    by_symbol: dict[Any, Any] = {stand_ins[k]: matrices_by_key[k] for k in plain}
    for k, f in factors.items():
        by_symbol[k] = f
    expanded = sympy.expand(sympy.sympify(expanded_trig).xreplace(stand_ins))
    symbols = set(by_symbol)

    names = {v: k for k, v in stand_ins.items()}
    coefficients: dict[tuple, Any] = {}
    spectral: list[SpectralTerm] = []
    for term in sympy.Add.make_args(expanded):
        try:
            coefficient, product, spec = _operator_factors(term, symbols, factors)
        except OperatorTermError as e:
            # The user's keys (`cos(θ1)`, `θ1`), never the stand-ins `_jaxbridge_op<i>`.
            raise e.renamed(lambda x: sympy.sympify(x).xreplace(names)) from None
        if spec is not None:
            spectral.append(SpectralTerm(spec.factor, coefficient * spec.expression))
        else:
            coefficients[product] = coefficients.get(product, 0) + coefficient

    dim = int(shape[0])  # pyright: ignore[reportGeneralTypeIssues] - shape is (n, n) here
    products = list(coefficients)
    stacked = []
    for product in products:
        all_sparse = all(_is_sparse(by_symbol[s]) for s, _ in product) and product
        result: Any = None
        for symbol, power in product:
            op = by_symbol[symbol]
            m = op.full(power) if isinstance(op, HermitianFactor) else op
            if not isinstance(op, HermitianFactor):
                for _ in range(power - 1):
                    m = m @ op
            result = m if result is None else result @ m
        if result is None:
            result = np.eye(dim)
        stacked.append(result.tocsr() if all_sparse else _dense(result))
    readable = [tuple((names.get(s, s), p) for s, p in product) for product in products]
    return OperatorSum(
        readable, stacked, [coefficients[p] for p in products], spectral, params, dim
    )
