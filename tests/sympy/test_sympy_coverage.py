"""Coverage: SymPy functions and constructs against SymPy's own numbers, and the docs' table.

Each case is checked for value (eager), `jit`, `vmap` and gradient against `sympy.N` of the
expression and of `sympy.diff` (mpmath's numeric derivative where SymPy leaves `diff`
unevaluated), at three real points, and at one complex point: the complex value, or a
TypeError naming the function where it is defined for reals only. The coverage table of
docs/sympy.md is generated from the same list; `python tests/sympy/test_sympy_coverage.py`
rewrites it, and a test fails when it is stale.
"""

from __future__ import annotations

import pathlib
import re
import sys
from typing import Any

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
import sympy
from sympy.codegen import cfunctions as cf

import jaxbridge.sympy as jbs
from jaxbridge.sympy import _functions, _symbolic

x = sympy.Symbol("x")
k = sympy.Symbol("k", integer=True)
y = sympy.Symbol("y")

HEAVISIDE: Any = sympy.Heaviside  # Any: SymPy's stubs type its H0 as Half only
P = [0.3, 0.7, 1.6]  # positive
U = [-0.6, 0.2, 0.6]  # inside (-1, 1)
G = [1.2, 1.7, 2.5]  # above 1
S = [0.2, 0.4, 0.6]  # inside (0, 1)
half = sympy.Rational(1, 2)


def case(group, expr, points, reference=None, label=None, grad=True):
    """One construct: the expression in x, real sample points, an evalf-able reference.

    `grad=False`: SymPy has no derivative, so the gradient must raise, naming the function.
    """
    return {
        "group": group,
        "expr": expr,
        "points": points,
        "reference": expr if reference is None else reference,
        "label": label or str(expr),
        "grad": grad,
    }


