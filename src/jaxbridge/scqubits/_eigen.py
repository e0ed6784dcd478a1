"""Every eigensolver of `jaxbridge.scqubits`: LAPACK on the host, derivatives in JAX.

No LAPACK runs inside XLA here. XLA's CPU LAPACK kernels (jaxlib 0.10.2) split a batch over
XLA's thread pool and wait for it, so two batched solvers that XLA schedules side by side (two
`jnp.linalg.solve` of `(8, 80, 80)` in one program, on a 2-thread pool) wait for each other
forever. Each solver below is one `jaxbridge.host` call, a whole batch at once on the host
(NumPy or SciPy, on the host's own threads), and its derivative is JAX code of the primal
result, so every transformation works and every program finishes.

`jnp.linalg.eigh` differentiates every eigenvector: its rule divides by `w_i - w_j` for all
pairs, and two exactly equal levels anywhere in the truncated spectrum (the top of a
transmon's charge basis at ng = 0.5) put `inf` into the tangent, which reverse mode turns into
NaN gradients, even of the ground state energy. The rules here differentiate only what was
asked for:

- `eigvalsh_k`: the k lowest eigenvalues, `dw_i = <v_i|dH|v_i>` (Hellmann-Feynman), no gaps.
- `eigh_k`: the k lowest eigenpairs, `dv_i = sum_j v_j <v_j|dH|v_i> / (w_i - w_j)` over j != i,
  an N x k computation: only gaps between a requested level and another level appear.
- `_eigh`: all eigenpairs, used inside the two rules so that their own derivatives (hessian,
  jacfwd of grad) stay finite. Exactly equal pairs get a zero coefficient: the derivative of
  each degenerate eigenspace's projector is then still exact.

The primal of `eigh_k` and `eigvalsh_k` is the fastest host solver for the shape: LAPACK's
tridiagonal subset solver for a real tridiagonal matrix (a transmon's charge basis), NumPy's
batched `eigh` for small matrices (one loop in C for a whole batch), LAPACK's subset solver
(`?syevr`, only the k lowest) otherwise. `SparseSolver` is the host sparse path (SciPy's
shift-invert `eigsh`, Hellmann-Feynman derivatives) for models too large for dense matrices.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache, partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
import scipy.sparse.linalg as sparse_linalg
from jax.custom_derivatives import SymbolicZero

from .. import _host
from .._derivatives import FiniteDifferences
from . import _errors
from ._numpy_eval import batched as on_numpy
from ._terms import Fixed, Spectral, Terms, complex_of

#: Up to this dimension a composite's dressed spectrum comes from NumPy's batched `eigh` (whole
#: spectrum, one loop in C for a whole batch): for a batch of small matrices that beats LAPACK's
#: subset solver called once per matrix from Python.
SMALL = 160


def _dagger(x: jax.Array) -> jax.Array:
    return jnp.swapaxes(x, -1, -2).conj()


def _real(dtype: Any) -> np.dtype:
    return np.finfo(np.dtype(dtype)).dtype


def _inverse_gaps(w_rows: jax.Array, w_cols: jax.Array) -> jax.Array:
    """`F[..., j, i] = 1 / (w_cols[i] - w_rows[j])`, zero where the two are exactly equal."""
    gap = w_cols[..., None, :] - w_rows[..., :, None]
    zero = gap == 0
    return jnp.where(zero, 0.0, 1.0 / jnp.where(zero, 1.0, gap))


def _hermitian_part(dh: jax.Array) -> jax.Array:
    return 0.5 * (dh + _dagger(dh))


# -- the host solvers (NumPy in, NumPy out; one call for a whole batch)


def _is_tridiagonal_matrix(m: np.ndarray) -> bool:
    n = m.shape[0]
    band = np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= 1
    return bool(np.all(m[~band] == 0))


def _tridiagonal_lowest(flat: np.ndarray, k: int, vectors: bool) -> tuple[np.ndarray, Any]:
    """The k lowest eigenpairs of real symmetric tridiagonal matrices: LAPACK's `?stemr`.

    `?stemr` directly: SciPy's `eigh_tridiagonal` costs twice as much per call in argument
    checks, and a sweep makes one call per point.
    """
    count, n = flat.shape[0], flat.shape[-1]
    w = np.empty((count, k), flat.dtype)
    v = np.empty((count, n, k), flat.dtype) if vectors else None
    stemr, stemr_lwork = scipy.linalg.lapack.get_lapack_funcs(
        ("stemr", "stemr_lwork"), dtype=flat.dtype
    )
    off = np.zeros(n, flat.dtype)
    lwork = liwork = None
    for i, m in enumerate(flat):
        d = np.ascontiguousarray(np.diagonal(m))
        off[: n - 1] = np.diagonal(m, 1)
        if lwork is None:
            lwork, liwork, info = stemr_lwork(d, off, 3, 0.0, 0.0, 1, k, compute_v=vectors)
            lwork, liwork = (int(lwork), int(liwork)) if info == 0 else (None, None)
        info = 1
        if lwork is not None:
            _, wi, zi, info = stemr(d, off, 3, 0.0, 0.0, 1, k, compute_v=vectors,
                                    lwork=lwork, liwork=liwork)  # fmt: skip
        if info == 0:
            w[i] = wi[:k]
            if v is not None:
                v[i] = zi[:, :k]
        elif v is not None:  # SciPy's own path, which checks and reports
            w[i], v[i] = scipy.linalg.eigh_tridiagonal(
                d, off[: n - 1], select="i", select_range=(0, k - 1)
            )
        else:
            w[i] = scipy.linalg.eigvalsh_tridiagonal(
                d, off[: n - 1], select="i", select_range=(0, k - 1)
            )
    return w, v


def _lowest(h: np.ndarray, k: int, vectors: bool, structure: str) -> Any:
    """The k lowest eigenvalues (and eigenvectors) of each Hermitian matrix in `h`."""
    flat = h.reshape(-1, *h.shape[-2:])
    n = h.shape[-1]
    if structure == "tridiagonal":
        w, v = _tridiagonal_lowest(flat, k, vectors)
    elif structure == "batched" or k >= n:
        if vectors:
            w, v = np.linalg.eigh(flat)
            w, v = w[:, :k], v[:, :, :k]
        else:
            w, v = np.linalg.eigvalsh(flat)[:, :k], None
    else:
        w = np.empty((flat.shape[0], k), _real(h.dtype))
        v = np.empty((flat.shape[0], n, k), h.dtype) if vectors else None
        for i, m in enumerate(flat):
            if not vectors and not np.iscomplexobj(m) and _is_tridiagonal_matrix(m):
                w[i] = _tridiagonal_lowest(m[None], k, False)[0][0]
                continue
            out = scipy.linalg.eigh(m, eigvals_only=not vectors, subset_by_index=(0, k - 1),
                                    driver="evr", check_finite=False)  # fmt: skip
            if v is not None:
                w[i], v[i] = out
            else:
                w[i] = out
    w = w.reshape(*h.shape[:-2], k)
    return (w, v.reshape(*h.shape[:-1], k)) if v is not None else w


@cache
def _solver(k: int | None, vectors: bool, structure: str) -> _host.Host:
    """The host call for `_lowest(h, k, vectors, structure)`; `k=None`: the whole spectrum."""

    def lowest(h: np.ndarray) -> Any:
        return _lowest(h, h.shape[-1] if k is None else k, vectors, structure)

    def result(h: jax.ShapeDtypeStruct) -> Any:
        count = h.shape[-1] if k is None else k
        w = jax.ShapeDtypeStruct((*h.shape[:-2], count), _real(h.dtype))
        if not vectors:
            return w
        return w, jax.ShapeDtypeStruct((*h.shape[:-1], count), h.dtype)

    return _host.host(lowest, result=result, vmap="vectorized")


# -- the JAX functions and their derivatives


@jax.custom_jvp
def _eigh(h: jax.Array) -> tuple[jax.Array, jax.Array]:
    """All eigenpairs of the Hermitian `h` (`(..., N, N)`), on the host."""
    w, v = _solver(None, True, "batched")(h)
    return w, v


@_eigh.defjvp
def _eigh_jvp(primals, tangents):
    (h,), (dh,) = primals, tangents
    w, v = _eigh(h)
    a = _dagger(v) @ _hermitian_part(dh) @ v
    dw = jnp.real(jnp.diagonal(a, axis1=-2, axis2=-1))
    f = _inverse_gaps(w, w).astype(a.dtype)
    return (w, v), (dw, v @ (f * a))


@partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def eigvalsh_k(h: jax.Array, k: int, structure: str = "general") -> jax.Array:
    """The `k` lowest eigenvalues of the Hermitian `h` (`(..., N, N)` -> `(..., k)`).

    Without derivatives they come from the host solver for `structure`: `"general"`, LAPACK's
    subset solver (only the k levels, as scqubits), its tridiagonal one for a real tridiagonal
    matrix; `"tridiagonal"`, the caller guarantees that structure; `"batched"`, NumPy's
    batched `eigh` (small matrices, large batches). Derivatives: Hellmann-Feynman on the k
    eigenvectors.
    """
    return _solver(k, False, structure)(h)


@eigvalsh_k.defjvp
def _eigvalsh_k_jvp(k, structure, primals, tangents):
    (h,), (dh,) = primals, tangents
    # Only the k eigenvectors: the subset solver at first order, `eigh_k`'s rule above it.
    wk, vk = eigh_k(h, k, structure)
    dw = jnp.real(jnp.sum(vk.conj() * (_hermitian_part(dh) @ vk), axis=-2))
    return wk, dw


@partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def eigh_k(h: jax.Array, k: int, structure: str = "general") -> tuple[jax.Array, jax.Array]:
    """The `k` lowest eigenpairs of the Hermitian `h`: `(..., k)` and `(..., N, k)`.

    Without derivatives they come from the host solver for `structure` (as `eigvalsh_k`); the
    JVP needs every gap to a requested level and takes the whole spectrum from `_eigh`.
    """
    w, v = _solver(k, True, structure)(h)
    return w, v


@eigh_k.defjvp
def _eigh_k_jvp(k, structure, primals, tangents):
    (h,), (dh,) = primals, tangents
    w, v = _eigh(h)
    wk, vk = w[..., :k], v[..., :, :k]
    a = _dagger(v) @ (_hermitian_part(dh) @ vk)  # (..., N, k): <v_j|dH|v_i>, i requested
    dw = jnp.real(jnp.diagonal(a[..., :k, :], axis1=-2, axis2=-1))
    f = _inverse_gaps(w, wk).astype(a.dtype)
    return (wk, vk), (dw, v @ (f * a))


def dressed_structure(n: int) -> str:
    """The solver for a composite's dressed Hamiltonian of dimension `n`."""
    return "batched" if n <= SMALL else "general"


