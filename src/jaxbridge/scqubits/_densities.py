"""scqubits' spectral densities `S(omega)` of its T1 channels, as JAX functions.

Each formula is scqubits 4.3.1's (`scqubits/core/noise.py`), in system units converted by
`factor` (scqubits' `units.to_standard_units(1.0)`). A channel sums `S(omega) + S(-omega)`
(`total=True`): with numbers or scqubits' defaults for `Q`, `Z` and `Y` (even in omega) the
sum is one closed form at `|omega|`; with a user's function, both signs are one evaluation of a
2-vector. Either way a program holds each formula once. The modified
Bessel function `K_0` is SciPy's, on the host (`_kv.py`), with JAX derivatives.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.constants as const

from ._kv import k0_sinh

HBAR, KB, E_CHARGE, PLANCK = const.hbar, const.k, const.e, const.h
R_K = PLANCK / E_CHARGE**2  # scqubits' CONSTANTS["R_k"]
OMEGA_LOW, T_EXP = 1e-9 * 2 * np.pi, 1e4  # scqubits' NOISE_PARAMS for 1/f noise
T_DEFAULT = 0.015  # scqubits' default temperature (K)


def units() -> float:
    """scqubits' current frequency unit in Hz (its `to_standard_units(1.0)`)."""
    from scqubits.core import units as scqubits_units

    return float(scqubits_units.to_standard_units(1.0))


def therm(omega: Any, temperature: Any, factor: float) -> Any:
    """scqubits' `calc_therm_ratio`: hbar omega / (k_B T), omega in system units."""
    return HBAR * omega * factor / (KB * temperature)


def _coth_sigmoid(x: Any, absolute: bool) -> Any:
    """`1 / tanh(x / 2) / (1 + exp(-x))`, as scqubits writes it (`|x|` in the tanh if asked)."""
    return jax.nn.sigmoid(x) / jnp.tanh(0.5 * (jnp.abs(x) if absolute else x))


def _each(value: Any, omegas: jax.Array, *args: Any) -> Any:
    """A user's function at each of `omegas` (scalars, as scqubits calls it), or a number."""
    if not callable(value):
        return value
    return jnp.stack([jnp.asarray(value(omegas[s], *args)) for s in range(omegas.shape[0])])


def _is_falsy(value: Any) -> bool:
    """scqubits tests `branch_params` for truth: 0 falls back to EC/EL (a tracer is kept)."""
    return isinstance(value, int | float) and value == 0


def density(
    kind: str,
    omega: Any,
    o: Mapping[str, Any],
    p: Any,
    factor: float,
    energy: Callable[[Any], Any] | None,
    fixed_t: bool = False,
    q_one_arg: bool = False,
) -> Any:
    """`S(omega)`, plus `S(-omega)` when `o["total"]`, of the density `kind`.

    Args:
        kind: `"capacitive"`, `"inductive"`, `"charge_impedance"`, `"flux_bias_line"` or
            `"quasiparticle_tunneling"`.
        omega: the transition's angular frequency in system units.
        o: the channel's options (scqubits' arguments).
        p: the parameters at this point.
        factor: `units()`.
        energy: the EC, EL or EJ in front of the density (`branch_params` replaces it).
        fixed_t: Cos2PhiQubit's own methods: scqubits' default T whatever `T` is.
        q_one_arg: Cos2PhiQubit's own methods call a `Q_cap`/`Q_ind` function with omega only.
    """
    option = {"capacitive": "Q_cap", "inductive": "Q_ind", "quasiparticle_tunneling": "Y_qp"}
    # With numbers (or scqubits' defaults, even in omega) for Q, Z and Y, the two directions
    # sum in closed form: sigmoid(x) + sigmoid(-x) = 1, so S(omega) + S(-omega) is the one-sided
    # prefactor times coth(|x| / 2) at |omega|. A user's function may be uneven: both signs.
    paired = o["total"] and not callable(o.get(option.get(kind, "Z")))
    if paired:
        omegas = jnp.reshape(jnp.abs(omega), (1,))
    else:
        omegas = jnp.stack([omega, -omega]) if o["total"] else jnp.reshape(omega, (1,))
    t_user = o["T"]
    t = T_DEFAULT if fixed_t else t_user
    x = therm(omegas, t, factor)

    def thermal(absolute: bool) -> Any:
        return 1.0 / jnp.tanh(0.5 * x) if paired else _coth_sigmoid(x, absolute)

    if kind in ("capacitive", "inductive"):
        branch = o.get("branch_params")
        assert energy is not None
        e = branch if branch is not None and not _is_falsy(branch) else energy(p)
        q = o["Q_cap" if kind == "capacitive" else "Q_ind"]
        if q is None:  # scqubits' defaults are even in omega: one evaluation
            magnitude = jnp.abs(omega)
            q = (
                _q_cap(magnitude, factor)
                if kind == "capacitive"
                else _q_ind(magnitude, t_user, factor)
            )
        else:
            q = _each(q, omegas) if q_one_arg else _each(q, omegas, t_user)
        scale = 16.0 if kind == "capacitive" else 2.0
        s = scale * e / q * thermal(True) * 2 * np.pi
    elif kind == "charge_impedance":
        q_c = R_K / (8 * np.pi * jnp.real(jnp.asarray(_each(o["Z"], omegas))))
        s = 2 * omegas / q_c * thermal(False)
    elif kind == "flux_bias_line":
        z = jnp.real(jnp.asarray(_each(o["Z"], omegas)))
        s = 2 * (2 * np.pi) ** 2 * o["M"] ** 2 * omegas * HBAR / z * thermal(False)
        s = s * factor**2
    elif kind == "quasiparticle_tunneling":
        y = o["Y_qp"]
        if y is None:  # even in omega: one evaluation
            assert energy is not None
            y = _y_qp(jnp.abs(omega), t, o["x_qp"], o["Delta"], energy(p), factor)
        else:
            y = _each(y, omegas, t)
        re_y = jnp.real(jnp.asarray(y))
        s = 2 * HBAR * omegas / E_CHARGE**2 * re_y * thermal(False)
    else:
        raise AssertionError(kind)
    return jnp.sum(s)


def _q_cap(omega: Any, factor: float) -> Any:
    """scqubits' default `Q_cap` (Smith et al. 2020), at `|omega|`."""
    return 1e6 * (2 * np.pi * 6e9 / jnp.abs(omega * factor)) ** 0.7


def _q_ind(omega: Any, t: Any, factor: float) -> Any:
    """scqubits' default `Q_ind` (Smith et al. 2020), `K_0(x/2) sinh(x/2)` without overflow."""
    x = jnp.abs(therm(omega, t, 1.0) * factor)
    x500 = HBAR * 2 * np.pi * 500e6 / (KB * t)
    both = k0_sinh(0.5 * jnp.stack([jnp.asarray(x500, x.dtype), x]))  # one K_0 for both
    return 500e6 * both[0] / both[1]


def _y_qp(omega: Any, t: Any, x_qp: Any, delta: Any, ej: Any, factor: float) -> Any:
    """scqubits' default `Y_qp` (Eq. S23 of Smith et al. 2020); symmetric in omega."""
    omega = jnp.abs(omega)
    delta_hz = delta * E_CHARGE / PLANCK
    omega_hz = omega * factor / (2 * np.pi)
    x = therm(omega, t, factor)
    return (
        math.sqrt(2 / np.pi)
        * (8 / R_K)
        * (ej * factor / delta_hz)
        * (2 * delta_hz / omega_hz) ** 1.5
        * x_qp
        * jnp.sqrt(0.5 * x)
        * k0_sinh(0.5 * x)
    )
