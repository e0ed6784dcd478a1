"""scqubits' spectral densities `S(omega)` of its T1 channels: on the host, or as JAX code.

Each formula is scqubits 4.3.1's (`scqubits/core/noise.py`), in system units converted by
`factor` (scqubits' `units.to_standard_units(1.0)`), written once (`_formula`) over a small
namespace of elementary functions, and evaluated in one of two ways:

- On the host (`spectral_sum`, where every option is a number or scqubits' default): the terms of
  all a program's channels are one `jaxbridge.host` call of NumPy, and their exact first
  derivatives in every input (the transition frequency, the energy, `T`, `Q`, `Z`, ...) come
  from the same formulas by the complex step (`f(x + ih) = f(x) + ih f'(x) + O(h^2)`, with
  `h` 1e-20 of the input: no difference is taken, so nothing cancels), `K_0` with its
  derivative in closed form. Second derivatives are central differences of those, each input
  stepped by its own size; a third derivative raises (no rule). A program
  then holds one host call and a dot product instead of the densities' arithmetic forward and
  backward, which is most of what XLA compiled for a noise program.
- As JAX code (`density`), where an option is a user's function of omega (scqubits calls it
  at `omega` and `-omega`): the formula traced with `jax.numpy`.

A channel sums `S(omega) + S(-omega)` (`total=True`): with numbers or scqubits' defaults for
`Q`, `Z` and `Y` (even in omega) the sum is one closed form at `|omega|`, since
`sigmoid(x) + sigmoid(-x) = 1` leaves the one-sided prefactor times `coth(|x| / 2)`.
"""

from __future__ import annotations

import cmath
import dataclasses
import functools
import math
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.constants as const
import scipy.special
from jax.core import Tracer
from jax.custom_derivatives import SymbolicZero

from ... import _host
from ._kv import k0_sinh

HBAR, KB, E_CHARGE, PLANCK = const.hbar, const.k, const.e, const.h
R_K = PLANCK / E_CHARGE**2  # scqubits' CONSTANTS["R_k"]
OMEGA_LOW, T_EXP = 1e-9 * 2 * np.pi, 1e4  # scqubits' NOISE_PARAMS for 1/f noise
T_DEFAULT = 0.015  # scqubits' default temperature (K)

#: The option each density reads: a number, a user's function, or None (scqubits' default).
OPTION = {"capacitive": "Q_cap", "inductive": "Q_ind", "charge_impedance": "Z",
          "flux_bias_line": "Z", "quasiparticle_tunneling": "Y_qp"}  # fmt: skip
#: The host's inputs of a term, in its row's order.
SLOTS = ("omega", "energy", "t", "t_user", "option", "m", "x_qp", "delta")
STEP = 1e-20  # the complex step, relative to the input


def units() -> float:
    """scqubits' current frequency unit in Hz (its `to_standard_units(1.0)`)."""
    from scqubits.core import units as scqubits_units

    return float(scqubits_units.to_standard_units(1.0))


def therm(omega: Any, temperature: Any, factor: float) -> Any:
    """scqubits' `calc_therm_ratio`: hbar omega / (k_B T), omega in system units."""
    return HBAR * omega * factor / (KB * temperature)


def _is_falsy(value: Any) -> bool:
    """scqubits tests `branch_params` for truth: 0 falls back to EC/EL (a tracer is kept)."""
    return isinstance(value, int | float) and value == 0


@dataclasses.dataclass(frozen=True)
class Inputs:
    """A term's inputs: the energy in front (EC, EL, EJ or `branch_params`; None where the
    density has none), the temperature its thermal factor sees (`t`) and the user's `T`
    (`t_user`, which `Q_ind`'s default and a user's function see), the density's option (a
    number, a user's function of omega, or None for scqubits' default) and the flux bias
    line's `M` and the quasiparticles' `x_qp` and `Delta` (None where unused)."""

    energy: Any
    t: Any
    t_user: Any
    option: Any
    m: Any = None
    x_qp: Any = None
    delta: Any = None


