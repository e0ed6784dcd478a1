"""Every covered function: values against SciPy/mpmath, gradients against sympy.diff."""

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
import scipy.special as sc
import sympy

import jaxbridge.sympy as jbs

x = sympy.Symbol("x", real=True)

# (id, expression in x, reference on NumPy float64 arrays, sample points)
P = [0.3, 0.7, 1.6, 2.9]
U = [-0.8, -0.3, 0.2, 0.6]  # inside (-1, 1)
G = [1.2, 1.7, 2.5, 3.1]  # above 1
CASES = [
    ("exp", sympy.exp(x), np.exp, U),
    ("log", sympy.log(x), np.log, P),
    ("sqrt", sympy.sqrt(x), np.sqrt, P),
    ("cbrt-power", x ** sympy.Rational(2, 3), lambda v: v ** (2 / 3), P),
    ("sin", sympy.sin(x), np.sin, U),
    ("cos", sympy.cos(x), np.cos, U),
    ("tan", sympy.tan(x), np.tan, U),
    ("cot", sympy.cot(x), lambda v: 1 / np.tan(v), P),
    ("sec", sympy.sec(x), lambda v: 1 / np.cos(v), U),
    ("csc", sympy.csc(x), lambda v: 1 / np.sin(v), P),
    ("asin", sympy.asin(x), np.arcsin, U),
    ("acos", sympy.acos(x), np.arccos, U),
    ("atan", sympy.atan(x), np.arctan, U),
    ("acot", sympy.acot(x), lambda v: np.arctan(1 / v), P),
    ("asec", sympy.asec(x), lambda v: np.arccos(1 / v), G),
    ("acsc", sympy.acsc(x), lambda v: np.arcsin(1 / v), G),
    ("sinh", sympy.sinh(x), np.sinh, U),
    ("cosh", sympy.cosh(x), np.cosh, U),
    ("tanh", sympy.tanh(x), np.tanh, U),
    ("coth", sympy.coth(x), lambda v: 1 / np.tanh(v), P),
    ("sech", sympy.sech(x), lambda v: 1 / np.cosh(v), U),
    ("csch", sympy.csch(x), lambda v: 1 / np.sinh(v), P),
    ("asinh", sympy.asinh(x), np.arcsinh, U),
    ("acosh", sympy.acosh(x), np.arccosh, G),
    ("atanh", sympy.atanh(x), np.arctanh, U),
    ("acoth", sympy.acoth(x), lambda v: np.arctanh(1 / v), G),
    ("asech", sympy.asech(x), lambda v: np.arccosh(1 / v), [0.2, 0.5, 0.9]),
    ("acsch", sympy.acsch(x), lambda v: np.arcsinh(1 / v), P),
    ("atan2", sympy.atan2(x, 0.5), lambda v: np.arctan2(v, 0.5), U),
    ("Abs", sympy.Abs(x), np.abs, U),
    ("sign", sympy.sign(x) * x**2, lambda v: np.sign(v) * v**2, U),
    ("floor", sympy.floor(x) + x, lambda v: np.floor(v) + v, [0.3, 1.6, -0.4]),
    ("ceiling", sympy.ceiling(x) + x, lambda v: np.ceil(v) + v, [0.3, 1.6, -0.4]),
    ("Mod", sympy.Mod(x, 0.75), lambda v: np.mod(v, 0.75), [0.3, 1.6, -0.4]),
    ("Min", sympy.Min(x, 0.5, x**2), lambda v: np.minimum(np.minimum(v, 0.5), v**2), U),
    ("Max", sympy.Max(x, 0.5), lambda v: np.maximum(v, 0.5), U),
    ("Heaviside", sympy.Heaviside(x) * x, lambda v: np.heaviside(v, 0.5) * v, U),
    ("erf", sympy.erf(x), sc.erf, U),
    ("erfc", sympy.erfc(x), sc.erfc, U),
    ("erfinv", sympy.erfinv(x), sc.erfinv, U),
    ("erfi", sympy.erfi(x), sc.erfi, U),
    ("gamma", sympy.gamma(x), sc.gamma, P + [-0.5]),
    ("loggamma", sympy.loggamma(x), sc.gammaln, P),
    ("digamma", sympy.digamma(x), sc.digamma, P),
    ("polygamma2", sympy.polygamma(2, x), lambda v: sc.polygamma(2, v), P),
    ("zeta", sympy.zeta(x), sc.zeta, [1.5, 2.5, 3.0]),
    ("hurwitz-zeta", sympy.zeta(x, 0.5), lambda v: sc.zeta(v, 0.5), [1.5, 2.5]),
    ("beta", sympy.beta(x, 1.5), lambda v: sc.beta(v, 1.5), P),
    ("besselj0", sympy.besselj(0, x), lambda v: sc.jv(0, v), P),
    ("besselj-half", sympy.besselj(sympy.Rational(5, 2), x), lambda v: sc.jv(2.5, v), P),
    ("bessely", sympy.bessely(1.5, x), lambda v: sc.yv(1.5, v), P),
    ("besseli0", sympy.besseli(0, x), lambda v: sc.iv(0, v), P),
    ("besseli", sympy.besseli(0.7, x), lambda v: sc.iv(0.7, v), P),
    ("besselk", sympy.besselk(2, x), lambda v: sc.kv(2, v), P),
    ("expint", sympy.expint(2, x), lambda v: sc.expn(2, v), P),
    (
        "expint-real",
        sympy.expint(1.5, x),
        lambda v: np.array([float(mpmath.expint(1.5, t)) for t in v]),
        P,
    ),
    ("Ei", sympy.Ei(x), sc.expi, P),
    ("LambertW", sympy.LambertW(x), lambda v: sc.lambertw(v).real, P),
    ("elliptic_k", sympy.elliptic_k(x), sc.ellipk, U),
    ("elliptic_e", sympy.elliptic_e(x), sc.ellipe, U),
    ("hyper2f1", sympy.hyper([0.5, 1.5], [2.5], x), lambda v: sc.hyp2f1(0.5, 1.5, 2.5, v), U),
    ("hyper1f1", sympy.hyper([0.5], [1.5], x), lambda v: sc.hyp1f1(0.5, 1.5, v), U),
    ("Si", sympy.Si(x), lambda v: sc.sici(v)[0], P),
    ("airyai", sympy.airyai(x), lambda v: sc.airy(v)[0], U),
]


