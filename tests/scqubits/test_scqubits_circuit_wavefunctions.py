"""A Circuit's `generate_wf_plot_data` with harmonic-basis variables, and a hierarchical
Circuit's `generate_wf_plot_data` and `potential_energy`, against scqubits 4.3.1 (float64).

`"abs-sqr"` is gauge-invariant and compared as it is; the full complex wavefunction (scqubits'
`"real"` and `"imag"` of one eigensystem) is compared up to one global phase. Where scqubits'
own result is wrong or an error, the model refuses, and the tests pin both.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scqubits_cases import THREE_VARIABLES, at, central_difference
from test_scqubits_hilbertspace import _circuit, dfc, single_fluxonium, symbolic_nested
from test_scqubits_normal_modes import transmon_and_two_lc

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits import _errors

scq = pytest.importorskip("scqubits")

FLUXONIUM = "branches:\n- [JJ, 1, 2, EJ=4, 0.5]\n- [L, 1, 2, EL=1.3]\n- [C, 1, 2, 2]\n"
GRID = scq.Grid1d(-4.0, 4.0, 17)


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


def _complex(get, **kwargs):
    """The full wavefunction: `"real"` + i `"imag"` of one call's eigenstate."""
    return np.asarray(get(mode="real", **kwargs)) + 1j * np.asarray(get(mode="imag", **kwargs))


def _same_up_to_phase(got, want, rtol=1e-10):
    got, want = np.asarray(got).ravel(), np.asarray(want).ravel()
    atol = rtol * np.abs(want).max()
    overlap = np.vdot(got, want)
    np.testing.assert_allclose(got * overlap / abs(overlap), want, rtol=0, atol=atol)


def _fluxonium():
    circuit = _circuit(FLUXONIUM, from_file=False, ext_basis="harmonic")
    circuit.cutoff_ext_1 = 30
    return circuit


def test_a_harmonic_variable_equals_scqubits_at_other_params():
    """The oscillator length `(8 EC / EL)^(1/4)` follows `EL` (scqubits' `osc_lengths`)."""
    circuit = _fluxonium()
    m = jbq.model(circuit)
    values = {"EL": 0.9, "EJ": 5.0, "Φ1": 0.3}
    ref = at(circuit, values)
    esys = ref.eigensys(3)
    grids = {1: GRID}
    for which in (0, 1, 2):
        got = m.generate_wf_plot_data(values, which=which, grids_dict=grids, evals_count=3)
        want = ref.generate_wf_plot_data(which=which, grids_dict=grids, eigensys=esys)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * want.max())
    # the three levels: one compiled program (`which` is an argument of it, not static)
    programs = m.__dict__["_wf_plot_data"]
    assert [fn._cache_size() for fn in programs.values()] == [1]
    ours = lambda **kw: m.generate_wf_plot_data(values, which=2, evals_count=3, **kw)
    theirs = lambda **kw: ref.generate_wf_plot_data(which=2, eigensys=esys, **kw)
    _same_up_to_phase(_complex(ours, grids_dict=grids), _complex(theirs, grids_dict=grids))
    # points work as well as a Grid1d; a batch is the points one by one
    points = {1: GRID.make_linspace()}
    els = [0.9, 1.3]
    batch = m.generate_wf_plot_data({"EL": jnp.array(els)}, which=1, grids_dict=points)
    for el, got in zip(els, batch, strict=True):
        want = at(circuit, {"EL": el}).generate_wf_plot_data(which=1, grids_dict=grids)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * want.max())


def test_the_gradient_of_a_harmonic_density_against_scqubits():
    circuit = _fluxonium()
    m = jbq.model(circuit)
    point = {1: np.array([0.7])}

    def density(el):
        return m.generate_wf_plot_data({"EL": el}, which=1, grids_dict=point)[0]

    def scqubits_density(el):
        ref = at(circuit, {"EL": el})
        return ref.generate_wf_plot_data(which=1, grids_dict={1: scq.Grid1d(0.7, 0.7, 1)})[0]

    got = jax.jit(jax.grad(density))(1.1)
    np.testing.assert_allclose(got, central_difference(scqubits_density, 1.1, 1e-3), rtol=1e-6)