def inputs_of(
    kind: str,
    o: Mapping[str, Any],
    p: Any,
    energy: Callable[[Any], Any] | None,
    fixed_t: bool,
) -> Inputs:
    """The `Inputs` of density `kind` under a channel's options `o` at the parameters `p`.

    `fixed_t`: Cos2PhiQubit's own methods, whose densities see scqubits' default T whatever
    `T` is.
    """
    e = None
    if kind in ("capacitive", "inductive"):
        branch = o.get("branch_params")
        assert energy is not None
        e = branch if branch is not None and not _is_falsy(branch) else energy(p)
    elif kind == "quasiparticle_tunneling":
        assert energy is not None
        e = energy(p)
    t_user = o["T"]
    return Inputs(
        energy=e,
        t=T_DEFAULT if fixed_t else t_user,
        t_user=t_user,
        option=o[OPTION[kind]],
        m=o["M"] if kind == "flux_bias_line" else None,
        x_qp=o["x_qp"] if kind == "quasiparticle_tunneling" else None,
        delta=o["Delta"] if kind == "quasiparticle_tunneling" else None,
    )


def _formula(
    xp: Any, kind: str, omega: Any, a: Inputs, total: bool, q_one_arg: bool, factor: float
) -> Any:
    """`S(omega)`, plus `S(-omega)` when `total`, in the namespace `xp` (`JAX` or `HOST`).

    `q_one_arg`: Cos2PhiQubit's own methods call a `Q_cap`/`Q_ind` function with omega only.
    """
    user = callable(a.option)
    paired = total and not user
    omegas = [xp.abs(omega)] if paired else ([omega, -omega] if total else [omega])
    default = None
    if a.option is None:  # scqubits' defaults are even in omega: one evaluation
        magnitude = xp.abs(omega)
        if kind == "capacitive":
            default = 1e6 * (2 * np.pi * 6e9 / xp.abs(magnitude * factor)) ** 0.7
        elif kind == "inductive":  # Smith et al. 2020; K_0(x/2) sinh(x/2) without overflow
            x = xp.abs(therm(magnitude, a.t_user, 1.0) * factor)
            x500 = HBAR * 2 * np.pi * 500e6 / (KB * a.t_user)
            default = 500e6 * xp.k0_sinh(0.5 * x500) / xp.k0_sinh(0.5 * x)
        elif kind == "quasiparticle_tunneling":  # Eq. S23 of Smith et al. 2020
            delta_hz = a.delta * E_CHARGE / PLANCK
            omega_hz = magnitude * factor / (2 * np.pi)
            x = therm(magnitude, a.t, factor)
            default = (
                math.sqrt(2 / np.pi)
                * (8 / R_K)
                * (a.energy * factor / delta_hz)
                * (2 * delta_hz / omega_hz) ** 1.5
                * a.x_qp
                * xp.sqrt(0.5 * x)
                * xp.k0_sinh(0.5 * x)
            )
    total_s = None
    for w in omegas:
        x = therm(w, a.t, factor)
        if paired:
            thermal = 1.0 / xp.tanh(0.5 * x)
        else:
            absolute = kind in ("capacitive", "inductive")
            thermal = xp.sigmoid(x) / xp.tanh(0.5 * (xp.abs(x) if absolute else x))
        if default is not None:
            value = default
        elif not callable(a.option):
            value = a.option
        elif q_one_arg or kind in ("charge_impedance", "flux_bias_line"):
            value = a.option(w)  # Z(omega); Cos2PhiQubit's Q(omega)
        else:
            value = a.option(w, a.t_user if kind != "quasiparticle_tunneling" else a.t)
        if kind in ("capacitive", "inductive"):
            scale = 16.0 if kind == "capacitive" else 2.0
            s = scale * a.energy / value * thermal * 2 * np.pi
        elif kind == "charge_impedance":
            q_c = R_K / (8 * np.pi * xp.real(value))
            s = 2 * w / q_c * thermal
        elif kind == "flux_bias_line":
            s = 2 * (2 * np.pi) ** 2 * a.m**2 * w * HBAR / xp.real(value) * thermal * factor**2
        elif kind == "quasiparticle_tunneling":
            s = 2 * HBAR * w / E_CHARGE**2 * xp.real(value) * thermal
        else:
            raise AssertionError(kind)
        total_s = s if total_s is None else total_s + s
    return total_s


