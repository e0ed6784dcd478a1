"""Parameters of every model: values from a `params` argument, `evals_count`, batching.

A model's methods take `params`, a dict of some of its parameters (scalars or arrays of any
batch shape), and a static `evals_count`. `values` fills in the defaults, names unknown keys
and casts each value to the default float dtype (float64 with x64 on), so a Python float and
an array share one compiled program; `evals_count` checks the count; `map_batch` evaluates a
function of one parameter point over the broadcast batch shape of all of them with one `vmap`.
This module imports only JAX: every model sits on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def read_defaults(obj: Any, names: Iterable[str]) -> dict[str, float]:
    """The defaults of a model's parameters: the scqubits object's attributes `names`, floats."""
    return {name: float(getattr(obj, name)) for name in names}


def real_dtype() -> Any:
    """The default float dtype: float64 with x64 on, float32 otherwise."""
    return jnp.zeros(()).dtype


def as_real(value: Any) -> jax.Array:
    """`value` as an array of `real_dtype()` (always cast, weak types included)."""
    return jnp.asarray(value).astype(real_dtype())


def unknown_names(given: Mapping[str, Any], known: Iterable[str]) -> list[str]:
    """The keys of `given` that are not in `known`, sorted."""
    return sorted(set(given) - set(known))


def values(
    params: Mapping[str, Any] | None,
    defaults: Mapping[str, Any],
    unknown: Callable[[list[str]], str],
    cast: Callable[[str, Any, Any], jax.Array] | None = None,
) -> dict[str, jax.Array]:
    """Every parameter's value: `params`' where given, else its default.

    Args:
        params: some of `defaults`' names and their values (scalars or arrays); None for none.
        defaults: every parameter's name and default, in the model's order.
        unknown: the error message for names not in `defaults` (given them, sorted).
        cast: `cast(name, value, default)` makes each value an array; default `as_real`.

    Returns:
        `{name: array}` in `defaults`' order.

    Raises:
        ValueError: `unknown(names)` where `params` has names `defaults` lacks.
    """
    given = dict(params or {})
    bad = unknown_names(given, defaults)
    if bad:
        raise ValueError(unknown(bad))
    if cast is None:
        return {n: as_real(given.get(n, d)) for n, d in defaults.items()}
    return {n: cast(n, given.get(n, d), d) for n, d in defaults.items()}


def evals_count(count: Any, most: int, message: str, **fields: Any) -> int:
    """`count` as an int, checked to be an integer between 1 and `most`.

    Args:
        count: the `evals_count` a method was given.
        most: the largest allowed.
        message: the error's format string; it receives `most`, `got` (the count) and `fields`.
        fields: the message's other fields (e.g. `method`).

    Raises:
        ValueError: `message` formatted, where `count` is not such an integer.
    """
    if not isinstance(count, int | np.integer) or not 1 <= count <= most:
        raise ValueError(message.format(most=most, got=count, **fields))
    return int(count)


def map_batch(fn: Callable[..., Any], *trees: Any, core_ndims: Any = 0) -> Any:
    """`fn(*trees)` at every point of the broadcast batch shape of the trees' leaves.

    Each leaf's shape is a batch shape followed by `core_ndims` core dimensions (0 for a
    parameter, 1 for a vector of levels, 2 for a matrix of states). Without a batch `fn` runs
    once on the trees as given; with one, every leaf is broadcast to the common batch shape,
    flattened to one axis and `fn` runs under one `vmap`; its outputs get the batch shape back.

    Args:
        fn: a function of one point of each tree.
        trees: pytrees of arrays (e.g. the `values` dict).
        core_ndims: an int for every leaf, or a tuple with one entry per tree, each an int or
            a pytree prefix of that tree (e.g. `(0, (1, 2))` for `values` and `(evals, evecs)`).

    Returns:
        `fn`'s outputs, each with the batch shape in front.
    """
    cores = core_ndims if isinstance(core_ndims, tuple) else (core_ndims,) * len(trees)
    leaves: list[jax.Array] = []
    ndims: list[int] = []
    structures = []
    for tree, core in zip(trees, cores, strict=True):
        flat, structure = jax.tree.flatten(tree)
        per_leaf = jax.tree.map(lambda c, sub: jax.tree.map(lambda _: c, sub), core, tree)
        leaves += [jnp.asarray(x) for x in flat]
        ndims += jax.tree.leaves(per_leaf)
        structures.append((structure, len(flat)))
    batch = [x.shape[: x.ndim - c] for x, c in zip(leaves, ndims, strict=True)]
    shape = jnp.broadcast_shapes(*batch) if batch else ()

    def call(flat: list[Any]) -> Any:
        args, start = [], 0
        for structure, n in structures:
            args.append(jax.tree.unflatten(structure, flat[start : start + n]))
            start += n
        return fn(*args)

    if not shape:
        return fn(*trees)
    size = int(np.prod(shape))
    flat = [
        jnp.broadcast_to(x, (*shape, *x.shape[x.ndim - c :])).reshape(size, *x.shape[x.ndim - c :])
        for x, c in zip(leaves, ndims, strict=True)
    ]
    out = jax.vmap(call)(flat)
    return jax.tree.map(lambda y: y.reshape(shape + y.shape[1:]), out)
