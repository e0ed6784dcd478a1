"""`model(hilbertspace)` against scqubits' own HilbertSpace and ParameterSweep (float64)."""

import copy
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scqubits_cases import central_difference, dense

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits.composite import _hs_errors

scq = pytest.importorskip("scqubits")
scq.settings.PROGRESSBAR_DISABLED = True


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


# -- the systems


def transmon_resonator(g=0.1, EJ=20.0, E_osc=6.0):
    tmon = scq.Transmon(EJ=EJ, EC=0.3, ng=0.1, ncut=10, truncated_dim=4, id_str="tmon")
    osc = scq.Oscillator(E_osc=E_osc, truncated_dim=5, id_str="osc")
    hs = scq.HilbertSpace([tmon, osc])
    hs.add_interaction(g=g, op1=tmon.n_operator, op2=osc.creation_operator, add_hc=True)
    return hs


def two_fluxonia():
    f1 = scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.45, cutoff=30, truncated_dim=4, id_str="f1")
    f2 = scq.Fluxonium(EJ=6.0, EC=1.9, EL=0.8, flux=0.5, cutoff=30, truncated_dim=4, id_str="f2")
    hs = scq.HilbertSpace([f1, f2])
    hs.add_interaction(g_strength=0.25, op1=f1.n_operator, op2=f2.n_operator)
    return hs


def scqubits_test_system():
    """scqubits' tests' `hilbertspace_initialize2` (ncut 40 there): both operator forms."""
    cpb1 = scq.Transmon(EJ=40.0, EC=0.2, ng=0.0, ncut=12, truncated_dim=3)
    cpb2 = scq.Transmon(EJ=3.0, EC=1.0, ng=0.0, ncut=10, truncated_dim=4)
    res = scq.Oscillator(E_osc=6.0, truncated_dim=4)
    hs = scq.HilbertSpace([cpb1, cpb2, res])
    hs.add_interaction(g=0.1, op1=cpb1.n_operator, op2=res.creation_operator, add_hc=True)
    a = res.annihilation_operator()
    hs.add_interaction(g=0.2, op1=(cpb2.n_operator(), cpb2), op2=(a + a.T, res))
    return hs


def expr_system():
    """`expr=` terms: operators by name (a method and a matrix), constants, a matrix cosine."""
    flux = scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.4, cutoff=30, truncated_dim=4, id_str="fx")
    osc = scq.Oscillator(E_osc=5.0, l_osc=0.8, truncated_dim=4, id_str="osc")
    hs = scq.HilbertSpace([flux, osc])
    a = osc.annihilation_operator()
    hs.add_interaction(
        expr="c * n * (a + a.dag())", op1=("n", flux.n_operator), op2=("a", a, osc),
        const={"c": 0.15},
    )  # fmt: skip
    return hs


def expr_cosine_system():
    """A matrix cosine in `expr=` (scqubits: `Qobj.cosm`; here `expm`, slow to compile)."""
    hs = expr_system()
    flux, osc = hs["fx"], hs["osc"]
    hs.add_interaction(
        expr="k * cos(phi) * x - 0.5 * k * x", op1=("phi", flux.phi_operator),
        op2=("x", osc.phi_operator), const={"k": 0.05},
    )  # fmt: skip
    return hs


def oscillators_and_generic():
    """GenericQubit, KerrOscillator, Oscillator (with l_osc) and a FluxQubit."""
    q = scq.GenericQubit(E=4.5, id_str="q")
    kerr = scq.KerrOscillator(E_osc=5.0, K=0.1, truncated_dim=4, id_str="kerr")
    osc = scq.Oscillator(E_osc=4.0, l_osc=1.3, truncated_dim=3, id_str="osc")
    # A FluxQubit's Hamiltonian is complex: its bare eigenvectors are, too.
    fq = scq.FluxQubit(EJ1=1.0, EJ2=1.0, EJ3=0.8, ECJ1=0.016, ECJ2=0.016, ECJ3=0.021,
                       ECg1=0.83, ECg2=0.83, ng1=0.1, ng2=0.2, flux=0.4, ncut=2,
                       truncated_dim=2, id_str="fq")  # fmt: skip
    hs = scq.HilbertSpace([q, kerr, osc, fq])
    b = kerr.annihilation_operator()
    hs.add_interaction(g=0.2, op1=q.sx_operator, op2=(b + b.T, kerr))
    hs.add_interaction(g=0.1, op1=kerr.annihilation_operator, op2=osc.creation_operator,
                       add_hc=True)  # fmt: skip
    hs.add_interaction(g=0.05, op1=q.sx_operator, op2=osc.n_operator)
    hs.add_interaction(g=0.02, op1=fq.n_1_operator, op2=osc.creation_operator, add_hc=True)
    return hs


