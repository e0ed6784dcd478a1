"""`wavefunction` and `potential` of every qubit class against scqubits' own (float64).

scqubits fixes the global phase of ZeroPi and FluxQubit wavefunctions (`standardize_phases`),
so those are compared as they are; the others carry the eigenvector's arbitrary phase in
scqubits too, so they are compared after removing one global phase (and `|psi|` exactly).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scqubits_cases import KINDS, THREE_VARIABLES, at, central_difference, make

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits import _errors

scq = pytest.importorskip("scqubits")

STANDARDIZED = ("ZeroPi", "FluxQubit")
# Small grids keep scqubits' own loops (Cos2PhiQubit's is one per basis state) fast.
GRIDS = {
    "Transmon": {"phi_grid": scq.Grid1d(-np.pi, np.pi, 41)},
    "TunableTransmon": {"phi_grid": scq.Grid1d(-np.pi, np.pi, 41)},
    "Fluxonium": {"phi_grid": scq.Grid1d(-4 * np.pi, 4 * np.pi, 61)},
    "FluxQubit": {"phi_grid": scq.Grid1d(-np.pi / 2, 3 * np.pi / 2, 21)},
    "ZeroPi": {"theta_grid": scq.Grid1d(-np.pi / 2, 3 * np.pi / 2, 25)},
    "Cos2PhiQubit": {
        "phi_grid": scq.Grid1d(-2 * np.pi, 2 * np.pi, 9),
        "zeta_grid": scq.Grid1d(-3 * np.pi, 3 * np.pi, 7),
        "theta_grid": scq.Grid1d(-np.pi / 2, 3 * np.pi / 2, 8),
    },
}
COORDINATES = {"Transmon": 1, "TunableTransmon": 1, "Fluxonium": 1, "FluxQubit": 2, "ZeroPi": 2,
               "Cos2PhiQubit": 3}  # fmt: skip


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


def _same_up_to_phase(got, want, atol):
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=0, atol=atol)
    overlap = np.vdot(got, want)
    np.testing.assert_allclose(got * overlap / abs(overlap), want, rtol=0, atol=atol)


def _values(kind, seed=0):
    obj, box = make(kind)
    rng = np.random.default_rng(sum(map(ord, kind)) + seed)
    return obj, {name: rng.uniform(*bounds) for name, bounds in box.items()}


@pytest.mark.parametrize("kind", KINDS)
def test_wavefunctions_equal_scqubits_at_a_random_point(kind):
    obj, values = _values(kind)
    m, ref = jbq.model(obj), at(obj, values)
    scale, esys = 1e-10, ref.eigensys(3)  # one scqubits diagonalisation for the three levels
    for which in (0, 1, 2):
        got = m.wavefunction(values, which=which, **GRIDS[kind])
        want = ref.wavefunction(esys, which=which, **GRIDS[kind])
        atol = scale * np.abs(want.amplitudes).max()
        if kind in STANDARDIZED:
            np.testing.assert_allclose(got.amplitudes, want.amplitudes, rtol=0, atol=atol)
        else:
            _same_up_to_phase(got.amplitudes, want.amplitudes, atol)
        np.testing.assert_allclose(got.energy, esys[0][which], rtol=1e-10)
        labels = got.basis_labels if isinstance(got.basis_labels, tuple) else (got.basis_labels,)
        if hasattr(want, "basis_labels"):  # a 1-D WaveFunction
            np.testing.assert_allclose(labels[0], want.basis_labels, rtol=0, atol=1e-14)
        else:  # scqubits' gridspec: (min, max, count) per axis
            spec = np.asarray(want.gridspec.min_vals), np.asarray(want.gridspec.max_vals)
            np.testing.assert_allclose([x[0] for x in labels], spec[0], atol=1e-14)
            np.testing.assert_allclose([x[-1] for x in labels], spec[1], atol=1e-14)
            assert [x.size for x in labels] == list(want.gridspec.pt_counts)


@pytest.mark.parametrize("kind", ["Transmon", "Fluxonium"])
def test_default_grids_are_scqubits(kind):
    obj, _ = make(kind)
    got, want = jbq.model(obj).wavefunction(which=1), obj.wavefunction(which=1)
    assert got.amplitudes.shape == want.amplitudes.shape
    atol = 1e-10 * np.abs(want.amplitudes).max()
    if kind in STANDARDIZED:
        np.testing.assert_allclose(got.amplitudes, want.amplitudes, rtol=0, atol=atol)
    else:
        _same_up_to_phase(got.amplitudes, want.amplitudes, atol)


@pytest.mark.parametrize("kind", KINDS)
def test_potentials_equal_scqubits(kind):
    obj, values = _values(kind, seed=1)
    m, ref = jbq.model(obj), at(obj, values)
    rng = np.random.default_rng(3)
    xs = [rng.uniform(-4, 4, size=(3, 4)) for _ in range(COORDINATES[kind])]
    got = m.potential(*xs, params=values)
    np.testing.assert_allclose(got, ref.potential(*xs), rtol=1e-12, atol=1e-12)
    flux = {"Transmon": "EJ", "TunableTransmon": "flux"}.get(kind, "flux")
    batch = {flux: jnp.array([0.1, 0.2])}
    np.testing.assert_allclose(
        m.potential(*xs, params=batch)[1], at(obj, {flux: 0.2}).potential(*xs), rtol=1e-12
    )


def _fluxonium():
    return scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.33, cutoff=20)


def test_batches_jit_and_a_traced_grid():
    obj = _fluxonium()
    m = jbq.model(obj)
    fluxes = jnp.array([0.3, 0.5])
    phi = jnp.linspace(-3.0, 3.0, 11)
    batch = m.wavefunction({"flux": fluxes}, which=1, phi_grid=phi)
    assert batch.amplitudes.shape == (2, 11) and batch.energy.shape == (2,)
    fn = jax.jit(lambda f, x: m.wavefunction({"flux": f}, which=1, phi_grid=x).amplitudes)
    mapped = jax.vmap(lambda f: m.wavefunction({"flux": f}, which=1, phi_grid=phi).amplitudes)
    np.testing.assert_allclose(np.abs(mapped(fluxes)), np.abs(batch.amplitudes), atol=1e-12)
    for i, f in enumerate([0.3, 0.5]):
        want = at(obj, {"flux": f}).wavefunction(which=1, phi_grid=scq.Grid1d(-3.0, 3.0, 11))
        _same_up_to_phase(batch.amplitudes[i], want.amplitudes, 1e-10)
        _same_up_to_phase(fn(f, phi), want.amplitudes, 1e-10)


def test_gradient_of_a_density_against_scqubits():
    """d|psi_1(phi0)|^2 / dEC (the density is gauge-invariant) against scqubits' differences."""
    obj = _fluxonium()
    m = jbq.model(obj)
    phi = jnp.array([0.7])

    def density(ec):
        return jnp.abs(m.wavefunction({"EC": ec}, which=1, phi_grid=phi).amplitudes[0]) ** 2

    def scqubits_density(ec):
        ref = at(obj, {"EC": ec}).wavefunction(which=1, phi_grid=scq.Grid1d(0.7, 0.7, 1))
        return abs(ref.amplitudes[0]) ** 2

    got = jax.grad(density)(2.5)
    want = central_difference(scqubits_density, 2.5, 1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_wrong_level_grid_and_coordinates_raise():
    obj, _ = make("Transmon")
    m = jbq.model(obj)
    with pytest.raises(ValueError) as info:
        m.wavefunction(which=3, evals_count=3)
    assert str(info.value) == _errors.WHICH.format(got=3, count=3, dim=21, kind="Transmon")
    with pytest.raises(ValueError) as info:
        m.wavefunction(which=21, evals_count=21)
    assert str(info.value) == _errors.WHICH.format(got=21, count=21, dim=21, kind="Transmon")
    with pytest.raises(ValueError) as info:
        m.wavefunction(theta_grid=np.zeros(3))
    want = _errors.GRID_KEYWORD.format(got=["theta_grid"], kind="Transmon", known=["phi_grid"])
    assert str(info.value) == want
    with pytest.raises(ValueError) as info:
        m.wavefunction(phi_grid=np.zeros((2, 2)))
    assert str(info.value) == _errors.GRID_SHAPE.format(name="phi_grid", got=(2, 2))
    with pytest.raises(ValueError) as info:
        m.potential(0.1, 0.2)
    want = _errors.POTENTIAL_ARGS.format(kind="Transmon", names=["phi"], got=2)
    assert str(info.value) == want


@pytest.mark.filterwarnings("ignore:.*deprecated - use:DeprecationWarning")  # scqubits' YAML
def test_circuit_refuses_wavefunction_and_potential():
    yaml = "branches:\n- [JJ, 1, 2, 4, 0.5]\n- [L, 1, 2, 1.3]\n- [C, 1, 2, 2]\n"
    circuit = scq.Circuit(yaml, from_file=False, ext_basis="discretized")
    circuit.cutoff_ext_1 = 20
    m = jbq.model(circuit)
    why = _errors.NO_WAVE_WHY["Circuit"]
    for method, call in (("wavefunction", lambda: m.wavefunction()),
                         ("potential", lambda: m.potential(0.0))):  # fmt: skip
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == _errors.NO_WAVE.format(method=method, kind="Circuit", why=why)


@pytest.mark.filterwarnings("ignore:.*deprecated - use:DeprecationWarning")  # scqubits' YAML
def test_circuit_wf_plot_data_equals_scqubits():
    """Two periodic variables and a discretized one: every choice of plotted variables."""
    circuit = scq.Circuit(THREE_VARIABLES, from_file=False, ext_basis="discretized")
    circuit.cutoff_n_1, circuit.cutoff_n_2, circuit.cutoff_ext_3 = 2, 2, 10
    m = jbq.model(circuit)
    grids = {1: scq.Grid1d(-np.pi, np.pi, 9), 2: scq.Grid1d(-np.pi, np.pi, 7)}
    points = {1: grids[1], 2: np.linspace(-np.pi, np.pi, 7)}  # a Grid1d or its points
    esys = circuit.eigensys(3)
    for indices in [(1,), (3,), (2, 1), (1, 2, 3)]:
        got = m.generate_wf_plot_data(which=2, var_indices=indices, grids_dict=points)
        want = circuit.generate_wf_plot_data(
            which=2, var_indices=indices, grids_dict=grids, eigensys=esys
        )
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())
    got = m.generate_wf_plot_data(which=1, mode="abs", var_indices=(1, 2, 3), grids_dict=grids)
    want = circuit.generate_wf_plot_data(
        which=1, mode="abs", var_indices=(1, 2, 3), grids_dict=grids, eigensys=esys
    )
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())
    batch = m.generate_wf_plot_data({"EJ": jnp.array([9.0, 10.0])}, which=1, var_indices=(3,))
    np.testing.assert_allclose(batch[1], m.generate_wf_plot_data(which=1, var_indices=(3,)))

    for call, want in (
        (lambda: m.generate_wf_plot_data(var_indices=(4,)),
         _errors.WF_VARIABLE.format(got=[4], known=[1, 2, 3])),
        (lambda: m.generate_wf_plot_data(var_indices=(1,)), _errors.WF_GRID.format(index=1)),
        (lambda: m.generate_wf_plot_data(mode="real", var_indices=(3,)),
         _errors.WF_MODE_SUMMED.format(mode="real")),
        (lambda: m.generate_wf_plot_data(mode="spam"), _errors.WF_MODE.format(got="spam")),
        (lambda: jbq.model(make("Transmon")[0]).generate_wf_plot_data(),
         _errors.NO_WF_PLOT.format(kind="Transmon")),
    ):  # fmt: skip
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == want


