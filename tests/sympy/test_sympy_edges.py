"""Correctness at the edges (issue 12): complex arguments, complex values of real arguments,
mpmath on scalars, symbolic derivatives per argument, argument forms, and error messages."""

import re
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import optax
import pytest
import sympy

import jaxbridge.sympy as jbs

x, y, nu = sympy.symbols("x y nu")
z = sympy.Symbol("z")
Z0 = 0.7 + 0.4j

# Host fallbacks, and native functions whose complex arguments go to the host.
COMPLEX_CASES = [
    sympy.besselj(0, z),
    sympy.besselj(sympy.Rational(3, 2), z),
    sympy.bessely(1, z),
    sympy.besseli(3, z),
    sympy.besselk(1, z),
    sympy.jn(2, z),
    sympy.LambertW(z),
    sympy.airyai(z),
    sympy.airybiprime(z),
    sympy.hyper([0.5, 1.5], [2.5], z),
    sympy.hyper([1], [2, 3], z),
    sympy.zeta(z),
    sympy.elliptic_k(z),
    sympy.elliptic_e(z),
    sympy.erfi(z),
    sympy.Ci(z),
    sympy.expint(1.5, z),
    sympy.fresnels(z),
    sympy.erf(z),
    sympy.erfc(z),
    sympy.loggamma(z),
    sympy.digamma(z),
    sympy.besseli(0, z),
    sympy.besseli(1, z),
    sympy.Ei(z),
    sympy.expint(2, z),
    sympy.polygamma(1, z),
    sympy.uppergamma(1.5, z),
]


def _reference(expr, value):
    return complex(sympy.N(expr.subs(z, value), 30))


@pytest.mark.parametrize("expr", COMPLEX_CASES, ids=str)
def test_complex_arguments_give_the_complex_value(expr, x64):
    f = jbs.compile(expr, [z])
    got = f(jnp.asarray([Z0, -0.3 + 1.1j]))
    assert got.dtype == jnp.complex128
    want = [_reference(expr, Z0), _reference(expr, -0.3 + 1.1j)]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-9)
    assert complex(jax.jit(f)(Z0)) == pytest.approx(want[0], rel=1e-9)


def test_complex_host_fallback_derivative_and_float32():
    f = jbs.compile(sympy.besselj(0, z), [z])
    got = jax.jvp(f, (jnp.complex64(Z0),), (jnp.complex64(1.0),))
    assert got[0].dtype == jnp.complex64
    np.testing.assert_allclose(complex(got[1]), -complex(mpmath.besselj(1, Z0)), rtol=1e-5)


@pytest.mark.parametrize(
    "expr, name",
    [
        (sympy.floor(z), "floor"),
        (sympy.Mod(z, 2), "Mod"),
        (sympy.Max(z, 1), "Max"),
        (sympy.erfinv(z), "erfinv"),
        (sympy.Heaviside(z), "Heaviside"),
        (sympy.Piecewise((1, z > 0), (0, True)), "Gt"),
    ],
)
def test_functions_of_reals_refuse_complex_arguments_by_name(expr, name):
    f = jbs.compile(expr, [z])
    with pytest.raises(TypeError, match=f"`{name}` is defined for real arguments only"):
        f(1.0 + 1.0j)


def test_host_function_without_complex_implementation_raises_by_name():
    # elliptic_pi has mpmath; a function with no complex implementation raises at trace time.
    f = jbs.compile(sympy.elliptic_pi(0.3, z), [z])
    np.testing.assert_allclose(
        complex(f(jnp.complex64(0.2 + 0.1j))), complex(mpmath.ellippi(0.3, 0.2 + 0.1j)), rtol=1e-5
    )


# (expression in x, a real point where the true value is complex)
COMPLEX_VALUED_AT = [
    (sympy.LambertW(x), -0.5),
    (sympy.besselj(sympy.Rational(1, 2), x), -1.0),
    (sympy.bessely(1, x), -1.0),
    (sympy.Ci(x), -1.0),
    (sympy.Chi(x), -1.0),
    (sympy.hyper([0.5, 1.5], [2.5], x), 2.0),
    (sympy.elliptic_k(x), 2.0),
    (sympy.expint(1.5, x), -1.0),
    (sympy.loggamma(x), -1.5),
    (sympy.acosh(x), 0.5),
]


