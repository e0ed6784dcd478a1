"""Helpers that the generated code calls: argument checks, output assembly, Piecewise.

The printer emits a flat list of assignments; anything that is more than one `jnp` call lives
here, so the generated source stays short and the Python compiler never sees deep nesting.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import _errors


def _common_dtype(arrays: Sequence[jax.Array]) -> np.dtype:
    # Integer and boolean inputs compute in the default float dtype (x64 aware): a SymPy
    # expression is real mathematics, and `x**3 / 2` on an int32 array must not truncate.
    inexact = [a.dtype for a in arrays if jnp.issubdtype(a.dtype, jnp.inexact)]
    if not inexact:
        return jnp.result_type(float)
    # A deliberate promotion (a real and a complex argument meet), also under strict mode.
    with jax.numpy_dtype_promotion("standard"):
        return functools.reduce(jnp.promote_types, inexact)


def prepare(
    name: str, values: Sequence[object], names: Sequence[str], shapes: Sequence[tuple[int, ...]]
) -> tuple[list[jax.Array], tuple[int, ...], np.dtype]:
    """Checks and casts the arguments of a compiled function; returns arrays, batch shape, dtype."""
    if len(values) != len(shapes):
        raise TypeError(
            f"`{name}` takes {len(shapes)} argument(s) ({', '.join(names)}), in the order of "
            f"`args`; got {len(values)}."
        )
    arrays = [jnp.asarray(v) for v in values]
    dtype = _common_dtype(arrays)
    batch_shapes = []
    for array, arg_name, shape in zip(arrays, names, shapes, strict=True):
        k = len(shape)
        if array.ndim < k or tuple(array.shape[array.ndim - k :]) != tuple(shape):
            raise ValueError(
                _errors.ARG_SHAPE.format(
                    name=name, arg=arg_name, shape=tuple(shape), got=tuple(array.shape)
                )
            )
        batch_shapes.append(tuple(array.shape[: array.ndim - k]))
    try:
        batch = tuple(np.broadcast_shapes(*batch_shapes)) if batch_shapes else ()
    except ValueError:
        got = ", ".join(f"{n}: {s}" for n, s in zip(names, batch_shapes, strict=True))
        raise ValueError(_errors.BATCH_SHAPES.format(name=name, got=got)) from None
    # Every input at the full batch *rank*, not the full batch shape: leading size-1 dims are a
    # free reshape and keep `jax_numpy_rank_promotion="raise"` happy, while an unbatched input
    # stays small, so the subexpressions of unbatched inputs alone are computed once, not once
    # per batch element. The arithmetic helpers below broadcast sizes only where they differ.
    arrays = [
        _pad_rank(a if a.dtype == dtype else a.astype(dtype), len(batch) + len(shape))
        for a, shape in zip(arrays, shapes, strict=True)
    ]
    return arrays, batch, dtype


def _pad_rank(array: jax.Array, ndim: int) -> jax.Array:
    if array.ndim == ndim:
        return array
    return lax.expand_dims(array, tuple(range(ndim - array.ndim)))


def output(value: object, batch: tuple[int, ...], dtype: np.dtype) -> jax.Array:
    """One scalar output, broadcast over the batch; booleans stay boolean."""
    value = jnp.asarray(value)
    if not (value.dtype == jnp.bool_ or jnp.issubdtype(value.dtype, jnp.complexfloating)):
        value = value.astype(dtype)
    return jnp.broadcast_to(value, batch)


def stack(
    values: Sequence[object], shape: tuple[int, ...], batch: tuple[int, ...], dtype: np.dtype
) -> jax.Array:
    """An explicit Matrix or Array: the elements, row-major, with the matrix dimensions last."""
    if not values:
        return jnp.zeros(batch + tuple(shape), dtype)
    parts = [output(v, batch, dtype) for v in values]
    result_dtype = functools.reduce(jnp.promote_types, [p.dtype for p in parts])
    parts = [p.astype(result_dtype) for p in parts]
    return jnp.stack(parts, axis=-1).reshape(batch + tuple(shape))


def matrix_output(value: jax.Array, shape: tuple[int, ...], batch: tuple[int, ...]) -> jax.Array:
    """A matrix-valued expression (MatMul, Inverse, ...) broadcast over the batch."""
    return jnp.broadcast_to(value, batch + tuple(shape))


def guard(mask: jax.Array, x: jax.Array, matrix_dims: int = 0) -> jax.Array:
    """The first half of the double-where pattern: `x` unchanged, its derivative masked.

    Inside an untaken Piecewise branch, `sqrt(x)` at `x < 0` has an infinite derivative, and
    the zero cotangent from the final `where` times infinity is NaN. Routing the branch's
    inputs through this where-with-stop_gradient sends every cotangent that reaches them back
    as exactly zero where the branch is not taken, at any derivative order.
    """
    mask = jnp.reshape(mask, jnp.shape(mask) + (1,) * matrix_dims)
    return jnp.where(mask, x, lax.stop_gradient(x))


def piecewise(conditions: Sequence[Any], values: Sequence[Any]) -> jax.Array:
    """The second half: the first branch whose condition holds, NaN where none does."""
    result = jnp.nan if conditions[-1] is not True else values[-1]
    start = len(values) - 1 if conditions[-1] is True else len(values)
    for condition, value in zip(conditions[:start][::-1], values[:start][::-1], strict=True):
        result = jnp.where(condition, value, result)
    return jnp.asarray(result)


def taken(conditions: Sequence[Any], k: int) -> Any:
    """Where branch `k` of a Piecewise is the one evaluated: its condition, and none before."""
    mask = conditions[k]
    for earlier in conditions[:k]:
        mask = jnp.logical_and(mask, jnp.logical_not(earlier))
    return mask


def reduce(op: str, *values: object) -> object:
    """n-ary Min, Max, And, Or, Xor, as a left fold of the binary `jnp` function."""
    fn = getattr(jnp, op)
    result = values[0]
    for v in values[1:]:
        result = fn(result, v)
    return result


def dirac_delta(x: jax.Array) -> jax.Array:
    """DiracDelta: zero off the origin, infinite at it."""
    return jnp.where(x == 0, jnp.inf, jnp.zeros_like(x))


def special(native: Callable[..., Any], host: Callable[..., Any], *args: Any) -> Any:
    """`native(*args)` (JAX's real-valued special function), or the host fallback if complex."""
    if any(jnp.iscomplexobj(a) for a in args):
        return host(*args)
    return native(*args)


def real_only(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` for a function defined on the reals only; a complex argument raises."""
    for a in args:
        if jnp.iscomplexobj(a):
            raise TypeError(_errors.REAL_ONLY.format(func=name, dtype=jnp.result_type(a)))
    return fn(*args)


def compare(op: str, a: Any, b: Any) -> jax.Array:
    """An ordering comparison (Lt, Le, Gt, Ge): defined for real arguments only."""
    return real_only(_ORDER_NAMES[op], getattr(jnp, op), a, b)


_ORDER_NAMES = {"less": "Lt", "less_equal": "Le", "greater": "Gt", "greater_equal": "Ge"}


def sinc_derivative(n: int, x: Any) -> jax.Array:
    """The n-th derivative of sinc(x) = sin(x)/x, through JAX's series rule (finite at 0)."""

    def derivative(g: Callable[[jax.Array], jax.Array]) -> Callable[[jax.Array], jax.Array]:
        return lambda v: jax.jvp(g, (v,), (jnp.ones_like(v),))[1]

    fn: Callable[[jax.Array], jax.Array] = lambda v: jnp.sinc(v / jnp.pi)  # noqa: E731
    for _ in range(n):
        fn = derivative(fn)
    return fn(jnp.asarray(x))


def eye(n: int, dtype: np.dtype) -> jax.Array:
    return jnp.eye(n, dtype=dtype)


# Arithmetic straight to `lax`: arrays of one shape and the common dtype, and weak Python float
# literals, need none of the `jnp` wrappers' promotion checks, which are costly per operation when
# tracing. Anything else (an unbatched input meeting a batched one, an integer or complex
# literal) takes the `jnp` path, which broadcasts size-1 dimensions at equal rank.
def _fast(lax_fn, jnp_fn):
    def op(*args):
        try:
            return lax_fn(*args)
        except (TypeError, ValueError):
            return jnp_fn(*args)

    op.__name__ = jnp_fn.__name__
    return op


_add = _fast(lax.add, jnp.add)
_mul = _fast(lax.mul, jnp.multiply)
div = _fast(lax.div, jnp.divide)
neg = _fast(lax.neg, jnp.negative)
integer_pow = _fast(lax.integer_pow, lambda x, n: jnp.asarray(x) ** n)
sin = _fast(lax.sin, jnp.sin)
cos = _fast(lax.cos, jnp.cos)
tan = _fast(lax.tan, jnp.tan)
exp = _fast(lax.exp, jnp.exp)
log = _fast(lax.log, jnp.log)
sqrt = _fast(lax.sqrt, jnp.sqrt)
tanh = _fast(lax.tanh, jnp.tanh)
sinh = _fast(lax.sinh, jnp.sinh)
cosh = _fast(lax.cosh, jnp.cosh)


def add(*values):
    result = values[0]
    for v in values[1:]:
        result = _add(result, v)
    return result


def mul(*values):
    result = values[0]
    for v in values[1:]:
        result = _mul(result, v)
    return result
