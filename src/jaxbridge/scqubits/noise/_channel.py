"""What a noise channel is: `Channel` and its `Part`s, scqubits' signatures and noise amplitudes.

Each qubit file in `qubits/` builds its table of `Channel`s from these pieces; `_noise.py`
evaluates them. An operator is scqubits' own (`n_operator`, `d_hamiltonian_d_flux`, ...)
written as `Terms` of the parameters, so a channel's rate is a JAX function of them. The
signatures and defaults are scqubits 4.3.1's `noise.py`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from .._terms import Params, Terms, fixed
from ._densities import T_DEFAULT

A_FLUX, A_NG, A_CC = 1e-6, 1e-4, 1e-7  # scqubits' NOISE_PARAMS

Signature = tuple[tuple[str, Any], ...]


@dataclasses.dataclass(frozen=True, eq=False)
class Part:
    """One Fermi golden rule term: `|<i|operator|j>|^2 S(omega)`.

    `density` names the spectral density; `energy` is the EC or EL in front of it (scqubits'
    `branch_params` replaces it). `fixed_t` and `q_one_arg` reproduce Cos2PhiQubit's own
    methods: their spectral densities get scqubits' default T (0.015 K) whatever `T` is, and
    call a `Q_cap`/`Q_ind` function with omega only. `option` stands in for the density's
    option (`Q_cap`, `Q_ind`, ...) where the call leaves it None.
    """

    operator: Terms
    density: str
    energy: Callable[[Params], Any] | None = None
    fixed_t: bool = False
    q_one_arg: bool = False
    option: Any = None  # the density's option (`Q_cap`, ...) where the call gives None: a
    # Circuit branch's `Q_cap` / `Q_ind` aux parameter


@dataclasses.dataclass(frozen=True, eq=False)
class Channel:
    """A noise method: its kind, scqubits' arguments and defaults, and what it computes.

    kind: `"t1"` (sum of `parts`), `"tphi"` (1/f dephasing by `operator`), `"rates"` (the sum
    of the rates of `members`, FluxQubit's `tphi_1_over_f_cc`), `"times"` (the sum of
    `1 / time` of `members`, a Circuit's totals).
    """

    name: str
    kind: str
    signature: Signature
    parts: tuple[Part, ...] = ()
    operator: Terms | None = None
    members: tuple[tuple[str, dict[str, Any]], ...] = ()
    kwargs: bool = False  # takes **kwargs (the 1/f channels: omega_low, t_exp)


def _sig(*names: str, **defaults: Any) -> Signature:
    return tuple((n, defaults.get(n)) for n in names)


_T1 = {"i": 1, "j": 0, "T": T_DEFAULT, "total": True}


def sig_capacitive(extra: tuple[str, ...] = ("noise_op", "branch_params")) -> Signature:
    """scqubits' `t1_capacitive` arguments, with `extra` after `total`."""
    return _sig("i", "j", "Q_cap", "T", "total", *extra, **_T1)


def sig_inductive(extra: tuple[str, ...] = ("noise_op", "branch_params")) -> Signature:
    """scqubits' `t1_inductive` arguments, with `extra` after `total`."""
    return _sig("i", "j", "Q_ind", "T", "total", *extra, **_T1)


def sig_charge_impedance(extra: tuple[str, ...] = ("noise_op",)) -> Signature:
    """scqubits' `t1_charge_impedance` arguments, with `extra` after `total`."""
    return _sig("i", "j", "Z", "T", "total", *extra, Z=50, **_T1)


def sig_flux_bias_line(extra: tuple[str, ...] = ("noise_op_method",)) -> Signature:
    """scqubits' `t1_flux_bias_line` arguments, with `extra` after `total`."""
    return _sig("i", "j", "M", "Z", "T", "total", *extra, M=400, Z=50, **_T1)


def sig_qp(extra: tuple[str, ...] = ("noise_op",)) -> Signature:
    """scqubits' `t1_quasiparticle_tunneling` arguments, with `extra` after `total`."""
    d = {"x_qp": 3e-6, "Delta": 3.4e-4, **_T1}
    return _sig("i", "j", "Y_qp", "x_qp", "T", "Delta", "total", *extra, **d)


def sig_tphi(a: float) -> Signature:
    """scqubits' `tphi_1_over_f_*` arguments, with `A_noise` defaulting to `a`."""
    return _sig("A_noise", "i", "j", A_noise=a, i=0, j=1)


def tphi(name: str, a: float, op: Terms) -> Channel:
    """The 1/f dephasing channel `name` by the operator `op`, of default amplitude `a`."""
    return Channel(name, "tphi", sig_tphi(a), operator=op, kwargs=True)


def one(matrix: Any, scale: Callable[[Params], Any] | float = 1.0) -> Terms:
    """`scale(p) * matrix` as `Terms` (`scale` a function of the parameters or a number)."""
    return Terms([fixed(matrix)], lambda p: [scale(p) if callable(scale) else jnp.asarray(scale)])


def table(*channels: Channel) -> dict[str, Channel]:
    """`channels` by name."""
    return {c.name: c for c in channels}


def ec(p: Params) -> Any:
    """The charging energy `EC`, the energy of the capacitive densities."""
    return p["EC"]


def el(p: Params) -> Any:
    """The inductive energy `EL`, the energy of the inductive densities."""
    return p["EL"]
