"""The modified Bessel functions `K_0` and `K_1`, scaled by `exp(x)`, from SciPy on the host.

scqubits' defaults for `Q_ind` and `Y_qp` use `scipy.special.kv(0, x)`; here SciPy's `k0e` and
`k1e` compute the same on the host, in one `jaxbridge.host` call for a whole batch, and their
derivatives are JAX code of the two results (`(e^x K_0)' = e^x (K_0 - K_1)`,
`(e^x K_1)' = e^x (K_1 (1 - 1/x) - K_0)`), so every derivative order works. A program then
holds one host call for each use instead of the hundreds of exponentials a JAX quadrature of
`K_0` compiles into, forward and backward.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

from ... import _host


def _host_k01e(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return scipy.special.k0e(x).astype(x.dtype), scipy.special.k1e(x).astype(x.dtype)


def _result(x: jax.ShapeDtypeStruct) -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return spec, spec


_K01E = _host.host(_host_k01e, result=_result, vmap="vectorized")


@jax.custom_jvp
def k01e(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`(exp(x) K_0(x), exp(x) K_1(x))` elementwise, for `x > 0` (SciPy's `k0e`, `k1e`).

    Args:
        x: an array of positive reals (float64 with x64 on).

    Returns:
        Two arrays of `x`'s shape and dtype. Under `vmap` one host call takes the batch;
        `jvp`, `grad` and higher orders differentiate the recurrences above.
    """
    k0, k1 = _K01E(x)
    return k0, k1


@k01e.defjvp
def _k01e_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (dx,) = primals, tangents
    k0, k1 = k01e(x)
    return (k0, k1), ((k0 - k1) * dx, (k1 * (1 - 1 / x) - k0) * dx)


def k0_sinh(x: jax.Array) -> jax.Array:
    """`K_0(x) sinh(x)` without overflow: `exp(x) K_0(x) (1 - exp(-2x)) / 2`, for `x > 0`."""
    x = jnp.asarray(x)
    return -0.5 * k01e(x)[0] * jnp.expm1(-2 * x)