E, T, H, PL, SP, B, C = (
    "Arithmetic and powers",
    "Trigonometric",
    "Hyperbolic",
    "Piecewise-linear, parts, distributions",
    "Special functions",
    "Bessel, Airy, elliptic, hypergeometric",
    "Constructs",
)
CASES = [
    # Arithmetic and powers.
    case(E, 3 * x**2 - x + 1, U, label="polynomial"),
    case(E, x**7, U, label="x**7 (integer power)"),
    case(E, x**-3, P, label="x**-3"),
    case(E, 2 * x / 3, U, label="2*x/3 (Rational)"),
    case(E, sympy.Float("0.1", 30) * x, U, label="Float(0.1, 30)*x"),
    case(E, sympy.sqrt(x), P),
    case(E, x ** sympy.Rational(2, 3), P, label="x**(2/3)"),
    case(E, x ** sympy.Rational(-5, 2), P, label="x**(-5/2)"),
    case(E, sympy.cbrt(x), P, label="cbrt(x)"),
    case(E, sympy.root(x, 5), P, label="root(x, 5)"),
    case(E, sympy.real_root(x, 3), [-2.0, -0.5, 1.5], label="real_root(x, 3)"),
    case(E, x**x, P, label="x**x"),
    case(E, x**sympy.pi, P, label="x**pi"),
    case(E, 1 / (1 + x**2), U),
    case(E, sympy.exp(x), U),
    case(E, sympy.exp(-(x**2)), U),
    case(E, sympy.log(x), P),
    case(E, sympy.log(x, 2), P, label="log(x, 2)"),
    case(E, sympy.log(1 + x), U),
    case(E, sympy.pi * x + sympy.E, U, label="pi*x + E"),
    case(E, sympy.EulerGamma * x + sympy.Catalan + sympy.GoldenRatio, U, label="NumberSymbols"),
    case(E, cf.expm1(x), U, sympy.exp(x) - 1, "codegen expm1"),
    case(E, cf.log1p(x), U, sympy.log(1 + x), "codegen log1p"),
    case(E, cf.exp2(x), U, 2**x, "codegen exp2"),
    case(E, cf.log2(x), P, sympy.log(x, 2), "codegen log2"),
    case(E, cf.log10(x), P, sympy.log(x, 10), "codegen log10"),
    case(E, cf.Sqrt(x), P, sympy.sqrt(x), "codegen Sqrt"),
    case(E, cf.Cbrt(x), P, sympy.cbrt(x), "codegen Cbrt"),
    case(E, cf.hypot(x, 0.5), U, sympy.sqrt(x**2 + 0.25), "codegen hypot"),
    case(E, cf.fma(x, x, 0.5), U, x * x + 0.5, "codegen fma"),
    # Trigonometric and inverses.
    *(case(T, f(x), U) for f in (sympy.sin, sympy.cos, sympy.tan, sympy.sec)),
    *(case(T, f(x), P) for f in (sympy.cot, sympy.csc)),
    *(case(T, f(x), U) for f in (sympy.asin, sympy.acos, sympy.atan)),
    case(T, sympy.acot(x), P),
    *(case(T, f(x), G) for f in (sympy.asec, sympy.acsc)),
    case(T, sympy.atan2(x, 0.5), U, label="atan2(x, 0.5)"),
    case(T, sympy.atan2(0.5, x), U, label="atan2(0.5, x)"),
    case(T, sympy.sinc(x), U),
    # Hyperbolic and inverses.
    *(case(H, f(x), U) for f in (sympy.sinh, sympy.cosh, sympy.tanh, sympy.sech)),
    *(case(H, f(x), P) for f in (sympy.coth, sympy.csch, sympy.acsch)),
    case(H, sympy.asinh(x), U),
    case(H, sympy.acosh(x), G),
    case(H, sympy.atanh(x), U),
    case(H, sympy.acoth(x), G),
    case(H, sympy.asech(x), S),
    # Piecewise-linear functions, complex parts, distributions.
    case(PL, sympy.Abs(x), U),
    case(PL, sympy.sign(x) * x**2, U, label="sign(x)*x**2"),
    case(PL, sympy.floor(x) + x, [0.3, 1.6, -0.4], label="floor(x)"),
    case(PL, sympy.ceiling(x) + x, [0.3, 1.6, -0.4], label="ceiling(x)"),
    case(PL, sympy.frac(x), [0.3, 1.6, -0.4], label="frac(x)"),
    case(PL, sympy.Mod(x, 0.75), [0.3, 1.6, -0.4], label="Mod(x, 0.75)"),
    case(PL, sympy.Min(x, 0.5, x**2), U, label="Min(x, 0.5, x**2)"),
    case(PL, sympy.Max(x, 0.5), U, label="Max(x, 0.5)"),
    case(PL, sympy.Heaviside(x) * x, U, label="Heaviside(x)"),
    case(PL, HEAVISIDE(x - 0.1, 1) * x, U, label="Heaviside(x, 1)"),
    case(PL, sympy.DiracDelta(x) + x, U, label="DiracDelta(x) (0 off the origin)"),
    case(PL, sympy.KroneckerDelta(x, 0.2) + x, U, label="KroneckerDelta(x, 0.2)"),
    case(PL, sympy.re(x) * x, U, label="re(x)"),
    case(PL, sympy.im(x) + x, U, label="im(x)"),
    case(PL, sympy.arg(x) + x, U, label="arg(x)"),
    case(PL, sympy.conjugate(x) * x, U, label="conjugate(x)"),
    # Special functions.
    *(case(SP, f(x), U) for f in (sympy.erf, sympy.erfc, sympy.erfinv, sympy.erfi)),
    case(SP, sympy.erfcinv(x + 1), U, sympy.erfinv(-x), label="erfcinv(x + 1)"),
    case(SP, sympy.erf2(0.5, x), U, sympy.erf(x) - sympy.erf(0.5), label="erf2(0.5, x)"),
    case(SP, sympy.gamma(x), [-0.5, 0.7, 2.5]),
    case(SP, sympy.loggamma(x), P),
    case(SP, sympy.digamma(x), P),
    case(SP, sympy.trigamma(x), P),
    case(SP, sympy.polygamma(2, x), P),
    case(SP, sympy.beta(x, 1.5), P, label="beta(x, 1.5)"),
    case(SP, sympy.factorial(x), P),
    case(SP, sympy.RisingFactorial(x, 2.5), P, label="RisingFactorial(x, 2.5)"),
    case(SP, sympy.FallingFactorial(x, 0.5), G, label="FallingFactorial(x, 0.5)"),
    case(SP, sympy.harmonic(x), P),
    case(SP, sympy.lowergamma(1.5, x), P, label="lowergamma(1.5, x)"),
    case(SP, sympy.uppergamma(1.5, x), P, label="uppergamma(1.5, x)"),
    case(SP, sympy.zeta(x), [-1.5, 0.5, 2.5], grad=False),
    case(SP, sympy.zeta(x, 0.5), [1.5, 2.5, 3.5], label="zeta(x, 0.5) (Hurwitz)"),
    case(SP, sympy.dirichlet_eta(x), [0.5, 1.5, 2.5], grad=False),
    case(SP, sympy.polylog(2, x), U, label="polylog(2, x)"),
    case(SP, sympy.Ei(x), [-0.5, 0.7, 1.6]),
    case(SP, sympy.li(x), [0.3, 1.6, 2.9]),
    case(SP, sympy.expint(1, x), P, label="expint(1, x)"),
    case(SP, sympy.expint(3, x), P, label="expint(3, x)"),
    case(SP, sympy.expint(1.5, x), P, label="expint(1.5, x)"),
    *(case(SP, f(x), U) for f in (sympy.Si, sympy.Shi, sympy.fresnels, sympy.fresnelc)),
    *(case(SP, f(x), P) for f in (sympy.Ci, sympy.Chi)),
    case(SP, sympy.betainc(1.5, 2.5, 0, x), S, label="betainc(1.5, 2.5, 0, x)"),
    case(SP, sympy.betainc_regularized(1.5, 2.5, 0, x), S, label="betainc_regularized"),
    case(SP, sympy.LambertW(x), [-0.3, 0.5, 2.0]),
    case(SP, sympy.LambertW(x, -1), [-0.3, -0.2, -0.1], label="LambertW(x, -1)"),
    case(SP, sympy.chebyshevt(4, x), U, label="chebyshevt(4, x) (SymPy expands)"),
    case(SP, sympy.chebyshevu(3, x), U, label="chebyshevu(3, x)"),
    case(SP, sympy.legendre(3, x), U, label="legendre(3, x)"),
    case(SP, sympy.assoc_legendre(2, 1, x), U, label="assoc_legendre(2, 1, x)"),
    case(SP, sympy.hermite(3, x), U, label="hermite(3, x)"),
    case(SP, sympy.laguerre(3, x), U, label="laguerre(3, x)"),
    case(SP, sympy.gegenbauer(2, half, x), U, label="gegenbauer(2, 1/2, x)"),
    case(SP, sympy.jacobi(2, half, half, x), U, label="jacobi(2, 1/2, 1/2, x)"),
    # Bessel, Airy, elliptic and hypergeometric functions.
    case(B, sympy.besselj(0, x), P),
    case(B, sympy.besselj(1, x), U),
    case(B, sympy.besselj(sympy.Rational(5, 2), x), P, label="besselj(5/2, x)"),
    case(B, sympy.bessely(0, x), P),
    case(B, sympy.bessely(1.5, x), P, label="bessely(1.5, x)"),
    case(B, sympy.besseli(0, x), U),
    case(B, sympy.besseli(1, x), U),
    case(B, sympy.besseli(2, x), U),
    case(B, sympy.besseli(0.7, x), P, label="besseli(0.7, x)"),
    case(B, sympy.besselk(0, x), P),
    case(B, sympy.besselk(2, x), P),
    case(B, sympy.jn(1, x), P),
    case(B, sympy.yn(1, x), P),
    *(case(B, f(x), U) for f in (sympy.airyai, sympy.airybi, sympy.airyaiprime, sympy.airybiprime)),
    case(B, sympy.elliptic_k(x), U),
    case(B, sympy.elliptic_e(x), U),
    case(B, sympy.elliptic_e(x, 0.5), U, label="elliptic_e(x, 0.5)"),
    case(B, sympy.elliptic_f(x, 0.5), U, label="elliptic_f(x, 0.5)"),
    case(B, sympy.elliptic_pi(0.3, x), U, label="elliptic_pi(0.3, x)"),
    case(B, sympy.elliptic_pi(0.3, x, 0.5), U, label="elliptic_pi(0.3, x, 0.5)"),
    case(B, sympy.hyper([], [1.5], x), U, label="hyper([], [1.5], x) (0F1)"),
    case(B, sympy.hyper([0.5], [1.5], x), U, label="hyper([0.5], [1.5], x) (1F1)"),
    case(B, sympy.hyper([0.5, 1.5], [2.5], x), U, label="hyper([0.5, 1.5], [2.5], x) (2F1)"),
    case(B, sympy.hyper([1], [2, 3], x), U, label="hyper([1], [2, 3], x) (1F2)"),
    case(B, sympy.hyper([1, 1, 1], [2, 2], x), U, label="hyper([1, 1, 1], [2, 2], x) (3F2)"),
    # Constructs.
    case(C, sympy.Piecewise((x**2, x < 0.5), (sympy.sqrt(x), True)), P, label="Piecewise"),
    case(
        C,
        sympy.Piecewise((sympy.log(x), x > 0), (x, True)),
        U,
        label="Piecewise, log in the untaken branch",
    ),
    case(
        C,
        sympy.Piecewise((1.0, sympy.And(x > 0, x < 0.5)), (x, True)),
        U,
        label="Piecewise on And",
    ),
    case(
        C,
        sympy.Piecewise((x, sympy.Or(x < -0.5, sympy.Not(x < 0.5))), (2 * x, True)),
        U,
        label="Piecewise on Or, Not",
    ),
    case(C, x > 0.3, U, label="Gt (boolean output)"),
    case(C, sympy.Le(x, 0.2), U, label="Le"),
    case(C, sympy.Eq(x, 0.2), U, label="Eq"),
    case(C, sympy.Ne(x, 0.2), U, label="Ne"),
    case(C, sympy.Xor(x > 0, x > 0.5), U, label="Xor"),
    case(C, sympy.Implies(x > 0, x > 0.5), U, label="Implies"),
    case(C, sympy.Sum(x**k / sympy.factorial(k), (k, 0, 8)), U, label="Sum, numeric bounds"),
    case(C, sympy.Product(1 + x / k, (k, 1, 4)), U, label="Product, numeric bounds"),
    case(C, sympy.Derivative(sympy.sin(x) * x, x), U, label="Derivative (.doit())"),
    case(C, sympy.Subs(sympy.sin(y) * y, y, x**2), U, label="Subs (.doit())"),
    case(C, sympy.Matrix([[x, x**2], [sympy.sin(x), 1]]), U, label="Matrix output"),
    case(C, sympy.Matrix([[x, 1], [2, x]]).inv(), P, label="Matrix inverse (SymPy)"),
    case(C, sympy.ImmutableDenseNDimArray([x, 2 * x, x**3]), U, label="Array output"),
]
IDS = [c["label"] for c in CASES]
# The default suite checks every fourth case (XLA compiles of JAX's special functions take
# seconds each); JAXBRIDGE_SLOW=1 checks them all.
SAMPLED = [
    pytest.param(c, id=c["label"], marks=() if i % 4 == 0 else (pytest.mark.slow,))
    for i, c in enumerate(CASES)
]


