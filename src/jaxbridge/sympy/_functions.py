"""The function table: how each SymPy function prints as JAX code, or which host fallback runs it.

A rule takes the node, the printed code of its arguments and the printer, and returns one line
of code. Native rules use `jax.numpy`, `jax.lax` and `jax.scipy.special` (names `jnp`, `lax`,
`jsp` in the generated code). What JAX lacks, or computes badly (`jsp.bessel_jn` is NaN in
float32 at z=0.5), runs on the host in float64 with SciPy or mpmath: `p.host(...)` registers it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import sympy
from sympy.codegen import cfunctions

from . import _errors, _special
from . import _runtime as _rt

Rule = Callable[[sympy.Basic, list[str], Any], str]


def _template(text: str) -> Rule:
    return lambda node, codes, p: text.format(*codes)


def _integer_order(node: Any, order: Any) -> int:
    if not (order.is_Integer or (order.is_Number and float(order).is_integer())):
        raise ValueError(_errors.INTEGER_ORDER.format(node=node, order=order))
    return int(order)


def _native(fn: Callable[..., object]) -> Rule:
    """A function JAX computes for real arguments; complex ones go to the host fallback."""

    def rule(node: sympy.Basic, codes: list[str], p: Any) -> str:
        native = p.register("_n", fn)
        return f"_rt.special({native}, {p.host_name(node)}, {', '.join(codes)})"

    return rule


def _real_only(fn: Callable[..., object]) -> Rule:
    """A function defined for real arguments only: a complex one raises, naming it."""

    def rule(node: sympy.Basic, codes: list[str], p: Any) -> str:
        native = p.register("_n", fn)
        name = getattr(node.func, "__name__", str(node.func))
        return f"_rt.real_only({name!r}, {native}, {', '.join(codes)})"

    return rule


def _polygamma(node: sympy.Basic, codes: list[str], p: Any) -> str:
    order = _integer_order(node, node.args[0])
    return _native(lambda n, x: jsp.polygamma(order, x))(node, codes, p)


def _heaviside(node: sympy.Basic, codes: list[str], p: Any) -> str:
    h0 = codes[1] if len(codes) > 1 else "0.5"
    return _real_only(jnp.heaviside)(node, [codes[0], h0], p)


def _besseli(node: sympy.Basic, codes: list[str], p: Any) -> str:
    order = node.args[0]
    if order == 0:
        return _native(lambda n, x: jsp.i0(x))(node, codes, p)
    if order == 1 or order == -1:
        return _native(lambda n, x: jsp.i1(x))(node, codes, p)
    return p.host(node, codes)


def _expint(node: Any, codes: list[str], p: Any) -> str:
    order = node.args[0]
    if order.is_Integer and order >= 0:
        n = int(order)
        return _native(lambda _, x: jsp.expn(n, x))(node, codes, p)
    return p.host(node, codes)


def _zeta(node: sympy.Basic, codes: list[str], p: Any) -> str:
    # jsp.zeta is the Hurwitz zeta for s > 1 only; Riemann zeta(s) for every s is SciPy's.
    if len(codes) == 2:
        return _native(jsp.zeta)(node, codes, p)
    return p.host(node, codes)


def _host(node: sympy.Basic, codes: list[str], p: Any) -> str:
    return p.host(node, codes)


def _loggamma(x: jax.Array) -> jax.Array:
    # gammaln is log|gamma|; below zero loggamma is complex (a pole at the integers).
    below = jnp.where(x == jnp.floor(x), jnp.inf, jnp.nan)
    return jnp.where(x < 0, below, jsp.gammaln(x))


def _erfcinv(x: jax.Array) -> jax.Array:
    return -jsp.ndtri(x / 2.0) / jnp.sqrt(2.0)


def _sinc_derivative(node: sympy.Basic, codes: list[str], p: Any) -> str:
    order = _integer_order(node, node.args[0])
    return f"_rt.sinc_derivative({order}, {codes[1]})"


class SincDerivative(sympy.Function):
    """The n-th derivative of `sinc`, printed as JAX's `sinc` series (finite at 0).

    `derivatives="symbolic"` differentiates `sinc` through this function: SymPy's own
    derivative, `cos(x)/x - sin(x)/x**2`, is NaN at 0.
    """

    nargs = 2

    def fdiff(self, argindex: int = 1) -> Any:
        n, x = cast(Any, self.args)
        if argindex == 2:
            return SincDerivative(n + 1, x)
        return sympy.S.Zero  # the order is an integer constant


NATIVE: dict[type, Rule] = {
    # Elementary functions and their inverses.
    sympy.exp: _template("_rt.exp({0})"),
    sympy.log: _template("_rt.log({0})"),
    sympy.sin: _template("_rt.sin({0})"),
    sympy.cos: _template("_rt.cos({0})"),
    sympy.tan: _template("_rt.tan({0})"),
    sympy.cot: _template("1.0 / jnp.tan({0})"),
    sympy.sec: _template("1.0 / jnp.cos({0})"),
    sympy.csc: _template("1.0 / jnp.sin({0})"),
    sympy.asin: _template("jnp.arcsin({0})"),
    sympy.acos: _template("jnp.arccos({0})"),
    sympy.atan: _template("jnp.arctan({0})"),
    sympy.acot: _template("jnp.arctan(1.0 / {0})"),
    sympy.asec: _template("jnp.arccos(1.0 / {0})"),
    sympy.acsc: _template("jnp.arcsin(1.0 / {0})"),
    sympy.atan2: _real_only(jnp.arctan2),
    sympy.sinh: _template("_rt.sinh({0})"),
    sympy.cosh: _template("_rt.cosh({0})"),
    sympy.tanh: _template("_rt.tanh({0})"),
    sympy.coth: _template("1.0 / jnp.tanh({0})"),
    sympy.sech: _template("1.0 / jnp.cosh({0})"),
    sympy.csch: _template("1.0 / jnp.sinh({0})"),
    sympy.asinh: _template("jnp.arcsinh({0})"),
    sympy.acosh: _template("jnp.arccosh({0})"),
    sympy.atanh: _template("jnp.arctanh({0})"),
    sympy.acoth: _template("jnp.arctanh(1.0 / {0})"),
    sympy.asech: _template("jnp.arccosh(1.0 / {0})"),
    sympy.acsch: _template("jnp.arcsinh(1.0 / {0})"),
    sympy.sinc: _template("jnp.sinc({0} / jnp.pi)"),
    SincDerivative: _sinc_derivative,
    # Piecewise-linear and complex parts.
    sympy.Abs: _template("jnp.abs({0})"),
    sympy.sign: _template("jnp.sign({0})"),
    sympy.floor: _real_only(jnp.floor),
    sympy.ceiling: _real_only(jnp.ceil),
    sympy.frac: _real_only(lambda x: x - jnp.floor(x)),
    sympy.Mod: _real_only(jnp.mod),
    sympy.Min: _real_only(lambda *a: _reduce_values(jnp.minimum, a)),
    sympy.Max: _real_only(lambda *a: _reduce_values(jnp.maximum, a)),
    sympy.re: _template("jnp.real({0})"),
    sympy.im: _template("jnp.imag({0})"),
    sympy.arg: _template("jnp.angle({0})"),
    sympy.conjugate: _template("jnp.conj({0})"),
    sympy.Heaviside: _heaviside,
    sympy.DiracDelta: _real_only(lambda x, *k: _rt.dirac_delta(x)),
    sympy.KroneckerDelta: _template("jnp.where({0} == {1}, 1.0, 0.0)"),
    # Special functions JAX computes well for real arguments (checked against SciPy in float32
    # and float64); complex arguments go to SciPy or mpmath on the host.
    sympy.erf: _native(jsp.erf),
    sympy.erfc: _native(jsp.erfc),
    sympy.erfinv: _real_only(jsp.erfinv),
    sympy.erfcinv: _real_only(_erfcinv),
    sympy.erf2: _native(lambda a, b: jsp.erf(b) - jsp.erf(a)),
    sympy.gamma: _template("jsp.gamma({0})"),  # complex too
    sympy.loggamma: _native(_loggamma),
    sympy.digamma: _native(jsp.digamma),
    sympy.trigamma: _native(lambda x: jsp.polygamma(1, x)),
    sympy.polygamma: _polygamma,
    sympy.beta: _native(jsp.beta),
    sympy.factorial: _template("jsp.gamma({0} + 1.0)"),  # complex too
    sympy.RisingFactorial: _native(jsp.poch),
    sympy.FallingFactorial: _native(lambda x, k: jsp.poch(x - k + 1.0, k)),
    sympy.lowergamma: _native(lambda a, x: jsp.gammainc(a, x) * jsp.gamma(a)),
    sympy.uppergamma: _native(lambda a, x: jsp.gammaincc(a, x) * jsp.gamma(a)),
    sympy.zeta: _zeta,
    sympy.Ei: _native(jsp.expi),
    sympy.li: _native(lambda x: jsp.expi(jnp.log(x))),
    sympy.expint: _expint,
    sympy.besseli: _besseli,
    sympy.harmonic: _native(lambda x: jsp.digamma(x + 1.0) + float(sympy.EulerGamma)),
    sympy.betainc: _real_only(
        lambda a, b, x1, x2: jsp.beta(a, b) * (jsp.betainc(a, b, x2) - jsp.betainc(a, b, x1))
    ),
    sympy.betainc_regularized: _real_only(
        lambda a, b, x1, x2: jsp.betainc(a, b, x2) - jsp.betainc(a, b, x1)
    ),
    # sympy.codegen.cfunctions, the C99 functions of SymPy's code printers.
    cfunctions.expm1: _template("jnp.expm1({0})"),
    cfunctions.log1p: _template("jnp.log1p({0})"),
    cfunctions.exp2: _template("jnp.exp2({0})"),
    cfunctions.log2: _template("jnp.log2({0})"),
    cfunctions.log10: _template("jnp.log10({0})"),
    cfunctions.Sqrt: _template("_rt.sqrt({0})"),
    cfunctions.Cbrt: _template("jnp.power({0}, 1.0 / 3.0)"),  # principal: NaN below zero
    cfunctions.hypot: _real_only(jnp.hypot),
    cfunctions.fma: _template("({0} * {1} + {2})"),
    # Only on the host: SciPy or mpmath in float64, derivatives from sympy.diff.
    **{
        func: _host
        for func in (
            sympy.besselj,
            sympy.bessely,
            sympy.besselk,
            sympy.jn,
            sympy.yn,
            sympy.LambertW,
            sympy.elliptic_k,
            sympy.elliptic_e,
            sympy.elliptic_f,
            sympy.elliptic_pi,
            sympy.hyper,
            sympy.erfi,
            sympy.Si,
            sympy.Ci,
            sympy.Shi,
            sympy.Chi,
            sympy.airyai,
            sympy.airybi,
            sympy.airyaiprime,
            sympy.airybiprime,
            sympy.fresnels,
            sympy.fresnelc,
            sympy.polylog,
            sympy.dirichlet_eta,
        )
    },
}


def _reduce_values(fn: Callable, values: tuple) -> jax.Array:
    result = values[0]
    for v in values[1:]:
        result = fn(result, v)
    return result


_TABLE: dict[tuple[type, int], _special.Implementation] = {}


def implementation(node: Any) -> _special.Implementation:
    """The NumPy-level implementation of a host-fallback function, by SymPy class and arity."""
    if node.func is sympy.hyper:
        return _special.hyper(len(node.args[0]), len(node.args[1]))
    if not _TABLE:
        _TABLE.update(_special.table())
    key = (node.func, len(node.args))
    if key not in _TABLE:
        raise ValueError(_errors.NO_HOST.format(func=key[0].__name__, n=key[1], node=node))
    return _TABLE[key]


def host_arguments(node: Any) -> list[sympy.Basic]:
    """The array arguments of a host call; `hyper` flattens its parameter tuples."""
    if node.func is sympy.hyper:
        return [*node.args[0], *node.args[1], node.args[2]]
    return list(node.args)


def host_builder(node: Any) -> Callable[..., sympy.Basic]:
    """Rebuilds the SymPy node from its (flattened) arguments, for `sympy.diff`."""
    if node.func is sympy.hyper:
        p, q = len(node.args[0]), len(node.args[1])
        return lambda *a: sympy.hyper(a[:p], a[p : p + q], a[-1])
    return node.func


def host_key(node: Any) -> tuple:
    if node.func is sympy.hyper:
        return (node.func, len(node.args[0]), len(node.args[1]))
    return (node.func, len(node.args))
