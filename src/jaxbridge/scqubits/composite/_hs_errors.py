"""The text of every error the composite models (`HilbertSpace`, hierarchical `Circuit`) raise;
tests pin these strings."""

HS_SUBSYSTEM = (
    "`jaxbridge.scqubits.model(hilbertspace)`: subsystem `{id_str}` is a `{got}`, which has no "
    "model. Subsystems may be the classes `model` supports, `Oscillator`, `KerrOscillator`, "
    "`GenericQubit` and `FullZeroPi`."
)

HS_FULL_ZERO_PI_MATRIX = (
    "{where}: subsystem `{id_str}` is a `FullZeroPi`, whose own basis is its inner ZeroPi's "
    "eigenstates times the zeta Fock states; that basis moves with the parameters, and scqubits' "
    "eigensolver picks the inner states' phases at each point, so a fixed matrix in it is another "
    "operator at each point. Give the operator as a bound method of the FullZeroPi, one of "
    "{known}."
)

HS_FULL_ZERO_PI_INNER = (
    "`jaxbridge.scqubits.model(hilbertspace)`: to take a matrix in scqubits' bare eigenbasis of "
    "the `FullZeroPi` `{id_str}` to the model's, the inner ZeroPi's kept states of scqubits and "
    "of the model must span one space, and they do not (largest |U^dagger U - 1| {off:.3g}): an "
    "inner level is degenerate across `zeropi_cutoff`. Change `zeropi_cutoff`, or give the term "
    "as operators (`add_interaction(g=..., op1=..., op2=...)`)."
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

HS_QOBJ_SHAPE = (
    "`jaxbridge.scqubits.model(hilbertspace)`: interaction term {index} is a `Qobj` of shape "
    "{got}; a fixed operator on the composite space must be ({dim}, {dim}), the product of the "
    "truncated_dims {dims}."
)

HS_QOBJ_HERMITIAN = (
    "`jaxbridge.scqubits.model(hilbertspace)`: interaction term {index} is a `Qobj` that is not "
    "Hermitian (largest |Q - Q^dagger| {got:.3g}); the model's Hamiltonian must be Hermitian. "
    "Add the Hermitian conjugate to the Qobj."
)

HS_QOBJ_PHASES = (
    "`jaxbridge.scqubits.model(hilbertspace)`: interaction term {index} is a fixed `Qobj` in "
    "scqubits' bare eigenbasis, but bare level {level} of subsystem `{id_str}` is degenerate "
    "(overlap {overlap:.3g} with the model's eigenvector), so which basis the Qobj refers to "
    "is the eigensolver's choice, not one the model can know. Give the term as operators: "
    "`add_interaction(g=..., op1=..., op2=...)` or `expr=`."
)

HS_BARE_PHASES = (
    "`op_in_dressed_eigenbasis(op_in_bare_eigenbasis=True)`: the matrix is in scqubits' bare "
    "eigenbasis, but bare level {level} of subsystem `{id_str}` is degenerate (overlap "
    "{overlap:.3g} with the model's eigenvector), so which basis it refers to is the "
    "eigensolver's choice. Pass the operator in the subsystem's own basis, or by name."
)

HS_G_QOBJ = (
    '`{method}`: `params["g"][{index}]` belongs to a fixed `qobj=` term, which has no '
    "parameter; leave it None. Got {got!r}."
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

HS_ORDERING = (
    '`{method}(ordering=...)` must be one of "DE", "LX" and "BE" (scqubits\' '
    "`generate_lookup` orderings); got {got!r}."
)

HS_PRIORITY = (
    "`{method}(subsys_priority=...)` must be a permutation of the subsystem indices "
    "0..{last} (scqubits' rule); got {got!r}."
)

HS_LX_EVALS = (
    '`{method}`: ordering "LX" labels every bare state and needs the whole dressed spectrum, '
    "`evals_count` None (or {dim}); got {got!r}. scqubits raises for fewer eigenstates too."
)

HS_LX_INCOMPLETE = (
    'ordering "{ordering}": the {k} dressed states diagonalised for ran out before every bare '
    "state to label had one (scqubits fails here too); diagonalise for more (`evals_count`)."
)

HS_LX_PHASES = (
    'ordering "{ordering}": at this parameter point the dressed state that labels bare state '
    "{label} (excited in subsystem {subsystem}) is not decided by the states themselves: "
    "dressed state {chosen} and dressed state {rival} compete, and which one scqubits takes "
    'depends on {why}, which the model cannot reproduce. Use ordering "DE" there, or move '
    "the parameters away from the strong hybridization."
)

HS_BE_TIE = (
    'ordering "BE": the bare states {a} and {b} have the same bare energy {energy!r}, and the '
    "order scqubits labels them in is decided by rounding; the model cannot reproduce it. Use "
    'ordering "LX" or "DE", or a `BEs_count` that ends before the tie.'
)

HS_BES_COUNT = (
    "`{method}(BEs_count=...)` must be None or an integer between 1 and {most}; got {got!r}."
)

HS_LEVEL = (
    "`{method}`: the {what} {got!r} must be a tuple of {n} levels, one per subsystem (or one "
    "per subsystem in `subsystems`), each below that subsystem's truncated_dim {dims}; or a "
    "dressed index from 0 to {k} - 1."
)

HS_SUBSYSTEMS = (
    "`{method}(subsystems=...)` must be a subsystem (its `id_str` or the scqubits object) or a "
    "list of them; {got!r} is not one of {known}."
)

HS_OMIT_NAN = (
    "`transitions(omit_nan=True)` drops the transitions that are NaN at every point, as "
    "scqubits does, which needs concrete values; under `jit`, `vmap` or `grad` pass "
    "`omit_nan=False` and the NaN columns stay, with their labels."
)

HS_OP = (
    "`{method}`: the operator must be a bound operator method of a subsystem "
    "(`tmon.n_operator`), `(id_str, name)` with an operator method's name, or `(matrix, "
    "subsystem)` with the matrix in that subsystem's basis; got {got!r}."
)

HS_TRUNCATE = (
    "`{method}(truncated_dim=...)` must be None or an integer between 1 and {most}; got {got!r}."
)

HD_SPLIT_DEGENERATE = (
    "jaxbridge.scqubits.model(circuit): {id_str} of the hierarchy keeps "
    "{k} levels (its truncated_dim), but its levels {last} and {k} are degenerate at the "
    "Circuit's values ({below!r} and {above!r}): the truncation keeps one state of a "
    "degenerate pair, which one is arbitrary (the eigensolver's choice), and the levels "
    "of the subsystems above depend on it (scqubits' too). Set its truncated_dim to {fewer} or "
    "{more} (configure(subsystem_trunc_dims=...)), or change its cutoff."
)
