"""Each qubit class's noise channels: which operator and spectral density scqubits uses.

Every operator is scqubits' own (`n_operator`, `d_hamiltonian_d_flux`, ...) written as `Terms`
of the parameters, so that a channel's rate is a JAX function of them; the fixed matrices are
read from the object. scqubits 4.3.1's `noise.py`, `flux_qubit.py`, `zeropi.py` and
`cos2phi_qubit.py` define them; `tests/scqubits/test_scqubits_noise.py` checks every operator
against the object's own method at random parameters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sparse

from ._densities import T_DEFAULT
from ._qubits import _dense, _kron, _ladder
from ._terms import Params, Terms, fixed, spectral

A_FLUX, A_NG, A_CC = 1e-6, 1e-4, 1e-7  # scqubits' NOISE_PARAMS (checked by a test)


@dataclasses.dataclass(frozen=True, eq=False)
class Part:
    """One Fermi golden rule term: `|<i|operator|j>|^2 S(omega)`.

    `density` names the spectral density; `energy` is the EC or EL in front of it (scqubits'
    `branch_params` replaces it). `fixed_t` and `q_one_arg` reproduce Cos2PhiQubit's own
    methods: their spectral densities get scqubits' default T (0.015 K) whatever `T` is, and
    call a `Q_cap`/`Q_ind` function with omega only.
    """

    operator: Terms
    density: str
    energy: Callable[[Params], Any] | None = None
    fixed_t: bool = False
    q_one_arg: bool = False


@dataclasses.dataclass(frozen=True, eq=False)
class Channel:
    """A noise method: its kind, scqubits' arguments and defaults, and what it computes.

    kind: `"t1"` (sum of `parts`), `"tphi"` (1/f dephasing by `operator`), `"rates"` (the sum
    of the rates of `members`, FluxQubit's `tphi_1_over_f_cc`), `"times"` (the sum of
    `1 / time` of `members`, a Circuit's totals).
    """

    name: str
    kind: str
    signature: tuple[tuple[str, Any], ...]
    parts: tuple[Part, ...] = ()
    operator: Terms | None = None
    members: tuple[tuple[str, dict[str, Any]], ...] = ()
    kwargs: bool = False  # takes **kwargs (the 1/f channels: omega_low, t_exp)


def _sig(*names: str, **defaults: Any) -> tuple[tuple[str, Any], ...]:
    out = [(n, defaults.get(n)) for n in names]
    return tuple(out)


_T1 = {"i": 1, "j": 0, "T": T_DEFAULT, "total": True}


def sig_capacitive(extra: tuple[str, ...] = ("noise_op", "branch_params")) -> Any:
    return _sig("i", "j", "Q_cap", "T", "total", *extra, **_T1)


def sig_inductive(extra: tuple[str, ...] = ("noise_op", "branch_params")) -> Any:
    return _sig("i", "j", "Q_ind", "T", "total", *extra, **_T1)


def sig_charge_impedance(extra: tuple[str, ...] = ("noise_op",)) -> Any:
    return _sig("i", "j", "Z", "T", "total", *extra, Z=50, **_T1)


def sig_flux_bias_line(extra: tuple[str, ...] = ("noise_op_method",)) -> Any:
    return _sig("i", "j", "M", "Z", "T", "total", *extra, M=400, Z=50, **_T1)


def sig_qp(extra: tuple[str, ...] = ("noise_op",)) -> Any:
    d = {"x_qp": 3e-6, "Delta": 3.4e-4, **_T1}
    return _sig("i", "j", "Y_qp", "x_qp", "T", "Delta", "total", *extra, **d)


def sig_tphi(a: float) -> Any:
    return _sig("A_noise", "i", "j", A_noise=a, i=0, j=1)


def tphi(name: str, a: float, op: Terms) -> Channel:
    return Channel(name, "tphi", sig_tphi(a), operator=op, kwargs=True)


def _one(matrix: Any, scale: Callable[[Params], Any] | float = 1.0) -> Terms:
    """`scale(p) * matrix`."""
    return Terms([fixed(matrix)], lambda p: [scale(p) if callable(scale) else jnp.asarray(scale)])


def _table(*channels: Channel) -> dict[str, Channel]:
    return {c.name: c for c in channels}


def transmon(obj: Any, tunable: bool) -> dict[str, Channel]:
    n, cos, sin = (
        _dense(m) for m in (obj.n_operator(), obj.cos_phi_operator(), obj.sin_phi_operator())
    )
    channels = [
        tphi("tphi_1_over_f_cc", A_CC, _one(-cos)),
        tphi("tphi_1_over_f_ng", A_NG, _one(n, lambda p: -8.0 * p["EC"])),
        Channel("t1_capacitive", "t1", sig_capacitive(), (Part(_one(n), "capacitive", _ec),)),
        Channel(
            "t1_charge_impedance",
            "t1",
            sig_charge_impedance(),
            (Part(_one(n), "charge_impedance"),),
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
    return _table(*channels)


def _ec(p: Params) -> Any:
    return p["EC"]


def _el(p: Params) -> Any:
    return p["EL"]


def fluxonium(obj: Any) -> dict[str, Channel]:
    dim = int(obj.cutoff)
    x, p_op = _ladder(dim)
    term, xs = spectral(x)

    def length(p: Params) -> Any:
        return (8.0 * p["EC"] / p["EL"]) ** 0.25

    def shifted(fn: Callable[[Any], Any], scale: Callable[[Params], Any], alpha: float = 1.0):
        def c(p: Params) -> list[Any]:
            return [scale(p) * fn(alpha * (length(p) * xs + 2 * jnp.pi * p["flux"]))]

        return Terms([term], c)

    n_op = Terms([fixed(p_op)], lambda p: [1.0 / length(p)])
    phi_op = Terms([term], lambda p: [length(p) * xs])
    d_flux = shifted(jnp.sin, lambda p: -2 * jnp.pi * p["EJ"])
    # scqubits: sin_phi_operator(alpha=0.5, beta=0.5 * 2 pi flux), the flux grouped with cos.
    qp_op = shifted(jnp.sin, lambda p: 1.0, alpha=0.5)
    return _table(
        tphi("tphi_1_over_f_cc", A_CC, shifted(jnp.cos, lambda p: -1.0)),
        tphi("tphi_1_over_f_flux", A_FLUX, d_flux),
        Channel("t1_capacitive", "t1", sig_capacitive(), (Part(n_op, "capacitive", _ec),)),
        Channel(
            "t1_charge_impedance", "t1", sig_charge_impedance(), (Part(n_op, "charge_impedance"),)
        ),  # fmt: skip
        Channel(
            "t1_flux_bias_line", "t1", sig_flux_bias_line(), (Part(d_flux, "flux_bias_line"),)
        ),  # fmt: skip
        Channel("t1_inductive", "t1", sig_inductive(), (Part(phi_op, "inductive", _el),)),
        Channel(
            "t1_quasiparticle_tunneling",
            "t1",
            sig_qp(),
            (Part(qp_op, "quasiparticle_tunneling", lambda p: p["EJ"]),),
        ),  # fmt: skip
    )


def flux_qubit(obj: Any) -> dict[str, Channel]:
    e = np.asarray(obj._exp_i_phi_operator())
    one = np.eye(e.shape[0])
    k = np.kron(e, e.T)
    both, diff = k + k.T, 1j * (k - k.T)

    def d_ej3(p: Params) -> list[Any]:
        angle = 2 * jnp.pi * p["flux"]
        return [-0.5 * jnp.cos(angle), -0.5 * jnp.sin(angle)]

    def d_flux(p: Params) -> list[Any]:
        angle, ej3 = 2 * jnp.pi * p["flux"], p["EJ3"]
        return [jnp.pi * ej3 * jnp.sin(angle), -jnp.pi * ej3 * jnp.cos(angle)]

    members = tuple((f"tphi_1_over_f_cc{n}", {}) for n in (1, 2, 3))
    return _table(
        tphi("tphi_1_over_f_cc1", A_CC, _one(-0.5 * np.kron(e + e.T, one))),
        tphi("tphi_1_over_f_cc2", A_CC, _one(-0.5 * np.kron(one, e + e.T))),
        tphi("tphi_1_over_f_cc3", A_CC, Terms([fixed(both), fixed(diff)], d_ej3)),
        Channel("tphi_1_over_f_cc", "rates", sig_tphi(A_CC), members=members, kwargs=True),
        tphi("tphi_1_over_f_flux", A_FLUX, Terms([fixed(both), fixed(diff)], d_flux)),
    )


def zero_pi(obj: Any) -> dict[str, Channel]:
    phi = obj.grid.make_linspace()
    cos_theta, sin_theta = obj._cos_theta_operator(), obj._sin_theta_operator()
    cos_phi, sin_phi = sparse.diags(np.cos(phi)), sparse.diags(np.sin(phi))
    cc, sc = _kron(cos_phi, cos_theta), _kron(sin_phi, cos_theta)
    cs, ss = _kron(cos_phi, sin_theta), _kron(sin_phi, sin_theta)

    def d_ej(p: Params) -> list[Any]:  # -2 cos(phi - pi flux) cos(theta)
        half = jnp.pi * p["flux"]
        return [-2.0 * jnp.cos(half), -2.0 * jnp.sin(half)]

    def d_flux(p: Params) -> list[Any]:
        # -2 pi EJ sin(phi - pi flux) cos(theta) - pi EJ dEJ cos(phi - pi flux) sin(theta)
        half, ej = jnp.pi * p["flux"], p["EJ"]
        a, b = -2.0 * jnp.pi * ej, -jnp.pi * ej * p["dEJ"]
        return [a * jnp.cos(half), -a * jnp.sin(half), b * jnp.cos(half), b * jnp.sin(half)]

    flux_op = Terms([fixed(sc), fixed(cc), fixed(cs), fixed(ss)], d_flux)
    return _table(
        tphi("tphi_1_over_f_cc", A_CC, Terms([fixed(cc), fixed(sc)], d_ej)),
        tphi("tphi_1_over_f_flux", A_FLUX, flux_op),
        Channel(
            "t1_flux_bias_line", "t1", sig_flux_bias_line(), (Part(flux_op, "flux_bias_line"),)
        ),  # fmt: skip
        Channel(
            "t1_inductive",
            "t1",
            sig_inductive(),
            (Part(_one(obj.phi_operator()), "inductive", _el),),
        ),  # fmt: skip
    )


def cos2phi(obj: Any) -> dict[str, Channel]:
    dphi, dzeta, dtheta = int(obj.phi_cut), int(obj.zeta_cut), 2 * int(obj.ncut) + 1
    xphi, pphi = _ladder(dphi)
    xzeta, pzeta = _ladder(dzeta)
    iphi, izeta, itheta = np.eye(dphi), np.eye(dzeta), np.eye(dtheta)
    ntheta = _dense(obj._n_theta_operator())
    cos_theta, sin_theta = _dense(obj._cos_theta_operator()), _dense(obj._sin_theta_operator())
    junction, xs = spectral(xphi, right=np.kron(izeta, cos_theta))
    disorder, _ = spectral(xphi, right=np.kron(izeta, sin_theta))
    big_xphi, big_xzeta = _kron(xphi, izeta, itheta), _kron(iphi, xzeta, itheta)
    big_pphi, big_pzeta = _kron(pphi, izeta, itheta), _kron(iphi, pzeta, itheta)
    big_ntheta, identity = _kron(iphi, izeta, ntheta), _kron(iphi, izeta, itheta)

    def lengths(p: Params) -> tuple[Any, Any, Any]:
        el, ecj = p["EL"] / (1 - p["dL"] ** 2), p["ECJ"] / (1 - p["dCJ"] ** 2)
        return ecj, (2 * ecj / el) ** 0.25, (4 * p["EC"] / el) ** 0.25

    def d_flux(p: Params) -> list[Any]:
        _, lphi, _ = lengths(p)
        angle, ej = lphi * xs + jnp.pi * p["flux"], p["EJ"]
        return [2 * jnp.pi * ej * jnp.sin(angle), 2 * jnp.pi * p["dEJ"] * ej * jnp.cos(angle)]

    def d_ej(p: Params) -> list[Any]:
        _, lphi, _ = lengths(p)
        angle = lphi * xs + jnp.pi * p["flux"]
        return [-2 * jnp.cos(angle), 2 * p["dEJ"] * jnp.sin(angle)]

    def d_ng(p: Params) -> list[Any]:
        ecj, lphi, lzeta = lengths(p)
        return [4 * p["dCJ"] * ecj / lphi, -4 * ecj, 4 * ecj * p["ng"], 4 * ecj / lzeta]

    ops = [fixed(big_pphi), fixed(big_ntheta), fixed(identity), fixed(big_pzeta)]

    def n_k(sign: float) -> Terms:  # 0.5 n_phi +- 0.5 (n_theta - n_zeta)
        def c(p: Params) -> list[Any]:
            _, lphi, lzeta = lengths(p)
            return [0.5 / lphi, 0.5 * sign, -0.5 * sign / lzeta]

        return Terms([fixed(big_pphi), fixed(big_ntheta), fixed(big_pzeta)], c)

    def phi_k(sign: float) -> Terms:  # +-zeta - phi
        def c(p: Params) -> list[Any]:
            _, lphi, lzeta = lengths(p)
            return [-lphi, sign * lzeta]

        return Terms([fixed(big_xphi), fixed(big_xzeta)], c)

    def scaled(name: str, factor: float) -> Callable[[Params], Any]:
        other = "dCJ" if name == "ECJ" else "dL"
        return lambda p: p[name] / (1 + factor * p[other])

    cap = (Part(n_k(1.0), "capacitive", scaled("ECJ", -1.0), True, True),
           Part(n_k(-1.0), "capacitive", scaled("ECJ", 1.0), True, True))  # fmt: skip
    ind = (Part(phi_k(1.0), "inductive", scaled("EL", -1.0), True, True),
           Part(phi_k(-1.0), "inductive", scaled("EL", 1.0), True, True))  # fmt: skip
    n_zeta = Terms([fixed(big_pzeta)], lambda p: [1.0 / lengths(p)[2]])
    purcell = (Part(n_zeta, "capacitive", _ec, True, True),)
    return _table(
        tphi("tphi_1_over_f_cc", A_CC, Terms([junction, disorder], d_ej)),
        tphi("tphi_1_over_f_flux", A_FLUX, Terms([junction, disorder], d_flux)),
        tphi("tphi_1_over_f_ng", A_NG, Terms(ops, d_ng)),
        Channel("t1_capacitive", "t1", sig_capacitive(()), cap),
        Channel("t1_inductive", "t1", sig_inductive(()), ind),
        Channel("t1_purcell", "t1", sig_capacitive(()), purcell),
    )


BUILDERS: dict[str, Callable[[Any], dict[str, Channel]]] = {
    "Transmon": lambda obj: transmon(obj, tunable=False),
    "TunableTransmon": lambda obj: transmon(obj, tunable=True),
    "Fluxonium": fluxonium,
    "FluxQubit": flux_qubit,
    "ZeroPi": zero_pi,
    "Cos2PhiQubit": cos2phi,
}
