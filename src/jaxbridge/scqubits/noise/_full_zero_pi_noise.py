"""A `FullZeroPi`'s noise channels, on `NoiseMethods` and the channel `Engine`.

scqubits 4.3.1's `FullZeroPi` takes its channels from `NoisySystem` with its own operators:
`d_hamiltonian_d_flux` (`tphi_1_over_f_flux`, `t1_flux_bias_line`), `d_hamiltonian_d_EJ`
(`tphi_1_over_f_cc`) and `phi_operator` (`t1_inductive`, with `EL`), each the inner ZeroPi's
operator in the product basis, `kron(<l|O|l'>, 1_zeta)`, `|l>` the inner ZeroPi's kept states.
Here the table is the ZeroPi's (`qubits.zero_pi.channels`, the same operators as scqubits'
ZeroPi, its `d_hamiltonian_d_EJ` included, so the rates equal scqubits'), each operator wrapped
as an `InnerOperator`: evaluated at a parameter point with the inner states diagonalised there,
so each matrix element is a JAX function of the parameters. The rates are `Engine`'s, from the
full eigensystem and `u^H O u`; only the phase-independent `Re <i|O|i>` and `|<i|O|j>|^2`
enter them.

The product basis is made of the inner states, whose phases are this model's (scqubits' are
its own, arbitrary ones): an eigensystem (`esys=`) or an operator matrix from scqubits has no
meaning here and is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from .._eigen import eigh_k
from .._terms import Params, Terms
from ..qubits import zero_pi
from ._channel import Channel, one
from ._noise import NoiseMethods
from ._rates import Engine

FZP_ESYS = (
    "`FullZeroPiModel.{method}`: `esys` is not accepted: the product basis is made of the "
    "inner ZeroPi's eigenvectors, whose phases are this model's, not those of the given "
    "eigenvectors (scqubits' are its own). Pass `params` instead (one diagonalisation serves "
    "every channel of a call)."
)
FZP_NOISE_OPERATOR = (
    "`FullZeroPiModel.{method}`: the noise operator must be one of scqubits' FullZeroPi "
    "operator names {known} (or that bound method of the scqubits object); got {got}. A "
    "fixed matrix has no meaning here: the product basis is made of the inner ZeroPi's "
    "eigenvectors, whose phases are this model's, not scqubits'."
)
FZP_DERIVATIVE = (
    "`FullZeroPiModel.transition_energy_derivative`: `hamiltonian_derivative={name!r}`: only "
    "the inner ZeroPi's parameters {known} have a derivative operator (scqubits' "
    "construction, as `d_hamiltonian`); `dC` and `dEL` have none. Use `jax.grad` of "
    "`eigenvals` for the exact derivative of the levels."
)


class InnerOperator:
    """An inner ZeroPi operator in the product basis: `kron(v^H O(p) v, 1_zeta)`.

    Args:
        terms: the inner operator (`Terms` of the inner ZeroPi's parameters).
        label: its name (for messages).
    """

    def __init__(self, terms: Terms, label: str) -> None:
        self.terms = terms
        self.label = label

    def matrix(self, p: Params, v: jax.Array, zeta: int) -> jax.Array:
        """The `(dim, dim)` matrix at `p`, `v` the inner ZeroPi's kept states there."""
        o = self.terms.dense(p).astype(v.dtype)
        return jnp.kron(v.conj().T @ o @ v, jnp.eye(zeta, dtype=v.dtype))

    def __call__(self) -> None:  # callable: `_rates.is_static` keeps it in a plan's key
        raise TypeError(f"`{self.label}` is evaluated by `FullZeroPiModel`'s noise methods")


Product = Callable[[Params], tuple[jax.Array, jax.Array]]


def elements(
    product: Product, zeta: int, ops: Sequence[InnerOperator]
) -> Callable[[Params, jax.Array], list[jax.Array]]:
    """`(p, u) -> [u^H O(p) u for O in ops]`, the inner states diagonalised once for all."""

    def evaluate(p: Params, u: jax.Array) -> list[jax.Array]:
        v = product(p)[1]
        u = u.astype(v.dtype)
        return [u.conj().T @ op.matrix(p, v, zeta) @ u for op in ops]

    return evaluate


class _Engine(Engine):
    """`Engine` with a FullZeroPi's operators (`InnerOperator`s)."""

    def __init__(self, channel: Callable, eigensys: Callable, product: Product, zeta: int):
        super().__init__(channel, eigensys)
        self.product, self.zeta = product, zeta

    def elements(self, ops: Sequence[Any]) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        return elements(self.product, self.zeta, ops)


class FullZeroPiNoise(NoiseMethods):
    """`NoiseMethods` of a `FullZeroPi` (a base class of `FullZeroPiModel`).

    The model provides `_obj` (the FullZeroPi), `_spec` (`kind`, `channels_fn`), `_zp` (the
    inner scqubits ZeroPi), `_inner` (its `Model`), `_zeta`, `_product(p)`, `dim`, `params`
    and `_values`.
    """

    _zp: Any
    _inner: Any
    _zeta: int
    params: dict[str, float]

    def _product(self, p: Params) -> tuple[jax.Array, jax.Array]:
        raise NotImplementedError

    def _wrapped(self) -> dict[str, InnerOperator]:
        """The named operators, each wrapped once (a channel and a `noise_op=` share it)."""
        found = self.__dict__.get("_fzp_operators")
        if found is None:
            inner = zero_pi.channels(self._zp)
            flux = inner["tphi_1_over_f_flux"].operator
            cc = inner["tphi_1_over_f_cc"].operator
            assert flux is not None and cc is not None
            found = {
                "d_hamiltonian_d_flux": InnerOperator(flux, "d_hamiltonian_d_flux"),
                "d_hamiltonian_d_EJ": InnerOperator(cc, "d_hamiltonian_d_EJ"),
            }
            for name in ("phi_operator", "n_theta_operator", "i_d_dphi_operator"):
                found[name] = InnerOperator(one(getattr(self._zp, name)()), name)
            self.__dict__["_fzp_operators"] = found
        return found

    def _fzp_channels(self) -> dict[str, Channel]:
        """scqubits' FullZeroPi channels: the ZeroPi's, their operators in the product
        basis."""
        ops = self._wrapped()
        out: dict[str, Channel] = {}
        for name, ch in zero_pi.channels(self._zp).items():
            if ch.kind == "tphi":
                label = "d_hamiltonian_d_flux" if "flux" in name else "d_hamiltonian_d_EJ"
                out[name] = dataclasses.replace(ch, operator=ops[label])  # pyright: ignore[reportArgumentType]
            else:
                label = "phi_operator" if name == "t1_inductive" else "d_hamiltonian_d_flux"
                parts = tuple(dataclasses.replace(q, operator=ops[label]) for q in ch.parts)  # pyright: ignore[reportArgumentType]
                out[name] = dataclasses.replace(ch, parts=parts)
        return out

    def _noise_table(self) -> dict[str, Channel]:
        table = super()._noise_table()
        if not isinstance(self.__dict__["_noise_engine"], _Engine):
            engine = _Engine(self._channel, self._noise_eigensys, self._product, self._zeta)
            self.__dict__["_noise_engine"] = engine
        return table

    def _noise_spectrum(self, ops: Any, k: int) -> None:
        return None  # the programs' JAX path: eigensystem and `elements`

    def _noise_eigensys(self, p: Params, k: int) -> tuple[jax.Array, jax.Array]:
        return eigh_k(self._product(p)[0], k)

    def _noise_operator(self, op: Any, method: str = "t1") -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        if isinstance(op, InnerOperator):
            return op
        ops = self._wrapped()
        name = op if isinstance(op, str) else None
        if callable(op) and getattr(op, "__self__", None) is self._obj:
            name = getattr(op, "__name__", None)  # scqubits' bound `noise_op_method`
        if name in ops:
            return ops[name]
        got = repr(op) if isinstance(op, str) else f"a {type(op).__name__}"
        raise ValueError(FZP_NOISE_OPERATOR.format(method=method, known=list(ops), got=got))

    def _parameter_derivative(self, name: str) -> Any:
        if name not in self._inner.params:
            known = sorted(self._inner.params)
            raise ValueError(FZP_DERIVATIVE.format(name=name, known=known))
        cache = self.__dict__.setdefault("_parameter_derivatives", {})
        if name not in cache:
            cache[name] = InnerOperator(self._inner._parameter_derivative(name), f"d/d{name}")
        return cache[name]

    def _evaluate_plan(self, plan: Any, esys: Any, get_rate: bool, params: Any, method: str) -> Any:
        if esys is not None:
            raise ValueError(FZP_ESYS.format(method=method))
        return super()._evaluate_plan(plan, esys, get_rate, params, method)

    def _custom_elements(self, op: Any, method: str) -> Callable[[Params, Any], list[Any]]:
        """`NoiseMethods._custom`'s elements, of this model's operators."""
        return elements(self._product, self._zeta, (self._noise_operator(op, method),))

    def _custom(
        self, method: str, op: Any, i: int, j: int, esys: Any, params: Any, fn: Callable
    ) -> Any:
        """`NoiseMethods._custom`, without a given `esys` (its inner phases are scqubits')."""
        if esys is not None:
            raise ValueError(FZP_ESYS.format(method=method))
        return super()._custom(method, op, i, j, esys, params, fn)
