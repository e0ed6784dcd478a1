"""A `Circuit` with `system_hierarchy` (hierarchical diagonalization) as a `Composite`.

scqubits splits the symbolic Hamiltonian into one Hamiltonian per subsystem and the
interactions between them (`subsystem_interactions`), diagonalizes each subsystem (itself
hierarchical, or a plain `Subsystem` circuit) to its `truncated_dim` lowest states, and adds
the interactions in the product of those bases (`Circuit._update_interactions`,
`_evaluate_symbolic_expr`). Here each plain subsystem is a `circuit()` spec, each hierarchical
one a nested `Composite`, and every interaction term a `ProductTerm`: its coefficient a JAX
function of the circuit's parameters, its operators grouped per leaf subsystem and multiplied
there, in the leaf's own basis, before being taken up the hierarchy (as scqubits'
`_combine_factors` and `identity_wrap_for_hd` do).
"""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import sympy

from .. import _errors as _plot_errors
from .. import _params
from .._circuit import circuit, potential_energy_fn
from .._eigen import dressed_structure, eigh_k, eigvalsh_k
from .._model import Model
from .._terms import Params, complex_of
from .._wave import WfAxis, circuit_plot_data, circuit_potential_energy, layout_axes
from ..noise import _circuit_noise
from ..noise._hierarchy_noise import HD_NOISE_OPERATOR, HierarchyNoise, HierarchyOperator
from . import _hs_errors as _errors
from ._composite import Composite, Factor, ProductTerm
from ._normal_modes import NormalModesPart, param_symbols
from ._subsystems import Operator, Part, QubitPart, fix_phases

ParamsArg = dict[str, Any] | None

#: A named operator of a hierarchical Circuit that is not one variable (or its cosine or sine).
HD_OPERATOR_NAME = (
    "`HierarchicalModel.matrixelements`: {name!r} is not an operator of one of the circuit's "
    "variables {variables} by name (`<variable>_operator`, `cos<variable>_operator` or "
    "`sin<variable>_operator`). Pass a SymPy expression in the variables instead (for example "
    "`sympy.Symbol('Q1')**2`): scqubits' own matrix for it is in its own eigenvectors' phases, "
    "not this model's."
)
HD_OPERATOR_KIND = (
    "`HierarchicalModel.matrixelements`: the operator must be a name or a SymPy expression in "
    "the circuit's variables {variables}; got {got}. (A fixed matrix has no meaning here: the "
    "product basis is made of the subsystems' eigenvectors, whose phases are this model's.)"
)
HD_OPERATOR_SPANS = (
    "`HierarchicalModel.matrixelements`: {expr} acts on the variables {symbols} of more than "
    "one subsystem; give one subsystem's operator (or sum matrix elements of each)."
)


def _index(symbol: Any) -> int:
    found = re.search(r"(\d+)$", symbol.name)
    assert found is not None, symbol
    return int(found.group(1))


class _LeafPart(QubitPart):
    """A plain `Subsystem` of a hierarchical Circuit, through `circuit(child=True)`."""

    def __init__(self, sub: Any) -> None:
        spec = circuit(sub, child=True)
        super().__init__(sub, Model(sub, spec))
        self.id_str = f"subsystem{sub.dynamic_var_indices}"
        self._spec = spec
        self.layout = spec.layout  # its basis by variable, for the Circuit's plot data

    def lifted(self, expr: Any) -> Operator:
        """`expr` (its operators) in this subsystem's own basis."""
        assert self._spec.operator_fn is not None
        terms = self._spec.operator_fn(expr)
        return terms.dense, terms.is_complex


