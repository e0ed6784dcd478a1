"""`FullZeroPiModel`'s noise methods against scqubits' `FullZeroPi` evaluated directly."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scqubits

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits.noise import _full_zero_pi_noise as fzp

CHANNELS = ("tphi_1_over_f_cc", "tphi_1_over_f_flux", "t1_flux_bias_line", "t1_inductive")
RTOL = 1e-8


@pytest.fixture(autouse=True)
def _x64():
    jax.config.update("jax_enable_x64", True)
    old = scqubits.settings.T1_DEFAULT_WARNING
    scqubits.settings.T1_DEFAULT_WARNING = False
    yield
    scqubits.settings.T1_DEFAULT_WARNING = old
    jax.config.update("jax_enable_x64", False)


def _point(seed: int) -> dict[str, float]:
    r = np.random.default_rng(seed)
    return {
        "EJ": r.uniform(6.0, 12.0),
        "EL": r.uniform(0.03, 0.08),
        "ECJ": r.uniform(15.0, 25.0),
        "EC": r.uniform(0.03, 0.06),
        "dEJ": r.uniform(0.02, 0.1),
        "dCJ": r.uniform(0.02, 0.1),
        "dC": r.uniform(0.02, 0.1),
        "dEL": r.uniform(0.02, 0.1),
        "ng": r.uniform(0.0, 0.5),
        "flux": r.uniform(0.1, 0.4),
    }


def _obj(**params: float) -> scqubits.FullZeroPi:
    grid = scqubits.Grid1d(-6.0, 6.0, 18)
    return scqubits.FullZeroPi(grid=grid, ncut=3, zeta_cutoff=3, zeropi_cutoff=4, **params)


@pytest.mark.parametrize("seed", [1, 2])
def test_channels_equal_scqubits(seed: int) -> None:
    point = _point(seed)
    obj = _obj(**_point(0))
    ref = _obj(**point)
    m = jbq.model(obj)  # one model, evaluated at another point by `params`
    assert m.supported_noise_channels() == ref.supported_noise_channels() == list(CHANNELS)
    assert m.effective_noise_channels() == ref.effective_noise_channels()
    for name in CHANNELS:
        got = getattr(m, name)(params=point)
        np.testing.assert_allclose(got, getattr(ref, name)(), rtol=RTOL, err_msg=name)
    got = m.t1_flux_bias_line(i=2, j=0, get_rate=True, params=point)
    np.testing.assert_allclose(got, ref.t1_flux_bias_line(i=2, j=0, get_rate=True), rtol=RTOL)
    got = m.t1_inductive(T=0.03, total=False, params=point)
    np.testing.assert_allclose(got, ref.t1_inductive(T=0.03, total=False), rtol=RTOL)
    for name in ("t1_effective", "t2_effective"):
        got = getattr(m, name)(params=point)
        np.testing.assert_allclose(got, getattr(ref, name)(), rtol=RTOL, err_msg=name)


def test_generic_methods_equal_scqubits() -> None:
    point = _point(3)
    ref = _obj(**point)
    m = jbq.model(ref)
    got = m.tphi_1_over_f(1e-6, 0, 1, "d_hamiltonian_d_flux")
    want = ref.tphi_1_over_f(1e-6, 0, 1, ref.d_hamiltonian_d_flux())
    np.testing.assert_allclose(got, want, rtol=RTOL)
    got = m.t1(1, 0, "phi_operator", lambda w, T: 1e-6 * jnp.abs(w) * (1 + T))
    want = ref.t1(1, 0, ref.phi_operator(), lambda w, T: 1e-6 * np.abs(w) * (1 + T))
    np.testing.assert_allclose(got, want, rtol=RTOL)
    got = m.t1_flux_bias_line(noise_op_method=ref.d_hamiltonian_d_flux)  # scqubits' method
    np.testing.assert_allclose(got, ref.t1_flux_bias_line(), rtol=RTOL)
    esys = ref.eigensys(evals_count=3)
    for name in ("d_hamiltonian_d_EJ", "n_theta_operator"):
        got = m.transition_energy_derivative(0, 2, hamiltonian_derivative=name)
        want = ref.transition_energy_derivative(0, 2, esys, getattr(ref, name)())
        np.testing.assert_allclose(got, np.real(want), rtol=RTOL, atol=1e-12, err_msg=name)
    got = m.t1_effective(["t1_inductive", "t1_flux_bias_line"], {"T": 0.02})
    want = ref.t1_effective(["t1_inductive", "t1_flux_bias_line"], {"T": 0.02})
    np.testing.assert_allclose(got, want, rtol=RTOL)


def test_gradient_against_scqubits_central_differences() -> None:
    point = _point(4)
    m = jbq.model(_obj(**point))

    def t2(flux: jax.Array) -> jax.Array:
        return m.t2_effective(params={"flux": flux})

    got = float(jax.grad(t2)(point["flux"]))
    h = 1e-5
    up = _obj(**{**point, "flux": point["flux"] + h}).t2_effective()
    down = _obj(**{**point, "flux": point["flux"] - h}).t2_effective()
    np.testing.assert_allclose(got, (up - down) / (2 * h), rtol=1e-5)


def test_refusals() -> None:
    ref = _obj(**_point(5))
    m = jbq.model(ref)
    with pytest.raises(ValueError, match="`esys` is not accepted") as e:
        m.t1_inductive(esys=ref.eigensys(evals_count=2))
    assert str(e.value) == fzp.FZP_ESYS.format(method="t1_inductive")
    with pytest.raises(ValueError, match="`esys` is not accepted"):
        m.tphi_1_over_f(1e-6, 0, 1, "phi_operator", esys=ref.eigensys(evals_count=2))
    with pytest.raises(ValueError, match="a fixed matrix has no meaning|A fixed matrix"):
        m.t1(1, 0, ref.phi_operator(), lambda w, T: jnp.abs(w))
    with pytest.raises(ValueError, match="got 'cos_theta_operator'"):
        m.t1_inductive(noise_op="cos_theta_operator")
    with pytest.raises(ValueError, match="`dC` and `dEL` have none"):
        m.transition_energy_derivative(0, 1, hamiltonian_derivative="dC")
    with pytest.raises(RuntimeError, match="not supported"):
        m.t1_capacitive()
