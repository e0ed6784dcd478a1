"""Eigensolvers for the composite models: the fastest primal for the shape, `_eigh`'s rules.

The derivatives are those of `eigh_k` and `eigvalsh_k` (only the requested levels' gaps); what
changes is the primal, which a sweep spends its time in:

- a real tridiagonal bare Hamiltonian (a transmon's charge basis) goes to LAPACK's
  tridiagonal subset solver on the host, as scqubits' `Transmon.eigensys` does;
- a small dressed Hamiltonian (`SMALL`) goes to XLA's batched `eigh`, one call for a whole
  batch, where a host call would loop over the batch in Python.
"""

from __future__ import annotations

from functools import cache, partial

import jax
import jax.numpy as jnp
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
        w = np.empty((flat.shape[0], k), h.dtype)
        v = np.empty((flat.shape[0], h.shape[-1], k), h.dtype)
        for i, m in enumerate(flat):
            w[i], v[i] = scipy.linalg.eigh_tridiagonal(
                np.diagonal(m), np.diagonal(m, 1), select="i", select_range=(0, k - 1),
                check_finite=False,
            )  # fmt: skip
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


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def dressed_eigvalsh(h: jax.Array, k: int) -> jax.Array:
    """`eigvalsh_k`, with XLA's batched solver up to dimension `SMALL`."""
    if h.shape[-1] <= SMALL:
        return jnp.linalg.eigvalsh(h)[..., :k]
    return eigvalsh_k(h, k)


dressed_eigvalsh.defjvp(_eigvalsh_k_jvp)


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def dressed_eigh(h: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """`eigh_k`, with XLA's batched solver up to dimension `SMALL`."""
    if h.shape[-1] <= SMALL:
        w, v = jnp.linalg.eigh(h)
        return w[..., :k], v[..., :, :k]
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
