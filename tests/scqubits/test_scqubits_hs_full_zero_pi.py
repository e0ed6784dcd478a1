"""A `FullZeroPi` inside a `HilbertSpace` model against scqubits 4.3.1's `HilbertSpace`
evaluated directly (float64): with an oscillator and with a fluxonium (scqubits' own test
system, small cutoffs), coupled through the FullZeroPi's `n_theta_operator` and
`phi_operator`. Levels, labels, ParameterSweep's dispersive quantities, dressed matrix elements,
`qobj=` terms and `op_in_bare_eigenbasis` (the FullZeroPi's inner phases mapped), gradients
against scqubits' differences, and the refusals."""

from __future__ import annotations

import os
import warnings
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scqubits_cases import central_difference

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits.composite import _hs_errors
from jaxbridge.scqubits.composite._subsystems import FullZeroPiPart, part

scq = pytest.importorskip("scqubits")


@pytest.fixture(autouse=True)
def _x64(x64):
    scq.settings.PROGRESSBAR_DISABLED = True
    yield


def full_zero_pi(truncated_dim=3):
    return scq.FullZeroPi(
        grid=scq.Grid1d(-6.0, 6.0, 12), EJ=10.0, EL=0.04, ECJ=20.0, EC=0.04, dEJ=0.05,
        dCJ=0.05, dC=0.08, dEL=0.05, ng=0.1, flux=0.23, ncut=3, zeta_cutoff=4,
        zeropi_cutoff=4, truncated_dim=truncated_dim, id_str="zpi",
    )  # fmt: skip


def with_oscillator():
    zpi = full_zero_pi()
    osc = scq.Oscillator(E_osc=0.3, truncated_dim=3, id_str="osc")
    hs = scq.HilbertSpace([zpi, osc])
    hs.add_interaction(g=0.05, op1=zpi.n_theta_operator, op2=osc.creation_operator, add_hc=True)
    return hs


def with_fluxonium():
    # scqubits' tests/test_hilbertspace.py: a fluxonium and a FullZeroPi, `n` times `n_theta`.
    fl = scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.5, cutoff=20, truncated_dim=3, id_str="fl")
    zpi = full_zero_pi()
    hs = scq.HilbertSpace([fl, zpi])
    hs.add_interaction(g=0.1, op1=fl.n_operator, op2=zpi.n_theta_operator)
    hs.add_interaction(g=0.02, op1=fl.phi_operator, op2=zpi.phi_operator)
    return hs


@pytest.fixture(scope="module")
def fluxonium_system():
    hs = with_fluxonium()
    with jax.enable_x64(True):
        return hs, jbq.model(hs)


def _sub(hs, id_str: str) -> Any:
    return hs[id_str]


def _dense(x: Any) -> np.ndarray:
    return x.full() if hasattr(x, "full") else np.asarray(x)


def test_levels_labels_and_elements_equal_scqubits(fluxonium_system):
    hs, m = fluxonium_system
    zpi = _sub(hs, "zpi")
    assert m.params["zpi"] == jbq.model(zpi).params
    np.testing.assert_allclose(m.eigenvals(evals_count=9), hs.eigenvals(9), atol=1e-10)
    hs.generate_lookup()
    for bare in np.ndindex(*m.subsystem_dims):
        assert int(m.dressed_index(bare)) == hs.dressed_index(bare)
        got = m.energy_by_bare_index(bare, subtract_ground=True)
        want = hs.energy_by_bare_index(bare, subtract_ground=True)
        np.testing.assert_allclose(got, want, atol=1e-10)
    # Dressed matrix elements, up to the dressed states' phases (the moduli and the diagonal).
    for op in (zpi.phi_operator,):
        got = np.asarray(m.op_in_dressed_eigenbasis(op, truncated_dim=5))
        want = _dense(hs.op_in_dressed_eigenbasis(op, truncated_dim=5))
        np.testing.assert_allclose(np.abs(got), np.abs(want), atol=1e-9)
        np.testing.assert_allclose(np.real(np.diagonal(got)), np.real(np.diagonal(want)), atol=1e-9)


