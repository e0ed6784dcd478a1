"""The modified Bessel function `K_0` in JAX, for scqubits' inductive and quasiparticle noise.

JAX has no `K_0` (`jax.scipy.special` stops at `i0`, `i1`), and scqubits' defaults for `Q_ind`
and `Y_qp` use `scipy.special.kv(0, x)`. Both integral forms below are trapezoid sums of
functions analytic in a strip around the real axis, whose error falls exponentially with the
number of nodes (to rounding, ~1e-16 relative, with the nodes chosen here); their derivatives
come from differentiating the sums, so `grad`, `jvp` and `hessian` all work.

- `x < 2`: `K_0(x) = int_0^inf exp(-x cosh t) dt`, nodes `t = 0, h, 2h, ...` up to `t = 26`
  (where `exp(-x cosh t)` is below 1e-300 for any x above 1e-9).
- `x >= 2`: with `s = sqrt(2x) sinh(t/2)`,
  `exp(x) K_0(x) = int_0^inf 2 exp(-s^2) / sqrt(2x + s^2) ds`, nodes up to `s = 6.5`.

`k0_sinh(x)` is `K_0(x) sinh(x)` without overflow (`sinh` alone overflows above x = 710,
where scqubits' own product becomes `inf * 0`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

_T_STEP = 0.05
_T_NODES = np.arange(0.0, 26.0 + _T_STEP / 2, _T_STEP)
_T_WEIGHTS = np.full(_T_NODES.shape, _T_STEP)
_T_WEIGHTS[0] = _T_STEP / 2  # the integrand is even in t: the full-line trapezoid, halved

_S_STEP = 0.125
_S_NODES = np.arange(0.0, 6.5 + _S_STEP / 2, _S_STEP)
_S_WEIGHTS = np.full(_S_NODES.shape, _S_STEP)
_S_WEIGHTS[0] = _S_STEP / 2

_SWITCH = 2.0


def _small(x: jax.Array) -> jax.Array:
    """`K_0(x)` by the `t` sum (accurate for 1e-9 < x < ~5)."""
    t = jnp.asarray(_T_NODES, x.dtype).reshape((1,) * x.ndim + (-1,))
    w = jnp.asarray(_T_WEIGHTS, x.dtype).reshape(t.shape)
    return jnp.sum(w * jnp.exp(-x[..., None] * jnp.cosh(t)), axis=-1)


def _scaled_large(x: jax.Array) -> jax.Array:
    """`exp(x) K_0(x)` by the `s` sum (accurate for x > ~1)."""
    s = jnp.asarray(_S_NODES, x.dtype).reshape((1,) * x.ndim + (-1,))
    w = jnp.asarray(_S_WEIGHTS, x.dtype).reshape(s.shape)
    terms = 2.0 * jnp.exp(-(s**2)) / jnp.sqrt(2.0 * x[..., None] + s**2)
    return jnp.sum(w * terms, axis=-1)


def _split(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Each branch sees only inputs it handles (no inf or NaN in the unused one's derivative).

    `where`, not `minimum`/`maximum`: those split the derivative in half at x = 2.
    """
    small = x < _SWITCH
    return jnp.where(small, x, _SWITCH), jnp.where(small, _SWITCH, x)


def k0e(x: jax.Array) -> jax.Array:
    """`exp(x) K_0(x)` for `x > 0` (elementwise), as `scipy.special.k0e`."""
    x = jnp.asarray(x)
    small_x, large_x = _split(x)
    return jnp.where(x < _SWITCH, jnp.exp(small_x) * _small(small_x), _scaled_large(large_x))


def k0(x: jax.Array) -> jax.Array:
    """`K_0(x)` for `x > 0` (elementwise), as `scipy.special.kv(0, x)`."""
    x = jnp.asarray(x)
    small_x, large_x = _split(x)
    return jnp.where(x < _SWITCH, _small(small_x), jnp.exp(-large_x) * _scaled_large(large_x))


def k0_sinh(x: jax.Array) -> jax.Array:
    """`K_0(x) sinh(x)` for `x > 0`, finite for every finite x."""
    x = jnp.asarray(x)
    return k0e(x) * (-jnp.expm1(-2.0 * x)) / 2.0
