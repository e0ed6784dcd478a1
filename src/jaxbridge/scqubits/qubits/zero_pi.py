"""`ZeroPi`: the Hamiltonian on scqubits' phi grid times the theta charge basis, and the noise.

The operators are sparse Kronecker products of the `phi` grid's derivative matrices (read from
the object's `grid`) and the theta charges, as scqubits 4.3's `zeropi.py`;
`cos(phi - pi flux)` and `sin(phi - pi flux)` are expanded into fixed operators so that only
their coefficients depend on `flux`.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sparse

from .._params import read_defaults
from .._spec import (
    Spec,
    Wave,
    as_complex,
    charge_waves,
    dense,
    grid_points,
    kron,
    standardize_phases,
)
from .._terms import Params, Terms, fixed
from ..noise._channel import (
    A_CC,
    A_FLUX,
    Channel,
    Part,
    el,
    one,
    sig_flux_bias_line,
    sig_inductive,
    table,
    tphi,
)


def spec(obj: Any) -> Spec:
    """A `scqubits.ZeroPi`'s `Spec`: `EJ`, `EL`, `ECJ`, `EC`, `dEJ`, `dCJ`, `ng`, `flux`."""
    grid = obj.grid
    phi = grid.make_linspace()
    dim_theta = 2 * int(obj.ncut) + 1
    one_phi, one_theta = sparse.identity(grid.pt_count), sparse.identity(dim_theta)
    n = sparse.diags(np.arange(-obj.ncut, obj.ncut + 1.0))
    shifts = np.eye(dim_theta, k=-1) + np.eye(dim_theta, k=1)
    sin_theta = dense(obj._sin_theta_operator())
    cos_phi, sin_phi = sparse.diags(np.cos(phi)), sparse.diags(np.sin(phi))
    ops = [
        fixed(kron(grid.second_derivative_matrix(prefactor=1.0), one_theta)),
        fixed(kron(one_phi, n @ n)),
        fixed(kron(one_phi, n)),
        fixed(kron(one_phi, one_theta)),
        fixed(kron(grid.first_derivative_matrix(prefactor=1j), n)),
        fixed(kron(cos_phi, shifts)),
        fixed(kron(sin_phi, shifts)),
        fixed(kron(sparse.diags(phi**2), one_theta)),
        fixed(kron(sin_phi, sin_theta)),
        fixed(kron(cos_phi, sin_theta)),
    ]

    def c(p: Params) -> list[Any]:
        ecs = 1.0 / (1.0 / p["EC"] + 1.0 / p["ECJ"])
        ej, ng, half = p["EJ"], p["ng"], jnp.pi * p["flux"]
        # cos(phi - pi flux) and sin(phi - pi flux), expanded into fixed operators.
        return [
            -2.0 * p["ECJ"],
            2.0 * ecs,
            4.0 * ecs * ng,
            2.0 * ecs * ng**2 + 2.0 * ej,
            -2.0 * ecs * p["dCJ"],
            -ej * jnp.cos(half),
            -ej * jnp.sin(half),
            p["EL"],
            ej * p["dEJ"] * jnp.cos(half),
            -ej * p["dEJ"] * jnp.sin(half),
        ]

    names = ("EJ", "EL", "ECJ", "EC", "dEJ", "dCJ", "ng", "flux")
    return Spec(read_defaults(obj, names), Terms(ops, c), kind="ZeroPi", wave=_wave(obj))


def _wave(obj: Any) -> Wave:
    """scqubits' `ZeroPi.wavefunction`: the theta charges Fourier-summed on `theta_grid`, the
    object's `phi` grid kept, `(theta, phi)` amplitudes with scqubits' standardized phase; the
    potential of `ZeroPi.potential(phi, theta)`."""
    ncut, count = int(obj.ncut), int(obj.grid.pt_count)

    def amplitudes(p: Params, vector: Any, which: int, points: tuple[Any, ...]) -> Any:
        state = as_complex(vector).reshape(count, 2 * ncut + 1)
        return standardize_phases((state @ charge_waves(ncut, points[0])).T)

    def potential(p: Params, phi: Any, theta: Any) -> Any:
        ej, shifted = p["EJ"], phi - jnp.pi * p["flux"]
        return (
            -2.0 * ej * jnp.cos(theta) * jnp.cos(shifted)
            + p["EL"] * phi**2
            + 2.0 * ej
            + ej * p["dEJ"] * jnp.sin(theta) * jnp.sin(shifted)
        )

    grids = (("theta_grid", grid_points(obj._default_grid)),)
    phi = (obj.grid.make_linspace(),)
    return Wave(grids, amplitudes, ("phi", "theta"), potential, fixed_labels=phi)


def channels(obj: Any) -> dict[str, Channel]:
    """A `scqubits.ZeroPi`'s noise channels, by scqubits' method names."""
    phi = obj.grid.make_linspace()
    cos_theta, sin_theta = obj._cos_theta_operator(), obj._sin_theta_operator()
    cos_phi, sin_phi = sparse.diags(np.cos(phi)), sparse.diags(np.sin(phi))
    cc, sc = kron(cos_phi, cos_theta), kron(sin_phi, cos_theta)
    cs, ss = kron(cos_phi, sin_theta), kron(sin_phi, sin_theta)

    def d_ej(p: Params) -> list[Any]:  # -2 cos(phi - pi flux) cos(theta)
        half = jnp.pi * p["flux"]
        return [-2.0 * jnp.cos(half), -2.0 * jnp.sin(half)]

    def d_flux(p: Params) -> list[Any]:
        # -2 pi EJ sin(phi - pi flux) cos(theta) - pi EJ dEJ cos(phi - pi flux) sin(theta)
        half, ej = jnp.pi * p["flux"], p["EJ"]
        a, b = -2.0 * jnp.pi * ej, -jnp.pi * ej * p["dEJ"]
        return [a * jnp.cos(half), -a * jnp.sin(half), b * jnp.cos(half), b * jnp.sin(half)]

    flux_op = Terms([fixed(sc), fixed(cc), fixed(cs), fixed(ss)], d_flux)
    return table(
        tphi("tphi_1_over_f_cc", A_CC, Terms([fixed(cc), fixed(sc)], d_ej)),
        tphi("tphi_1_over_f_flux", A_FLUX, flux_op),
        Channel(
            "t1_flux_bias_line", "t1", sig_flux_bias_line(), (Part(flux_op, "flux_bias_line"),)
        ),  # fmt: skip
        Channel(
            "t1_inductive",
            "t1",
            sig_inductive(),
            (Part(one(obj.phi_operator()), "inductive", el),),
        ),  # fmt: skip
    )
