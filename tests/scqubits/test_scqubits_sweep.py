"""A HilbertSpace model's sweep quantities as ParameterSweep stores them (`lamb`, `kerr`,
`chi`) and its labels (`bare_index`, `energy_by_dressed_index`), against scqubits evaluated
directly on a transmon with a resonator and two transmons sharing one."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scqubits as scq
from scqubits_cases import central_difference

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits.composite import _hs_errors


@pytest.fixture(autouse=True)
def _x64(x64):
    scq.settings.PROGRESSBAR_DISABLED = True
    yield


def _system(two: bool):
    t1 = scq.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=8, truncated_dim=3, id_str="t1")
    osc = scq.Oscillator(E_osc=6.0, truncated_dim=4, id_str="osc")
    subsystems = [t1, osc]
    if two:
        t2 = scq.Transmon(EJ=15.0, EC=0.25, ng=0.0, ncut=8, truncated_dim=3, id_str="t2")
        subsystems = [t1, t2, osc]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hs = scq.HilbertSpace(subsystems)
        hs.add_interaction(g=0.1, op1=t1.n_operator, op2=osc.creation_operator, add_hc=True)
        if two:
            op = subsystems[1].n_operator
            hs.add_interaction(g=0.08, op1=op, op2=osc.creation_operator, add_hc=True)
    return hs, t1


def _equal(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want)), "a label found by one only"
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], atol=1e-10)


@pytest.mark.parametrize("two", [False, True], ids=["transmon+resonator", "two transmons"])
def test_lamb_kerr_chi_equal_parameter_sweep(two):
    hs, t1 = _system(two)
    m = jbq.model(hs)
    ejs = np.array([18.0, 20.0, 22.0])

    def update(EJ):
        t1.EJ = EJ

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sweep = scq.ParameterSweep(
            hs, {"EJ": ejs}, update_hilbertspace=update, evals_count=hs.dimension,
            subsys_update_info={"EJ": [t1]},
        )  # fmt: skip
    got = m.dispersive({"t1": {"EJ": jnp.asarray(ejs)}})
    n = len(hs)
    for s in range(n):
        _equal(got["lamb"][s], sweep["lamb"][s].toarray())
    for name in ("kerr", "chi"):
        filled = {(a, b) for a in range(n) for b in range(n) if np.size(sweep[name][a, b])}
        assert set(got[name]) == filled, name
        for (a, b), value in got[name].items():
            _equal(value, sweep[name][a, b].toarray())
    # the three methods are the dict's entries
    _equal(m.chi({"t1": {"EJ": 20.0}})[(0, n - 1)], got["chi"][(0, n - 1)][1])


def test_the_dispersive_shift_is_differentiable():
    hs, _ = _system(False)
    m = jbq.model(hs)

    def ours(g):
        return m.chi({"g": [g]})[(0, 1)][1]  # one photon's shift of the qubit's first level

    def theirs(g):
        hs.interaction_list[0].g_strength = g
        hs.generate_lookup()
        e = hs.energy_by_bare_index
        return e((1, 1)) - e((1, 0)) - e((0, 1)) + e((0, 0))

    np.testing.assert_allclose(float(ours(0.1)), theirs(0.1), atol=1e-10)
    want = central_difference(theirs, 0.1, 1e-4)
    np.testing.assert_allclose(float(jax.grad(ours)(0.1)), want, rtol=1e-6)


def test_bare_index_and_energy_by_dressed_index_equal_scqubits():
    hs, _ = _system(True)
    m = jbq.model(hs)
    hs.generate_lookup()
    for dressed in range(hs.dimension):
        want = hs.bare_index(dressed)
        got = np.asarray(m.bare_index(dressed))
        assert tuple(got) == (want if want is not None else (-1, -1, -1)), dressed
    for dressed in (0, 3, 7):
        np.testing.assert_allclose(
            float(m.energy_by_dressed_index(dressed)), hs.energy_by_dressed_index(dressed),
            atol=1e-10,
        )  # fmt: skip
        np.testing.assert_allclose(
            float(m.energy_by_dressed_index(dressed, subtract_ground=True)),
            hs.energy_by_dressed_index(dressed, subtract_ground=True), atol=1e-10,
        )  # fmt: skip
    batch = m.bare_index(1, {"t1": {"EJ": jnp.array([19.0, 21.0])}})
    assert batch.shape == (2, 3) and batch.dtype == jnp.int32


def test_a_dressed_index_out_of_range_raises():
    hs, _ = _system(False)
    m = jbq.model(hs)
    with pytest.raises(ValueError) as e:
        m.bare_index(12)
    assert str(e.value) == _hs_errors.HS_DRESSED.format(method="bare_index", got=12, k=12)
    with pytest.raises(ValueError) as e:
        m.energy_by_dressed_index(5, evals_count=3)
    want = _hs_errors.HS_DRESSED.format(method="energy_by_dressed_index", got=5, k=3)
    assert str(e.value) == want