def test_periodic_and_harmonic_variables_equal_scqubits():
    circuit = _circuit(THREE_VARIABLES, from_file=False, ext_basis="harmonic")
    circuit.cutoff_n_1, circuit.cutoff_n_2, circuit.cutoff_ext_3 = 2, 2, 12
    m = jbq.model(circuit)
    grids = {1: scq.Grid1d(-np.pi, np.pi, 9), 2: scq.Grid1d(-np.pi, np.pi, 7), 3: GRID}
    esys = circuit.eigensys(3)
    for indices in [(3,), (1, 3)]:
        got = m.generate_wf_plot_data(which=2, var_indices=indices, grids_dict=grids)
        want = circuit.generate_wf_plot_data(
            which=2, var_indices=indices, grids_dict=grids, eigensys=esys
        )
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * want.max())
    kwargs = {"var_indices": (1, 2, 3), "grids_dict": grids}
    ours = lambda **kw: m.generate_wf_plot_data(which=1, **kw)
    theirs = lambda **kw: circuit.generate_wf_plot_data(which=1, eigensys=esys, **kw)
    _same_up_to_phase(_complex(ours, **kwargs), _complex(theirs, **kwargs))
    # without change_discrete_charge_to_phi the periodic variables stay charges, the
    # harmonic one still goes to its grid (as in scqubits)
    kwargs["change_discrete_charge_to_phi"] = False
    _same_up_to_phase(_complex(ours, **kwargs), _complex(theirs, **kwargs))
    with pytest.raises(ValueError) as info:
        m.generate_wf_plot_data(var_indices=(3,))
    assert str(info.value) == _errors.WF_GRID_HARMONIC.format(index=3)
    with pytest.raises(ValueError) as info:
        m.generate_wf_plot_data(var_indices=(3,), grids_dict={3: np.zeros((2, 2))})
    assert str(info.value) == _errors.WF_GRID_SHAPE.format(index=3)


GRIDS = {i: scq.Grid1d(-3.0, 3.0, 7) for i in (1, 2, 3, 4)}


@pytest.fixture(scope="module")
def coupler():
    """dfc: [[[1], [3]], [2], [4]], θ1 harmonic (a one-variable purely harmonic subsystem)."""
    circuit = dfc(cutoff=8)
    return circuit, jbq.model(circuit)


def _check_plot_data(circuit, m, choices):
    esys = circuit.eigensys(2)
    for indices in choices:
        got = m.generate_wf_plot_data(which=1, var_indices=indices, grids_dict=GRIDS)
        want = circuit.generate_wf_plot_data(
            which=1, var_indices=indices, grids_dict=GRIDS, eigensys=esys
        )
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * want.max())
    every = {"var_indices": tuple(circuit.dynamic_var_indices), "grids_dict": GRIDS}
    ours = lambda **kw: m.generate_wf_plot_data(which=0, **kw)
    theirs = lambda **kw: circuit.generate_wf_plot_data(which=0, eigensys=esys, **kw)
    _same_up_to_phase(_complex(ours, **every), _complex(theirs, **every))


def test_hierarchical_plot_data_equals_scqubits(coupler):
    circuit, m = coupler
    _check_plot_data(circuit, m, [(1, 4)])