def _number(value):
    value = complex(sympy.N(value, 30))
    return value.real if value.imag == 0 else value


def _reference(expr, point):
    """SymPy's value at a point, elementwise for matrices and arrays."""
    if isinstance(expr, (sympy.MatrixBase, sympy.NDimArray)):
        return np.array([_reference(e, point) for e in sympy.flatten(expr)])
    value = expr.subs(x, point)
    if value in (sympy.true, sympy.false):
        return bool(value)
    return _number(value.doit())


def _scalar(expr):
    """The scalar whose gradient is checked: the sum of the elements of a matrix or array."""
    if isinstance(expr, (sympy.MatrixBase, sympy.NDimArray)):
        return sympy.Add(*sympy.flatten(expr))
    return expr


def _derivative(expr, point):
    """sympy.diff at a point; mpmath's numeric derivative where SymPy leaves it unevaluated."""
    derivative = sympy.diff(_scalar(expr).doit(), x)
    if not derivative.has(sympy.Derivative, sympy.Subs):
        return _number(derivative.subs(x, point).doit())
    fn = sympy.lambdify(x, _scalar(expr).doit(), "mpmath")
    return float(mpmath.diff(fn, point))


def _is_boolean(expr):
    return isinstance(expr, sympy.logic.boolalg.Boolean)


