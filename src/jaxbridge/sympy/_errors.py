"""The text of every error `jaxbridge.sympy` raises; tests pin these strings."""

NEEDS_SYMPY = "`jaxbridge.sympy` needs SymPy: `pip install jaxbridge[sympy]`"

ARG_SHAPE = (
    "`{name}`: argument `{arg}` must end in shape {shape}, the shape declared in `args`; "
    "got an array of shape {got}. Leading dimensions are batch dimensions."
)

BATCH_SHAPES = (
    "`{name}`: the batch dimensions of the arguments do not broadcast together ({got}). "
    "Give every argument the same leading dimensions, or dimensions of size 1."
)

UNKNOWN_FUNCTION = (
    "`jaxbridge.sympy.compile`: no JAX translation for the SymPy function `{func}` (in "
    "`{node}`). Pass one with `extra_functions={{{func}: jax_callable}}`; it receives the "
    "arguments as arrays."
)

MISSING_SYMBOLS = (
    "`jaxbridge.sympy.{api}`: the expression uses {symbols}, which {verb} not in `args`. "
    "Add {them} to `args`, or substitute a value with `expr.subs(...)` first."
)

NON_NUMERIC = (
    "`jaxbridge.sympy.compile`: `{node}` is not a numeric constant and cannot be printed. "
    "Substitute a number for it (`expr.subs(...)`) before compiling."
)

BAD_ARG = (
    "`jaxbridge.sympy.compile(args=...)`: each entry must be a Symbol, a MatrixSymbol, or a "
    "(nested) sequence of Symbols; got {got!r} at position {index}."
)

DUPLICATE_ARG = (
    "`jaxbridge.sympy.compile(args=...)`: the symbol `{symbol}` appears more than once; each "
    "symbol names one input."
)

BAD_EXPR = (
    "`jaxbridge.sympy.compile`: cannot compile an object of type `{type}` ({value!r}). Pass a "
    "SymPy expression, Matrix, Array, or a list, tuple or dict of them."
)

SUM_BOUNDS = (
    "`jaxbridge.sympy.compile`: `{node}` needs integer numeric bounds (at most {limit} terms) to "
    "be unrolled; got bounds {bounds}. Evaluate it first with `.doit()`, or substitute numbers."
)

UNEVALUATED_DERIVATIVE = (
    "`jaxbridge.sympy.compile`: `{node}` could not be evaluated with `.doit()`. Compile an "
    "expression whose derivatives SymPy can compute, or pass the function through "
    "`extra_functions`."
)

NO_DERIVATIVE = (
    "The derivative of `{func}` with respect to argument {index} (`{arg}`) is needed, but "
    "`sympy.diff` cannot compute it. Keep that argument constant (`jax.lax.stop_gradient`), "
    "or compile with `extra_functions={{{func}: f}}` where `f` is differentiable JAX code."
)

INTEGER_ORDER = (
    "`jaxbridge.sympy.compile`: the order of `{node}` must be an integer constant for JAX; "
    "got `{order}`."
)

DERIVATIVES = '`jaxbridge.sympy.compile(derivatives=...)` must be None or "symbolic"; got {got!r}.'

TRAINABLE = '`jaxbridge.sympy.Expression(trainable=...)` must be "floats" or "all"; got {got!r}.'

OPERATOR_SHAPE = (
    "`jaxbridge.sympy.operator_sum`: operator `{key}` must be a square matrix of the same shape "
    "as the others, {shape}; got shape {got}."
)

OPERATOR_TERM = (
    "`jaxbridge.sympy.operator_sum`: the term `{term}` of H is not a coefficient times a product "
    "of operators; {why}. Write H as a polynomial in the operator symbols."
)

SHARING_ON_CPU = (
    "`jaxbridge.sympy.compile`: this expression prints to {lines} operations, {shared} of them "
    "used more than once. XLA:CPU's fusion emitter recomputes shared values of fused programs "
    "this large at each use, which can make a call orders of magnitude slower (measured in "
    "docs/sympy.md, 'Large expressions on CPU'). Compile with the older emitter, which keeps "
    "them: "
    "`jax.jit(f, compiler_options={{'xla_cpu_use_fusion_emitters': False}})`, or "
    "XLA_FLAGS=--xla_cpu_use_fusion_emitters=false for the whole program."
)

REAL_ONLY = (
    "`jaxbridge.sympy.compile`: `{func}` is defined for real arguments only; got a {dtype} "
    "argument. Pass real values, or compile `{func}` of `re(...)`/`Abs(...)` of the argument."
)

NO_COMPLEX = (
    "`jaxbridge.sympy.compile`: `{func}` has no complex implementation (neither SciPy nor "
    "mpmath computes it off the real line); got a {dtype} argument. Pass real values."
)

NO_HOST = (
    "`jaxbridge.sympy.compile`: no host implementation of `{func}` with {n} argument(s) (in "
    "`{node}`). Pass one with `extra_functions={{{func}: jax_callable}}`."
)

INTEGRAL = (
    "`jaxbridge.sympy.compile`: `{node}` is an unevaluated integral, which has no JAX "
    "translation. Evaluate it first (`expr.doit()`), or replace it by a function of its free "
    "symbols and pass that function through `extra_functions`: "
    "`F = sympy.Function('F'); expr = expr.subs(integral, F({symbols}))`, then "
    "`compile(expr, args, extra_functions={{F: jax_callable}})`."
)

ARGS_SET = (
    "`jaxbridge.sympy.{api}(args=...)` must be ordered (a list or tuple); got a `{type}`, "
    "whose order changes from run to run (PYTHONHASHSEED). Pass `[{symbols}]` in the order "
    "you will call it."
)

ASSUMPTIONS = (
    "`jaxbridge.sympy.{api}`: `{symbol}` in the expression is not the `{symbol}` of `args`: "
    "same name, different assumptions ({diff}). SymPy treats them as different symbols; "
    "build both with the same assumptions (`sympy.Symbol('{symbol}', ...)`)."
)

INDEXED_SHAPE = (
    "`jaxbridge.sympy.compile(args=...)`: `{base}` is an IndexedBase without a shape, and the "
    "expression does not index it with integer constants ({got}). Give it one: "
    "`sympy.IndexedBase('{base}', shape=(n,))`."
)

EXPRESSION_ARGS = (
    "`jaxbridge.sympy.Expression` takes {n} argument(s) ({names}), in the order of `args`; "
    "got {got}."
)
