"""A SymPy expression to a pure JAX function, via generated source (`compile`'s engine).

The printer yields a flat list of assignments; we write them out as the body of one Python
function and `exec` it. Tracing that function is one `jnp` call per distinct node, with no
interpretation overhead (the trace times are `benchmarks/sympy_converters.py`'s, in
docs/performance.md).

`_symbolic` (symbolic derivatives) and `_expression` build on `_generate`; `_compile` holds
the public `compile`, which picks between `_generate` and `_symbolic`.
"""

from __future__ import annotations

import builtins
import collections
import itertools
import linecache
import re
import types
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import sympy
from jax import lax
from sympy.tensor.array import NDimArray

from . import _errors, _runtime
from ._atoms import Leaf
from ._printer import Printer

_counter = itertools.count()


def _is_expr_leaf(x: object) -> bool:
    return isinstance(x, (sympy.Basic, sympy.MatrixBase, NDimArray))


_SCALAR_ARGS = (sympy.Symbol, sympy.Indexed)


def normalize_args(
    args: Any, expr: Any = None, api: str = "compile"
) -> tuple[list[str], list[tuple[int, ...]], dict, list]:
    """Names, trailing shapes and the `Leaf` of every input symbol; also the symbol arrays.

    `expr` is needed only for an `IndexedBase` without a shape: its indices give the shape.
    """
    if isinstance(args, (set, frozenset)):
        symbols = ", ".join(sorted(str(a) for a in args))
        raise TypeError(_errors.ARGS_SET.format(api=api, type=type(args).__name__, symbols=symbols))
    if isinstance(args, (*_SCALAR_ARGS, sympy.MatrixSymbol, sympy.IndexedBase)):
        args = [args]
    names, shapes, leaves, symbol_arrays = [], [], {}, []

    def add(symbol, leaf):
        if symbol in leaves:
            raise ValueError(_errors.DUPLICATE_ARG.format(symbol=symbol))
        leaves[symbol] = leaf

    for i, arg in enumerate(args):
        var = f"_a{i}"
        if isinstance(arg, _SCALAR_ARGS):
            add(arg, Leaf(var, (), 0))
            shape, symbols = (), np.array(arg, dtype=object)
        elif isinstance(arg, (sympy.MatrixSymbol, sympy.IndexedBase)):
            if isinstance(arg, sympy.MatrixSymbol):
                shape = (int(arg.rows), int(arg.cols))
                add(arg, Leaf(var, (), 2))
            else:
                shape = _indexed_shape(arg, expr)
            symbols = np.empty(shape, dtype=object)
            for index in np.ndindex(shape):
                symbols[index] = arg[index]
                add(arg[index], Leaf(var, index, 0))
        else:
            try:
                symbols = np.array(arg.tolist() if hasattr(arg, "tolist") else arg, dtype=object)
            except (TypeError, ValueError):
                raise TypeError(_errors.BAD_ARG.format(got=arg, index=i)) from None
            if symbols.ndim == 0 or not all(isinstance(s, _SCALAR_ARGS) for s in symbols.flat):
                raise TypeError(_errors.BAD_ARG.format(got=arg, index=i))
            shape = symbols.shape
            for index in np.ndindex(shape):
                add(symbols[index], Leaf(var, index, 0))
        names.append(str(arg))
        shapes.append(tuple(shape))
        symbol_arrays.append(symbols)
    return names, shapes, leaves, symbol_arrays


def _indexed_shape(base: sympy.IndexedBase, expr: Any) -> tuple[int, ...]:
    """The declared shape of an IndexedBase, or the smallest holding every index used."""
    if base.shape is not None:
        return tuple(int(n) for n in base.shape)
    indices, seen = [], set()
    stack = [leaf for leaf in jax.tree.leaves(expr, is_leaf=_is_expr_leaf)]
    while stack:
        node = stack.pop()
        if not isinstance(node, sympy.Basic) or node in seen:
            continue
        seen.add(node)
        if isinstance(node, sympy.Indexed) and node.base == base:
            indices.append(node.indices)
        stack.extend(node.args)
    ok = indices and all(
        len(ix) == len(indices[0]) and all(k.is_Integer and k >= 0 for k in ix) for ix in indices
    )
    if not ok:
        got = ", ".join(sorted({str(base[ix]) for ix in indices})) or "no indices"
        raise ValueError(_errors.INDEXED_SHAPE.format(base=base, got=got))
    return tuple(max(int(ix[d]) for ix in indices) + 1 for d in range(len(indices[0])))


def _output_code(printer: Printer, leaf: object) -> str:
    if isinstance(leaf, (sympy.MatrixBase, NDimArray)):
        shape = tuple(leaf.shape)
        elements = [leaf[index] for index in np.ndindex(shape)]
        codes = [printer.emit(sympy.sympify(e)) for e in elements]
        return f"_rt.stack([{', '.join(codes)}], {shape}, _bs, _dt)"
    if isinstance(leaf, sympy.MatrixExpr):
        shape = (int(leaf.rows), int(leaf.cols))
        return f"_rt.matrix_output({printer.emit(leaf)}, {shape}, _bs)"
    try:
        node = sympy.sympify(leaf, strict=True)
    except sympy.SympifyError:
        raise TypeError(_errors.BAD_EXPR.format(type=type(leaf).__name__, value=leaf)) from None
    return f"_rt.output({printer.emit(node)}, _bs, _dt)"


