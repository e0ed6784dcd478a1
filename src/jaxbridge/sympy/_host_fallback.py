"""Functions JAX lacks, run on the host, with derivatives from `sympy.diff`.

Each host function is a `jax.custom_jvp` whose primal is one host call on SciPy or mpmath (in
float64, cast back to the input dtype) and whose tangent is the symbolic partial derivative,
compiled by `jaxbridge.sympy.compile` like any other expression: itself native JAX where it can
be, another host fallback where it cannot. So it works under jit, vmap, grad and at any order.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import sympy

from . import _errors, _functions, _runtime


def _host_call(fn: Callable[..., np.ndarray], args: list[jax.Array]) -> jax.Array:
    """The one place a host call happens: `jaxbridge.host`, vectorised over a batch."""
    args = list(jnp.broadcast_arrays(*args))
    if fn not in _HOSTS:
        _HOSTS[fn] = _wrap(fn)
    return _HOSTS[fn](*args)


def _wrap(fn: Callable[..., np.ndarray]) -> Callable[..., jax.Array]:
    from jaxbridge import host

    def on_host(*arrays: np.ndarray) -> np.ndarray:
        dtype = arrays[0].dtype
        arrays = [np.asarray(a, np.float64) for a in arrays]
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        with np.errstate(all="ignore"):
            value = np.asarray(fn(*arrays), np.float64)
        return np.broadcast_to(value, shape).astype(dtype)

    on_host.__name__ = getattr(fn, "__name__", "special_function")
    # vmap="vectorized": a batch is one host call on stacked arrays, not a loop; the
    # result has the (broadcast) shape and dtype of the arguments, so no probe call runs.
    return host(
        on_host,
        vmap="vectorized",
        result=lambda *avals: jax.ShapeDtypeStruct(avals[0].shape, avals[0].dtype),
    )


_HOSTS: dict[Callable, Callable[..., jax.Array]] = {}


def _partials(n: int, builder: Callable) -> tuple[Callable | None, ...]:
    """Compiled partial derivatives of the host function, one per argument (None: unavailable)."""
    from ._compile import compile as compile_

    dummies = sympy.symbols(f"_a0:{n}", real=True)
    node = builder(*dummies)
    partials = []
    for d in dummies:
        derivative = sympy.diff(node, d)
        if derivative.has(sympy.Derivative):
            partials.append(None)
        else:
            partials.append(compile_(derivative, list(dummies)))
    return tuple(partials)


_REGISTRY: dict[tuple, Callable[..., jax.Array]] = {}


def make(node: sympy.Basic) -> Callable[..., jax.Array]:
    """The JAX callable for `node`'s function, taking `_functions.host_arguments(node)`."""
    key = _functions.host_key(node)
    if key in _REGISTRY:
        return _REGISTRY[key]
    numpy_fn = _functions.host_numpy(node)
    builder = _functions.host_builder(node)
    n = len(_functions.host_arguments(node))
    name = getattr(node.func, "__name__", str(node.func))

    cache: list[tuple[Callable | None, ...]] = []  # compiled on the first derivative

    @jax.custom_jvp
    def fn(*args):
        return _host_call(numpy_fn, list(args))

    def fn_jvp(primals, tangents):
        out = fn(*primals)
        tangent_out = jnp.zeros_like(out)
        if not cache:
            cache.append(_partials(n, builder))
        partials = cache[0]
        for i, (t, partial) in enumerate(zip(tangents, partials, strict=True)):
            if type(t) is jax.custom_derivatives.SymbolicZero:
                continue
            if partial is None:
                raise NotImplementedError(
                    _errors.NO_DERIVATIVE.format(func=name, index=i, arg=f"_a{i}")
                )
            tangent_out = tangent_out + partial(*primals) * t
        return out, tangent_out

    # symbolic_zeros: constant arguments (a Bessel order) need no derivative at all.
    fn.defjvp(fn_jvp, symbolic_zeros=True)

    def call(*args):
        # Literal arguments (a Bessel order `0`) would be integers with float0 tangents.
        arrays = [jnp.asarray(a) for a in args]
        dtype = _runtime._common_dtype(arrays)
        return fn(*[a.astype(dtype) for a in arrays])

    call.__name__ = f"host_{name}"
    _REGISTRY[key] = call
    return call