def test_dispersive_quantities_equal_parameter_sweep():
    hs = with_oscillator()
    zpi = _sub(hs, "zpi")
    m = jbq.model(hs)
    fluxes = np.array([0.2, 0.3])

    def update(flux):
        zpi.flux = flux

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sweep = scq.ParameterSweep(
            hs, {"flux": fluxes}, update_hilbertspace=update, evals_count=hs.dimension,
            subsys_update_info={"flux": [zpi]},
        )  # fmt: skip
    got = m.dispersive({"zpi": {"flux": jnp.asarray(fluxes)}})
    for s in range(2):
        np.testing.assert_allclose(got["lamb"][s], sweep["lamb"][s].toarray(), atol=1e-10)
    for name in ("kerr", "chi"):
        filled = {(a, b) for a in range(2) for b in range(2) if np.size(sweep[name][a, b])}
        assert set(got[name]) == filled, name
        for (a, b), value in got[name].items():
            np.testing.assert_allclose(value, sweep[name][a, b].toarray(), atol=1e-10)


def test_matrices_in_scqubits_bare_eigenbasis_equal_scqubits():
    # A `qobj=` term and `op_in_bare_eigenbasis` are matrices in scqubits' bare eigenbasis, whose
    # FullZeroPi part carries scqubits' inner phases: a wrong map to the model's would change
    # the levels and the elements.
    zpi = full_zero_pi()
    osc = scq.Oscillator(E_osc=0.3, truncated_dim=3, id_str="osc")
    hs = scq.HilbertSpace([zpi, osc])
    evecs = zpi.eigensys(evals_count=3)[1]
    n: Any = scq.identity_wrap(zpi.n_theta_operator(), zpi, hs.subsystem_list, evecs=evecs)
    phi: Any = scq.identity_wrap(zpi.phi_operator(), zpi, hs.subsystem_list, evecs=evecs)
    a = hs.annihilate(osc)
    hs.add_interaction(qobj=0.05 * (n + 0.3 * phi) * (a + a.dag()))
    m = jbq.model(hs)
    np.testing.assert_allclose(m.eigenvals(evals_count=9), hs.eigenvals(9), atol=1e-10)
    hs.generate_lookup()
    bare = zpi.n_theta_operator(energy_esys=True)
    got = np.asarray(m.op_in_dressed_eigenbasis((bare, zpi), None, 5, op_in_bare_eigenbasis=True))
    want = _dense(
        hs.op_in_dressed_eigenbasis((bare, zpi), truncated_dim=5, op_in_bare_eigenbasis=True)
    )
    np.testing.assert_allclose(np.abs(got), np.abs(want), atol=1e-9)
    by_name = np.asarray(m.op_in_dressed_eigenbasis(zpi.n_theta_operator, truncated_dim=5))
    np.testing.assert_allclose(got, by_name, atol=1e-9)