class _HierarchyPart(Part):
    """A hierarchical subsystem (or the whole Circuit): its own `Composite`, diagonalized."""

    def __init__(self, circ: Any) -> None:
        self.children: list[Part] = [_part(s) for s in circ.subsystems]
        self.circ = circ
        names: dict[str, float] = {}
        for child in self.children:
            names.update(child.defaults)
        self.params_symbols = {str(s): s for s in param_symbols(circ)}
        terms = [t for i in range(len(self.children)) for t in self._terms(circ, i, names)]
        self.composite = Composite(
            self.children, terms, lambda P, s: {n: P[n] for n in self.children[s].defaults}
        )
        Part.__init__(self, circ, names, self.composite.dim)
        self.id_str = f"subsystem{circ.dynamic_var_indices}"
        self.is_complex = self.composite.is_complex

    def _terms(self, circ: Any, i: int, names: dict[str, float]) -> list[ProductTerm]:
        expr = sympy.sympify(circ.subsystem_interactions[i]).expand()
        if expr == 0:
            return []
        expr = expr.subs(sympy.Symbol("I"), 1)
        fluxes = set(circ.external_fluxes)
        expr = expr.subs({f: 2 * sympy.pi * f for f in fluxes if f in expr.free_symbols})
        return self.product_terms(expr, names)

    def product_terms(self, expr: Any, names: dict[str, float]) -> list[ProductTerm]:
        """`expr` (operators of this circuit's variables, its fluxes in radians as in
        `_hamiltonian_sym_for_numerics`) as `ProductTerm`s of this subsystem's children, as
        scqubits' `_evaluate_symbolic_expr` splits it; each coefficient's symbols added to
        `names` with the Circuit's values.

        Raises:
            ValueError: a factor acts on variables of two subsystems.
        """
        circ = self.circ
        params = set(param_symbols(circ))
        out = []
        for term, number in expr.expand().as_coefficients_dict().items():
            coefficient: Any = sympy.Float(number)
            # scqubits' _combine_factors: each cosine or sine on its own, first; then the other
            # factors multiplied per leaf subsystem, in the leaf's own basis.
            trig: list[tuple[int, Any]] = []
            groups: dict[int, tuple[int, list[Any]]] = {}  # id(leaf) -> (child, factors)
            for factor in term.as_ordered_factors():
                operators = factor.free_symbols - params
                if not operators:
                    coefficient = coefficient * factor
                    continue
                leaves = {id(self._root(_index(s))) for s in operators}
                if len(leaves) != 1:
                    raise ValueError(_errors.HD_SPANS.format(term=term, factor=factor))
                child = self._leaf_of(_index(next(iter(operators))))
                if factor.has(sympy.cos, sympy.sin):
                    trig.append((child, factor))
                else:
                    groups.setdefault(leaves.pop(), (child, []))[1].append(factor)
            for s in coefficient.free_symbols:
                names.setdefault(str(s), float(getattr(circ, str(s))))
            symbols = sorted(coefficient.free_symbols, key=str)
            fn = sympy.lambdify(symbols, coefficient, modules=jnp)

            def c(P: Any, fn: Any = fn, symbols: list = symbols) -> Any:
                return fn(*[P[str(s)] for s in symbols])

            pieces = [*trig, *((child, sympy.Mul(*fs)) for child, fs in groups.values())]
            factors = [self._factor(child, e) for child, e in pieces]
            out.append(ProductTerm(c, factors))
        return out

    def _root(self, index: int) -> Part:
        """The plain subsystem (at any depth) that holds variable `index`."""
        child = self.children[self._leaf_of(index)]
        return child._root(index) if isinstance(child, _HierarchyPart) else child

    def _leaf_of(self, index: int) -> int:
        for s, child in enumerate(self.children):
            if index in child.obj.dynamic_var_indices:
                return s
        raise AssertionError(index)

    def _factor(self, s: int, expr: Any) -> Factor:
        return Factor(s, self.children[s].lifted(expr))  # pyright: ignore[reportAttributeAccessIssue]

    def lifted(self, expr: Any) -> Operator:
        """`expr` (operators of one leaf below) in this subsystem's bare product basis."""
        index = _index(next(iter(expr.free_symbols - set(param_symbols(self.circ)))))
        s = self._leaf_of(index)
        child = self.children[s]
        fn, is_complex = child.lifted(expr)  # pyright: ignore[reportAttributeAccessIssue]
        comp = self.composite

        def op(P: Params) -> jax.Array:
            sub = {n: P[n] for n in child.defaults}
            o = fn(sub)
            _, v = child.esys(sub, child.dim)
            if v is not None:
                either = jnp.iscomplexobj(o) or jnp.iscomplexobj(v)
                dtype = complex_of(v.dtype) if either else v.dtype
                o, v = o.astype(dtype), v.astype(dtype)
                o = v.conj().T @ o @ v
            return comp.wrap(o, s)

        return op, is_complex or child.is_complex

    def esys(self, p: Params, k: int) -> tuple[jax.Array, jax.Array | None]:
        h = self.composite.hamiltonian(p)
        w, v = eigh_k(h, k, dressed_structure(h.shape[-1]))
        return w, fix_phases(v)