@pytest.mark.parametrize("expr, point", COMPLEX_VALUED_AT, ids=lambda c: str(c))
def test_a_real_argument_whose_value_is_complex_gives_nan(expr, point, x64):
    assert not sympy.N(expr.subs(x, point)).is_real  # the premise: the value is complex
    assert np.isnan(float(jbs.compile(expr, [x])(point)))


def test_lambertw_complex_input_gives_the_complex_branch_value(x64):
    f = jbs.compile(sympy.LambertW(z), [z])
    np.testing.assert_allclose(complex(f(-0.5 + 0j)), complex(mpmath.lambertw(-0.5)), rtol=1e-12)
    g = jbs.compile(sympy.LambertW(x, -1), [x])
    np.testing.assert_allclose(float(g(-0.2)), float(mpmath.lambertw(-0.2, -1).real), rtol=1e-12)


@pytest.mark.parametrize(
    "expr", [sympy.hyper((1,), (2, 3), x), sympy.expint(1.5, x), sympy.elliptic_pi(0.6, x)], ids=str
)
def test_mpmath_fallbacks_on_scalars_eager_and_under_jit(expr, x64):
    f = jbs.compile(expr, [x])
    want = float(sympy.N(expr.subs(x, 0.3), 20))
    assert float(f(0.3)) == pytest.approx(want, rel=1e-12)
    assert float(jax.jit(f)(0.3)) == pytest.approx(want, rel=1e-12)
    d = float(sympy.N(sympy.diff(expr, x).subs(x, 0.3), 20))
    assert float(jax.jit(jax.grad(f))(0.3)) == pytest.approx(d, rel=1e-9)
    np.testing.assert_allclose(np.asarray(jax.vmap(f)(jnp.asarray([0.3, 0.3]))), [want, want])


# derivatives="symbolic", per argument.


def test_symbolic_bessel_gradient_in_x_while_the_order_has_none():
    expr = sympy.besselj(nu, x)
    symbolic = jbs.compile(expr, [nu, x], derivatives="symbolic")
    default = jbs.compile(expr, [nu, x])
    got = float(jax.grad(symbolic, argnums=1)(1.5, 0.7))
    assert got == pytest.approx(float(jax.grad(default, argnums=1)(1.5, 0.7)), rel=1e-6)
    want = float(sympy.N(sympy.diff(expr, x).subs({nu: 1.5, x: 0.7})))
    assert got == pytest.approx(want, rel=1e-5)
    with pytest.raises(NotImplementedError, match=r"argument 0 \(`nu`\)"):
        jax.grad(symbolic, argnums=0)(1.5, 0.7)


h = sympy.Function("h")


@pytest.mark.parametrize(
    "expr",
    [
        sympy.floor(x) * y**2,
        sympy.ceiling(x) * y**2,
        sympy.frac(x) * y**2,
        sympy.Mod(x, 0.75) * y**2,
        h(x) * y**2,
        sympy.sin(h(x * y)),
    ],
    ids=str,
)
def test_symbolic_derivatives_per_argument_match_the_default_mode(expr):
    extra = {h: jnp.tanh}
    symbolic = jbs.compile(expr, [x, y], derivatives="symbolic", extra_functions=extra)
    default = jbs.compile(expr, [x, y], extra_functions=extra)
    for argnums in (0, 1, (0, 1)):
        got = jax.grad(symbolic, argnums=argnums)(1.3, 0.6)
        want = jax.grad(default, argnums=argnums)(1.3, 0.6)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    hessian = jax.hessian(symbolic, argnums=(0, 1))(1.3, 0.6)
    np.testing.assert_allclose(
        np.asarray(hessian), np.asarray(jax.hessian(default, argnums=(0, 1))(1.3, 0.6)), rtol=1e-5
    )


@pytest.mark.parametrize(
    "part", [sympy.re, sympy.im, sympy.conjugate, sympy.arg, sympy.Abs], ids=lambda f: f.__name__
)
def test_symbolic_derivatives_of_complex_parts(part, x64):
    expr = part(z) * y**2

    def loss(compiled):
        return lambda v, w: jnp.real(compiled(v, w))

    symbolic = loss(jbs.compile(expr, [z, y], derivatives="symbolic"))
    default = loss(jbs.compile(expr, [z, y]))
    for argnums in (0, 1):
        got = jax.grad(symbolic, argnums=argnums)(1.0 + 2.0j, 0.5)
        want = jax.grad(default, argnums=argnums)(1.0 + 2.0j, 0.5)
        np.testing.assert_allclose(complex(got), complex(want), rtol=1e-12)


