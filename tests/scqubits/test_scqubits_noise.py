"""Coherence times against scqubits itself (float64): every channel of every class, options,
effective times, derivatives against differences of scqubits, and every transformation."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scqubits_cases import KINDS, at, make

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits._eigen import eigh_k

scq = pytest.importorskip("scqubits")


@pytest.fixture(autouse=True)
def _x64(x64):
    scq.settings.T1_DEFAULT_WARNING = False  # scqubits' own one-time notice about `total`
    yield


def _dense(m):
    return m.toarray() if hasattr(m, "toarray") else np.asarray(m)


def _cos2phi_d_ng(obj):
    """Cos2PhiQubit's `d_hamiltonian_d_ng` as scqubits writes it; scqubits' own raises
    NotImplementedError with scipy 1.17 (`n_theta_operator() - ng` on a sparse matrix)."""
    ecj = obj.ECJ / (1 - obj.dCJ**2)
    n_theta = _dense(obj.n_theta_operator())
    shifted = n_theta - obj.ng * np.eye(n_theta.shape[0]) - _dense(obj.n_zeta_operator())
    return 4 * obj.dCJ * ecj * _dense(obj.n_phi_operator()) - 4 * ecj * shifted


def _scq(obj, name, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scqubits' own RuntimeWarnings (1/0 at sweet spots)
        if type(obj).__name__ == "Cos2PhiQubit" and name == "tphi_1_over_f_ng":
            a = options.pop("A_noise", 1e-4)
            return obj.tphi_1_over_f(a, options.pop("i", 0), options.pop("j", 1),
                                     _cos2phi_d_ng(obj), **options)  # fmt: skip
        if type(obj).__name__ == "Cos2PhiQubit" and name == "t2_effective" and not options:
            others = [c for c in obj.effective_noise_channels() if c != "tphi_1_over_f_ng"]
            rate = obj.t2_effective(noise_channels=others, get_rate=True)
            return 1 / (rate + _scq(obj, "tphi_1_over_f_ng", get_rate=True))
        return getattr(obj, name)(**options)


def _methods(obj):
    return [*obj.supported_noise_channels(), "t1_effective", "t2_effective"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_channel_equals_scqubits(kind):
    obj, box = make(kind)
    m = jbq.model(obj)
    assert m.supported_noise_channels() == obj.supported_noise_channels()
    assert m.effective_noise_channels() == obj.effective_noise_channels()
    rng = np.random.default_rng(sum(map(ord, kind)) + 1)
    points = [{}, {name: rng.uniform(*bounds) for name, bounds in box.items()}]
    for values in points:
        ref = at(obj, values)
        for name in _methods(obj):
            got = float(getattr(m, name)(params=values))
            want = _scq(ref, name)
            np.testing.assert_allclose(got, want, rtol=1e-8, err_msg=f"{kind}.{name} {values}")


@pytest.mark.parametrize("kind", KINDS)
def test_unsupported_channels_raise_as_scqubits(kind):
    obj, _ = make(kind)
    m = jbq.model(obj)
    base = ["t1_capacitive", "t1_charge_impedance", "t1_flux_bias_line", "t1_inductive",
            "t1_quasiparticle_tunneling", "tphi_1_over_f_cc", "tphi_1_over_f_flux",
            "tphi_1_over_f_ng"]  # fmt: skip
    for name in base:
        if name in obj.supported_noise_channels():
            continue
        with pytest.raises(RuntimeError):
            getattr(obj, name)()
        with pytest.raises(RuntimeError, match=f"Noise channel '{name}' is not supported"):
            getattr(m, name)()
    assert hasattr(m, "t1_purcell") == hasattr(obj, "t1_purcell")
    assert hasattr(m, "tphi_1_over_f_cc1") == hasattr(obj, "tphi_1_over_f_cc1")


def test_fluxonium_options_equal_scqubits():
    obj, _ = make("Fluxonium")
    m = jbq.model(obj)
    cases = [
        ("t1_capacitive", {"i": 2, "j": 0, "Q_cap": 3e5, "T": 0.05, "total": False}),
        ("t1_capacitive", {"Q_cap": lambda omega, T: 1e6 * (1 + omega**2), "T": 0.03}),
        ("t1_capacitive", {"branch_params": 1.7, "get_rate": True}),
        ("t1_inductive", {"Q_ind": 5e8, "T": 0.02, "i": 0, "j": 2}),
        ("t1_inductive", {"T": 0.04, "total": False}),
        ("t1_charge_impedance", {"Z": 25.0, "T": 0.02}),
        ("t1_charge_impedance", {"Z": lambda omega: 50.0 + 10.0 * omega}),
        ("t1_flux_bias_line", {"M": 300.0, "Z": 60.0 + 5j, "T": 0.025}),
        ("t1_quasiparticle_tunneling", {"x_qp": 1e-7, "Delta": 2e-4, "T": 0.03}),
        ("t1_quasiparticle_tunneling", {"Y_qp": 1e-6, "total": False}),
        ("tphi_1_over_f_flux", {"A_noise": 3e-6, "i": 0, "j": 2, "omega_low": 1e-8}),
        ("tphi_1_over_f_cc", {"t_exp": 1e5, "get_rate": True}),
        ("t1_effective", {"common_noise_options": {"T": 0.05}}),
        (
            "t1_effective",
            {
                "noise_channels": ["t1_capacitive", ("t1_inductive", {"Q_ind": 1e8})],
                "common_noise_options": {"i": 2, "j": 0},
            },
        ),  # fmt: skip
        ("t1_effective", {"noise_channels": "t1_charge_impedance", "get_rate": True}),
        (
            "t2_effective",
            {
                "noise_channels": ["t1_capacitive", ("tphi_1_over_f_flux", {"A_noise": 3e-6})],
                "common_noise_options": {"T": 0.05},
            },
        ),  # fmt: skip
    ]
    for name, options in cases:
        got = float(getattr(m, name)(**options))
        np.testing.assert_allclose(got, _scq(obj, name, **options), rtol=1e-8, err_msg=name)
    # An operator by name or matrix replaces the channel's own (scqubits' `noise_op or
    # self.n_operator()` refuses a matrix: the truth value of an array is ambiguous).
    phi = obj.phi_operator()
    np.testing.assert_allclose(m.t1_capacitive(noise_op="n_operator"), m.t1_capacitive())
    by_name = float(m.t1_capacitive(noise_op="phi_operator"))
    np.testing.assert_allclose(by_name, m.t1_capacitive(noise_op=phi), rtol=1e-12)
    assert abs(by_name / float(m.t1_capacitive()) - 1) > 1e-3


def test_cos2phi_keeps_scqubits_temperature_handling():
    # scqubits' Cos2PhiQubit densities see T = 0.015 K whatever `T` is; only `Q_ind` sees T.
    obj, _ = make("Cos2PhiQubit")
    m = jbq.model(obj)
    for name in ("t1_capacitive", "t1_inductive", "t1_purcell"):
        for options in ({"T": 0.05}, {"T": 0.03, "total": False, "Q_cap": 2e5}):
            if name == "t1_inductive":
                options = {("Q_ind" if k == "Q_cap" else k): v for k, v in options.items()}
            got = float(getattr(m, name)(**options))
            np.testing.assert_allclose(got, _scq(obj, name, **options), rtol=1e-8)
    with pytest.raises(TypeError, match="unexpected keyword argument 'noise_op'"):
        m.t1_capacitive(noise_op="n_theta_operator")


def test_flux_qubit_junction_channels():
    obj, _ = make("FluxQubit")
    m = jbq.model(obj)
    for n in (1, 2, 3):
        name = f"tphi_1_over_f_cc{n}"
        np.testing.assert_allclose(getattr(m, name)(i=0, j=2), _scq(obj, name, i=0, j=2),
                                   rtol=1e-8)  # fmt: skip
    total = sum(float(getattr(m, f"tphi_1_over_f_cc{n}")(get_rate=True)) for n in (1, 2, 3))
    np.testing.assert_allclose(m.tphi_1_over_f_cc(get_rate=True), total, rtol=1e-12)


def test_argument_errors():
    obj, _ = make("Fluxonium")
    m = jbq.model(obj)
    with pytest.raises(ValueError, match="Only t1 channels"):
        m.t1_effective(noise_channels=["tphi_1_over_f_flux"])
    with pytest.raises(ValueError, match="must be different"):
        m.t1_capacitive(i=1, j=1)
    with pytest.raises(ValueError, match="noise_channels"):
        m.t2_effective(noise_channels=[3])
    with pytest.raises(TypeError, match="unexpected keyword argument 'A_noise'"):
        m.t1_effective(common_noise_options={"A_noise": 1e-6})
    with pytest.raises(AttributeError):
        _ = m.t1_purcell


def _central(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


def test_fluxonium_gradients_match_differences_of_scqubits():
    obj, _ = make("Fluxonium")
    m = jbq.model(obj)

    def theirs(name, param, **options):
        return lambda x: _scq(at(obj, {param: x}), name, **options)

    cases = [("t2_effective", "flux", 1e-5), ("t2_effective", "EJ", 1e-5),
             ("t1_capacitive", "EC", 1e-6), ("t1_effective", "EL", 1e-6)]  # fmt: skip
    for name, param, step in cases:
        x0 = float(getattr(obj, param))
        ours = jax.grad(lambda x, name=name, param=param: getattr(m, name)(params={param: x}))(x0)
        want = _central(theirs(name, param), x0, step)
        np.testing.assert_allclose(ours, want, rtol=1e-4, err_msg=f"d {name} / d {param}")


@pytest.mark.parametrize("kind", KINDS)
def test_transformations_over_every_parameter(kind):
    obj, _ = make(kind)
    m = jbq.model(obj)
    name = "t2_effective"
    p0 = {k: jnp.asarray(v) for k, v in m.params.items()}
    f = lambda p: getattr(m, name)(params=p, get_rate=True)
    rev = jax.jit(jax.grad(f))(p0)
    fwd = jax.jacfwd(f)(p0)
    assert set(rev) == set(m.params)
    for k in p0:
        np.testing.assert_allclose(rev[k], fwd[k], rtol=1e-8, atol=1e-12 * abs(float(f(p0))))
    # Each derivative against a central difference of our own rate (float64).
    rng = np.random.default_rng(3)
    direction = {k: jnp.asarray(rng.normal()) for k in p0}
    h = 1e-5
    shifted = lambda s: f({k: p0[k] + s * h * direction[k] * max(1.0, abs(p0[k])) for k in p0})
    directional = sum(rev[k] * direction[k] * max(1.0, abs(float(p0[k]))) for k in p0)
    np.testing.assert_allclose(directional, (shifted(1) - shifted(-1)) / (2 * h), rtol=1e-5)
    # vmap over one parameter equals a loop of scqubits-checked points.
    name0 = sorted(m.params)[0]
    xs = jnp.asarray(m.params[name0]) * jnp.asarray([0.97, 1.0, 1.03])
    batched = jax.vmap(lambda x: f({name0: x}))(xs)
    np.testing.assert_allclose(batched, [f({name0: x}) for x in xs], rtol=1e-10)
    np.testing.assert_allclose(m.t2_effective(params={name0: xs}, get_rate=True), batched,
                               rtol=1e-10)  # fmt: skip


def test_no_retrace_on_a_second_call():
    obj, _ = make("Transmon")
    m = jbq.model(obj)
    m.t1_effective(params={"EJ": 20.0})
    programs = len(m.__dict__["_noise_jit"])
    m.t1_effective(params={"EJ": 21.0})
    m.t1_effective(params={"EJ": 22.0}, common_noise_options={"T": 0.02})
    assert len(m.__dict__["_noise_jit"]) == programs


def test_esys_is_used_as_given():
    obj, _ = make("Transmon")
    m = jbq.model(obj)
    esys = m.eigensys(evals_count=3)
    np.testing.assert_allclose(m.t1_capacitive(esys=esys), _scq(obj, "t1_capacitive"), rtol=1e-8)
    shifted = (esys[0] * 2.0, esys[1])
    assert float(m.t1_capacitive(esys=shifted)) != float(m.t1_capacitive())


def test_eigh_k_derivatives_equal_jax_eigh():
    # A spectrum without degeneracies, where JAX's own `eigh` rule is exact: first and second
    # derivatives of gauge-invariant quantities agree.
    rng = np.random.default_rng(0)
    a = rng.normal(size=(30, 30))
    b = rng.normal(size=(30, 30)) + 1j * rng.normal(size=(30, 30))
    a, b = jnp.asarray(a + a.T + 0j), jnp.asarray(b + b.conj().T)
    o = jnp.asarray(rng.normal(size=(30, 30)) + 0j)

    def jax_eigh(h, k):
        w, v = jnp.linalg.eigh(h)
        return w[:k], v[:, :k]

    def f(solver, x):
        w, v = solver(a + x.astype(b.dtype) * b, 3)
        return (
            jnp.abs(v[:, 0].conj() @ o @ v[:, 2]) ** 2
            + w[1]
            + jnp.real(v[:, 1].conj() @ o @ v[:, 1])
        )

    for order in (jax.grad, jax.hessian):
        np.testing.assert_allclose(
            order(lambda x: f(eigh_k, x))(jnp.asarray(0.3)),
            order(lambda x: f(jax_eigh, x))(jnp.asarray(0.3)),
            rtol=1e-8,
        )


@pytest.mark.parametrize("kind", KINDS)
def test_host_spectrum_equals_the_jax_path(kind):
    # Without `esys` the levels and matrix elements come from one host call with its own
    # derivatives (`_eigen.NoiseSpectrum`); with it, from JAX's matrix elements of the given
    # eigenvectors (`eigensys`'s own rule): values, gradients and Jacobians agree.
    obj, _ = make(kind)
    m = jbq.model(obj)
    p0 = {k: jnp.asarray(v) for k, v in m.params.items()}
    host = lambda p: m.t2_effective(params=p, get_rate=True)
    given = lambda p: m.t2_effective(esys=m.eigensys(p, evals_count=3), params=p, get_rate=True)
    np.testing.assert_allclose(jax.jit(host)(p0), jax.jit(given)(p0), rtol=1e-10)
    g_host, g_given = jax.jit(jax.grad(host))(p0), jax.jit(jax.grad(given))(p0)
    scale = max(abs(float(g)) for g in g_given.values())
    for name in p0:
        np.testing.assert_allclose(g_host[name], g_given[name], rtol=1e-8, atol=1e-10 * scale)


def test_host_spectrum_second_derivatives():
    # The Jacobian's own derivative is central differences of the exact first derivatives:
    # the hessian of T2 against differences of the (exact) gradient.
    obj, _ = make("Fluxonium")
    m = jbq.model(obj)
    names = ("EJ", "flux")
    f = lambda x: m.t2_effective(params=dict(zip(names, x)), get_rate=True)
    x0 = jnp.asarray([float(obj.EJ), 0.41])
    hess = np.asarray(jax.jit(jax.hessian(f))(x0))
    grad = jax.jit(jax.grad(f))
    h = 1e-5
    numeric = np.stack(
        [(grad(x0.at[i].add(h)) - grad(x0.at[i].add(-h))) / (2 * h) for i in range(2)]
    )
    np.testing.assert_allclose(hess, numeric, rtol=1e-5, atol=1e-9 * np.abs(numeric).max())
    np.testing.assert_allclose(hess, hess.T, rtol=1e-5, atol=1e-9 * np.abs(numeric).max())


def test_host_spectrum_leaves_complex_coefficients_to_jax():
    from jaxbridge.scqubits._eigen import NoiseSpectrum
    from jaxbridge.scqubits._terms import Terms, fixed

    terms = Terms([fixed(np.diag([0.0, 1.0, 3.0]))], lambda p: [jax.lax.complex(p["a"], 0.0)])
    spectrum = NoiseSpectrum(terms, (terms,), 2)
    assert spectrum({"a": jnp.asarray(1.0)}) is None
    real = Terms([fixed(np.diag([0.0, 1.0, 3.0]))], lambda p: [p["a"]])
    w, diag, sq = NoiseSpectrum(real, (real,), 2)({"a": jnp.asarray(2.0)})
    np.testing.assert_allclose(w, [0.0, 2.0])
    # The operator is H itself (2 diag(0, 1, 3)): its diagonal is the levels, nothing else.
    np.testing.assert_allclose(diag, [[0.0, 2.0]])
    np.testing.assert_allclose(sq, [[[0.0, 0.0], [0.0, 4.0]]])
