"""The printer's vocabulary: how an input is read, a branch mask, literals, node kinds.

Both the printer (`_printer`) and its per-node rules (`_nodes`) use these, so they live below
both: the rules never import the printer that mixes them in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import sympy

from . import _errors, _functions


@dataclass(frozen=True)
class Mask:
    """Where branch `k` of `piecewise` is taken."""

    piecewise: Any  # a sympy.Piecewise
    k: int


@dataclass(frozen=True)
class Leaf:
    """How an input symbol is read from the function's arguments."""

    var: str  # the argument variable
    index: tuple[int, ...]  # element index into its trailing dims; () for the whole array
    matrix_dims: int  # trailing dims of the value itself (2 for a MatrixSymbol, else 0)


def literal(node: Any) -> str | None:
    """The Python literal of a numeric atom, or None if `node` is not one."""
    if node.is_Integer:
        return repr(float(int(node)))  # weakly typed float: `lax` arithmetic accepts it
    if node.is_Number or isinstance(node, sympy.NumberSymbol):
        if node is sympy.S.ComplexInfinity:
            return None
        value = float(node)
        if math.isfinite(value):
            return repr(value)
        return "jnp.nan" if math.isnan(value) else ("jnp.inf" if value > 0 else "-jnp.inf")
    if node is sympy.S.ImaginaryUnit:
        return "1j"
    if node is sympy.true:
        return "True"
    if node is sympy.false:
        return "False"
    return None


def literal_like(code: str) -> bool:
    """Whether printed `code` is a literal (kept inline rather than assigned to a variable)."""
    try:
        float(code.lstrip("-"))
        return True
    except ValueError:
        return code in ("True", "False", "1j", "jnp.nan", "jnp.inf", "-jnp.inf")


def unknown_function(node: sympy.Basic) -> ValueError:
    func = getattr(node.func, "__name__", str(node.func))
    return ValueError(_errors.UNKNOWN_FUNCTION.format(func=func, node=node))


def is_function(node: sympy.Basic) -> bool:
    return isinstance(node, sympy.Function) or node.func in _functions.NATIVE