def _check_truncations(part: _HierarchyPart) -> None:
    """Refuses a subsystem whose truncation splits a degenerate pair at the Circuit's values.

    Such a pair is often structural (a symmetry of the subsystem's grid or basis: it stays
    for every value of the parameters), and the state kept of it is the eigensolver's
    arbitrary choice, so the whole spectrum above would be too.

    Raises:
        ValueError: `HD_SPLIT_DEGENERATE`, naming the subsystem and both levels.
    """
    for child in part.children:
        if isinstance(child, _HierarchyPart):
            _check_truncations(child)
        k = child.dim
        native = child.composite.dim if isinstance(child, _HierarchyPart) else None
        if native is None:
            native = getattr(getattr(child, "model", None), "dim", None)
        if native is None or native <= k:
            continue
        p = {n: jnp.asarray(v) for n, v in child.defaults.items()}
        w = [float(x) for x in child.esys(p, k + 1)[0]]
        below, above = w[k - 1], w[k]
        if abs(above - below) <= 1e-9 * max(1.0, abs(above)):
            raise ValueError(
                _errors.HD_SPLIT_DEGENERATE.format(
                    id_str=child.id_str, k=k, last=k - 1, below=below, above=above,
                    fewer=k - 1, more=k + 1,
                )
            )  # fmt: skip


def _is_sympy(x: Any) -> bool:
    return type(x).__module__.startswith("sympy")


def _variable_symbols(circ: Any) -> list[Any]:
    """The circuit's operator symbols: each variable's phase `θk` and its charge, `nk` for a
    periodic variable and `Qk` for an extended one (scqubits' names)."""
    categories = circ.var_categories
    out = []
    for i in circ.dynamic_var_indices:
        charge = "n" if i in categories["periodic"] else "Q"
        out += [sympy.Symbol(f"θ{i}"), sympy.Symbol(f"{charge}{i}")]
    return out


def _part(sub: Any) -> Part:
    if getattr(sub, "hierarchical_diagonalization", False):
        return _HierarchyPart(sub)
    if sub.is_purely_harmonic and len(sub.var_categories["extended"]) > 1:
        return NormalModesPart(sub)  # scqubits solves it in its normal modes
    return _LeafPart(sub)


#: How one part's states become axes: `expand(wf, axis, p)`, `p` the part's params.
Expand = Any