def circuit_resonator():
    """A `Circuit` subsystem: a fluxonium from YAML (harmonic basis, Q1 depends on EC, EL)."""
    yaml = 'branches:\n- ["JJ", 1, 2, EJ=8.9, 1]\n- ["L", 1, 2, EL=0.5]\n- ["C", 1, 2, EC=2.5]\n'
    with warnings.catch_warnings():  # scqubits' YAML parser calls pyparsing's deprecated names
        warnings.simplefilter("ignore", DeprecationWarning)
        circ = scq.Circuit(yaml, from_file=False, ext_basis="harmonic", truncated_dim=3)
    circ.cutoff_ext_1, circ.Φ1 = 25, 0.4
    osc = scq.Oscillator(E_osc=5.0, truncated_dim=3, id_str="osc")
    hs = scq.HilbertSpace([circ, osc])
    hs.add_interaction(g=0.1, op1=circ.Q1_operator, op2=osc.creation_operator, add_hc=True)
    return hs


def near_resonance():
    """Qubit and resonator 0.01 GHz apart: ten bare labels have no dressed state (NaN)."""
    return transmon_resonator(g=0.3, E_osc=6.6)


SYSTEMS = {
    "transmon_resonator": transmon_resonator,
    "near_resonance": near_resonance,
    "circuit_resonator": circuit_resonator,
    "two_fluxonia": two_fluxonia,
    "scqubits_test_system": scqubits_test_system,
    "expr": expr_system,
    "oscillators_and_generic": oscillators_and_generic,
    "expr_cosine": pytest.param(expr_cosine_system, marks=pytest.mark.slow),
}


def _aligned(m, hs):
    """scqubits' Hamiltonian in this model's bare phases: v_j = conj(o_j) u_j, o_j = <v_j|u_j>."""
    phases = []
    for sub in hs:
        w, ours = m.bare_eigensys(sub.id_str)
        want, theirs = sub.eigensys(evals_count=sub.truncated_dim)
        np.testing.assert_allclose(w, want, rtol=1e-9, atol=1e-12)
        overlap = np.sum(np.conj(np.asarray(ours)) * theirs, axis=0)
        np.testing.assert_allclose(np.abs(overlap), 1.0, atol=1e-9)
        phases.append(overlap / np.abs(overlap))
    s = np.ones(1)
    for p in phases:
        s = np.kron(s, p)
    return s[:, None] * hs.hamiltonian().full() * s.conj()[None, :]


@pytest.mark.parametrize("system", list(SYSTEMS.values()), ids=list(SYSTEMS))
def test_values_equal_scqubits(system):
    hs = system()
    m = jbq.model(hs)
    assert m.dim == hs.dimension and m.subsystem_dims == hs.subsystem_dims
    ids = [s.id_str for s in hs]
    assert list(m.params) == [*ids, "g"] and len(m.params["g"]) == len(hs.interaction_list)
    np.testing.assert_allclose(m.hamiltonian(), _aligned(m, hs), rtol=0, atol=1e-11)
    k = min(12, m.dim)
    want = hs.eigenvals(evals_count=k)
    np.testing.assert_allclose(m.eigenvals(evals_count=k), want, rtol=1e-9)
    if system in (transmon_resonator, oscillators_and_generic):  # a real and a complex H
        w, v = m.eigensys(evals_count=k)
        np.testing.assert_allclose(w, want, rtol=1e-9)
        h, v = np.asarray(m.hamiltonian()), np.asarray(v)
        np.testing.assert_allclose(h @ v, v * np.asarray(w)[None, :], atol=1e-9)
    sub = hs[0]  # bare_eigenvals (every subsystem's are in _aligned, by bare_eigensys)
    want = sub.eigenvals(evals_count=sub.truncated_dim)
    np.testing.assert_allclose(m.bare_eigenvals(sub.id_str), want, rtol=1e-9, atol=1e-12)
    # Every bare label: scqubits' generate_lookup (all dressed states, overlap rule).
    hs.generate_lookup()
    bares = list(np.ndindex(*hs.subsystem_dims))
    unlabelled = [b for b in bares if hs.dressed_index(b) is None]
    if system is near_resonance:
        assert len(unlabelled) == 10
    every = [(m.dressed_index(b), m.energy_by_bare_index(b)) for b in bares]
    for bare, (got, energy) in zip(bares, every):
        index = hs.dressed_index(bare)
        assert int(got) == (-1 if index is None else index), bare
        if index is None:
            assert np.isnan(energy) and np.isnan(hs.energy_by_bare_index(bare))
        else:
            np.testing.assert_allclose(energy, hs.energy_by_bare_index(bare), rtol=1e-9)


