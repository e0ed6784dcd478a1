"""`jaxbridge.custom_vjp` and `jaxbridge.custom_jvp`: JAX's decorators, static arguments found.

`jax.custom_vjp` rejects an argument that is not a JAX type (a SymPy expression, a model, a
string) unless its position is listed in `nondiff_argnums`. These drop-ins look at each call:
every argument that is not an array or a pytree of arrays, in any position, is static,
non-differentiable and closed over, and its cotangent slot is `None`. The same holds for the
leaves of `fwd`'s residuals (a SymPy expression saved for `bwd`) and of the outputs: a leaf that
is not an array travels in the pytree structure, not as a value JAX traces, and comes back
unchanged. Otherwise the protocol is JAX's: `defvjp(fwd, bwd)` and `defjvp(jvp)`, with
`nondiff_argnums` still honoured.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

_ARRAY_TYPES = (jax.Array, np.ndarray, np.generic, bool, int, float, complex)


def is_array_tree(x: Any) -> bool:
    """Whether `x` is an array, a Python number, or a pytree with only those as leaves."""
    return all(isinstance(leaf, _ARRAY_TYPES) for leaf in jax.tree.leaves(x))


@jax.tree_util.register_pytree_node_class
class _StaticLeaf:
    """A non-array leaf carried in the pytree structure (aux data), so JAX never sees it as a
    value: a residual or output that is a SymPy expression, a string, a model."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def tree_flatten(self) -> tuple[tuple[()], _StaticLeaf]:
        return (), self

    @classmethod
    def tree_unflatten(cls, aux: _StaticLeaf, children: Any) -> _StaticLeaf:
        del children
        return aux

    # Structures are compared (custom_jvp checks its outputs' trees): the same object or an
    # equal one is the same structure.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _StaticLeaf):
            return NotImplemented
        if self.value is other.value:
            return True
        try:
            return bool(self.value == other.value)
        except Exception:
            return False

    def __hash__(self) -> int:
        try:
            return hash(self.value)
        except TypeError:
            return id(self.value)


def _box(tree: Any) -> Any:
    """`tree` with each non-array leaf wrapped, so that JAX accepts it."""
    return jax.tree.map(lambda x: x if isinstance(x, _ARRAY_TYPES) else _StaticLeaf(x), tree)


def _unbox(tree: Any) -> Any:
    return jax.tree.map(
        lambda x: x.value if isinstance(x, _StaticLeaf) else x,
        tree,
        is_leaf=lambda x: isinstance(x, _StaticLeaf),
    )


class _Split:
    """One call's arguments, split into the dynamic ones JAX sees and the static rest."""

    def __init__(self, fun: Callable, args: tuple, kwargs: dict, nondiff: Sequence[int]):
        if kwargs:
            bound = inspect.signature(fun).bind(*args, **kwargs)
            bound.apply_defaults()
            if bound.kwargs:
                raise TypeError(
                    f"`jaxbridge.custom_vjp`/`custom_jvp` of `{fun.__name__}`: keyword-only "
                    f"arguments {sorted(bound.kwargs)} are not supported, as in JAX; pass them "
                    "positionally."
                )
            args = bound.args
        self.args = tuple(args)
        self.nondiff = tuple(i for i in nondiff if i < len(args))
        self.static = tuple(
            i for i, a in enumerate(args) if i not in self.nondiff and not is_array_tree(a)
        )
        self.dynamic = tuple(
            i for i in range(len(args)) if i not in self.nondiff and i not in self.static
        )

    def merge(self, values: Sequence[Any]) -> list:
        full = list(self.args)
        for i, v in zip(self.dynamic, values, strict=True):
            full[i] = v
        return full

    def values(self) -> list:
        return [self.args[i] for i in self.dynamic]

    def nondiff_values(self) -> list:
        return [self.args[i] for i in self.nondiff]


