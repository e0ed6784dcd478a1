"""SciPy functions JAX lacks, wrapped with derivatives and checked against finite differences.

1. `scipy.special.kv` (the modified Bessel function K_nu of real order): its derivative
   `-(K_{nu-1} + K_{nu+1}) / 2` as `jvp=` and `vjp=` rules.
2. `scipy.integrate.solve_ivp` (an ODE solved by an adaptive Runge-Kutta method) with
   `derivative=jaxbridge.FiniteDifferences()`, checked against the closed-form solution in JAX.

    python examples/03_scipy_with_derivatives.py [--quick]
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from scipy import integrate, special

import jaxbridge

jax.config.update("jax_enable_x64", True)  # float64 for a sharp comparison

parser = argparse.ArgumentParser()
parser.add_argument("--quick", action="store_true", help="fewer points")
args = parser.parse_args()
n = 4 if args.quick else 32

# --- 1. scipy.special.kv with derivative rules ----------------------------------------------
NU = 0.7


def dkv(z):
    return -(special.kv(NU - 1, z) + special.kv(NU + 1, z)) / 2


kv = jaxbridge.host(
    lambda z: special.kv(NU, z),
    vmap="vectorized",  # kv broadcasts: a batch is one SciPy call
    jvp=lambda z, t: dkv(z) * t,
    vjp=lambda z, ct: (dkv(z) * ct,),
)

z = jnp.linspace(0.5, 3.0, n)
grad_rule = jax.jit(jax.vmap(jax.grad(kv)))(z)  # reverse mode, batched
jvp_rule = jax.jvp(kv, (z,), (jnp.ones_like(z),))[1]  # forward mode
h = 1e-6
fd = (special.kv(NU, np.asarray(z) + h) - special.kv(NU, np.asarray(z) - h)) / (2 * h)
err_fd, err_jvp = np.max(np.abs(grad_rule - fd)), np.max(np.abs(jvp_rule - grad_rule))
print(
    f"kv: K_{NU}'(z) at {n} points; max |grad - central differences| = {err_fd:.1e}, "
    f"|jvp - grad| = {err_jvp:.1e}"
)
assert np.allclose(grad_rule, fd, rtol=1e-7, atol=1e-9) and np.allclose(jvp_rule, grad_rule)

# A loss through it, under jit: fit the scale `a` of a * K_nu(z) to data by gradient.
target = 2.5 * special.kv(NU, np.asarray(z))
grad_loss = jax.jit(jax.grad(lambda a: jnp.mean((a * kv(z) - target) ** 2)))
a, lr = 1.0, 0.4 / float(jnp.mean(kv(z) ** 2))
for _ in range(30):
    a = a - lr * grad_loss(a)
print(f"    a * K_nu fitted by gradient descent under jit: a = {float(a):.6f} (true 2.5)")
assert abs(float(a) - 2.5) < 1e-4

# --- 2. scipy.integrate.solve_ivp with finite differences ----------------------------------
T = 2.0


@jaxbridge.host(derivative=jaxbridge.FiniteDifferences())
def logistic_at_T(params):
    """y' = r y (1 - y), y(0) = y0: y(T) by SciPy's RK45."""
    r, y0 = params
    sol = integrate.solve_ivp(lambda t, y: r * y * (1 - y), (0.0, T), [y0], rtol=1e-12, atol=1e-12)
    return sol.y[0, -1]


def logistic_exact(params):  # the closed form, in JAX
    r, y0 = params
    return 1 / (1 + (1 / y0 - 1) * jnp.exp(-r * T))


params = jnp.stack([jnp.linspace(0.5, 2.0, n), jnp.linspace(0.1, 0.4, n)], axis=1)
g_host = jax.jit(jax.vmap(jax.grad(logistic_at_T)))(params)  # (r, y0) gradients, batched
g_exact = jax.vmap(jax.grad(logistic_exact))(params)
jf = jax.jacfwd(logistic_at_T)(params[0])
err = np.max(np.abs(g_host - g_exact))
print(
    f"solve_ivp: d y(T) / d(r, y0) at {n} parameter pairs; max |finite differences - exact| = "
    f"{err:.1e}; jacfwd agrees: {np.allclose(jf, g_exact[0], atol=1e-6)}"
)
assert np.allclose(g_host, g_exact, atol=1e-6)
