"""Pulses: the time dependence of a drive, piecewise constant or smooth.

A pulse is an amplitude in the model's energy units (GHz) as a function of time (ns); a drive
is `(operator, pulse)` and adds `2 pi amplitude(t) operator` to the Hamiltonian. A `pwc` pulse
is a container of arrays (a NamedTuple, so a pytree: it may cross `jit` and `vmap`); a `smooth`
pulse holds a JAX function of time (static) and the arrays it takes as `args` (its leaves).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from . import _errors


class PiecewiseConstant(NamedTuple):
    """`values[i]` on `[times[i], times[i + 1])`, 0 outside `[times[0], times[-1])`."""

    times: jax.Array
    values: jax.Array

    def __call__(self, t: Any) -> jax.Array:
        """The amplitude at time `t` (a scalar)."""
        i = jnp.searchsorted(self.times, t, side="right") - 1
        inside = (i >= 0) & (i < self.values.shape[0])
        return jnp.where(inside, self.values[jnp.clip(i, 0, self.values.shape[0] - 1)], 0.0)


@jax.tree_util.register_pytree_node_class
class Smooth:
    """`fn(t, args)`: a JAX function of time and of the (differentiable) arrays `args`.

    A pytree whose leaves are `args` (`fn` is static), so a `Smooth` pulse may cross `jit`
    and `vmap` as an argument.
    """

    def __init__(self, fn: Callable[[Any, Any], Any], args: Any) -> None:
        self.fn = fn
        self.args = args

    def tree_flatten(self) -> tuple[tuple[Any], Callable[[Any, Any], Any]]:
        return (self.args,), self.fn

    @classmethod
    def tree_unflatten(cls, fn: Callable[[Any, Any], Any], leaves: Any) -> Smooth:
        return cls(fn, leaves[0])

    def __repr__(self) -> str:
        return f"Smooth({getattr(self.fn, '__name__', self.fn)}, args={self.args!r})"

    def __call__(self, t: Any) -> jax.Array:
        """The amplitude at time `t` (a scalar)."""
        return jnp.asarray(self.fn(t, self.args))


def pwc(times: Any, values: Any) -> PiecewiseConstant:
    """A piecewise-constant pulse: `values[i]` between `times[i]` and `times[i + 1]`.

    Args:
        times: `(n + 1,)` increasing boundary times (ns).
        values: `(n,)` amplitudes (GHz), real or complex; differentiable.

    Returns:
        A `PiecewiseConstant`, a pytree of the two arrays (under `vmap` a batch of pulses of
        one grid is one program).

    Raises:
        ValueError: `values` does not have one entry per interval of `times` (checked on the
            static shapes, so also under `jit`).

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxbridge.scqubits import dynamics
        >>> p = dynamics.pwc(jnp.linspace(0.0, 10.0, 6), jnp.ones(5))
        >>> float(p(3.0))
        1.0
    """
    times, values = jnp.asarray(times), jnp.asarray(values)
    if times.ndim != 1 or times.shape[0] < 2:
        raise ValueError(_errors.PWC_TIMES.format(got=times.shape))
    n = times.shape[0] - 1
    if values.shape != (n,):
        raise ValueError(_errors.PWC_SHAPE.format(n=n, times=times.shape, values=values.shape))
    return PiecewiseConstant(times, values)


def smooth(fn: Callable[[Any, Any], Any], args: Any = None) -> Smooth:
    """A smooth pulse `fn(t, args)`, `args` a pytree of its (differentiable) parameters.

    Args:
        fn: a JAX function of a scalar time (ns) and `args`, returning a scalar amplitude
            (GHz), e.g. a Gaussian envelope times `cos(2 pi f t)`.
        args: its parameters (arrays); `jax.grad` with respect to them works through `solve`.

    Returns:
        A `Smooth` pulse.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxbridge.scqubits import dynamics
        >>> p = dynamics.smooth(lambda t, a: a * jnp.sin(t), 2.0)
        >>> round(float(p(jnp.pi / 2)), 6)
        2.0
    """
    return Smooth(fn, args)