def _wf_plan(
    part: Part, relevant: set[int], var_indices: tuple[int, ...], top: bool
) -> tuple[list[WfAxis], Expand]:
    """The axes `part`'s states expand to for plotting `relevant` variables, and the expansion.

    As scqubits' `_reshape_and_change_to_variable_basis`: a part whose variables are plotted
    is taken from its eigenstates to its own basis (the top level's states are already in
    it); a hierarchical one's basis is the product of its children's, each child expanded in
    turn if it holds a plotted variable and else left as one axis of eigenstates (summed);
    a plain subsystem's basis is one axis per variable (`layout_axes`).

    Raises:
        ValueError: where scqubits 4.3.1's own result is wrong: a subsystem in normal modes,
            a plain subsystem whose cutoffs are not in its variables' order, or an axis that
            scqubits looks for at another position.
    """
    if isinstance(part, _HierarchyPart):
        comp = part.composite
        children: list[tuple[list[WfAxis], Expand | None]] = []
        axes: list[WfAxis] = []
        for s, child in enumerate(part.children):
            if not relevant & set(child.obj.dynamic_var_indices):
                children.append(([WfAxis(None, "eigen")], None))
            else:
                # where scqubits expects the child: after an earlier plotted one's variables
                # (top level) or at the child's index (below), whatever they expanded to
                earlier = part.children[:s]
                if top:
                    expect = sum(
                        len(c.obj.dynamic_var_indices)
                        if relevant & set(c.obj.dynamic_var_indices)
                        else 1
                        for c in earlier
                    )
                else:
                    expect = s
                if expect != len(axes):
                    raise ValueError(
                        _plot_errors.HD_WF_AXES.format(
                            got=var_indices, id_str=child.id_str, scqubits=expect, axis=len(axes)
                        )
                    )
                children.append(_wf_plan(child, relevant, var_indices, top=False))
            axes += children[-1][0]

        def expand(wf: jax.Array, axis: int, p: Params) -> jax.Array:
            if not top:
                wf = _to_basis(wf, axis, part.esys(p, part.dim)[1])
            wf = wf.reshape(wf.shape[:axis] + tuple(comp.dims) + wf.shape[axis + 1 :])
            offset = axis
            for s, (child_axes, child_expand) in enumerate(children):
                if child_expand is not None:
                    wf = child_expand(wf, offset, comp.part_params(p, s))
                offset += len(child_axes)
            return wf

        return axes, expand
    indices = list(part.obj.dynamic_var_indices)
    plotted = [i for i in indices if i in relevant]
    if isinstance(part, NormalModesPart):
        raise ValueError(
            _plot_errors.HD_WF_NORMAL_MODES.format(
                index=plotted[0], id_str=part.id_str, indices=indices
            )
        )
    assert isinstance(part, _LeafPart), part
    layout = part.layout
    # a plain subsystem's basis is always the product over its variables' cutoffs (`_dims`)
    assert layout is not None, part.id_str
    # scqubits reshapes a plain subsystem's states by its `cutoff_names` (periodic first),
    # its basis runs in `dynamic_var_indices` order: the same only where the shapes agree
    size = dict(zip(layout.var_indices, layout.shape, strict=True))
    cutoffs = list(part.obj.cutoff_names)
    reshaped = tuple(size[int(name.rsplit("_", 1)[1])] for name in cutoffs)
    if reshaped != tuple(layout.shape):
        raise ValueError(
            _plot_errors.HD_WF_ORDER.format(
                id_str=part.id_str, indices=indices, cutoffs=cutoffs, scqubits=reshaped,
                shape=tuple(layout.shape),
            )
        )  # fmt: skip

    def leaf(wf: jax.Array, axis: int, p: Params) -> jax.Array:
        wf = _to_basis(wf, axis, part.esys(p, part.dim)[1])
        return wf.reshape(wf.shape[:axis] + tuple(layout.shape) + wf.shape[axis + 1 :])

    return layout_axes(layout), leaf


def _to_basis(wf: jax.Array, axis: int, v: jax.Array | None) -> jax.Array:
    """`wf`'s `axis` (a part's eigenstates) in the part's basis: `sum_k v[:, k] wf[..k..]`."""
    assert v is not None  # a circuit's part has its eigenvectors
    moved = jnp.tensordot(wf, v.astype(wf.dtype), axes=([axis], [1]))
    return jnp.moveaxis(moved, -1, axis)


class _NoiseSpec:
    """What `NoiseMethods` reads of a model's spec: its kind and its channel table."""

    def __init__(self, channels_fn: Any) -> None:
        self.kind = "Circuit"
        self.channels_fn = channels_fn


