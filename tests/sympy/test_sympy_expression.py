"""Expression: a pytree through jit, grad, vmap, custom_vjp and optax; round trips."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import sympy

import jaxbridge
import jaxbridge.sympy as jbs
from jaxbridge import _custom

x, y = sympy.symbols("x y")
custom_vjp = getattr(jaxbridge, "custom_vjp", _custom.custom_vjp)


def test_round_trip_before_training_is_exact():
    exprs = [
        1.5 * sympy.sin(x) + 0.25 * y**2 + sympy.pi,
        sympy.Matrix([[sympy.Rational(1, 3) * x, 2.5], [sympy.E * y, 1]]),
        {"a": sympy.exp(-0.5 * x**2), "b": [x + 1.25]},
    ]
    for trainable in ("floats", "all"):
        for e in exprs:
            assert jbs.Expression(e, [x, y], trainable=trainable).to_sympy() == e


def test_trainable_all_includes_rationals_pi_e_but_not_exponents():
    e = jbs.Expression(sympy.pi * x**3 + sympy.Rational(1, 3) * y + 2, [x, y], trainable="all")
    assert sorted(np.asarray(e.params).tolist()) == pytest.approx(sorted([np.pi, 1 / 3, 2.0]))
    trained = jax.tree.map(lambda p: p + 1.0, e)
    back = trained.to_sympy()
    assert back.has(x**3) and not back.has(sympy.pi)


def test_pytree_static_structure_is_hashable_and_shared():
    a = jbs.Expression(1.5 * sympy.sin(x), [x])
    b = jbs.Expression(1.5 * sympy.sin(x), [x])
    leaves_a, tree_a = jax.tree.flatten(a)
    _, tree_b = jax.tree.flatten(b)
    assert tree_a == tree_b and hash(tree_a) == hash(tree_b)
    assert len(leaves_a) == 1
    traces = []
    f = jax.jit(lambda e, v: (traces.append(1), e(v))[1])
    f(a, 1.0)
    f(b, 2.0)
    assert len(traces) == 1


def test_jit_grad_vmap():
    e = jbs.Expression(1.5 * sympy.sin(x) * y + 0.5, [x, y])
    g = jax.jit(jax.grad(lambda e: e(0.3, 2.0)))(e)
    np.testing.assert_allclose(g.params, [np.sin(0.3) * 2.0, 1.0], rtol=1e-6)
    batch = jax.vmap(lambda p: jax.tree.map(lambda _: p, e)(0.3, 2.0))(jnp.ones((4, 2)))
    np.testing.assert_allclose(batch, np.sin(0.3) * 2.0 + 1.0, rtol=1e-6)
    assert e(jnp.ones(7), 1.0).shape == (7,)


def test_passes_through_jax_custom_vjp_as_any_argument():
    @jax.custom_vjp
    def f(v, e):
        return e(v)

    def fwd(v, e):
        return e(v), (v, e)

    def bwd(res, g):
        v, e = res
        ge = jax.grad(lambda e: e(v))(e)
        return g * jax.grad(e)(v), jax.tree.map(lambda p: g * p, ge)

    f.defvjp(fwd, bwd)
    e = jbs.Expression(2.0 * x**2, [x])
    gv, ge = jax.grad(f, argnums=(0, 1))(3.0, e)
    assert float(gv) == 12.0
    np.testing.assert_allclose(ge.params, [9.0])


def test_optax_fit_and_round_trip_after_training():
    data_x = jnp.linspace(-1.0, 1.0, 64)
    data_y = 2.0 * jnp.sin(data_x) + 0.3
    e = jbs.Expression(1.0 * sympy.sin(x) + 0.1, [x])
    opt = optax.sgd(0.5)  # adam counts in int32, which strict dtype promotion rejects
    state = opt.init(e)

    @jax.jit
    def step(e, state):
        loss, g = jax.value_and_grad(lambda e: jnp.mean((e(data_x) - data_y) ** 2))(e)
        updates, state = opt.update(g, state)
        return optax.apply_updates(e, updates), state, loss

    for _ in range(300):
        e, state, loss = step(e, state)
    assert float(loss) < 1e-4
    fitted = e.to_sympy()
    a, b = (float(v) for v in np.asarray(e.params))
    assert fitted == sympy.Float(a) * sympy.sin(x) + sympy.Float(b)
    np.testing.assert_allclose([a, b], [2.0, 0.3], atol=1e-2)


def test_bad_trainable():
    with pytest.raises(ValueError, match='must be "floats" or "all"'):
        jbs.Expression(x, [x], trainable="ints")


def test_shared_subexpressions_survive_passing_as_an_argument():
    shared = sympy.exp(0.5 * sympy.sin(x))
    e = jbs.Expression(shared * y + shared**2 + sympy.cos(shared), [x, y])
    jaxpr = str(jax.make_jaxpr(lambda e: e(1.0, 2.0))(e))
    assert jaxpr.count(" sin ") == 1 and jaxpr.count(" exp ") <= 2


def test_user_question_with_jaxbridge_custom_vjp():
    # The user's code: jax.custom_vjp rejects the SymPy expression argument. With
    # jaxbridge.custom_vjp the expression is static; the compiled function does the work.
    expr = x**2 * sympy.sin(x)
    f = jbs.compile(expr, [x])
    df = jbs.compile(sympy.diff(expr, x), [x])

    @custom_vjp
    def energy(v, expr):
        return f(v)

    energy.defvjp(lambda v, expr: (f(v), v), lambda v, g: (g * df(v), None))
    got = jax.jit(jax.vmap(jax.grad(energy), (0, None)), static_argnums=1)(jnp.ones(3), expr)
    np.testing.assert_allclose(got, 2 * np.sin(1.0) + np.cos(1.0), rtol=1e-6)
