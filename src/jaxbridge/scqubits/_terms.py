"""A Hamiltonian as coefficients of fixed operators: `H(p) = sum_k c_k(p) O_k`.

Two kinds of fixed operator cover every qubit here:

- `Fixed`: one matrix (a charge operator, a grid Laplacian, `cos(theta)` in the charge basis).
- `Spectral`: `kron(left, V diag(c) V^H, right)`, one coefficient per eigenvector of a fixed
  Hermitian `X = V diag(x) V^H` on one tensor factor. A parameter-dependent matrix function
  `f(alpha(p) X + beta(p))` is this with `c = f(alpha(p) x + beta(p))`: Fluxonium's
  `cos(phi + 2 pi flux)` with the oscillator length `phi_osc(EC, EL)` in `alpha`.

The coefficients are JAX code; the operators are NumPy/SciPy matrices, read once. The dense
matrix is assembled in JAX (so every derivative mode works); the host sparse solver assembles
the same sum with SciPy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sparse

Params = Mapping[str, jax.Array]
Coefficients = Callable[[Params], Sequence[Any]]


@dataclasses.dataclass(frozen=True, eq=False)
class Fixed:
    """One fixed matrix; its coefficient is a scalar."""

    matrix: sparse.csr_array


@dataclasses.dataclass(frozen=True, eq=False)
class Spectral:
    """`sum_m c_m kron(left, V[:, m] V[:, m]^H, right)`; its coefficient has shape `(d,)`."""

    left: np.ndarray
    vectors: np.ndarray
    right: np.ndarray

    @property
    def size(self) -> int:
        return self.vectors.shape[1]


Operator = Fixed | Spectral


def fixed(matrix: Any) -> Fixed:
    """A `Fixed` from any dense or sparse matrix."""
    m = sparse.csr_array(matrix)
    m.sum_duplicates()
    return Fixed(m)


def spectral(x: np.ndarray, left: Any = None, right: Any = None) -> tuple[Spectral, np.ndarray]:
    """Eigendecomposes the fixed Hermitian factor `x` once: returns the term and `x`'s spectrum."""
    values, vectors = np.linalg.eigh(np.asarray(x))
    as_dense = lambda m: np.eye(1) if m is None else np.asarray(sparse.csr_array(m).toarray())
    return Spectral(as_dense(left), vectors, as_dense(right)), values


def complex_of(dtype: Any) -> Any:
    """The complex dtype of a real one's precision (no promotion: strict mode allows none)."""
    dtype = jnp.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return dtype
    return jnp.dtype(jnp.complex128 if dtype == jnp.float64 else jnp.complex64)


def _is_complex(op: Operator) -> bool:
    if isinstance(op, Fixed):
        return bool(np.iscomplexobj(op.matrix.data))
    return any(np.iscomplexobj(m) for m in (op.left, op.vectors, op.right))


def _dim(op: Operator) -> int:
    if isinstance(op, Fixed):
        return int(op.matrix.shape[0])  # pyright: ignore[reportOptionalSubscript] - always 2-D
    return op.left.shape[0] * op.vectors.shape[0] * op.right.shape[0]


# Up to this many stored elements the fixed operators are one dense stack (a matrix-vector
# product per evaluation); above it, a scatter-add of their nonzeros.
_DENSE_STACK_LIMIT = 4_000_000


