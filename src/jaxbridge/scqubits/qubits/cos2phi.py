"""`Cos2PhiQubit`: the Hamiltonian in phi and zeta oscillators times the theta charges, and noise.

`phi` and `zeta` are harmonic oscillators of lengths `(2 ECJ' / EL')^(1/4)` and
`(4 EC / EL')^(1/4)` (the primes: scqubits' disorder-renormalised energies), `theta` a charge
basis, as scqubits 4.3's `cos2phi_qubit.py`. The junction terms are `spectral` in `phi`, so
every length stays a JAX value; the phase operators depend on the lengths and are
`Spec.operators`, while scqubits' theta operators are parameter-free (`FIXED_OPERATORS`).
scqubits' own noise methods of this class are reproduced part for part (`Part.fixed_t`,
`Part.q_one_arg`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._params import read_defaults
from .._spec import (
    Spec,
    Wave,
    as_complex,
    charge_waves,
    dense,
    grid_points,
    hermite_functions,
    kron,
    ladder,
)
from .._terms import Params, Spectral, Terms, fixed, spectral
from ..noise._channel import (
    A_CC,
    A_FLUX,
    A_NG,
    Channel,
    Part,
    ec,
    sig_capacitive,
    sig_inductive,
    table,
    tphi,
)

FIXED_OPERATORS = ("n_theta_operator", "cos_theta_operator", "sin_theta_operator")
"""The `*_operator` methods that are parameter-free matrices (the others depend on lengths)."""


@dataclasses.dataclass(frozen=True)
class _Basis:
    """The per-variable matrices both the Hamiltonian and the noise operators are made of."""

    xphi: np.ndarray
    pphi: np.ndarray
    xzeta: np.ndarray
    pzeta: np.ndarray
    iphi: np.ndarray
    izeta: np.ndarray
    itheta: np.ndarray
    ntheta: np.ndarray
    junction: Spectral  # f(x_phi) cos(theta), f given by the coefficients
    disorder: Spectral  # f(x_phi) sin(theta)
    xs: np.ndarray  # the eigenvalues of x_phi, where the coefficients evaluate f


def _basis(obj: Any) -> _Basis:
    dphi, dzeta, dtheta = int(obj.phi_cut), int(obj.zeta_cut), 2 * int(obj.ncut) + 1
    xphi, pphi = ladder(dphi)
    xzeta, pzeta = ladder(dzeta)
    izeta = np.eye(dzeta)
    cos_theta, sin_theta = dense(obj._cos_theta_operator()), dense(obj._sin_theta_operator())
    junction, xs = spectral(xphi, right=np.kron(izeta, cos_theta))
    disorder, _ = spectral(xphi, right=np.kron(izeta, sin_theta))
    return _Basis(
        xphi,
        pphi,
        xzeta,
        pzeta,
        np.eye(dphi),
        izeta,
        np.eye(dtheta),
        dense(obj._n_theta_operator()),
        junction,
        disorder,
        xs,
    )


def _lengths(p: Params) -> tuple[Any, Any, Any, Any]:
    """`EL'`, `ECJ'` and the oscillator lengths of phi and zeta."""
    el = p["EL"] / (1 - p["dL"] ** 2)
    ecj = p["ECJ"] / (1 - p["dCJ"] ** 2)
    return el, ecj, (2 * ecj / el) ** 0.25, (4 * p["EC"] / el) ** 0.25


def spec(obj: Any) -> Spec:
    """A `scqubits.Cos2PhiQubit`'s `Spec`: `EJ`, `ECJ`, `EL`, `EC`, the disorders, `flux`, `ng`."""
    b = _basis(obj)
    dphi, dzeta = b.iphi.shape[0], b.izeta.shape[0]
    iphi, izeta, itheta, ntheta = b.iphi, b.izeta, b.itheta, b.ntheta
    ops = [
        fixed(kron(np.diag(np.arange(dphi * 1.0)), izeta, itheta)),
        fixed(kron(iphi, np.diag(np.arange(dzeta * 1.0)), itheta)),
        fixed(kron(iphi, izeta, ntheta @ ntheta)),
        fixed(kron(iphi, izeta, itheta)),
        fixed(kron(iphi, b.pzeta @ b.pzeta, itheta)),
        fixed(kron(iphi, izeta, ntheta)),
        fixed(kron(iphi, b.pzeta, itheta)),
        fixed(kron(iphi, b.pzeta, ntheta)),
        b.junction,
        fixed(kron(b.xphi, b.xzeta, itheta)),
        b.disorder,
        fixed(kron(b.pphi, izeta, ntheta)),
        fixed(kron(b.pphi, izeta, itheta)),
        fixed(kron(b.pphi, b.pzeta, itheta)),
    ]

    def c(p: Params) -> list[Any]:
        el, ecj, lphi, lzeta = _lengths(p)
        ng, ej, angle = p["ng"], p["EJ"], lphi * b.xs + jnp.pi * p["flux"]
        dc = -4 * ecj * p["dCJ"] / lphi
        return [
            jnp.sqrt(8.0 * el * ecj),
            jnp.sqrt(16.0 * p["EC"] * el),
            2 * ecj,
            2 * ecj * ng**2 + 2 * ej,
            2 * ecj / lzeta**2,
            -4 * ecj * ng,
            4 * ecj * ng / lzeta,
            -4 * ecj / lzeta,
            -2 * ej * jnp.cos(angle),
            -2 * el * p["dL"] * lphi * lzeta,
            2 * ej * p["dEJ"] * jnp.sin(angle),
            dc,
            -dc * ng,
            -dc / lzeta,
        ]

    def scaled(op: Any, which: int, power: int) -> Terms:
        return Terms([fixed(op)], lambda p: [_lengths(p)[which] ** power])

    operators = {
        "phi_operator": scaled(kron(b.xphi, izeta, itheta), 2, 1),
        "n_phi_operator": scaled(kron(b.pphi, izeta, itheta), 2, -1),
        "zeta_operator": scaled(kron(iphi, b.xzeta, itheta), 3, 1),
        "n_zeta_operator": scaled(kron(iphi, b.pzeta, itheta), 3, -1),
        "phi_1_operator": _phi_k(b, 1.0),
        "phi_2_operator": _phi_k(b, -1.0),
        "n_1_operator": _n_k(b, 1.0),
        "n_2_operator": _n_k(b, -1.0),
    }
    names = ("EJ", "ECJ", "EL", "EC", "dCJ", "dL", "dEJ", "flux", "ng")
    terms = Terms(ops, c)
    defaults = read_defaults(obj, names)
    wave = _wave(obj)
    return Spec(defaults, terms, operators, fixed_operators=False, kind="Cos2PhiQubit", wave=wave)


