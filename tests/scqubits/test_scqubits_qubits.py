"""Every supported qubit against scqubits itself (float64): H, spectra, sweeps, derivatives."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scqubits_cases import KINDS, at, central_difference, dense, make

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits._dispatch import MODELS
from jaxbridge.scqubits.qubits import QUBITS

scq = pytest.importorskip("scqubits")


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


@pytest.mark.parametrize("kind", KINDS)
def test_hamiltonian_and_eigenvalues_at_random_points(kind):
    obj, box = make(kind)
    m = jbq.model(obj)
    assert set(box) <= set(m.params)
    assert m.params == {name: float(getattr(obj, name)) for name in m.params}
    assert m.dim == obj.hilbertdim()
    rng = np.random.default_rng(sum(map(ord, kind)))
    for _ in range(2):
        values = {name: rng.uniform(*bounds) for name, bounds in box.items()}
        ref = at(obj, values)
        h = np.asarray(m.hamiltonian(values))
        want = dense(ref.hamiltonian())
        np.testing.assert_allclose(h, want, rtol=0, atol=1e-12 * np.abs(want).max())
        np.testing.assert_allclose(m.eigenvals(values, evals_count=5), ref.eigenvals(5), rtol=1e-10)


@pytest.mark.parametrize("kind", KINDS)
def test_sparse_path_equals_scqubits(kind):
    obj, _ = make(kind)
    m = jbq.model(obj)
    np.testing.assert_allclose(
        m.eigenvals(evals_count=4, method="sparse"), obj.eigenvals(4), rtol=1e-10
    )


@pytest.mark.parametrize(
    ("kind", "name", "lo", "hi"),
    [
        ("Transmon", "ng", -0.5, 0.5),
        ("Fluxonium", "flux", 0.0, 1.0),
        ("TunableTransmon", "flux", 0.0, 0.5),
    ],
)
def test_vmap_sweep_equals_get_spectrum_vs_paramvals(kind, name, lo, hi):
    obj, _ = make(kind)
    m = jbq.model(obj)
    values = np.linspace(lo, hi, 7)
    table = obj.get_spectrum_vs_paramvals(name, values, evals_count=4, num_cpus=1).energy_table
    sweep = jax.jit(jax.vmap(lambda v: m.eigenvals({name: v}, evals_count=4)))(jnp.asarray(values))
    np.testing.assert_allclose(sweep, table, rtol=1e-10)
    # Leading batch dimensions of params give the same numbers without vmap.
    np.testing.assert_allclose(
        m.eigenvals({name: values.reshape(7, 1)}, evals_count=4)[:, 0], table, rtol=1e-10
    )


def _f01(m, name):
    return lambda v: jnp.diff(m.eigenvals({name: v}, evals_count=2))[0]


def _scq_f01(obj, name):
    return lambda v: float(np.diff(at(obj, {name: v}).eigenvals(2))[0])


@pytest.mark.parametrize(
    ("kind", "name", "step", "rtol"),
    [
        ("Transmon", "EJ", 1e-2, 1e-7),
        ("Transmon", "ng", 1e-3, 1e-7),
        ("TunableTransmon", "flux", 1e-3, 1e-7),
        ("Fluxonium", "EC", 1e-3, 1e-7),
        ("Fluxonium", "EL", 1e-3, 1e-7),
        ("Fluxonium", "flux", 1e-3, 1e-7),
        ("FluxQubit", "ECJ3", 1e-5, 1e-7),
        ("ZeroPi", "flux", 1e-3, 1e-7),
        ("Cos2PhiQubit", "EL", 1e-3, 1e-7),
    ],
)
def test_grad_of_f01_against_differences_of_scqubits(kind, name, step, rtol):
    obj, _ = make(kind)
    m = jbq.model(obj)
    x = float(getattr(obj, name))
    want = central_difference(_scq_f01(obj, name), x, step)
    got = jax.jit(jax.grad(_f01(m, name)))(x)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-9)
    if m.dim > 100:  # also the sparse path: Hellmann-Feynman through the host solver
        f = lambda v: jnp.diff(m.eigenvals({name: v}, evals_count=2, method="sparse"))[0]
        np.testing.assert_allclose(jax.grad(f)(x), want, rtol=rtol, atol=1e-9)


def test_linear_parameter_gradient_is_hellmann_feynman_exact():
    # EJ enters linearly: dE_i/dEJ = <i|-cos(phi)|i>, to 1e-10 against scqubits' operator.
    obj, _ = make("Transmon")
    m = jbq.model(obj)
    jac = jax.jacfwd(lambda ej: m.eigenvals({"EJ": ej}, evals_count=3))(20.0)
    _, vecs = obj.eigensys(3)
    want = np.einsum("ji,jk,ki->i", vecs, -dense(obj.cos_phi_operator()), vecs)
    np.testing.assert_allclose(jac, want, rtol=1e-10)
    jac_rev = jax.jacrev(lambda ej: m.eigenvals({"EJ": ej}, evals_count=3))(20.0)
    np.testing.assert_allclose(jac_rev, want, rtol=1e-10)


@pytest.mark.parametrize(
    ("kind", "op", "name"),
    [
        ("Transmon", "n_operator", "EC"),
        ("Fluxonium", "n_operator", "EC"),
        ("Fluxonium", "phi_operator", "flux"),
    ],
)
def test_grad_of_matrix_element_against_differences(kind, op, name):
    obj, _ = make(kind)
    m = jbq.model(obj)

    def ours(v):
        return jnp.abs(m.matrixelements(op, {name: v}, evals_count=3)[0, 1]) ** 2

    def theirs(v):
        return float(np.abs(at(obj, {name: v}).matrixelement_table(op, evals_count=3)[0, 1]) ** 2)

    x = float(getattr(obj, name))
    np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-10)
    want = central_difference(theirs, x, 1e-3)
    np.testing.assert_allclose(jax.jit(jax.grad(ours))(x), want, rtol=1e-7)


def test_no_nan_at_charge_degeneracy():
    # ng = 0.5 and small EJ/EC: the top of the charge basis is exactly degenerate.
    obj = scq.Transmon(EJ=1.0, EC=1.0, ng=0.5, ncut=15)
    m = jbq.model(obj)
    assert np.min(np.diff(np.linalg.eigvalsh(dense(obj.hamiltonian())))) == 0.0
    f01 = lambda p: jnp.diff(m.eigenvals(p, evals_count=2))[0]
    n01 = lambda p: jnp.abs(m.matrixelements("n_operator", p, evals_count=2)[0, 1]) ** 2
    p = {"EJ": 1.0, "EC": 1.0, "ng": 0.5}
    for f in (f01, n01):
        for g in (jax.jit(jax.grad(f))(p), jax.jit(jax.jacfwd(f))(p), jax.jit(jax.hessian(f))(p)):
            assert all(np.all(np.isfinite(v)) for v in jax.tree.leaves(g)), g
    # JAX's own eigh gives NaN here: the reason for the restricted rule.
    plain = lambda p: (
        jnp.abs(
            jnp.linalg.eigh(m.hamiltonian(p))[1][:, 1]
            @ np.diag(np.arange(-15.0, 16.0))
            @ jnp.linalg.eigh(m.hamiltonian(p))[1][:, 0]
        )
        ** 2
    )
    assert np.isnan(jax.jit(jax.grad(plain))(p)["EJ"])
    want = central_difference(
        lambda v: float(
            np.abs(at(obj, {"EJ": v}).matrixelement_table("n_operator", evals_count=2)[0, 1]) ** 2
        ),
        1.0,
        1e-3,
    )
    np.testing.assert_allclose(jax.jit(jax.grad(n01))(p)["EJ"], want, rtol=1e-7)


def test_hessian_against_differences_of_jax_gradient():
    obj, _ = make("Fluxonium")
    m = jbq.model(obj)
    f = lambda x: jnp.diff(m.eigenvals({"EJ": x[0], "EC": x[1], "EL": x[2]}, evals_count=2))[0]
    x = jnp.array([8.9, 2.5, 0.5])
    hess = jax.jit(jax.hessian(f))(x)
    g = jax.jit(jax.grad(f))
    numeric = np.stack(
        [
            central_difference(lambda t, i=i: np.asarray(g(x.at[i].set(t))), float(x[i]), 1e-3)
            for i in range(3)
        ]
    )
    np.testing.assert_allclose(hess, numeric, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(hess, hess.T, rtol=1e-10)


def test_eigensys_and_d_hamiltonian_and_sign_notes():
    obj, _ = make("Fluxonium")
    m = jbq.model(obj)
    w, v = m.eigensys(evals_count=3)
    ref_w, ref_v = obj.eigensys(3)
    np.testing.assert_allclose(w, ref_w, rtol=1e-10)
    np.testing.assert_allclose(np.abs(np.sum(np.conj(v) * ref_v, axis=0)), 1.0, rtol=1e-9)
    # d_hamiltonian is the derivative of hamiltonian: against differences of scqubits' H.
    dh = m.d_hamiltonian("flux")
    numeric = central_difference(lambda f: dense(at(obj, {"flux": f}).hamiltonian()), 0.33, 1e-4)
    np.testing.assert_allclose(dh, numeric, atol=1e-8)
    # scqubits' own d_hamiltonian_d_flux has the opposite sign for Fluxonium.
    np.testing.assert_allclose(dh, -dense(obj.d_hamiltonian_d_flux()), atol=1e-10)
    t, _ = make("Transmon")
    tm = jbq.model(t)
    extra = tm.d_hamiltonian("ng") - dense(t.d_hamiltonian_d_ng())
    np.testing.assert_allclose(extra, 8 * t.EC * t.ng * np.eye(t.hilbertdim()), atol=1e-12)


def test_errors():
    obj, _ = make("Transmon")
    m = jbq.model(obj)
    with pytest.raises(
        TypeError, match=r"no model for an object of type `str`. Supported: `Transmon`"
    ):
        jbq.model("transmon")
    with pytest.raises(ValueError, match=r"`eigenvals`: unknown parameter \['ncut'\]"):
        m.eigenvals({"ncut": 3})
    with pytest.raises(ValueError, match='must be "auto", "dense" or "sparse"'):
        m.eigenvals(method="lapack")
    with pytest.raises(ValueError, match=r"evals_count=...\)` must be an integer between 1 and 21"):
        m.eigenvals(evals_count=22)
    with pytest.raises(ValueError, match="has no operator `spam_operator`"):
        m.matrixelements("spam_operator")
    with pytest.raises(ValueError, match=r"must be a matrix of shape \(21, 21\)"):
        m.matrixelements(np.eye(3))
    f = lambda ej: m.eigensys({"EJ": ej}, evals_count=2, method="sparse")[1][0, 0]
    with pytest.raises(ValueError, match="has derivatives only for eigenvalues"):
        jax.grad(f)(20.0)


def test_no_retrace():
    obj, _ = make("Transmon")
    m = jbq.model(obj)
    traces = []

    @jax.jit
    def f(ej):
        traces.append(1)
        return m.eigenvals({"EJ": ej}, evals_count=2)

    f(20.0)
    f(21.0)
    assert len(traces) == 1


def test_sparse_hellmann_feynman_is_exact_for_a_linear_parameter():
    # EL enters ZeroPi linearly: dE_i/dEL = <i|phi^2|i>, on the host sparse path too.
    obj, _ = make("ZeroPi")
    m = jbq.model(obj)
    jac = jax.jacrev(lambda el: m.eigenvals({"EL": el}, evals_count=3, method="sparse"))(0.04)
    _, vecs = obj.eigensys(3)
    phi = dense(obj.phi_operator())
    want = np.real(np.einsum("ji,jk,ki->i", vecs.conj(), phi @ phi, vecs))
    np.testing.assert_allclose(jac, want, rtol=1e-10)


def test_auto_method_switches_to_sparse_above_dense_max_dim(monkeypatch):
    from jaxbridge.scqubits import _model

    obj, _ = make("FluxQubit")
    m = jbq.model(obj)
    f = lambda ej: m.eigensys({"EJ1": ej}, evals_count=2)[1][0, 0].real
    jax.grad(f)(1.0)  # dense: eigenvector derivatives work
    monkeypatch.setattr(_model, "DENSE_MAX_DIM", m.dim - 1)
    np.testing.assert_allclose(m.eigenvals(evals_count=3), obj.eigenvals(3), rtol=1e-10)
    with pytest.raises(ValueError, match=r"on the sparse path \(dimension 121\)"):
        jax.grad(f)(1.0)


def test_nested_vmap_equals_broadcast_batch_dimensions():
    obj, _ = make("Fluxonium")
    m = jbq.model(obj)
    flux = jnp.linspace(0.0, 0.5, 3)
    ej = jnp.array([6.0, 8.9])
    inner = lambda e, f: m.matrixelements("n_operator", {"EJ": e, "flux": f}, evals_count=2)
    nested = jax.jit(jax.vmap(jax.vmap(inner, in_axes=(None, 0)), in_axes=(0, None)))(ej, flux)
    broadcast = m.matrixelements("n_operator", {"EJ": ej[:, None], "flux": flux[None, :]}, 2)
    assert nested.shape == broadcast.shape == (2, 3, 2, 2)
    np.testing.assert_allclose(np.abs(nested), np.abs(broadcast), atol=1e-12)
    want = at(obj, {"EJ": 6.0, "flux": 0.25}).matrixelement_table("n_operator", evals_count=2)
    np.testing.assert_allclose(np.abs(nested[0, 1]), np.abs(want), atol=1e-10)


def test_each_qubit_lives_in_one_file_and_model_dispatches_by_its_class():
    assert list(QUBITS) == KINDS
    singles = ["Oscillator", "KerrOscillator", "GenericQubit"]  # _single.SubsystemModel
    assert list(MODELS) == [*KINDS, "Circuit", "HilbertSpace", *singles, "FullZeroPi"]
    for kind, qubit in QUBITS.items():
        obj, _ = make(kind)
        # the Hamiltonian and the noise channels of one class are in one module
        assert qubit.spec.__module__ == qubit.channels.__module__
        assert qubit.spec.__module__.startswith("jaxbridge.scqubits.qubits.")
        assert repr(jbq.model(obj)).startswith(f"jaxbridge.scqubits.Model({kind},")
        assert set(qubit.channels(obj)) >= set(obj.supported_noise_channels())

    class Derived(scq.TunableTransmon):  # not a scqubits class: its scqubits base is found
        pass

    obj, _ = make("TunableTransmon")
    derived = Derived(EJmax=obj.EJmax, EC=obj.EC, d=obj.d, flux=obj.flux, ng=obj.ng, ncut=5)
    assert repr(jbq.model(derived)).startswith("jaxbridge.scqubits.Model(TunableTransmon,")
