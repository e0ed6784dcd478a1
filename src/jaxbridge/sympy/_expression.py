"""`jaxbridge.sympy.Expression`: a SymPy expression as a pytree whose leaf is its constants.

The structure (the expression with each trainable constant replaced by a parameter symbol, the
argument symbols, the output tree) is static and hashable, so equal expressions share one
compiled function and one jit cache entry; the only leaf is the parameter vector. Calling it
runs the compiled template, shared subexpressions computed once, whether it is closed over or
passed as an argument.

Differentiating with respect to the constants goes through a `custom_jvp` whose parameter
tangent is a linear call with a transpose of our own. JAX's transpose of a scalar constant used
across a batch is one `reduce_sum` per constant, and XLA gives each reduction its own fusion,
recomputing the shared forward and backward work in every one of them. Our transpose instead
takes the cotangent of each constant *per batch element* (one reverse pass with the constants
broadcast over the batch) and sums all of them in one variadic `lax.reduce`, which XLA fuses
into a single loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import jax
import jax.numpy as jnp
import numpy as np
import sympy
from jax import lax
from jax.custom_derivatives import SymbolicZero
from sympy.tensor.array import NDimArray

from .._linear import _Fn, linear_call
from . import _errors
from ._codegen import _generate, _is_expr_leaf, normalize_args


def _hashable(x: Any) -> Any:
    if isinstance(x, sympy.MatrixBase):
        return sympy.ImmutableMatrix(x)
    if isinstance(x, NDimArray):
        return sympy.ImmutableDenseNDimArray(x)
    if isinstance(x, (list, tuple)):
        return tuple(_hashable(e) for e in x)
    return sympy.sympify(x)


def _is_trainable(atom: sympy.Basic, parent: sympy.Basic | None, trainable: str) -> bool:
    if isinstance(atom, sympy.Float):
        return True
    if trainable != "all":
        return False
    if atom in (sympy.pi, sympy.E):
        return True
    # Integers and Rationals are trainable as terms and factors; elsewhere (a Bessel order, a
    # comparison bound, a Heaviside value at 0) they are structure.
    return atom.is_Rational and isinstance(parent, (sympy.Add, sympy.Mul))


def _rebuild(node: Any, args: tuple) -> sympy.Basic:
    try:
        return node.func(*args, evaluate=False)
    except TypeError:
        return node.func(*args)


def _parametrize(root: sympy.Basic, trainable: str, atoms: dict) -> sympy.Basic:
    """`root` with each trainable constant replaced by its parameter symbol (iteratively)."""
    done: dict[tuple, sympy.Basic] = {}
    stack: list[tuple[Any, Any, bool]] = [(root, None, False)]
    while stack:
        node, parent, expanded = stack.pop()
        key = (node, type(parent) if parent is not None else None)
        if key in done:
            continue
        if node.is_Atom:
            if node.is_number and _is_trainable(node, parent, trainable):
                if node not in atoms:
                    atoms[node] = sympy.Symbol(f"_jaxbridge_p{len(atoms)}")
                done[key] = atoms[node]
            else:
                done[key] = node
            continue
        # A numeric exponent is structure: x**2 stays an exact integer power.
        children = [c for c in node.args if not (isinstance(node, sympy.Pow) and c is node.exp)]
        if not expanded:
            stack.append((node, parent, True))
            stack.extend((c, node, False) for c in children)
            continue
        new_args = tuple(done[(c, type(node))] if c in children else c for c in node.args)
        done[key] = node if new_args == node.args else _rebuild(node, new_args)
    return done[(root, None)]


@dataclass(frozen=True)
class _Static:
    templates: tuple
    treedef: Any
    args: tuple
    params: tuple  # the parameter symbols
    atoms: tuple  # the original constant of each parameter
    function_keys: tuple = ()  # the SymPy functions of `extra_functions`
    function_treedef: Any = None  # the pytree structure of their callables
    function_statics: tuple = ()  # their non-array leaves; None where an array leaf goes


class _Slot:
    """Stands for one `extra_functions` callable in the compiled template (bound per call)."""

    def __init__(self, key: object) -> None:
        self.key = key

    def __call__(self, *args: Any) -> Any:  # pragma: no cover - always rebound before a call
        raise AssertionError(f"unbound extra function {self.key}")


class _Evaluator:
    """The compiled template of one structure, and its derivative rule for the constants.

    `fn(*values, *constants)` takes each constant as its own scalar argument, so a constant
    broadcast over the batch is an ordinary batched argument of the generated code. The
    callables of `extra_functions` are pytrees whose array leaves (a network's weights) are
    arguments too, after the constants: `plain(params, *weights, *values)`.
    """

    def __init__(self, static: _Static) -> None:
        tree = jax.tree.unflatten(static.treedef, list(static.templates))
        self.static = static
        self.slots = [_Slot(k) for k in static.function_keys]
        display = {p: repr(float(a)) for p, a in zip(static.params, static.atoms, strict=True)}
        self.fn = _generate(
            tree,
            [*static.args, *static.params],
            True,
            dict(zip(static.function_keys, self.slots, strict=True)),
            display=display,
            api="Expression",
        )
        self.n = len(static.params)
        self.m = sum(1 for leaf in static.function_statics if leaf is None)
        self.arg_shapes = normalize_args(static.args, tree)[1]
        self.with_rule = jax.custom_jvp(self.plain)
        self.with_rule.defjvp(self._jvp, symbolic_zeros=True)

    def __call__(self, params: jax.Array, weights: tuple, values: tuple) -> Any:
        names = [str(a) for a in self.static.args]
        if len(values) != len(names):
            raise TypeError(
                _errors.EXPRESSION_ARGS.format(
                    n=len(names), names=", ".join(names), got=len(values)
                )
            )
        if self.n == 0 or jnp.ndim(params) != 1:
            # No constants, or a stack of parameter vectors built by hand: JAX's own rules.
            return self.plain(params, *weights, *values)
        return self.with_rule(params, *weights, *values)

    def _bound(self, weights: Sequence[Any]) -> Callable[..., Any]:
        if not self.slots:
            return self.fn
        it = iter(weights)
        leaves = [next(it) if leaf is None else leaf for leaf in self.static.function_statics]
        functions = jax.tree.unflatten(self.static.function_treedef, leaves)
        return self.fn.with_functions(  # type: ignore[attr-defined]
            {id(slot): f for slot, f in zip(self.slots, functions, strict=True)}
        )

    def plain(self, params: jax.Array, *rest: Any) -> Any:
        weights, values = rest[: self.m], rest[self.m :]
        return self._bound(weights)(*values, *(params[..., k] for k in range(self.n)))

    def _jvp(self, primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        params, *others = primals
        d_params, *d_others = tangents
        moving = [i for i, d in enumerate(d_others) if not isinstance(d, SymbolicZero)]
        if moving:

            def of_others(*moved):
                full = list(others)
                for i, v in zip(moving, moved, strict=True):
                    full[i] = v
                return self.plain(params, *full)

            out, t_out = jax.jvp(
                of_others, tuple(others[i] for i in moving), tuple(d_others[i] for i in moving)
            )
        else:
            out = self.plain(params, *others)
            t_out = jax.tree.map(_zero_tangent, out)
        if isinstance(d_params, SymbolicZero):
            return out, t_out
        leaves, treedef = jax.tree.flatten(out)
        if all(jnp.issubdtype(leaf.dtype, jnp.inexact) for leaf in leaves):
            avals = tuple(jax.ShapeDtypeStruct(leaf.shape, leaf.dtype) for leaf in leaves)
            t_params = treedef.unflatten(
                linear_call(
                    _Fn(self._tangent, ""),
                    _Fn(self._cotangent, ""),
                    [params, *others],
                    [d_params],
                    avals,
                )
            )
        else:  # a boolean or integer output has float0 tangents: JAX's own rule
            t_params = jax.jvp(lambda p: self.plain(p, *others), (params,), (d_params,))[1]
        if not moving:
            return out, t_params
        return out, jax.tree.map(jnp.add, t_out, t_params)

    def _tangent(self, params: jax.Array, *rest: Any) -> list[jax.Array]:
        """The outputs' tangent along `d_params`: forward mode, one pass."""
        *others, d_params = rest
        _, t = jax.jvp(lambda p: self.plain(p, *others), (params,), (d_params,))
        return jax.tree.leaves(t)

    def _cotangent(self, params: jax.Array, *rest: Any) -> list[jax.Array]:
        """The constants' cotangent: per batch element in one reverse pass, then one sum."""
        k = len(self.arg_shapes)
        weights, values, cts = rest[: self.m], rest[self.m : self.m + k], rest[self.m + k :]
        batch = tuple(
            np.broadcast_shapes(
                *(jnp.shape(v)[: jnp.ndim(v) - len(s)] for v, s in zip(values, self.arg_shapes))
            )
        )
        spread = [jnp.broadcast_to(params[k], batch) for k in range(self.n)]
        fn = self._bound(weights)
        out, pullback = jax.vjp(lambda *c: jax.tree.leaves(fn(*values, *c)), *spread)
        per_element = pullback([ct.astype(o.dtype) for ct, o in zip(cts, out, strict=True)])
        if batch:
            # A linear call again, so that the sum (whose variadic `reduce` JAX can neither
            # differentiate with zero tangents nor transpose) still has derivatives.
            avals = tuple(jax.ShapeDtypeStruct((), c.dtype) for c in per_element)
            per_element = linear_call(
                _Fn(_sum_over_batch, ""),
                _Fn(functools.partial(_spread_over_batch, batch), ""),
                [],
                list(per_element),
                avals,
            )
        return [jnp.stack(per_element).astype(params.dtype)]


def _sum_over_batch(*xs: jax.Array) -> tuple[jax.Array, ...]:
    """Every array summed over all its axes, in ONE variadic reduce (one fused loop in XLA)."""
    return lax.reduce(
        xs,
        tuple(jnp.zeros((), x.dtype) for x in xs),
        lambda a, b: tuple(x + y for x, y in zip(a, b, strict=True)),
        tuple(range(xs[0].ndim)),
    )


def _spread_over_batch(batch: tuple[int, ...], *cts: jax.Array) -> list[jax.Array]:
    """The transpose of `_sum_over_batch`."""
    return [jnp.broadcast_to(ct, batch) for ct in cts]


def _zero_tangent(x: jax.Array) -> Any:
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return jnp.zeros_like(x)
    return np.zeros(x.shape, jax.dtypes.float0)


@functools.lru_cache(maxsize=256)
def _evaluator(static: _Static) -> _Evaluator:
    return _Evaluator(static)


def _is_array(x: object) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, np.generic))


