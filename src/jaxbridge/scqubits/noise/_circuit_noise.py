"""A `Circuit`'s noise channels, as scqubits 4.3.1 generates them (`circuit_noise.py`).

After `circuit.configure(generate_noise_methods=True)` scqubits adds, per branch and per
external parameter, `t1_capacitive{b}` (every branch but an inductor: its charge, its EC or
ECJ, its `Q_cap` aux parameter), `t1_inductive{b}` (every inductor: its flux, its EL, its
`Q_ind`), `t1_flux_bias_line{k}` and `tphi_1_over_f_flux{k}` (each external flux, through
`d H / d Phi_k`), `tphi_1_over_f_ng{k}` (each offset charge, `d H / d ng_k`) and
`tphi_1_over_f_cc{b}` (each junction, `-cos` of the junction's phase), and each family's sum
of rates under the family's name. Every operator here is a SymPy expression of the circuit's
variables split into `Terms` of the model's parameters (`_circuit._CircuitParts.split`), so
each rate is a JAX function of them.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
import sympy

from .._terms import Params
from ._channel import (
    A_CC,
    A_FLUX,
    A_NG,
    Channel,
    Part,
    sig_capacitive,
    sig_flux_bias_line,
    sig_inductive,
    sig_tphi,
    table,
    tphi,
)

NOT_GENERATED = (
    "This `Circuit` has no noise methods: scqubits generates them only on request. Call "
    "`circuit.configure(generate_noise_methods=True)` (scqubits), then "
    "`jaxbridge.scqubits.model(circuit)` again."
)

BAD_AUX = (
    "`{method}`: branch {branch} ({type}) has `{key}={raw!r}`, which scqubits reads as a "
    "number or as a Python expression of `omega` and `T` (with `np`); this one {why}. Give a "
    "number, or an expression such as `1e6*(abs(omega)/6.0)**0.2`."
)

NO_JUNCTION_TERM = (
    "`tphi_1_over_f_cc{b}`: the Circuit's Hamiltonian has {n} terms `-EJ cos({expr})` (fluxes "
    "aside) with junction branch {b}'s EJ, not one, so its critical-current operator is not "
    "defined (scqubits takes whichever such term comes first). Give the junctions distinct "
    "symbolic EJs (`EJ1=...`, `EJ2=...`)."
)

MISMATCH = (
    "`jaxbridge.scqubits` built the Circuit noise channels {ours}, but scqubits generated "
    "{theirs}: this scqubits version generates other channels than 4.3.1. Please report it."
)


def is_generated(obj: Any) -> bool:
    """Whether scqubits generated the Circuit's noise methods."""
    return hasattr(obj, "_noise_methods_generated")


def _trailing(name: str) -> str:
    found = re.search(r"\d+$", name)
    return found.group(0) if found else ""


def aux_q(branch: Any, key: str, method: str) -> float | Callable[[Any, Any], Any] | None:
    """A branch's `Q_cap` / `Q_ind` aux parameter as scqubits reads it (`Q_from_branch`): a
    number, or a function of `(omega, T)` written in JAX; None where the branch has none.

    Raises:
        ValueError: scqubits could not read it (not a number, nor an expression of `omega`
            and `T` that gives a real number).
    """
    if key not in branch.aux_params:
        return None
    raw = branch.aux_params[key]
    try:
        return float(raw)
    except (TypeError, ValueError):
        pass

    def why(text: str) -> ValueError:
        return ValueError(
            BAD_AUX.format(
                method=method, branch=branch.index, type=branch.type, key=key, raw=raw, why=text
            )
        )

    try:
        code = compile(str(raw), f"<branch {branch.index} {key}>", "eval")
    except SyntaxError as e:
        raise why(f"is not a Python expression ({e.msg})") from None

    def q(omega: Any, T: Any, _np: Any = jnp) -> Any:
        scope = {"np": _np, "numpy": _np, "__builtins__": builtins}
        return eval(code, scope, {"omega": omega, "T": T})

    try:  # scqubits evaluates it only when called; a bad one is refused here, at once
        probe = np.asarray(q(2 * np.pi * 5.0, 0.015, np))
        if probe.shape != () or probe.dtype.kind not in "iuf":
            raise TypeError(f"got {probe!r}")
        value = float(probe)
    except Exception as e:  # noqa: BLE001 - any failure of the user's expression
        raise why(f"does not evaluate to a real number at omega=2 pi 5, T=0.015 ({e!r})") from None
    if not np.isfinite(value):
        raise why("is not finite at omega=2 pi 5, T=0.015")
    return q


def _energy(obj: Any, value: Any, names: list[str]) -> Callable[[Params], Any]:
    """A branch energy (EC, ECJ, EL) as a function of the parameters (a model parameter
    where it is one, else the Circuit's value)."""
    if isinstance(value, sympy.Symbol):
        if value.name in names:
            return lambda p, n=value.name: p[n]
        number = float(getattr(obj, value.name))
    else:
        number = float(value)
    return lambda p: jnp.asarray(number)


