"""The host sparse path: SciPy's shift-invert `eigsh`, Hellmann-Feynman eigenvalue derivatives.

The host receives the coefficient vector `c` of `H = sum_k c_k O_k`, assembles the sparse
matrix, and returns the k lowest eigenvalues with `E[i, k] = <v_i|O_k|v_i>`: the derivative of
eigenvalue i with respect to `c_k`. JAX then carries `dc/dp` to the parameters.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import scipy.sparse as sparse
import scipy.sparse.linalg as sparse_linalg

from .. import _host
from . import _errors
from ._terms import Terms, complex_of


def _lower_bound(h: sparse.csr_array) -> float:
    """Gershgorin: no eigenvalue lies below `min_i (H_ii - sum_{j != i} |H_ij|)`."""
    diagonal = np.real(h.diagonal())
    radius = np.asarray(abs(h).sum(axis=1)).ravel() - np.abs(diagonal)
    return float(np.min(diagonal - radius))


def lowest(terms: Terms, flat: np.ndarray, k: int, method: str) -> tuple[np.ndarray, np.ndarray]:
    """The `k` lowest eigenpairs of the sparse `H(c)`, ascending."""
    h = terms.host_sparse(np.asarray(flat, dtype=np.float64))
    # Shift-invert below the whole spectrum: the k largest 1/(w - sigma) are the k lowest w.
    bound = _lower_bound(h)
    sigma = bound - 1e-3 * (1.0 + abs(bound))
    try:
        w, v = sparse_linalg.eigsh(h.tocsc(), k=k, sigma=sigma, which="LM")
    except (sparse_linalg.ArpackError, RuntimeError) as error:
        why = f"{type(error).__name__}: {error}"
        raise RuntimeError(
            _errors.SPARSE_FAILED.format(method=method, k=k, dim=terms.dim, why=why)
        ) from error
    order = np.argsort(w)
    return w[order], v[:, order]


def _no_derivative(method: str, dim: int) -> Any:
    mib = dim * dim * 16 // 2**20
    return ValueError(_errors.SPARSE_DERIVATIVE.format(method=method, dim=dim, mib=mib))


class SparseSolver:
    """JAX functions of the coefficient vector that run the host sparse solver."""

    def __init__(self, terms: Terms) -> None:
        self.terms = terms
        self._calls: dict[tuple[str, int], Any] = {}

    def _host(self, kind: str, k: int) -> Any:
        key = (kind, k)
        if key in self._calls:
            return self._calls[key]
        terms = self.terms
        dtype_complex = terms.is_complex

        if kind == "evals":

            def fn(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                w, v = lowest(terms, flat, k, "eigenvals")
                return w.astype(flat.dtype), terms.host_expectations(v).astype(flat.dtype)

            def result(flat: Any) -> Any:
                n = flat.shape[-1]
                return (
                    jax.ShapeDtypeStruct((k,), flat.dtype),
                    jax.ShapeDtypeStruct((k, n), flat.dtype),
                )

        else:

            def fn(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                w, v = lowest(terms, flat, k, "eigensys")
                cdtype = np.result_type(flat.dtype, np.complex64)
                return w.astype(flat.dtype), v.astype(cdtype if dtype_complex else flat.dtype)

            def result(flat: Any) -> Any:
                vdtype = flat.dtype
                if dtype_complex:
                    vdtype = complex_of(flat.dtype)
                return (
                    jax.ShapeDtypeStruct((k,), flat.dtype),
                    jax.ShapeDtypeStruct((terms.dim, k), vdtype),
                )

        call = _host.host(fn, result=result)
        self._calls[key] = call
        return call

    def eigenvals(self, flat: jax.Array, k: int) -> jax.Array:
        call = self._host("evals", k)
        dim = self.terms.dim

        @jax.custom_jvp
        def evals(c: jax.Array) -> jax.Array:
            return call(c)[0]

        @evals.defjvp
        def _evals_jvp(primals, tangents):
            (c,), (dc,) = primals, tangents
            w, e = _hellmann_feynman(c)
            return w, e @ dc

        @jax.custom_jvp
        def _hellmann_feynman(c: jax.Array) -> tuple[jax.Array, jax.Array]:
            return call(c)

        @_hellmann_feynman.defjvp
        def _second_order(primals, tangents):
            raise _no_derivative("eigenvals", dim)

        return evals(flat)

    def eigensys(self, flat: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
        call = self._host("esys", k)
        dim = self.terms.dim

        @jax.custom_jvp
        def esys(c: jax.Array) -> tuple[jax.Array, jax.Array]:
            return call(c)

        @esys.defjvp
        def _esys_jvp(primals, tangents):
            raise _no_derivative("eigensys", dim)

        return esys(flat)