@pytest.mark.parametrize("c", SAMPLED)
def test_value_jit_vmap_grad_against_sympy(c, x64):
    expr, points = c["expr"], c["points"]
    f = jbs.compile(expr, [x])
    want = np.array([_reference(c["reference"], p) for p in points])
    eager = np.asarray(f(points[0]))
    np.testing.assert_allclose(eager.reshape(want[0].shape), want[0], rtol=1e-9, atol=1e-12)
    if _is_boolean(expr) or not c["grad"]:
        got = jax.jit(jax.vmap(f))(jnp.asarray(points))
        np.testing.assert_allclose(np.asarray(got).reshape(want.shape), want, rtol=1e-9)
        if not c["grad"]:
            name = type(expr).__name__
            with pytest.raises(NotImplementedError, match=f"derivative of `{name}`"):
                jax.grad(f)(points[0])
        return

    def value_and_gradient(v):
        scalar = lambda t: jnp.sum(f(t))  # noqa: E731
        return jax.vmap(f)(v), jax.vmap(jax.grad(scalar))(v)

    got, grad = jax.jit(value_and_gradient)(jnp.asarray(points))
    np.testing.assert_allclose(np.asarray(got).reshape(want.shape), want, rtol=1e-9, atol=1e-12)
    d_want = [_derivative(c["reference"], p) for p in points]
    np.testing.assert_allclose(np.asarray(grad), d_want, rtol=1e-7, atol=1e-9)