def _junction_cos(obj: Any, H: Any, branch: Any) -> Any:
    """The `cos` of junction `branch`'s term in the Hamiltonian, its fluxes left symbolic.

    scqubits (`_junction_related_evaluation`) takes the first term that equals the junction's
    `cos` with the external fluxes set to 0; where two junctions join the same nodes (a SQUID)
    several terms do, and which comes first depends on the parameter values. Here the term is
    the one whose coefficient is this junction's `-EJ`: the same wherever scqubits' is
    unambiguous.
    """
    a, b = (sympy.Symbol(f"φ{node.index}") for node in branch.nodes)
    node_expr = sympy.cos(a - b).subs(sympy.Symbol("φ0"), 0)
    target = obj._transform_expr_to_new_variables(node_expr)
    zero = {f: 0 for f in obj.external_fluxes}
    ej = branch.parameters["EJ"]
    ej_value = ej if isinstance(ej, sympy.Symbol) else sympy.Float(float(ej))
    found = []
    for term in sympy.Add.make_args(sympy.expand(H)):
        for node in term.atoms(sympy.cos):
            if node.subs(zero) == target:
                rest = sympy.simplify(term / node + ej_value)
                if rest == 0 or (rest.is_number and abs(float(rest)) < 1e-12):
                    found.append(node)
    if len(found) != 1:
        raise ValueError(
            NO_JUNCTION_TERM.format(b=branch.index, expr=node_expr.args[0], n=len(found))
        )
    return found[0]


def channels(obj: Any, H: Any, names: list[str], operator: Callable[[Any], Any]) -> dict:
    """The noise channels of a `Circuit` whose noise methods scqubits generated.

    Args:
        obj: the Circuit.
        H: its symbolic Hamiltonian (`_hamiltonian_sym_for_numerics`, `I` set to 1).
        names: the model's parameter names.
        operator: a SymPy expression of the circuit's variables as the model's operator
            (`Terms` of the parameters; a `HierarchyOperator` for a hierarchical Circuit).

    Returns:
        Every channel scqubits generated, by its method name.

    Raises:
        RuntimeError: scqubits has not generated the noise methods.
        ValueError: a branch's `Q_cap` / `Q_ind` cannot be read.
    """
    if not is_generated(obj):
        raise RuntimeError(NOT_GENERATED)
    sc = obj.symbolic_circuit
    out: list[Channel] = []
    derivative = lambda s: operator(sympy.expand(H.diff(s)))
    groups: dict[str, list[str]] = {}

    def add(family: str, channel: Channel) -> None:
        out.append(channel)
        groups.setdefault(family, []).append(channel.name)

    for flux in obj.external_fluxes:
        k = _trailing(flux.name)
        d_flux = derivative(flux)
        add("tphi_1_over_f_flux", tphi(f"tphi_1_over_f_flux{k}", A_FLUX, d_flux))
        add(
            "t1_flux_bias_line",
            Channel(
                f"t1_flux_bias_line{k}",
                "t1",
                sig_flux_bias_line(extra=()),
                (Part(d_flux, "flux_bias_line"),),
            ),
        )
    for ng in obj.offset_charges:
        k = _trailing(ng.name)
        add("tphi_1_over_f_ng", tphi(f"tphi_1_over_f_ng{k}", A_NG, derivative(ng)))
    for branch in obj.branches:
        b = branch.index
        if "JJ" in branch.type:
            op = operator(-_junction_cos(obj, H, branch))
            add("tphi_1_over_f_cc", tphi(f"tphi_1_over_f_cc{b}", A_CC, op))
        if branch.type == "L":
            name = f"t1_inductive{b}"
            energy = _energy(obj, branch.parameters["EL"], names)
            part = Part(
                operator(sc._branch_flux_expr(branch)),
                "inductive",
                energy,
                option=aux_q(branch, "Q_ind", name),
            )
            add("t1_inductive", Channel(name, "t1", sig_inductive(extra=()), (part,)))
        else:
            name = f"t1_capacitive{b}"
            ec = branch.parameters["EC" if branch.type == "C" else "ECJ"]
            part = Part(
                operator(sc._branch_charge_expr(branch)),
                "capacitive",
                _energy(obj, ec, names),
                option=aux_q(branch, "Q_cap", name),
            )
            add("t1_capacitive", Channel(name, "t1", sig_capacitive(extra=()), (part,)))
    signatures = {
        "t1_capacitive": sig_capacitive(extra=()),
        "t1_inductive": sig_inductive(extra=()),
        "t1_flux_bias_line": sig_flux_bias_line(extra=()),
        "tphi_1_over_f_flux": sig_tphi(A_FLUX),
        "tphi_1_over_f_ng": sig_tphi(A_NG),
        "tphi_1_over_f_cc": sig_tphi(A_CC),
    }
    for family, members in groups.items():
        kwargs = family.startswith("tphi")
        out.append(
            Channel(
                family,
                "rates",
                signatures[family],
                members=tuple((m, {}) for m in members),
                kwargs=kwargs,
            )
        )
    found = table(*out)
    theirs = set(obj.supported_noise_channels())
    if set(found) != theirs:
        raise RuntimeError(MISMATCH.format(ours=sorted(found), theirs=sorted(theirs)))
    return found
