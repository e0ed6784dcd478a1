"""Hermitian eigensolvers whose derivatives involve only the requested levels.

`jnp.linalg.eigh` differentiates every eigenvector: its rule divides by `w_i - w_j` for all
pairs, and two exactly equal levels anywhere in the truncated spectrum (the top of a
transmon's charge basis at ng = 0.5) put `inf` into the tangent. Reverse mode then multiplies
that `inf` by a zero cotangent and every gradient is NaN, even one of the ground state energy.

The rules below keep the primal (LAPACK through `jnp.linalg.eigh`) and replace the JVP:

- `eigvalsh_k`: the k lowest eigenvalues, `dw_i = <v_i|dH|v_i>` (Hellmann-Feynman), no gaps.
- `eigh_k`: the k lowest eigenpairs, `dv_i = sum_j v_j <v_j|dH|v_i> / (w_i - w_j)` over j != i,
  an N x k computation: only gaps between a requested level and another level appear.
- `_eigh`: all eigenpairs, used inside the two rules so that their own derivatives (hessian,
  jacfwd of grad) stay finite. Exactly equal pairs get a zero coefficient: the derivative of
  each degenerate eigenspace's projector is then still exact, and quantities that depend on
  the levels only through those projectors (all that the first-order rules use) are exact.
"""

from __future__ import annotations

from functools import cache, partial

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from .. import _host


def _dagger(x: jax.Array) -> jax.Array:
    return jnp.swapaxes(x, -1, -2).conj()


def _inverse_gaps(w_rows: jax.Array, w_cols: jax.Array) -> jax.Array:
    """`F[..., j, i] = 1 / (w_cols[i] - w_rows[j])`, zero where the two are exactly equal."""
    gap = w_cols[..., None, :] - w_rows[..., :, None]
    zero = gap == 0
    return jnp.where(zero, 0.0, 1.0 / jnp.where(zero, 1.0, gap))


def _hermitian_part(dh: jax.Array) -> jax.Array:
    return 0.5 * (dh + _dagger(dh))


@jax.custom_jvp
def _eigh(h: jax.Array) -> tuple[jax.Array, jax.Array]:
    w, v = jnp.linalg.eigh(h)
    return w, v


@_eigh.defjvp
def _eigh_jvp(primals, tangents):
    (h,), (dh,) = primals, tangents
    w, v = _eigh(h)
    a = _dagger(v) @ _hermitian_part(dh) @ v
    dw = jnp.real(jnp.diagonal(a, axis1=-2, axis2=-1))
    f = _inverse_gaps(w, w).astype(a.dtype)
    return (w, v), (dw, v @ (f * a))


def _real(dtype: np.dtype) -> np.dtype:
    return np.finfo(dtype).dtype


def _is_tridiagonal(m: np.ndarray) -> bool:
    n = m.shape[0]
    band = np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= 1
    return bool(np.all(m[~band] == 0))


@cache
def _lowest_eigenvalues(k: int) -> _host.Host:
    """LAPACK's subset solver on the host: only k eigenvalues, no eigenvectors (as scqubits)."""

    def lowest(h: np.ndarray) -> np.ndarray:
        flat = h.reshape(-1, *h.shape[-2:])
        out = np.empty((flat.shape[0], k), _real(h.dtype))
        for i, m in enumerate(flat):
            if not np.iscomplexobj(m) and _is_tridiagonal(m):  # a transmon's charge basis
                out[i] = scipy.linalg.eigvalsh_tridiagonal(
                    np.diagonal(m), np.diagonal(m, 1), select="i", select_range=(0, k - 1)
                )
                continue
            out[i] = scipy.linalg.eigh(
                m, eigvals_only=True, subset_by_index=(0, k - 1), driver="evr", check_finite=False
            )
        return out.reshape(*h.shape[:-2], k)

    def result(h: jax.ShapeDtypeStruct) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct((*h.shape[:-2], k), _real(np.dtype(h.dtype)))

    return _host.host(lowest, result=result, vmap="vectorized")


@cache
def _lowest_eigenpairs(k: int) -> _host.Host:
    """LAPACK's subset solver on the host: k eigenvalues and their eigenvectors only."""

    def lowest(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        flat = h.reshape(-1, *h.shape[-2:])
        w = np.empty((flat.shape[0], k), _real(h.dtype))
        v = np.empty((flat.shape[0], h.shape[-1], k), h.dtype)
        for i, m in enumerate(flat):
            w[i], v[i] = scipy.linalg.eigh(
                m, subset_by_index=(0, k - 1), driver="evr", check_finite=False
            )
        return w.reshape(*h.shape[:-2], k), v.reshape(*h.shape[:-1], k)

    def result(h: jax.ShapeDtypeStruct) -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
        real = _real(np.dtype(h.dtype))
        return (
            jax.ShapeDtypeStruct((*h.shape[:-2], k), real),
            jax.ShapeDtypeStruct((*h.shape[:-1], k), h.dtype),
        )

    return _host.host(lowest, result=result, vmap="vectorized")


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def eigvalsh_k(h: jax.Array, k: int) -> jax.Array:
    """The `k` lowest eigenvalues of the Hermitian `h` (`(..., N, N)` -> `(..., k)`).

    Without derivatives they come from LAPACK's subset solver on the host (`?syevr` through
    `jaxbridge.host`), 3x faster than `jnp.linalg.eigvalsh` at N = 110 on CPU, which
    computes the whole spectrum; the JVP uses JAX's `eigh`.
    """
    if h.shape[-1] <= k:
        return jnp.linalg.eigvalsh(h)[..., :k]
    return _lowest_eigenvalues(k)(h)


@eigvalsh_k.defjvp
def _eigvalsh_k_jvp(k, primals, tangents):
    (h,), (dh,) = primals, tangents
    # Only the k eigenvectors: the subset solver at first order, `eigh_k`'s rule above it.
    wk, vk = eigh_k(h, k)
    dw = jnp.real(jnp.sum(vk.conj() * (_hermitian_part(dh) @ vk), axis=-2))
    return wk, dw


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def eigh_k(h: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """The `k` lowest eigenpairs of the Hermitian `h`: `(..., k)` and `(..., N, k)`.

    Without derivatives they come from LAPACK's subset solver on the host; the JVP needs the
    whole spectrum (every gap to a requested level) and uses `_eigh`.
    """
    if h.shape[-1] <= k:
        w, v = _eigh(h)
        return w[..., :k], v[..., :, :k]
    return tuple(_lowest_eigenpairs(k)(h))


@eigh_k.defjvp
def _eigh_k_jvp(k, primals, tangents):
    (h,), (dh,) = primals, tangents
    w, v = _eigh(h)
    wk, vk = w[..., :k], v[..., :, :k]
    a = _dagger(v) @ (_hermitian_part(dh) @ vk)  # (..., N, k): <v_j|dH|v_i>, i requested
    dw = jnp.real(jnp.diagonal(a[..., :k, :], axis1=-2, axis2=-1))
    f = _inverse_gaps(w, wk).astype(a.dtype)
    return (wk, vk), (dw, v @ (f * a))
