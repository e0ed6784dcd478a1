"""The installed scqubits' own `HilbertSpace` works, and qutip satisfies the extra's pin.

qutip 5.3.1 breaks scqubits 4.3.1's `HilbertSpace.eigenvals`, `generate_lookup` and
`ParameterSweep` ("Unsupported operator type: csc_array", scqubits #320), so
`jaxbridge[scqubits]` excludes it. These tests run scqubits itself in the installed
environment, against a NumPy diagonalisation of the same Hamiltonian built here from the
textbook formulas, and read the pin from `pyproject.toml`, so neither the environment nor the
pin can drift without a failure.
"""

import importlib.metadata
import pathlib
import tomllib

import numpy as np
import pytest
from packaging.requirements import Requirement

scq = pytest.importorskip("scqubits")

PYPROJECT = pathlib.Path(__file__).parents[2] / "pyproject.toml"

EJ, EC, NG, NCUT, TMON_DIM = 20.0, 0.3, 0.1, 15, 4
E_OSC, OSC_DIM, G = 5.0, 5, 0.05


def build(ej=EJ):
    """scqubits' transmon (4 levels) and oscillator (5), coupled by `g n (a + a†)`."""
    tmon = scq.Transmon(EJ=ej, EC=EC, ng=NG, ncut=NCUT, truncated_dim=TMON_DIM)
    osc = scq.Oscillator(E_osc=E_OSC, truncated_dim=OSC_DIM)
    hs = scq.HilbertSpace([tmon, osc])
    hs.add_interaction(g_strength=G, op1=tmon.n_operator, op2=osc.creation_operator, add_hc=True)
    return tmon, hs


def numpy_hamiltonian(ej=EJ):
    """The same Hamiltonian from scratch: the transmon in its charge basis, diagonalised and
    truncated; the oscillator in its Fock basis; the first factor of the product the slow one."""
    n = np.arange(-NCUT, NCUT + 1, dtype=float)
    h_charge = np.diag(4 * EC * (n - NG) ** 2) - ej / 2 * (
        np.eye(n.size, k=1) + np.eye(n.size, k=-1)
    )
    energies, vectors = np.linalg.eigh(h_charge)
    energies, vectors = energies[:TMON_DIM], vectors[:, :TMON_DIM]
    n_eig = vectors.T @ np.diag(n) @ vectors  # real eigenvectors: n is real symmetric here
    a = np.diag(np.sqrt(np.arange(1, OSC_DIM, dtype=float)), k=1)
    h = np.kron(np.diag(energies), np.eye(OSC_DIM))
    h += np.kron(np.eye(TMON_DIM), np.diag(E_OSC * np.arange(OSC_DIM, dtype=float)))
    h += G * np.kron(n_eig, a + a.T)
    return h


def numpy_labels(h):
    """Dressed energies, and for each bare product state the dressed state it overlaps most.

    Every bare state must overlap one dressed state by more than 0.8 (checked), so the label is
    unambiguous and any overlap rule, scqubits' included, has to give the same one.
    """
    evals, evecs = np.linalg.eigh(h)
    overlaps = np.abs(evecs) ** 2  # [bare, dressed]: the bare basis is the product basis
    assert overlaps.max(axis=1).min() > 0.8, "the test system's labels are ambiguous"
    return evals, overlaps.argmax(axis=1)


def test_hilbertspace_eigenvals_equal_numpy():
    _, hs = build()
    evals, _ = numpy_labels(numpy_hamiltonian())
    got = hs.eigenvals(evals_count=10)
    np.testing.assert_allclose(got, evals[:10], rtol=1e-10, atol=1e-10)
    # The full dressed spectrum too: the whole product space, not only its bottom.
    np.testing.assert_allclose(
        hs.eigenvals(evals_count=hs.dimension), evals, rtol=1e-10, atol=1e-10
    )


def test_hilbertspace_generate_lookup_labels_like_numpy():
    _, hs = build()
    evals, dressed = numpy_labels(numpy_hamiltonian())
    hs.generate_lookup()
    for i in range(TMON_DIM):
        for j in range(OSC_DIM):
            index = i * OSC_DIM + j
            assert hs.dressed_index((i, j)) == dressed[index], (i, j)
            np.testing.assert_allclose(
                hs.energy_by_bare_index((i, j)), evals[dressed[index]], rtol=1e-10, atol=1e-10
            )
    # A dispersive shift from the labelled energies: small and nonzero at this coupling.
    chi = (
        hs.energy_by_bare_index((1, 1))
        - hs.energy_by_bare_index((1, 0))
        - hs.energy_by_bare_index((0, 1))
        + hs.energy_by_bare_index((0, 0))
    )
    assert 1e-6 < abs(chi) < G


def test_parameter_sweep_equals_numpy():
    tmon, hs = build()
    ej_values = np.array([18.0, 22.0, 26.0])

    def update(ej):
        tmon.EJ = ej

    sweep = scq.ParameterSweep(
        hilbertspace=hs,
        paramvals_by_name={"EJ": ej_values},
        update_hilbertspace=update,
        evals_count=8,
        subsys_update_info={"EJ": [tmon]},
        num_cpus=1,
    )
    evals = np.asarray(sweep["evals"])
    e10 = np.asarray(sweep.energy_by_bare_index((1, 0)))
    e00 = np.asarray(sweep.energy_by_bare_index((0, 0)))
    assert evals.shape == (3, 8)
    for k, ej in enumerate(ej_values):
        want, dressed = numpy_labels(numpy_hamiltonian(ej))
        np.testing.assert_allclose(evals[k], want[:8], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(e10[k], want[dressed[1 * OSC_DIM + 0]], rtol=1e-10)
        np.testing.assert_allclose(e00[k], want[dressed[0]], rtol=1e-10)
    assert np.all(np.diff(e10 - e00) > 0)  # the qubit's frequency rises with EJ


def extra_requirement(name):
    """The requirement on `name` of the `scqubits` extra, as pyproject.toml states it."""
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    found = [Requirement(r) for r in extras["scqubits"] if Requirement(r).name == name]
    assert len(found) == 1, f"the scqubits extra should name {name} once; it has {found}"
    return found[0]


def test_installed_qutip_satisfies_the_pin():
    requirement = extra_requirement("qutip")
    installed = importlib.metadata.version("qutip")
    assert requirement.specifier.contains(installed), (
        f"qutip {installed} is installed but jaxbridge[scqubits] pins {requirement}; "
        "reinstall with `pip install 'jaxbridge[scqubits]'`"
    )
    # The release that breaks scqubits 4.3.1's HilbertSpace (scqubits #320) stays excluded.
    assert not requirement.specifier.contains("5.3.1")
    # The scqubits the tests above ran is one the extra allows.
    assert extra_requirement("scqubits").specifier.contains(importlib.metadata.version("scqubits"))