class HierarchicalModel(HierarchyNoise):
    """JAX functions of a hierarchical `Circuit`'s parameters (a flat dict, as `Model`'s).

    Made by `jaxbridge.scqubits.model(circuit)` for a Circuit configured with
    `system_hierarchy`. `params` holds the circuit's symbolic parameters, external fluxes and
    charges that its subsystems and interactions use. `hamiltonian`, `eigenvals` and
    `eigensys` work under `jit`, `vmap`, `grad`, `jacfwd` and `hessian`; derivatives pass
    through every level's eigenvectors with the requested-levels rule. A subsystem purely
    harmonic in two or more variables is solved in its normal modes, as scqubits solves it
    (`_normal_modes.py`). After `circuit.configure(generate_noise_methods=True)` it has the
    noise channels scqubits generates for the Circuit, and on any hierarchical Circuit the
    custom `t1`, `tphi_1_over_f` and `transition_energy_derivative` (`_hierarchy_noise.py`;
    operators by name or as SymPy expressions in the variables, fluxes in radians).

    Attributes:
        params: the parameters and the Circuit's values.
        dim: the dimension of the top-level product basis (scqubits' `hilbertdim()`).
    """

    def __init__(self, circ: Any) -> None:
        self._part = _HierarchyPart(circ)
        _check_truncations(self._part)
        self.params: dict[str, float] = dict(self._part.defaults)
        self.dim: int = self._part.composite.dim
        self._compiled = jax.jit(self._evaluate, static_argnames=("what", "k"))
        self._elements: dict[Any, Any] = {}
        self._wf_plot_data: dict[Any, Any] = {}  # compiled `generate_wf_plot_data`s
        # noise (`HierarchyNoise`): the flat Circuit's channels, on this model's operators
        self._obj = circ
        self._composite = self._part.composite
        H = circ._hamiltonian_sym_for_numerics
        self._hd_hamiltonian = H.subs({s: 1 for s in H.free_symbols if s.name == "I"})
        names = list(self.params)
        self._spec = _NoiseSpec(
            lambda: _circuit_noise.channels(circ, self._hd_hamiltonian, names, self._hd_operator)
        )

    def __repr__(self) -> str:
        return f"jaxbridge.scqubits.HierarchicalModel(dim={self.dim}, params={self.params})"

    def _values(self, params: ParamsArg, method: str) -> dict[str, jax.Array]:
        def unknown(names: list[str]) -> str:
            known = sorted(self.params)
            return _errors.HD_UNKNOWN_PARAM.format(method=method, names=names, known=known)

        return _params.values(params, self.params, unknown)

    def _evaluate(self, values: dict[str, jax.Array], *, what: str, k: int) -> Any:
        comp = self._part.composite

        def one(P: dict[str, jax.Array]) -> Any:
            h = comp.hamiltonian(P)
            if what == "hamiltonian":
                return h
            if what == "eigenvals":
                return eigvalsh_k(h, k, dressed_structure(h.shape[-1]))
            return eigh_k(h, k, dressed_structure(h.shape[-1]))

        return _params.map_batch(one, values)

    def _count(self, evals_count: Any, method: str) -> int:
        return _params.evals_count(evals_count, self.dim, _errors.HS_EVALS_COUNT, method=method)

    def hamiltonian(self, params: ParamsArg = None) -> jax.Array:
        """The Hamiltonian in the product of the subsystems' bare bases (`(*batch, D, D)`).

        Args:
            params: a dict of some of `params`' names (scalars or arrays).

        Returns:
            scqubits' `circuit.hamiltonian()` up to the phases of the bare eigenvectors.
        """
        return self._compiled(self._values(params, "hamiltonian"), what="hamiltonian", k=0)

    def eigenvals(self, params: ParamsArg = None, evals_count: int = 6) -> jax.Array:
        """The `evals_count` lowest levels (scqubits' `circuit.eigenvals()`).

        Args:
            params: as for `hamiltonian`.
            evals_count: how many levels (static).

        Returns:
            `(*batch, evals_count)`.
        """
        k = self._count(evals_count, "eigenvals")
        return self._compiled(self._values(params, "eigenvals"), what="eigenvals", k=k)

    def eigensys(
        self, params: ParamsArg = None, evals_count: int = 6
    ) -> tuple[jax.Array, jax.Array]:
        """The `evals_count` lowest levels and their states in the product basis.

        Args:
            params: as for `hamiltonian`.
            evals_count: how many levels (static).

        Returns:
            `(*batch, k)` and `(*batch, D, k)`, each state fixed up to a phase.
        """
        k = self._count(evals_count, "eigensys")
        return self._compiled(self._values(params, "eigensys"), what="eigensys", k=k)

    def matrixelements(
        self, operator: Any, params: ParamsArg = None, evals_count: int = 6
    ) -> jax.Array:
        """`<i|O|j>` between the `evals_count` lowest eigenstates (scqubits'
        `circuit.matrixelement_table`).

        Args:
            operator: an operator of one subsystem's variables: a SymPy expression in them
                (`sympy.Symbol("Q1")`, `sympy.cos(sympy.Symbol("θ1"))`), or by name
                (`"Q1_operator"`, `"θ2_operator"`, `"cosθ1_operator"`).
            params: as for `hamiltonian`.
            evals_count: how many levels (static).

        Returns:
            `(*batch, k, k)`, in this model's eigenvector phases (each eigenvector's largest
            component in its first half real and positive, as scqubits fixes them); moduli
            and other gauge-invariant combinations equal scqubits' and are differentiable.

        Raises:
            ValueError: an unknown name, or an operator spanning two subsystems.
            TypeError: an operator that is neither a name nor a SymPy expression.
        """
        k = self._count(evals_count, "matrixelements")
        expr = self._expression(operator)
        fn = self._elements.get(expr)
        if fn is None:
            op, _ = self._part.lifted(expr)
            comp = self._part.composite

            def elements(values: dict[str, jax.Array], k: int) -> jax.Array:
                def one(P: dict[str, jax.Array]) -> jax.Array:
                    h = comp.hamiltonian(P)
                    _, v = eigh_k(h, k, dressed_structure(h.shape[-1]))
                    v = fix_phases(v)
                    o = op(P)
                    dtype = jnp.result_type(o.dtype, v.dtype)
                    v, o = v.astype(dtype), o.astype(dtype)
                    return v.conj().T @ o @ v

                return _params.map_batch(one, values)

            fn = self._elements[expr] = jax.jit(elements, static_argnames="k")
        return fn(self._values(params, "matrixelements"), k=k)

    def generate_wf_plot_data(
        self,
        params: ParamsArg = None,
        which: int = 0,
        mode: str = "abs-sqr",
        var_indices: tuple[int, ...] = (1,),
        change_discrete_charge_to_phi: bool = True,
        grids_dict: Any = None,
        evals_count: int | None = None,
    ) -> jax.Array:
        """The Circuit's wavefunction data as scqubits' `generate_wf_plot_data`.

        Level `which` taken back, through each subsystem holding a variable of
        `var_indices`, to that subsystem's own basis (its eigenvectors at `params`: the ones
        the Hamiltonian is built on), one axis per variable; then each plotted variable in
        the phi basis as for a flat Circuit's (`Model.generate_wf_plot_data`: periodic ones
        Fourier-summed, harmonic-basis ones on their oscillator functions at `params`), and
        every other axis summed over (`mode="abs-sqr"`).

        Args:
            params: as for `hamiltonian` (in place of scqubits' `eigensys`).
            which, mode, var_indices, change_discrete_charge_to_phi, grids_dict,
                evals_count: as for a flat Circuit's `generate_wf_plot_data`.

        Returns:
            `(*batch, *plotted axes)` in scqubits' axis order, equal to scqubits' in
            `"abs-sqr"`; under `jit`, `vmap` and `grad`.

        Raises:
            ValueError: as for a flat Circuit's, and where scqubits 4.3.1's own result is
                wrong (a subsystem in normal modes, cutoffs out of order, axes it misplaces).
        """
        part = self._part

        def plan(indices: tuple[int, ...]) -> Any:
            axes, expand = _wf_plan(part, set(indices), indices, top=True)
            return axes, lambda p, psi: expand(psi, 0, p)

        return circuit_plot_data(
            kind="HierarchicalModel",
            dim=self.dim,
            known=list(part.circ.dynamic_var_indices),
            plan=plan,
            eigensys=lambda values, count: self.eigensys(values, count),
            values=lambda: self._values(params, "generate_wf_plot_data"),
            cache=self._wf_plot_data,
            which=which,
            mode=mode,
            var_indices=var_indices,
            change_discrete_charge_to_phi=change_discrete_charge_to_phi,
            grids_dict=grids_dict,
            evals_count=evals_count,
        )

    def potential_energy(self, params: ParamsArg = None, **coordinates: Any) -> jax.Array:
        """The Circuit's potential as scqubits' `potential_energy(θ1=..., ...)`.

        scqubits reads it from the whole Circuit's symbolic potential, whatever the
        hierarchy; so does this (`Model.potential_energy` of a flat Circuit).

        Args:
            params: as for `hamiltonian`; an external flux or symbolic parameter of the
                potential that is not one of `params` keeps the Circuit's value.
            coordinates: a value for every variable `θ<i>` (scalars or 1-D arrays, crossed
                with `meshgrid` as scqubits).

        Returns:
            `(*batch, *grid)`, equal to scqubits'.

        Raises:
            ValueError: the potential has a sawtooth, a variable left out, or a keyword that
                is not a variable.
        """
        if "_potential" not in self.__dict__:
            self.__dict__["_potential"] = potential_energy_fn(self._part.circ)  # lambdified once
        values = lambda: self._values(params, "potential_energy")
        energy = self.__dict__["_potential"]
        return circuit_potential_energy(energy, "HierarchicalModel", values, coordinates)

    def _expression(self, operator: Any) -> Any:
        """The SymPy expression of `operator` (a name or an expression), checked to act on
        one subsystem's variables."""
        variables = {str(s): s for s in _variable_symbols(self._part.circ)}
        if isinstance(operator, str):
            name = operator.removesuffix("_operator")
            fn = None
            for prefix, f in (("cos", sympy.cos), ("sin", sympy.sin)):
                if name.startswith(prefix) and name[len(prefix) :] in variables:
                    name, fn = name[len(prefix) :], f
            if not operator.endswith("_operator") or name not in variables:
                raise ValueError(
                    HD_OPERATOR_NAME.format(name=operator, variables=sorted(variables))
                )
            symbol = variables[name]
            expr = fn(symbol) if fn is not None else symbol
        elif _is_sympy(operator):
            expr = sympy.sympify(operator)
        else:
            raise TypeError(
                HD_OPERATOR_KIND.format(variables=sorted(variables), got=type(operator).__name__)
            )
        symbols = sorted(expr.free_symbols & set(variables.values()), key=str)
        unknown = sorted(str(s) for s in expr.free_symbols - set(variables.values()))
        unknown = [u for u in unknown if u not in self.params]
        if not symbols or unknown:
            raise ValueError(
                HD_OPERATOR_NAME.format(name=str(operator), variables=sorted(variables))
            )
        roots = {id(self._part._root(_index(s))) for s in symbols}
        if len(roots) != 1:
            raise ValueError(HD_OPERATOR_SPANS.format(expr=expr, symbols=[str(s) for s in symbols]))
        return expr

    def _hd_operator(self, expr: Any) -> HierarchyOperator:
        """A SymPy expression of the circuit's variables (fluxes in radians, as in the
        Circuit's `_hamiltonian_sym_for_numerics`) as an operator of the product basis; a
        parameter that is not one of `params` takes the Circuit's value."""
        expr = sympy.sympify(expr)
        expr = expr.subs({s: 1 for s in expr.free_symbols if s.name == "I"})
        frozen = {
            s: float(getattr(self._part.circ, s.name))
            for s in expr.free_symbols & set(param_symbols(self._part.circ))
            if s.name not in self.params
        }
        terms = self._part.product_terms(sympy.expand(expr.subs(frozen)), dict(self.params))
        return HierarchyOperator(self._composite, terms, expr)

    def _hd_expression(self, operator: Any, method: str) -> Any:
        """A noise method's operator (a name or a SymPy expression) as a SymPy expression,
        checked to be of the circuit's variables and parameters."""
        variables = {str(s): s for s in _variable_symbols(self._part.circ)}
        if isinstance(operator, str):
            return self._expression(operator)
        if not _is_sympy(operator):
            raise TypeError(
                HD_NOISE_OPERATOR.format(
                    method=method, variables=sorted(variables), got=type(operator).__name__
                )
            )
        expr = sympy.sympify(operator)
        known = set(variables) | set(self.params) | {"I"}
        known |= {str(s) for s in param_symbols(self._part.circ)}
        if any(str(s) not in known for s in expr.free_symbols):
            raise ValueError(
                HD_OPERATOR_NAME.format(name=str(operator), variables=sorted(variables))
            )
        return expr