def _complex_point(c):
    return complex(c["points"][1], 0.3)


def _complex_result(c):
    """The complex value, or the name of the function that refuses complex arguments."""
    try:
        return complex(np.asarray(jbs.compile(_scalar(c["expr"]), [x])(_complex_point(c))))
    except TypeError as error:
        match = re.search(
            r"`(\w+)` (is defined for real arguments only|has no complex)", str(error)
        )
        if match is None:
            raise
        return match.group(1)


@pytest.mark.parametrize(
    "c",
    [pytest.param(c, id=c["label"]) for c in CASES if not _is_boolean(c["expr"])],
)
def test_complex_argument_value_or_named_refusal(c, x64):
    got = _complex_result(c)
    if isinstance(got, str):
        assert got in str(c["expr"]) or got in ("Gt", "Lt", "Ge", "Le")
        return
    want = complex(sympy.N(_scalar(c["reference"]).subs(x, _complex_point(c)).doit(), 30))
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)


# A fixed sample: symbolic derivatives simplify with SymPy, which costs seconds per case.
_SYMBOLIC_SAMPLE = [
    c for i, c in enumerate(CASES) if i % 12 == 2 and not _is_boolean(c["expr"]) and c["grad"]
]


@pytest.mark.parametrize("c", _SYMBOLIC_SAMPLE, ids=[c["label"] for c in _SYMBOLIC_SAMPLE])
def test_symbolic_derivatives_match_the_default_mode(c, x64):
    expr, points = c["expr"], jnp.asarray(c["points"])
    default = jbs.compile(_scalar(expr), [x])
    symbolic = jbs.compile(_scalar(expr), [x], derivatives="symbolic")
    want = jax.vmap(jax.grad(default))(points)
    got = jax.vmap(jax.grad(symbolic))(points)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-12)


