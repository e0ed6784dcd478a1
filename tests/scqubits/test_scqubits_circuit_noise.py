"""A `Circuit`'s noise channels (scqubits' `generate_noise_methods`) against scqubits itself
(float64): every generated channel on three circuits, derivatives against central differences
of scqubits, a branch's `Q` aux parameter, and the errors."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits.noise._circuit_noise import BAD_AUX, NOT_GENERATED
from jaxbridge.scqubits.noise._noise import LEVEL_BEYOND, NO_CHANNEL, NOT_SUPPORTED

scq = pytest.importorskip("scqubits")
pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated - use:DeprecationWarning")

# A fluxonium (scqubits' own `test_noisy_circuit`, smaller cutoff) with Q aux parameters, a
# transmon in the charge basis (an offset charge) and a SQUID-shunted loop (a flux, two
# junctions, an offset charge).
FLUXONIUM = """branches:
- [JJ, 1, 2, EJ=6.8, 1]
- [L, 1, 2, EL=0.2, Q_ind=3e5]
- [C, 1, 2, 1.5, Q_cap=2e5*(abs(omega)/6.0)**0.3]
"""
TRANSMON = """branches:
- [JJ, 0, 1, EJ=15.0, 0.3]
- [C, 0, 1, 0.8]
"""
SQUID = """branches:
- [JJ, 0, 1, EJ1=10.0, 0.4]
- [JJ, 0, 1, EJ2=7.0, 0.5]
- [C, 0, 1, 0.6]
"""


@pytest.fixture(autouse=True)
def _x64(x64):
    scq.settings.T1_DEFAULT_WARNING = False
    yield


def _make(name):
    yaml, basis, values = {
        "fluxonium": (FLUXONIUM, "harmonic", {"Φ1": 0.37, "cutoff_ext_1": 60}),
        "transmon": (TRANSMON, "discretized", {"ng1": 0.2, "cutoff_n_1": 10}),
        "squid": (SQUID, "discretized", {"Φ1": 0.21, "ng1": 0.1, "cutoff_n_1": 8}),
    }[name]
    c = scq.Circuit(yaml, from_file=False, ext_basis=basis)
    for k, v in values.items():
        setattr(c, k, v)
    c.configure(generate_noise_methods=True)
    return c


def _scq(c, name, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scqubits' own 1/0 at sweet spots
        return getattr(c, name)(**options)


def _squid_cc(c, b, **options):
    """scqubits' generic `tphi_1_over_f` with junction b's own `-cos` (scqubits' generated
    `tphi_1_over_f_cc{b}` takes whichever of the two parallel junctions' terms comes first)."""
    import sympy

    theta, flux = sympy.Symbol("θ1"), 2 * sympy.pi * float(c.Φ1)
    op = c._evaluate_symbolic_expr(-sympy.cos(theta + (flux if b == 1 else 0)))
    op = op.full() if hasattr(op, "full") else op
    a = options.pop("A_noise", 1e-7)
    return c.tphi_1_over_f(a, options.pop("i", 0), options.pop("j", 1), op, **options)


def _reference(name, c, method):
    """scqubits' value of `method`; for the SQUID's junctions, with each one's own term."""
    if name != "squid" or "cc" not in method and method != "t2_effective":
        return _scq(c, method)
    rate = lambda b: _squid_cc(c, b, get_rate=True)
    if method == "t2_effective":
        others = [n for n in c.effective_noise_channels() if n != "tphi_1_over_f_cc"]
        return 1 / (_scq(c, method, noise_channels=others, get_rate=True) + rate(0) + rate(1))
    if method == "tphi_1_over_f_cc":
        return 1 / (rate(0) + rate(1))
    return 1 / rate(int(method[-1]))


def _set(c, values):
    for k, v in values.items():
        setattr(c, k, float(v))


@pytest.mark.parametrize("name", ["fluxonium", "transmon", "squid"])
def test_every_generated_channel_equals_scqubits(name):
    c = _make(name)
    m = jbq.model(c)
    assert m.supported_noise_channels() == c.supported_noise_channels()
    assert m.effective_noise_channels() == c.effective_noise_channels()
    rng = np.random.default_rng(7)
    shifted = {k: v * rng.uniform(0.9, 1.1) + 0.01 for k, v in m.params.items()}
    for values in ({}, shifted):
        _set(c, {**m.params, **values})
        for method in [*c.supported_noise_channels(), "t1_effective", "t2_effective"]:
            got = float(getattr(m, method)(params=values))
            want = _reference(name, c, method)
            np.testing.assert_allclose(got, want, rtol=1e-8, err_msg=f"{name}.{method} {values}")


def test_options_and_rates_equal_scqubits():
    circuits = {name: _make(name) for name in ("fluxonium", "transmon")}
    models = {name: jbq.model(c) for name, c in circuits.items()}
    cases = [
        ("fluxonium", "t1_capacitive", {"i": 2, "j": 0, "T": 0.03, "Q_cap": 3e5, "total": False}),
        ("fluxonium", "t1_capacitive2", {"Q_cap": lambda omega, T: 1e5 * (1 + 0 * omega)}),
        ("fluxonium", "t1_inductive", {"Q_ind": 1e6, "T": 0.02, "get_rate": True}),
        ("fluxonium", "t1_flux_bias_line1", {"M": 300, "Z": 60, "get_rate": True}),
        ("fluxonium", "tphi_1_over_f_flux", {"A_noise": 2e-6, "i": 0, "j": 2, "get_rate": True}),
        ("fluxonium", "t2_effective", {"common_noise_options": {"T": 0.02}}),
        ("transmon", "tphi_1_over_f_ng1", {"omega_low": 1e-8, "t_exp": 1e3}),
        ("transmon", "tphi_1_over_f_cc", {"A_noise": 2e-7, "i": 0, "j": 2}),
        ("transmon", "t1_effective",
         {"noise_channels": ["t1_capacitive0", ("t1_capacitive1", {"T": 0.05})]}),
    ]  # fmt: skip
    for name, method, options in cases:
        ref_options = dict(options)
        if callable(options.get("Q_cap")):
            ref_options["Q_cap"] = lambda omega, T: 1e5
        got = float(getattr(models[name], method)(**options))
        want = _scq(circuits[name], method, **ref_options)
        np.testing.assert_allclose(got, want, rtol=1e-8, err_msg=method)


def test_derivatives_equal_central_differences_of_scqubits():
    c = _make("fluxonium")
    m = jbq.model(c)
    p0 = dict(m.params)
    grad = jax.grad(lambda p: m.t2_effective(params=p))(p0)
    for name in ("Φ1", "EJ", "EL"):
        h = 1e-5 * max(1.0, abs(p0[name]))
        values = []
        for sign in (1, -1):
            _set(c, {**p0, name: p0[name] + sign * h})
            values.append(_scq(c, "t2_effective"))
        _set(c, p0)
        fd = (values[0] - values[1]) / (2 * h)
        np.testing.assert_allclose(float(grad[name]), fd, rtol=1e-5, err_msg=name)


def test_vmap_over_fluxes_and_gradients_of_options():
    c = _make("fluxonium")
    m = jbq.model(c)
    fluxes = jnp.linspace(0.1, 0.4, 3)
    got = jax.vmap(lambda f: m.t2_effective(params={"Φ1": f}))(fluxes)
    for f, g in zip(fluxes, got):
        c.Φ1 = float(f)
        np.testing.assert_allclose(float(g), _scq(c, "t2_effective"), rtol=1e-8)
    # a Q given as a (differentiable) number, and T; a rate through jacfwd and jacrev
    fn = lambda q, t: m.t1_capacitive(Q_cap=q, T=t, params={"Φ1": 0.3}, get_rate=True)
    check_grads(fn, (2e5, 0.02), order=1, modes=("fwd", "rev"), rtol=1e-6)
    flux_rate = lambda f: m.t1_flux_bias_line(params={"Φ1": f}, get_rate=True)
    check_grads(flux_rate, (0.3,), order=1, modes=("fwd", "rev"), rtol=1e-6)


def test_channels_before_noise_methods_raise_one_error():
    c = scq.Circuit(TRANSMON, from_file=False, ext_basis="discretized")
    c.cutoff_n_1 = 5
    m = jbq.model(c)
    calls = [
        m.supported_noise_channels,
        m.effective_noise_channels,
        m.t1_capacitive,
        m.tphi_1_over_f_ng,
        m.t1_effective,
        m.t2_effective,
        lambda: m.t1_capacitive0,
    ]
    for call in calls:
        with pytest.raises(RuntimeError) as e:
            call()
        assert str(e.value) == NOT_GENERATED
    assert NOT_GENERATED == (
        "This `Circuit` has no noise methods: scqubits generates them only on request. Call "
        "`circuit.configure(generate_noise_methods=True)` (scqubits), then "
        "`jaxbridge.scqubits.model(circuit)` again."
    )


def test_a_channel_the_circuit_lacks_raises():
    c = _make("transmon")
    m = jbq.model(c)
    supported = c.supported_noise_channels()
    with pytest.raises(AttributeError) as e:
        m.t1_capacitive7  # noqa: B018
    assert str(e.value) == NO_CHANNEL.format(
        kind="Circuit", name="t1_capacitive7", supported=supported
    )
    assert str(e.value).startswith("`Circuit` model has no noise channel 't1_capacitive7';")
    with pytest.raises(RuntimeError) as e:
        m.t1_inductive()  # no inductor: scqubits' NoisySystem method raises the same way
    assert str(e.value) == NOT_SUPPORTED.format(
        name="t1_inductive", kind="Circuit", supported=supported
    )


def test_a_level_beyond_the_truncation_raises():
    c = _make("transmon")
    m = jbq.model(c)
    with pytest.raises(ValueError) as e:
        m.t1_capacitive(i=21, j=0)
    assert str(e.value) == LEVEL_BEYOND.format(method="t1_capacitive", level=21, dim=21, last=20)
    assert str(e.value) == (
        "`t1_capacitive`: level index 21 is beyond this model's truncation: it has 21 levels "
        "(indices 0 to 20). Use a smaller `i`/`j`, or larger cutoffs on the scqubits object."
    )


def test_an_aux_parameter_scqubits_cannot_read_raises():
    bad = FLUXONIUM.replace("Q_cap=2e5*(abs(omega)/6.0)**0.3", 'Q_cap="2e5"')
    c = scq.Circuit(bad, from_file=False, ext_basis="harmonic")
    c.cutoff_ext_1 = 20
    c.configure(generate_noise_methods=True)
    with pytest.raises(TypeError):  # scqubits itself fails on the call
        _scq(c, "t1_capacitive2")
    m = jbq.model(c)
    with pytest.raises(ValueError) as e:
        m.t1_capacitive2()
    message = str(e.value)
    raw = c.branches[2].aux_params["Q_cap"]
    head = BAD_AUX.split("{why}")[0].format(
        method="t1_capacitive2", branch=2, type="C", key="Q_cap", raw=raw
    )
    assert message.startswith(head)
    assert "does not evaluate to a real number at omega=2 pi 5, T=0.015" in message


# -- custom channels: scqubits' generic `t1`, `tphi_1_over_f`, `transition_energy_derivative`


def _spectral(omega, T):
    return 1e-7 * jnp.abs(omega) * (1 + 1 / jnp.tanh(jnp.abs(omega) / (40 * T)))


def _spectral_np(omega, T):
    return 1e-7 * np.abs(omega) * (1 + 1 / np.tanh(np.abs(omega) / (40 * T)))


def test_custom_channels_equal_scqubits_on_a_qubit():
    obj = scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.33, cutoff=40)
    m = jbq.model(obj)
    n = obj.n_operator()
    for total in (True, False):
        got = m.t1(2, 0, "n_operator", _spectral, T=0.02, total=total)
        want = obj.t1(2, 0, n, _spectral_np, T=0.02, total=total)
        np.testing.assert_allclose(float(got), want, rtol=1e-8)
    d_flux = obj.d_hamiltonian_d_flux()
    got = m.tphi_1_over_f(1e-6, 0, 1, d_flux, omega_low=1e-8, get_rate=True)
    want = obj.tphi_1_over_f(1e-6, 0, 1, d_flux, omega_low=1e-8, get_rate=True)
    np.testing.assert_allclose(float(got), want, rtol=1e-8)
    # the transition energy's flux derivative against central differences of scqubits
    h, levels = 1e-6, []
    for f in (0.33 + h, 0.33 - h):
        obj.flux = f
        levels.append(obj.eigenvals(3))
    obj.flux = 0.33
    fd = ((levels[0][2] - levels[0][0]) - (levels[1][2] - levels[1][0])) / (2 * h)
    got = m.transition_energy_derivative(2, 0, hamiltonian_derivative="flux")
    assert got.shape == (1,)
    np.testing.assert_allclose(float(got[0]), fd, rtol=1e-6)
    # with scqubits' own esys and operator: scqubits' own function
    esys = obj.eigensys(3)
    want = obj.transition_energy_derivative(2, 0, esys, d_flux)
    got = m.transition_energy_derivative(2, 0, esys, d_flux)
    np.testing.assert_allclose(np.asarray(got), np.real(want), rtol=1e-8)