def _missing_error(missing: set, known: Any, api: str) -> ValueError:
    by_name = {str(s): s for s in known if isinstance(s, sympy.Symbol)}
    for symbol in sorted(missing, key=str):
        other = by_name.get(str(symbol))
        if isinstance(symbol, sympy.Symbol) and other is not None:
            # The assumptions as given (`real=True`), not every one SymPy derives from them.
            mine = getattr(symbol, "_assumptions_orig", symbol.assumptions0)
            theirs = getattr(other, "_assumptions_orig", other.assumptions0)
            keys = sorted(set(mine) | set(theirs))
            diff = "; ".join(
                f"{k}: {mine.get(k)} in the expression, {theirs.get(k)} in `args`"
                for k in keys
                if mine.get(k) != theirs.get(k)
            )
            return ValueError(_errors.ASSUMPTIONS.format(api=api, symbol=symbol, diff=diff))
    names = sorted(str(s) for s in missing)
    return ValueError(
        _errors.MISSING_SYMBOLS.format(
            api=api,
            symbols=", ".join(f"`{n}`" for n in names),
            verb="is" if len(names) == 1 else "are",
            them="it" if len(names) == 1 else "them",
        )
    )


# Above this many printed operations, XLA:CPU's fusion emitter loses the sharing of values
# used several times (measured on jax 0.10.2: a shared program of about 2,300 printed
# operations kept it, one of 3,000 did not).
SHARING_WARNING_LINES = 2_500
_VARIABLE = re.compile(r"\bt\d+\b")


def _warn_if_sharing_is_lost(lines: list[str]) -> None:
    if len(lines) < SHARING_WARNING_LINES or jax.default_backend() != "cpu":
        return
    uses = collections.Counter(
        v for line in lines for v in _VARIABLE.findall(line.split("=", 1)[1])
    )
    shared = sum(1 for count in uses.values() if count > 1)
    if shared:
        warnings.warn(
            _errors.SHARING_ON_CPU.format(lines=f"{len(lines):,}", shared=f"{shared:,}"),
            RuntimeWarning,
            stacklevel=4,
        )


def _generate(
    expr: Any,
    args: Any,
    cse: bool,
    extra_functions: Mapping | None,
    display: Mapping[sympy.Basic, str] | None = None,
    api: str = "compile",
) -> Callable:
    names, shapes, leaves, _ = normalize_args(args, expr, api)
    outputs, treedef = jax.tree.flatten(expr, is_leaf=_is_expr_leaf)
    printer = Printer(
        leaves,
        dict(extra_functions or {}),
        _compile_derivative,
        cse=cse,
        display=dict(display or {}),
    )
    output_codes = [_output_code(printer, leaf) for leaf in outputs]
    if printer.missing:
        raise _missing_error(printer.missing, leaves, api)
    _warn_if_sharing_is_lost(printer.lines)
    fname = f"jaxbridge_sympy_{next(_counter)}"
    variables = "".join(f"_a{i}, " for i in range(len(shapes)))
    source = "\n    ".join(
        [
            f"def {fname}(*_args):",
            f"[{variables}], _bs, _dt = _rt.prepare(_name, _args, _names, _shapes)",
            *printer.lines,
            f"return [{', '.join(output_codes)}]",
        ]
    )
    filename = f"<{fname}>"
    # Tracebacks through generated code show the generated line.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {
        "jnp": jnp,
        "lax": lax,
        "jsp": jsp,
        "_rt": _runtime,
        "_name": f"jaxbridge.sympy.{api}(...)",
        "_names": names,
        "_shapes": shapes,
        **printer.namespace,
    }
    exec(builtins.compile(source, filename, "exec"), namespace)
    generated = namespace[fname]

    def compiled(*values):
        return jax.tree.unflatten(treedef, generated(*values))

    def with_functions(replacements: Mapping[int, Callable]) -> Callable:
        """The same code with `extra_functions` callables swapped (keyed by `id` of the old)."""
        rebound = dict(namespace)
        for name, value in printer.namespace.items():
            if id(value) in replacements:
                rebound[name] = replacements[id(value)]
        fn = types.FunctionType(generated.__code__, rebound, fname)
        return lambda *values: jax.tree.unflatten(treedef, fn(*values))

    compiled.with_functions = with_functions  # type: ignore[attr-defined]
    compiled.__name__ = compiled.__qualname__ = fname
    compiled.__doc__ = f"Compiled from SymPy; arguments ({', '.join(names)})."
    compiled.source = source  # type: ignore[attr-defined]
    return compiled


def _compile_derivative(expr: Any, args: list[Any]) -> Callable[..., Any]:
    """How a host fallback compiles its partial derivatives: as `compile(expr, args)`."""
    return _generate(expr, args, True, None)