# The docs table.


def _host_node(expr):
    """The first host-fallback or native special-function node, or None."""
    for node in sympy.preorder_traversal(_scalar(expr)):
        elementary = (sympy.exp, sympy.log, sympy.sin, sympy.cos)
        if node.func in _functions.NATIVE and node.func not in elementary:
            return node
    return None


def _row(c):
    expr = c["expr"]
    f = jbs.compile(expr, [x])
    source = f.source
    node = _host_node(expr)
    if re.search(r"(?<![\w.])_h\d+\(", source) and node is not None:
        evaluated = f"host: {_functions.implementation(node).source}"
        default = "`sympy.diff`, compiled"
    else:
        evaluated = "JAX"
        default = "JAX"
    if _is_boolean(expr):
        return [c["label"], evaluated, "JAX (Eq, Ne) / real only", "none (boolean)", "none"]
    if not c["grad"]:
        default = "none: SymPy has no derivative (raises, naming it)"
    complex_ = _complex_result(c)
    if isinstance(complex_, str):
        complex_text = f"refused (`{complex_}` is real only)"
    elif "_rt.special(" in source or evaluated.startswith("host"):
        source_name = _functions.implementation(node).source if node is not None else ""
        complex_text = "host: mpmath" if source_name == "mpmath" else "host: SciPy or mpmath"
    else:
        complex_text = "JAX"
    partial = _symbolic._partial(_scalar(expr).doit(), x)
    printable = _symbolic._printable(_symbolic._nodes(partial), {})
    symbolic = "`sympy.diff`" if printable else "JAX (SymPy leaves `diff` unevaluated)"
    return [c["label"], evaluated, complex_text, default, symbolic]


def coverage_table():
    header = [
        "Function or construct",
        "Evaluated by",
        "Complex argument",
        "Derivative (default)",
        '`derivatives="symbolic"`',
    ]
    lines = []
    group = None
    for c in CASES:
        if c["group"] != group:
            group = c["group"]
            lines += ["", f"**{group}**", "", "| " + " | ".join(header) + " |"]
            lines.append("|" + "---|" * len(header))
        cells = [cell.replace("|", "\\|") for cell in _row(c)]
        cells[0] = f"`{cells[0]}`" if "`" not in cells[0] else cells[0]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines[1:]) + "\n"


DOCS = pathlib.Path(__file__).parents[2] / "docs" / "sympy.md"
START, END = "<!-- coverage table: start -->\n", "<!-- coverage table: end -->"


def test_docs_coverage_table_is_current(x64):
    text = DOCS.read_text()
    assert START in text and END in text, "docs/sympy.md lacks the coverage table markers"
    current = text.split(START, 1)[1].split(END, 1)[0]
    assert current == coverage_table(), (
        "docs/sympy.md's coverage table is stale: run `python tests/sympy/test_sympy_coverage.py`"
    )


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    text = DOCS.read_text()
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    DOCS.write_text(before + START + coverage_table() + END + after)
    print(f"rewrote the coverage table of {DOCS} ({len(CASES)} rows)", file=sys.stderr)