JAX = types.SimpleNamespace(
    abs=jnp.abs,
    tanh=jnp.tanh,
    sigmoid=jax.nn.sigmoid,
    sqrt=jnp.sqrt,
    real=lambda z: jnp.real(jnp.asarray(z)),
    k0_sinh=k0_sinh,
)


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
    """`S(omega)`, plus `S(-omega)` when `o["total"]`, of the density `kind`, as JAX code.

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
    a = inputs_of(kind, o, p, energy, fixed_t)
    return jnp.asarray(_formula(JAX, kind, omega, a, bool(o["total"]), q_one_arg, factor))


# The host's namespaces: NumPy on arrays (a batch), Python's `math` and `cmath` on the numbers
# of one call (a NumPy operation on one number costs ~20 of Python's); on the complex step's
# values the same functions continued analytically (`abs` by the real part's sign, `K_0 sinh`
# by its derivative).


def _abs(z: Any) -> Any:
    return np.where(z.real < 0, -z, z) if np.iscomplexobj(z) else np.abs(z)


def _sigmoid(z: Any) -> Any:
    if not np.iscomplexobj(z):
        return scipy.special.expit(z)
    up = z.real >= 0
    u = np.exp(np.where(up, -z, z))  # real part <= 0: no overflow
    return np.where(up, 1.0 / (1.0 + u), u / (1.0 + u))


def _k0_sinh_parts(x: Any) -> tuple[Any, Any]:
    """`K_0(x) sinh(x)` and its derivative `K_0 cosh - K_1 sinh`, from the scaled Bessels."""
    k0, e2 = scipy.special.k0e(x), np.exp(-2 * x)
    value = 0.5 * k0 * -np.expm1(-2 * x)
    return value, 0.5 * (k0 * (1 + e2) - scipy.special.k1e(x) * (1 - e2))


def _k0_sinh(z: Any) -> Any:
    if not np.iscomplexobj(z):
        return _k0_sinh_parts(z)[0]
    value, slope = _k0_sinh_parts(np.real(z))
    return value + 1j * np.imag(z) * slope


HOST = types.SimpleNamespace(
    abs=_abs, tanh=np.tanh, sigmoid=_sigmoid, sqrt=np.sqrt, real=lambda z: z, k0_sinh=_k0_sinh
)


def _number_sigmoid(z: Any) -> Any:
    exp: Callable[[Any], Any] = cmath.exp if isinstance(z, complex) else math.exp
    if z.real >= 0:
        return 1.0 / (1.0 + exp(-z))
    u = exp(z)
    return u / (1.0 + u)


def _number_k0_sinh(z: Any) -> Any:
    value, slope = (float(v) for v in _k0_sinh_parts(z.real))
    return value + 1j * z.imag * slope if isinstance(z, complex) else value


NUMBERS = types.SimpleNamespace(
    abs=lambda z: -z if z.real < 0 else z,
    tanh=lambda z: cmath.tanh(z) if isinstance(z, complex) else math.tanh(z),
    sigmoid=_number_sigmoid,
    sqrt=lambda z: cmath.sqrt(z) if isinstance(z, complex) else math.sqrt(z),
    real=lambda z: z,
    k0_sinh=_number_k0_sinh,
)

#: One term of the host call: `(kind, total, default)`, `default` where the option is None.
Static = tuple[tuple[str, bool, bool], ...]


def _terms(static: Static, factor: float, xp: Any, rows: Any) -> list[Any]:
    """Each term's `S` from its row (`rows[i][j]`: slot j of term i, arrays or numbers)."""
    out = []
    for (kind, total, default), row in zip(static, rows):
        omega, energy, t, t_user, option, m, x_qp, delta = row
        a = Inputs(energy, t, t_user, None if default else option, m, x_qp, delta)
        out.append(_formula(xp, kind, omega, a, total, False, factor))
    return out


