"""The function table: how each SymPy function prints as JAX code, or which host fallback runs it.

A rule takes the node, the printed code of its arguments and the printer, and returns one line
of code. Native rules use `jax.numpy`, `jax.lax` and `jax.scipy.special` (names `jnp`, `lax`,
`jsp` in the generated code). What JAX lacks, or computes badly (`jsp.bessel_jn` is NaN in
float32 at z=0.5), runs on the host in float64 with SciPy or mpmath: `p.host(...)` registers it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import sympy

from . import _errors

Rule = Callable[[sympy.Basic, list[str], object], str]


def _template(text: str) -> Rule:
    return lambda node, codes, p: text.format(*codes)


def _reduce(op: str) -> Rule:
    return lambda node, codes, p: f"_rt.reduce({op!r}, {', '.join(codes)})"


def _integer_order(node: sympy.Basic, order: sympy.Basic) -> int:
    if not (order.is_Integer or (order.is_Number and float(order).is_integer())):
        raise ValueError(_errors.INTEGER_ORDER.format(node=node, order=order))
    return int(order)


def _polygamma(node, codes, p):
    return f"jsp.polygamma({_integer_order(node, node.args[0])}, {codes[1]})"


def _heaviside(node, codes, p):
    h0 = codes[1] if len(codes) > 1 else "0.5"
    return f"jnp.heaviside({codes[0]}, {h0})"


def _besseli(node, codes, p):
    order = node.args[0]
    if order == 0:
        return f"jsp.i0({codes[1]})"
    if order == 1 or order == -1:
        return f"jsp.i1({codes[1]})"
    return p.host(node, codes)


def _expint(node, codes, p):
    order = node.args[0]
    if order.is_Integer and order >= 0:
        return f"jsp.expn({int(order)}, {codes[1]})"
    return p.host(node, codes)


def _zeta(node, codes, p):
    # jsp.zeta is the Hurwitz zeta for s > 1 only; Riemann zeta(s) for every s is SciPy's.
    if len(codes) == 2:
        return f"jsp.zeta({codes[0]}, {codes[1]})"
    return p.host(node, codes)


def _host(node, codes, p):
    return p.host(node, codes)


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
    sympy.atan2: _template("jnp.arctan2({0}, {1})"),
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
    # Piecewise-linear and complex parts.
    sympy.Abs: _template("jnp.abs({0})"),
    sympy.sign: _template("jnp.sign({0})"),
    sympy.floor: _template("jnp.floor({0})"),
    sympy.ceiling: _template("jnp.ceil({0})"),
    sympy.frac: _template("({0} - jnp.floor({0}))"),
    sympy.Mod: _template("jnp.mod({0}, {1})"),
    sympy.Min: _reduce("minimum"),
    sympy.Max: _reduce("maximum"),
    sympy.re: _template("jnp.real({0})"),
    sympy.im: _template("jnp.imag({0})"),
    sympy.arg: _template("jnp.angle({0})"),
    sympy.conjugate: _template("jnp.conj({0})"),
    sympy.Heaviside: _heaviside,
    sympy.DiracDelta: lambda node, codes, p: f"_rt.dirac_delta({codes[0]})",
    sympy.KroneckerDelta: _template("jnp.where({0} == {1}, 1.0, 0.0)"),
    # Special functions JAX computes well (checked against SciPy in float32 and float64).
    sympy.erf: _template("jsp.erf({0})"),
    sympy.erfc: _template("jsp.erfc({0})"),
    sympy.erfinv: _template("jsp.erfinv({0})"),
    sympy.erfcinv: _template("(-jsp.ndtri({0} / 2.0) / jnp.sqrt(2.0))"),
    sympy.erf2: _template("(jsp.erf({1}) - jsp.erf({0}))"),
    sympy.gamma: _template("jsp.gamma({0})"),
    sympy.loggamma: _template("jsp.gammaln({0})"),
    sympy.digamma: _template("jsp.digamma({0})"),
    sympy.trigamma: _template("jsp.polygamma(1, {0})"),
    sympy.polygamma: _polygamma,
    sympy.beta: _template("jsp.beta({0}, {1})"),
    sympy.factorial: _template("jsp.gamma({0} + 1.0)"),
    sympy.RisingFactorial: _template("jsp.poch({0}, {1})"),
    sympy.FallingFactorial: _template("jsp.poch({0} - {1} + 1.0, {1})"),
    sympy.lowergamma: _template("(jsp.gammainc({0}, {1}) * jsp.gamma({0}))"),
    sympy.uppergamma: _template("(jsp.gammaincc({0}, {1}) * jsp.gamma({0}))"),
    sympy.zeta: _zeta,
    sympy.Ei: _template("jsp.expi({0})"),
    sympy.li: _template("jsp.expi(jnp.log({0}))"),
    sympy.expint: _expint,
    sympy.besseli: _besseli,
    # Only on the host: SciPy or mpmath in float64, derivatives from sympy.diff.
    sympy.besselj: _host,
    sympy.bessely: _host,
    sympy.besselk: _host,
    sympy.jn: _host,
    sympy.yn: _host,
    sympy.LambertW: _host,
    sympy.elliptic_k: _host,
    sympy.elliptic_e: _host,
    sympy.elliptic_f: _host,
    sympy.hyper: _host,
    sympy.erfi: _host,
    sympy.Si: _host,
    sympy.Ci: _host,
    sympy.Shi: _host,
    sympy.Chi: _host,
    sympy.airyai: _host,
    sympy.airybi: _host,
    sympy.airyaiprime: _host,
    sympy.airybiprime: _host,
    sympy.fresnels: _host,
    sympy.fresnelc: _host,
}


def _mp(fn: Callable) -> Callable:
    """An mpmath function, elementwise over NumPy arrays, as float64."""
    import mpmath

    vectorized = np.frompyfunc(lambda *a: float(mpmath.re(fn(*a))), fn.__code__.co_argcount, 1)
    return lambda *arrays: vectorized(*arrays).astype(np.float64)


def _hyper_numpy(p: int, q: int) -> Callable:
    import mpmath
    import scipy.special as sc

    if (p, q) == (0, 1):
        return sc.hyp0f1
    if (p, q) == (1, 1):
        return sc.hyp1f1
    if (p, q) == (2, 1):
        return sc.hyp2f1
    vectorized = np.frompyfunc(
        lambda *a: float(mpmath.re(mpmath.hyper(a[:p], a[p : p + q], a[-1]))), p + q + 1, 1
    )
    return lambda *arrays: vectorized(*arrays).astype(np.float64)


def host_numpy(node: sympy.Basic) -> Callable:
    """The NumPy-level implementation of a host-fallback function, by SymPy class and arity."""
    import mpmath
    import scipy.special as sc

    func, n = node.func, len(node.args)
    if func is sympy.hyper:
        return _hyper_numpy(len(node.args[0]), len(node.args[1]))
    if func is sympy.expint:
        return _mp(lambda nu, z: mpmath.expint(nu, z))
    table: dict[tuple[type, int], Callable] = {
        (sympy.besselj, 2): sc.jv,
        (sympy.bessely, 2): sc.yv,
        (sympy.besseli, 2): sc.iv,
        (sympy.besselk, 2): sc.kv,
        (sympy.jn, 2): lambda n_, z: sc.spherical_jn(np.asarray(n_).astype(int), z),
        (sympy.yn, 2): lambda n_, z: sc.spherical_yn(np.asarray(n_).astype(int), z),
        (sympy.LambertW, 1): lambda x: sc.lambertw(x).real,
        (sympy.LambertW, 2): lambda x, k: sc.lambertw(x, np.asarray(k).astype(int)).real,
        (sympy.elliptic_k, 1): sc.ellipk,
        (sympy.elliptic_e, 1): sc.ellipe,
        (sympy.elliptic_e, 2): sc.ellipeinc,
        (sympy.elliptic_f, 2): sc.ellipkinc,
        (sympy.zeta, 1): sc.zeta,
        (sympy.erfi, 1): sc.erfi,
        (sympy.Si, 1): lambda x: sc.sici(x)[0],
        (sympy.Ci, 1): lambda x: sc.sici(x)[1],
        (sympy.Shi, 1): lambda x: sc.shichi(x)[0],
        (sympy.Chi, 1): lambda x: sc.shichi(x)[1],
        (sympy.airyai, 1): lambda x: sc.airy(x)[0],
        (sympy.airyaiprime, 1): lambda x: sc.airy(x)[1],
        (sympy.airybi, 1): lambda x: sc.airy(x)[2],
        (sympy.airybiprime, 1): lambda x: sc.airy(x)[3],
        (sympy.fresnels, 1): lambda x: sc.fresnel(x)[0],
        (sympy.fresnelc, 1): lambda x: sc.fresnel(x)[1],
    }
    return table[(func, n)]


def host_arguments(node: sympy.Basic) -> list[sympy.Basic]:
    """The array arguments of a host call; `hyper` flattens its parameter tuples."""
    if node.func is sympy.hyper:
        return [*node.args[0], *node.args[1], node.args[2]]
    return list(node.args)


def host_builder(node: sympy.Basic) -> Callable[..., sympy.Basic]:
    """Rebuilds the SymPy node from its (flattened) arguments, for `sympy.diff`."""
    if node.func is sympy.hyper:
        p, q = len(node.args[0]), len(node.args[1])
        return lambda *a: sympy.hyper(a[:p], a[p : p + q], a[-1])
    return node.func


def host_key(node: sympy.Basic) -> tuple:
    if node.func is sympy.hyper:
        return (node.func, len(node.args[0]), len(node.args[1]))
    return (node.func, len(node.args))
