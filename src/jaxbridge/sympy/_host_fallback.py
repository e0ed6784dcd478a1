"""Functions JAX lacks, run on the host, with derivatives from `sympy.diff`.

Each host function is a `jax.custom_jvp` whose primal is one host call on SciPy or mpmath (in
float64 or complex128, cast back to the input dtype) and whose tangent is the symbolic partial
derivative, compiled like any other expression: itself native JAX where it can be, another
host fallback where it cannot. So it works under jit, vmap, grad and at any order. Complex
arguments give the complex value (`_special`); a real argument whose value is complex gives
NaN.

The compiler sits above this module (its printer makes the host fallbacks), so it comes in as
an argument of `make`, never as an import.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import sympy

from .._host import host
from . import _errors, _functions, _runtime, _special

#: `(expr, args) -> f`: compiles a derivative (a SymPy expression in `args`) to JAX.
Compiler = Callable[[sympy.Basic, list[Any]], Callable[..., jax.Array]]


def _wrap(impl: _special.Implementation, name: str) -> Callable[..., jax.Array]:
    def on_host(*arrays: np.ndarray) -> np.ndarray:
        dtype = arrays[0].dtype  # every argument has it: `call` casts them
        is_complex = bool(np.issubdtype(dtype, np.complexfloating))
        work = np.complex128 if is_complex else np.float64
        broadcast = np.broadcast_arrays(*(np.asarray(a, work) for a in arrays))
        value = _special.evaluate(impl, broadcast, is_complex)
        return np.broadcast_to(value, broadcast[0].shape).astype(dtype)

    on_host.__name__ = name
    # vmap="vectorized": a batch is one host call on stacked arrays, not a loop; the
    # result has the (broadcast) shape and dtype of the arguments, so no probe call runs.
    return host(
        on_host,
        vmap="vectorized",
        result=lambda *avals: jax.ShapeDtypeStruct(avals[0].shape, avals[0].dtype),
    )


def _partial(
    n: int, builder: Callable[..., sympy.Basic], i: int, compile_: Compiler
) -> Callable | None:
    """The compiled partial derivative in argument `i` (None: SymPy or we cannot compute it)."""
    dummies = sympy.symbols(f"_a0:{n}", real=True)
    derivative = sympy.diff(builder(*dummies), dummies[i])
    if derivative.has(sympy.Derivative, sympy.Subs):
        return None
    try:
        return compile_(derivative, list(dummies))
    except ValueError:  # a function we cannot print (expint's order derivative: meijerg)
        return None


def _build(node: sympy.Basic, compile_: Compiler) -> Callable[..., jax.Array]:
    """`call(labels, *args)`: the host function of `node`'s class, shared by its nodes."""
    impl = _functions.implementation(node)
    builder = _functions.host_builder(node)
    n = len(_functions.host_arguments(node))
    name = getattr(node.func, "__name__", str(node.func))
    host_fn = _wrap(impl, name)
    partials: dict[int, Callable | None] = {}  # each compiled when first needed

    # labels (the printed arguments of the node) are static: they name an argument in errors.
    @functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
    def fn(labels: tuple[str, ...], *args: jax.Array) -> jax.Array:
        return host_fn(*jnp.broadcast_arrays(*args))

    def fn_jvp(labels: tuple[str, ...], primals: tuple, tangents: tuple) -> tuple:
        out = fn(labels, *primals)
        tangent_out = jnp.zeros_like(out)
        for i, t in enumerate(tangents):
            if type(t) is jax.custom_derivatives.SymbolicZero:
                continue
            if i not in partials:
                partials[i] = _partial(n, builder, i, compile_)
            partial = partials[i]
            if partial is None:
                raise NotImplementedError(
                    _errors.NO_DERIVATIVE.format(func=name, index=i, arg=labels[i])
                )
            tangent_out = tangent_out + partial(*primals) * t
        return out, tangent_out

    # symbolic_zeros: constant arguments (a Bessel order) need no derivative at all.
    fn.defjvp(fn_jvp, symbolic_zeros=True)

    def call(labels: tuple[str, ...], *args: object) -> jax.Array:
        # Literal arguments (a Bessel order `0`) would be integers with float0 tangents.
        arrays = [jnp.asarray(a) for a in args]
        dtype = _dtype(arrays)
        if jnp.issubdtype(dtype, jnp.complexfloating) and impl.complex_ is None:
            raise TypeError(_errors.NO_COMPLEX.format(func=name, dtype=np.dtype(dtype).name))
        return fn(labels, *[a.astype(dtype) for a in arrays])

    call.__name__ = f"host_{name}"
    return call


def _dtype(arrays: Sequence[jax.Array]) -> np.dtype:
    """The computing dtype: JAX's promotion, where literals (weakly typed) do not widen it."""
    inexact = [a for a in arrays if jnp.issubdtype(a.dtype, jnp.inexact)]
    if not inexact:
        return _runtime._common_dtype(arrays)
    # A float literal meets a complex argument: strict promotion refuses to pair them.
    with jax.numpy_dtype_promotion("standard"):
        return np.dtype(jnp.result_type(*inexact))


_REGISTRY: dict[tuple, Callable[..., jax.Array]] = {}


def make(
    node: sympy.Basic, compile_: Compiler, labels: Sequence[str] | None = None
) -> Callable[..., jax.Array]:
    """The JAX callable for `node`, taking `_functions.host_arguments(node)`.

    Args:
        node: the SymPy node (its class and static parameters pick the host function).
        compile_: compiles its partial derivatives, when a derivative is first asked for.
        labels: name its arguments in errors (the user's expressions); by default, as printed.
    """
    key = _functions.host_key(node)
    if key not in _REGISTRY:
        _REGISTRY[key] = _build(node, compile_)
    if labels is None:
        labels = [str(a) for a in _functions.host_arguments(node)]
    return functools.partial(_REGISTRY[key], tuple(labels))
