"""`scqubits.Circuit` through `jaxbridge.sympy.operator_sum`: its symbolic Hamiltonian, its
operators, and a matrix function for each harmonic-basis variable whose oscillator length
depends on the parameters."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sparse
import sympy

from ..sympy._operators import (
    HermitianFactor,
    OperatorSum,
    OperatorTermError,
    _split_argument,
    operator_sum,
    trig_keys,
)
from . import _errors
from ._params import read_defaults
from ._spec import PotentialEnergy, Spec, circuit_layout, ladder
from ._terms import Fixed, Params, Spectral, Terms, fixed
from ._wave import WaveLayout
from .noise import _circuit_noise


def _to_scipy(m: Any) -> Any:
    if hasattr(m, "full"):  # a qutip Qobj
        return sparse.csr_array(m.full())
    return sparse.csr_array(m) if sparse.issparse(m) else np.asarray(m)


def _dims(obj: Any) -> list[tuple[int, int]]:
    """(variable index, dimension) in the order of the tensor product."""
    cutoffs = obj.cutoffs_dict()
    out = []
    for i in obj.dynamic_var_indices:
        d = cutoffs[i]
        out.append((i, 2 * d + 1 if i in obj.var_categories["periodic"] else d))
    return out


class _CircuitParts:
    """The substituted Hamiltonian and the operator dictionary of one `Circuit`."""

    def __init__(self, obj: Any, child: bool = False) -> None:
        if getattr(obj, "hierarchical_diagonalization", False):
            raise ValueError(_errors.CIRCUIT_HD)
        H = obj._hamiltonian_sym_for_numerics
        identity = [s for s in H.free_symbols if s.name == "I"]
        H = H.subs({s: 1 for s in identity})
        candidates = [
            *obj.symbolic_params,
            *obj.external_fluxes,
            *obj.offset_charges,
            *obj.free_charges,
        ]
        self.params = [s for s in candidates if s in H.free_symbols]
        self.dropped = [str(s) for s in candidates if s not in H.free_symbols]
        self.obj = obj
        dims = _dims(obj)
        sizes = [d for _, d in dims]
        expanded = sympy.expand(H)
        self.substitutions: dict[Any, Any] = {}
        self.names_back: dict[Any, Any] = {}  # the substitutions' inverse, for error messages
        self.bare_names: dict[Any, Any] = {}
        self.factor_ops: dict[Any, Any] = {}
        self.lengths: dict[int, Any] = {}  # each harmonic variable's oscillator length
        param_set = set(self.params)
        for pos, (i, d) in enumerate(dims):
            if i not in obj.var_categories["extended"] or obj._basis_for_var_index(i) != "harmonic":
                continue
            # A hierarchical Circuit's one-variable harmonic subsystem: its normal mode is the
            # variable itself, and scqubits diagonalizes the same truncated matrix (_hierarchy).
            single = child and len(obj.var_categories["extended"]) == 1
            if obj.is_purely_harmonic and not single:
                raise ValueError(_errors.CIRCUIT_PURELY_HARMONIC)
            theta, q = sympy.Symbol(f"θ{i}"), sympy.Symbol(f"Q{i}")
            ec = expanded.coeff(q**2) / 4
            el = 2 * expanded.coeff(theta**2)
            length = (8 * ec / el) ** sympy.Rational(1, 4)
            self.lengths[i] = length  # scqubits' `_set_harmonic_basis_osc_params`
            if not (length.free_symbols & param_set):
                continue  # a fixed oscillator length: scqubits' own operators are exact
            x, p = ladder(d)
            left, right = int(np.prod(sizes[:pos])), int(np.prod(sizes[pos + 1 :]))
            x_hat, q_hat = sympy.Symbol(f"_x{i}"), sympy.Symbol(f"_q{i}")
            self.substitutions[theta] = length * x_hat
            self.substitutions[q] = q_hat / length
            self.names_back[x_hat] = theta / length
            self.names_back[q_hat] = q * length
            self.bare_names.update({x_hat: theta, q_hat: q})
            self.factor_ops[x_hat] = HermitianFactor(x, left, right)
            self.factor_ops[q_hat] = sparse.csr_array(
                sparse.kron(sparse.kron(sparse.identity(left), p), sparse.identity(right))
            )
        self.H = H

    def split(self, expr: Any) -> OperatorSum:
        """`operator_sum` of `expr` (in the circuit's variables) with every operator it needs."""
        obj = self.obj
        expr = sympy.sympify(expr)
        operators: dict[Any, Any] = dict(self.factor_ops)
        param_set = set(self.params)
        op_symbols = expr.free_symbols - param_set
        # cos and sin of operator combinations: scqubits' own matrices, for the fixed bases.
        for node in expr.atoms(sympy.cos, sympy.sin):
            a, _ = _split_argument(node.args[0], op_symbols)
            if a == 0 or a.free_symbols & set(self.substitutions):
                continue
            cos_a, sin_a, _ = trig_keys(a)  # `sin(1.0*θ1)`, never `-sin(1.0*θ1)`
            self._check_periodic(node, cos_a.args[0])
            for key in (cos_a, sin_a):
                if key not in operators:
                    operators[key] = _to_scipy(obj._evaluate_matrix_cosine_terms(key))
        trig = {n: sympy.Dummy() for n in expr.atoms(sympy.cos, sympy.sin)}
        outside = expr.xreplace(trig).free_symbols & op_symbols  # operators outside cos/sin
        for s in outside:
            if s in self.substitutions or s.name.startswith("_"):
                continue
            method = getattr(obj, f"{s.name}_operator", None)
            if method is None:
                raise ValueError(_errors.CIRCUIT_SYMBOL.format(symbol=s))
            operators[s] = _to_scipy(method())
        substituted = expr.xreplace(self.substitutions)
        factors = {k for k, v in self.factor_ops.items() if isinstance(v, HermitianFactor)}
        harmonic_trig = [
            n
            for n in substituted.atoms(sympy.cos, sympy.sin)
            if n.free_symbols & factors and len(n.free_symbols & (op_symbols | factors)) > 1
        ]
        if harmonic_trig:
            term = _tidy(harmonic_trig[0].xreplace(self.names_back))
            raise ValueError(_errors.CIRCUIT_HARMONIC_PRODUCT.format(term=term))
        used = {k: v for k, v in operators.items() if _uses(substituted, k)}
        try:
            return operator_sum(substituted, used, self.params)
        except OperatorTermError as e:
            # The user's θ1 and Q1, never the stand-ins `_x1`, `_q1`.
            rename = lambda x: _tidy(sympy.sympify(x).xreplace(self.names_back))
            raise e.renamed(rename, self.bare_names) from None

    def _check_periodic(self, node: Any, a: Any) -> None:
        """A periodic variable in the charge basis takes only whole multiples in cos and sin."""
        for i in self.obj.var_categories["periodic"]:
            c = a.coeff(sympy.Symbol(f"θ{i}"))
            if c != 0 and not (c.is_number and float(c) == round(float(c))):
                raise ValueError(
                    _errors.CIRCUIT_PERIODIC_MULTIPLE.format(node=node, i=i, c=float(c))
                )


def _tidy(expr: Any) -> Any:
    """Without the factors 1.0 (to rounding) that undoing a substitution by a length leaves."""
    one = lambda e: e.is_Float and abs(float(e) - 1.0) < 1e-12  # (8 EC / EL)^(1/4) rounds
    return expr.replace(one, lambda e: sympy.Integer(1))


def _uses(expr: Any, key: Any) -> bool:
    return bool(sympy.sympify(key).free_symbols <= expr.free_symbols)


def _terms(split: OperatorSum, names: list[str]) -> Terms:
    ops: list[Fixed | Spectral] = [fixed(o) for o in split.operators]
    for term in split.spectral:
        f = term.factor
        ops.append(Spectral(np.eye(f.left), f.eigenvectors, np.eye(f.right)))
    k = len(split.operators)

    def coefficients(p: Params) -> list[Any]:
        values = [p[name] for name in names]
        if not values:
            values = [jnp.zeros(())]
        c = split.coefficients(*values) if k else jnp.zeros((0,))
        return [c[..., j] for j in range(k)] + split.spectral_coefficients(*values)

    if not names:  # a circuit without parameters: compile needs none
        return Terms(ops, lambda p: [jnp.asarray(x) for x in _constants(split)])
    return Terms(ops, coefficients)


def _constants(split: OperatorSum) -> list[Any]:
    return [float(c) for c in split.coefficient_expressions]  # pyright: ignore[reportArgumentType] - numbers here


def circuit(obj: Any, child: bool = False) -> Spec:
    parts = _CircuitParts(obj, child)
    names = [str(s) for s in parts.params]
    terms = _terms(parts.split(parts.H), names)
    spec = Spec(read_defaults(obj, names), terms, kind="Circuit")
    spec.fixed_operators = not parts.substitutions

    def operator(op: Any) -> Terms:
        expr = op
        if isinstance(op, str):
            expr = sympy.Symbol(op.removesuffix("_operator"))
            if not parts.substitutions or expr not in parts.substitutions:
                method = getattr(obj, op, None)
                touches = any(str(i) in op for i in _harmonic_indices(parts))
                if callable(method) and not touches:
                    return Terms([fixed(_to_scipy(method()))], lambda p: [jnp.ones(())])
                if expr not in parts.substitutions:
                    known = sorted(n for n in dir(obj) if n.endswith("_operator"))
                    raise ValueError(
                        _errors.UNKNOWN_OPERATOR.format(
                            kind="Circuit", name=op, known=known, dim=terms.dim
                        )
                    )
        return _terms(parts.split(expr), names)

    spec.operator_fn = operator
    spec.dropped = parts.dropped
    spec.channels_fn = lambda: _circuit_noise.channels(obj, parts.H, names, operator)
    if not child:
        spec.potential_energy = lambda: potential_energy_fn(obj)  # read when first called
    layout = circuit_layout(obj)
    # only a basis that factors as the cutoffs say is plotted (None: the method refuses); a
    # hierarchical Circuit's subsystem has one too, for the whole Circuit's plot data
    if layout and int(np.prod(layout.shape)) == terms.dim:
        lengths = {i: _length_fn(e) for i, e in parts.lengths.items()}
        spec.layout = WaveLayout(**dataclasses.asdict(layout), lengths=lengths)
    return spec


def _length_fn(length: Any) -> Callable[[Params], Any]:
    """An oscillator length (a SymPy expression of the parameters) as a function of them."""
    symbols = sorted(length.free_symbols, key=str)
    fn = sympy.lambdify(symbols, length, modules=jnp)
    return lambda p: jnp.asarray(fn(*(p[str(s)] for s in symbols)))


def _harmonic_indices(parts: _CircuitParts) -> list[int]:
    return [int(str(s)[1:]) for s in parts.substitutions if str(s).startswith("θ")]


def potential_energy_fn(obj: Any) -> PotentialEnergy | None:
    """scqubits' `Circuit.potential_energy` as a JAX function (None where it uses `saw`)."""
    expr = obj.potential_symbolic.subs("I", 1)
    for flux in obj.external_fluxes:
        expr = expr.subs(flux, flux * 2 * np.pi)  # scqubits' fluxes are in units of Φ0
    if any(str(f.func) == "saw" for f in expr.atoms(sympy.Function)):
        return None
    categories = obj.var_categories
    coordinates = tuple(f"θ{i}" for i in [*categories["extended"], *categories["periodic"]])
    others = [str(s) for s in [*obj.external_fluxes, *obj.symbolic_params]]
    fn = sympy.lambdify([*coordinates, *others], expr, modules=[jnp])
    defaults = {name: float(getattr(obj, name)) for name in others}
    return PotentialEnergy(coordinates, defaults, fn)