def _evaluate(static: Static, factor: float, x: np.ndarray) -> np.ndarray:
    """The terms' `S` (`(..., n)`) from their rows `x` (`(..., n, len(SLOTS))`), real or
    complex: one call's numbers in Python, a batch in NumPy."""
    n = len(static)
    if x.ndim == 2:  # one call: its numbers, unless a number leaves Python's domain
        try:
            got = _terms(static, factor, NUMBERS, x.tolist())
            if np.iscomplexobj(x) or not any(isinstance(v, complex) for v in got):
                return np.asarray(got, x.dtype)
        except (ArithmeticError, ValueError):  # 1/0, overflow: NumPy's inf and nan instead
            pass
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        rows = [[x[..., i, j] for j in range(len(SLOTS))] for i in range(n)]
        got = _terms(static, factor, HOST, rows)
    return np.stack([np.broadcast_to(v, x.shape[:-2]) for v in got], axis=-1)


def _values(static: Static, factor: float, x: np.ndarray) -> np.ndarray:
    return _evaluate(static, factor, x.astype(np.float64)).astype(x.dtype)


def _jacobian(
    static: Static, factor: float, moving: tuple[int, ...], x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The terms' `S` and, by the complex step, `dS_i / dx[i, k]` for each slot `k` of
    `moving` (`(..., n, len(moving))`)."""
    x64 = x.astype(np.float64)
    h = STEP * np.where(x64 == 0, 1.0, np.abs(x64))[..., list(moving)]  # (..., n, m)
    cols = np.zeros((len(moving), len(SLOTS)))
    cols[np.arange(len(moving)), list(moving)] = 1.0
    # direction d moves slot moving[d] of every row: z[..., d, i, j]
    z = x64[..., None, :, :] + 1j * (np.swapaxes(h, -1, -2)[..., :, :, None] * cols[:, None, :])
    s = _evaluate(static, factor, x64)
    moved = np.stack([_evaluate(static, factor, z[..., d, :, :]) for d in range(len(moving))],
                     axis=-1)  # fmt: skip
    return s.astype(x.dtype), (np.imag(moved) / h).astype(x.dtype)


def _hessian(
    static: Static, factor: float, moving: tuple[int, ...], x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The Jacobian of `_jacobian`'s outputs in `x` (`jax.jacfwd`'s layout): `dS/dx` by the
    complex step, and the second derivatives by central differences of it, each slot of
    every row moved by `eps^(1/3)` of its own size."""
    x64 = x.astype(np.float64)
    n, width = x.shape[-2], len(SLOTS)
    everything = tuple(range(width))
    h = np.finfo(np.float64).eps ** (1 / 3) * np.where(x64 == 0, 1.0, np.abs(x64))
    h = (x64 + h) - x64  # steps the dtype represents exactly
    _, jac = _jacobian(static, factor, everything, x64)  # (..., n, k)
    second = np.empty((*x.shape[:-2], n, len(moving), width))
    for k in range(width):
        step = np.zeros_like(x64)
        step[..., k] = h[..., k]
        up = _jacobian(static, factor, moving, x64 + step)[1]
        down = _jacobian(static, factor, moving, x64 - step)[1]
        second[..., k] = (up - down) / (2 * h[..., k, None])
    eye = np.eye(n)
    d_s = jac[..., :, None, :] * eye[:, :, None]  # (..., n, n, k)
    d_jac = second[..., :, :, None, :] * eye[:, None, :, None]  # (..., n, m, n, k)
    return d_s.astype(x.dtype), d_jac.astype(x.dtype)


@functools.cache
def _full(static: Static, factor: float, moving: tuple[int, ...]) -> Any:
    """The host call of `S` and its derivatives along the slots `moving`."""

    def spec(x: Any) -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
        lead = x.shape[:-1]
        return (jax.ShapeDtypeStruct(lead, x.dtype),
                jax.ShapeDtypeStruct((*lead, len(moving)), x.dtype))  # fmt: skip

    return _host.host(
        functools.partial(_jacobian, static, factor, moving),
        result=spec,
        vmap="vectorized",
        jacobian=functools.partial(_hessian, static, factor, moving),
    )


@functools.cache
def _program(static: Static, factor: float) -> Callable[..., jax.Array]:
    """`S` of the terms `static` as a JAX function of their slots (one `(n,)` array each),
    one host call; its derivative one more, along the slots that move alone."""

    primal = _host.host(
        functools.partial(_values, static, factor),
        result=lambda x: jax.ShapeDtypeStruct(x.shape[:-1], x.dtype),
        vmap="vectorized",
    )

    @jax.custom_jvp
    def spectral(*slots: jax.Array) -> jax.Array:
        return primal(jnp.stack(slots, axis=-1))  # pyright: ignore[reportReturnType]

    def spectral_jvp(primals: Any, tangents: Any) -> Any:
        moving = tuple(k for k, t in enumerate(tangents) if not isinstance(t, SymbolicZero))
        if not moving:
            s = spectral(*primals)
            return s, jnp.zeros_like(s)
        s, jac = _full(static, factor, moving)(jnp.stack(primals, axis=-1))
        ds = sum(jac[..., d] * tangents[k] for d, k in enumerate(moving))
        return s, ds

    spectral.defjvp(spectral_jvp, symbolic_zeros=True)
    return spectral


def _real_scalar(value: Any) -> bool:
    """Whether a host row can hold `value`: None, or a real number or 0-d array."""
    if value is None:
        return True
    dtype = jnp.result_type(value)
    real = jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)
    return real and jnp.ndim(value) == 0