def test_symbolic_sinc_derivatives_are_finite_at_zero(x64):
    f = jbs.compile(sympy.sinc(x), [x], derivatives="symbolic")
    assert float(jax.grad(f)(0.0)) == 0.0
    assert float(jax.grad(jax.grad(f))(0.0)) == pytest.approx(-1 / 3, rel=1e-12)
    assert float(jax.grad(f)(0.8)) == pytest.approx(
        float(sympy.N(sympy.diff(sympy.sinc(x), x).subs(x, 0.8))), rel=1e-12
    )


@pytest.mark.parametrize("symbol", [x, sympy.Symbol("x", real=True)], ids=["x", "real x"])
def test_symbolic_real_root_derivative_is_finite_below_zero(symbol, x64):
    f = jbs.compile(sympy.real_root(symbol, 3), [symbol], derivatives="symbolic")
    want = (1 / 3) * 2.0 ** (-2 / 3)
    assert float(jax.grad(f)(-2.0)) == pytest.approx(want, rel=1e-12)
    assert float(jax.grad(f)(2.0)) == pytest.approx(want, rel=1e-12)


# Arguments.


def test_args_as_a_set_are_refused():
    message = "must be ordered (a list or tuple); got a `set`"
    with pytest.raises(TypeError, match=re.escape(message)):
        jbs.compile(x + y, {x, y})  # pyright: ignore[reportArgumentType] - the mistake tested
    with pytest.raises(TypeError, match=re.escape(message)):
        jbs.Expression(1.0 * x + y, {x, y})


def test_indexed_and_indexed_base_arguments(x64):
    a: Any = sympy.IndexedBase("a")  # Any: SymPy's stubs lack IndexedBase.__getitem__
    b: Any = sympy.IndexedBase("b", shape=(2, 2))
    expr = a[0] * a[2] ** 2 + sympy.sin(a[1]) + b[1, 0]
    f = jbs.compile(expr, [a, b])
    va, vb = jnp.asarray([1.0, 2.0, 3.0]), jnp.asarray([[0.0, 0.0], [5.0, 0.0]])
    assert float(f(va, vb)) == pytest.approx(9.0 + np.sin(2.0) + 5.0)
    assert f(jnp.stack([va, va]), vb).shape == (2,)  # leading dimensions batch
    grad = jax.grad(jbs.compile(expr, [a, b], derivatives="symbolic"))(va, vb)
    np.testing.assert_allclose(np.asarray(grad), [9.0, np.cos(2.0), 6.0])
    g = jbs.compile(a[0] * a[1], [a[0], a[1]])  # Indexed elements as scalar arguments
    assert float(g(2.0, 3.0)) == 6.0
    with pytest.raises(ValueError, match="IndexedBase without a shape"):
        jbs.compile(a[x], [a, x])


class _Network(eqx.Module):
    mlp: eqx.nn.MLP

    def __call__(self, v):
        flat = jnp.reshape(v, (-1, 1))
        return jnp.reshape(jax.vmap(self.mlp)(flat), jnp.shape(v))


