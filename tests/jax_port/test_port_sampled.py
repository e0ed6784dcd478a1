"""A sampled cross-product of JAX's callback cases: mode x dtype x shape x transformation.

Each sample runs one host function through `jaxbridge.host` and through the JAX callback it
stands for (`pure_callback`, or `io_callback` for the io modes), and compares the two. The
product is sampled with a fixed seed to keep the suite fast.
"""

from __future__ import annotations

import itertools
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import io_callback

import jaxbridge

MODES = {"pure": {}, "io_ordered": {"ordered": True}, "io_unordered": {"io": True}}
DTYPES = [np.float32, np.int32, np.uint8, np.float16, np.complex64, np.bool_]
SHAPES = [(), (3,), (2, 3), (0, 2)]
TRANSFORMS = ["jit", "vmap", "scan", "cond", "while"]
SAMPLES = [
    pytest.param(m, d, s, t, id=f"{m}-{np.dtype(d).name}-{'x'.join(map(str, s)) or 'scalar'}-{t}")
    for m, d, s, t in random.Random(12).sample(
        list(itertools.product(MODES, DTYPES, SHAPES, TRANSFORMS)), 24
    )
]


def _host_func(x):
    return np.logical_not(x) if x.dtype == np.bool_ else (x + x).astype(x.dtype)


def _jax_callback(mode, spec):
    if mode == "pure":
        return lambda x: jax.pure_callback(_host_func, spec, x, vmap_method="sequential")
    return lambda x: io_callback(_host_func, spec, x, ordered=mode == "io_ordered")


def _apply(transform, g, x):
    if transform == "jit":
        return jax.jit(g)(x)
    if transform == "vmap":  # over a new leading axis of size 2
        return jax.jit(jax.vmap(g))(jnp.stack([x, x]))
    if transform == "scan":
        return jax.jit(lambda x: lax.scan(lambda c, _: (c, g(c)), x, None, length=2)[1])(x)
    if transform == "cond":
        return jax.jit(lambda p, x: lax.cond(p, g, lambda x: x, x))(True, x)
    return jax.jit(
        lambda x: lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, g(x)), (0, x))[1]
    )(x)


def _example(dtype, shape):
    n = int(np.prod(shape))
    if dtype == np.bool_:
        return np.arange(n).reshape(shape) % 2 == 0
    return (np.arange(n).reshape(shape) % 7).astype(dtype)


@pytest.mark.parametrize(("mode", "dtype", "shape", "transform"), SAMPLES)
def test_sample_matches_the_jax_callback(mode, dtype, shape, transform):
    x = jnp.asarray(_example(dtype, shape))
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
    ours = _apply(transform, jaxbridge.host(_host_func, result=spec, **MODES[mode]), x)
    # JAX's ordered io_callback refuses vmap (a documented difference, test_port_effects):
    # compare with the sequential pure_callback there.
    reference = "pure" if (mode, transform) == ("io_ordered", "vmap") else mode
    theirs = _apply(transform, _jax_callback(reference, spec), x)
    jax.effects_barrier()
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
