"""One spectrum for every noise channel of a trace, and the k-level derivatives.

`t1_effective` and `t2_effective` of the same params in one program read one host
diagonalisation (issue 42: one eigensystem per parameter point, shared by every channel);
values and derivatives equal each method run on its own, and nothing is shared between
different params or traces. `NoiseSpectrum`'s derivatives from the kept levels alone
(`_sternheimer`) equal those from the whole spectrum.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbridge.scqubits import _eigen

scq = pytest.importorskip("scqubits")
jbq = pytest.importorskip("jaxbridge.scqubits")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def qubit():
    return scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.4, cutoff=40)


@pytest.fixture
def count(monkeypatch):
    """How many times the host computes a spectrum (each row of a batch once)."""
    calls = {"n": 0}
    levels = _eigen.NoiseSpectrum._levels

    def counted(self, c_h, c_o):
        calls["n"] += 1
        return levels(self, c_h, c_o)

    monkeypatch.setattr(_eigen.NoiseSpectrum, "_levels", counted)
    return calls


FLUX = np.array([0.31, 0.37, 0.43])


def _each(m, f):
    t1 = jax.jit(lambda f: m.t1_effective(params={"flux": f}))(f)
    t2 = jax.jit(lambda f: m.t2_effective(params={"flux": f}))(f)
    return np.asarray(t1), np.asarray(t2)


def test_t1_and_t2_in_one_program_diagonalise_once(qubit, count):
    m = jbq.model(qubit)
    both = jax.jit(jax.vmap(lambda f: (m.t1_effective(params={"flux": f}),
                                        m.t2_effective(params={"flux": f}))))  # fmt: skip
    t1, t2 = both(FLUX)
    assert count["n"] == 1  # one host call for the batch, both channels' levels
    want1, want2 = _each(m, FLUX)
    np.testing.assert_allclose(t1, want1, rtol=1e-12)
    np.testing.assert_allclose(t2, want2, rtol=1e-12)
    for f, a, b in zip(FLUX, t1, t2):
        qubit.flux = f
        assert abs(a / qubit.t1_effective() - 1) < 1e-8 and abs(b / qubit.t2_effective() - 1) < 1e-8
    qubit.flux = 0.4


def test_every_channel_of_a_trace_shares_it(qubit, count):
    m = jbq.model(qubit)

    def channels(f):
        p = {"flux": f}
        return [getattr(m, c)(params=p) for c in m.effective_noise_channels()]

    got = jax.jit(channels)(0.35)
    assert count["n"] == 1
    for c, value in zip(m.effective_noise_channels(), got):
        alone = jax.jit(lambda f, c=c: getattr(m, c)(params={"flux": f}))(0.35)
        np.testing.assert_allclose(value, alone, rtol=1e-12)


def test_other_params_are_not_shared(qubit):
    m = jbq.model(qubit)
    f = jax.jit(lambda f: (m.t1_effective(params={"flux": f}),
                           m.t1_effective(params={"flux": f + 0.02}),
                           m.t1_effective(params={"flux": f, "EJ": 9.0})))  # fmt: skip
    a, b, c = f(0.33)
    np.testing.assert_allclose(a, _each(m, 0.33)[0], rtol=1e-12)
    np.testing.assert_allclose(b, _each(m, 0.35)[0], rtol=1e-12)
    other = jax.jit(lambda f: m.t1_effective(params={"flux": f, "EJ": 9.0}))(0.33)
    np.testing.assert_allclose(c, other, rtol=1e-12)
    assert abs(float(c) / float(a) - 1) > 1e-6  # EJ does change it


def test_a_spectrum_from_an_inner_trace_does_not_leak(qubit):
    m = jbq.model(qubit)

    def f(x):
        p = {"flux": x}
        inner = jax.lax.cond(x > 0.3, lambda: m.t1_effective(params=p), lambda: 0.0 * x)
        return inner, m.t2_effective(params=p), m.t1_effective(params=p)

    inner, t2, t1 = jax.jit(f)(0.41)
    want1, want2 = _each(m, 0.41)
    np.testing.assert_allclose([inner, t1, t2], [want1, want1, want2], rtol=1e-12)


def test_gradients_through_the_shared_spectrum(qubit):
    m = jbq.model(qubit)
    both = lambda f: m.t1_effective(params={"flux": f}) + m.t2_effective(params={"flux": f})
    got = jax.jit(jax.vmap(jax.grad(both)))(FLUX)
    each = jax.vmap(jax.grad(lambda f: m.t1_effective(params={"flux": f})))(FLUX) + jax.vmap(
        jax.grad(lambda f: m.t2_effective(params={"flux": f}))
    )(FLUX)
    np.testing.assert_allclose(got, each, rtol=1e-10)


@pytest.mark.parametrize("make", [
    lambda: scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.4, cutoff=40),
    lambda: scq.TunableTransmon(EJmax=20, EC=0.3, d=0.1, flux=0.2, ng=0.1, ncut=20),
    lambda: scq.Transmon(EJ=8.0, EC=1.0, ng=0.3, ncut=15),
], ids=["fluxonium", "tunable_transmon", "transmon"])  # fmt: skip
def test_kept_level_derivatives_equal_the_whole_spectrum(make, monkeypatch):
    # k = 2 of 81 (41, 31) levels: the solves, against first-order sums over every level.
    m = jbq.model(make())
    names = [n for n in ("flux", "ng", "EJ", "EC") if n in m.params]
    point = {n: jnp.asarray(float(m.params[n]) * 1.01 + 0.01) for n in names}
    jac = lambda: jax.jacfwd(lambda p: m.t2_effective(params=p, get_rate=True))(point)
    served = []
    kept = _eigen.NoiseSpectrum._sternheimer

    def counted(self, *a):
        served.append(kept(self, *a))
        return served[-1]

    monkeypatch.setattr(_eigen.NoiseSpectrum, "_sternheimer", counted)
    got = jac()
    assert served and all(x is not None for x in served)  # the kept-level path ran
    monkeypatch.setattr(_eigen.NoiseSpectrum, "_sternheimer", lambda self, *a: None)
    jax.clear_caches()
    m = jbq.model(make())
    want = jac()
    for n in names:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-7)