@pytest.mark.slow
def test_a_nested_harmonic_hierarchy_equals_scqubits():
    """symbolic_nested: [[1], [[2], [3]]], a periodic and two nested harmonic variables."""
    circuit = symbolic_nested()
    m = jbq.model(circuit)
    _check_plot_data(circuit, m, [(1,), (2,), (1, 3), (2, 3)])
    a, b = np.linspace(0, 1, 3), np.linspace(0, 1, 4)
    got = m.potential_energy(θ1=a, θ2=0.3, θ3=b)  # arrays crossed by meshgrid "xy"
    np.testing.assert_allclose(got, circuit.potential_energy(θ1=a, θ2=0.3, θ3=b), rtol=1e-12)


def test_hierarchical_plot_data_under_vmap_of_grad_against_scqubits(coupler):
    circuit, m = coupler
    grids = {1: np.array([0.4])}

    def density(flux):
        got = m.generate_wf_plot_data({"Φ2": flux}, which=1, var_indices=(1,), grids_dict=grids)
        return got[0]

    reference = dfc(cutoff=8)  # its own object: scqubits' deepcopy of a hierarchy goes stale

    def scqubits_density(flux):
        reference.Φ2 = flux
        point = {1: scq.Grid1d(0.4, 0.4, 1)}
        return reference.generate_wf_plot_data(which=1, var_indices=(1,), grids_dict=point)[0]

    fluxes = jnp.array([-0.25, -0.2662])
    got = jax.vmap(jax.value_and_grad(density))(fluxes)
    want = circuit.generate_wf_plot_data(
        which=1, var_indices=(1,), grids_dict={1: scq.Grid1d(0.4, 0.4, 1)}
    )
    np.testing.assert_allclose(got[0][1], want[0], rtol=1e-10)
    np.testing.assert_allclose(got[1][1], central_difference(scqubits_density, -0.2662, 1e-3),
                               rtol=1e-6)  # fmt: skip


DFC = os.path.join(os.path.dirname(scq.__file__), "tests", "data", "circuit_DFC.yaml")


def _dfc(hierarchy, dims, cutoffs):
    circuit = _circuit(DFC, ext_basis="discretized", initiate_sym_calc=False,
                       basis_completion="canonical")  # fmt: skip
    closure = [circuit.branches[0], circuit.branches[4], circuit.branches[-1]]
    circuit.configure(closure_branches=closure, system_hierarchy=hierarchy,
                      subsystem_trunc_dims=dims)  # fmt: skip
    circuit.Φ1, circuit.Φ2, circuit.Φ3 = 0.5 + 0.01768, -0.2662, -0.5 + 0.01768
    for i, cutoff in zip((1, 2, 3, 4), cutoffs, strict=True):
        setattr(circuit, f"cutoff_ext_{i}", cutoff)
    return circuit


def test_hierarchies_scqubits_gets_wrong_are_refused():
    """Each case: scqubits' own result is an error or silently wrong; the model says why."""
    circuit = _dfc([[[3, 2], [1]], [4]], [[5, [5, 5]], 4], (6, 6, 7, 6))
    m = jbq.model(circuit)
    # an earlier subsystem counted by its variables ([3, 2], [1]: 3), not as expanded (2)
    with pytest.raises(IndexError):
        circuit.generate_wf_plot_data(var_indices=(1, 4), grids_dict=GRIDS)
    with pytest.raises(ValueError) as info:
        m.generate_wf_plot_data(var_indices=(1, 4), grids_dict=GRIDS)
    want = _errors.HD_WF_AXES.format(got=(1, 4), id_str="subsystem[4]", scqubits=3, axis=2)
    assert str(info.value) == want
    # [3, 2] reshaped by its cutoffs (2 first): wrong where their sizes differ
    assert circuit.generate_wf_plot_data(var_indices=(2,), grids_dict=GRIDS).shape == (7,)
    with pytest.raises(ValueError) as info:
        m.generate_wf_plot_data(var_indices=(2,), grids_dict=GRIDS)
    cutoffs = ["cutoff_ext_2", "cutoff_ext_3"]
    want = _errors.HD_WF_ORDER.format(id_str="subsystem[3, 2]", indices=[3, 2], cutoffs=cutoffs,
                                      scqubits=(6, 7), shape=(7, 6))  # fmt: skip
    assert str(info.value) == want