def test_expression_extra_functions_train_with_the_expression():
    N = sympy.Function("N")
    net = _Network(eqx.nn.MLP(1, 1, 4, 1, key=jax.random.PRNGKey(0)))
    e = jbs.Expression(1.0 * N(x) + 0.5 * x**2, [x], extra_functions={N: net})
    xs = jnp.linspace(-1.0, 1.0, 16)

    def loss(e):
        return jnp.mean((e(xs) - jnp.sin(3 * xs)) ** 2)

    def reference(params, net):  # the same function written in JAX
        return jnp.mean((params[0] * net(xs) + params[1] * xs**2 - jnp.sin(3 * xs)) ** 2)

    g = jax.jit(jax.grad(loss))(e)  # jit: eager dispatch of the network's ops is slow
    want_params, want_net = eqx.filter_jit(eqx.filter_grad(lambda pn: reference(*pn)))(
        (e.params, net)
    )
    np.testing.assert_allclose(np.asarray(g.params), np.asarray(want_params), rtol=1e-5)
    got_w = g.extra_functions[N].mlp.layers[0].weight
    np.testing.assert_allclose(
        np.asarray(got_w), np.asarray(want_net.mlp.layers[0].weight), rtol=1e-5
    )
    opt = optax.sgd(0.05, momentum=0.9)
    state = opt.init(cast(Any, e))  # an Expression is a pytree of arrays, as optax needs

    @jax.jit
    def step(e, state):
        grads = jax.grad(loss)(e)
        updates, state = opt.update(grads, state, cast(Any, e))
        return optax.apply_updates(e, updates), state

    before = float(loss(e))
    for _ in range(30):
        e, state = step(e, state)
    assert float(loss(e)) < 0.5 * before
    assert not np.allclose(
        np.asarray(e.extra_functions[N].mlp.layers[0].weight), np.asarray(net.mlp.layers[0].weight)
    )


def test_expression_extra_function_as_a_partial_carrying_parameters():
    N = sympy.Function("N")
    apply = jax.tree_util.Partial(lambda w, v: w[0] * jnp.tanh(w[1] * v), jnp.asarray([2.0, 0.5]))
    e = jbs.Expression(N(x) + 1.0, [x], extra_functions={N: apply})
    assert len(jax.tree.leaves(e)) == 2
    g = jax.grad(lambda e: e(1.0))(e)
    np.testing.assert_allclose(
        np.asarray(g.extra_functions[N].args[0]), [np.tanh(0.5), 2.0 / np.cosh(0.5) ** 2], rtol=1e-6
    )


# Messages in the user's symbols.


def test_expression_wrong_argument_count_names_the_users_symbols():
    e = jbs.Expression(2.0 * x * y, [x, y])
    with pytest.raises(TypeError) as info:
        e(1.0)
    assert str(info.value) == (
        "`jaxbridge.sympy.Expression` takes 2 argument(s) (x, y), in the order of `args`; got 1."
    )


def test_expression_finds_a_missing_symbol_when_built():
    with pytest.raises(ValueError, match=r"`jaxbridge.sympy.Expression`: the expression uses `y`"):
        jbs.Expression(2.0 * x * y, [x])


def test_same_name_different_assumptions_says_what_differs():
    real_x = sympy.Symbol("x", real=True)
    with pytest.raises(ValueError) as info:
        jbs.compile(real_x + 1, [x])
    assert str(info.value) == (
        "`jaxbridge.sympy.compile`: `x` in the expression is not the `x` of `args`: same name, "
        "different assumptions (real: True in the expression, None in `args`). SymPy treats "
        "them as different symbols; build both with the same assumptions "
        "(`sympy.Symbol('x', ...)`)."
    )


def test_missing_derivative_names_the_users_argument():
    f = jbs.compile(sympy.besselj(nu, x), [nu, x])
    with pytest.raises(NotImplementedError, match=r"`besselj` with respect to argument 0 \(`nu`\)"):
        jax.grad(f)(1.5, 0.7)


def test_integral_error_advice_works_when_followed():
    integral = sympy.Integral(sympy.exp(-(x**2) * y), (x, 0, 1))
    with pytest.raises(ValueError, match="unevaluated integral") as info:
        jbs.compile(integral + 1, [y])
    assert "F = sympy.Function('F'); expr = expr.subs(integral, F(y))" in str(info.value)
    F = sympy.Function("F")  # the advice, followed
    f = jbs.compile((integral + 1).subs(integral, F(y)), [y], extra_functions={F: jnp.exp})
    assert float(f(0.0)) == pytest.approx(2.0)


def test_expression_missing_derivative_names_the_constant_not_its_parameter():
    e = jbs.Expression(sympy.besselj(1.5, x), [x])  # the order 1.5 is a trainable Float
    assert float(jax.grad(e)(0.7)) == pytest.approx(
        float(sympy.N(sympy.diff(sympy.besselj(1.5, x), x).subs(x, 0.7))), rel=1e-5
    )
    with pytest.raises(NotImplementedError, match=r"argument 0 \(`1.5`\)"):
        jax.grad(lambda e: e(0.7))(e)
