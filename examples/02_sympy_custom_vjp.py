"""User question 2: a SymPy expression as an argument of a `jax.custom_vjp` function.

The user adds a JAX backend to a circuit library whose Hamiltonians are SymPy expressions. The
original snippet wraps "evaluate the expression, differentiate it with `sympy.diff`" in
`jax.custom_vjp`, and JAX rejects the call: a SymPy expression "is not a valid JAX type". (Even
past that, `float(expr.subs(...))` needs numbers, not tracers, so it could not run under `jit`.)

Three fixes, side by side, with the same numbers:

1. Keep the host code: `jaxbridge.host(energy, vjp=...)`. The expression is a static argument,
   handed to the function unchanged; the function runs on the host under `jit`, `vmap` (one
   host call per batch) and `grad`.
2. Compile the expression to native JAX with `jaxbridge.sympy.compile`, under
   `jaxbridge.custom_vjp`, which treats the expression argument as static automatically. No
   host round trip: XLA runs it, and it batches for free.
3. The user's own structure, kept as written: `fwd` saves `(expr, x_value)` in the residuals
   and `bwd` takes `expr` back out and differentiates it with `sympy.diff`. With
   `jaxbridge.custom_vjp` a non-array residual (the expression) travels unchanged beside the
   arrays; only the numbers go through `jaxbridge.sympy.compile`.

A coda: a `jaxbridge.sympy.Expression` is a pytree, so JAX takes it as an ordinary argument and
differentiates it without any custom rule, with respect to its constants too.

    python examples/02_sympy_custom_vjp.py [--quick]
"""

import argparse
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import sympy

import jaxbridge
import jaxbridge.sympy as jbs

jax.config.update("jax_enable_x64", True)  # the host code computes in float64: compare exactly

parser = argparse.ArgumentParser()
parser.add_argument("--quick", action="store_true", help="fewer points")
args = parser.parse_args()

phi = sympy.Symbol("phi")
potential = -8.0 * sympy.cos(phi) + 0.25 * phi**2  # a fluxonium: E_J = 8, E_L = 0.5 GHz
xs = jnp.linspace(-3.0, 3.0, 8 if args.quick else 400)


# --- before: the snippet from the question -------------------------------------------------
@jax.custom_vjp
def energy(x, expr):
    return float(expr.subs(phi, x))


def energy_fwd(x, expr):
    return energy(x, expr), (x, expr)


def energy_bwd(res, g):
    x, expr = res
    return g * float(sympy.diff(expr, phi).subs(phi, x)), None


energy.defvjp(energy_fwd, energy_bwd)

try:
    jax.grad(energy)(1.0, potential)
except TypeError as e:
    print("before: TypeError -", str(e).splitlines()[0])


# --- fix 1: keep the host code; the expression is a static argument --------------------------
def energy_host(x, expr):  # the forward pass, unchanged: x arrives as a NumPy number
    return float(expr.subs(phi, x))


def energy_host_vjp(x, expr, g):  # the backward pass: one cotangent per array argument
    return (g * float(sympy.diff(expr, phi).subs(phi, x)),)


energy1 = jaxbridge.host(energy_host, vjp=energy_host_vjp)
# The expression is not an array, so `jax.jit` takes it as static (it is hashable).
value_and_grad1 = jax.jit(jax.vmap(jax.value_and_grad(energy1), (0, None)), static_argnums=1)


# --- fix 2: compile the expression, under jaxbridge.custom_vjp -------------------------------
@functools.cache  # SymPy expressions are hashable: compile each one once
def compiled(expr):
    return jbs.compile(expr, [phi]), jbs.compile(sympy.diff(expr, phi), [phi])


@jaxbridge.custom_vjp  # `expr` is found static: no nondiff_argnums, no "not a valid JAX type"
def energy2(x, expr):
    return compiled(expr)[0](x)


def energy2_fwd(x, expr):
    f, df = compiled(expr)
    return f(x), df(x)  # the residual is the derivative's value: an array


