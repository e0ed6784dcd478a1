"""cos(c·θ) and sin(c·θ) of a `Circuit`, every basis, against scqubits itself (float64).

scqubits writes a junction on nodes (0, 1) as `cos(2πΦ1 - 1.0*θ1)`; SymPy keeps
`sin(-1.0*θ1)` as `-sin(1.0*θ1)`, a product that is no operator key. These cases failed
before the keys were taken with SymPy's own sign (issue 23, section 4).
"""

import copy
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy

import jaxbridge.scqubits as jbq
import jaxbridge.sympy as jbs
from jaxbridge.scqubits import _errors

scq = pytest.importorskip("scqubits")

# scqubits' YAML parser calls pyparsing's old camelCase names (pyparsing 3.3 warns).
pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated - use:DeprecationWarning")

FLUXONIUM = "branches:\n- [JJ, 0, 1, EJ=8.9, EC=2.5]\n- [L, 0, 1, EL=0.5]\n"
FLUXONIUM_NUMBERS = "branches:\n- [JJ, 0, 1, 8.9, 2.5]\n- [L, 0, 1, 0.5]\n"
TRANSMON = "branches:\n- [JJ, 0, 1, EJ=8.9, EC=0.3]\n"
MIXED = """branches:
- [JJ, 0, 1, EJ=8.9, EC=2.5]
- [L, 1, 2, EL=0.5]
- [C, 2, 0, EC2=1.0]
- [JJ, 0, 2, EJ2=3.0, 1.5]
"""

θ1, Q1 = sympy.symbols("θ1 Q1")


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


def _circuit(yaml, basis, transformation=None, **values):
    c = scq.Circuit(yaml, from_file=False, ext_basis=basis)
    if transformation is not None:
        c.configure(transformation_matrix=np.array(transformation))
    for name, value in values.items():
        setattr(c, name, value)
    return c


def _at(c, values):
    out = copy.deepcopy(c)
    for name, value in values.items():
        setattr(out, name, float(value))
    return out


