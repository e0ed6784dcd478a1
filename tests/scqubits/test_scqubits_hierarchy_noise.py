"""A hierarchical Circuit's noise channels (scqubits' `generate_noise_methods`) against
scqubits itself (float64): every generated channel, the effective times at other parameters,
a derivative against central differences of scqubits, the custom channels, and the errors."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy
from test_scqubits_hilbertspace import dfc, single_fluxonium

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits.composite._hierarchy import HierarchicalModel
from jaxbridge.scqubits.noise._circuit_noise import NOT_GENERATED
from jaxbridge.scqubits.noise._hierarchy_noise import HD_NOISE_OPERATOR

scq = pytest.importorskip("scqubits")
pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated - use:DeprecationWarning")

# A transmon (node 1, an offset charge) coupled through a capacitor to a fluxonium (node 2,
# its loop's flux), each its own subsystem: [[1], [2]]; Q aux parameters on two branches.
COUPLED = """branches:
- [JJ, 0, 1, EJ1=12.0, 0.4]
- [C, 0, 1, 0.5]
- [C, 1, 2, 2.0]
- [JJ, 0, 2, EJ2=5.0, 1.2]
- [L, 0, 2, EL=0.6, Q_ind=3e5]
- [C, 0, 2, 1.0, Q_cap=2e5*(abs(omega)/6.0)**0.3]
"""


@pytest.fixture(autouse=True)
def _x64(x64):
    scq.settings.T1_DEFAULT_WARNING = False
    yield


def _make(generate=True):
    c = scq.Circuit(COUPLED, from_file=False, ext_basis="harmonic")
    # θ1, θ2 the node phases, the flux in the fluxonium's junction: no factor spans both
    c.configure(transformation_matrix=np.eye(2), closure_branches=[c.branches[3]])
    c.cutoff_n_1, c.cutoff_ext_2 = 4, 15
    c.configure(
        system_hierarchy=[[1], [2]], subsystem_trunc_dims=[3, 4], generate_noise_methods=generate
    )
    c.ng1, c.Φ1 = 0.15, 0.3
    return c


def _scq(c, name, *args, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(c, name)(*args, **options)


def _set(c, values):
    for k, v in values.items():
        setattr(c, k, float(v))


def test_every_generated_channel_equals_scqubits():
    c = _make()
    m = jbq.model(c)
    assert isinstance(m, HierarchicalModel)
    assert m.supported_noise_channels() == c.supported_noise_channels()
    assert m.effective_noise_channels() == c.effective_noise_channels()
    assert {"t1_capacitive5", "t1_inductive4", "tphi_1_over_f_cc3", "tphi_1_over_f_ng1"} <= set(
        c.supported_noise_channels()
    )
    methods = [*c.supported_noise_channels(), "t1_effective", "t2_effective"]
    # one program for all (each method inlined under jit): one compilation
    every = jax.jit(lambda: [getattr(m, method)() for method in methods])()
    for method, got in zip(methods, every):
        np.testing.assert_allclose(float(got), _scq(c, method), rtol=1e-8, err_msg=method)
    shifted = {"Φ1": 0.27, "ng1": 0.31, "EJ1": 11.0, "EJ2": 5.4}
    _set(c, shifted)
    cases = [
        ("t2_effective", {}),
        ("t1_effective", {"common_noise_options": {"i": 2, "j": 0, "T": 0.03}}),
        ("t1_capacitive2", {"i": 1, "j": 2, "Q_cap": 3e5, "total": False}),
        ("tphi_1_over_f_ng", {"A_noise": 2e-4, "i": 0, "j": 2, "get_rate": True}),
    ]
    every = jax.jit(lambda p: [getattr(m, n)(params=p, **o) for n, o in cases])(shifted)
    for (method, options), got in zip(cases, every):
        want = _scq(c, method, **options)
        np.testing.assert_allclose(float(got), want, rtol=1e-8, err_msg=method)


def _fluxonium():
    """A fluxonium as a hierarchy of one subsystem, discretized, two fluxes (scqubits' dynamic
    flux grouping)."""
    c = single_fluxonium()
    c.cutoff_ext_1 = 30
    c.configure(system_hierarchy=[[1]], subsystem_trunc_dims=[6], generate_noise_methods=True)
    c.Φ1 = 0.43
    return c


def _nested():
    """scqubits' double fluxonium coupler, [[[1], [3]], [2], [4]]: a hierarchy in a hierarchy
    (cutoff 12: at 10 the model's levels differ from scqubits' already, see NOTES-hnoise)."""
    c = dfc(cutoff=12)
    c.configure(generate_noise_methods=True)
    return c


LC = """branches:
- [JJ, 0, 1, 1, 15]
- [C, 1, 2, 2]
- [L, 2, 0, 0.4]
- [C, 2, 0, 0.2]
- [C, 2, 3, 0.5]
- [L, 3, 0, 0.5]
"""


def _normal_modes():
    """A transmon and two LC modes, `[[1], [2, 3]]`: the second solved in its normal modes."""
    c = scq.Circuit(LC, from_file=False, ext_basis="discretized")
    c.configure(transformation_matrix=np.array([[1, 0, 0], [0, 1, 0], [0, 1, 1]]))
    c.cutoff_n_1, c.cutoff_ext_2, c.cutoff_ext_3 = 6, 5, 5
    c.configure(
        system_hierarchy=[[1], [2, 3]], subsystem_trunc_dims=[5, 10], generate_noise_methods=True
    )
    c.ng1 = 0.2
    return c


@pytest.mark.parametrize(
    "make",
    [
        _fluxonium,
        pytest.param(_nested, marks=pytest.mark.slow),
        pytest.param(_normal_modes, marks=pytest.mark.slow),
    ],
    ids=["fluxonium", "dfc", "normal_modes"],
)
def test_every_channel_of_other_hierarchies_equals_scqubits(make):
    c = make()
    m = jbq.model(c)
    assert m.supported_noise_channels() == c.supported_noise_channels()
    methods = [*c.supported_noise_channels(), "t1_effective", "t2_effective"]
    every = jax.jit(lambda: [getattr(m, method)() for method in methods])()
    for method, got in zip(methods, every):
        np.testing.assert_allclose(float(got), _scq(c, method), rtol=1e-8, err_msg=method)
    if make is _fluxonium:  # a given esys: this model's own eigensystem
        got = m.t1_capacitive(esys=m.eigensys(evals_count=3))
        np.testing.assert_allclose(float(got), _scq(c, "t1_capacitive"), rtol=1e-8)


def test_derivatives_equal_central_differences_of_scqubits():
    c = _make()
    m = jbq.model(c)
    p0 = dict(m.params)
    grad = jax.grad(lambda p: m.t2_effective(params=p))(p0)
    for name in ("Φ1", "ng1", "EJ2"):
        h = 1e-5 * max(1.0, abs(p0[name]))
        values = []
        for sign in (1, -1):
            _set(c, {**p0, name: p0[name] + sign * h})
            values.append(_scq(c, "t2_effective"))
        _set(c, p0)
        fd = (values[0] - values[1]) / (2 * h)
        np.testing.assert_allclose(float(grad[name]), fd, rtol=1e-5, err_msg=name)
    fluxes = jnp.array([0.25, 0.35])
    batch = jax.vmap(lambda f: m.t1_inductive(params={"Φ1": f}))(fluxes)
    for f, got in zip(fluxes, batch):
        c.Φ1 = float(f)
        np.testing.assert_allclose(float(got), _scq(c, "t1_inductive"), rtol=1e-8)


def _spectral(omega, T):
    return 1e-7 * jnp.abs(omega) * (1 + 1 / jnp.tanh(jnp.abs(omega) / (40 * T)))


def _spectral_np(omega, T):
    return 1e-7 * np.abs(omega) * (1 + 1 / np.tanh(np.abs(omega) / (40 * T)))


def test_custom_channels_equal_scqubits():
    c = _make(generate=False)  # the custom channels need no generated methods
    m = jbq.model(c)
    q2, n1, theta2 = sympy.symbols("Q2 n1 θ2")
    expr = q2 + 0.5 * n1  # both subsystems
    op = c._evaluate_symbolic_expr(expr)
    op = op.full() if hasattr(op, "full") else op
    flux = sympy.sin(2 * sympy.pi * sympy.Symbol("Φ1") + theta2)

    def custom():  # one program for the three
        return [
            m.t1(2, 0, expr, _spectral, T=0.02, total=True),
            m.t1(2, 0, expr, _spectral, T=0.02, total=False),
            m.tphi_1_over_f(1e-6, 0, 1, flux, omega_low=1e-8),
            m.transition_energy_derivative(2, 0, hamiltonian_derivative="Φ1"),
        ]

    t1_total, t1_one, tphi, got = jax.jit(custom)()
    for total, value in ((True, t1_total), (False, t1_one)):
        want = _scq(c, "t1", 2, 0, op, _spectral_np, T=0.02, total=total)
        np.testing.assert_allclose(float(value), want, rtol=1e-8)
    ref = c._evaluate_symbolic_expr(sympy.sin(2 * sympy.pi * float(c.Φ1) + theta2))
    ref = ref.full() if hasattr(ref, "full") else ref
    want = _scq(c, "tphi_1_over_f", 1e-6, 0, 1, ref, omega_low=1e-8)
    np.testing.assert_allclose(float(tphi), want, rtol=1e-8)
    # central differences of scqubits' E_2 - E_0
    h, levels = 1e-6, []
    for f in (0.3 + h, 0.3 - h):
        c.Φ1 = f
        levels.append(c.eigenvals(3))
    c.Φ1 = 0.3
    fd = ((levels[0][2] - levels[0][0]) - (levels[1][2] - levels[1][0])) / (2 * h)
    # <2|dH/dΦ1|2> - <0|dH/dΦ1|0> in the truncated product basis, scqubits' definition; it
    # is not d(E_2 - E_0)/dΦ1 here, the subsystems' truncated bases depending on Φ1 too
    phi = sympy.Symbol("Φ1")
    H = c._hamiltonian_sym_for_numerics.subs(sympy.Symbol("I"), 1)
    d_flux = c._evaluate_symbolic_expr(sympy.expand(H.diff(phi)))
    d_flux = d_flux.full() if hasattr(d_flux, "full") else d_flux
    want = np.real(c.transition_energy_derivative(2, 0, c.eigensys(3), d_flux))
    assert got.shape == (1,)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-8)
    assert abs(float(got[0]) / fd - 1) > 1e-3  # (so the levels' own derivative is other)
    levels_fd = jax.jit(jax.grad(lambda f: jnp.diff(m.eigenvals({"Φ1": f}, 3)[::2])[0]))(0.3)
    np.testing.assert_allclose(float(levels_fd), fd, rtol=1e-5)
    rate = lambda f: m.t1(1, 0, "Q2_operator", _spectral, params={"Φ1": f})
    grad = jax.jit(jax.grad(rate))(0.3)
    rates = []
    for f in (0.3 + 1e-5, 0.3 - 1e-5):
        c.Φ1 = f
        q = c._evaluate_symbolic_expr(q2)
        rates.append(_scq(c, "t1", 1, 0, q.full() if hasattr(q, "full") else q, _spectral_np))
    np.testing.assert_allclose(float(grad), (rates[0] - rates[1]) / 2e-5, rtol=1e-5)


def test_channels_before_noise_methods_raise_one_error():
    m = jbq.model(_make(generate=False))
    calls = [
        m.supported_noise_channels,
        m.effective_noise_channels,
        m.t1_capacitive,
        m.tphi_1_over_f_flux,
        m.t1_effective,
        m.t2_effective,
        lambda: m.t1_capacitive0,
    ]
    for call in calls:
        with pytest.raises(RuntimeError) as e:
            call()
        assert str(e.value) == NOT_GENERATED


def test_a_fixed_matrix_as_noise_operator_raises():
    c = _make()
    m = jbq.model(c)
    with pytest.raises(TypeError) as e:
        m.t1(1, 0, np.eye(m.dim), _spectral)
    assert str(e.value) == HD_NOISE_OPERATOR.format(
        method="t1", variables=["Q2", "n1", "θ1", "θ2"], got="ndarray"
    )
    assert str(e.value).startswith(
        "`HierarchicalModel.t1`: the noise operator must be an operator name "
    )
    with pytest.raises(TypeError):
        m.t1_capacitive(noise_op=np.eye(m.dim))
