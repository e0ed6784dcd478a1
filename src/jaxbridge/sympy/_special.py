"""NumPy-level special functions for the host fallbacks: SciPy where it has them, mpmath else.

Every implementation receives float64 arrays (real arguments) or complex128 arrays (a complex
argument anywhere) of one broadcast shape. Real arguments whose true value is complex give NaN,
as `sqrt` and `log` do: an implementation may return complex values (`lambertw` always does,
mpmath does off the real line), and `evaluate` keeps the real ones and turns the others into
NaN, never the real part. Complex arguments give the complex value: SciPy's complex loops
where the other arguments (an order, a parameter) are real, mpmath otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy

NumpyFn = Callable[..., np.ndarray]


@dataclass(frozen=True)
class Implementation:
    """How one SymPy function is computed on the host.

    `real` takes float64 arrays; `complex_` takes complex128 arrays, or is None where neither
    SciPy nor mpmath computes the function off the real line.
    """

    real: NumpyFn
    complex_: NumpyFn | None
    source: str = "SciPy"  # what computes real arguments, as the docs' coverage table says


def evaluate(impl: Implementation, arrays: Sequence[np.ndarray], is_complex: bool) -> np.ndarray:
    """`impl` at `arrays` (already float64 or complex128), as float64 or complex128."""
    with np.errstate(all="ignore"):
        if is_complex:
            if impl.complex_ is None:  # checked at trace time; kept as a guard
                raise TypeError("this function has no complex implementation")
            return np.asarray(impl.complex_(*arrays), np.complex128)
        return _real_or_nan(np.asarray(impl.real(*arrays)))


def _real_or_nan(value: np.ndarray) -> np.ndarray:
    if not np.iscomplexobj(value):
        return value.astype(np.float64)
    # A rounding-level imaginary part (mpmath's complex intermediates) is still a real value.
    real = np.abs(np.imag(value)) <= 1e-13 * np.abs(value)
    return np.where(real, np.real(value), np.nan)


def mp(fn: Callable[..., object]) -> NumpyFn:
    """An mpmath function, elementwise, as complex128 (the caller keeps the real values)."""
    import mpmath

    no_convergence = getattr(mpmath, "libmp").NoConvergence  # noqa: B009 - untyped in stubs

    def one(*values: object) -> complex:
        # A complex argument with no imaginary part as a real: an order mpmath needs integer.
        values = tuple(v.real if isinstance(v, complex) and v.imag == 0 else v for v in values)
        try:
            result: Any = fn(*values)  # an mpmath mpf or mpc
            return complex(result)
        except (ZeroDivisionError, ValueError, no_convergence):
            return complex(np.nan, np.nan)  # a pole, or a series mpmath cannot sum

    vectorized = np.frompyfunc(one, fn.__code__.co_argcount, 1)

    def call(*arrays: np.ndarray) -> np.ndarray:
        # np.asarray: on 0-d arrays, frompyfunc returns a bare Python complex.
        return np.asarray(vectorized(*arrays), np.complex128)

    return call


def _scipy_then_mp(scipy_fn: NumpyFn, complex_at: tuple[int, ...], mp_fn: NumpyFn) -> NumpyFn:
    """SciPy's complex loop when only the arguments at `complex_at` are complex; else mpmath."""

    def call(*arrays: np.ndarray) -> np.ndarray:
        others = [a for i, a in enumerate(arrays) if i not in complex_at]
        if all(not np.any(np.imag(a)) for a in others):
            args = [a if i in complex_at else np.real(a) for i, a in enumerate(arrays)]
            return scipy_fn(*args)
        return mp_fn(*arrays)

    return call


def _both(scipy_fn: NumpyFn, complex_at: tuple[int, ...], mp_fn: Callable) -> Implementation:
    return Implementation(scipy_fn, _scipy_then_mp(scipy_fn, complex_at, mp(mp_fn)))


def _mp_only(mp_fn: Callable) -> Implementation:
    fn = mp(mp_fn)
    return Implementation(fn, fn, "mpmath")


