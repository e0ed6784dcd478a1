"""The text of every error `jaxbridge.scqubits` raises; tests pin these strings."""

NEEDS_SCQUBITS = "`jaxbridge.scqubits` needs scqubits: `pip install jaxbridge[scqubits]`"

UNSUPPORTED = (
    "`jaxbridge.scqubits.model`: no model for an object of type `{got}`. Supported: {supported}. "
    "Composite systems (`HilbertSpace`, `ParameterSweep`) are not supported."
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
    "`matrixelements`: `{kind}` has no operator `{name}` that this model can compute as a "
    "function of the parameters. Use one of {known}, pass a matrix of shape ({dim}, {dim}), "
    "or (for a `Circuit`) a SymPy expression in its variables."
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