def _wave(obj: Any) -> Wave:
    """scqubits' `Cos2PhiQubit.wavefunction`: `sum c_ijk psi_i(phi) psi_j(zeta) e^{-i n_k theta}
    / sqrt(2 pi)` on `(phi, zeta, theta)` grids (no phase standardized, as scqubits'); the
    potential `EL' (phi^2 + zeta^2) - 2 EJ cos(theta) cos(phi + pi flux)
    + 2 dEJ EJ sin(phi + pi flux) sin(theta)`."""
    dphi, dzeta, ncut = int(obj.phi_cut), int(obj.zeta_cut), int(obj.ncut)

    def amplitudes(p: Params, vector: Any, which: int, points: tuple[Any, ...]) -> Any:
        _, _, lphi, lzeta = _lengths(p)
        hphi = as_complex(hermite_functions(dphi, points[0], lphi))
        hzeta = as_complex(hermite_functions(dzeta, points[1], lzeta))
        theta = charge_waves(ncut, points[2], sign=-1.0)
        state = as_complex(vector).reshape(dphi, dzeta, 2 * ncut + 1)
        return jnp.einsum("ijk,ix,jy,kz->xyz", state, hphi, hzeta, theta)

    def potential(p: Params, phi: Any, zeta: Any, theta: Any) -> Any:
        el, angle, ej = _lengths(p)[0], phi + jnp.pi * p["flux"], p["EJ"]
        return (
            el * phi * phi
            + el * zeta * zeta
            - 2 * ej * jnp.cos(theta) * jnp.cos(angle)
            + 2 * p["dEJ"] * ej * jnp.sin(angle) * jnp.sin(theta)
        )

    grids = tuple(
        (f"{name}_grid", grid_points(getattr(obj, f"_default_{name}_grid")))
        for name in ("phi", "zeta", "theta")
    )
    return Wave(grids, amplitudes, ("phi", "zeta", "theta"), potential)


