"""`jaxbridge.sympy.Expression`: a SymPy expression as a pytree whose leaf is its constants.

The structure (the expression with each trainable constant replaced by a parameter symbol, the
argument symbols, the output tree) is static and hashable, so equal expressions share one
compiled function and one jit cache entry; the only leaf is the parameter vector. Calling it
runs the compiled template, shared subexpressions computed once, whether it is closed over or
passed as an argument.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
import sympy
from sympy.tensor.array import NDimArray

from . import _errors
from ._compile import _is_expr_leaf
from ._compile import compile as compile_


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


def _rebuild(node: sympy.Basic, args: tuple) -> sympy.Basic:
    try:
        return node.func(*args, evaluate=False)
    except TypeError:
        return node.func(*args)


def _parametrize(root: sympy.Basic, trainable: str, atoms: dict) -> sympy.Basic:
    """`root` with each trainable constant replaced by its parameter symbol (iteratively)."""
    done: dict[tuple, sympy.Basic] = {}
    stack = [(root, None, False)]
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


@functools.lru_cache(maxsize=256)
def _compiled(static: _Static) -> Callable[..., Any]:
    tree = jax.tree.unflatten(static.treedef, list(static.templates))
    return compile_(tree, [*static.args, list(static.params)])


@jax.tree_util.register_pytree_node_class
class Expression:
    """A SymPy expression as a JAX pytree: its numeric constants are one trainable leaf.

    Args:
        expr: a SymPy expression, Matrix, Array, or a list, tuple or dict of them.
        args: the input symbols, as for `jaxbridge.sympy.compile`.
        trainable: "floats" makes every Float a parameter; "all" also the Rationals and
            Integers that are terms or factors (not exponents, orders or bounds), and `pi`
            and `E`. Each distinct value is one parameter, shared by all its occurrences.

    The leaf `params` is a vector in JAX's default float dtype (float32 unless x64). It passes
    through `jit`, `grad`, `vmap` (a batch of parameter vectors), `jax.custom_vjp` and optax;
    the structure is static and hashable, so equal expressions share a jit cache entry.

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
        self, expr: Any, args: Any, *, trainable: Literal["floats", "all"] = "floats"
    ) -> None:
        if trainable not in ("floats", "all"):
            raise ValueError(_errors.TRAINABLE.format(got=trainable))
        if isinstance(args, (sympy.Symbol, sympy.MatrixSymbol)):
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
        self._static = _Static(
            tuple(templates), treedef, _hashable(list(args)), tuple(atoms.values()), tuple(atoms)
        )
        self.params = jnp.asarray([float(a) for a in atoms], dtype=jnp.result_type(float))

    def tree_flatten(self) -> tuple[tuple[jax.Array], _Static]:
        return (self.params,), self._static

    @classmethod
    def tree_unflatten(cls, static: _Static, children: tuple) -> Expression:
        obj = object.__new__(cls)
        obj._static = static
        obj.params = children[0]
        return obj

    def __call__(self, *values: Any) -> Any:
        """Evaluates at `values`, one per symbol of `args`, in order; batches like `compile`."""
        return _compiled(self._static)(*values, self.params)

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
        if isinstance(self.params, jax.core.Tracer):
            return f"Expression(<{len(self._static.params)} traced params>, args={self.args})"
        return f"Expression({self.to_sympy()!r}, args={list(self.args)!r})"
