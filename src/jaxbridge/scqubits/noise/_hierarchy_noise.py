"""A hierarchical `Circuit`'s noise channels, on `NoiseMethods` and the channel `Engine`.

scqubits 4.3.1 generates the same channels for a hierarchical Circuit as for a flat one
(`circuit_noise.py`), each operator evaluated by `_evaluate_symbolic_expr` in the product of
the subsystems' truncated eigenbases. Here the channel table is the flat Circuit's
(`_circuit_noise.channels`), its operators `HierarchyOperator`s: the SymPy expression split
into `ProductTerm`s of the top-level subsystems as scqubits splits it, and evaluated at a
parameter point in the bare product basis, every subsystem's eigenvectors computed there (so
each matrix element is a JAX function of the parameters, derivatives through the subsystems'
eigenvectors included). The rates are `Engine`'s, from the composite's eigensystem and
`v^H O v`; only the gauge-invariant `Re <i|O|i>` and `|<i|O|j>|^2` enter them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import sympy

from .._eigen import dressed_structure, eigh_k
from .._terms import Params, complex_of
from ..composite._composite import Composite, ProductTerm
from ._noise import NoiseMethods, _trace_state
from ._rates import Engine

HD_NOISE_OPERATOR = (
    "`HierarchicalModel.{method}`: the noise operator must be an operator name "
    "(`'Q1_operator'`, `'cosθ1_operator'`) or a SymPy expression in the circuit's variables "
    "{variables}; got {got}. A fixed matrix (or a method returning one) has no meaning here: "
    "the product basis is made of the subsystems' eigenvectors, whose phases are this model's, "
    "not scqubits'."
)


class HierarchyOperator:
    """An operator of a hierarchical Circuit's variables in its top-level bare product basis.

    Args:
        composite: the top-level `Composite` (its subsystems and their parameters).
        terms: the operator as `ProductTerm`s of the composite's subsystems.
        expr: the SymPy expression it was made of (for messages).
    """

    def __init__(self, composite: Composite, terms: Sequence[ProductTerm], expr: Any) -> None:
        self.composite = composite
        self.terms = list(terms)
        self.expr = expr
        self.is_complex = composite.is_complex or any(
            t.is_complex or any(f.operator[1] for f in t.factors) for t in self.terms
        )

    def matrix(self, P: Params, bare: list[tuple[jax.Array, Any]]) -> jax.Array:
        """The `(D, D)` matrix at the point `P`, the subsystems' spectra `bare` given
        (`Composite.bare(P)`)."""
        comp = self.composite
        real = bare[0][0].dtype
        dtype = complex_of(real) if self.is_complex else real
        cache: dict[int, jax.Array] = {}

        def in_eigenbasis(s: int, fn: Callable) -> jax.Array:
            if id(fn) not in cache:
                o = fn(comp.part_params(P, s)).astype(dtype)
                v = bare[s][1]
                cache[id(fn)] = o if v is None else v.conj().T.astype(dtype) @ o @ v.astype(dtype)
            return cache[id(fn)]

        out = jnp.zeros((comp.dim, comp.dim), dtype)
        for term in self.terms:
            per = [jnp.eye(d, dtype=dtype) for d in comp.dims]
            for f in term.factors:
                per[f.subsystem] = per[f.subsystem] @ in_eigenbasis(f.subsystem, f.operator[0])
            product = per[0]
            for m in per[1:]:
                product = jnp.kron(product, m)
            out = out + jnp.asarray(term.coefficient(P)).astype(dtype) * product
        return out

    def __call__(self, P: Params) -> jax.Array:
        """The matrix at `P` (the subsystems diagonalised there)."""
        return self.matrix(P, self.composite.bare(P))


Bare = list[tuple[jax.Array, Any]]


def elements(
    bare_of: Callable[[Params], Bare], ops: Sequence[HierarchyOperator]
) -> Callable[[Params, jax.Array], list[jax.Array]]:
    """`(p, v) -> [v^H O(p) v for O in ops]`, the subsystems' spectra `bare_of(p)` once for
    all."""

    def evaluate(p: Params, v: jax.Array) -> list[jax.Array]:
        bare = bare_of(p)
        matrices = [op.matrix(p, bare) for op in ops]
        dtype = jnp.result_type(v.dtype, *(m.dtype for m in matrices))
        v = v.astype(dtype)
        return [v.conj().T @ m.astype(dtype) @ v for m in matrices]

    return evaluate


class _Engine(Engine):
    """`Engine` with a hierarchical Circuit's operators (`HierarchyOperator`s)."""

    def __init__(
        self, channel: Callable, eigensys: Callable, bare_of: Callable[[Params], Bare]
    ) -> None:
        super().__init__(channel, eigensys)
        self.bare_of = bare_of

    def elements(self, ops: Sequence[Any]) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        return elements(self.bare_of, ops)


class HierarchyNoise(NoiseMethods):
    """`NoiseMethods` of a hierarchical Circuit (a base class of `HierarchicalModel`).

    The model provides `_obj` (the Circuit), `_spec` (`kind` and `channels_fn`, the flat
    Circuit's channel table built with `_hd_operator`), `_composite`, `_hd_operator(expr)`,
    `_hd_expression(operator, method)`, `_hd_hamiltonian` (the symbolic Hamiltonian), `dim`
    and `_values`.
    """

    _composite: Composite
    _hd_hamiltonian: Any

    def _hd_operator(self, expr: Any) -> HierarchyOperator:
        raise NotImplementedError

    def _hd_expression(self, operator: Any, method: str) -> Any:
        raise NotImplementedError

    def _noise_table(self) -> dict[str, Any]:
        table = super()._noise_table()
        if not isinstance(self.__dict__["_noise_engine"], _Engine):
            engine = _Engine(self._channel, self._noise_eigensys, self._bare)
            self.__dict__["_noise_engine"] = engine
        return table

    def _noise_spectrum(self, ops: Any, k: int) -> None:
        return None  # the programs' JAX path: eigensystem and `elements`

    def _noise_eigensys(self, p: Params, k: int) -> tuple[jax.Array, jax.Array]:
        bare = self._composite.bare(p)
        # the operators' elements at this point (the same `p`, the same trace) reuse the
        # subsystems' spectra: one diagonalisation of each subsystem a point, not two
        self.__dict__["_noise_bare"] = (p, _trace_state(), bare)
        h = self._composite.hamiltonian(p, bare)
        return eigh_k(h, k, dressed_structure(h.shape[-1]))

    def _bare(self, p: Params) -> Bare:
        """The subsystems' spectra at `p`: those `_noise_eigensys` computed at this `p` in
        this trace, else computed here."""
        found = self.__dict__.pop("_noise_bare", None)  # not kept: no tracer outlives it
        if found is not None and found[0] is p and found[1] == _trace_state():
            return found[2]
        return self._composite.bare(p)

    def _noise_operator(self, op: Any, method: str = "t1") -> Any:
        if isinstance(op, HierarchyOperator):
            return op
        return self._hd_operator(self._hd_expression(op, method))

    def _parameter_derivative(self, name: str) -> Any:
        cache = self.__dict__.setdefault("_parameter_derivatives", {})
        if name not in cache:
            symbol = next(s for s in self._hd_hamiltonian.free_symbols if s.name == name)
            cache[name] = self._hd_operator(sympy.expand(self._hd_hamiltonian.diff(symbol)))
        return cache[name]

    def _custom_elements(self, op: Any, method: str) -> Callable[[Params, Any], list[Any]]:
        """`NoiseMethods._custom`'s elements, of this model's operators."""
        return elements(self._bare, (self._noise_operator(op, method),))