def column(values: Sequence[Any], dtype: Any) -> Any:
    """`values` as one `(n,)` array: a NumPy constant where none is traced (no operation in
    the program, and no derivative), else stacked by JAX."""
    if not any(isinstance(v, Tracer) for v in values):
        return np.asarray([np.asarray(v) for v in values], dtype)
    return jnp.stack([jnp.asarray(v).astype(dtype) for v in values])


@dataclasses.dataclass(frozen=True)
class Term:
    """One density of a rate: its kind, `total`, Cos2PhiQubit's `q_one_arg` and its `Inputs`."""

    kind: str
    total: bool
    q_one_arg: bool
    inputs: Inputs

    @property
    def on_host(self) -> bool:
        """Whether the host serves it: its option is no function and every input a real
        number."""
        a = self.inputs
        values = (a.energy, a.t, a.t_user, a.option, a.m, a.x_qp, a.delta)
        return not callable(a.option) and all(map(_real_scalar, values))


def term(
    kind: str,
    o: Mapping[str, Any],
    p: Any,
    energy: Callable[[Any], Any] | None,
    fixed_t: bool = False,
    q_one_arg: bool = False,
) -> Term:
    """The `Term` of density `kind` under a channel's options `o` (arguments as `density`'s)."""
    a = inputs_of(kind, o, p, energy, fixed_t)
    option = a.option
    if option is not None and not callable(option) and OPTION[kind] in ("Z", "Y_qp"):
        # the formula reads Re Z and Re Y alone
        option = jnp.real(option) if isinstance(option, Tracer) else np.real(option)
        a = dataclasses.replace(a, option=option)
    return Term(kind, bool(o["total"]), q_one_arg, a)


def spectral_sum(terms: Sequence[Term], omega: Any, weight: Any, factor: float) -> Any:
    """`sum_t weight[t] S_t(omega[t])`: the terms the host serves in one host call, the
    others as JAX code.

    Args:
        terms: the densities.
        omega: `(n,)`, each term's angular frequency in system units.
        weight: `(n,)`, each term's factor (a squared matrix element times the channel's
            scale).
        factor: `units()`.
    """
    host = [t for t, term_ in enumerate(terms) if term_.on_host]
    out = jnp.zeros((), jnp.result_type(omega))
    for t, term_ in enumerate(terms):
        if not term_.on_host:
            s = _formula(JAX, term_.kind, omega[t], term_.inputs, term_.total, term_.q_one_arg,
                         factor)  # fmt: skip
            out = out + weight[t] * s
    if not host:
        return out
    dtype = jnp.result_type(omega, float)
    every = len(host) == len(terms)
    picked = [terms[t] for t in host]
    slots = [omega if every else omega[np.asarray(host)]]
    for name in SLOTS[1:]:
        values = [getattr(term_.inputs, name) for term_ in picked]
        slots.append(column([0.0 if v is None else v for v in values], dtype))
    static = tuple((term_.kind, term_.total, term_.inputs.option is None) for term_ in picked)
    s = _program(static, factor)(*slots)
    return out + jnp.dot(weight if every else weight[np.asarray(host)], s)
