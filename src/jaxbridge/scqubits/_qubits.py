"""The single qubits of scqubits as `Terms`: fixed operators read from the object, coefficients
written out from scqubits' own `hamiltonian()` (scqubits 4.3)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sparse

from ._terms import Fixed, Params, Terms, fixed, spectral


@dataclasses.dataclass
class Spec:
    """What a model needs from one scqubits object."""

    defaults: dict[str, float]
    terms: Terms
    # Operators that depend on the parameters (an oscillator length): name -> Terms.
    operators: dict[str, Terms] = dataclasses.field(default_factory=dict)
    # Whether every other `*_operator()` method of the object returns a parameter-free matrix.
    fixed_operators: bool = True
    # Where the static structure lives, for error messages.
    kind: str = ""
    # For a Circuit: any operator (a name or a SymPy expression) as Terms.
    operator_fn: Callable[[Any], Terms] | None = None
    # For a Circuit: symbolic parameters scqubits folded into numbers (not differentiable).
    dropped: list[str] = dataclasses.field(default_factory=list)


def _values(obj: Any, names: tuple[str, ...]) -> dict[str, float]:
    return {name: float(getattr(obj, name)) for name in names}


def _dense(m: Any) -> np.ndarray:
    return np.asarray(m.toarray() if sparse.issparse(m) else m)


def _kron(*ms: Any) -> sparse.csr_array:
    out = sparse.csr_array(np.eye(1))
    for m in ms:
        out = sparse.csr_array(sparse.kron(out, sparse.csr_array(m)))
    return out


def _charge_basis(ncut: int) -> tuple[np.ndarray, np.ndarray]:
    """`n` and `cos(phi)` on charges -ncut..ncut."""
    size = 2 * ncut + 1
    n = np.diag(np.arange(-ncut, ncut + 1.0))
    cos = 0.5 * (np.eye(size, k=1) + np.eye(size, k=-1))
    return n, cos


def transmon(obj: Any) -> Spec:
    # H = 4 EC (n - ng)^2 - EJ cos(phi)
    n, cos = _charge_basis(int(obj.ncut))
    ops = [fixed(n @ n), fixed(n), fixed(np.eye(n.shape[0])), fixed(cos)]

    def c(p: Params) -> list[Any]:
        ec, ng = p["EC"], p["ng"]
        return [4 * ec, -8 * ec * ng, 4 * ec * ng**2, -p["EJ"]]

    return Spec(_values(obj, ("EJ", "EC", "ng")), Terms(ops, c), kind="Transmon")


def tunable_transmon(obj: Any) -> Spec:
    n, cos = _charge_basis(int(obj.ncut))
    ops = [fixed(n @ n), fixed(n), fixed(np.eye(n.shape[0])), fixed(cos)]

    def c(p: Params) -> list[Any]:
        ec, ng, angle = p["EC"], p["ng"], jnp.pi * p["flux"]
        ej = p["EJmax"] * jnp.sqrt(jnp.cos(angle) ** 2 + p["d"] ** 2 * jnp.sin(angle) ** 2)
        return [4 * ec, -8 * ec * ng, 4 * ec * ng**2, -ej]

    names = ("EJmax", "EC", "d", "flux", "ng")
    return Spec(_values(obj, names), Terms(ops, c), kind="TunableTransmon")


def _ladder(dim: int) -> tuple[np.ndarray, np.ndarray]:
    """`(a + a^dag)/sqrt(2)` and `i (a^dag - a)/sqrt(2)`, truncated to `dim` levels."""
    a = np.diag(np.sqrt(np.arange(1.0, dim)), k=1)
    return (a + a.T) / np.sqrt(2), 1j * (a.T - a) / np.sqrt(2)


def fluxonium(obj: Any) -> Spec:
    # H = sqrt(8 EL EC) (N + 1/2) - EJ cos(phi_osc X + 2 pi flux), phi_osc = (8 EC / EL)^(1/4).
    dim = int(obj.cutoff)
    x, p_op = _ladder(dim)
    cos_term, xs = spectral(x)
    lc = fixed(np.diag(np.arange(dim) + 0.5))

    def length(p: Params) -> Any:
        return (8.0 * p["EC"] / p["EL"]) ** 0.25

    def c(p: Params) -> list[Any]:
        plasma = jnp.sqrt(8.0 * p["EL"] * p["EC"])
        return [plasma, -p["EJ"] * jnp.cos(length(p) * xs + 2 * jnp.pi * p["flux"])]

    operators = {
        "phi_operator": Terms([fixed(x)], lambda p: [length(p)]),
        "n_operator": Terms([fixed(p_op)], lambda p: [1.0 / length(p)]),
        "cos_phi_operator": Terms([cos_term], lambda p: [jnp.cos(length(p) * xs)]),
        "sin_phi_operator": Terms([cos_term], lambda p: [jnp.sin(length(p) * xs)]),
    }
    spec = Spec(_values(obj, ("EJ", "EC", "EL", "flux")), Terms([lc, cos_term], c), operators)
    spec.fixed_operators = False
    spec.kind = "Fluxonium"
    return spec


def flux_qubit(obj: Any) -> Spec:
    ncut = int(obj.ncut)
    n, _ = _charge_basis(ncut)
    e = np.eye(2 * ncut + 1, k=-1)  # scqubits' exp(i phi) in the charge basis
    one = np.eye(2 * ncut + 1)
    e3 = np.kron(e, e.T)
    ops = [
        fixed(np.kron(n @ n, one)),
        fixed(np.kron(n, one)),
        fixed(np.kron(one, n @ n)),
        fixed(np.kron(one, n)),
        fixed(np.kron(n, n)),
        fixed(np.kron(one, one)),
        fixed(np.kron(e + e.T, one)),
        fixed(np.kron(one, e + e.T)),
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
    return Spec(_values(obj, names), Terms(ops, c), kind="FluxQubit")


def zero_pi(obj: Any) -> Spec:
    grid = obj.grid
    phi = grid.make_linspace()
    dim_theta = 2 * int(obj.ncut) + 1
    one_phi, one_theta = sparse.identity(grid.pt_count), sparse.identity(dim_theta)
    n = sparse.diags(np.arange(-obj.ncut, obj.ncut + 1.0))
    shifts = np.eye(dim_theta, k=-1) + np.eye(dim_theta, k=1)
    sin_theta = _dense(obj._sin_theta_operator())
    cos_phi, sin_phi = sparse.diags(np.cos(phi)), sparse.diags(np.sin(phi))
    ops = [
        fixed(_kron(grid.second_derivative_matrix(prefactor=1.0), one_theta)),
        fixed(_kron(one_phi, n @ n)),
        fixed(_kron(one_phi, n)),
        fixed(_kron(one_phi, one_theta)),
        fixed(_kron(grid.first_derivative_matrix(prefactor=1j), n)),
        fixed(_kron(cos_phi, shifts)),
        fixed(_kron(sin_phi, shifts)),
        fixed(_kron(sparse.diags(phi**2), one_theta)),
        fixed(_kron(sin_phi, sin_theta)),
        fixed(_kron(cos_phi, sin_theta)),
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
    return Spec(_values(obj, names), Terms(ops, c), kind="ZeroPi")


def cos2phi(obj: Any) -> Spec:
    dphi, dzeta, dtheta = int(obj.phi_cut), int(obj.zeta_cut), 2 * int(obj.ncut) + 1
    xphi, pphi = _ladder(dphi)
    xzeta, pzeta = _ladder(dzeta)
    iphi, izeta, itheta = np.eye(dphi), np.eye(dzeta), np.eye(dtheta)
    ntheta = _dense(obj._n_theta_operator())
    cos_theta, sin_theta = _dense(obj._cos_theta_operator()), _dense(obj._sin_theta_operator())
    junction, xs = spectral(xphi, right=np.kron(izeta, cos_theta))
    disorder_j, _ = spectral(xphi, right=np.kron(izeta, sin_theta))
    ops = [
        fixed(_kron(np.diag(np.arange(dphi * 1.0)), izeta, itheta)),
        fixed(_kron(iphi, np.diag(np.arange(dzeta * 1.0)), itheta)),
        fixed(_kron(iphi, izeta, ntheta @ ntheta)),
        fixed(_kron(iphi, izeta, itheta)),
        fixed(_kron(iphi, pzeta @ pzeta, itheta)),
        fixed(_kron(iphi, izeta, ntheta)),
        fixed(_kron(iphi, pzeta, itheta)),
        fixed(_kron(iphi, pzeta, ntheta)),
        junction,
        fixed(_kron(xphi, xzeta, itheta)),
        disorder_j,
        fixed(_kron(pphi, izeta, ntheta)),
        fixed(_kron(pphi, izeta, itheta)),
        fixed(_kron(pphi, pzeta, itheta)),
    ]

    def lengths(p: Params) -> tuple[Any, Any, Any, Any]:
        el = p["EL"] / (1 - p["dL"] ** 2)
        ecj = p["ECJ"] / (1 - p["dCJ"] ** 2)
        return el, ecj, (2 * ecj / el) ** 0.25, (4 * p["EC"] / el) ** 0.25

    def c(p: Params) -> list[Any]:
        el, ecj, lphi, lzeta = lengths(p)
        ng, ej, angle = p["ng"], p["EJ"], lphi * xs + jnp.pi * p["flux"]
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
        return Terms([fixed(op)], lambda p: [lengths(p)[which] ** power])

    operators = {
        "phi_operator": scaled(_kron(xphi, izeta, itheta), 2, 1),
        "n_phi_operator": scaled(_kron(pphi, izeta, itheta), 2, -1),
        "zeta_operator": scaled(_kron(iphi, xzeta, itheta), 3, 1),
        "n_zeta_operator": scaled(_kron(iphi, pzeta, itheta), 3, -1),
    }
    names = ("EJ", "ECJ", "EL", "EC", "dCJ", "dL", "dEJ", "flux", "ng")
    spec = Spec(_values(obj, names), Terms(ops, c), operators, fixed_operators=False)
    spec.kind = "Cos2PhiQubit"
    return spec


# The fixed operators every class shares: which `*_operator` methods are parameter-free.
FIXED_OPERATOR_NAMES: Mapping[str, tuple[str, ...]] = {
    "Cos2PhiQubit": ("n_theta_operator", "cos_theta_operator", "sin_theta_operator"),
}

BUILDERS: dict[str, Callable[[Any], Spec]] = {
    "Transmon": transmon,
    "TunableTransmon": tunable_transmon,
    "Fluxonium": fluxonium,
    "FluxQubit": flux_qubit,
    "ZeroPi": zero_pi,
    "Cos2PhiQubit": cos2phi,
}

__all__ = ["BUILDERS", "FIXED_OPERATOR_NAMES", "Fixed", "Spec"]