def energy2_bwd(dfdx, g):
    return g * dfdx, None  # None: the expression's slot


energy2.defvjp(energy2_fwd, energy2_bwd)
value_and_grad2 = jax.jit(jax.vmap(jax.value_and_grad(energy2), (0, None)), static_argnums=1)


# --- fix 3: the question's structure, literally: the expression inside the residuals ---------
@jaxbridge.custom_vjp
def sympy_function(expr, x_value):
    return compiled(expr)[0](x_value)


def sympy_function_fwd(expr, x_value):
    return compiled(expr)[0](x_value), (expr, x_value)  # a SymPy expression in the residuals


def sympy_function_bwd(res, g):
    expr, x_value = res  # the expression comes back unchanged
    dexpr = sympy.diff(expr, phi)
    return None, g * jbs.compile(dexpr, [phi])(x_value)  # compiled while tracing the backward


sympy_function.defvjp(sympy_function_fwd, sympy_function_bwd)
grad3 = jax.grad(sympy_function, argnums=1)  # the question's call: grad(f, argnums=1)(expr, x)
np.testing.assert_allclose(
    grad3(potential, 1.0), float(sympy.diff(potential, phi).subs(phi, 1.0)), rtol=1e-12
)
value_and_grad3 = jax.jit(
    jax.vmap(jax.value_and_grad(sympy_function, argnums=1), (None, 0)), static_argnums=0
)


def timed(fn):
    jax.block_until_ready(fn(xs, potential))  # compile (and, for the host, probe) first
    start = time.perf_counter()
    out = jax.block_until_ready(fn(xs, potential))
    return out, 1e3 * (time.perf_counter() - start)


(v1, g1), ms1 = timed(value_and_grad1)
(v2, g2), ms2 = timed(value_and_grad2)
jax.block_until_ready(value_and_grad3(potential, xs))  # compile first
start = time.perf_counter()
v3, g3 = jax.block_until_ready(value_and_grad3(potential, xs))
ms3 = 1e3 * (time.perf_counter() - start)
print(f"jit(vmap(value_and_grad)) over {len(xs)} points:")
print(f"  fix 1, jaxbridge.host(energy, vjp=...):             {ms1:8.3f} ms (SymPy on the host)")
print(f"  fix 2, jaxbridge.sympy.compile + jaxbridge.custom_vjp: {ms2:5.3f} ms (native XLA)")
print(f"  fix 3, the expression in the residuals, sympy.diff in bwd: {ms3:5.3f} ms (native XLA)")

# The reference: SymPy itself, point by point.
dpotential = sympy.diff(potential, phi)
ref_v = np.array([float(potential.subs(phi, float(x))) for x in xs])
ref_g = np.array([float(dpotential.subs(phi, float(x))) for x in xs])
for v, g in ((v1, g1), (v2, g2), (v3, g3)):
    np.testing.assert_allclose(v, ref_v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, ref_g, rtol=1e-12, atol=1e-12)
differences = [jnp.max(jnp.abs(a - b)) for a, b in ((v1, v2), (g1, g2), (v1, v3), (g1, g3))]
print(
    "same values and gradients from all three fixes and SymPy itself: max difference "
    f"{max(float(d) for d in differences):.1e}"
)

# --- coda: an Expression is a pytree; JAX differentiates it, constants included --------------
e = jbs.Expression(potential, [phi])  # its leaf: the constants [-8.0, 0.25]
d_x, d_e = jax.jit(jax.grad(lambda e, x: e(x), argnums=(1, 0)))(e, 1.0)
np.testing.assert_allclose(d_x, float(dpotential.subs(phi, 1.0)), rtol=1e-12)
np.testing.assert_allclose(d_e.params, [np.cos(1.0), 1.0], rtol=1e-12)  # d/d(-8.0), d/d(0.25)
print(f"coda: jax.grad of Expression({e.to_sympy()}) at phi = 1, no custom rule needed:")
print(f"      d/dphi {float(d_x):.6f}, d/d(constants) {np.asarray(d_e.params).round(6).tolist()}")