def _sweep(hs, tmon, values, evals_count):
    def update(EJ):
        tmon.EJ = EJ

    with warnings.catch_warnings():  # scqubits warns about fixed-matrix couplings
        warnings.simplefilter("ignore", UserWarning)
        return scq.ParameterSweep(
            hilbertspace=hs, paramvals_by_name={"EJ": values}, update_hilbertspace=update,
            evals_count=evals_count, num_cpus=1,
        )  # fmt: skip


def test_vmap_over_EJ_equals_parameter_sweep():
    hs = transmon_resonator()
    m = jbq.model(hs)
    values = np.linspace(12.0, 28.0, 5)
    sweep = _sweep(hs, hs["tmon"], values, 8)
    labels = [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 4)]

    def point(ej):
        p = {"tmon": {"EJ": ej}}
        energies = [m.energy_by_bare_index(b, p, evals_count=8) for b in labels]
        return m.eigenvals(p, evals_count=8), jnp.stack(energies)

    evals, energies = jax.jit(jax.vmap(point))(jnp.asarray(values))
    np.testing.assert_allclose(evals, np.asarray(sweep["evals"]), rtol=1e-9)
    for j, bare in enumerate(labels):
        want = np.asarray(sweep.energy_by_bare_index(bare), dtype=float)
        np.testing.assert_allclose(energies[:, j], want, rtol=1e-9)  # NaN where both are
    assert np.all(np.isnan(energies[:, -1]))  # (3, 4) lies above the 8 labelled states
    # Leading batch dimensions of params give the same, without vmap.
    grid = m.eigenvals({"tmon": {"EJ": values.reshape(5, 1)}}, evals_count=8)
    np.testing.assert_allclose(grid[:, 0], np.asarray(sweep["evals"]), rtol=1e-9)
    idx = m.dressed_index((1, 0), {"tmon": {"EJ": values}}, evals_count=8)
    np.testing.assert_array_equal(idx, np.asarray(sweep.dressed_index((1, 0)), dtype=int))


def _chi(m):
    def chi(p):
        e = lambda b: m.energy_by_bare_index(b, p)
        return e((1, 1)) - e((1, 0)) - e((0, 1)) + e((0, 0))

    return chi


def _scq_chi(**values):
    hs = transmon_resonator(**values)
    hs.generate_lookup()
    e = hs.energy_by_bare_index
    return float(e((1, 1)) - e((1, 0)) - e((0, 1)) + e((0, 0)))


def test_dispersive_shift_and_its_gradient_against_scqubits():
    m = jbq.model(transmon_resonator())
    chi = _chi(m)
    np.testing.assert_allclose(chi(None), _scq_chi(), rtol=1e-9)
    p = {"tmon": {"EJ": 20.0}, "osc": {"E_osc": 6.0}, "g": [0.1]}
    grad = jax.jit(jax.grad(chi))(p)
    for got, name, x, step in [
        (grad["tmon"]["EJ"], "EJ", 20.0, 1e-2),
        (grad["g"][0], "g", 0.1, 1e-3),
        (grad["osc"]["E_osc"], "E_osc", 6.0, 1e-3),
    ]:
        want = central_difference(lambda v, n=name: _scq_chi(**{n: v}), x, step)
        np.testing.assert_allclose(got, want, rtol=1e-4)
    fwd = jax.jit(jax.jacfwd(chi))(p)
    for a, b in zip(jax.tree.leaves(fwd), jax.tree.leaves(grad)):
        np.testing.assert_allclose(a, b, rtol=1e-9)


