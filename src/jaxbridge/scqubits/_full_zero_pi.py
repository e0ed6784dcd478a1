"""`FullZeroPi`: the ZeroPi's lowest states coupled to the zeta oscillator, in JAX.

scqubits 4.3.1's `zeropi_full.py` diagonalises its inner `ZeroPi` (`zeropi_cutoff` levels) and
builds, in the product basis of those states and `zeta_cutoff` Fock states,

    H = diag(E_l) x 1 + 1 x E_zeta a^dag a + G x a + G^dag x a^dag,
    G = EL dEL/2 (8 EC/EL)^(1/4) <l|phi|l'> + i ECS dC/2 (32 EL/EC)^(1/4) <l|n_theta|l'>,

with `E_zeta = sqrt(8 EL EC)` and `ECS = 1 / (1/EC + 1/ECJ)`. Here the inner ZeroPi is this
package's `Model` (its Hamiltonian a JAX function of the parameters), so the whole chain, the
inner diagonalisation included, is differentiable. The product basis depends on the inner
states' phases: scqubits keeps its sparse solver's, `ProductBasis` fixes them by a smooth rule
of its own. The spectrum and `|<i|O|j>|` between eigenstates do not depend on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _errors, _params
from ._eigen import eigh_k
from ._model import Model
from ._spec import dense
from ._terms import complex_of
from .noise._full_zero_pi_noise import FullZeroPiNoise
from .qubits import zero_pi

ParamsArg = Mapping[str, Any] | None

OPERATORS = ("phi_operator", "n_theta_operator", "i_d_dphi_operator")
"""The inner ZeroPi's operators, in the product basis (`kron(<l|O|l'>, 1)`), by name."""


class ProductBasis:
    """A FullZeroPi's product basis and its Hamiltonian there, at one parameter point.

    The basis is the inner ZeroPi's `zeropi_cutoff` lowest states times the zeta oscillator's
    `zeta_cutoff` Fock states. Each inner state's phase is fixed by a smooth rule: its overlap
    with a fixed random vector is real and positive. Any rule gives the same spectrum; a
    smooth one also gives the same basis wherever the inner states are computed twice (the
    Hamiltonian and each operator of a `HilbertSpace` term are separate functions of the
    params), where a rule that picks a component could choose differently on the last bit.
    Used by `FullZeroPiModel` and by a FullZeroPi inside a `HilbertSpace` model.

    Attributes:
        inner: the inner ZeroPi's `Model`.
        params: the inner ZeroPi's parameters and `dC`, `dEL`, with the object's values.
        levels, zeta: `zeropi_cutoff`, `zeta_cutoff`.
        dim: `levels * zeta`.
    """

    def __init__(self, obj: Any) -> None:
        inner = obj._zeropi  # scqubits' own inner ZeroPi (its grid, ncut and parameters)
        self.inner = Model(inner, zero_pi.spec(inner))
        self.levels, self.zeta = int(obj.zeropi_cutoff), int(obj.zeta_cutoff)
        self.params: dict[str, float] = {
            **self.inner.params,
            **_params.read_defaults(obj, ("dC", "dEL")),
        }
        self.dim = self.levels * self.zeta
        self.operators = {name: dense(getattr(inner, name)()) for name in OPERATORS}
        n = self.inner.dim
        rng = np.random.default_rng(20260)
        self._reference = (rng.standard_normal(n) + 1j * rng.standard_normal(n)) / np.sqrt(2 * n)

    def inner_states(self, p: Mapping[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
        """The inner ZeroPi's kept levels and states (complex, phases fixed) at one point."""
        h = self.inner.hamiltonian({name: p[name] for name in self.inner.params})
        w, v = eigh_k(h, self.levels)
        cdtype = complex_of(w.dtype)
        v = v.astype(cdtype)
        c = jnp.asarray(self._reference.conj(), cdtype) @ v
        # |c| is about 1/sqrt(n) for a random reference; the floor only keeps 0 finite.
        size = jnp.sqrt(jnp.real(c) ** 2 + jnp.imag(c) ** 2 + jnp.finfo(w.dtype).tiny)
        return w, v * (jnp.conj(c) / size.astype(cdtype))[None, :]

    def elements(self, v: jax.Array, name: str) -> jax.Array:
        """`<l|O|l'>` of an inner operator between the inner states `v`."""
        return v.conj().T @ jnp.asarray(self.operators[name], v.dtype) @ v

    def operator(self, v: jax.Array, name: str) -> jax.Array:
        """An inner operator in the product basis, `kron(<l|O|l'>, 1_zeta)`."""
        return jnp.kron(self.elements(v, name), jnp.eye(self.zeta, dtype=v.dtype))

    def hamiltonian(
        self, p: Mapping[str, jax.Array], states: tuple[jax.Array, jax.Array] | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """The product-basis Hamiltonian at one point, and the inner states it is built on
        (`states`, `inner_states(p)` where None)."""
        w, v = self.inner_states(p) if states is None else states
        cdtype = v.dtype
        el, ec, ecj = p["EL"], p["EC"], p["ECJ"]
        ecs = 1.0 / (1.0 / ec + 1.0 / ecj)
        g_phi = el * (p["dEL"] / 2.0) * (8.0 * ec / el) ** 0.25
        g_theta = ecs * (p["dC"] / 2.0) * (32.0 * el / ec) ** 0.25
        phi = self.elements(v, "phi_operator")
        n_theta = self.elements(v, "n_theta_operator")
        i_g_theta = jax.lax.complex(jnp.zeros_like(g_theta), g_theta)
        g = g_phi.astype(cdtype) * phi + i_g_theta * n_theta
        a = jnp.asarray(np.diag(np.sqrt(np.arange(1.0, self.zeta)), k=1), cdtype)
        e_zeta = jnp.sqrt(8.0 * el * ec)
        levels = jnp.diag(w).astype(cdtype)
        number = jnp.diag(jnp.arange(self.zeta, dtype=w.dtype) * e_zeta).astype(cdtype)
        one_l, one_z = jnp.eye(self.levels, dtype=cdtype), jnp.eye(self.zeta, dtype=cdtype)
        h_full = (
            jnp.kron(levels, one_z)
            + jnp.kron(one_l, number)
            + jnp.kron(g, a)
            + jnp.kron(g.conj().T, a.T)
        )
        return h_full, v


class FullZeroPiModel(FullZeroPiNoise):
    """JAX functions of a `scqubits.FullZeroPi`'s parameters.

    Made by `jaxbridge.scqubits.model(obj)`. Its parameters are the inner ZeroPi's (`EJ`,
    `EL`, `ECJ`, `EC`, `dEJ`, `dCJ`, `ng`, `flux`) and the disorders `dC`, `dEL`; the grid,
    `ncut`, `zeropi_cutoff` and `zeta_cutoff` are static. Every method works under `jit`,
    `vmap` and `grad` (float64 needs x64). The noise methods are scqubits' FullZeroPi
    channels (`tphi_1_over_f_cc`, `tphi_1_over_f_flux`, `t1_flux_bias_line`, `t1_inductive`),
    the generic `t1`, `tphi_1_over_f`, `transition_energy_derivative`, `t1_effective` and
    `t2_effective` (`_full_zero_pi_noise.py`), without `esys=`.

    Attributes:
        params: the parameters and the object's values.
        dim: `zeropi_cutoff * zeta_cutoff` (scqubits' `hilbertdim()`).
    """

    def __init__(self, obj: Any) -> None:
        self._obj, self._zp = obj, obj._zeropi
        self._basis = ProductBasis(obj)
        self._spec = SimpleNamespace(kind="FullZeroPi", channels_fn=self._fzp_channels)
        self._inner = self._basis.inner
        self._levels, self._zeta = self._basis.levels, self._basis.zeta
        self.params: dict[str, float] = dict(self._basis.params)
        self.dim: int = self._basis.dim
        self._compiled = jax.jit(self._evaluate, static_argnames=("what", "k", "name"))

    def __repr__(self) -> str:
        return f"jaxbridge.scqubits.FullZeroPiModel(dim={self.dim}, params={self.params})"

    def _values(self, params: ParamsArg, method: str) -> dict[str, jax.Array]:
        def unknown(names: list[str]) -> str:
            return _errors.UNKNOWN_PARAM.format(
                method=method, names=names, kind="FullZeroPi", known=sorted(self.params)
            )

        return _params.values(params, self.params, unknown)

    def _count(self, evals_count: Any, method: str) -> int:
        return _params.evals_count(
            evals_count, self.dim, _errors.EVALS_COUNT, method=method, minus=""
        )

    def _product(self, p: Mapping[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
        """The product-basis Hamiltonian at one point, and the inner ZeroPi's kept states."""
        return self._basis.hamiltonian(p)

    def _evaluate(self, values: dict[str, jax.Array], *, what: str, k: int, name: str) -> Any:
        def one(p: dict[str, jax.Array]) -> Any:
            h, v = self._product(p)
            if what == "hamiltonian":
                return h
            if what == "d_hamiltonian":  # scqubits': the inner derivative in the product basis
                inner = {n: p[n] for n in self._inner.params}
                d = self._inner.d_hamiltonian(name, inner).astype(v.dtype)
                return jnp.kron(v.conj().T @ d @ v, jnp.eye(self._zeta, dtype=v.dtype))
            w, u = eigh_k(h, k)
            if what == "eigenvals":
                return w
            if what == "eigensys":
                return w, u
            return u.conj().T @ self._basis.operator(v, name) @ u

        return _params.map_batch(one, values)

    def hamiltonian(self, params: ParamsArg = None) -> jax.Array:
        """The Hamiltonian in the product basis (inner ZeroPi states x zeta Fock states),
        `(*batch, dim, dim)`, complex; equal to scqubits' `hamiltonian()` up to the inner
        states' phases (the model's fixed by `ProductBasis`' rule, scqubits' its solver's)."""
        values = self._values(params, "hamiltonian")
        return self._compiled(values, what="hamiltonian", k=0, name="")

    def d_hamiltonian(self, name: str, params: ParamsArg = None) -> jax.Array:
        """The inner ZeroPi's derivative in the product basis, `kron(<l|dH/dname|l'>, 1)`,
        `(*batch, dim, dim)`: scqubits' construction of `d_hamiltonian_d_<name>`.

        The inner derivative is the ZeroPi model's exact `d_hamiltonian` (equal to scqubits'
        `d_hamiltonian_d_flux`; scqubits' `d_hamiltonian_d_EJ` drops the constant `2` of `2 EJ`
        and the `dEJ` term, its `d_hamiltonian_d_ng` uses `EC` for `ECS`). It is not the
        derivative of `hamiltonian`, whose basis (the inner states) moves with the parameters;
        `jax.grad` of `eigenvals` is the exact derivative of the levels.

        Raises:
            ValueError: `name` is not one of the inner ZeroPi's parameters.
        """
        if name not in self._inner.params:
            raise ValueError(
                _errors.FULL_ZERO_PI_D_HAMILTONIAN.format(
                    name=name, known=sorted(self._inner.params)
                )
            )
        values = self._values(params, "d_hamiltonian")
        return self._compiled(values, what="d_hamiltonian", k=0, name=name)

    def eigenvals(self, params: ParamsArg = None, evals_count: int = 6) -> jax.Array:
        """The `evals_count` lowest levels, `(*batch, evals_count)`, equal to scqubits'
        `eigenvals(evals_count)` of an object made at those params.

        Example:
            >>> import scqubits, jaxbridge.scqubits as jbq
            >>> obj = scqubits.FullZeroPi(grid=scqubits.Grid1d(-6.0, 6.0, 20), EJ=10.0,
            ...     EL=0.04, ECJ=20.0, EC=0.04, dEJ=0.05, dCJ=0.05, dC=0.08, dEL=0.05, ng=0.1,
            ...     flux=0.23, ncut=4, zeta_cutoff=4, zeropi_cutoff=4)
            >>> jbq.model(obj).eigenvals(evals_count=3).shape
            (3,)
        """
        k = self._count(evals_count, "eigenvals")
        return self._compiled(self._values(params, "eigenvals"), what="eigenvals", k=k, name="")

    def eigensys(
        self, params: ParamsArg = None, evals_count: int = 6
    ) -> tuple[jax.Array, jax.Array]:
        """The lowest levels and their states in the product basis, `(*batch, k)` and
        `(*batch, dim, k)` (the states up to the inner states' phases)."""
        k = self._count(evals_count, "eigensys")
        return self._compiled(self._values(params, "eigensys"), what="eigensys", k=k, name="")

    def matrixelements(
        self, operator: str, params: ParamsArg = None, evals_count: int = 6
    ) -> jax.Array:
        """`<i|O|j>` between the lowest `evals_count` eigenstates, `O` the inner ZeroPi's
        `phi_operator`, `n_theta_operator` or `i_d_dphi_operator` (scqubits' FullZeroPi
        operators), `(*batch, k, k)`; `|<i|O|j>|` is gauge-invariant.

        Raises:
            ValueError: another operator name.
        """
        if operator not in OPERATORS:
            known = list(OPERATORS)
            raise ValueError(_errors.FULL_ZERO_PI_OPERATOR.format(known=known, name=operator))
        k = self._count(evals_count, "matrixelements")
        values = self._values(params, "matrixelements")
        return self._compiled(values, what="matrixelements", k=k, name=operator)
