"""A composite Hamiltonian in the bare product basis, as scqubits' `HilbertSpace` builds it.

`H = sum_s E_s + sum_t V_t` on the product of the subsystems' `truncated_dim` lowest bare
eigenstates: `E_s` the diagonal of subsystem s's bare levels, each operator of a term taken
in its subsystem's eigenbasis (`v^H O v`) and wrapped in identities. A `Composite` is shared by
`HilbertSpace` models and hierarchical `Circuit`s; what differs is how a point's parameters
`P` reach each subsystem (`part_params`) and each term's coefficient.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from .._terms import Params, complex_of
from . import _expr
from ._subsystems import Operator, Part


@dataclasses.dataclass
class Factor:
    """One operator of a term: subsystem index and the operator in that subsystem's basis."""

    subsystem: int
    operator: Operator


@dataclasses.dataclass
class ProductTerm:
    """`c(P) * A B C ...` (+ h.c.): the `g=` form, and each term of a hierarchical Circuit."""

    coefficient: Callable[[Any], Any]
    factors: list[Factor]
    add_hc: bool = False
    is_complex: bool = False


@dataclasses.dataclass
class ExprTerm:
    """The `expr=` form: named operators, constants (`constants(P)`), the string."""

    expr: str
    operators: dict[str, Factor]
    constants: Callable[[Any], dict[str, Any]]
    add_hc: bool = False
    is_complex: bool = False


@dataclasses.dataclass
class MatrixTerm:
    """A fixed `(D, D)` matrix in the bare product basis: the `qobj=` form."""

    matrix: Any
    is_complex: bool = False


Term = ProductTerm | ExprTerm | MatrixTerm


class Composite:
    """The bare spectra and the composite Hamiltonian at one parameter point."""

    def __init__(
        self,
        parts: Sequence[Part],
        terms: Sequence[Term],
        part_params: Callable[[Any, int], Params],
    ) -> None:
        self.parts = list(parts)
        self.terms = list(terms)
        self.part_params = part_params
        self.dims = [p.dim for p in self.parts]
        self.dim = math.prod(self.dims)
        self.is_complex = any(p.is_complex for p in self.parts) or any(
            t.is_complex for t in self.terms
        )
        for t in self.terms:
            if isinstance(t, MatrixTerm):
                continue
            factors = t.factors if isinstance(t, ProductTerm) else t.operators.values()
            self.is_complex |= any(f.operator[1] for f in factors)

    def dtype(self, real: Any) -> Any:
        return complex_of(real) if self.is_complex else real

    def bare(self, P: Any, k: Sequence[int] | None = None) -> list[tuple[jax.Array, Any]]:
        """Each subsystem's `(levels, eigenvectors or None)`, `k[s]` levels (truncated_dim)."""
        counts = self.dims if k is None else k
        return [
            p.esys(self.part_params(P, s), n) for s, (p, n) in enumerate(zip(self.parts, counts))
        ]

    def hamiltonian(self, P: Any, bare: list[tuple[jax.Array, Any]] | None = None) -> jax.Array:
        """The `(D, D)` Hamiltonian in the bare product basis (scqubits' `hs.hamiltonian()`)."""
        bare = self.bare(P) if bare is None else bare
        real = bare[0][0].dtype
        dtype = self.dtype(real)
        energies = jnp.zeros((1,), real)
        for w, _ in bare:  # the last subsystem's index runs fastest, as in qutip's tensor
            energies = (energies[:, None] + w[None, :]).reshape(-1)
        h = jnp.diag(energies).astype(dtype)
        cache: dict[int, jax.Array] = {}

        def in_eigenbasis(f: Factor) -> jax.Array:
            key = id(f.operator[0])
            if key not in cache:
                s = f.subsystem
                o = f.operator[0](self.part_params(P, s)).astype(dtype)
                v = bare[s][1]
                cache[key] = o if v is None else v.conj().T.astype(dtype) @ o @ v.astype(dtype)
            return cache[key]

        for term in self.terms:
            if isinstance(term, MatrixTerm):
                h = h + jnp.asarray(term.matrix).astype(dtype)
                continue
            if isinstance(term, ProductTerm):
                per = [jnp.eye(d, dtype=dtype) for d in self.dims]
                for f in term.factors:
                    per[f.subsystem] = per[f.subsystem] @ in_eigenbasis(f)
                v = _kron_all(per)
                v = jnp.asarray(term.coefficient(P)).astype(dtype) * v
            else:
                wrapped = {
                    name: self.wrap(in_eigenbasis(f), f.subsystem)
                    for name, f in term.operators.items()
                }
                v = _expr.evaluate(term.expr, wrapped, term.constants(P)).astype(dtype)
            if term.add_hc:
                v = v + v.conj().T
            h = h + v
        return h

    def wrap(self, o: jax.Array, s: int) -> jax.Array:
        """`o` on subsystem s, identities on the others: `(D, D)`."""
        per = [jnp.eye(d, dtype=o.dtype) for d in self.dims]
        per[s] = o
        return _kron_all(per)


def _kron_all(ms: list[jax.Array]) -> jax.Array:
    out = ms[0]
    for m in ms[1:]:
        out = jnp.kron(out, m)
    return out
