"""The text of every error `jaxbridge.scqubits` raises; tests pin these strings."""

NEEDS_SCQUBITS = "`jaxbridge.scqubits` needs scqubits: `pip install jaxbridge[scqubits]`"

UNSUPPORTED = (
    "`jaxbridge.scqubits.model`: no model for an object of type `{got}`. Supported: {supported}. "
    "For composite systems pass the `HilbertSpace` itself (a `ParameterSweep` is a `vmap` of its "
    "model)."
)

UNKNOWN_PARAM = (
    "`{method}`: unknown parameter {names} for this `{kind}` model. Its parameters are "
    "{known} (`model.params`); cutoffs and grids are static: make a new object to change them."
)

METHOD = '`{method}(method=...)` must be "auto", "dense" or "sparse"; got {got!r}.'

EVALS_COUNT = (
    "`{method}(evals_count=...)` must be an integer between 1 and {most} (the dimension{minus}); "
    "got {got!r}."
)

UNKNOWN_OPERATOR = (
    "`matrixelements`, `operator`: `{kind}` has no operator `{name}` that this model can "
    "compute as a function of the parameters. Use one of {known}, pass a matrix of shape "
    "({dim}, {dim}), or (for a `Circuit`) a SymPy expression in its variables."
)

OPERATOR_SHAPE = (
    "`matrixelements`: the operator must be a matrix of shape ({dim}, {dim}), the model's "
    "dimension; got shape {got}."
)

SPARSE_DERIVATIVE = (
    "`{method}` on the sparse path (dimension {dim}) has derivatives only for eigenvalues, "
    "to first order (Hellmann-Feynman). For eigenvector or second derivatives use "
    '`method="dense"` (memory ~ {mib} MiB for H) or smaller cutoffs.'
)

SPARSE_FAILED = (
    "`{method}`: SciPy's shift-invert `eigsh` failed for the {k} lowest levels of the "
    'dimension-{dim} Hamiltonian ({why}). Try `method="dense"` or other cutoffs.'
)

CIRCUIT_HD = (
    "`jaxbridge.scqubits.model`: this `Circuit` uses hierarchical diagonalization "
    "(`system_hierarchy`), whose basis is itself a diagonalization. Build the Circuit without "
    "`system_hierarchy`."
)

CIRCUIT_PURELY_HARMONIC = (
    '`jaxbridge.scqubits.model`: a purely harmonic `Circuit` with `ext_basis="harmonic"` is '
    "solved by scqubits in its normal-mode basis, which this model does not reproduce. Use "
    '`ext_basis="discretized"`.'
)

CIRCUIT_SYMBOL = (
    "`jaxbridge.scqubits.model`: the Circuit's Hamiltonian uses `{symbol}`, which has no "
    "`{symbol}_operator` method on the Circuit."
)

CIRCUIT_HARMONIC_PRODUCT = (
    "`jaxbridge.scqubits.model`: `{term}` is a cosine of two or more harmonic-basis variables "
    "whose oscillator lengths depend on the parameters; it is not a function of one fixed "
    'operator. Use `ext_basis="discretized"` for them, or fix the capacitances and '
    "inductances those lengths depend on."
)

CIRCUIT_PERIODIC_MULTIPLE = (
    "`jaxbridge.scqubits.model`: `{node}` takes `θ{i}` times {c}, but `θ{i}` is a periodic "
    "variable (charge basis), where only whole multiples `cos(k*θ{i})`, `sin(k*θ{i})` are "
    "operators. Use an integer multiple, or a circuit in which the variable is extended."
)

CIRCUIT_DROPPED = (
    "`{method}`: {names} cannot be varied: scqubits substituted their values into this "
    "Circuit's symbolic Hamiltonian (`_hamiltonian_sym_for_numerics`), so the model cannot "
    "differentiate them. Its parameters are {known}. Set the value on the Circuit and call "
    "`model` again."
)

OPERATOR_NAME = (
    '`operator`: give the name of one of the object\'s operator methods (`"n_operator"`, ...) '
    "or, for a `Circuit`, a SymPy expression; got a `{got}`. A fixed matrix needs no model: "
    "pass it to `matrixelements` for its elements between eigenstates."
)

NO_WAVE = "`{method}`: this `{kind}` model has no {method}: {why}."

NO_WAVE_WHY = {
    "Circuit": (
        "scqubits' `Circuit` has no `wavefunction` or `potential` methods; use "
        "`generate_wf_plot_data(params, which, var_indices=..., grids_dict=...)` and "
        "`potential_energy(params, θ1=..., ...)`, as scqubits' Circuit has them"
    ),
}
"""Why a class has no wavefunction or potential, by class name (the default: scqubits has none)."""

WHICH = (
    "`wavefunction(which=...)` must be a level index from 0 to below evals_count={count} and "
    "the dimension {dim} of this `{kind}` model; got {got!r}. Pass a larger `evals_count` (or "
    "larger cutoffs on the scqubits object)."
)

