"""A hierarchical Circuit's purely harmonic subsystem of two or more variables, in normal modes.

scqubits (`_diagonalize_purely_harmonic_hamiltonian`) writes such a subsystem's Hamiltonian,
`H = 4 Q^T EC Q + θ^T EL θ / 2 + (terms of lower degree)`, in the variables that make both
quadratic forms diagonal (`θ = T θn`, `Q = T^-T Qn`, T the eigenvectors of `8 EC EL`), and
evaluates it with one truncated oscillator per normal mode: `θn_j = l_j (a_j + a_j^+) / √2`,
`Qn_j = i (a_j^+ - a_j) / (√2 l_j)`, `l_j` the mode's oscillator length. Its operators θ_i and
Q_i are the same linear combinations of the modes' ladder operators.

Here the transformation is JAX code of the parameters, so it is right under `jit`, `vmap` and
`grad` when capacitances and inductances are traced: with `EC = L L^T` (Cholesky, written out:
the matrices are n x n, n the number of variables) and `L^T EL L = U diag(mu) U^T` (the host
solver `eigh_k`, whose derivative is JAX code), `T = L U` (up to the columns' scale, which
cancels), every mode has `EC' = 1`, `EL' = mu_j`, `l_j = (8 / mu_j)^(1/4)` and frequency
`sqrt(8 mu_j)`; `θ = L U diag(l) x` and `Q = L^-T U diag(1/l) p` with `x_j = (a_j + a_j^+)/√2`,
`p_j = i (a_j^+ - a_j)/√2` on mode j. Any polynomial in θ_i, Q_i (the Hamiltonian, an
interaction's factor) is then a sum of fixed products of the x_j and p_j with JAX coefficients.

No LAPACK runs inside XLA: the n x n Cholesky and triangular inverse are arithmetic, the
eigenproblem is `eigh_k` on the host. Which mode scqubits assigns to which variable's cutoff is
the order NumPy's non-symmetric `eig` returns them in, which only matters when the cutoffs
differ; those subsystems are refused.
"""

from __future__ import annotations

import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import sympy

from .._eigen import eigh_k
from .._params import read_defaults
from .._terms import Params, Terms, fixed
from . import _hs_errors as _errors
from ._subsystems import Operator, Part, fix_phases


def param_symbols(circ: Any) -> list[Any]:
    """A Circuit's parameter symbols: symbolic parameters, external fluxes, charges."""
    return [
        *circ.symbolic_params,
        *circ.external_fluxes,
        *circ.offset_charges,
        *circ.free_charges,
    ]