@jax.tree_util.register_pytree_node_class
class Expression:
    """A SymPy expression as a JAX pytree: its numeric constants are one trainable leaf.

    Args:
        expr: a SymPy expression, Matrix, Array, or a list, tuple or dict of them.
        args: the input symbols, in call order (a list or tuple), as for
            `jaxbridge.sympy.compile`.
        trainable: "floats" makes every Float a parameter; "all" also the Rationals and
            Integers that are terms or factors (not exponents, orders or bounds), and `pi`
            and `E`. Each distinct value is one parameter, shared by all its occurrences.
        extra_functions: `{sympy_function: callable}` as for `compile`. A callable that is a
            pytree (an equinox module, a `jax.tree_util.Partial` carrying a flax model's
            parameters) is part of this pytree: its array leaves are leaves of the
            `Expression`, so `grad` and optax train them together with the constants. Its
            other leaves are static.

    The leaves are the parameter vector `params`, in JAX's default float dtype (float32
    unless x64), then the array leaves of `extra_functions`. They pass through `jit`, `grad`,
    `vmap` (a batch of parameter vectors), `jax.custom_vjp` and optax; the structure is
    static and hashable, so equal expressions share a jit cache entry. The expression is
    compiled when built: a symbol missing from `args` or an unknown function raises here.

    Raises:
        ValueError: as `compile` does, when built.
        TypeError: `args` given as a set; at call time, a wrong number of values.

    Example:
        >>> import jax, sympy
        >>> import jaxbridge.sympy as jbs
        >>> x = sympy.Symbol("x")
        >>> e = jbs.Expression(1.5 * sympy.sin(x) + 0.5, [x])
        >>> e.params
        Array([1.5, 0.5], dtype=float32)
        >>> float(jax.jit(lambda e, x: e(x))(e, 0.0))
        0.5
        >>> g = jax.grad(lambda e: e(1.0))(e)
        >>> g.params
        Array([0.841471, 1. ], dtype=float32)
        >>> e.to_sympy()
        1.5*sin(x) + 0.5
    """

    params: jax.Array

    def __init__(
        self,
        expr: Any,
        args: Any,
        *,
        trainable: Literal["floats", "all"] = "floats",
        extra_functions: Mapping[Any, Callable[..., Any]] | None = None,
    ) -> None:
        if trainable not in ("floats", "all"):
            raise ValueError(_errors.TRAINABLE.format(got=trainable))
        if isinstance(args, (set, frozenset)):
            normalize_args(args, api="Expression")  # raises, naming the API
        if isinstance(args, (sympy.Symbol, sympy.MatrixSymbol, sympy.Indexed, sympy.IndexedBase)):
            args = [args]
        leaves, treedef = jax.tree.flatten(expr, is_leaf=_is_expr_leaf)
        atoms: dict[sympy.Basic, sympy.Symbol] = {}
        templates = []
        for leaf in leaves:
            leaf = _hashable(leaf)
            if isinstance(leaf, (sympy.MatrixBase, NDimArray)):
                leaf = leaf.applyfunc(lambda e: _parametrize(e, trainable, atoms))
            else:
                leaf = _parametrize(leaf, trainable, atoms)
            templates.append(leaf)
        extra = dict(extra_functions or {})
        function_leaves, function_treedef = jax.tree.flatten(tuple(extra.values()))
        self._static = _Static(
            tuple(templates),
            treedef,
            _hashable(list(args)),
            tuple(atoms.values()),
            tuple(atoms),
            tuple(extra),
            function_treedef,
            tuple(None if _is_array(leaf) else leaf for leaf in function_leaves),
        )
        values = [float(cast(Any, a)) for a in atoms]
        self.params = jnp.asarray(values, dtype=jnp.result_type(float))
        self._weights = tuple(leaf for leaf in function_leaves if _is_array(leaf))
        _evaluator(self._static)  # compiles now: missing symbols and unknown functions raise

    def tree_flatten(self) -> tuple[tuple[Any, ...], _Static]:
        return (self.params, *self._weights), self._static

    @classmethod
    def tree_unflatten(cls, static: _Static, children: tuple) -> Expression:
        obj = object.__new__(cls)
        obj._static = static
        obj.params = children[0]
        obj._weights = tuple(children[1:])
        return obj

    def __call__(self, *values: Any) -> Any:
        """Evaluates at `values`, one per symbol of `args`, in order; batches like `compile`."""
        return _evaluator(self._static)(self.params, self._weights, values)

    @property
    def extra_functions(self) -> dict[Any, Callable[..., Any]]:
        """The `extra_functions` callables, with their current (trained) array leaves."""
        it = iter(self._weights)
        leaves = [next(it) if leaf is None else leaf for leaf in self._static.function_statics]
        functions = jax.tree.unflatten(self._static.function_treedef, leaves)
        return dict(zip(self._static.function_keys, functions, strict=True))

    @property
    def args(self) -> tuple:
        """The input symbols."""
        return self._static.args

    def to_sympy(self) -> Any:
        """The expression with the current parameter values; unchanged ones exactly as given."""
        try:
            values = np.asarray(self.params)
        except jax.errors.TracerArrayConversionError:
            raise TypeError(
                "`Expression.to_sympy()` needs concrete parameter values; call it outside "
                "`jax.jit` and other transformations."
            ) from None
        mapping = {}
        for symbol, atom, value in zip(
            self._static.params, self._static.atoms, values, strict=True
        ):
            original = np.asarray(float(atom), values.dtype)
            mapping[symbol] = atom if original == value else sympy.Float(float(value))
        leaves = [t.xreplace(mapping) for t in self._static.templates]
        return jax.tree.unflatten(self._static.treedef, leaves)

    def __repr__(self) -> str:
        if isinstance(self.params, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue] - jax.core is public
            return f"Expression(<{len(self._static.params)} traced params>, args={self.args})"
        return f"Expression({self.to_sympy()!r}, args={list(self.args)!r})"
