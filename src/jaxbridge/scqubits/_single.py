"""`model()` of an `Oscillator`, `KerrOscillator` or `GenericQubit` on its own.

Inside a `HilbertSpace` these are `_subsystems` parts (levels in closed form for the
oscillators, `E sigma_z / 2` for the generic qubit); on their own the same parts give the
spectrum, states and matrix elements as JAX functions of their parameters.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from . import _params
from ._terms import complex_of
from .composite import _hs_errors
from .composite._subsystems import Part, part

ParamsArg = dict[str, Any] | None

UNKNOWN_PARAM = (
    "`{method}`: unknown parameter {names} for this `{kind}` model; its parameters are {known} "
    "(`model.params`). Its truncation is static: make a new object to change it."
)


class SubsystemModel:
    """JAX functions of an `Oscillator`'s, `KerrOscillator`'s or `GenericQubit`'s parameters.

    Made by `jaxbridge.scqubits.model(obj)`. `params` holds `E_osc` (and `K`, `l_osc` where
    the object has them) or `E`. Every method works under `jit`, `vmap` and `grad`.

    Attributes:
        params: the parameters and the object's values.
        dim: the Hilbert space dimension (`truncated_dim`; 2 for a GenericQubit).
    """

    def __init__(self, obj: Any) -> None:
        self._part: Part = part(obj)
        self.kind = self._part.kind
        self.params: dict[str, float] = dict(self._part.defaults)
        self.dim: int = self._part.native_dim
        self._compiled = jax.jit(self._evaluate, static_argnames=("what", "k", "name"))

    def __repr__(self) -> str:
        return (
            f"jaxbridge.scqubits.SubsystemModel({self.kind}, dim={self.dim}, params={self.params})"
        )

    def _values(self, params: ParamsArg, method: str) -> dict[str, jax.Array]:
        def unknown(names: list[str]) -> str:
            known = sorted(self.params)
            return UNKNOWN_PARAM.format(method=method, names=names, kind=self.kind, known=known)

        return _params.values(params, self.params, unknown)

    def _count(self, evals_count: Any, method: str) -> int:
        return _params.evals_count(evals_count, self.dim, _hs_errors.HS_EVALS_COUNT, method=method)

    def _states(self, P: dict[str, jax.Array], k: int) -> tuple[jax.Array, jax.Array]:
        w, v = self._part.esys(P, k)
        return w, jnp.eye(self.dim, k, dtype=w.dtype) if v is None else v

    def _evaluate(self, values: dict[str, jax.Array], *, what: str, k: int, name: str) -> Any:
        def one(P: dict[str, jax.Array]) -> Any:
            if what == "hamiltonian":
                w, v = self._states(P, self.dim)
                return (v * w[None, :]) @ v.conj().T
            if what == "operator":
                return self._part.named(name, "operator")[0](P)
            w, v = self._states(P, k)
            if what == "eigenvals":
                return w
            if what == "eigensys":
                return w, v
            op, is_complex = self._part.named(name, "matrixelements")
            o = op(P)
            dtype = complex_of(w.dtype) if is_complex or jnp.iscomplexobj(o) else w.dtype
            v = v.astype(dtype)
            return v.conj().T @ o.astype(dtype) @ v

        return _params.map_batch(one, values)

    def hamiltonian(self, params: ParamsArg = None) -> jax.Array:
        """The Hamiltonian in the object's basis (the Fock basis for an oscillator, scqubits'
        `hamiltonian()`), `(*batch, dim, dim)`."""
        values = self._values(params, "hamiltonian")
        return self._compiled(values, what="hamiltonian", k=0, name="")

    def eigenvals(self, params: ParamsArg = None, evals_count: int = 6) -> jax.Array:
        """The `evals_count` lowest levels (at most `dim`), `(*batch, evals_count)`."""
        k = self._count(min(evals_count, self.dim), "eigenvals")
        return self._compiled(self._values(params, "eigenvals"), what="eigenvals", k=k, name="")

    def eigensys(
        self, params: ParamsArg = None, evals_count: int = 6
    ) -> tuple[jax.Array, jax.Array]:
        """The lowest levels and their states, `(*batch, k)` and `(*batch, dim, k)`."""
        k = self._count(min(evals_count, self.dim), "eigensys")
        return self._compiled(self._values(params, "eigensys"), what="eigensys", k=k, name="")

    def matrixelements(
        self, operator: str, params: ParamsArg = None, evals_count: int = 6
    ) -> jax.Array:
        """`<i|O|j>` between the lowest `evals_count` states, `O` one of the object's operators
        by name (`"annihilation_operator"`, `"creation_operator"`, `"n_operator"` and
        `"phi_operator"` where the oscillator has `l_osc`; `"sx_operator"`, ... for a
        GenericQubit), `(*batch, k, k)`.

        Raises:
            ValueError: an operator the object does not have.
        """
        k = self._count(min(evals_count, self.dim), "matrixelements")
        self._part.named(operator, "matrixelements")  # its error, before anything is traced
        values = self._values(params, "matrixelements")
        return self._compiled(values, what="matrixelements", k=k, name=operator)

    def operator(self, name: str, params: ParamsArg = None) -> jax.Array:
        """One of the object's operators by name as scqubits' matrix at `params` (the Fock
        basis for an oscillator; `n_operator` and `phi_operator` follow `l_osc`),
        `(*batch, dim, dim)`.

        Raises:
            ValueError: an operator the object does not have.
        """
        self._part.named(name, "operator")  # its error, before anything is traced
        values = self._values(params, "operator")
        return self._compiled(values, what="operator", k=0, name=name)
