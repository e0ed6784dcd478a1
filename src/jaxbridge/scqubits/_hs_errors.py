"""The text of every error the composite models (`HilbertSpace`, hierarchical `Circuit`) raise;
tests pin these strings."""

HS_SUBSYSTEM = (
    "`jaxbridge.scqubits.model(hilbertspace)`: subsystem `{id_str}` is a `{got}`, which has no "
    "model. Subsystems may be the classes `model` supports, `Oscillator`, `KerrOscillator` and "
    "`GenericQubit`."
)

HS_HD_SUBSYSTEM = (
    "`jaxbridge.scqubits.model(hilbertspace)`: subsystem `{id_str}` is a `Circuit` with "
    "hierarchical diagonalization; as a subsystem of another `HilbertSpace` it is not "
    "supported. Model the Circuit on its own (`model(circuit)`), or build it without "
    "`system_hierarchy`."
)

HS_ID_STR = (
    '`jaxbridge.scqubits.model(hilbertspace)`: a subsystem\'s `id_str` is "g", the key of the '
    "interaction strengths in `params`. Give the subsystem another `id_str`."
)

HS_TRUNCATED_DIM = (
    "`jaxbridge.scqubits.model(hilbertspace)`: subsystem `{id_str}` has truncated_dim={got}; it "
    "must be between 1 and its Hilbert-space dimension {dim}."
)

HS_CALLABLE = (
    "{where}: the operator {got!r} is not an operator method of that term's subsystem. Pass a "
    "bound method (`qubit.n_operator`) or a matrix with its subsystem: `(matrix, qubit)`."
)

HS_OPERATOR_SHAPE = (
    "{where}: the operator for subsystem `{id_str}` must have shape ({dim}, {dim}), that "
    "subsystem's own basis; got {got}."
)

HS_UNKNOWN_OPERATOR = (
    "{where}: subsystem `{id_str}` has no operator `{name}` this model can compute; use one of "
    "{known}, or pass a matrix with its subsystem: `(matrix, subsystem)`."
)

HS_NO_L_OSC = (
    "{where}: `{id_str}.{name}` needs the oscillator length, and `l_osc` is None. Set `l_osc` "
    "on the Oscillator (scqubits raises here too)."
)

HS_QOBJ = (
    "`jaxbridge.scqubits.model(hilbertspace)`: interaction term {index} is a fixed `Qobj` "
    "(`add_interaction(qobj=...)`). Its matrix elements refer to the phases scqubits' "
    "eigensolver happened to give each bare eigenvector, which the model cannot reproduce, so "
    "its numbers would differ silently. Give the term as operators instead: "
    "`add_interaction(g=..., op1=..., op2=...)` or `expr=`."
)

HS_WRAPPED = (
    "`jaxbridge.scqubits.model(hilbertspace)`: interaction term {index} uses an operator given "
    "as a function of the bare eigensystems ({names}); give it as `(name, matrix, subsystem)` "
    "or `(name, subsystem.method)`."
)

HS_TERM_TYPE = (
    "`jaxbridge.scqubits.model(hilbertspace)`: interaction term {index} is a `{got}`; expected "
    "an `InteractionTerm` or `InteractionTermStr`."
)

HS_SQRTM = (
    "`expr=`: `sqrt(...)`/`sqrtm(...)` of an operator is not supported by the model (its "
    "derivative needs the operator's spectrum); write the term without it."
)

HS_EXPR_RESULT = (
    "`expr=`: the interaction {expr!r} must evaluate to an operator; it gave a `{got}`."
)

HS_UNKNOWN_KEY = (
    "`{method}`: unknown key {names} in `params`. Its keys are the subsystems' `id_str`s "
    '{known} and "g".'
)

HS_UNKNOWN_PARAM = (
    "`{method}`: unknown parameter {names} for subsystem `{id_str}`. Its parameters are {known}."
)

HS_G_LENGTH = (
    '`{method}`: `params["g"]` must be a list of {n} entries (one per interaction term, None '
    "keeps a term's value) or a dict from term index to value; got {got}."
)

HS_G_CONST = (
    '`{method}`: `params["g"][{index}]` belongs to an `expr=` term: it must be a dict of some of '
    "its constants {known}; got {got!r}."
)

HS_COMPLEX = (
    "`{method}`: {where} is complex, but this model's value there is real and its Hamiltonian "
    "real. Make the value complex on the scqubits object (e.g. `g=0.1+0j`) and call `model` "
    "again."
)

HS_BARE = (
    "`{method}`: the bare label {got!r} must be a tuple of {n} integers, one per subsystem, "
    "each below that subsystem's truncated_dim {dims}."
)

HS_ID = "`{method}`: no subsystem with id_str {got!r}; the subsystems are {known}."

HS_EVALS_COUNT = "`{method}(evals_count=...)` must be an integer between 1 and {most}; got {got!r}."

HD_SPANS = (
    "`jaxbridge.scqubits.model`: the hierarchical Circuit's interaction term `{term}` has the "
    "factor `{factor}`, a function of variables of two subsystems; the model takes each factor "
    "in one subsystem. Put those variables in one subsystem of `system_hierarchy`."
)

HD_UNKNOWN_PARAM = (
    "`{method}`: unknown parameter {names} for this hierarchical `Circuit` model. Its "
    "parameters are {known} (`model.params`); cutoffs and truncations are static: make a new "
    "Circuit to change them."
)

HD_NORMAL_MODES_KIND = (
    "`jaxbridge.scqubits.model`: the hierarchical Circuit's subsystem {indices} is purely "
    "harmonic, but not every one of its variables is extended (the extended ones are "
    "{extended}); scqubits' normal modes cover extended variables only, and the model does not "
    "guess the rest. Put the other variables in a subsystem of their own in `system_hierarchy`."
)

HD_NORMAL_MODES_CUTOFFS = (
    "`jaxbridge.scqubits.model`: the hierarchical Circuit's subsystem {indices} is purely "
    "harmonic and solved in its normal modes, but its cutoffs {cutoffs} differ; scqubits gives "
    "the normal modes those cutoffs in the order NumPy's non-symmetric `eig` returns the modes, "
    "which the model cannot reproduce, so its numbers could differ silently. Give the variables "
    "one cutoff (`cutoff_ext_i`)."
)

HD_NORMAL_MODES_DEGREE = (
    "`jaxbridge.scqubits.model`: the hierarchical Circuit's subsystem {indices} is marked purely "
    "harmonic, but its Hamiltonian `{expr}` has terms of degree above 2 in its variables, which "
    "normal modes do not diagonalize."
)

HD_NORMAL_MODES_EXPR = (
    "`jaxbridge.scqubits.model`: {what} of the hierarchical Circuit's purely harmonic subsystem "
    "{indices}, `{expr}`, is not a polynomial in that subsystem's θ and Q variables; in normal "
    "modes the model takes only such polynomials (no cos, sin, exp or sqrt of them, no ladder "
    "operators by name)."
)

HD_NORMAL_MODES_MIXED = (
    "`jaxbridge.scqubits.model`: {what} of the hierarchical Circuit's purely harmonic subsystem "
    "{indices} has the term `{term}`, a product of θ and Q variables; in the truncated normal "
    "modes θ and Q do not commute, and the order scqubits multiplies them in is not one the "
    "model can know, so its numbers could differ silently. Write the term without such products."
)

HS_DRESSED = (
    "`{method}`: the dressed index must be an integer from 0 to {k} - 1 (the levels "
    "diagonalised for); got {got!r}."
)