def _integer_or_nan(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    is_integer = np.isfinite(n) & (n == np.round(n))
    return np.where(is_integer, n, 0).astype(np.int64), is_integer


def _spherical(scipy_fn: NumpyFn, cylinder: NumpyFn) -> NumpyFn:
    """j_n or y_n: SciPy's for integer n, sqrt(pi / 2z) times the cylinder function else."""

    def call(n: np.ndarray, z: np.ndarray) -> np.ndarray:
        whole, is_integer = _integer_or_nan(np.real(n))
        if np.iscomplexobj(n) and np.any(np.imag(n)):
            is_integer = np.zeros(np.shape(n), bool)
        general = np.sqrt(np.pi / (2 * z)) * cylinder(n + 0.5, z)
        return np.where(is_integer, scipy_fn(whole, z), general)

    return call


def _lambertw(z: np.ndarray, k: np.ndarray | None = None) -> np.ndarray:
    import scipy.special as sc

    if k is None:
        return sc.lambertw(z)
    whole, is_integer = _integer_or_nan(np.real(k))
    if np.iscomplexobj(k) and np.any(np.imag(k)):
        is_integer = np.zeros(np.shape(k), bool)
    branch: Any = whole  # lambertw broadcasts an integer array of branches
    return np.where(is_integer, sc.lambertw(z, branch), np.nan)  # the branch is an integer


def _below_zero_nan(scipy_fn: NumpyFn, mp_fn: Callable) -> Implementation:
    # SciPy returns the real part of Ci and Chi below zero, where their value is complex.
    return Implementation(
        lambda x: np.where(x < 0, np.nan, scipy_fn(x)), _scipy_then_mp(scipy_fn, (0,), mp(mp_fn))
    )


def _hyp2f1_real(a: np.ndarray, b: np.ndarray, c: np.ndarray, z: np.ndarray) -> np.ndarray:
    import mpmath
    import scipy.special as sc

    # SciPy returns inf for z > 1, where the value is (in general) complex: mpmath there.
    value = np.asarray(sc.hyp2f1(a, b, c, z)).astype(np.complex128)
    beyond = z > 1
    if np.any(beyond):
        continued = mp(_generic(4, mpmath.hyp2f1))
        value[beyond] = continued(a[beyond], b[beyond], c[beyond], z[beyond])
    return value


def hyper(p: int, q: int) -> Implementation:
    """pFq, its arguments flattened: the p upper, the q lower parameters, then z."""
    import mpmath
    import scipy.special as sc

    general = _generic(p + q + 1, lambda *a: mpmath.hyper(a[:p], a[p : p + q], a[-1]))
    if (p, q) == (0, 1):
        return _both(sc.hyp0f1, (1,), general)
    if (p, q) == (1, 1):
        return _both(sc.hyp1f1, (2,), general)
    if (p, q) == (2, 1):
        complex_ = _scipy_then_mp(sc.hyp2f1, (3,), mp(general))
        return Implementation(_hyp2f1_real, complex_, "SciPy (mpmath for z > 1)")
    return _mp_only(general)


def _generic(nargs: int, fn: Callable) -> Callable:
    """`fn` with an explicit number of positional arguments, for `np.frompyfunc`."""
    names = ", ".join(f"a{i}" for i in range(nargs))
    namespace: dict[str, object] = {"fn": fn}
    exec(f"def call({names}):\n    return fn({names})", namespace)
    return namespace["call"]  # pyright: ignore[reportReturnType] - a function, built above


def table() -> dict[tuple[type, int], Implementation]:
    """Every host implementation, keyed by SymPy class and number of arguments."""
    import mpmath
    import scipy.special as sc

    def g(n: int, fn: Callable) -> Callable:
        return _generic(n, fn)

    sqrt_pi_2z = lambda z: mpmath.sqrt(mpmath.pi / (2 * z))  # noqa: E731
    return {
        (sympy.besselj, 2): _both(sc.jv, (1,), g(2, mpmath.besselj)),
        (sympy.bessely, 2): _both(sc.yv, (1,), g(2, mpmath.bessely)),
        (sympy.besseli, 2): _both(sc.iv, (1,), g(2, mpmath.besseli)),
        (sympy.besselk, 2): _both(sc.kv, (1,), g(2, mpmath.besselk)),
        (sympy.jn, 2): _both(
            _spherical(sc.spherical_jn, sc.jv),
            (1,),
            g(2, lambda n, z: sqrt_pi_2z(z) * mpmath.besselj(n + 0.5, z)),
        ),
        (sympy.yn, 2): _both(
            _spherical(sc.spherical_yn, sc.yv),
            (1,),
            g(2, lambda n, z: sqrt_pi_2z(z) * mpmath.bessely(n + 0.5, z)),
        ),
        (sympy.LambertW, 1): Implementation(_lambertw, _lambertw),
        (sympy.LambertW, 2): Implementation(_lambertw, _lambertw),
        (sympy.elliptic_k, 1): _both(sc.ellipk, (), g(1, mpmath.ellipk)),
        (sympy.elliptic_e, 1): _both(sc.ellipe, (), g(1, mpmath.ellipe)),
        (sympy.elliptic_e, 2): _both(sc.ellipeinc, (), g(2, mpmath.ellipe)),
        (sympy.elliptic_f, 2): _both(sc.ellipkinc, (), g(2, mpmath.ellipf)),
        (sympy.elliptic_pi, 2): _mp_only(g(2, mpmath.ellippi)),
        (sympy.elliptic_pi, 3): _mp_only(g(3, mpmath.ellippi)),
        (sympy.zeta, 1): _both(sc.zeta, (0,), g(1, mpmath.zeta)),
        (sympy.zeta, 2): _mp_only(g(2, mpmath.zeta)),
        (sympy.erfi, 1): _both(sc.erfi, (0,), g(1, mpmath.erfi)),
        (sympy.erf, 1): _both(sc.erf, (0,), g(1, mpmath.erf)),
        (sympy.erfc, 1): _both(sc.erfc, (0,), g(1, mpmath.erfc)),
        (sympy.erf2, 2): _mp_only(g(2, lambda a, b: mpmath.erf(b) - mpmath.erf(a))),
        (sympy.Si, 1): _both(lambda x: sc.sici(x)[0], (0,), g(1, mpmath.si)),
        (sympy.Ci, 1): _below_zero_nan(lambda x: sc.sici(x)[1], g(1, mpmath.ci)),
        (sympy.Shi, 1): _both(lambda x: sc.shichi(x)[0], (0,), g(1, mpmath.shi)),
        (sympy.Chi, 1): _below_zero_nan(lambda x: sc.shichi(x)[1], g(1, mpmath.chi)),
        (sympy.airyai, 1): _both(lambda x: sc.airy(x)[0], (0,), g(1, mpmath.airyai)),
        (sympy.airyaiprime, 1): _both(
            lambda x: sc.airy(x)[1], (0,), g(1, lambda z: mpmath.airyai(z, 1))
        ),
        (sympy.airybi, 1): _both(lambda x: sc.airy(x)[2], (0,), g(1, mpmath.airybi)),
        (sympy.airybiprime, 1): _both(
            lambda x: sc.airy(x)[3], (0,), g(1, lambda z: mpmath.airybi(z, 1))
        ),
        (sympy.fresnels, 1): _both(lambda x: sc.fresnel(x)[0], (0,), g(1, mpmath.fresnels)),
        (sympy.fresnelc, 1): _both(lambda x: sc.fresnel(x)[1], (0,), g(1, mpmath.fresnelc)),
        (sympy.expint, 2): _mp_only(g(2, mpmath.expint)),
        (sympy.Ei, 1): _both(sc.expi, (0,), g(1, mpmath.ei)),
        (sympy.li, 1): _mp_only(g(1, mpmath.li)),
        (sympy.loggamma, 1): _both(sc.loggamma, (0,), g(1, mpmath.loggamma)),
        (sympy.digamma, 1): _both(sc.psi, (0,), g(1, mpmath.digamma)),
        (sympy.trigamma, 1): _mp_only(g(1, lambda z: mpmath.psi(1, z))),
        (sympy.polygamma, 2): _mp_only(g(2, mpmath.psi)),
        (sympy.beta, 2): _mp_only(g(2, mpmath.beta)),
        (sympy.lowergamma, 2): _mp_only(g(2, lambda a, z: mpmath.gammainc(a, 0, z))),
        (sympy.uppergamma, 2): _mp_only(g(2, mpmath.gammainc)),
        (sympy.RisingFactorial, 2): _mp_only(g(2, mpmath.rf)),
        (sympy.FallingFactorial, 2): _mp_only(g(2, mpmath.ff)),
        (sympy.harmonic, 1): _mp_only(g(1, mpmath.harmonic)),
        (sympy.polylog, 2): _mp_only(g(2, mpmath.polylog)),
        (sympy.dirichlet_eta, 1): _mp_only(g(1, mpmath.altzeta)),
    }
