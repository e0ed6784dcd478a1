"""Migrating a hand-written `jax.pure_callback` + `jax.custom_jvp` to `jaxbridge.host`.

The function: the matrix square root `scipy.linalg.sqrtm` (JAX has none). Its JVP solves a
Sylvester equation `X dX + dX X = dA` on the host, and its VJP the transposed one.

Before: two `pure_callback`s with declared result shapes, a `vmap_method`, and a `custom_jvp`.
Forward mode works; reverse mode (`jax.grad`) cannot, because JAX cannot transpose a host
callback that computes the tangent (jax#30401), and `custom_jvp` and `custom_vjp` do not mix.

After: one `jaxbridge.host(..., jvp=..., vjp=...)`: the rules are plain NumPy, a batch is one
host call, and `grad`, `jacrev`, `jvp` and `jacfwd` all work. The numbers are the same.

    python examples/06_migrate_from_pure_callback.py [--quick]
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from scipy import linalg

import jaxbridge

jax.config.update("jax_enable_x64", True)

parser = argparse.ArgumentParser()
parser.add_argument("--quick", action="store_true", help="a smaller batch")
args = parser.parse_args()
n, batch = 4, (4 if args.quick else 64)


def sqrtm_np(a):
    return np.real(linalg.sqrtm(a)).astype(a.dtype)


def sqrtm_jvp_np(a, da):  # X dX + dX X = dA
    x = sqrtm_np(a)
    return linalg.solve_sylvester(x, x, da).astype(a.dtype)


def sqrtm_vjp_np(a, ct):  # the transposed equation: X^T G + G X^T = ct
    x = sqrtm_np(a)
    return (linalg.solve_sylvester(x.T, x.T, ct).astype(a.dtype),)


# --- before: hand-written ------------------------------------------------------------------
@jax.custom_jvp
def sqrtm_before(a):
    return jax.pure_callback(
        sqrtm_np, jax.ShapeDtypeStruct(a.shape, a.dtype), a, vmap_method="sequential"
    )


@sqrtm_before.defjvp
def _sqrtm_before_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    dx = jax.pure_callback(
        sqrtm_jvp_np, jax.ShapeDtypeStruct(a.shape, a.dtype), a, da, vmap_method="sequential"
    )
    return sqrtm_before(a), dx


# --- after: jaxbridge ----------------------------------------------------------------------
# `result=`: the result has the input's shape and dtype. (Without it jaxbridge finds out by one
# call on zeros, which SciPy warns is a singular matrix.)
sqrtm_after = jaxbridge.host(sqrtm_np, result=lambda a: a, jvp=sqrtm_jvp_np, vjp=sqrtm_vjp_np)

# Symmetric positive definite inputs, and a loss.
m = jax.random.normal(jax.random.key(0), (batch, n, n))
a = m @ jnp.swapaxes(m, 1, 2) + n * jnp.eye(n)
da = jax.random.normal(jax.random.key(1), (n, n))


def loss(sqrtm, a):
    return jnp.sum(jnp.sin(sqrtm(a)))


for sqrtm in (sqrtm_before, sqrtm_after):
    x = jax.jit(jax.vmap(sqrtm))(a)
    assert jnp.allclose(x @ x, a, atol=1e-10)
# Values and forward mode agree, under jit and vmap:
assert jnp.array_equal(jax.jit(jax.vmap(sqrtm_before))(a), jax.jit(jax.vmap(sqrtm_after))(a))
t_before = jax.jvp(sqrtm_before, (a[0],), (da,))[1]
t_after = jax.jvp(sqrtm_after, (a[0],), (da,))[1]
assert jnp.allclose(t_before, t_after, rtol=1e-12)
print(f"values and JVPs equal (max |difference| {float(jnp.max(jnp.abs(t_before - t_after))):.1e})")

# Reverse mode: the hand-written version stops; jaxbridge runs the host VJP.
try:
    jax.grad(loss, argnums=1)(sqrtm_before, a[0])
    print("before: grad worked (unexpected)")
except Exception as e:  # JAX cannot transpose the tangent callback (jax#30401)
    print(f"before: jax.grad fails: {type(e).__name__}: {str(e).splitlines()[0][:70]}...")
g_after = jax.jit(jax.vmap(jax.grad(lambda a: loss(sqrtm_after, a))))(a)
# The same gradient from the hand-written version's forward mode (n*n JVPs, one per entry):
g_before = jax.vmap(jax.jacfwd(lambda a: loss(sqrtm_before, a)))(a)
assert jnp.allclose(g_after, g_before, rtol=1e-10, atol=1e-12)
print(
    f"after:  jit(vmap(grad)) over {batch} matrices equals the hand-written jacfwd "
    f"(max |difference| {float(jnp.max(jnp.abs(g_after - g_before))):.1e})"
)