def test_custom_channels_on_a_circuit_and_their_gradients():
    import sympy

    c = _make("fluxonium")
    m = jbq.model(c)
    q = c.Q1_operator()
    q = q.full() if hasattr(q, "full") else q
    got = m.t1(1, 0, sympy.Symbol("Q1"), _spectral, T=0.015)
    np.testing.assert_allclose(float(got), c.t1(1, 0, q, _spectral_np), rtol=1e-8)
    theta = c.θ1_operator()
    theta = theta.full() if hasattr(theta, "full") else theta
    got = m.tphi_1_over_f(1e-6, 0, 1, "θ1_operator")
    np.testing.assert_allclose(float(got), c.tphi_1_over_f(1e-6, 0, 1, theta), rtol=1e-8)
    rate = lambda f, t: m.t1(1, 0, "Q1_operator", _spectral, T=t, params={"Φ1": f}, get_rate=True)
    check_grads(rate, (0.37, 0.02), order=1, modes=("fwd", "rev"), rtol=1e-6)
    fluxes = jnp.array([0.3, 0.4])
    batch = m.tphi_1_over_f(1e-6, 0, 1, "θ1_operator", params={"Φ1": fluxes})
    assert batch.shape == (2,)


def test_custom_channel_bad_levels_raise():
    obj = scq.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=3)
    m = jbq.model(obj)
    with pytest.raises(ValueError) as e:
        m.t1(7, 0, "n_operator", _spectral)
    assert str(e.value) == LEVEL_BEYOND.format(method="t1", level=7, dim=7, last=6)
    with pytest.raises(ValueError, match="must be different"):
        m.tphi_1_over_f(1e-4, 1, 1, "n_operator")