def _big(b: _Basis) -> dict[str, Any]:
    """The phase and charge operators of phi, zeta and theta on the whole space."""
    iphi, izeta, itheta = b.iphi, b.izeta, b.itheta
    return {
        "xphi": kron(b.xphi, izeta, itheta),
        "xzeta": kron(iphi, b.xzeta, itheta),
        "pphi": kron(b.pphi, izeta, itheta),
        "pzeta": kron(iphi, b.pzeta, itheta),
        "ntheta": kron(iphi, izeta, b.ntheta),
    }


def _n_k(b: _Basis, sign: float) -> Terms:
    """scqubits' `n_1_operator` (sign +1) and `n_2_operator` (-1):
    `0.5 n_phi +- 0.5 (n_theta - n_zeta)`."""
    big = _big(b)

    def c(p: Params) -> list[Any]:
        _, _, lphi, lzeta = _lengths(p)
        return [0.5 / lphi, 0.5 * sign, -0.5 * sign / lzeta]

    return Terms([fixed(big["pphi"]), fixed(big["ntheta"]), fixed(big["pzeta"])], c)


def _phi_k(b: _Basis, sign: float) -> Terms:
    """scqubits' `phi_1_operator` (sign +1) and `phi_2_operator` (-1): `+-zeta - phi`."""
    big = _big(b)

    def c(p: Params) -> list[Any]:
        _, _, lphi, lzeta = _lengths(p)
        return [-lphi, sign * lzeta]

    return Terms([fixed(big["xphi"]), fixed(big["xzeta"])], c)


def channels(obj: Any) -> dict[str, Channel]:
    """A `scqubits.Cos2PhiQubit`'s noise channels, by scqubits' method names."""
    b = _basis(obj)
    iphi, izeta, itheta = b.iphi, b.izeta, b.itheta
    big_pphi, big_pzeta = kron(b.pphi, izeta, itheta), kron(iphi, b.pzeta, itheta)
    big_ntheta, identity = kron(iphi, izeta, b.ntheta), kron(iphi, izeta, itheta)

    def d_flux(p: Params) -> list[Any]:
        _, _, lphi, _ = _lengths(p)
        angle, ej = lphi * b.xs + jnp.pi * p["flux"], p["EJ"]
        return [2 * jnp.pi * ej * jnp.sin(angle), 2 * jnp.pi * p["dEJ"] * ej * jnp.cos(angle)]

    def d_ej(p: Params) -> list[Any]:
        _, _, lphi, _ = _lengths(p)
        angle = lphi * b.xs + jnp.pi * p["flux"]
        return [-2 * jnp.cos(angle), 2 * p["dEJ"] * jnp.sin(angle)]

    def d_ng(p: Params) -> list[Any]:
        _, ecj, lphi, lzeta = _lengths(p)
        return [4 * p["dCJ"] * ecj / lphi, -4 * ecj, 4 * ecj * p["ng"], 4 * ecj / lzeta]

    ops = [fixed(big_pphi), fixed(big_ntheta), fixed(identity), fixed(big_pzeta)]

    n_k = lambda sign: _n_k(b, sign)  # noqa: E731
    phi_k = lambda sign: _phi_k(b, sign)  # noqa: E731

    def scaled(name: str, factor: float) -> Callable[[Params], Any]:
        other = "dCJ" if name == "ECJ" else "dL"
        return lambda p: p[name] / (1 + factor * p[other])

    cap = (Part(n_k(1.0), "capacitive", scaled("ECJ", -1.0), True, True),
           Part(n_k(-1.0), "capacitive", scaled("ECJ", 1.0), True, True))  # fmt: skip
    ind = (Part(phi_k(1.0), "inductive", scaled("EL", -1.0), True, True),
           Part(phi_k(-1.0), "inductive", scaled("EL", 1.0), True, True))  # fmt: skip
    n_zeta = Terms([fixed(big_pzeta)], lambda p: [1.0 / _lengths(p)[3]])
    purcell = (Part(n_zeta, "capacitive", ec, True, True),)
    junctions = [b.junction, b.disorder]
    return table(
        tphi("tphi_1_over_f_cc", A_CC, Terms(junctions, d_ej)),
        tphi("tphi_1_over_f_flux", A_FLUX, Terms(junctions, d_flux)),
        tphi("tphi_1_over_f_ng", A_NG, Terms(ops, d_ng)),
        Channel("t1_capacitive", "t1", sig_capacitive(()), cap),
        Channel("t1_inductive", "t1", sig_inductive(()), ind),
        Channel("t1_purcell", "t1", sig_capacitive(()), purcell),
    )