class Terms:
    """The operators of `H(p) = sum_k c_k(p) O_k` and the function `p -> [c_k(p)]`."""

    def __init__(self, operators: Sequence[Operator], coefficients: Coefficients) -> None:
        self.operators = tuple(operators)
        self.coefficients = coefficients
        dims = {_dim(op) for op in self.operators}
        if len(dims) != 1:
            raise ValueError(f"operators of different sizes: {sorted(dims)}")
        self.dim = dims.pop()
        self.is_complex = any(_is_complex(op) for op in self.operators)
        self._fixed = [i for i, op in enumerate(self.operators) if isinstance(op, Fixed)]
        fixed_ops = [cast_fixed(self.operators[i]).matrix for i in self._fixed]
        nnz = sum(m.nnz for m in fixed_ops)
        self._stack: np.ndarray | None = None
        if len(fixed_ops) * self.dim**2 <= _DENSE_STACK_LIMIT:
            self._stack = np.stack([m.toarray() for m in fixed_ops]) if fixed_ops else None
        else:
            coo = [m.tocoo() for m in fixed_ops]
            self._rows = np.concatenate([c.row for c in coo]).astype(np.int32)
            self._cols = np.concatenate([c.col for c in coo]).astype(np.int32)
            self._vals = np.concatenate([c.data for c in coo])
            self._which = np.repeat(np.arange(len(coo), dtype=np.int32), [c.nnz for c in coo])
        self.nnz = nnz

    def dtype(self, real: Any) -> Any:
        return complex_of(real) if self.is_complex else real

    def flat_coefficients(self, params: Params) -> jax.Array:
        """All coefficients as one vector (a `Spectral` term contributes `size` entries)."""
        parts = [jnp.reshape(jnp.asarray(c), (-1,)) for c in self.coefficients(params)]
        return jnp.concatenate(parts) if parts else jnp.zeros((0,))

    def dense(self, params: Params) -> jax.Array:
        """The dense `(N, N)` matrix at one parameter point (batch with `jax.vmap`)."""
        cs = [jnp.asarray(c) for c in self.coefficients(params)]
        real = jnp.result_type(*cs) if cs else jnp.zeros(()).dtype
        dtype = self.dtype(real)
        h = jnp.zeros((self.dim, self.dim), dtype)
        fixed_cs = [cs[i].astype(dtype) for i in self._fixed]
        if fixed_cs:
            c = jnp.stack(fixed_cs)
            if self._stack is not None:
                h = h + jnp.tensordot(c, jnp.asarray(self._stack, dtype), axes=1)
            else:
                vals = jnp.asarray(self._vals, dtype) * c[self._which]
                h = h.at[self._rows, self._cols].add(vals)
        for i, op in enumerate(self.operators):
            if isinstance(op, Spectral):
                v = jnp.asarray(op.vectors, dtype)
                middle = (v * cs[i].astype(dtype)[None, :]) @ v.conj().T
                if op.left.shape != (1, 1):
                    middle = jnp.kron(jnp.asarray(op.left, dtype), middle)
                if op.right.shape != (1, 1):
                    middle = jnp.kron(middle, jnp.asarray(op.right, dtype))
                h = h + middle
        return h

    # Host side (NumPy/SciPy): the same sum as a sparse matrix, and expectation values.

    @property
    def size(self) -> int:
        """The length of `flat_coefficients` (a `Spectral` term contributes `size` entries)."""
        return sum(1 if isinstance(op, Fixed) else op.size for op in self.operators)

    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        sizes = [1 if isinstance(op, Fixed) else op.size for op in self.operators]
        return np.split(np.asarray(flat), np.cumsum(sizes)[:-1])

    def host_sparse(self, flat: np.ndarray) -> sparse.csr_array:
        h = sparse.csr_array((self.dim, self.dim), dtype=complex if self.is_complex else float)
        for c, op in zip(self.split(flat), self.operators):
            if isinstance(op, Fixed):
                h = h + float(c[0]) * op.matrix
            else:
                middle = (op.vectors * c) @ op.vectors.conj().T
                h = h + sparse.kron(
                    sparse.kron(sparse.csr_array(op.left), middle), sparse.csr_array(op.right)
                )
        return sparse.csr_array(h)

    def host_expectations(self, vectors: np.ndarray) -> np.ndarray:
        """`E[i, k] = <v_i|O_k|v_i>` for the columns `v_i` of `vectors`: the HF derivatives."""
        out = []
        for op in self.operators:
            if isinstance(op, Fixed):
                out.append(np.real(np.sum(vectors.conj() * (op.matrix @ vectors), axis=0))[:, None])
            else:
                dl, d, dr = op.left.shape[0], op.vectors.shape[0], op.right.shape[0]
                t = vectors.T.reshape(-1, dl, d, dr)
                s = np.einsum("jm,iajb->iamb", op.vectors.conj(), t)  # factor in X's eigenbasis
                ls = np.einsum("ac,icmb->iamb", op.left, s)
                lsr = np.einsum("iamc,bc->iamb", ls, op.right)
                out.append(np.real(np.einsum("iamb,iamb->im", s.conj(), lsr)))
        return np.concatenate(out, axis=1)


def cast_fixed(op: Operator) -> Fixed:
    assert isinstance(op, Fixed)
    return op