def test_gradient_through_a_parameter_dependent_basis():
    # A fluxonium's n_operator depends on EC and EL: the coupling's matrix elements move.
    hs = two_fluxonia()
    m = jbq.model(hs)

    def theirs(ec):
        other = copy.deepcopy(hs)
        other["f1"].EC = ec
        return float(np.diff(other.eigenvals(evals_count=3))[1])

    ours = lambda ec: jnp.diff(m.eigenvals({"f1": {"EC": ec}}, evals_count=3))[1]
    want = central_difference(theirs, 2.5, 1e-3)
    np.testing.assert_allclose(jax.jit(jax.grad(ours))(2.5), want, rtol=1e-6)


def test_expr_constants_are_params():
    hs = expr_system()
    m = jbq.model(hs)
    assert m.params["g"] == [{"c": 0.15}]
    other = expr_system()
    other.interaction_list[0].const = {"c": 0.3}
    np.testing.assert_allclose(m.eigenvals({"g": [{"c": 0.3}]}), other.eigenvals(), rtol=1e-9)
    g = jax.grad(lambda c: m.eigenvals({"g": {0: {"c": c}}}, evals_count=2)[1])(0.15)
    assert np.isfinite(g) and g != 0


def test_every_transformation_of_every_method():
    m = jbq.model(transmon_resonator())
    base = {"tmon": {"EJ": 20.0, "EC": 0.3}, "osc": {"E_osc": 6.0}, "g": [0.1]}

    def f(p):  # every method once, weighted so that no error cancels another
        return (
            0.01 * jnp.sum(m.hamiltonian(p) ** 2)
            + 0.1 * jnp.sum(m.eigenvals(p, evals_count=4) ** 2)
            + jnp.abs(m.eigensys(p, evals_count=3)[1][0, 1]) ** 2
            + 3.0 * m.energy_by_bare_index((1, 1), p)
            + 0.7 * m.bare_eigenvals("tmon", p)[2]
        )

    value = jax.jit(f)(base)
    fj = jax.jit(f)
    grad = jax.jit(jax.grad(f))(base)
    fwd = jax.jit(jax.jacfwd(f))(base)
    for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(fwd)):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-12)
    leaves, tree = jax.tree.flatten(base)
    grads = jax.tree.leaves(grad)
    for i in range(len(leaves)):  # differences of f itself, leaf by leaf

        def shifted(d, i=i):
            return fj(jax.tree.unflatten(tree, [x + d * (j == i) for j, x in enumerate(leaves)]))

        numeric = (shifted(1e-5) - shifted(-1e-5)) / 2e-5
        np.testing.assert_allclose(grads[i], numeric, rtol=1e-5, err_msg=str(i))
    batched = jax.vmap(f)(jax.tree.map(lambda x: jnp.full((2,), x), base))
    np.testing.assert_allclose(batched, [value, value], rtol=1e-12)
    x0 = jnp.array([20.0, 0.1])
    h = lambda x: m.energy_by_bare_index((1, 1), {"tmon": {"EJ": x[0]}, "g": [x[1]]})
    hess = jax.jit(jax.hessian(h))(x0)
    g = jax.jit(jax.grad(h))
    numeric = np.stack([(g(x0.at[i].add(1e-5)) - g(x0.at[i].add(-1e-5))) / 2e-5 for i in range(2)])
    np.testing.assert_allclose(hess, numeric, rtol=1e-4, atol=1e-8)
    # The index is discrete under jit and vmap.
    index = jax.jit(lambda p: m.dressed_index((1, 0), p))(base)
    assert index.dtype == jnp.int32 and int(index) == int(m.dressed_index((1, 0)))


def test_finite_where_the_unrequested_spectrum_is_degenerate():
    # ng = 0.5, EJ small: exact degeneracies at the top of the charge basis.
    tmon = scq.Transmon(EJ=1.0, EC=1.0, ng=0.5, ncut=15, truncated_dim=3, id_str="t")
    osc = scq.Oscillator(E_osc=2.0, truncated_dim=3, id_str="o")
    hs = scq.HilbertSpace([tmon, osc])
    hs.add_interaction(g=0.05, op1=tmon.n_operator, op2=osc.creation_operator, add_hc=True)
    assert np.min(np.diff(np.linalg.eigvalsh(dense(tmon.hamiltonian())))) == 0.0
    m = jbq.model(hs)
    chi = _chi(m)
    p = {"t": {"EJ": 1.0, "EC": 1.0, "ng": 0.5}, "g": [0.05]}
    assert all(np.isfinite(x) for x in jax.tree.leaves(jax.grad(chi)(p)))


