"""Expression: a pytree through jit, grad, vmap, custom_vjp and optax; round trips."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import sympy
from jax.test_util import check_grads

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


def _constant_gradient_reference(e, expr_args, values):
    """d/d(constant) of the summed outputs, from `sympy.diff` of the template, by NumPy."""
    static = e._static
    leaves = jax.tree.leaves(list(static.templates), is_leaf=lambda t: isinstance(t, sympy.Basic))
    total = sum(sympy.Add(*t) if isinstance(t, sympy.MatrixBase) else t for t in leaves)
    grads = []
    for p in static.params:
        d = sympy.lambdify([*expr_args, *static.params], sympy.diff(total, p), modules="numpy")
        point = d(*values, *np.asarray(e.params, np.float64))
        grads.append(np.sum(np.broadcast_to(point, np.broadcast_shapes(*map(np.shape, values)))))
    return np.array(grads)


@pytest.mark.usefixtures("x64")
@pytest.mark.parametrize(
    "expr",
    [
        1.5 * sympy.sin(x) * y + 0.25 * sympy.exp(0.3 * x) + 2.5,
        [1.5 * x**2 + 0.1, sympy.Matrix([[0.5 * x, 1.25 * y], [0.75 * y**3, 2.0 * x * y]])],
        sympy.Piecewise((0.5 * x, x > 0.2), (1.5 * sympy.sqrt(y + 2.0), True)),
    ],
    ids=["scalar", "matrix", "piecewise"],
)
def test_constant_gradients_match_sympy_diff(expr):
    # Gradients w.r.t. the constants take our own transpose (per-element cotangents, one sum):
    # checked against SymPy's derivative, under jit and vmap, and to second order.
    e = jbs.Expression(expr, [x, y])
    xs, ys = jnp.linspace(0.1, 0.9, 7), jnp.linspace(-1.0, 1.0, 7)[:, None]

    def loss(params, u, v):
        out = jbs.Expression.tree_unflatten(e._static, (params,))(u, v)
        return sum(jnp.sum(leaf) for leaf in jax.tree.leaves(out))

    want = _constant_gradient_reference(e, [x, y], [np.asarray(xs), np.asarray(ys)])
    np.testing.assert_allclose(
        jax.jit(jax.grad(loss))(e.params, xs, ys), want, rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(jax.jacfwd(loss)(e.params, xs, ys), want, rtol=1e-10, atol=1e-12)
    stacked = jnp.stack([e.params, e.params])
    np.testing.assert_allclose(
        jax.vmap(jax.grad(loss), (0, None, None))(stacked, xs, ys),
        [want, want],
        rtol=1e-10,
        atol=1e-12,
    )
    smooth = jax.jit(lambda p, u: loss(p, u, ys) ** 2)  # nonlinear in the constants
    check_grads(smooth, (e.params, xs), order=2, modes=["fwd", "rev"])


@pytest.mark.usefixtures("x64")
def test_constant_gradient_is_one_reduction_whatever_the_number_of_constants():
    # JAX's own transpose sums each constant over the batch separately, and XLA then repeats
    # the shared work in every one of those reductions; ours is one variadic reduce.
    expr = sum(sympy.Float(0.5 + k / 8) * sympy.sin(k * x + y) for k in range(1, 9))
    e = jbs.Expression(expr, [x, y])
    assert e.params.shape == (8,)
    grad = jax.jit(jax.grad(lambda e, u: jnp.sum(e(u, 0.5))))
    hlo = grad.lower(e, jnp.ones(100)).as_text()
    assert hlo.count("stablehlo.reduce") == 1


def test_boolean_outputs_keep_jaxs_rule():
    e = jbs.Expression([x > 0.5, 2.0 * x], [x])
    g = jax.grad(lambda e: jnp.sum(e(jnp.linspace(0.0, 1.0, 5))[1]))(e)
    np.testing.assert_allclose(g.params, [0.0, 2.5], rtol=1e-6)
