"""`Transmon` and `TunableTransmon`: the Hamiltonian in the charge basis and the noise channels.

`H = 4 EC (n - ng)^2 - EJ cos(phi)` on the charges `-ncut..ncut`, as scqubits 4.3's
`transmon.py`; the tunable one has `EJ = EJmax sqrt(cos^2(pi flux) + d^2 sin^2(pi flux))`. The
noise operators are scqubits' `n_operator`, `cos_phi_operator` and, for the tunable one,
`d_hamiltonian_d_flux`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._params import read_defaults
from .._spec import Spec, Wave, as_complex, charge_basis, charge_waves, dense, grid_points
from .._terms import Fixed, Params, Terms, fixed
from ..noise._channel import (
    A_CC,
    A_FLUX,
    A_NG,
    Channel,
    Part,
    ec,
    one,
    sig_capacitive,
    sig_charge_impedance,
    sig_flux_bias_line,
    table,
    tphi,
)


def _wave(obj: Any, ej: Callable[[Params], Any]) -> Wave:
    """scqubits' `Transmon.wavefunction`: `i**which / sqrt(2 pi) sum_n c_n exp(i n phi)`;
    the potential `-EJ cos(phi)` (a TunableTransmon's effective `EJ`)."""
    ncut = int(obj.ncut)

    def amplitudes(p: Params, vector: Any, which: int, points: tuple[Any, ...]) -> Any:
        return (1j**which) * (as_complex(vector) @ charge_waves(ncut, points[0]))

    return Wave(
        (("phi_grid", grid_points(obj._default_grid)),),
        amplitudes,
        ("phi",),
        lambda p, phi: -ej(p) * jnp.cos(phi),
    )


def _ej(p: Params) -> Any:
    """A TunableTransmon's effective `EJ`, `EJmax sqrt(cos^2(pi flux) + d^2 sin^2(pi flux))`."""
    angle = jnp.pi * p["flux"]
    return p["EJmax"] * jnp.sqrt(jnp.cos(angle) ** 2 + p["d"] ** 2 * jnp.sin(angle) ** 2)


def _operators(obj: Any) -> list[Fixed]:
    """`n^2`, `n`, the identity and `cos(phi)`: every Hamiltonian term is one of them."""
    n, cos = charge_basis(int(obj.ncut))
    return [fixed(n @ n), fixed(n), fixed(np.eye(n.shape[0])), fixed(cos)]


def spec(obj: Any) -> Spec:
    """A `scqubits.Transmon`'s `Spec`: parameters `EJ`, `EC`, `ng`."""

    def c(p: Params) -> list[Any]:
        e_c, ng = p["EC"], p["ng"]
        return [4 * e_c, -8 * e_c * ng, 4 * e_c * ng**2, -p["EJ"]]

    defaults = read_defaults(obj, ("EJ", "EC", "ng"))
    wave = _wave(obj, lambda p: p["EJ"])
    return Spec(defaults, Terms(_operators(obj), c), kind="Transmon", wave=wave)


def tunable_spec(obj: Any) -> Spec:
    """A `scqubits.TunableTransmon`'s `Spec`: parameters `EJmax`, `EC`, `d`, `flux`, `ng`."""

    def c(p: Params) -> list[Any]:
        e_c, ng = p["EC"], p["ng"]
        return [4 * e_c, -8 * e_c * ng, 4 * e_c * ng**2, -_ej(p)]

    defaults = read_defaults(obj, ("EJmax", "EC", "d", "flux", "ng"))
    terms = Terms(_operators(obj), c)
    return Spec(defaults, terms, kind="TunableTransmon", wave=_wave(obj, _ej))


def _channels(obj: Any, tunable: bool) -> dict[str, Channel]:
    n, cos, sin = (
        dense(m) for m in (obj.n_operator(), obj.cos_phi_operator(), obj.sin_phi_operator())
    )
    channels = [
        tphi("tphi_1_over_f_cc", A_CC, one(-cos)),
        tphi("tphi_1_over_f_ng", A_NG, one(n, lambda p: -8.0 * p["EC"])),
        Channel("t1_capacitive", "t1", sig_capacitive(), (Part(one(n), "capacitive", ec),)),
        Channel(
            "t1_charge_impedance",
            "t1",
            sig_charge_impedance(),
            (Part(one(n), "charge_impedance"),),
        ),  # fmt: skip
    ]
    if tunable:

        def c(p: Params) -> list[Any]:
            angle, d = jnp.pi * p["flux"], p["d"]
            root = jnp.sqrt(jnp.cos(angle) ** 2 + d**2 * jnp.sin(angle) ** 2)
            a = jnp.pi * p["EJmax"] * jnp.cos(angle) * jnp.sin(angle) * (d**2 - 1) / root
            return [a, -jnp.pi * p["EJmax"] * d / root]

        d_flux = Terms([fixed(cos), fixed(sin)], c)
        channels += [
            tphi("tphi_1_over_f_flux", A_FLUX, d_flux),
            Channel(
                "t1_flux_bias_line", "t1", sig_flux_bias_line(), (Part(d_flux, "flux_bias_line"),)
            ),  # fmt: skip
        ]
    return table(*channels)


def channels(obj: Any) -> dict[str, Channel]:
    """A `scqubits.Transmon`'s noise channels, by scqubits' method names."""
    return _channels(obj, tunable=False)


def tunable_channels(obj: Any) -> dict[str, Channel]:
    """A `scqubits.TunableTransmon`'s noise channels: the `Transmon`'s and the flux ones."""
    return _channels(obj, tunable=True)
