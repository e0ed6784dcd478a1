"""`Fluxonium`: the Hamiltonian in the harmonic oscillator basis and the noise channels.

`H = sqrt(8 EL EC) (N + 1/2) - EJ cos(phi_osc X + 2 pi flux)` with the oscillator length
`phi_osc = (8 EC / EL)^(1/4)`, on `cutoff` levels, as scqubits 4.3's `fluxonium.py`. The cosine
of a scaled `X` is `spectral`: `X` is diagonalised once and any function of it is a diagonal
there, so the length stays a JAX value. The phase operators depend on the length too, so they
are `Spec.operators`; the noise channels use them the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._params import read_defaults
from .._spec import Spec, Wave, as_complex, expi, grid_points, hermite_functions, ladder
from .._terms import Params, Terms, fixed, spectral
from ..noise._channel import (
    A_CC,
    A_FLUX,
    Channel,
    Part,
    ec,
    el,
    sig_capacitive,
    sig_charge_impedance,
    sig_flux_bias_line,
    sig_inductive,
    sig_qp,
    table,
    tphi,
)


def _length(p: Params) -> Any:
    """The oscillator length `(8 EC / EL)^(1/4)`."""
    return (8.0 * p["EC"] / p["EL"]) ** 0.25


def spec(obj: Any) -> Spec:
    """A `scqubits.Fluxonium`'s `Spec`: parameters `EJ`, `EC`, `EL`, `flux`."""
    dim = int(obj.cutoff)
    x, p_op = ladder(dim)
    cos_term, xs = spectral(x)
    lc = fixed(np.diag(np.arange(dim) + 0.5))

    def c(p: Params) -> list[Any]:
        plasma = jnp.sqrt(8.0 * p["EL"] * p["EC"])
        return [plasma, -p["EJ"] * jnp.cos(_length(p) * xs + 2 * jnp.pi * p["flux"])]

    operators = {
        "phi_operator": Terms([fixed(x)], lambda p: [_length(p)]),
        "n_operator": Terms([fixed(p_op)], lambda p: [1.0 / _length(p)]),
        "cos_phi_operator": Terms([cos_term], lambda p: [jnp.cos(_length(p) * xs)]),
        "sin_phi_operator": Terms([cos_term], lambda p: [jnp.sin(_length(p) * xs)]),
        "exp_i_phi_operator": Terms([cos_term], lambda p: [expi(_length(p) * xs)]),
    }
    defaults = read_defaults(obj, ("EJ", "EC", "EL", "flux"))
    terms = Terms([lc, cos_term], c)
    return Spec(
        defaults, terms, operators, fixed_operators=False, kind="Fluxonium", wave=_wave(obj)
    )


def _wave(obj: Any) -> Wave:
    """scqubits' `Fluxonium.wavefunction`: `sum_n c_n psi_n(phi)`, `psi_n` the oscillator's
    functions of length `phi_osc`; the potential `EL phi^2 / 2 - EJ cos(phi + 2 pi flux)`."""
    dim = int(obj.cutoff)

    def amplitudes(p: Params, vector: Any, which: int, points: tuple[Any, ...]) -> Any:
        return as_complex(vector @ hermite_functions(dim, points[0], _length(p)))

    def potential(p: Params, phi: Any) -> Any:
        return 0.5 * p["EL"] * phi * phi - p["EJ"] * jnp.cos(phi + 2.0 * jnp.pi * p["flux"])

    return Wave((("phi_grid", grid_points(obj._default_grid)),), amplitudes, ("phi",), potential)


def channels(obj: Any) -> dict[str, Channel]:
    """A `scqubits.Fluxonium`'s noise channels, by scqubits' method names."""
    x, p_op = ladder(int(obj.cutoff))
    term, xs = spectral(x)

    def shifted(fn: Callable[[Any], Any], scale: Callable[[Params], Any], alpha: float = 1.0):
        def c(p: Params) -> list[Any]:
            return [scale(p) * fn(alpha * (_length(p) * xs + 2 * jnp.pi * p["flux"]))]

        return Terms([term], c)

    n_op = Terms([fixed(p_op)], lambda p: [1.0 / _length(p)])
    phi_op = Terms([term], lambda p: [_length(p) * xs])
    d_flux = shifted(jnp.sin, lambda p: -2 * jnp.pi * p["EJ"])
    # scqubits: sin_phi_operator(alpha=0.5, beta=0.5 * 2 pi flux), the flux grouped with cos.
    qp_op = shifted(jnp.sin, lambda p: 1.0, alpha=0.5)
    return table(
        tphi("tphi_1_over_f_cc", A_CC, shifted(jnp.cos, lambda p: -1.0)),
        tphi("tphi_1_over_f_flux", A_FLUX, d_flux),
        Channel("t1_capacitive", "t1", sig_capacitive(), (Part(n_op, "capacitive", ec),)),
        Channel(
            "t1_charge_impedance", "t1", sig_charge_impedance(), (Part(n_op, "charge_impedance"),)
        ),  # fmt: skip
        Channel(
            "t1_flux_bias_line", "t1", sig_flux_bias_line(), (Part(d_flux, "flux_bias_line"),)
        ),  # fmt: skip
        Channel("t1_inductive", "t1", sig_inductive(), (Part(phi_op, "inductive", el),)),
        Channel(
            "t1_quasiparticle_tunneling",
            "t1",
            sig_qp(),
            (Part(qp_op, "quasiparticle_tunneling", lambda p: p["EJ"]),),
        ),  # fmt: skip
    )