def _cholesky(a: list[list[Any]]) -> list[list[Any]]:
    """The lower Cholesky factor of a small symmetric positive-definite matrix, entry by entry."""
    n = len(a)
    low: list[list[Any]] = [[jnp.zeros_like(a[0][0]) for _ in range(n)] for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            s = a[i][j] - sum((low[i][k] * low[j][k] for k in range(j)), start=0.0)
            low[i][j] = jnp.sqrt(s) if i == j else s / low[j][j]
    return low


def _lower_inverse(low: list[list[Any]]) -> list[list[Any]]:
    """The inverse of a small lower-triangular matrix (forward substitution)."""
    n = len(low)
    inv: list[list[Any]] = [[jnp.zeros_like(low[0][0]) for _ in range(n)] for _ in range(n)]
    for i in range(n):
        inv[i][i] = 1.0 / low[i][i]
        for j in range(i):
            s = sum((low[i][k] * inv[k][j] for k in range(j, i)), start=0.0)
            inv[i][j] = -s / low[i][i]
    return inv


def normal_modes(ec: jax.Array, el: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The normal modes of `H = 4 Q^T EC Q + θ^T EL θ / 2` as `(A, B)`: θ = A x, Q = B p.

    `x_j = (a_j + a_j^+)/√2` and `p_j = i (a_j^+ - a_j)/√2` on mode j, whose frequency is
    `sqrt(8 mu_j)`, `mu` the eigenvalues of `L^T EL L` (ascending), `EC = L L^T`. Works under
    `jit`, `vmap` and every derivative mode; no LAPACK runs inside XLA (the eigenproblem is
    `eigh_k`, on the host; its derivative needs distinct frequencies).

    Args:
        ec: `(n, n)` symmetric positive definite.
        el: `(n, n)` symmetric positive definite.

    Returns:
        `A` and `B`, each `(n, n)`, with `A B^T = 1` (θ and Q stay conjugate).
    """
    n = ec.shape[-1]
    low = _cholesky([[ec[i, j] for j in range(n)] for i in range(n)])
    inv = _lower_inverse(low)
    low_m = jnp.stack([jnp.stack(r) for r in low])
    inv_m = jnp.stack([jnp.stack(r) for r in inv])
    m = low_m.T @ el @ low_m
    mu, u = eigh_k((m + m.T) / 2, n, "batched")
    length = (8.0 / mu) ** 0.25
    return (low_m @ u) * length[None, :], (inv_m.T @ u) / length[None, :]


def _normal_modes_numpy(ec: np.ndarray, el: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`normal_modes` for fixed matrices, in NumPy."""
    low = np.linalg.cholesky(ec)
    mu, u = np.linalg.eigh(low.T @ el @ low)
    length = (8.0 / mu) ** 0.25
    return (low @ u) * length[None, :], (np.linalg.inv(low).T @ u) / length[None, :]


class NormalModesPart(Part):
    """A plain `Subsystem` of a hierarchical Circuit, purely harmonic in n >= 2 variables."""

    def __init__(self, sub: Any) -> None:
        indices = list(sub.dynamic_var_indices)
        ext = list(sub.var_categories["extended"])
        if ext != indices:
            raise ValueError(_errors.HD_NORMAL_MODES_KIND.format(indices=indices, extended=ext))
        cutoffs = [int(getattr(sub, f"cutoff_ext_{i}")) for i in ext]
        if len(set(cutoffs)) != 1:
            raise ValueError(_errors.HD_NORMAL_MODES_CUTOFFS.format(indices=ext, cutoffs=cutoffs))
        self.indices = ext
        self.n = n = len(ext)
        self.cutoff = cutoff = cutoffs[0]
        self.thetas = [sympy.Symbol(f"θ{i}") for i in ext]
        self.charges = [sympy.Symbol(f"Q{i}") for i in ext]
        self.params = param_symbols(sub)
        self.circ = sub
        h = self._prepare(sub.hamiltonian_symbolic)
        used = sorted((s for s in h.free_symbols if s in set(self.params)), key=str)
        defaults = read_defaults(sub, [str(s) for s in used])
        super().__init__(sub, defaults, cutoff**n)
        if not 1 <= self.dim <= self.native_dim:
            raise ValueError(
                _errors.HS_TRUNCATED_DIM.format(
                    id_str=f"subsystem{indices}", got=self.dim, dim=self.native_dim
                )
            )
        self.id_str = f"subsystem{indices}"
        poly = self._poly(h, "the Hamiltonian")
        if poly.total_degree() > 2:
            raise ValueError(_errors.HD_NORMAL_MODES_DEGREE.format(indices=ext, expr=h))
        # EC and EL as in scqubits: H = 4 sum EC_ij Q_i Q_j + 1/2 sum EL_ij θ_i θ_j + ...
        gens = poly.gens
        ec: list[list[Any]] = [[0] * n for _ in range(n)]
        el: list[list[Any]] = [[0] * n for _ in range(n)]
        for i, j in itertools.product(range(n), repeat=2):
            for (a, b), out, scale in (
                ((self.charges[i], self.charges[j]), ec, (4, 8)),
                ((self.thetas[i], self.thetas[j]), el, (sympy.Rational(1, 2), 1)),
            ):
                powers = [0] * len(gens)
                powers[gens.index(a)] += 1
                powers[gens.index(b)] += 1
                c = poly.coeff_monomial(tuple(powers))
                out[i][j] = c / scale[0] if i == j else c / scale[1]
        self._symbols = symbols = used
        self._ec = [[sympy.lambdify(symbols, e, modules=jnp) for e in row] for row in ec]
        self._el = [[sympy.lambdify(symbols, e, modules=jnp) for e in row] for row in el]
        self._constant: tuple[np.ndarray, np.ndarray] | None = None
        if not any(sympy.sympify(e).free_symbols for e in [*sum(ec, []), *sum(el, [])]):
            # scqubits folds a hierarchical Circuit's capacitances and inductances into
            # numbers: the modes are then fixed, computed once here (NumPy, on the host).
            number = lambda rows: np.array([[float(e) for e in r] for r in rows])
            self._constant = _normal_modes_numpy(number(ec), number(el))
        a = np.diag(np.sqrt(np.arange(1.0, cutoff)), k=1)
        x, p = (a + a.T) / np.sqrt(2), 1j * (a.T - a) / np.sqrt(2)
        self._slots = []
        for j in range(n):
            left, right = np.eye(cutoff**j), np.eye(cutoff ** (n - 1 - j))
            wrap = lambda m: np.kron(np.kron(left, m), right)  # noqa: B023 - used at once
            self._slots.append({"x": wrap(x), "p": wrap(p)})
        self._h_terms = self._terms(poly)
        self.is_complex = self._h_terms.is_complex

    def _prepare(self, expr: Any) -> Any:
        expr = sympy.sympify(expr)
        expr = expr.subs({s: 1 for s in expr.free_symbols if s.name == "I"})
        fluxes = [f for f in self.circ.external_fluxes if f in expr.free_symbols]
        return sympy.expand(expr.subs({f: 2 * sympy.pi * f for f in fluxes}))

    def _poly(self, expr: Any, what: str) -> Any:
        operators = set(self.thetas) | set(self.charges)
        others = expr.free_symbols - operators - set(self.params)
        if others or expr.has(sympy.cos, sympy.sin, sympy.exp, sympy.sqrt):
            raise ValueError(
                _errors.HD_NORMAL_MODES_EXPR.format(indices=self.indices, what=what, expr=expr)
            )
        poly = sympy.Poly(expr, *self.thetas, *self.charges)
        n = self.n
        for powers, coefficient in poly.terms():
            if any(powers[:n]) and any(powers[n:]):
                # truncated θ and Q do not commute: the product's order would be a guess
                monomial = sympy.Mul(*(g**e for g, e in zip(poly.gens, powers)))
                raise ValueError(
                    _errors.HD_NORMAL_MODES_MIXED.format(
                        indices=self.indices, what=what, term=coefficient * monomial
                    )
                )
        return poly

    def transform(self, p: Params) -> tuple[jax.Array, jax.Array]:
        """`(A, B)`: θ_i = sum_j A_ij x_j and Q_i = sum_j B_ij p_j at the parameters `p`."""
        values = [p[str(s)] for s in self._symbols]
        dtype = jnp.zeros(()).dtype if not values else jnp.asarray(values[0]).dtype
        if self._constant is not None:
            return tuple(jnp.asarray(m, dtype) for m in self._constant)  # pyright: ignore[reportReturnType]
        matrix = lambda fs: jnp.stack(
            [jnp.stack([jnp.asarray(f(*values), dtype) for f in r]) for r in fs]
        )
        return normal_modes(matrix(self._ec), matrix(self._el))

    def _terms(self, poly: Any) -> Terms:
        """`poly` (in θ_i, Q_i) as fixed products of the modes' x_j, p_j with JAX coefficients."""
        n = self.n
        keys: dict[tuple, int] = {}  # an ordered product of x_j, p_j -> its operator's index
        # per monomial and choice of modes: coefficient, factors (kind, variable), modes, key
        plan: list[tuple[Any, list[tuple[str, int]], tuple[int, ...], int]] = []
        for powers, coefficient in poly.terms():
            factors: list[tuple[str, int]] = []
            for g, e in enumerate(powers):
                factors += [("θ" if g < n else "Q", g % n)] * e
            fn = sympy.lambdify(self._symbols, coefficient, modules=jnp)
            for modes in itertools.product(range(n), repeat=len(factors)):
                key = tuple(("x" if k == "θ" else "p", j) for (k, _), j in zip(factors, modes))
                plan.append((fn, factors, modes, keys.setdefault(key, len(keys))))
        dim = self.cutoff**n
        matrices = []
        for key in keys:
            m: np.ndarray = np.eye(dim, dtype=complex)
            for kind, j in key:
                m = np.asarray(m @ self._slots[j][kind])
            # an even number of p's: real up to rounding (the factors i are exact)
            matrices.append(np.real(m) if not np.any(np.imag(m)) else m)
        if not matrices:
            return Terms([fixed(np.zeros((dim, dim)))], lambda p: [jnp.zeros(())])

        def coefficients(p: Params) -> list[Any]:
            values = [p[str(s)] for s in self._symbols]
            a, b = self.transform(p)
            out = [jnp.zeros((), a.dtype) for _ in keys]
            for fn, factors, modes, key in plan:
                c = jnp.asarray(fn(*values), a.dtype)
                for (kind, i), j in zip(factors, modes):
                    c = c * (a[i, j] if kind == "θ" else b[i, j])
                out[key] = out[key] + c
            return out

        return Terms([fixed(m) for m in matrices], coefficients)

    def esys(self, p: Params, k: int) -> tuple[jax.Array, jax.Array | None]:
        w, v = eigh_k(self._h_terms.dense(p), k)
        return w, fix_phases(v)

    def lifted(self, expr: Any) -> Operator:
        """`expr` (a polynomial in this subsystem's θ_i, Q_i) in its own product basis."""
        terms = self._terms(self._poly(self._prepare(expr), f"the operator `{expr}`"))
        return terms.dense, terms.is_complex
