"""What users plot: wavefunctions on grids, potentials and operators as matrices at given params.

A qubit's `Spec.wave` (a `_spec.Wave`, built in the qubit's file in `qubits/` from `_spec`'s
helpers: scqubits 4.3.1's oscillator functions, Fourier factors and `standardize_phases` in
JAX) says how scqubits turns an eigenvector into amplitudes on a grid and what its potential
is; `PlotMethods`, a base of `Model`, serves `operator`, `wavefunction` and `potential` from it
and from the model's own `eigensys` and operator terms; a flat Circuit's `Spec.layout` and
`Spec.potential_energy` serve scqubits' `generate_wf_plot_data` and `potential_energy`
(`circuit_plot_data`, `circuit_potential_energy`, which a hierarchical Circuit's model calls
with its own plan of axes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _errors, _params
from ._spec import CircuitLayout, PotentialEnergy, Wave, expi, grid_points, hermite_functions
from ._terms import Params, Terms, complex_of

ParamsArg = Mapping[str, Any] | None


class Wavefunction(NamedTuple):
    """One eigenstate on a grid, as scqubits' `WaveFunction` / `WaveFunctionOnGrid` hold it.

    Attributes:
        basis_labels: the grid's points; for a 2-D or 3-D wavefunction a tuple of 1-D grids in
            scqubits' `gridspec` order (`(phi, theta)` for a ZeroPi, `(phi1, phi2)` for a
            FluxQubit, `(phi, zeta, theta)` for a Cos2PhiQubit).
        amplitudes: complex amplitudes, scqubits' array shape (`(*batch, *grid)`; a ZeroPi's is
            `(theta, phi)`, as scqubits').
        energy: the level's eigenvalue, `(*batch,)`.
    """

    basis_labels: Any
    amplitudes: jax.Array
    energy: jax.Array


class PlotMethods:
    """`operator`, `wavefunction`, `potential` and, for a flat Circuit, `generate_wf_plot_data`
    and `potential_energy`: a base of `Model` (its `_spec`, `_values`, `_run`,
    `_operator_terms` and `eigensys`)."""

    _spec: Any
    dim: int

    if TYPE_CHECKING:  # what `Model` provides

        def _values(self, params: ParamsArg, method: str) -> dict[str, jax.Array]: ...
        def _run(self, what: str, params: ParamsArg, k: int = 0, path: str = "dense",
                 op: Any = None) -> Any: ...  # fmt: skip
        def _operator_terms(self, operator: Any) -> Terms: ...
        def eigensys(self, params: ParamsArg = None, evals_count: int = 6,
                     method: str = "auto") -> tuple[jax.Array, jax.Array]: ...  # fmt: skip
        def matrixelements(self, operator: Any, params: ParamsArg = None, evals_count: int = 6,
                           method: str = "auto") -> jax.Array: ...  # fmt: skip

    def operator(
        self,
        name: Any,
        params: ParamsArg = None,
        eigenbasis: bool = False,
        evals_count: int = 6,
        method: str = "auto",
    ) -> jax.Array:
        """One of the object's operators as a matrix at `params`: scqubits' `<name>()`.

        Args:
            name: the name of one of the object's operator methods (`"n_operator"`,
                `"phi_operator"`, `"cos_phi_operator"`, ...; for a `Circuit` also a SymPy
                expression in its variables). Operators that take arguments in scqubits
                (Fluxonium's `cos_phi_operator(alpha, beta)`) are their defaults'.
            params: as for `hamiltonian`; parameter-dependent operators (a Fluxonium's, whose
                oscillator basis depends on `EC` and `EL`) are recomputed there.
            eigenbasis: False: the model's native basis (scqubits' `energy_esys=False`); True:
                `<i|O|j>` between the `evals_count` lowest eigenstates (`energy_esys=True`),
                each state fixed up to a phase as in scqubits.
            evals_count: the eigenbasis' size (static), with `eigenbasis=True`.
            method: as for `eigensys`, with `eigenbasis=True`.

        Returns:
            `(*batch, N, N)` (or `(*batch, k, k)`), equal to scqubits' matrix of an object made
            at those params; under `jit`, `vmap` and `grad` (float64 with x64).

        Raises:
            ValueError: the object has no operator of that name, or it is not a name.

        Example:
            >>> import scqubits, jaxbridge.scqubits as jbq
            >>> m = jbq.model(scqubits.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.5, cutoff=10))
            >>> m.operator("phi_operator", {"EL": 1.0}).shape
            (10, 10)
        """
        if not (isinstance(name, str) or type(name).__module__.startswith("sympy")):
            raise ValueError(_errors.OPERATOR_NAME.format(got=type(name).__name__))
        if eigenbasis:
            return self.matrixelements(name, params, evals_count, method)
        return self._run("operator", params, op=self._operator_terms(name))

    def _wave(self, method: str) -> Wave:
        wave = getattr(self._spec, "wave", None)
        if wave is None:
            why = _errors.NO_WAVE_WHY.get(self._spec.kind, "scqubits has none for it")
            raise ValueError(_errors.NO_WAVE.format(method=method, kind=self._spec.kind, why=why))
        return wave

    def wavefunction(
        self,
        params: ParamsArg = None,
        which: int = 0,
        evals_count: int | None = None,
        method: str = "auto",
        **grids: Any,
    ) -> Wavefunction:
        """Level `which`'s wavefunction on a grid: scqubits' `wavefunction(esys, which, ...)`.

        Args:
            params: as for `hamiltonian` (in place of scqubits' `esys`: the states are this
                model's `eigensys(params)`).
            which: the level (static), 0 the ground state.
            evals_count: the levels diagonalised for it (static); default `max(which + 1, 3)`,
                as scqubits.
            method: as for `eigensys`.
            grids: scqubits' grid keywords for the class (`phi_grid=` for a Transmon,
                Fluxonium or FluxQubit; `theta_grid=` for a ZeroPi; `phi_grid=`,
                `zeta_grid=`, `theta_grid=` for a Cos2PhiQubit), each a scqubits `Grid1d` or
                a 1-D array of points (a JAX array works under `jit`); default the object's.

        Returns:
            A `Wavefunction` (`basis_labels`, `amplitudes`, `energy`) of JAX arrays, the
            params' batch shape before the grid's. scqubits' formulas: the Fourier sum of the
            charge amplitudes times `i**which` (Transmon), harmonic-oscillator functions
            (Fluxonium), and scqubits' `standardize_phases` where scqubits applies it (ZeroPi,
            FluxQubit). Elsewhere the global phase is the eigenvector's, arbitrary as in
            scqubits: `|amplitudes|` is what is defined (and differentiable).

        Raises:
            ValueError: the class has no wavefunction in scqubits or here, `which` is not a
                level below `evals_count` (and the dimension), or a grid keyword is unknown.

        Example:
            >>> import scqubits, jaxbridge.scqubits as jbq
            >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=10))
            >>> m.wavefunction(which=1).amplitudes.shape
            (151,)
        """
        wave = self._wave("wavefunction")
        is_int = isinstance(which, int | np.integer)
        count: Any = evals_count
        if evals_count is None and is_int:
            count = min(max(which + 1, 3), self.dim)  # scqubits' default
        # a bad `evals_count` itself is `eigensys`' error
        bounds = _levels_bound(count, self.dim)
        if not is_int or not 0 <= which < bounds:
            raise ValueError(
                _errors.WHICH.format(got=which, count=count, dim=self.dim, kind=self._spec.kind)
            )
        known = [name for name, _ in wave.grids]
        bad = sorted(set(grids) - set(known))
        if bad:
            kind = self._spec.kind
            raise ValueError(_errors.GRID_KEYWORD.format(got=bad, kind=kind, known=known))
        points = tuple(
            jnp.asarray(grid_points(g) if hasattr(g, "make_linspace") else g)
            if (g := grids.get(name)) is not None
            else jnp.asarray(default)
            for name, default in wave.grids
        )
        for name, x in zip(known, points, strict=True):
            if x.ndim != 1:
                raise ValueError(_errors.GRID_SHAPE.format(name=name, got=x.shape))
        values = self._values(params, "wavefunction")
        w, v = self.eigensys(params, count, method)

        def one(p: Params, wv: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            return wave.amplitudes(p, wv[1][:, which], which, points), wv[0][which]

        amplitudes, energy = _params.map_batch(one, values, (w, v), core_ndims=(0, (1, 2)))
        labels = (*(jnp.asarray(x) for x in wave.fixed_labels), *points)
        if wave.label_order is not None:
            basis: Any = tuple(labels[i] for i in wave.label_order)
        else:
            basis = labels[0] if len(labels) == 1 else labels
        return Wavefunction(basis, amplitudes, energy)

    def potential(self, *coordinates: Any, params: ParamsArg = None) -> jax.Array:
        """scqubits' `potential(...)` at the coordinates, a JAX function of `params`.

        Args:
            coordinates: the class's coordinates in scqubits' order (`phi` for a Transmon or
                Fluxonium; `phi, theta` for a ZeroPi; `phi1, phi2` for a FluxQubit;
                `phi, zeta, theta` for a Cos2PhiQubit), scalars or arrays that broadcast
                together.
            params: as for `hamiltonian` (keyword only).

        Returns:
            `(*batch, *coordinates' shape)`, equal to scqubits' `potential` of an object made
            at those params (constants included where scqubits includes them).

        Raises:
            ValueError: the class has no potential, or the number of coordinates is wrong.

        Example:
            >>> import scqubits, jaxbridge.scqubits as jbq
            >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=3))
            >>> float(m.potential(0.0, params={"EJ": 10.0}))
            -10.0
        """
        wave = self._wave("potential")
        if len(coordinates) != len(wave.coordinates):
            raise ValueError(
                _errors.POTENTIAL_ARGS.format(
                    kind=self._spec.kind, names=list(wave.coordinates), got=len(coordinates)
                )
            )
        dtype = _params.real_dtype()
        xs = jnp.broadcast_arrays(*(jnp.asarray(x, dtype) for x in coordinates))
        values = self._values(params, "potential")
        return _params.map_batch(lambda p: wave.potential(p, *xs), values)

    def generate_wf_plot_data(
        self,
        params: ParamsArg = None,
        which: int = 0,
        mode: str = "abs-sqr",
        var_indices: tuple[int, ...] = (1,),
        change_discrete_charge_to_phi: bool = True,
        grids_dict: Mapping[int, Any] | None = None,
        evals_count: int | None = None,
        method: str = "auto",
    ) -> jax.Array:
        """A flat `Circuit`'s wavefunction data as scqubits' `generate_wf_plot_data`.

        Level `which` reshaped to one axis per dynamic variable; each variable of
        `var_indices` in the phi basis on `grids_dict[index]`: a periodic one Fourier-summed,
        `sum_n c_n e^{i n phi}` (where `change_discrete_charge_to_phi`), a harmonic-basis one
        summed over its oscillator functions `sum_n c_n psi_n(phi; l)`, `l` the oscillator
        length at `params` (scqubits' `osc_lengths`, differentiable here), a discretized one
        on its own grid; the other variables summed over (`mode="abs-sqr"`).

        Args:
            params: as for `hamiltonian` (in place of scqubits' `eigensys`).
            which: the level (static).
            mode: `"abs-sqr"`, or `"abs"`, `"real"`, `"imag"` when every variable is plotted.
            var_indices: the variables to keep (scqubits' indices, static).
            change_discrete_charge_to_phi: Fourier-sum periodic variables onto their grids.
            grids_dict: `{index: Grid1d or 1-D points}` for each plotted periodic (where
                changed to phi) or harmonic-basis variable.
            evals_count: the levels diagonalised (static); default `which + 1`.
            method: as for `eigensys`.

        Returns:
            `(*batch, *plotted axes)`, the axes in the Circuit's variable order; `"abs-sqr"`
            is gauge-invariant (equal to scqubits'), `"real"` and `"imag"` carry the state's
            arbitrary phase, as in scqubits. Under `jit`, `vmap` and `grad` (float64 with x64).

        Raises:
            ValueError: not a flat Circuit, an unknown variable, a missing grid, a mode that
                needs every variable, or a bad `which`.
        """
        layout: CircuitLayout | None = getattr(self._spec, "layout", None)
        if layout is None:
            raise ValueError(_errors.NO_WF_PLOT.format(kind=self._spec.kind))
        axes = layout_axes(layout)
        return circuit_plot_data(
            kind=self._spec.kind,
            dim=self.dim,
            known=layout.var_indices,
            plan=lambda _: (axes, lambda p, psi: psi.reshape(layout.shape)),
            eigensys=lambda values, count: self.eigensys(values, count, method),
            values=lambda: self._values(params, "generate_wf_plot_data"),
            cache=self.__dict__.setdefault("_wf_plot_data", {}),
            static=method,
            which=which,
            mode=mode,
            var_indices=var_indices,
            change_discrete_charge_to_phi=change_discrete_charge_to_phi,
            grids_dict=grids_dict,
            evals_count=evals_count,
        )

    def potential_energy(self, params: ParamsArg = None, **coordinates: Any) -> jax.Array:
        """A flat `Circuit`'s potential as scqubits' `potential_energy(θ1=..., ...)`.

        Args:
            params: as for `hamiltonian`: the external fluxes (in units of the flux quantum)
                and symbolic parameters; the others keep the Circuit's values.
            coordinates: a value for every variable `θ<i>`, scalars or 1-D arrays; two or more
                arrays are crossed with `meshgrid` (its `"xy"` indexing, as scqubits).

        Returns:
            `(*batch, *grid)`, equal to scqubits' at those params.

        Raises:
            ValueError: not a flat Circuit (or its potential has a sawtooth), a variable left
                out, or a keyword that is not a variable.
        """
        read = getattr(self._spec, "potential_energy", None)
        if read is not None and "_potential_energy" not in self.__dict__:
            self.__dict__["_potential_energy"] = read()  # the Circuit's, lambdified once
        energy: PotentialEnergy | None = self.__dict__.get("_potential_energy")
        values = lambda: self._values(params, "potential_energy")
        return circuit_potential_energy(energy, self._spec.kind, values, coordinates)


@dataclasses.dataclass(frozen=True)
class WaveLayout(CircuitLayout):
    """A `CircuitLayout` with each harmonic-basis variable's oscillator length.

    Attributes:
        lengths: `{index: fn}`, `fn(params)` the length `(8 EC_i / EL_i)^(1/4)` of variable
            `index`'s oscillator basis at the Circuit's parameters (scqubits' `osc_lengths`).
    """

    lengths: Mapping[int, Callable[[Params], jax.Array]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class WfAxis:
    """One axis of a Circuit's wavefunction before its change to the phi basis.

    Attributes:
        index: the variable's index; None for a subsystem's eigenstates (always summed).
        basis: `"periodic"`, `"discretized"`, `"harmonic"`, or `"eigen"` (index None).
        ncut: a periodic variable's `cutoff_n`.
        length: a harmonic-basis variable's oscillator length as a function of the params.
    """

    index: int | None
    basis: str
    ncut: int = 0
    length: Callable[[Params], jax.Array] | None = None


def layout_axes(layout: CircuitLayout) -> list[WfAxis]:
    """One `WfAxis` per variable of a (sub)circuit's basis, in its order."""
    lengths = layout.lengths if isinstance(layout, WaveLayout) else {}
    return [
        WfAxis(i, b, n, lengths.get(i))
        for i, b, n in zip(layout.var_indices, layout.bases, layout.ncuts, strict=True)
    ]


#: `plan(var_indices)`: the axes of the wavefunction made ready for those variables, and
#: `amplitudes(params, state)` that makes one state (a basis vector's components) into it.
Plan = Callable[[tuple[int, ...]], tuple[list[WfAxis], Callable[[Params, jax.Array], jax.Array]]]


def circuit_plot_data(
    *,
    kind: str,
    dim: int,
    known: Sequence[int],
    plan: Plan,
    eigensys: Callable[[dict[str, jax.Array], Any], tuple[jax.Array, jax.Array]],
    values: Callable[[], dict[str, jax.Array]],
    cache: dict[Any, Any],
    which: Any,
    mode: str,
    var_indices: tuple[int, ...],
    change_discrete_charge_to_phi: bool,
    grids_dict: Mapping[int, Any] | None,
    evals_count: int | None,
    static: Any = None,
) -> jax.Array:
    """scqubits' `Circuit.generate_wf_plot_data` for a flat or a hierarchical Circuit.

    The arguments are checked here, then one function of the params and the grids is
    compiled per choice of the static arguments and kept in `cache` (a hierarchy's first
    call runs about three times faster compiled whole than op by op).

    Args:
        kind: the model's kind, for messages.
        dim: the dimension `eigensys` diagonalises.
        known: the Circuit's dynamic variables.
        plan: the wavefunction's axes for `var_indices` and how a state becomes it.
        eigensys: `eigensys(values, count)`, the model's at every parameter's value.
        values: the caller's params, every parameter's value.
        cache: the model's compiled functions, by their static arguments.
        which, mode, var_indices, change_discrete_charge_to_phi, grids_dict, evals_count: as
            for `generate_wf_plot_data`.
        static: what else `eigensys` depends on (the flat model's `method`).

    Returns:
        `(*batch, *plotted axes)`.

    Raises:
        ValueError: a bad `which`, an unknown variable, a bad mode or a missing grid.
    """
    is_int = isinstance(which, int | np.integer)
    count: Any = which + 1 if evals_count is None and is_int else evals_count
    # a bad `evals_count` itself is `eigensys`' error
    if not is_int or not 0 <= which < _levels_bound(count, dim):
        raise ValueError(_errors.WHICH.format(got=which, count=count, dim=dim, kind=kind))
    unknown = [i for i in var_indices if i not in known]
    if unknown:
        raise ValueError(_errors.WF_VARIABLE.format(got=unknown, known=list(known)))
    if mode not in ("abs-sqr", "abs", "real", "imag"):
        raise ValueError(_errors.WF_MODE.format(got=mode))
    var_indices = tuple(int(i) for i in var_indices)
    axes, amplitudes = plan(var_indices)
    kept = [d for d, ax in enumerate(axes) if ax.index in var_indices]
    summed = tuple(d for d in range(len(axes)) if d not in kept)
    if mode != "abs-sqr" and summed:
        raise ValueError(_errors.WF_MODE_SUMMED.format(mode=mode))
    grids: dict[int, jax.Array] = {}
    for d in kept:
        ax = axes[d]
        if ax.basis == "harmonic" or (ax.basis == "periodic" and change_discrete_charge_to_phi):
            grid = (grids_dict or {}).get(ax.index)  # pyright: ignore[reportArgumentType] - kept
            if grid is None:
                message = _errors.WF_GRID if ax.basis == "periodic" else _errors.WF_GRID_HARMONIC
                raise ValueError(message.format(index=ax.index))
            points = grid_points(grid) if hasattr(grid, "make_linspace") else grid
            grids[d] = jnp.asarray(points, _params.real_dtype())
    if not all(x.ndim == 1 for x in grids.values()):
        bad = next(axes[d].index for d, x in grids.items() if x.ndim != 1)
        raise ValueError(_errors.WF_GRID_SHAPE.format(index=bad))
    # one compiled function for every level and for "abs", "real" and "imag" (the complex
    # wavefunction, its part taken after)
    summing = mode == "abs-sqr"
    key = (summing, var_indices, tuple(grids), count, static)
    fn = cache.get(key)
    if fn is None:

        def one(p: Params, vs: jax.Array, k: jax.Array, grids: dict[int, jax.Array]) -> jax.Array:
            state = jnp.take(vs, k, axis=1)
            wf = amplitudes(p, state.astype(complex_of(vs.dtype)))
            for d, phi in grids.items():
                ax = axes[d]
                if ax.basis == "periodic":
                    n = jnp.arange(-ax.ncut, ax.ncut + 1, dtype=phi.dtype)
                    change = expi(jnp.outer(n, phi))  # scqubits': no 1/sqrt(2 pi) here
                else:  # scqubits' `_basis_change_harm_osc_to_phi`, with `abs(length)`
                    if ax.length is None:
                        raise AssertionError(ax)  # every harmonic axis has its length
                    length = jnp.abs(jnp.asarray(ax.length(p), phi.dtype))
                    change = hermite_functions(wf.shape[d], phi, length)
                change = change.astype(wf.dtype)
                wf = jnp.moveaxis(jnp.tensordot(wf, change, axes=([d], [0])), -1, d)
            return jnp.sum(jnp.abs(wf) ** 2, axis=summed) if summing else wf

        def run(vals: dict[str, jax.Array], grids: dict[int, jax.Array], k: jax.Array) -> Any:
            _, v = eigensys(vals, count)
            return _params.map_batch(lambda p, vs: one(p, vs, k, grids), vals, v, core_ndims=(0, 2))

        fn = cache[key] = jax.jit(run)
    out = fn(values(), grids, jnp.asarray(which))
    if summing:
        return out
    return {"abs": jnp.abs, "real": jnp.real, "imag": jnp.imag}[mode](out)


def circuit_potential_energy(
    energy: PotentialEnergy | None,
    kind: str,
    values: Callable[[], dict[str, jax.Array]],
    coordinates: Mapping[str, Any],
) -> jax.Array:
    """scqubits' `Circuit.potential_energy(θ1=..., ...)` of a flat or hierarchical Circuit.

    Args:
        energy: the Circuit's symbolic potential in JAX; None where it has a sawtooth.
        kind: the model's kind, for messages.
        values: the caller's params, every parameter's value.
        coordinates: as for `potential_energy`.

    Returns:
        `(*batch, *grid)`.

    Raises:
        ValueError: no potential, a variable left out, or a keyword that is not a variable.
    """
    if energy is None:
        raise ValueError(_errors.NO_POTENTIAL_ENERGY.format(kind=kind))
    missing = [n for n in energy.coordinates if n not in coordinates]
    extra = sorted(set(coordinates) - set(energy.coordinates))
    if missing or extra:
        raise ValueError(
            _errors.POTENTIAL_ENERGY_ARGS.format(
                missing=missing, extra=extra, known=list(energy.coordinates)
            )
        )
    dtype = _params.real_dtype()
    xs = {n: jnp.asarray(x, dtype) for n, x in coordinates.items()}
    swept = [n for n, x in xs.items() if x.ndim > 0]
    if len(swept) > 1:
        xs.update(zip(swept, jnp.meshgrid(*(xs[n] for n in swept)), strict=True))

    def one(p: Params) -> jax.Array:
        others = [p[n] if n in p else energy.defaults[n] for n in energy.defaults]
        return jnp.asarray(energy.fn(*(xs[n] for n in energy.coordinates), *others))

    return _params.map_batch(one, values())


def _levels_bound(count: Any, dim: int) -> int:
    """The levels `which` may index: below `count` where it is an integer, else below `dim`."""
    return min(int(count), dim) if isinstance(count, int | np.integer) else dim
