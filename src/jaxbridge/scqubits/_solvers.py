"""Eigensolvers for the composite models: the fastest primal for the shape, `_eigh`'s rules.

The derivatives are those of `eigh_k` and `eigvalsh_k` (only the requested levels' gaps); what
changes is the primal, which a sweep spends its time in:

- a real tridiagonal bare Hamiltonian (a transmon's charge basis) goes to LAPACK's
  tridiagonal subset solver on the host, as scqubits' `Transmon.eigensys` does;
- a small dressed Hamiltonian (`SMALL`) goes to NumPy's batched `eigh` on the host, one LAPACK
  loop in C for a whole batch, where `eigh_k`'s subset solver loops over it in Python.
"""

from __future__ import annotations

from functools import cache, partial
from typing import Any

import jax
import numpy as np
import scipy.linalg

from .. import _host
from ._eigh import _eigh_k_jvp, _eigvalsh_k_jvp, eigh_k, eigvalsh_k

#: Up to this dimension the dressed spectrum comes from XLA's `eigh` (whole spectrum, batched).
SMALL = 160


@cache
def _tridiagonal_pairs(k: int) -> _host.Host:
    """The k lowest eigenpairs of real symmetric tridiagonal matrices, on the host."""

    def lowest(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        flat = h.reshape(-1, *h.shape[-2:])
        n = h.shape[-1]
        w = np.empty((flat.shape[0], k), h.dtype)
        v = np.empty((flat.shape[0], n, k), h.dtype)
        # LAPACK's ?stemr directly: scipy's eigh_tridiagonal costs twice as much per call in
        # argument checks, and a sweep makes one call per point.
        stemr, stemr_lwork = scipy.linalg.lapack.get_lapack_funcs(
            ("stemr", "stemr_lwork"), dtype=h.dtype
        )
        off = np.zeros(n, h.dtype)
        lwork = liwork = None
        for i, m in enumerate(flat):
            d = np.ascontiguousarray(np.diagonal(m))
            off[: n - 1] = np.diagonal(m, 1)
            if lwork is None:
                lwork, liwork, info = stemr_lwork(d, off, 3, 0.0, 0.0, 1, k, compute_v=True)
                lwork, liwork = (int(lwork), int(liwork)) if info == 0 else (None, None)
            info = 1
            if lwork is not None:
                _, wi, zi, info = stemr(d, off, 3, 0.0, 0.0, 1, k, compute_v=True,
                                        lwork=lwork, liwork=liwork)  # fmt: skip
            if info == 0:
                w[i], v[i] = wi[:k], zi[:, :k]
            else:  # scipy's own path, which checks and reports
                w[i], v[i] = scipy.linalg.eigh_tridiagonal(
                    d, off[: n - 1], select="i", select_range=(0, k - 1)
                )
        return w.reshape(*h.shape[:-2], k), v.reshape(*h.shape[:-1], k)

    def result(h: jax.ShapeDtypeStruct) -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
        return (
            jax.ShapeDtypeStruct((*h.shape[:-2], k), h.dtype),
            jax.ShapeDtypeStruct((*h.shape[:-1], k), h.dtype),
        )

    return _host.host(lowest, result=result, vmap="vectorized")


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def tridiagonal_eigh_k(h: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """`eigh_k` for a real symmetric tridiagonal `h` (the caller guarantees the structure)."""
    if h.shape[-1] <= k:
        return eigh_k(h, k)
    return tuple(_tridiagonal_pairs(k)(h))


tridiagonal_eigh_k.defjvp(_eigh_k_jvp)


def _real(dtype: np.dtype) -> np.dtype:
    return np.finfo(dtype).dtype


@cache
def _small(k: int, vectors: bool) -> _host.Host:
    """NumPy's batched `eigh`/`eigvalsh` on the host: one LAPACK loop in C for a whole batch
    (3x faster than XLA's CPU `eigh` for a hundred 20 x 20 matrices)."""

    def lowest(h: np.ndarray) -> Any:
        if vectors:
            w, v = np.linalg.eigh(h)
            return w[..., :k], v[..., :, :k]
        return np.linalg.eigvalsh(h)[..., :k]

    def result(h: jax.ShapeDtypeStruct) -> Any:
        w = jax.ShapeDtypeStruct((*h.shape[:-2], k), _real(np.dtype(h.dtype)))
        return (w, jax.ShapeDtypeStruct((*h.shape[:-1], k), h.dtype)) if vectors else w

    return _host.host(lowest, result=result, vmap="vectorized")


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def dressed_eigvalsh(h: jax.Array, k: int) -> jax.Array:
    """`eigvalsh_k`, with NumPy's batched solver up to dimension `SMALL`."""
    if h.shape[-1] <= SMALL:
        return _small(k, False)(h)
    return eigvalsh_k(h, k)


dressed_eigvalsh.defjvp(_eigvalsh_k_jvp)


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def dressed_eigh(h: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """`eigh_k`, with NumPy's batched solver up to dimension `SMALL`."""
    if h.shape[-1] <= SMALL:
        return tuple(_small(k, True)(h))
    return eigh_k(h, k)


dressed_eigh.defjvp(_eigh_k_jvp)


def is_tridiagonal(matrices: list[np.ndarray]) -> bool:
    """Whether every matrix is real with nothing outside the three central diagonals."""
    for m in matrices:
        if np.iscomplexobj(m):
            return False
        n = m.shape[0]
        far = np.abs(np.subtract.outer(np.arange(n), np.arange(n))) > 1
        if np.any(m[far] != 0):
            return False
    return True