def is_tridiagonal(matrices: list[np.ndarray]) -> bool:
    """Whether every matrix is real with nothing outside the three central diagonals."""
    return all(not np.iscomplexobj(m) and _is_tridiagonal_matrix(m) for m in matrices)


# -- the host sparse path


def _lower_bound(h: Any) -> float:
    """Gershgorin: no eigenvalue lies below `min_i (H_ii - sum_{j != i} |H_ij|)`."""
    diagonal = np.real(h.diagonal())
    radius = np.asarray(abs(h).sum(axis=1)).ravel() - np.abs(diagonal)
    return float(np.min(diagonal - radius))


def sparse_lowest(
    terms: Terms, flat: np.ndarray, k: int, method: str
) -> tuple[np.ndarray, np.ndarray]:
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
    """JAX functions of the coefficient vector `c` of `H = sum_k c_k O_k` that run SciPy's
    sparse solver on the host. Eigenvalue derivatives: `E[i, k] = <v_i|O_k|v_i>`
    (Hellmann-Feynman), computed there too; JAX carries `dc/dp` to the parameters."""

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
                w, v = sparse_lowest(terms, flat, k, "eigenvals")
                return w.astype(flat.dtype), terms.host_expectations(v).astype(flat.dtype)

            def result(flat: Any) -> Any:
                n = flat.shape[-1]
                return (
                    jax.ShapeDtypeStruct((k,), flat.dtype),
                    jax.ShapeDtypeStruct((k, n), flat.dtype),
                )

        else:

            def fn(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                w, v = sparse_lowest(terms, flat, k, "eigensys")
                cdtype = np.result_type(flat.dtype, np.complex64)
                return w.astype(flat.dtype), v.astype(cdtype if dtype_complex else flat.dtype)

            def result(flat: Any) -> Any:
                vdtype = complex_of(flat.dtype) if dtype_complex else flat.dtype
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


# -- the noise programs' spectrum: levels and matrix elements in one host call


def _assemble(terms: Terms, flat: np.ndarray, dense: list[np.ndarray | None]) -> np.ndarray:
    """The dense `(B, N, N)` sums `sum_t c_t O_t` of a batch `(B, n)` of flat coefficients;
    `dense`: each `Fixed` operator's dense matrix (None for a `Spectral` one)."""
    dtype = np.complex128 if terms.is_complex else np.float64
    out = np.zeros((flat.shape[0], terms.dim, terms.dim), dtype)
    start = 0
    for op, m in zip(terms.operators, dense):
        if m is not None:
            out += flat[:, start, None, None] * m
            start += 1
            continue
        assert isinstance(op, Spectral)
        c = flat[:, start : start + op.size]
        start += op.size
        middle = (op.vectors[None] * c[:, None, :]) @ op.vectors.conj().T
        if op.left.shape == (1, 1) and op.right.shape == (1, 1):
            out += op.left[0, 0] * op.right[0, 0] * middle
            continue
        full = np.einsum("lk,bde,rs->bldrkes", op.left, middle, op.right, optimize=True)
        out += full.reshape(out.shape)
    return out


class _Columns:
    """Columns `x` `(B, N, a)` of states and their projections on each `Spectral` factor's
    eigenbasis (`(B, dl, d, dr, a)`, made once per factor: operators sharing one share it)."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x
        self._proj: dict[int, np.ndarray] = {}

    def on(self, op: Spectral) -> np.ndarray:
        key = id(op.vectors)
        if key not in self._proj:
            dl, d, dr = op.left.shape[0], op.vectors.shape[0], op.right.shape[0]
            b, a = self.x.shape[0], self.x.shape[-1]
            if dl == dr == 1:
                proj = (op.vectors.conj().T @ self.x).reshape(b, 1, d, 1, a)
            else:
                x = self.x.reshape(b, dl, d, dr, a)
                proj = np.einsum("dm,bldra->blmra", op.vectors.conj(), x, optimize=True)
            self._proj[key] = proj
        return self._proj[key]


def _spectral(op: Spectral, px: np.ndarray, py: np.ndarray, c: np.ndarray | None) -> np.ndarray:
    """`sum_m c_m <x_a|O_m|y_c>` (`(B, a, c)`), or with `c` None every `<x_a|O_m|y_c>`
    (`(B, d, a, c)`), of a `Spectral` term from the projections `px`, `py`."""
    if op.left.shape == (1, 1) and op.right.shape == (1, 1):
        scale = op.left[0, 0] * op.right[0, 0]
        qx, qy = px[:, 0, :, 0, :].conj(), py[:, 0, :, 0, :]  # (B, d, a), (B, d, c)
        if c is None:
            return scale * qx[:, :, :, None] * qy[:, :, None, :]
        return scale * (np.swapaxes(qx, 1, 2) * c[:, None, :]) @ qy
    if c is None:
        return np.einsum("blmra,lk,rs,bkmsc->bmac", px.conj(), op.left, op.right, py, optimize=True)
    return np.einsum(
        "blmra,bm,lk,rs,bkmsc->bac", px.conj(), c, op.left, op.right, py, optimize=True
    )


def _elements(
    terms: Terms, dense: list[np.ndarray | None], c: np.ndarray | None, x: _Columns, y: _Columns
) -> np.ndarray:
    """`<x_a|O|y_c>` of `O = sum_t c_t O_t` (`(B, a, c)`, `c` a batch of flat coefficients);
    with `c` None, of every basis operator (a `Spectral` term has one per eigenvector of its
    factor, in `flat_coefficients`' order): `(B, M, a, c)`."""
    blocks, total, start = [], None, 0
    for op, m in zip(terms.operators, dense):
        if m is not None:
            # the cheaper order: the product with the fewer columns first
            if x.x.shape[-1] < y.x.shape[-1]:
                part = _adjoint(m.conj().T @ x.x) @ y.x
            else:
                part = _adjoint(x.x) @ (m @ y.x)
            if c is None:
                blocks.append(part[:, None])
            else:
                part = c[:, start, None, None] * part
            start += 1
        else:
            assert isinstance(op, Spectral)
            coefficients = None if c is None else c[:, start : start + op.size]
            part = _spectral(op, x.on(op), y.on(op), coefficients)
            if c is None:
                blocks.append(part)
            start += op.size
        if c is not None:
            total = part if total is None else total + part
    if c is None:
        return np.concatenate(blocks, axis=1)
    assert total is not None
    return total


def _adjoint(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2).conj()


def _on_rows(fn: Any, xs: Sequence[np.ndarray]) -> Any:
    """`fn` on `(B,)` float64 parameters, from a host call's `xs` (each `()` unbatched or
    `(B,)`, all alike), its outputs back in the call's shapes and dtype."""
    single = np.ndim(xs[0]) == 0
    dtype = np.asarray(xs[0]).dtype
    rows = [np.asarray(x, np.float64).reshape(-1) for x in xs]
    out = fn(*rows)
    return tuple(np.asarray(x[0] if single else x).astype(dtype) for x in out)


def _point(p: Any) -> tuple[list[str], Any]:
    """A parameter point's names, in order, and the floating dtype its values take."""
    names = sorted(p)
    dtype = jnp.result_type(*(jnp.asarray(p[n]) for n in names)) if names else None
    if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.zeros(()).dtype
    return names, dtype


def _along(fn: Any, moving: tuple[int, ...]) -> Any:
    """`xs -> (fn(*xs), d)`: `fn`'s outputs and their derivatives along each parameter of
    `moving` (JAX's forward mode, one direction each, on a new last axis of each output)."""

    def along(*xs: jax.Array) -> Any:
        def of_moving(*ms: jax.Array) -> Any:
            full = list(xs)
            for i, m in zip(moving, ms):
                full[i] = m
            return fn(*full)

        def one(t: jax.Array) -> Any:  # the others held: no arithmetic on zeros
            return jax.jvp(of_moving, tuple(xs[i] for i in moving), tuple(t))

        eye = jnp.eye(len(moving), dtype=xs[0].dtype)
        value = fn(*xs)
        _, d = jax.vmap(one, out_axes=(None, -1))(eye)
        return value, d

    return along


class NoiseSpectrum:
    """The k lowest levels of `H(p)` and, between them, each noise operator's diagonal
    `Re <i|O|i>` and squared moduli `|<i|O|j>|^2`: what every noise channel reads, as one host
    call, and its exact first derivatives in the parameters from the same call.

    Without derivatives the host runs LAPACK's subset solver (the k levels alone) and the
    elements between them. With them it diagonalises the whole spectrum (NumPy's `eigh`) and
    applies first-order perturbation theory along each parameter: the program hands it the
    coefficients `c(p)` of `H` and of the operators and their derivatives `dc/dp` (JAX's
    forward mode, a few directions), `dH/dp` is the same sum of fixed operators with those
    coefficients, and the eigenvectors' derivatives are sums over the whole spectrum.

    The outputs are independent of the eigenvectors' phases, so second derivatives (the
    first derivatives' own) are central differences of these exact first derivatives, all
    points in one batched call. (Two exactly equal levels among the k are the exception, as
    everywhere: the elements between them depend on the basis the solver picks, as scqubits'
    do, and the pair's coupling term is dropped, as in `_eigh`.) The noise programs use this
    in place of an eigensolver plus JAX matrix elements, which keeps their programs small.

    Args:
        hamiltonian: `H(p)`'s terms (real coefficients, as every single qubit here).
        ops: the noise operators' terms.
        k: how many levels.
    """

    def __init__(self, hamiltonian: Terms, ops: tuple[Terms, ...], k: int) -> None:
        self.hamiltonian, self.ops, self.k = hamiltonian, ops, k
        self.dense = {
            id(t): [op.matrix.toarray() if isinstance(op, Fixed) else None for op in t.operators]
            for t in (hamiltonian, *ops)
        }
        self.sizes = [t.size for t in ops]
        n = len(ops)

        def levels_spec(dt: Any) -> tuple[jax.ShapeDtypeStruct, ...]:
            return (jax.ShapeDtypeStruct((k,), dt), jax.ShapeDtypeStruct((n, k), dt),
                    jax.ShapeDtypeStruct((n, k, k), dt))  # fmt: skip

        def primal_result(c_h: Any, c_o: Any) -> Any:
            return levels_spec(c_h.dtype)

        def full_result(c_h: Any, c_o: Any, d_h: Any, d_o: Any) -> Any:
            nd, dt = d_h.shape[-1], c_h.dtype
            s = lambda *shape: jax.ShapeDtypeStruct(shape, dt)
            return (*levels_spec(dt), s(k, nd), s(n, k, nd), s(n, k, k, nd))

        self.primal_host = _host.host(self._primal, result=primal_result, vmap="vectorized")
        self.full_host = _host.host(
            self._full, result=full_result, vmap="vectorized", derivative=FiniteDifferences()
        )

    def __call__(self, p: Any) -> tuple[jax.Array, jax.Array, jax.Array] | None:
        """`(w (k,), diag (n, k), sq (n, k, k))` at one parameter point (`p`: scalars by
        name); None where a coefficient is complex (the caller's JAX path serves that)."""
        names, dtype = _point(p)
        if not names:
            return None

        def coefficients(*xs: jax.Array) -> tuple[jax.Array, jax.Array]:
            q = dict(zip(names, xs))  # every name of `p`: nothing of the caller's is closed over
            c_h = self.hamiltonian.flat_coefficients(q)
            parts = [t.flat_coefficients(q) for t in self.ops]
            c_o = jnp.concatenate(parts) if parts else jnp.zeros((0,), c_h.dtype)
            return c_h, c_o.astype(c_h.dtype)

        x0 = [jnp.asarray(p[name], dtype) for name in names]
        avals = [jax.ShapeDtypeStruct(jnp.shape(x), x.dtype) for x in x0]
        closed = jax.make_jaxpr(coefficients)(*avals)
        if any(jnp.issubdtype(c.dtype, jnp.complexfloating) for c in closed.out_avals):
            return None
        # The coefficients on the host too (NumPy, `_numpy_eval`) where every parameter is a
        # scalar and every primitive has a NumPy rule: the program is then the host call alone.
        scalars = all(a.shape == () for a in avals)
        on_host = on_numpy(closed) if scalars else None

        @jax.custom_jvp
        def levels(*xs: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
            if on_host is not None:
                return tuple(self._params_host(on_host)(*xs))  # pyright: ignore[reportReturnType]
            return tuple(self.primal_host(*coefficients(*xs)))  # pyright: ignore[reportReturnType]

        def _levels_jvp(primals: Any, tangents: Any) -> Any:
            # only the parameters the program differentiates in: one direction each
            moving = tuple(i for i, t in enumerate(tangents) if not isinstance(t, SymbolicZero))
            if not moving:
                outs = levels(*primals)
                return outs, tuple(jnp.zeros_like(o) for o in outs)
            dx = jnp.stack([tangents[i] for i in moving])
            derivatives = None
            if on_host is not None:  # their derivatives' jaxpr has rules too, as a rule
                derivatives = on_numpy(jax.make_jaxpr(_along(coefficients, moving))(*avals))
            if derivatives is not None:
                full = self._params_full_host(derivatives, len(moving))
                w, diag, sq, jw, jd, js = full(*primals)
            else:
                (c_h, c_o), (d_h, d_o) = _along(coefficients, moving)(*primals)
                w, diag, sq, jw, jd, js = self.full_host(c_h, c_o, d_h, d_o)
            return (w, diag, sq), (jw @ dx, jd @ dx, js @ dx)

        levels.defjvp(_levels_jvp, symbolic_zeros=True)
        return levels(*x0)

    def _params_host(self, coefficients: Any) -> _host.Host:
        """The levels and elements as a host function of the parameters themselves: the
        coefficients evaluated on the host too (`coefficients`, `_numpy_eval.batched`)."""

        def fn(*xs: np.ndarray) -> Any:
            def levels(*rows: np.ndarray) -> Any:
                c_h, c_o = coefficients(rows[0].shape[0], *rows)
                return self._levels(c_h.astype(np.float64), c_o.astype(np.float64))

            return _on_rows(levels, xs)

        def result(*xs: Any) -> Any:
            return self._levels_spec(xs[0].dtype)

        return _host.host(fn, result=result, vmap="vectorized")

    def _params_full_host(self, derivatives: Any, nd: int) -> _host.Host:
        """`_params_host` and the derivatives along `nd` parameters: `derivatives` gives the
        coefficients and their forward-mode derivatives on the host. Its own derivatives (a
        hessian's) are central differences of these exact first ones, in the parameters."""

        def fn(*xs: np.ndarray) -> Any:
            def full(*rows: np.ndarray) -> Any:
                parts = derivatives(rows[0].shape[0], *rows)
                return self._derivatives(*(x.astype(np.float64) for x in parts))

            return _on_rows(full, xs)

        def result(*xs: Any) -> Any:
            k, m, dt = self.k, len(self.ops), xs[0].dtype
            s = lambda *shape: jax.ShapeDtypeStruct(shape, dt)
            return (*self._levels_spec(dt), s(k, nd), s(m, k, nd), s(m, k, k, nd))

        return _host.host(fn, result=result, vmap="vectorized", derivative=FiniteDifferences())

    def _levels_spec(self, dt: Any) -> tuple[jax.ShapeDtypeStruct, ...]:
        k, n = self.k, len(self.ops)
        return (jax.ShapeDtypeStruct((k,), dt), jax.ShapeDtypeStruct((n, k), dt),
                jax.ShapeDtypeStruct((n, k, k), dt))  # fmt: skip

    def _batched(self, fn: Any, *args: np.ndarray) -> Any:
        single = args[0].ndim == 1
        if single:
            args = tuple(a[None] for a in args)
        dtype = args[0].dtype
        out = fn(*(a.astype(np.float64) for a in args))
        return tuple((x[0] if single else x).astype(dtype) for x in out)

    def _primal(self, c_h: np.ndarray, c_o: np.ndarray) -> Any:
        return self._batched(self._levels, c_h, c_o)

    def _full(self, c_h: np.ndarray, c_o: np.ndarray, d_h: np.ndarray, d_o: np.ndarray) -> Any:
        return self._batched(self._derivatives, c_h, c_o, d_h, d_o)

    def _split(self, c_o: np.ndarray) -> list[np.ndarray]:
        return np.split(c_o, np.cumsum(self.sizes)[:-1], axis=1) if self.ops else []

    def _levels(self, c_h: np.ndarray, c_o: np.ndarray) -> tuple[np.ndarray, ...]:
        """The k levels alone (LAPACK's subset solver) and the elements between them."""
        ham, ops, k = self.hamiltonian, self.ops, self.k
        h = _assemble(ham, c_h, self.dense[id(ham)])
        w, vk = _lowest(h, k, True, "general")
        cols = _Columns(vk)
        e = [_elements(t, self.dense[id(t)], c, cols, cols) for t, c in zip(ops, self._split(c_o))]
        e_all = np.stack(e, axis=1) if ops else np.zeros((c_h.shape[0], 0, k, k))
        diag = np.real(np.diagonal(e_all, axis1=-2, axis2=-1))
        return (w, diag, np.real(e_all) ** 2 + np.imag(e_all) ** 2)

    def _derivatives(
        self, c_h: np.ndarray, c_o: np.ndarray, d_h: np.ndarray, d_o: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """The levels and elements, and their derivatives along each parameter `a` given
        `dc/dp_a` (`d_h[..., a]`, `d_o[..., a]`): from the k levels alone (`_sternheimer`)
        where they are a small part of the spectrum, else from the whole spectrum."""
        if 4 * self.k <= self.hamiltonian.dim:
            found = self._sternheimer(c_h, c_o, d_h, d_o)
            if found is not None:
                return found
        return self._whole_spectrum(c_h, c_o, d_h, d_o)

    def _sternheimer(
        self, c_h: np.ndarray, c_o: np.ndarray, d_h: np.ndarray, d_o: np.ndarray
    ) -> tuple[np.ndarray, ...] | None:
        """`_derivatives` from the k lowest eigenpairs (LAPACK's subset solver) and one
        linear solve a level and parameter, in place of the whole spectrum.

        With `P` the projector on the k kept states, `dv_i = sum_j v_j <v_j|dH|v_i> /
        (w_i - w_j)` over the kept `j != i` (exactly equal pairs dropped, as everywhere)
        plus the part outside them, `x_i`, which solves `(H - w_i + alpha P) x_i = -(1 - P)
        dH v_i`: `H` leaves both subspaces as they are, `alpha` (the kept levels' spread plus
        one) makes the kept subspace's part of the matrix invertible, and the right-hand
        side has none of it, so `x_i` has none either. That is `sum_l v_l <v_l|dH|v_i> /
        (w_i - w_l)` over every level `l` outside, without diagonalising for them: for k
        levels of N, k solves of O(N^3 / 3) against a whole `eigh` (about 9 N^3) and its
        O(N^3) products. None where a solve fails (a kept level equal to one outside it),
        so that the caller takes the whole spectrum, which drops such pairs."""
        ham, ops, k = self.hamiltonian, self.ops, self.k
        b, n, nd = c_h.shape[0], len(ops), d_h.shape[-1]
        h_dense = self.dense[id(ham)]
        h = _assemble(ham, c_h, h_dense)
        w, vk = _lowest(h, k, True, "general")
        low = _Columns(vk)
        splits, d_splits = self._split(c_o), self._split(d_o)
        e = [_elements(t, self.dense[id(t)], c, low, low) for t, c in zip(ops, splits)]
        e = np.stack(e, axis=1) if ops else np.zeros((b, 0, k, k))
        diag = np.real(np.diagonal(e, axis1=-2, axis2=-1))
        sq = np.real(e) ** 2 + np.imag(e) ** 2
        gap = w[:, None, :] - w[:, :, None]  # [j, i] = w_i - w_j
        zero = gap == 0
        f = np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, gap))
        alpha = (w[:, -1] - w[:, 0]) + 1.0
        shifted = h + alpha[:, None, None] * (vk @ _adjoint(vk))
        eye = np.eye(h.shape[-1])
        jw = np.zeros((b, k, nd))
        de = np.zeros((b, n, k, k, nd), np.result_type(e, vk))
        for a in range(nd):
            r = _assemble(ham, d_h[:, :, a], h_dense) @ vk  # dH v_i, (B, N, k)
            inner = _adjoint(vk) @ r  # <v_j|dH|v_i>
            jw[:, :, a] = np.real(np.diagonal(inner, axis1=-2, axis2=-1))
            outside = r - vk @ inner  # (1 - P) dH v_i
            x = np.empty_like(np.asarray(outside, np.result_type(outside, shifted)))
            try:
                for i in range(k):
                    m = shifted - w[:, i, None, None] * eye
                    x[:, :, i] = np.linalg.solve(m, -outside[:, :, i : i + 1])[..., 0]
            except np.linalg.LinAlgError:
                return None
            if not np.all(np.isfinite(x)):
                return None
            dv = _Columns(vk @ (inner * f) + x)
            for i, (terms, dense, c, dc) in enumerate(
                zip(ops, (self.dense[id(t)] for t in ops), splits, d_splits)
            ):
                # <dv_i|O|v_j> + <v_i|O|dv_j> + <v_i|dO|v_j>
                de[:, i, :, :, a] = (
                    _elements(terms, dense, c, dv, low)
                    + _elements(terms, dense, c, low, dv)
                    + _elements(terms, dense, dc[:, :, a], low, low)
                )
        jd = np.real(np.diagonal(de, axis1=2, axis2=3)).transpose(0, 1, 3, 2)
        js = 2 * np.real(e.conj()[..., None] * de)
        return (w, diag, sq, jw, jd, js)

    def _whole_spectrum(
        self, c_h: np.ndarray, c_o: np.ndarray, d_h: np.ndarray, d_o: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """`_derivatives` from the whole spectrum: first-order perturbation sums over it."""
        ham, ops, k = self.hamiltonian, self.ops, self.k
        b, n, nd = c_h.shape[0], len(ops), d_h.shape[-1]
        h_dense = self.dense[id(ham)]
        w_all, v = np.linalg.eigh(_assemble(ham, c_h, h_dense))
        w, vk = w_all[:, :k], v[..., :k]
        all_, low = _Columns(v), _Columns(vk)
        splits, d_splits = self._split(c_o), self._split(d_o)
        # <v_l|O|v_j> (N, k) and <v_i|O|v_l> (k, N) of each operator
        q = [_elements(t, self.dense[id(t)], c, all_, low) for t, c in zip(ops, splits)]
        pr = [_elements(t, self.dense[id(t)], c, low, all_) for t, c in zip(ops, splits)]
        e = np.stack([x[:, :k, :] for x in q], axis=1) if ops else np.zeros((b, 0, k, k))
        diag = np.real(np.diagonal(e, axis1=-2, axis2=-1))
        sq = np.real(e) ** 2 + np.imag(e) ** 2
        # Along parameter a: A[l, i] = <v_l|dH/dp_a|v_i>; dv_i = sum_l v_l C[l, i] with
        # C = A F, F[l, i] = 1 / (w_i - w_l), zero where the two are equal (as `_eigh`).
        gap = w[:, None, :] - w_all[:, :, None]
        zero = gap == 0
        f = np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, gap))
        jw = np.zeros((b, k, nd))
        de = np.zeros((b, n, k, k, nd), np.result_type(e, v))
        for a in range(nd):
            da = _elements(ham, h_dense, d_h[:, :, a], all_, low)  # (B, N, k)
            jw[:, :, a] = np.real(np.diagonal(da[:, :k, :], axis1=-2, axis2=-1))
            cc = da * f
            for i, (terms, qo, po, dc) in enumerate(zip(ops, q, pr, d_splits)):
                # <dv_i|O|v_j> + <v_i|O|dv_j> + <v_i|dO|v_j>
                de[:, i, :, :, a] = (
                    _adjoint(cc) @ qo
                    + po @ cc
                    + _elements(terms, self.dense[id(terms)], dc[:, :, a], low, low)
                )
        jd = np.real(np.diagonal(de, axis1=2, axis2=3)).transpose(0, 1, 3, 2)
        js = 2 * np.real(e.conj()[..., None] * de)
        return (w, diag, sq, jw, jd, js)


class HostLevels:
    """The k lowest eigenvalues of `H(p)` as host calls of the parameters themselves: the
    coefficients of `H` evaluated on the host (`_numpy_eval`), the matrix assembled and
    diagonalised there (LAPACK's subset solver, as `eigvalsh_k`), and exact derivatives from
    the same calls: first order by Hellmann-Feynman on the k eigenvectors, second order by
    second-order perturbation theory over the whole spectrum (`<v_i|d2H|v_i> + 2 Re sum_j
    <v_i|dH_a|v_j><v_j|dH_b|v_i> / (w_i - w_j)`, exactly equal pairs dropped as in `_eigh`),
    higher orders by central differences of the second. A program of eigenvalues is then host
    calls and products with the tangents: nothing of `H` is built in XLA. (Where a derivative's
    jaxpr has a primitive without a NumPy rule, JAX computes those coefficients and hands them
    to the same host calls.)

    Args:
        terms: `H(p)`'s terms (real coefficients).
        k: how many levels.
    """

    def __init__(self, terms: Terms, k: int) -> None:
        self.terms, self.k = terms, k
        self.dense = [
            op.matrix.toarray() if isinstance(op, Fixed) else None for op in terms.operators
        ]

    def __call__(self, p: Any) -> jax.Array | None:
        """`(k,)` at one parameter point (`p`: scalars by name); None where the coefficients
        are complex or not all scalars, or one of their primitives has no NumPy rule (the
        caller's JAX path serves those)."""
        names, dtype = _point(p)
        if not names:
            return None
        terms = self.terms

        def coefficients(*xs: jax.Array) -> jax.Array:
            return terms.flat_coefficients(dict(zip(names, xs)))

        x0 = [jnp.asarray(p[n], dtype) for n in names]
        avals = [jax.ShapeDtypeStruct(jnp.shape(x), x.dtype) for x in x0]
        if any(a.shape != () for a in avals):
            return None
        closed = jax.make_jaxpr(coefficients)(*avals)
        out: Any = closed.out_avals[0]
        if jnp.issubdtype(out.dtype, jnp.complexfloating):
            return None
        primal = on_numpy(closed)
        if primal is None:
            return None

        def moving_of(tangents: Any) -> tuple[int, ...]:
            return tuple(i for i, t in enumerate(tangents) if not isinstance(t, SymbolicZero))

        def call(kind: str, fn: Any, primals: Any, nd: tuple[int, ...]) -> Any:
            """`kind`'s host call on the parameters, the coefficients' jaxpr `fn` on the host;
            where it has no NumPy rule, on JAX's coefficients (`fn`'s values)."""
            evaluate = on_numpy(jax.make_jaxpr(fn)(*avals))
            if evaluate is not None:
                return self._host(kind, evaluate, nd)(*primals)
            parts = jax.tree_util.tree_leaves(fn(*primals))
            return self._host(kind, None, nd)(*parts)

        @jax.custom_jvp
        def levels(*xs: jax.Array) -> jax.Array:
            return self._host("primal", primal, ())(*xs)  # pyright: ignore[reportReturnType]

        def levels_jvp(primals: Any, tangents: Any) -> Any:
            moving = moving_of(tangents)
            if not moving:
                w = levels(*primals)
                return w, jnp.zeros_like(w)
            w, jw = first(moving)(*primals)
            return w, jw @ jnp.stack([tangents[i] for i in moving])

        def first(moving: tuple[int, ...]) -> Any:
            @jax.custom_jvp
            def hf(*xs: jax.Array) -> tuple[jax.Array, jax.Array]:
                fn = _along(coefficients, moving)
                return tuple(call("first", fn, xs, (len(moving),)))  # pyright: ignore[reportReturnType]

            def hf_jvp(primals: Any, tangents: Any) -> Any:
                m2 = moving_of(tangents)
                if not m2:
                    out = hf(*primals)
                    return out, tuple(jnp.zeros_like(o) for o in out)
                both = _along(_along(coefficients, moving), m2)
                w, jw, jw2, hw = call("second", both, primals, (len(moving), len(m2)))
                dx = jnp.stack([tangents[i] for i in m2])
                return (w, jw), (jw2 @ dx, hw @ dx)

            hf.defjvp(hf_jvp, symbolic_zeros=True)
            return hf

        levels.defjvp(levels_jvp, symbolic_zeros=True)
        return levels(*x0)

    def _host(self, kind: str, evaluate: Any, nd: tuple[int, ...]) -> _host.Host:
        """The host call of `kind` ("primal": `w`; "first": `w, dw/dp` along `nd[0]`
        parameters; "second": `w`, the first derivatives along each set and the second,
        `nd = (a, b)`). Its inputs: the parameters (`evaluate` gives the coefficients and
        their derivatives from them), or with `evaluate` None the coefficients and derivatives
        themselves."""
        k = self.k

        def fn(*xs: np.ndarray) -> Any:
            def run(*rows: np.ndarray) -> Any:
                if evaluate is not None:
                    parts = evaluate(rows[0].shape[0], *rows)
                else:
                    parts = list(rows)
                return getattr(self, "_" + kind)(*(np.asarray(x, np.float64) for x in parts))

            if evaluate is not None:
                out = _on_rows(run, xs)
            else:
                single = xs[0].ndim == 1  # the coefficient vector of one point
                got = run(*(x[None] if single else x for x in xs))
                out = tuple(np.asarray(o[0] if single else o).astype(xs[0].dtype) for o in got)
            return out[0] if kind == "primal" else out

        def result(*xs: Any) -> Any:
            dt = xs[0].dtype
            s = lambda *shape: jax.ShapeDtypeStruct(shape, dt)
            if kind == "primal":
                return s(k)
            if kind == "first":
                return s(k), s(k, nd[0])
            return s(k), s(k, nd[0]), s(k, nd[1]), s(k, nd[0], nd[1])

        if kind == "second":  # third and higher orders: central differences of these
            return _host.host(fn, result=result, vmap="vectorized", derivative=FiniteDifferences())
        return _host.host(fn, result=result, vmap="vectorized")

    def _primal(self, c: np.ndarray) -> Any:
        h = _assemble(self.terms, c, self.dense)
        return (_lowest(h, self.k, False, "general"),)

    def _first(self, c: np.ndarray, d: np.ndarray) -> Any:
        """`w` and `dw_i/dp_a = <v_i|dH_a|v_i>` from the k eigenvectors."""
        h = _assemble(self.terms, c, self.dense)
        w, vk = _lowest(h, self.k, True, "general")
        low = _Columns(vk)
        basis = _elements(self.terms, self.dense, None, low, low)  # (B, M, k, k)
        diag = np.real(np.diagonal(basis, axis1=-2, axis2=-1))  # (B, M, k)
        return w, np.einsum("bmi,bma->bia", diag, d)

    def _second(self, c: np.ndarray, d1: np.ndarray, d2: np.ndarray, d12: np.ndarray) -> Any:
        """`w`, its first derivatives along both sets of parameters and the second ones, from
        the whole spectrum (`d1 (B, M, a)`, `d2 (B, M, b)`, `d12 (B, M, a, b)`: the
        coefficients' derivatives)."""
        k = self.k
        w_all, v = np.linalg.eigh(_assemble(self.terms, c, self.dense))
        w, vk = w_all[:, :k], v[..., :k]
        every, low = _Columns(v), _Columns(vk)
        basis = _elements(self.terms, self.dense, None, every, low)  # (B, M, N, k)
        diag = np.real(np.diagonal(basis[:, :, :k, :], axis1=-2, axis2=-1))  # (B, M, k)
        jw1 = np.einsum("bmi,bma->bia", diag, d1)
        jw2 = np.einsum("bmi,bmc->bic", diag, d2)
        a1 = np.einsum("bmji,bma->baji", basis, d1)  # <v_j|dH_a|v_i>
        a2 = np.einsum("bmji,bmc->bcji", basis, d2)
        gap = w[:, None, :] - w_all[:, :, None]  # (B, N, k): w_i - w_j
        zero = gap == 0  # i itself, and exactly equal pairs (as `_eigh`)
        f = np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, gap))
        second = 2 * np.real(np.einsum("baji,bcji,bji->biac", a1.conj(), a2, f))
        hw = np.einsum("bmi,bmac->biac", diag, d12) + second
        return w, jw1, jw2, hw
