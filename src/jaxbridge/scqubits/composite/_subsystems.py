"""The subsystems of a `HilbertSpace`: each one's bare spectrum and operators as JAX functions.

A `Part` gives, at one parameter point, the `truncated_dim` lowest bare levels, the bare
eigenvectors in the subsystem's own basis (None for an oscillator, whose basis is its
eigenbasis), and any operator in that basis. Qubits reuse `model(obj)`'s Hamiltonian and
operators; their eigenvectors come from `eigh_k`, whose derivatives involve only the requested
levels, with a fixed phase convention (see `fix_phases`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sparse

from .._eigen import eigh_k, is_tridiagonal
from .._full_zero_pi import OPERATORS as FULL_ZERO_PI_OPERATORS
from .._full_zero_pi import ProductBasis
from .._model import Model
from .._specs import spec_of
from .._terms import Fixed, Params, Terms, cast_fixed, complex_of, fixed
from . import _hs_errors as _errors

# A resolved operator: a function of the subsystem's params returning its matrix, and whether
# that matrix is complex.
Operator = tuple[Callable[[Params], jax.Array], bool]


def as_matrix(op: Any) -> np.ndarray:
    """A dense NumPy matrix from a NumPy array, a SciPy sparse matrix or a qutip `Qobj`."""
    if hasattr(op, "full"):
        return np.asarray(op.full())
    return np.asarray(op.toarray() if sparse.issparse(op) else op)


def fix_phases(v: jax.Array) -> jax.Array:
    """Each column times the phase that makes one chosen component real and positive.

    The component is the one of largest modulus in the first half of the column (scqubits'
    `extract_phase` rule, which avoids the mirror-image ties of parity-symmetric states), or
    in the whole column where the first half is (nearly) empty. The choice is discrete and
    carries no derivative; the phase itself is differentiated.
    """
    n, k = v.shape
    a = jnp.abs(jax.lax.stop_gradient(v))
    half = max(n // 2, 1)
    first = a[:half]
    use_first = jnp.max(first, axis=0) > 1e-3 * jnp.max(a, axis=0)
    pivot_at = jnp.where(use_first, jnp.argmax(first, axis=0), jnp.argmax(a, axis=0))
    pivot = v[pivot_at, jnp.arange(k)]
    if jnp.iscomplexobj(v):
        return v * (jnp.conj(pivot) / jnp.abs(pivot).astype(pivot.dtype))[None, :]
    return v * jnp.sign(jax.lax.stop_gradient(pivot))[None, :]


class Part:
    """One subsystem: `defaults` (its params), `dim` (truncated), `native_dim`."""

    def __init__(self, obj: Any, defaults: dict[str, Any], native_dim: int) -> None:
        self.obj = obj
        self.id_str: str = obj.id_str
        self.kind = type(obj).__name__
        self.defaults = defaults
        self.dim = int(obj.truncated_dim)
        self.native_dim = native_dim
        self.is_complex = False
        self._compiled_esys: Callable[..., Any] | None = None

    def esys(self, p: Params, k: int) -> tuple[jax.Array, jax.Array | None]:
        raise NotImplementedError

    def operator(self, op: Any, where: str) -> Operator:
        """Resolves `op` (a bound operator method, or a matrix in the subsystem's basis)."""
        if callable(op) and not hasattr(op, "shape") and not hasattr(op, "full"):
            if getattr(op, "__self__", None) is not self.obj:
                raise ValueError(_errors.HS_CALLABLE.format(where=where, got=op))
            name = op.__name__
            if getattr(self.obj, name, None) != op:  # a Circuit's methods are `operator_func`s
                name = next(
                    (
                        n
                        for n in dir(self.obj)
                        if n.endswith("_operator") and getattr(self.obj, n) == op
                    ),
                    name,
                )
            return self.named(name, where)
        m = as_matrix(op)
        if m.shape != (self.native_dim, self.native_dim):
            raise ValueError(
                _errors.HS_OPERATOR_SHAPE.format(
                    where=where, id_str=self.id_str, dim=self.native_dim, got=m.shape
                )
            )
        return (lambda p, m=m: jnp.asarray(m)), bool(np.iscomplexobj(m))

    def named(self, name: str, where: str) -> Operator:
        raise NotImplementedError

    def esys_at(self, values: Params) -> tuple[jax.Array, jax.Array | None]:
        """`esys(values, dim)` at concrete values, as one compiled program kept with the part
        (op by op, a FullZeroPi's takes seconds)."""
        compiled = self._compiled_esys
        if compiled is None:
            compiled = self._compiled_esys = jax.jit(self.esys, static_argnums=1)
        return compiled(values, self.dim)

    def scqubits_eigenvectors(self, values: Params) -> np.ndarray:
        """scqubits' own `truncated_dim` bare eigenvectors of the object (its solver's
        phases), in this part's basis; `values` are the object's current params."""
        return np.asarray(self.obj.eigensys(evals_count=self.dim)[1])


class QubitPart(Part):
    """A qubit or Circuit through its `Model`'s Hamiltonian and operators."""

    def __init__(self, obj: Any, model: Any) -> None:
        super().__init__(obj, dict(model.params), model.dim)
        self.model = model
        self.terms: Terms = model._spec.terms
        self.is_complex = self.terms.is_complex
        ops = self.terms.operators
        self.tridiagonal = not self.is_complex and all(isinstance(o, Fixed) for o in ops)
        self.tridiagonal = self.tridiagonal and is_tridiagonal(
            [cast_fixed(o).matrix.toarray() for o in ops]
        )
        if not 1 <= self.dim <= self.native_dim:
            raise ValueError(
                _errors.HS_TRUNCATED_DIM.format(
                    id_str=self.id_str, got=self.dim, dim=self.native_dim
                )
            )

    def esys(self, p: Params, k: int) -> tuple[jax.Array, jax.Array | None]:
        h = self.terms.dense(p)
        w, v = eigh_k(h, k, "tridiagonal" if self.tridiagonal else "general")
        return w, fix_phases(v)

    def named(self, name: str, where: str) -> Operator:
        try:
            terms = self.model._operator_terms(name)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from error
        return terms.dense, terms.is_complex


class GenericQubitPart(QubitPart):
    """`GenericQubit`: H = E sigma_z / 2 on two levels."""

    def __init__(self, obj: Any) -> None:
        sz = np.asarray(obj.sz_operator(), dtype=float)
        Part.__init__(self, obj, {"E": float(obj.E)}, 2)
        self.terms = Terms([fixed(sz)], lambda p: [0.5 * p["E"]])
        self.is_complex, self.tridiagonal = False, False

    def named(self, name: str, where: str) -> Operator:
        if name not in ("sx_operator", "sy_operator", "sz_operator", "sp_operator", "sm_operator"):
            known = ["sx_operator", "sy_operator", "sz_operator", "sp_operator", "sm_operator"]
            raise ValueError(_errors.HS_UNKNOWN_OPERATOR.format(
                where=where, id_str=self.id_str, name=name, known=known))  # fmt: skip
        m = np.asarray(getattr(self.obj, name)())
        return (lambda p, m=m: jnp.asarray(m)), bool(np.iscomplexobj(m))


class OscillatorPart(Part):
    """`Oscillator` and `KerrOscillator`: levels in closed form, Fock basis = eigenbasis."""

    def __init__(self, obj: Any) -> None:
        defaults = {"E_osc": float(obj.E_osc)}
        self.kerr = hasattr(obj, "K")
        if self.kerr:
            defaults["K"] = float(obj.K)
        if obj.l_osc is not None:
            defaults["l_osc"] = float(obj.l_osc)
        super().__init__(obj, defaults, int(obj.truncated_dim))

    def esys(self, p: Params, k: int) -> tuple[jax.Array, jax.Array | None]:
        n = jnp.arange(k, dtype=jnp.asarray(p["E_osc"]).dtype)
        if self.kerr:
            return (p["E_osc"] + p["K"]) * n - p["K"] * n**2, None
        return p["E_osc"] * n, None

    def named(self, name: str, where: str) -> Operator:
        d = self.dim
        a = np.diag(np.sqrt(np.arange(1.0, d)), k=1)
        if name == "annihilation_operator":
            return (lambda p: jnp.asarray(a)), False
        if name == "creation_operator":
            return (lambda p: jnp.asarray(a.T)), False
        if name in ("phi_operator", "n_operator") and "l_osc" not in self.defaults:
            raise ValueError(_errors.HS_NO_L_OSC.format(where=where, id_str=self.id_str, name=name))
        if name == "phi_operator":
            x = (a + a.T) / np.sqrt(2)
            return (lambda p: p["l_osc"] * jnp.asarray(x)), False
        if name == "n_operator":
            y = (a.T - a) / np.sqrt(2)

            def n_operator(p: Params) -> jax.Array:
                dtype = complex_of(p["l_osc"].dtype)
                return 1j * jnp.asarray(y, dtype) / p["l_osc"].astype(dtype)

            return n_operator, True
        known = ["annihilation_operator", "creation_operator", "n_operator", "phi_operator"]
        raise ValueError(_errors.HS_UNKNOWN_OPERATOR.format(
            where=where, id_str=self.id_str, name=name, known=known))  # fmt: skip


class FullZeroPiPart(Part):
    """`FullZeroPi`: its product basis (`ProductBasis`: the inner ZeroPi's states, phases fixed
    by the model, times the zeta Fock states) is this part's own basis.

    The Hamiltonian there and each operator are separate functions of the params; at one point
    they share one inner diagonalisation (`_inner_states`), and the inner phase rule is smooth,
    so even computed twice they would see one basis. An
    operator is one of scqubits' FullZeroPi operators, by its bound method; a fixed matrix in
    the product basis is refused: that basis moves with the params, and its inner phases are
    scqubits' eigensolver's at each point, so the matrix would mean another operator at each
    point.
    """

    def __init__(self, obj: Any) -> None:
        self.basis = ProductBasis(obj)
        self._last: tuple[tuple[Any, ...], tuple[jax.Array, jax.Array]] | None = None
        self._compiled_inner: Callable[..., Any] | None = None
        super().__init__(obj, dict(self.basis.params), self.basis.dim)
        self.is_complex = True  # the zeta coupling `i g_theta n_theta`
        if not 1 <= self.dim <= self.native_dim:
            raise ValueError(
                _errors.HS_TRUNCATED_DIM.format(
                    id_str=self.id_str, got=self.dim, dim=self.native_dim
                )
            )

    def esys(self, p: Params, k: int) -> tuple[jax.Array, jax.Array | None]:
        h = self.basis.hamiltonian(p, self._inner_states(p))[0]
        w, u = eigh_k(h, k)
        return w, fix_phases(u)

    def _inner_states(self, p: Params) -> tuple[jax.Array, jax.Array]:
        # The composite asks for the levels and then for each operator with the same param
        # leaves (one point, one trace); XLA does not merge two host eigensolves, so the inner
        # states of the last leaves are kept. The leaves are compared by identity and held, so
        # a hit is the same values in the same trace.
        leaves = tuple(p[name] for name in sorted(p))
        last = self._last
        if last is not None and _same_objects(last[0], leaves):
            return last[1]
        states = self.basis.inner_states(p)
        self._last = (leaves, states)
        return states

    def operator(self, op: Any, where: str) -> Operator:
        if callable(op) and not hasattr(op, "shape") and not hasattr(op, "full"):
            return super().operator(op, where)
        raise ValueError(
            _errors.HS_FULL_ZERO_PI_MATRIX.format(
                where=where, id_str=self.id_str, known=list(FULL_ZERO_PI_OPERATORS)
            )
        )

    def named(self, name: str, where: str) -> Operator:
        if name not in FULL_ZERO_PI_OPERATORS:
            raise ValueError(_errors.HS_UNKNOWN_OPERATOR.format(
                where=where, id_str=self.id_str, name=name,
                known=list(FULL_ZERO_PI_OPERATORS)))  # fmt: skip

        def operator(p: Params) -> jax.Array:
            return self.basis.operator(self._inner_states(p)[1], name)

        return operator, True

    def scqubits_eigenvectors(self, values: Params) -> np.ndarray:
        """scqubits' bare eigenvectors, from its product basis (its inner solver's phases) to
        the model's: `kron(U, 1) v`, `U = <model's inner states|scqubits'>`.

        Raises:
            ValueError: the two sets of inner states span different spaces (an inner level
                degenerate across `zeropi_cutoff`).
        """
        _, theirs = self.obj.eigensys(evals_count=self.dim)
        _, inner = self.obj._zeropi.eigensys(evals_count=self.basis.levels)
        compiled = self._compiled_inner
        if compiled is None:  # one program, not op by op
            compiled = self._compiled_inner = jax.jit(self.basis.inner_states)
        _, ours = compiled(values)
        u = np.asarray(ours).conj().T @ np.asarray(inner)
        off = float(np.max(np.abs(u.conj().T @ u - np.eye(self.basis.levels))))
        if off > 1e-6:
            raise ValueError(_errors.HS_FULL_ZERO_PI_INNER.format(id_str=self.id_str, off=off))
        return np.kron(u, np.eye(self.basis.zeta)) @ np.asarray(theirs)


def _same_objects(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def part(obj: Any) -> Part:
    """The `Part` of one subsystem of a `HilbertSpace`."""
    names = [c.__name__ for c in type(obj).__mro__ if c.__module__.startswith("scqubits")]
    if "Oscillator" in names:
        return OscillatorPart(obj)
    if "GenericQubit" in names:
        return GenericQubitPart(obj)
    if "FullZeroPi" in names:
        return FullZeroPiPart(obj)
    if getattr(obj, "hierarchical_diagonalization", False):
        raise ValueError(_errors.HS_HD_SUBSYSTEM.format(id_str=obj.id_str))
    spec = spec_of(obj)
    if spec is None:
        raise TypeError(
            _errors.HS_SUBSYSTEM.format(id_str=getattr(obj, "id_str", "?"), got=type(obj).__name__)
        )
    return QubitPart(obj, Model(obj, spec))
