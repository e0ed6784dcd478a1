"""A hierarchical Circuit's matrix elements, against scqubits' `matrixelement_table` on the
hierarchies of scqubits' own tests (`test_scqubits_hilbertspace.py` builds them)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy
from scqubits_cases import central_difference
from test_scqubits_hilbertspace import dfc, single_fluxonium, symbolic_nested

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits.composite import _hierarchy


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


def _same_up_to_phases(got: np.ndarray, want: np.ndarray) -> None:
    """Equal moduli: each tool fixes its eigenvectors' phases its own way."""
    np.testing.assert_allclose(np.abs(got), np.abs(want), atol=1e-10)


CASES = {
    "single_fluxonium": (single_fluxonium, ["θ1_operator", "Q1_operator", "cosθ1_operator"]),
    "symbolic_nested": (symbolic_nested, ["n1_operator", "θ2_operator", "Q3_operator"]),
    "dfc": (lambda: dfc(cutoff=12), ["θ2_operator", "Q4_operator", "sinθ3_operator"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matrix_elements_equal_scqubits(case):
    make, names = CASES[case]
    circ = make()
    m = jbq.model(circ)
    for name in names:
        got = np.asarray(m.matrixelements(name, evals_count=4))
        assert got.shape == (4, 4)
        _same_up_to_phases(got, circ.matrixelement_table(name, evals_count=4))
        np.testing.assert_allclose(got, got.conj().T, atol=1e-12)  # Hermitian, as O is


def test_an_expression_and_a_batch_and_a_gradient():
    circ = dfc(cutoff=12)
    m = jbq.model(circ)
    q2 = sympy.Symbol("Q2")
    by_name = m.matrixelements("Q2_operator", evals_count=3)
    np.testing.assert_allclose(m.matrixelements(q2, evals_count=3), by_name, atol=1e-12)
    phis = jnp.array([-0.2662, -0.25])
    batch = m.matrixelements(q2, {"Φ2": phis}, evals_count=3)
    assert batch.shape == (2, 3, 3)
    np.testing.assert_allclose(np.abs(batch[0]), np.abs(by_name), atol=1e-10)

    def ours(phi):
        return jnp.abs(m.matrixelements(q2, {"Φ2": phi}, evals_count=2)[0, 1]) ** 2

    def theirs(phi):
        circ.Φ2 = phi
        return float(np.abs(circ.matrixelement_table("Q2_operator", evals_count=2)[0, 1]) ** 2)

    want = central_difference(theirs, -0.2662, 1e-4)
    np.testing.assert_allclose(float(jax.grad(ours)(-0.2662)), want, rtol=1e-5)


def test_bad_operators_raise():
    m = jbq.model(single_fluxonium())
    variables = ["Q1", "θ1"]
    with pytest.raises(ValueError) as e:
        m.matrixelements("a1_operator")
    assert str(e.value) == _hierarchy.HD_OPERATOR_NAME.format(
        name="a1_operator", variables=variables
    )
    with pytest.raises(TypeError) as e:
        m.matrixelements(np.eye(m.dim))
    assert str(e.value) == _hierarchy.HD_OPERATOR_KIND.format(variables=variables, got="ndarray")
    circ = dfc(cutoff=12)
    spans = sympy.Symbol("Q1") * sympy.Symbol("Q2")
    with pytest.raises(ValueError, match="acts on the variables \\['Q1', 'Q2'\\] of more than"):
        jbq.model(circ).matrixelements(spans)


def test_a_truncation_that_splits_a_degenerate_pair_is_refused():
    # scqubits' double fluxonium coupler at cutoff 10: subsystem [1]'s levels 4 and 5 are
    # equal (its grid's symmetry), and it keeps 5. Which of the pair is kept is the solver's
    # choice: scqubits' levels of the subsystem above differ from any other solver's by 0.4.
    import re

    from jaxbridge.scqubits.composite import _hs_errors

    circ = dfc(cutoff=10)
    leaf = circ.subsystems[0].subsystems[0]
    h = leaf.hamiltonian()
    w = np.linalg.eigvalsh(h.toarray() if hasattr(h, "toarray") else np.asarray(h))
    # (scqubits' own sparse solver lists the pair once: eigenvals gives 143.0, 174.8)
    assert leaf.truncated_dim == 5 and abs(w[5] - w[4]) < 1e-9 * abs(w[5])
    message = _hs_errors.HD_SPLIT_DEGENERATE.format(
        id_str="subsystem[1]", k=5, last=4, below=0.0, above=0.0, fewer=4, more=6
    )
    pattern = re.escape(message).replace(re.escape("(0.0 and 0.0)"), r"\(\S+ and \S+\)")
    with pytest.raises(ValueError, match=pattern):
        jbq.model(circ)
