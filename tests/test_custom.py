"""`jaxbridge.custom_vjp`/`custom_jvp` with non-array residuals and outputs (issue 12, item 10)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy

import jaxbridge

jbs = pytest.importorskip("jaxbridge.sympy")

x = sympy.Symbol("x")
EXPR = x**2 + 3 * x + 2


@functools.cache
def compiled(expr):
    return jbs.compile(expr, [x])


# The user's code, literally: fwd saves `(expr, x_value)`, bwd takes `expr` back out of the
# residuals and differentiates it with sympy.diff; only the numbers go through `compile`.
@jaxbridge.custom_vjp
def sympy_function(expr, x_value):
    return compiled(expr)(x_value)


def sympy_function_fwd(expr, x_value):
    return compiled(expr)(x_value), (expr, x_value)


def sympy_function_bwd(res, g):
    expr, x_value = res
    assert isinstance(expr, sympy.Expr)  # unchanged, not a tracer or an array
    return None, g * compiled(sympy.diff(expr, x))(x_value)


sympy_function.defvjp(sympy_function_fwd, sympy_function_bwd)


def _reference(v):  # SymPy's own numbers
    return float(EXPR.subs(x, v)), float(sympy.diff(EXPR, x).subs(x, v))


def test_value_and_gradient_under_grad_jit_grad_and_vmap_grad(x64):
    value, slope = _reference(1.0)
    assert float(sympy_function(EXPR, 1.0)) == pytest.approx(value, rel=1e-14)
    grad = jax.grad(sympy_function, argnums=1)
    assert float(grad(EXPR, 1.0)) == pytest.approx(slope, rel=1e-14)
    assert float(jax.jit(grad, static_argnums=0)(EXPR, 1.0)) == pytest.approx(slope, rel=1e-14)
    vs = jnp.linspace(-2.0, 2.0, 5)
    want = [_reference(float(v))[1] for v in vs]
    np.testing.assert_allclose(jax.vmap(grad, in_axes=(None, 0))(EXPR, vs), want, rtol=1e-14)
    np.testing.assert_allclose(
        jax.jit(jax.vmap(grad, in_axes=(None, 0)), static_argnums=0)(EXPR, vs), want, rtol=1e-14
    )
    v, g = jax.value_and_grad(lambda t: sympy_function(EXPR, t))(2.0)
    assert (float(v), float(g)) == pytest.approx(_reference(2.0), rel=1e-14)


def test_non_array_outputs_pass_through_unchanged():
    @jaxbridge.custom_vjp
    def labelled(x):
        return 2.0 * x, "label"

    labelled.defvjp(lambda x: ((2.0 * x, "label"), ("saved", x)), lambda res, g: (2.0 * g[0],))
    out, label = labelled(jnp.float32(3.0))
    assert (float(out), label) == (6.0, "label")
    assert float(jax.jit(lambda x: labelled(x)[0])(3.0)) == 6.0
    assert float(jax.grad(lambda x: labelled(x)[0])(1.0)) == 2.0
    assert float(jax.jit(jax.grad(lambda x: labelled(x)[0]))(1.0)) == 2.0

    @jaxbridge.custom_jvp
    def tagged(x):
        return jnp.sin(x), EXPR

    @tagged.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return (jnp.sin(x), EXPR), (jnp.cos(x) * t, None)

    y, expr = tagged(0.5)
    assert expr == EXPR and float(y) == pytest.approx(np.sin(0.5))
    assert float(jax.grad(lambda x: tagged(x)[0])(0.5)) == pytest.approx(np.cos(0.5))
    np.testing.assert_allclose(
        jax.vmap(jax.grad(lambda x: tagged(x)[0]))(jnp.array([0.0, 0.5])),
        np.cos([0.0, 0.5]),
        rtol=1e-6,
    )


def test_fwd_must_return_a_pair():
    @jaxbridge.custom_vjp
    def f(x):
        return x

    f.defvjp(lambda x: x, lambda res, g: (g,))
    with pytest.raises(TypeError, match="must return a pair `\\(output, residuals\\)`"):
        jax.grad(f)(1.0)