@pytest.mark.parametrize("name, expr, reference, points", CASES, ids=[c[0] for c in CASES])
def test_values_float64(name, expr, reference, points, x64):
    f = jbs.compile(expr, [x])
    got = np.asarray(jax.jit(f)(jnp.asarray(points, jnp.float64)))
    np.testing.assert_allclose(got, reference(np.asarray(points)), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name, expr, reference, points", CASES, ids=[c[0] for c in CASES])
def test_values_float32(name, expr, reference, points):
    f = jbs.compile(expr, [x])
    got = f(jnp.asarray(points, jnp.float32))
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got), reference(np.asarray(points)), rtol=2e-5, atol=1e-6)


def _sympy_derivative(expr, points):
    derivative = sympy.diff(expr, x)
    return np.array([float(sympy.N(derivative.subs(x, p), 20)) for p in points])


# Sampled with a fixed seed: the gradient check evaluates sympy.diff with mpmath, slowly.
# floor, ceiling, Mod and sign have derivatives SymPy leaves unevaluated (zero almost everywhere).
_GRAD_CASES = [
    c
    for i, c in enumerate(CASES)
    if (i % 2 == 0 or c[0].startswith("bessel"))
    and c[0] not in ("floor", "ceiling", "Mod", "sign", "hurwitz-zeta")
]


@pytest.mark.parametrize(
    "name, expr, reference, points", _GRAD_CASES, ids=[c[0] for c in _GRAD_CASES]
)
def test_gradients_against_sympy_diff(name, expr, reference, points, x64):
    f = jbs.compile(expr, [x])
    got = np.asarray(jax.vmap(jax.grad(f))(jnp.asarray(points, jnp.float64)))
    np.testing.assert_allclose(got, _sympy_derivative(expr, points), rtol=1e-7, atol=1e-10)


def test_host_fallback_second_derivative_and_vmap(x64):
    f = jbs.compile(sympy.besselj(1.5, x) * sympy.LambertW(x), [x])
    points = jnp.asarray([0.4, 1.3])
    got = jax.vmap(jax.grad(jax.grad(f)))(points)
    want = [
        float(sympy.N(sympy.diff(sympy.besselj(1.5, x) * sympy.LambertW(x), x, 2).subs(x, p)))
        for p in [0.4, 1.3]
    ]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-7)


def test_besselj_float32_at_half_is_finite():
    # jax.scipy.special.bessel_jn is NaN here in float32; the host fallback is not.
    f = jbs.compile(sympy.besselj(0, x) + sympy.besselj(3, x), [x])
    value = f(jnp.float32(0.5))
    np.testing.assert_allclose(float(value), sc.jv(0, 0.5) + sc.jv(3, 0.5), rtol=1e-6)


def test_unavailable_derivative_names_the_function():
    nu = sympy.Symbol("nu")
    f = jbs.compile(sympy.besselj(nu, x), [nu, x])
    assert np.isfinite(float(jax.grad(f, argnums=1)(1.5, 0.7)))
    with pytest.raises(
        NotImplementedError, match="derivative of `besselj` with respect to argument 0"
    ):
        jax.grad(f, argnums=0)(1.5, 0.7)


def test_relational_boolean_and_dirac():
    y = sympy.Symbol("y")
    f = jbs.compile(
        [sympy.And(x > 0, y < 1), sympy.Or(x > 2, sympy.Not(y > 0)), sympy.DiracDelta(x)], [x, y]
    )
    a, b, d = f(jnp.array([1.0, 3.0, 0.0]), jnp.array([0.5, 2.0, -1.0]))
    assert a.tolist() == [True, False, False]
    assert b.tolist() == [False, True, True]
    assert d.tolist() == [0.0, 0.0, float("inf")]


def test_complex_parts(x64):
    z = sympy.Symbol("z")
    f = jbs.compile([sympy.re(z), sympy.im(z), sympy.arg(z), sympy.Abs(sympy.conjugate(z))], [z])
    values = f(jnp.asarray([1.0 + 2.0j, -3.0 - 1.0j]))
    want = [np.real, np.imag, np.angle, np.abs]
    for got, fn in zip(values, want, strict=True):
        np.testing.assert_allclose(np.real(np.asarray(got)), fn(np.array([1 + 2j, -3 - 1j])))


def test_sum_product_and_derivative(x64):
    k = sympy.Symbol("k", integer=True)
    expr = [
        sympy.Sum(x**k / sympy.factorial(k), (k, 0, 12)),
        sympy.Product(1 + x / k, (k, 1, 4)),
        sympy.Derivative(sympy.sin(x) * x, x),
    ]
    f = jbs.compile(expr, [x])
    s, p, d = f(0.3)
    np.testing.assert_allclose(float(s), np.exp(0.3), rtol=1e-12)
    np.testing.assert_allclose(float(p), np.prod([1 + 0.3 / k for k in range(1, 5)]), rtol=1e-14)
    np.testing.assert_allclose(float(d), np.cos(0.3) * 0.3 + np.sin(0.3), rtol=1e-14)
