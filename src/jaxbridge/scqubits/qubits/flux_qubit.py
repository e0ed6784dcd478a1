"""`FluxQubit`: the Hamiltonian in the two-island charge basis and the noise channels.

Three junctions, two islands: the charging energy is the inverse of the capacitance matrix of
`ECJ1..3`, `ECg1..2`, the junctions are `exp(i phi)` shifts in the charge basis, the third
carrying the flux, as scqubits 4.3's `flux_qubit.py`. scqubits gives a `FluxQubit` the 1/f
channels only: one per junction's critical current, their sum, and the flux.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from .._params import read_defaults
from .._spec import (
    Spec,
    Wave,
    as_complex,
    charge_basis,
    charge_waves,
    grid_points,
    standardize_phases,
)
from .._terms import Params, Terms, fixed
from ..noise._channel import A_CC, A_FLUX, Channel, one, sig_tphi, table, tphi


def spec(obj: Any) -> Spec:
    """A `scqubits.FluxQubit`'s `Spec`: its three junctions, two islands and `flux`."""
    ncut = int(obj.ncut)
    n, _ = charge_basis(ncut)
    e = np.eye(2 * ncut + 1, k=-1)  # scqubits' exp(i phi) in the charge basis
    identity = np.eye(2 * ncut + 1)
    e3 = np.kron(e, e.T)
    ops = [
        fixed(np.kron(n @ n, identity)),
        fixed(np.kron(n, identity)),
        fixed(np.kron(identity, n @ n)),
        fixed(np.kron(identity, n)),
        fixed(np.kron(n, n)),
        fixed(np.kron(identity, identity)),
        fixed(np.kron(e + e.T, identity)),
        fixed(np.kron(identity, e + e.T)),
        fixed(e3 + e3.T),
        fixed(1j * (e3 - e3.T)),
    ]

    def c(p: Params) -> list[Any]:
        cj1, cj2, cj3 = (1.0 / (2 * p[k]) for k in ("ECJ1", "ECJ2", "ECJ3"))
        cg1, cg2 = 1.0 / (2 * p["ECg1"]), 1.0 / (2 * p["ECg2"])
        c11, c22, c12 = cj1 + cj3 + cg1, cj2 + cj3 + cg2, -cj3
        det = c11 * c22 - c12**2
        e11, e22, e12 = c22 / det / 2, c11 / det / 2, -c12 / det / 2  # inverse(C) / 2
        g1, g2, angle = p["ng1"], p["ng2"], 2 * jnp.pi * p["flux"]
        return [
            4 * e11,
            -8 * e11 * g1 - 8 * e12 * g2,
            4 * e22,
            -8 * e22 * g2 - 8 * e12 * g1,
            8 * e12,
            4 * e11 * g1**2 + 4 * e22 * g2**2 + 8 * e12 * g1 * g2,
            -0.5 * p["EJ1"],
            -0.5 * p["EJ2"],
            -0.5 * p["EJ3"] * jnp.cos(angle),
            -0.5 * p["EJ3"] * jnp.sin(angle),
        ]

    names = ("EJ1", "EJ2", "EJ3", "ECJ1", "ECJ2", "ECJ3", "ECg1", "ECg2", "ng1", "ng2", "flux")
    return Spec(read_defaults(obj, names), Terms(ops, c), kind="FluxQubit", wave=_wave(obj))


def _wave(obj: Any) -> Wave:
    """scqubits' `FluxQubit.wavefunction`: both islands' charges Fourier-summed on one
    `phi_grid`, `(phi1, phi2)` amplitudes with scqubits' standardized phase; the potential
    `-EJ1 cos(phi1) - EJ2 cos(phi2) - EJ3 cos(2 pi flux + phi1 - phi2)`."""
    ncut = int(obj.ncut)

    def amplitudes(p: Params, vector: Any, which: int, points: tuple[Any, ...]) -> Any:
        a = charge_waves(ncut, points[0])  # (n, phi)
        state = as_complex(vector).reshape(2 * ncut + 1, 2 * ncut + 1)
        return standardize_phases(a.T @ state @ a)

    def potential(p: Params, phi1: Any, phi2: Any) -> Any:
        return (
            -p["EJ1"] * jnp.cos(phi1)
            - p["EJ2"] * jnp.cos(phi2)
            - p["EJ3"] * jnp.cos(2.0 * jnp.pi * p["flux"] + phi1 - phi2)
        )

    grids = (("phi_grid", grid_points(obj._default_grid)),)
    # scqubits' gridspec names the one phi grid twice, for phi1 and phi2.
    return Wave(grids, amplitudes, ("phi1", "phi2"), potential, label_order=(0, 0))


def channels(obj: Any) -> dict[str, Channel]:
    """A `scqubits.FluxQubit`'s noise channels, by scqubits' method names."""
    e = np.asarray(obj._exp_i_phi_operator())
    identity = np.eye(e.shape[0])
    k = np.kron(e, e.T)
    both, diff = k + k.T, 1j * (k - k.T)

    def d_ej3(p: Params) -> list[Any]:
        angle = 2 * jnp.pi * p["flux"]
        return [-0.5 * jnp.cos(angle), -0.5 * jnp.sin(angle)]

    def d_flux(p: Params) -> list[Any]:
        angle, ej3 = 2 * jnp.pi * p["flux"], p["EJ3"]
        return [jnp.pi * ej3 * jnp.sin(angle), -jnp.pi * ej3 * jnp.cos(angle)]

    members = tuple((f"tphi_1_over_f_cc{n}", {}) for n in (1, 2, 3))
    return table(
        tphi("tphi_1_over_f_cc1", A_CC, one(-0.5 * np.kron(e + e.T, identity))),
        tphi("tphi_1_over_f_cc2", A_CC, one(-0.5 * np.kron(identity, e + e.T))),
        tphi("tphi_1_over_f_cc3", A_CC, Terms([fixed(both), fixed(diff)], d_ej3)),
        Channel("tphi_1_over_f_cc", "rates", sig_tphi(A_CC), members=members, kwargs=True),
        tphi("tphi_1_over_f_flux", A_FLUX, Terms([fixed(both), fixed(diff)], d_flux)),
    )
