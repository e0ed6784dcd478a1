"""A registry of host functions with JAX references, shared by the per-transformation tests.

Every host function is written over the trailing (core) dimensions, so it serves both the
`"sequential"` strategy (unbatched shapes) and `"vectorized"` (a leading batch dimension).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    host_fn: Callable[..., Any]  # NumPy
    reference: Callable[..., Any]  # jax.numpy twin
    args: Callable[[], tuple[Any, ...]]  # example arguments (fresh each time)
    differentiable: bool = True

    def __repr__(self) -> str:
        return self.name


def _rng(seed=0):
    return np.random.default_rng(seed)


def _f32(*shape, seed=0):
    return jnp.asarray(_rng(seed).normal(size=shape), jnp.float32)


CASES = [
    Case(
        "elementwise",
        lambda x, y: np.sin(x) * y,
        lambda x, y: jnp.sin(x) * y,
        lambda: (_f32(3), _f32(3, seed=1)),
    ),
    Case(
        "reduction",
        lambda x: np.sum(x**2, axis=-1),
        lambda x: jnp.sum(x**2, axis=-1),
        lambda: (_f32(4),),
    ),
    Case(
        "matrix",
        lambda a, x: np.einsum("...ij,...j->...i", a, x),
        lambda a, x: jnp.einsum("...ij,...j->...i", a, x),
        lambda: (_f32(3, 3), _f32(3, seed=2)),
    ),
    Case(
        "matrix_valued",
        lambda x: np.exp(x[..., :, None]) * np.cos(x[..., None, :]),
        lambda x: jnp.exp(x[..., :, None]) * jnp.cos(x[..., None, :]),
        lambda: (_f32(3),),
    ),
    Case(
        "pytree",
        lambda d: {"s": d["a"] + d["b"][0], "p": [d["a"] * np.tanh(d["b"][1])]},
        lambda d: {"s": d["a"] + d["b"][0], "p": [d["a"] * jnp.tanh(d["b"][1])]},
        lambda: ({"a": _f32(2), "b": (_f32(2, seed=1), _f32(2, seed=2))},),
    ),
    Case(
        "mixed_int",
        lambda x, n: (x * n.astype(x.dtype), n + 1),
        lambda x, n: (x * n.astype(x.dtype), n + 1),
        lambda: (_f32(3), jnp.asarray([1, 2, 3], jnp.int32)),
    ),
    Case(
        "scalar_out",
        lambda x: np.asarray(np.prod(np.cos(x), axis=-1)),
        lambda x: jnp.prod(jnp.cos(x), axis=-1),
        lambda: (_f32(3),),
    ),
]

STRATEGIES = ["sequential", "vectorized"]
EXECUTORS = ["threads", "threads-vec", "processes", "processes-vec"]


def make_strategy(name: str, chunk_size: int | None = None):
    """The `vmap=` value for a strategy name of STRATEGIES or EXECUTORS ("-vec": vectorised
    chunks). Executors of one size share their pools, so building one per test is cheap."""
    import jaxbridge

    if name in STRATEGIES:
        return name
    vectorized = name.endswith("-vec")
    if name.startswith("threads"):
        return jaxbridge.Threads(2, chunk_size=chunk_size, vectorized=vectorized)
    if name.startswith("processes"):
        return jaxbridge.Processes(2, chunk_size=chunk_size, vectorized=vectorized)
    raise ValueError(f"unknown strategy {name!r}")