def test_gradients_equal_scqubits_differences(fluxonium_system):
    hs, m = fluxonium_system
    zpi = _sub(hs, "zpi")
    names = ("EJ", "flux", "dC", "dEL")
    x0 = np.array([getattr(zpi, name) for name in names])

    def ours(x):
        p = {"zpi": dict(zip(names, x))}
        e = lambda bare: m.energy_by_bare_index(bare, p)
        chi = e((1, 1)) - e((1, 0)) - e((0, 1)) + e((0, 0))
        n01 = m.op_in_dressed_eigenbasis(zpi.n_theta_operator, p, 3)[0, 1]
        return jnp.stack([chi, e((0, 1)) - e((0, 0)), jnp.abs(n01) ** 2])

    def theirs(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scqubits' "parameters have been changed"
            for name, value in zip(names, x):
                setattr(zpi, name, float(value))
            hs.generate_lookup()
            e = hs.energy_by_bare_index
            chi = e((1, 1)) - e((1, 0)) - e((0, 1)) + e((0, 0))
            n01 = _dense(hs.op_in_dressed_eigenbasis(zpi.n_theta_operator, truncated_dim=3))
        return np.array([chi, e((0, 1)) - e((0, 0)), abs(n01[0, 1]) ** 2])

    @jax.jit
    def value_and_jacobian(x):
        y, pullback = jax.vjp(ours, x)
        return y, jax.vmap(pullback)(jnp.eye(3))[0]

    value, got = (np.asarray(a) for a in value_and_jacobian(jnp.asarray(x0)))
    try:
        np.testing.assert_allclose(value, theirs(x0), rtol=1e-8, atol=1e-12)
        # scqubits' levels carry about 1e-14 of solver noise, which the differences divide by
        # the step: the atol (1e-11 at steps of 1e-2) is that noise; the derivatives in dC and
        # dEL of chi are about 1e-6 and 2e-7.
        steps = (1e-2, 1e-3, 1e-2, 1e-2)
        for j, step in enumerate(steps):

            def along(t, j=j):
                x = x0.copy()
                x[j] = t
                return theirs(x)

            want = central_difference(along, x0[j], step)
            np.testing.assert_allclose(got[:, j], want, rtol=1e-6, atol=1e-11)
    finally:
        theirs(x0)


def test_refusals_and_their_messages():
    hs = with_oscillator()
    zpi = _sub(hs, "zpi")
    m = jbq.model(hs)
    known = ["phi_operator", "n_theta_operator", "i_d_dphi_operator"]
    with pytest.raises(ValueError) as info:
        m.op_in_dressed_eigenbasis((zpi.n_theta_operator(), zpi))
    want = _hs_errors.HS_FULL_ZERO_PI_MATRIX.format(
        where="`op_in_dressed_eigenbasis`", id_str="zpi", known=known
    )
    assert str(info.value) == want
    with pytest.raises(ValueError) as info:
        m.op_in_dressed_eigenbasis(("zpi", "cos_theta_operator"))
    want = _hs_errors.HS_UNKNOWN_OPERATOR.format(
        where="`op_in_dressed_eigenbasis`", id_str="zpi", name="cos_theta_operator", known=known
    )
    assert str(info.value) == want
    big = full_zero_pi(truncated_dim=17)
    osc = scq.Oscillator(E_osc=0.3, truncated_dim=2, id_str="osc")
    with pytest.raises(ValueError) as info:
        jbq.model(scq.HilbertSpace([big, osc]))
    assert str(info.value) == _hs_errors.HS_TRUNCATED_DIM.format(id_str="zpi", got=17, dim=16)
    # scqubits' inner states at the object's values against the model's at another point:
    # they span other spaces, and the map says so instead of mixing them.
    part = FullZeroPiPart(zpi)
    far = {**{k: jnp.asarray(v) for k, v in part.defaults.items()}, "flux": jnp.asarray(0.0)}
    with pytest.raises(ValueError) as info:
        part.scqubits_eigenvectors(far)
    text = str(info.value)
    assert text.startswith(_hs_errors.HS_FULL_ZERO_PI_INNER.split("{off")[0].format(id_str="zpi"))


def test_an_unsupported_subsystem_is_named():
    with pytest.raises(TypeError) as info:
        part(SimpleNamespace(id_str="snail", truncated_dim=2))
    assert str(info.value) == _hs_errors.HS_SUBSYSTEM.format(id_str="snail", got="SimpleNamespace")


@pytest.mark.skipif(not os.environ.get("JAXBRIDGE_SLOW"), reason="JAXBRIDGE_SLOW=1 runs it")
def test_scqubits_own_test_system():
    # scqubits' tests/test_hilbertspace.py `hilbertspace_initialize`, at its own cutoffs (the
    # inner ZeroPi 1220 states, the FullZeroPi 400).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `create()` warns about scqubits' optional GUI
        fluxonium = scq.Fluxonium.create()
        zpifull = scq.FullZeroPi.create()
    fluxonium.truncated_dim = 3
    zpifull.truncated_dim = 2
    zpifull.grid.pt_count = 20
    hs = scq.HilbertSpace([fluxonium, zpifull])
    hs.add_interaction(g=0.1, op1=fluxonium.n_operator, op2=zpifull.n_theta_operator)
    m = jbq.model(hs)
    np.testing.assert_allclose(m.eigenvals(evals_count=6), hs.eigenvals(6), atol=1e-10)
    hs.generate_lookup()
    for bare in np.ndindex(*m.subsystem_dims):
        want = hs.energy_by_bare_index(bare)
        np.testing.assert_allclose(m.energy_by_bare_index(bare), want, atol=1e-10)
    zpi, x0 = zpifull.id_str, float(zpifull.flux)

    def gap(x):
        p = {zpi: {"flux": x}}
        return m.energy_by_bare_index((0, 1), p) - m.energy_by_bare_index((0, 0), p)

    def theirs(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            zpifull.flux = x
            hs.generate_lookup()
        return hs.energy_by_bare_index((0, 1)) - hs.energy_by_bare_index((0, 0))

    try:
        want = central_difference(theirs, x0, 1e-3)
    finally:
        theirs(x0)
    np.testing.assert_allclose(jax.grad(gap)(x0), want, rtol=1e-4, atol=1e-11)