class custom_vjp:  # noqa: N801 - the name mirrors jax.custom_vjp
    """`jax.custom_vjp`, where arguments that are not arrays are static automatically.

    `bwd(res, g)` returns one cotangent per positional argument that is not in
    `nondiff_argnums`, with `None` in the slot of each static argument. `fwd` may save
    non-array objects in its residuals (a SymPy expression, say): `bwd` receives them
    unchanged, as it receives static arguments; the same holds for non-array leaves of the
    output. Works under `jit`, `vmap` and `grad` as `jax.custom_vjp` does; forward mode (`jvp`,
    `jacfwd`) is not available, as with JAX's.

    Example:
        >>> import jax, sympy
        >>> import jaxbridge
        >>> @jaxbridge.custom_vjp
        ... def scale(x, label):
        ...     return 2.0 * x
        >>> scale.defvjp(lambda x, label: (2.0 * x, None), lambda res, g: (2.0 * g, None))
        >>> float(jax.grad(scale)(1.0, "any object"))
        2.0
        >>> x = sympy.Symbol("x")
        >>> @jaxbridge.custom_vjp
        ... def square(expr, v):
        ...     return v**2
        >>> square.defvjp(
        ...     lambda expr, v: (v**2, (expr, v)),  # the expression saved in the residuals
        ...     lambda res, g: (None, g * float(sympy.diff(res[0], x).subs(x, 1)) * res[1]),
        ... )
        >>> float(jax.grad(square, argnums=1)(x**2, 1.0))
        2.0
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", "function")
        if self.fwd is None or self.bwd is None:
            raise AttributeError(
                f"`jaxbridge.custom_vjp` function `{name}` has no VJP; call "
                f"`{name}.defvjp(fwd, bwd)` first."
            )
        split = _Split(self.fun, args, kwargs, self.nondiff_argnums)
        fwd, bwd = self.fwd, self.bwd
        slots = [i for i in range(len(split.args)) if i not in split.nondiff]

        @jax.custom_vjp
        def inner(*values):
            return _box(self.fun(*split.merge(values)))

        def inner_fwd(*values):
            out = fwd(*split.merge(values))
            if not isinstance(out, tuple) or len(out) != 2:
                raise TypeError(
                    f"`jaxbridge.custom_vjp`: the fwd of `{name}` must return a pair "
                    f"`(output, residuals)`; got `{type(out).__name__}`."
                )
            return _box(out[0]), _box(out[1])

        def inner_bwd(res, g):
            cotangents = bwd(*split.nondiff_values(), _unbox(res), _unbox(g))
            if not isinstance(cotangents, (tuple, list)) or len(cotangents) != len(slots):
                raise TypeError(
                    f"`jaxbridge.custom_vjp`: the bwd of `{name}` must return a tuple of "
                    f"{len(slots)} cotangents, one per argument outside `nondiff_argnums` "
                    f"(None for static ones); got {cotangents!r:.200}."
                )
            by_slot = dict(zip(slots, cotangents, strict=True))
            for i in split.static:
                if by_slot[i] is not None:
                    raise TypeError(
                        f"`jaxbridge.custom_vjp`: argument {i} of `{name}` is static (a "
                        f"`{type(split.args[i]).__name__}`), so its cotangent slot must be "
                        "None."
                    )
            return tuple(by_slot[i] for i in split.dynamic)

        inner.defvjp(inner_fwd, inner_bwd)
        return _unbox(inner(*split.values()))


class custom_jvp:  # noqa: N801 - the name mirrors jax.custom_jvp
    """`jax.custom_jvp`, where arguments that are not arrays are static automatically.

    `jvp(primals, tangents)` receives every positional argument outside `nondiff_argnums` in
    `primals` (static ones unchanged) and `None` in the tangent slot of each static one. Works
    under `jit`, `vmap`, `jvp`, `grad` and at higher order, as `jax.custom_jvp` does.

    Example:
        >>> import jax
        >>> import jaxbridge
        >>> @jaxbridge.custom_jvp
        ... def cube(x, how):
        ...     return x**3
        >>> @cube.defjvp
        ... def _(primals, tangents):
        ...     x, how = primals
        ...     return x**3, 3.0 * x**2 * tangents[0]
        >>> float(jax.grad(cube)(2.0, "symbolic"))
        12.0
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp: Callable | None = None

    def defjvp(self, jvp: Callable) -> Callable:
        self.jvp = jvp
        return jvp

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", "function")
        if self.jvp is None:
            raise AttributeError(
                f"`jaxbridge.custom_jvp` function `{name}` has no JVP; call "
                f"`{name}.defjvp(jvp)` first."
            )
        split = _Split(self.fun, args, kwargs, self.nondiff_argnums)
        jvp = self.jvp
        slots = [i for i in range(len(split.args)) if i not in split.nondiff]

        @jax.custom_jvp
        def inner(*values):
            return _box(self.fun(*split.merge(values)))

        def inner_jvp(primals, tangents):
            full = split.merge(primals)
            tangent_of = dict(zip(split.dynamic, tangents, strict=True))
            out, t_out = jvp(
                *split.nondiff_values(),
                tuple(full[i] for i in slots),
                tuple(tangent_of.get(i) for i in slots),
            )
            out = _box(out)
            # A non-array output has no tangent: give its slot the output's own structure.
            t_out = jax.tree.map(
                lambda o, t: o if isinstance(o, _StaticLeaf) else t,
                out,
                _box(t_out),
                is_leaf=lambda x: isinstance(x, _StaticLeaf),
            )
            return out, t_out

        inner.defjvp(inner_jvp)
        return _unbox(inner(*split.values()))
