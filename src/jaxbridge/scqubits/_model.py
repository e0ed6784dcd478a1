"""`jaxbridge.scqubits.model`: a scqubits object as JAX functions of its parameters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sparse

from . import _errors, _params
from ._eigen import HostLevels, SparseSolver, eigh_k, eigvalsh_k
from ._spec import Spec
from ._terms import Terms, complex_of, fixed
from ._wave import PlotMethods
from .noise._noise import NoiseMethods
from .qubits import FIXED_OPERATOR_NAMES

#: Above this dimension `method="auto"` uses the host sparse solver instead of dense `eigh`.
#: The sparse solver overtakes dense `eigh` between dimensions 210 and 420 (docs/performance.md,
#: dense against sparse); the switch sits above that because dense keeps every derivative
#: (eigenvectors, hessian).
DENSE_MAX_DIM = 500

ParamsArg = Mapping[str, Any] | None

if TYPE_CHECKING:  # jaxtyping is a test-time dependency only
    from jaxtyping import Array, Float, Inexact

    # Aliases: ruff reads jaxtyping's shape strings in annotations as (bad) forward references.
    Matrices = Inexact[Array, "*batch n n"]
    Levels = Float[Array, "*batch k"]
    Vectors = Inexact[Array, "*batch n k"]
    Elements = Inexact[Array, "*batch k k"]


class Model(NoiseMethods, PlotMethods):
    """JAX functions of a scqubits object's continuous parameters.

    Made by `jaxbridge.scqubits.model(obj)`; `obj` is read once (its operators, cutoffs and
    grids), later changes to it are not seen. Beside the spectrum and matrix elements it
    serves `operator`, `wavefunction` and `potential` (`_wave.PlotMethods`) and the noise
    channels (`NoiseMethods`). Every method takes `params`: a dict of some of
    the names in `params` (missing names keep the object's values), each a scalar or an array;
    arrays broadcast together and their shape leads every result. Every method works under
    `jax.jit`, `jax.vmap`, `jax.grad`, `jax.jacfwd` and `jax.hessian` on the dense path (float64
    needs `jax.config.update("jax_enable_x64", True)`; in float32 eigenvalues keep ~1e-6).

    Attributes:
        params: the continuous parameters and the object's values, named as scqubits names
            them.
        dim: the Hilbert-space dimension (scqubits' `hilbertdim()`).
    """

    def __init__(self, obj: Any, spec: Spec) -> None:
        self._obj = obj
        self._spec = spec
        self.params: dict[str, float] = dict(spec.defaults)
        self.dim: int = spec.terms.dim
        self._sparse = SparseSolver(spec.terms)
        self._fixed_ops: dict[Any, Terms] = {}
        # One compiled program per (method, levels, path, operator), reused across calls;
        # inside a user's `jit` it is inlined.
        self._compiled = jax.jit(self._evaluate, static_argnames=("what", "k", "path", "op"))

    def __repr__(self) -> str:
        return f"jaxbridge.scqubits.Model({self._spec.kind}, dim={self.dim}, params={self.params})"

    # -- parameters and batching

    def _values(self, params: ParamsArg, method: str) -> dict[str, jax.Array]:
        def unknown(names: list[str]) -> str:
            known = sorted(self.params)
            if set(names) & set(self._spec.dropped):
                return _errors.CIRCUIT_DROPPED.format(method=method, names=names, known=known)
            return _errors.UNKNOWN_PARAM.format(
                method=method, names=names, kind=self._spec.kind, known=known
            )

        return _params.values(params, self.params, unknown)

    def _run(self, what: str, params: ParamsArg, k: int = 0, path: str = "dense", op: Any = None):
        values = self._values(params, what)
        cached = [*self._fixed_ops.values(), *self._spec.operators.values()]
        if isinstance(op, Terms) and not any(op is t for t in cached):
            return self._evaluate(values, what=what, k=k, path=path, op=op)  # a one-off matrix
        return self._compiled(values, what=what, k=k, path=path, op=op)

    def _evaluate(self, values: dict[str, jax.Array], *, what: str, k: int, path: str, op: Any):
        terms = self._spec.terms

        def one(p: dict[str, jax.Array]) -> Any:
            if what == "hamiltonian":
                return terms.dense(p)
            if what == "operator":
                return op.dense(p)
            if what == "eigenvals":
                if path == "dense":
                    levels = self.__dict__.setdefault("_host_levels", {})
                    if k not in levels:  # one a level count: its dense operators made once
                        levels[k] = HostLevels(terms, k)
                    on_host = levels[k](p)  # None: complex or no NumPy rule
                    return eigvalsh_k(terms.dense(p), k) if on_host is None else on_host
                return self._sparse.eigenvals(terms.flat_coefficients(p), k)
            if what == "eigensys" or what == "matrixelements":
                if path == "dense":
                    w, v = eigh_k(terms.dense(p), k)
                else:
                    w, v = self._sparse.eigensys(terms.flat_coefficients(p), k)
                if what == "eigensys":
                    return w, v
                o = op.dense(p)
                if jnp.iscomplexobj(v) or jnp.iscomplexobj(o):
                    v, o = v.astype(complex_of(v.dtype)), o.astype(complex_of(v.dtype))
                return v.conj().T @ o @ v
            # d_hamiltonian: `op` is the parameter's name.
            return jax.jvp(lambda x: terms.dense({**p, op: x}), (p[op],), (jnp.ones_like(p[op]),))[
                1
            ]

        return _params.map_batch(one, values)

    def _method(self, method: str, name: str) -> str:
        if method not in ("auto", "dense", "sparse"):
            raise ValueError(_errors.METHOD.format(method=name, got=method))
        if method == "auto":
            return "dense" if self.dim <= DENSE_MAX_DIM else "sparse"
        return method

    def _count(self, evals_count: Any, name: str, sparse_path: bool) -> int:
        most = self.dim - 1 if sparse_path else self.dim
        minus = " minus 1, for the sparse solver" if sparse_path else ""
        return _params.evals_count(evals_count, most, _errors.EVALS_COUNT, method=name, minus=minus)

    # -- the public methods

    def hamiltonian(self, params: ParamsArg = None) -> Matrices:
        """The dense Hamiltonian in scqubits' basis and truncation.

        Args:
            params: a dict of parameter values (scalars or arrays with leading batch
                dimensions); None or missing names keep the object's values.

        Returns:
            `(*batch, N, N)`: equals `obj.hamiltonian()` at the same values (to ~1e-12 in
            float64), complex where scqubits' is.

        Example:
            >>> import jax.numpy as jnp, scqubits
            >>> import jaxbridge.scqubits as jbq
            >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=3))
            >>> m.hamiltonian({"ng": jnp.array([0.0, 0.5])}).shape
            (2, 7, 7)
        """
        return self._run("hamiltonian", params)

    def d_hamiltonian(self, name: str, params: ParamsArg = None) -> Matrices:
        """The exact derivative of `hamiltonian(params)` with respect to parameter `name`.

        Unlike some of scqubits' `d_hamiltonian_d_*` methods this is the derivative of this
        `hamiltonian` itself: scqubits' `Fluxonium.d_hamiltonian_d_flux` and
        `TunableTransmon.d_hamiltonian_d_flux` have the opposite sign to the derivative of
        the eigenvalues (TunableTransmon's refers to a flux-shifted basis), and
        `Transmon.d_hamiltonian_d_ng` returns `-8 EC n` without the constant `8 EC ng`.

        Args:
            name: one of `params`' names.
            params: as for `hamiltonian`.

        Returns:
            `(*batch, N, N)`.

        Example:
            >>> import scqubits, jaxbridge.scqubits as jbq
            >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=3))
            >>> float(m.d_hamiltonian("EC")[0, 0])  # 4 (n - ng)^2 at n = -3
            36.0
        """
        if name not in self.params:
            known = sorted(self.params)
            raise ValueError(
                _errors.UNKNOWN_PARAM.format(
                    method="d_hamiltonian", names=[name], kind=self._spec.kind, known=known
                )
            )
        return self._run("d_hamiltonian", params, op=name)

    def eigenvals(
        self, params: ParamsArg = None, evals_count: int = 6, method: str = "auto"
    ) -> Levels:
        """The `evals_count` lowest eigenvalues, ascending.

        Args:
            params: as for `hamiltonian`.
            evals_count: how many levels (static).
            method: `"dense"` (JAX's `eigh`), `"sparse"` (SciPy's shift-invert `eigsh` on the
                host, through `jaxbridge.host`; first derivatives by Hellmann-Feynman,
                reverse and forward mode, no second derivatives), or `"auto"`: dense up to
                `DENSE_MAX_DIM`.

        Returns:
            `(*batch, evals_count)`, equal to `obj.eigenvals(evals_count)`. Derivatives use
            only the requested levels (no NaN from degenerate levels elsewhere).

        Example:
            >>> import jax, scqubits, jaxbridge.scqubits as jbq
            >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=10))
            >>> f01 = lambda p: jax.numpy.diff(m.eigenvals(p, evals_count=2))[0]
            >>> sorted(jax.grad(f01)({"EJ": 20.0, "EC": 0.3}))
            ['EC', 'EJ']
        """
        path = self._method(method, "eigenvals")
        k = self._count(evals_count, "eigenvals", path == "sparse")
        return self._run("eigenvals", params, k, path)

    def eigensys(
        self, params: ParamsArg = None, evals_count: int = 6, method: str = "auto"
    ) -> tuple[Levels, Vectors]:
        """The `evals_count` lowest eigenvalues and eigenvectors.

        Args:
            params: as for `hamiltonian`.
            evals_count: how many levels (static).
            method: as for `eigenvals`; the sparse path has no derivatives here.

        Returns:
            `(evals, evecs)`: `(*batch, k)` and `(*batch, N, k)`, `evecs[..., :, j]` the
            eigenvector of level j, as scqubits orders them; each column is fixed up to a phase
            (a sign for real Hamiltonians), as in scqubits. Derivatives of eigenvectors involve
            only the gaps between a requested level and the others.

        Example:
            >>> import scqubits, jaxbridge.scqubits as jbq
            >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=3))
            >>> w, v = m.eigensys(evals_count=2)
            >>> w.shape, v.shape
            ((2,), (7, 2))
        """
        path = self._method(method, "eigensys")
        k = self._count(evals_count, "eigensys", path == "sparse")
        return self._run("eigensys", params, k, path)

    def matrixelements(
        self,
        operator: Any,
        params: ParamsArg = None,
        evals_count: int = 6,
        method: str = "auto",
    ) -> Elements:
        """`<i|O|j>` between the `evals_count` lowest eigenstates.

        Args:
            operator: the name of one of the object's operator methods (`"n_operator"`,
                `"phi_operator"`, ...; parameter-dependent ones such as Fluxonium's
                `n_operator` are recomputed at `params`), a fixed `(N, N)` matrix, or (for a
                `Circuit`) a SymPy expression in its variables.
            params: as for `hamiltonian`.
            evals_count: how many levels (static).
            method: as for `eigensys`.

        Returns:
            `(*batch, k, k)`. Gauge-invariant combinations (`|<0|n|1>|^2`) are differentiable.

        Example:
            >>> import scqubits, jaxbridge.scqubits as jbq
            >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=10))
            >>> m.matrixelements("n_operator", evals_count=3).shape
            (3, 3)
        """
        path = self._method(method, "matrixelements")
        k = self._count(evals_count, "matrixelements", path == "sparse")
        return self._run("matrixelements", params, k, path, self._operator_terms(operator))

    def _operator_terms(self, operator: Any) -> Terms:
        spec = self._spec
        if spec.operator_fn is not None:
            key = operator if isinstance(operator, str) or _is_sympy(operator) else None
            if key is not None:
                if key not in self._fixed_ops:
                    self._fixed_ops[key] = spec.operator_fn(operator)
                return self._fixed_ops[key]
        if isinstance(operator, str):
            if operator in spec.operators:
                return spec.operators[operator]
            fixed_names = FIXED_OPERATOR_NAMES.get(spec.kind, ())
            allowed = spec.fixed_operators or operator in fixed_names
            method = getattr(self._obj, operator, None)
            if allowed and operator.endswith("_operator") and callable(method):
                if operator not in self._fixed_ops:
                    self._fixed_ops[operator] = _constant(method(), self.dim)
                return self._fixed_ops[operator]
            known = sorted(spec.operators) + list(fixed_names)
            if spec.fixed_operators:
                known = sorted(n for n in dir(self._obj) if n.endswith("_operator"))
            raise ValueError(
                _errors.UNKNOWN_OPERATOR.format(
                    kind=spec.kind, name=operator, known=known, dim=self.dim
                )
            )
        return _constant(operator, self.dim)


def _is_sympy(x: Any) -> bool:
    return type(x).__module__.startswith("sympy")


def _constant(matrix: Any, dim: int) -> Terms:
    m = matrix if sparse.issparse(matrix) else np.asarray(matrix)
    if m.shape != (dim, dim):
        raise ValueError(_errors.OPERATOR_SHAPE.format(dim=dim, got=m.shape))
    return Terms([fixed(m)], lambda p: [jnp.ones(())])