# (yaml, ext_basis, transformation matrix, values on the object, a second point)
CASES = {
    # the issue's canonical fluxonium: cos(2πΦ1 - 1.0*θ1) on a grid
    "fluxonium-discretized": (FLUXONIUM, "discretized", None, {"Φ1": 0.3}, {"EJ": 7.5, "Φ1": 0.5}),
    # oscillator length (8 EC / EL)^(1/4) a function of the parameters: a matrix function
    "fluxonium-harmonic": (FLUXONIUM, "harmonic", None, {"Φ1": 0.3}, {"EC": 2.0, "EL": 0.7}),
    # fixed length: scqubits' own exp(i c θ) matrices
    "fluxonium-harmonic-fixed": (FLUXONIUM_NUMBERS, "harmonic", None, {"Φ1": 0.3}, {"Φ1": 0.45}),
    # cos(2πΦ1 - 0.5*θ1)
    "half-discretized": (FLUXONIUM, "discretized", [[0.5]], {"Φ1": 0.3}, {"EJ": 6.0, "Φ1": 0.1}),
    # cos(2πΦ1 - 2.0*θ1) through the matrix function
    "double-harmonic": (FLUXONIUM, "harmonic", [[2.0]], {"Φ1": 0.3}, {"EC": 3.0, "Φ1": 0.2}),
    # cos(2.0*θ1) of a periodic variable in the charge basis
    "transmon-charge": (TRANSMON, "discretized", [[2.0]], {"ng1": 0.2}, {"EJ": 5.0, "ng1": 0.4}),
    # cos(2πΦ1 - 1.0*θ1 + 2.0*θ2): periodic θ1 and extended θ2 in one argument
    "mixed-discretized": (
        MIXED,
        "discretized",
        [[1.0, 0.0], [1.0, -2.0]],
        {"Φ1": 0.3, "cutoff_n_1": 4, "cutoff_ext_2": 14},
        {"EJ2": 2.0, "Φ1": 0.4},
    ),
    "mixed-harmonic": (
        MIXED,
        "harmonic",
        [[1.0, 0.0], [1.0, -2.0]],
        {"Φ1": 0.3, "cutoff_n_1": 4, "cutoff_ext_2": 14},
        {"EJ": 7.0},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_eigenvals_equal_scqubits(name):
    yaml, basis, transformation, values, other = CASES[name]
    c = _circuit(yaml, basis, transformation, **values)
    m = jbq.model(c)
    np.testing.assert_allclose(m.eigenvals(evals_count=5), c.eigenvals(5), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        m.eigenvals(other, evals_count=5), _at(c, other).eigenvals(5), rtol=1e-9, atol=1e-12
    )


def test_the_issues_fluxonium_under_vmap_and_grad():
    c = _circuit(FLUXONIUM, "discretized")
    m = jbq.model(c)
    fluxes = np.array([0.0, 0.25, 0.5])
    got = jax.vmap(lambda f: m.eigenvals({"Φ1": f}, evals_count=3))(jnp.asarray(fluxes))
    want = [_at(c, {"Φ1": f}).eigenvals(3) for f in fluxes]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)

    def f01(flux):
        e = m.eigenvals({"Φ1": flux}, evals_count=2)
        return e[1] - e[0]

    def theirs(flux):
        e = _at(c, {"Φ1": flux}).eigenvals(2)
        return e[1] - e[0]

    h = 1e-4
    np.testing.assert_allclose(
        jax.grad(f01)(0.3), (theirs(0.3 + h) - theirs(0.3 - h)) / (2 * h), rtol=1e-6
    )


def test_matrixelements_of_sin_of_a_multiple():
    c = _circuit(FLUXONIUM, "discretized", Φ1=0.3)
    m = jbq.model(c)
    lo, hi = c.discretized_phi_range[1]
    grid = np.linspace(lo, hi, c.cutoffs_dict()[1])
    for expr, diagonal in [
        (sympy.sin(0.5 * θ1), np.sin(0.5 * grid)),
        (sympy.cos(-1.5 * θ1 + 0.2), np.cos(-1.5 * grid + 0.2)),
    ]:
        want = c.matrixelement_table(np.diag(diagonal), evals_count=3)
        got = m.matrixelements(expr, evals_count=3)
        np.testing.assert_allclose(np.abs(got), np.abs(want), atol=1e-12)


# Errors name the user's variables: never `_jaxbridge_op3` (operator_sum's stand-ins) nor `_x1`,
# `_q1` (the harmonic basis's scaled operators).


def _message(c, expr):
    m = jbq.model(c)
    with pytest.raises(ValueError) as info:
        m.matrixelements(expr, evals_count=2)
    text = str(info.value)
    assert "_jaxbridge" not in text and "_x1" not in text and "_q1" not in text
    return text


def test_error_on_a_grid_names_theta():
    c = _circuit(FLUXONIUM, "discretized")
    assert _message(c, sympy.exp(θ1)) == (
        "`jaxbridge.sympy.operator_sum`: the term `exp(θ1)` of H is not a coefficient times a "
        "product of operators; `exp(θ1)` mixes operators inside a function or a power. Write H "
        "as a polynomial in the operator symbols."
    )


def test_errors_in_the_harmonic_basis_name_theta_and_q():
    c = _circuit(FLUXONIUM, "harmonic")
    assert _message(c, Q1 * sympy.cos(θ1)) == (
        "`jaxbridge.sympy.operator_sum`: the term `Q1*cos(θ1)` of H is not a coefficient times "
        "a product of operators; a function of a HermitianFactor is multiplied by other "
        "operators. Write H as a polynomial in the operator symbols."
    )
    assert "`θ1` appears with exponent `-1`, not a positive integer" in _message(c, 1 / θ1)


def test_error_for_a_fractional_multiple_of_a_periodic_variable():
    c = _circuit(TRANSMON, "discretized")
    text = _message(c, sympy.cos(0.5 * θ1))
    assert text == _errors.CIRCUIT_PERIODIC_MULTIPLE.format(node=sympy.cos(0.5 * θ1), i=1, c=0.5)
    assert "takes `θ1` times 0.5, but `θ1` is a periodic variable" in text
    # whole multiples are operators: sin(2θ) = (e^{2iθ} - e^{-2iθ}) / 2i, charge shifts by 2
    m = jbq.model(c)
    n = c.cutoffs_dict()[1]
    shift = np.eye(2 * n + 1, k=-2)
    want = c.matrixelement_table((shift - shift.T) / 2j, evals_count=3)
    np.testing.assert_allclose(
        np.abs(m.matrixelements(sympy.sin(2 * θ1), evals_count=3)), np.abs(want), atol=1e-12
    )


# operator_sum itself: a shift whose operator part SymPy writes with a minus sign.


def test_operator_sum_expands_a_negated_operator_argument():
    x, ej, phi = sympy.symbols("x EJ phi")
    grid = np.linspace(-3.0, 3.0, 7)
    keys: dict[sympy.Basic, Any] = {
        sympy.cos(x): np.diag(np.cos(grid)),
        sympy.sin(x): np.diag(np.sin(grid)),
    }
    for H, want in [
        (ej * sympy.cos(phi - x), lambda e, p: e * np.cos(p - grid)),
        (ej * sympy.sin(phi - x), lambda e, p: e * np.sin(p - grid)),
        (ej * sympy.sin(-x - phi), lambda e, p: e * np.sin(-grid - p)),
    ]:
        h = jbs.operator_sum(H, keys, [ej, phi])
        np.testing.assert_allclose(h(2.0, 0.7), np.diag(want(2.0, 0.7)), atol=1e-12)


def test_operator_sum_error_names_the_key_not_its_stand_in():
    x, a = sympy.symbols("x a")
    with pytest.raises(ValueError) as info:
        jbs.operator_sum(a * sympy.exp(sympy.cos(x)), {sympy.cos(x): np.eye(2)}, [a])
    assert str(info.value) == (
        "`jaxbridge.sympy.operator_sum`: the term `a*exp(cos(x))` of H is not a coefficient "
        "times a product of operators; `exp(cos(x))` mixes operators inside a function or a "
        "power. Write H as a polynomial in the operator symbols."
    )
