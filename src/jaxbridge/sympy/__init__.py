"""SymPy inside JAX: compile expressions to native JAX, pass them as pytrees, train constants.

`compile` prints an expression to `jax.numpy` code, `Expression` is a pytree whose leaf is the
vector of numeric constants, and `operator_sum` splits a Hamiltonian into compiled coefficients
and fixed operator matrices.
"""

try:
    import sympy as _sympy  # noqa: F401
except ImportError as _error:  # pragma: no cover - exercised in a subprocess test
    from ._errors import NEEDS_SYMPY as _NEEDS_SYMPY

    raise ImportError(_NEEDS_SYMPY) from _error

from ._compile import compile as compile
from ._expression import Expression as Expression
from ._operators import HermitianFactor as HermitianFactor
from ._operators import OperatorSum as OperatorSum
from ._operators import operator_sum as operator_sum