GRID_KEYWORD = (
    "`wavefunction`: unknown grid keyword {got} for a `{kind}`; it takes {known} (a scqubits "
    "`Grid1d` or a 1-D array of points each)."
)

GRID_SHAPE = (
    "`wavefunction({name}=...)` must be a `Grid1d` or a 1-D array of points; got shape {got}."
)

POTENTIAL_ARGS = (
    "`potential`: a `{kind}`'s potential takes {names} (as scqubits' `potential`), then "
    "`params=` by keyword; got {got} coordinate(s)."
)

FULL_ZERO_PI_OPERATOR = (
    "`matrixelements`: a `FullZeroPi` model takes the operators {known} by name (the inner "
    "ZeroPi's, as scqubits' FullZeroPi has them); got {name!r}."
)

FULL_ZERO_PI_D_HAMILTONIAN = (
    "`d_hamiltonian`: a `FullZeroPi`'s derivative operators are scqubits' inner-ZeroPi ones, "
    "for {known}; got {name!r}. For the disorders `dC`, `dEL` take `jax.grad` of `eigenvals`."
)

NO_WF_PLOT = (
    "`generate_wf_plot_data`: a `{kind}` model has none; it is a `Circuit`'s, flat or "
    "hierarchical, whose basis factors by variable as its cutoffs say (scqubits' "
    "`Circuit.generate_wf_plot_data`). For a qubit use `wavefunction`."
)

WF_VARIABLE = (
    "`generate_wf_plot_data(var_indices=...)`: {got} are not this Circuit's dynamic variables "
    "{known}."
)

WF_MODE = (
    '`generate_wf_plot_data(mode=...)` must be "abs-sqr", "abs", "real" or "imag"; got {got!r}.'
)

WF_MODE_SUMMED = (
    '`generate_wf_plot_data(mode="{mode}")` needs every variable in `var_indices` (the others '
    'are summed over, as scqubits refuses too); use mode="abs-sqr" or name every variable.'
)

WF_GRID = (
    "`generate_wf_plot_data`: the periodic variable {index} needs its phi grid: pass "
    "`grids_dict={{{index}: scqubits.Grid1d(...)}}` (or 1-D points), or "
    "`change_discrete_charge_to_phi=False` for its charges."
)

WF_GRID_HARMONIC = (
    "`generate_wf_plot_data`: the harmonic-basis variable {index} needs its phi grid, on "
    "which its oscillator functions are evaluated: pass "
    "`grids_dict={{{index}: scqubits.Grid1d(...)}}` (or 1-D points)."
)

WF_GRID_SHAPE = (
    "`generate_wf_plot_data(grids_dict=...)`: the grid of variable {index} must be a "
    "`Grid1d` or a 1-D array of points."
)

HD_WF_NORMAL_MODES = (
    "`generate_wf_plot_data`: variable {index} is in {id_str}, purely harmonic in {indices}, "
    "which scqubits 4.3.1 solves in its normal modes; its `generate_wf_plot_data` then "
    "evaluates each normal mode's oscillator functions as if the mode were one of the "
    "variables, which they are not, so this model does not reproduce it. Leave {indices} out "
    "of `var_indices` (their subsystem is then summed in its eigenbasis, as scqubits does)."
)

HD_WF_ORDER = (
    "`generate_wf_plot_data`: {id_str}'s basis is the product over its variables in the order "
    "{indices}, of shape {shape}, but scqubits 4.3.1 reshapes its states in the order of its "
    "`cutoff_names` {cutoffs} (periodic variables first, each kind in the Circuit's order), to "
    "{scqubits}, so scqubits' plot of its variables is wrong and this model does not "
    "reproduce it. List the subsystem's variables in that order in `system_hierarchy`, or "
    "leave {indices} out of `var_indices`."
)

HD_WF_AXES = (
    "`generate_wf_plot_data(var_indices={got})`: scqubits 4.3.1 looks for {id_str}'s states at "
    "axis {scqubits} of the partly expanded wavefunction, where they are at axis {axis} (its "
    "`_reshape_and_change_to_variable_basis` and `_recursive_basis_change` count an earlier "
    "subsystem's axes by its variables, or as one, not as it was expanded), so scqubits' "
    "result is wrong or an error and this model does not reproduce it. Plot variables of "
    "fewer subsystems at once."
)

NO_POTENTIAL_ENERGY = (
    "`potential_energy`: a `{kind}` model has none; it is a `Circuit`'s, flat or "
    "hierarchical, whose potential has no sawtooth (`saw`) junction (scqubits' "
    "`Circuit.potential_energy`). For a qubit use `potential`."
)

POTENTIAL_ENERGY_ARGS = (
    "`potential_energy`: give every variable {known} by keyword (missing {missing}); the "
    "external fluxes and symbolic parameters go in `params=` (not variables: {extra})."
)