@pytest.mark.filterwarnings("ignore:.*deprecated - use:DeprecationWarning")  # scqubits' YAML
def test_circuit_potential_energy_equals_scqubits():
    yaml = "branches:\n- [JJ, 1, 2, EJ=10, 1.2]\n- [L, 1, 2, EL=1.3]\n- [C, 1, 2, 0.5]\n"
    circuit = scq.Circuit(yaml, from_file=False, ext_basis="discretized")
    m = jbq.model(circuit)
    x = np.linspace(-3.0, 3.0, 7)
    values = {"Φ1": 0.3, "EJ": 7.0, "EL": 1.1}
    ref = at(circuit, values)
    np.testing.assert_allclose(m.potential_energy(values, θ1=x), ref.potential_energy(θ1=x))
    batch = m.potential_energy({"Φ1": jnp.array([0.0, 0.3])}, θ1=x)
    np.testing.assert_allclose(batch[0], circuit.potential_energy(θ1=x), rtol=1e-12)
    got = jax.grad(lambda f: m.potential_energy({"Φ1": f}, θ1=0.4))(0.3)
    want = central_difference(lambda f: at(circuit, {"Φ1": f}).potential_energy(θ1=0.4), 0.3, 1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-8)

    three = scq.Circuit(THREE_VARIABLES, from_file=False, ext_basis="discretized")
    three.cutoff_n_1, three.cutoff_n_2, three.cutoff_ext_3 = 2, 2, 10
    a, b = np.linspace(0, 1, 3), np.linspace(0, 1, 4)
    got = jbq.model(three).potential_energy(θ1=a, θ2=0.3, θ3=b)  # meshgrid "xy": (4, 3)
    np.testing.assert_allclose(got, three.potential_energy(θ1=a, θ2=0.3, θ3=b), rtol=1e-12)

    with pytest.raises(ValueError) as info:
        m.potential_energy(θ2=1.0)
    want = _errors.POTENTIAL_ENERGY_ARGS.format(missing=["θ1"], extra=["θ2"], known=["θ1"])
    assert str(info.value) == want
    with pytest.raises(ValueError) as info:
        jbq.model(make("Fluxonium")[0]).potential_energy(θ1=0.0)
    assert str(info.value) == _errors.NO_POTENTIAL_ENERGY.format(kind="Fluxonium")