@pytest.mark.slow
def test_a_child_after_a_two_variable_sibling_is_refused():
    """Below the top, scqubits looks for a child at its index (1), after a two-variable
    sibling that expanded to two axes (so at 2)."""
    circuit = _dfc([[[2, 3], [1]], [4]], [[5, [5, 5]], 4], (6, 6, 6, 6))
    m = jbq.model(circuit)
    with pytest.raises(ValueError, match="could not be broadcast"):
        circuit.generate_wf_plot_data(var_indices=(2, 1), grids_dict=GRIDS)
    with pytest.raises(ValueError) as info:
        m.generate_wf_plot_data(var_indices=(2, 1), grids_dict=GRIDS)
    want = _errors.HD_WF_AXES.format(got=(2, 1), id_str="subsystem[1]", scqubits=1, axis=2)
    assert str(info.value) == want


def test_a_subsystem_in_normal_modes_is_refused():
    """scqubits plots the normal modes of [2, 3] as if they were θ2 and θ3: the density of
    θ2 differs from the same circuit's without the hierarchy."""
    circuit = transmon_and_two_lc()
    m = jbq.model(circuit)
    grids = {1: scq.Grid1d(-np.pi, np.pi, 5), 2: scq.Grid1d(-2.0, 2.0, 5)}
    with pytest.raises(ValueError) as info:
        m.generate_wf_plot_data(var_indices=(2,), grids_dict=grids)
    want = _errors.HD_WF_NORMAL_MODES.format(index=2, id_str="subsystem[2, 3]", indices=[2, 3])
    assert str(info.value) == want
    got = m.generate_wf_plot_data(var_indices=(1,), grids_dict=grids)  # summed: fine
    want = circuit.generate_wf_plot_data(var_indices=(1,), grids_dict=grids)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * want.max())


def test_hierarchical_potential_energy_equals_scqubits():
    circuit = single_fluxonium()  # fluxes Φ1 and Φ2 (dynamic flux grouping)
    m = jbq.model(circuit)
    x = np.linspace(-3.0, 3.0, 7)
    np.testing.assert_allclose(m.potential_energy(θ1=x), circuit.potential_energy(θ1=x),
                               rtol=1e-12)  # fmt: skip

    def scqubits_energy(flux, theta):
        circuit.Φ1 = flux  # scqubits' deepcopy of a hierarchy goes stale: set, then restore
        try:
            return circuit.potential_energy(θ1=theta)
        finally:
            circuit.Φ1 = 0.5

    np.testing.assert_allclose(m.potential_energy({"Φ1": 0.3}, θ1=x), scqubits_energy(0.3, x),
                               rtol=1e-12)  # fmt: skip
    got = jax.grad(lambda f: m.potential_energy({"Φ1": f}, θ1=0.4))(0.3)
    want = central_difference(lambda f: scqubits_energy(f, 0.4), 0.3, 1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-8)
    with pytest.raises(ValueError) as info:
        m.potential_energy(θ2=1.0)
    want = _errors.POTENTIAL_ENERGY_ARGS.format(missing=["θ1"], extra=["θ2"], known=["θ1"])
    assert str(info.value) == want


def test_hierarchical_bad_arguments_raise():
    m = jbq.model(single_fluxonium())
    for call, want in (
        (lambda: m.generate_wf_plot_data(var_indices=(2,)),
         _errors.WF_VARIABLE.format(got=[2], known=[1])),
        (lambda: m.generate_wf_plot_data(which=8, evals_count=8),
         _errors.WHICH.format(got=8, count=8, dim=8, kind="HierarchicalModel")),
        (lambda: m.generate_wf_plot_data(mode="spam"), _errors.WF_MODE.format(got="spam")),
    ):  # fmt: skip
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == want
