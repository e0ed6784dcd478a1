"""jaxbridge.custom_vjp / custom_jvp with static arguments, and the user's host code."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy

import jaxbridge
from jaxbridge import _custom

custom_vjp = getattr(jaxbridge, "custom_vjp", _custom.custom_vjp)
custom_jvp = getattr(jaxbridge, "custom_jvp", _custom.custom_jvp)
s = sympy.Symbol("s")
EXPR = s**2 * sympy.sin(s)


def test_original_user_code_fails_with_jax_custom_vjp():
    @jax.custom_vjp
    def energy(x, expr):
        return float(expr.subs(s, x))

    energy.defvjp(lambda x, expr: (energy(x, expr), x), lambda x, g: (g, None))
    with pytest.raises(TypeError):
        jax.grad(energy)(1.0, EXPR)


def test_user_code_as_jaxbridge_host_with_vjp():
    # The forward and backward passes stay host code (expr.subs, float, sympy.diff); the
    # expression is a static argument.
    def energy(x, expr):
        return np.float32(float(expr.subs(s, float(x))))

    def energy_vjp(x, expr, g):
        # jaxbridge.host's vjp returns one cotangent per array argument (statics have none).
        return (np.float32(float(g) * float(sympy.diff(expr, s).subs(s, float(x)))),)

    f = jaxbridge.host(energy, vjp=energy_vjp)
    got = jax.jit(jax.vmap(jax.grad(f), (0, None)), static_argnums=1)(jnp.array([1.0, 2.0]), EXPR)
    want = [2 * v * np.sin(v) + v**2 * np.cos(v) for v in (1.0, 2.0)]
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_custom_vjp_static_in_any_position_and_none_slot():
    @custom_vjp
    def f(label, x, expr):
        return x * 3.0

    f.defvjp(lambda label, x, expr: (x * 3.0, None), lambda res, g: (None, 3.0 * g, None))
    assert float(jax.jit(jax.grad(f, argnums=1), static_argnums=(0, 2))("a", 2.0, EXPR)) == 3.0
    np.testing.assert_allclose(
        jax.vmap(jax.grad(f, argnums=1), (None, 0, None))("a", jnp.ones(3), EXPR), 3.0
    )


def test_custom_vjp_rejects_a_cotangent_for_a_static_argument():
    @custom_vjp
    def f(x, expr):
        return x

    f.defvjp(lambda x, expr: (x, None), lambda res, g: (g, 1.0))
    with pytest.raises(TypeError, match="argument 1 of `f` is static"):
        jax.grad(f)(1.0, EXPR)


def test_custom_jvp_static_argument_and_higher_order():
    @custom_jvp
    def f(x, expr):
        return jnp.sin(x)

    @f.defjvp
    def _(primals, tangents):
        x, expr = primals
        assert tangents[1] is None and expr is EXPR
        return f(x, expr), jnp.cos(x) * tangents[0]

    assert float(jax.grad(jax.grad(f))(0.0, EXPR)) == pytest.approx(0.0, abs=1e-7)
    np.testing.assert_allclose(jax.jacfwd(f)(1.0, EXPR), np.cos(1.0), rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(jax.grad(f), (0, None))(jnp.zeros(2), EXPR), 1.0)