def test_partial_params_keep_other_values():
    m = jbq.model(scqubits_test_system())
    full = m.eigenvals()
    np.testing.assert_allclose(m.eigenvals({"g": [None, None]}), full, rtol=1e-14)
    hs = scqubits_test_system()
    first, second = list(m.params)[:2]
    np.testing.assert_allclose(m.eigenvals({first: {}}), full, rtol=1e-14)
    hs.interaction_list[1].g_strength = 0.3
    hs[1].EJ = 3.5
    got = m.eigenvals({"g": {1: 0.3}, second: {"EJ": 3.5}})
    np.testing.assert_allclose(got, hs.eigenvals(), rtol=1e-9)
    m.eigenvals({second: {"EJ": jnp.asarray(3.5)}})  # an array where floats were before
    assert m._compiled._cache_size() == 1  # every call above reused one program


def test_errors_name_the_cause():
    m = jbq.model(transmon_resonator())
    with pytest.raises(ValueError) as info:
        m.eigenvals({"qubit": {"EJ": 1.0}})
    assert str(info.value) == _hs_errors.HS_UNKNOWN_KEY.format(
        method="eigenvals", names=["qubit"], known=["tmon", "osc"]
    )
    with pytest.raises(ValueError, match="unknown parameter \\['ncut'\\] for subsystem `tmon`"):
        m.eigenvals({"tmon": {"ncut": 3}})
    with pytest.raises(ValueError) as info:
        m.energy_by_bare_index((4, 0))
    assert str(info.value) == _hs_errors.HS_BARE.format(
        method="energy_by_bare_index", got=(4, 0), n=2, dims=[4, 5]
    )
    with pytest.raises(ValueError, match=r'`params\["g"\]` must be a list of 1'):
        m.eigenvals({"g": [0.1, 0.2]})
    with pytest.raises(ValueError, match="is complex, but this model's value there is real"):
        m.eigenvals({"g": [0.1j]})
    hs = transmon_resonator()
    hs.add_interaction(qobj=hs.hubbard_operator(0, 1, hs["tmon"]))  # not Hermitian
    with pytest.raises(ValueError) as info:
        jbq.model(hs)
    assert str(info.value) == _hs_errors.HS_QOBJ_HERMITIAN.format(index=1, got=1.0)
    hs = transmon_resonator()
    tmon = hs["tmon"]
    hs.add_interaction(expr="sqrt(n)", op1=("n", tmon.n_operator), check_validity=False)
    with pytest.raises(ValueError) as info:
        jbq.model(hs)
    assert str(info.value) == _hs_errors.HS_SQRTM


# -- hierarchical diagonalization: circuits from scqubits' own tests, smaller cutoffs


def _circuit(*args, **kwargs):
    with warnings.catch_warnings():  # scqubits' YAML parser calls pyparsing's deprecated names
        warnings.simplefilter("ignore", DeprecationWarning)
        return scq.Circuit(*args, **kwargs)


def symbolic_nested():
    """`test_circuit_with_symbolic_hamiltonian`: [[1], [[2], [3]]], harmonic basis."""
    import sympy

    h = sympy.parse_expr(
        "0.25*θ3**2 + 2.0*Q3**2 + 0.790697674419*Q2**2 + 0.45*θ2**2 + 7.674418604651*n1**2"
        " + 7.674418604651*ng1**2 - 1.0*cos(θ1) + 0.5*θ2*θ3 + 1.395348837209*Q2*n1"
        " + 1.395348837209*Q2*ng1 + 15.348837209302*n1*ng1"
    )
    circ = _circuit(
        input_string=None, symbolic_hamiltonian=h, symbolic_param_dict={"ng1": 0},
        ext_basis="harmonic",
    )  # fmt: skip
    circ.configure(transformation_matrix=np.array([[1, 0, 0], [0, 1, 0], [0, 1, 1]]))
    circ.cutoff_n_1, circ.cutoff_ext_2, circ.cutoff_ext_3 = 6, 8, 8
    circ.configure(system_hierarchy=[[1], [[2], [3]]], subsystem_trunc_dims=[6, [12, [5, 5]]])
    circ.ng1 = 0.5
    return circ


