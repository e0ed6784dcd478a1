"""The text of every error `jaxbridge.scqubits.dynamics` raises; tests pin these strings."""

NEEDS_DIFFRAX = (
    "`jaxbridge.scqubits.dynamics` needs diffrax for time evolution: "
    "`pip install jaxbridge[dynamics]`"
)

LEVELS = "`{method}(levels=...)` must be an integer between 1 and {most}; got {got!r}."

UNKNOWN_CHANNEL = (
    "`jump_operators`: this model has no noise channel {name!r}. Its channels are {supported} "
    "(`model.supported_noise_channels()`); T1 channels start with `t1_`, pure dephasing "
    "with `tphi_`."
)

GENERIC_OPTIONS = (
    "`jump_operators`: scqubits' generic channel {name!r} needs {missing} in its options: "
    "`channels=[({name!r}, {{'noise_op': 'n_operator', ...}})]` or `options={{{name!r}: "
    "{{...}}}}`."
)

NOT_A_CHANNEL = (
    "`jump_operators`: {name!r} is neither a T1 (`t1_*`) nor a pure-dephasing (`tphi_*`) "
    "channel; `t1_effective` and `t2_effective` are sums of channels: name the channels."
)

HS_CHANNELS = (
    "`jump_operators`: a `HilbertSpace` model has no noise channels of its own; name a "
    "subsystem's channel as `(subsystem, 't1_capacitive')`, the subsystem being the scqubits "
    "object in the `HilbertSpace`; got {got!r}."
)

HS_OPERATOR = (
    "`{method}` on a `HilbertSpace` model: name a subsystem's operator as "
    "`(subsystem, 'n_operator')` (the subsystem the scqubits object itself, in the "
    "`HilbertSpace`), or pass a ({dim}, {dim}) matrix in the dressed basis; got {got!r}."
)

HS_SUBSYSTEM = (
    "`{method}`: {got!r} is not one of this `HilbertSpace`'s subsystems (their `id_str`s are "
    "{known}); pass the scqubits object itself."
)

SUBSPACE = (
    "`{method}`: the computational subspace must be distinct levels among the {levels} kept "
    "(0 to {last}); got {got!r}. Keep more levels (`levels=`) or choose kept ones."
)

TARGET_SHAPE = (
    "`gate_fidelity`: the target must be a ({d}, {d}) unitary on the {d} levels of "
    "`subspace={subspace}`; got shape {got}."
)

TRANSITION = (
    "`transition_fidelity`: `initial` and `final` must be levels among the {levels} kept "
    "(0 to {last}); got initial={initial!r}, final={final!r}."
)

PWC_SHAPE = (
    "`pwc(times, values)`: `values` must have one entry per interval of `times` "
    "(len(times) - 1 = {n}, shape ({n},)); got `times` of shape {times} and `values` of "
    "shape {values}. A pulse of n values needs n + 1 boundary times."
)

PWC_TIMES = (
    "`pwc(times, values)`: `times` must be a 1-D array of at least 2 times; got shape {got}."
)

OPERATOR_SHAPE = (
    "`{method}`: every operator must be ({k}, {k}), the size of the static Hamiltonian; got "
    "{what} of shape {got}."
)

DRIVE = (
    "`{method}(drives=...)`: each drive is a pair `(operator, pulse)`, the pulse a `pwc(...)`, "
    "a `smooth(...)` or a number; got {got!r}."
)

FRAME = "`solve(frame=...)` must be 'lab' or 'interaction'; got {got!r}."

GRADIENT = (
    "`{method}(gradient=...)` must be one of {allowed}; got {got!r}. 'checkpointed', "
    "'adjoint' and 'direct' are reverse mode (`jax.grad`), 'forward' and 'sensitivity' are "
    "forward mode (`jax.jacfwd`)."
)

METHOD = (
    "`{method}(method=...)` must be one of {allowed} (explicit Runge-Kutta methods with "
    "adaptive steps); got {got!r}."
)

ADJOINT_PWC = (
    "`{method}(gradient='adjoint')` takes smooth pulses only: a step of the solver that ends "
    "on a `pwc` pulse's jump is not retraced exactly backward in time; got a `pwc` pulse. "
    "Use `gradient='checkpointed'` for `pwc` pulses."
)