def dfc(cutoff=20):
    """`test_eigenvals_discretized`'s double fluxonium coupler: [[[1], [3]], [2], [4]]."""
    import os

    data = os.path.join(os.path.dirname(scq.__file__), "tests", "data", "circuit_DFC.yaml")
    circ = _circuit(
        data, ext_basis="discretized", initiate_sym_calc=False, basis_completion="canonical"
    )
    closure = [circ.branches[0], circ.branches[4], circ.branches[-1]]
    circ.configure(closure_branches=closure, system_hierarchy=[[[1], [3]], [2], [4]],
                   subsystem_trunc_dims=[[5, [5, 5]], 4, 4])  # fmt: skip
    circ.Φ1, circ.Φ2, circ.Φ3 = 0.5 + 0.01768, -0.2662, -0.5 + 0.01768
    for i in (1, 2, 3, 4):
        setattr(circ, f"cutoff_ext_{i}", cutoff)
    return circ


def single_fluxonium():
    """`test_qutip_dynamics`: a fluxonium as a hierarchy of one subsystem."""
    yaml = "branches:\n- [JJ, 1, 2, 4, 0.5]\n- [L, 1, 2, 1.3]\n- [C, 1, 2, 2]\n"
    circ = _circuit(yaml, from_file=False, use_dynamic_flux_grouping=True, ext_basis="discretized")
    circ.cutoff_ext_1 = 50
    circ.Φ1 = 0.5
    circ.configure(system_hierarchy=[[1]], subsystem_trunc_dims=[8])
    return circ


def zero_pi():
    """`test_zero_pi_discretized`: [[1, 3], [2]], the second subsystem purely harmonic."""
    yaml = """branches:
- ["JJ", 1, 2, 10, 20]
- ["JJ", 3, 4, 10, 20]
- ["L", 2, 3, 0.008]
- ["L", 4, 1, 0.008]
- ["C", 1, 3, 0.02]
- ["C", 2, 4, 0.02]
"""
    circ = _circuit(yaml, from_file=False, ext_basis="discretized")
    circ.cutoff_n_1, circ.cutoff_ext_2, circ.cutoff_ext_3 = 6, 10, 30
    circ.configure(system_hierarchy=[[1, 3], [2]], subsystem_trunc_dims=[10, 6])
    return circ


HIERARCHIES = {
    "symbolic_nested": symbolic_nested,
    "dfc": dfc,
    "single_fluxonium": single_fluxonium,
    "zero_pi": pytest.param(zero_pi, marks=pytest.mark.slow),
}


@pytest.mark.parametrize("make_circuit", list(HIERARCHIES.values()), ids=list(HIERARCHIES))
def test_hierarchical_circuit_equals_scqubits(make_circuit):
    circ = make_circuit()
    m = jbq.model(circ)
    np.testing.assert_allclose(m.eigenvals(evals_count=6), circ.eigenvals(6), rtol=1e-9)
    assert m.dim == circ.hilbertdim()


def test_hierarchical_gradient_against_differences_of_scqubits():
    circ = dfc(cutoff=12)
    m = jbq.model(circ)
    f01 = lambda phi: jnp.diff(m.eigenvals({"Φ2": phi}, evals_count=2))[0]

    def theirs(phi):
        circ.Φ2 = phi
        return float(np.diff(circ.eigenvals(2))[0])

    want = (theirs(-0.2662 + 1e-4) - theirs(-0.2662 - 1e-4)) / 2e-4
    grad = jax.jit(jax.grad(f01))(-0.2662)
    np.testing.assert_allclose(grad, want, rtol=1e-6)
    np.testing.assert_allclose(jax.jit(jax.jacfwd(f01))(-0.2662), grad, rtol=1e-9)
    # hessian, against differences of the gradient, on the hierarchy of one fluxonium.
    single = jbq.model(single_fluxonium())
    f = lambda phi: jnp.diff(single.eigenvals({"Φ1": phi}, evals_count=2))[0]
    g = jax.jit(jax.grad(f))
    numeric = (g(0.45 + 1e-5) - g(0.45 - 1e-5)) / 2e-5
    np.testing.assert_allclose(jax.jit(jax.hessian(f))(0.45), numeric, rtol=1e-4)
    sweep = jax.vmap(lambda phi: m.eigenvals({"Φ2": phi}, evals_count=2))(jnp.array([-0.27, -0.2]))
    circ.Φ2 = -0.2
    np.testing.assert_allclose(sweep[1], circ.eigenvals(2), rtol=1e-9)
