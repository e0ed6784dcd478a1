"""A HilbertSpace model's dressed-basis surface against scqubits 4.3.1 evaluated directly:
`transitions` (ParameterSweep's list), `op_in_dressed_eigenbasis`, `dressed_state_components`,
the "LX" and "BE" orderings of `generate_lookup`, and `add_interaction(qobj=...)`, on a
transmon with a resonator, two coupled transmons and a fluxonium with a resonator."""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import qutip
import scqubits as scq
from scqubits_cases import central_difference

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits.composite import _hs_errors, _transitions
from jaxbridge.scqubits.composite._subsystems import fix_phases


@pytest.fixture(autouse=True)
def _x64(x64):
    scq.settings.PROGRESSBAR_DISABLED = True
    yield


def transmon_resonator(ng=0.0):
    tmon = scq.Transmon(EJ=20.0, EC=0.3, ng=ng, ncut=8, truncated_dim=3, id_str="tmon")
    osc = scq.Oscillator(E_osc=6.0, truncated_dim=4, id_str="osc")
    hs = scq.HilbertSpace([tmon, osc])
    hs.add_interaction(g=0.1, op1=tmon.n_operator, op2=osc.creation_operator, add_hc=True)
    return hs


def two_transmons():
    t1 = scq.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=8, truncated_dim=3, id_str="t1")
    t2 = scq.Transmon(EJ=15.0, EC=0.25, ng=0.0, ncut=8, truncated_dim=3, id_str="t2")
    hs = scq.HilbertSpace([t1, t2])
    hs.add_interaction(g=0.05, op1=t1.n_operator, op2=t2.n_operator)
    return hs


def fluxonium_resonator():
    f = scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.33, cutoff=20, truncated_dim=4, id_str="f")
    osc = scq.Oscillator(E_osc=5.5, truncated_dim=4, id_str="osc")
    hs = scq.HilbertSpace([f, osc])
    hs.add_interaction(g=0.2, op1=f.n_operator, op2=osc.creation_operator, add_hc=True)
    return hs


SYSTEMS = {"transmon+resonator": transmon_resonator, "two transmons": two_transmons,
           "fluxonium+resonator": fluxonium_resonator}  # fmt: skip


def _sub(hs, id_str: str) -> Any:
    """A subsystem by `id_str` (scqubits' `__getitem__` is typed as a union)."""
    return hs[id_str]


def _sweep(hs, values, count):
    sub: Any = hs[0]

    def update(EJ):
        sub.EJ = EJ

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return scq.ParameterSweep(
            hs, {"EJ": values}, update_hilbertspace=update, evals_count=count,
            subsys_update_info={"EJ": [sub]},
        )  # fmt: skip


def _bare_phase_map(m, hs, params=None):
    """`delta[b]`: scqubits' bare product basis -> the model's (unit numbers per bare state)."""
    delta = np.ones((1,), complex)
    for sub in hs:
        if isinstance(sub, scq.Oscillator):
            d = np.ones(sub.truncated_dim)
        else:
            _, ours = m.bare_eigensys(sub.id_str, params)
            _, theirs = sub.eigensys(evals_count=sub.truncated_dim)
            d = np.sum(np.asarray(ours).conj() * theirs, axis=0)
        delta = (delta[:, None] * d[None, :]).reshape(-1)
    return delta


# -- transitions


CASES = [
    {},
    {"sidebands": True},
    {"initial": (1, 0), "make_positive": True},
    {"initial": 1},
    {"final": -1, "photon_number": 2},
    {"subsystems": "osc", "initial": (1,)},
    {"initial": [(0, 0), (1, 0)], "final": [(1, 1), (2, 0), 3]},
]


def test_transitions_equal_parameter_sweep():
    hs = transmon_resonator()
    m = jbq.model(hs)
    ejs = np.array([18.0, 20.0, 22.0])
    sweep = _sweep(hs, ejs, 8)  # (2, 3) and (0, 3) have no dressed state: scqubits drops them
    for case in CASES:
        theirs = dict(case)
        if theirs.get("subsystems") == "osc":
            theirs["subsystems"] = _sub(hs, "osc")
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            labels, energies = sweep.transitions(**theirs)
        with warnings.catch_warnings(record=True) as we_said:
            warnings.simplefilter("always")
            got_labels, got = m.transitions(
                {"tmon": {"EJ": jnp.asarray(ejs)}}, evals_count=8, **case
            )
        assert _label_warnings(we_said) == _label_warnings(said), case
        assert got_labels == labels, case
        want = np.stack([np.asarray(e, dtype=float) for e in energies], axis=-1)
        assert got.shape == want.shape == (3, len(labels))
        assert np.array_equal(np.isnan(got), np.isnan(want)), case
        np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], atol=1e-10)


def _label_warnings(records) -> list[str]:
    texts = (_transitions.HYBRIDIZED, _transitions.NOT_GROUND)
    return [str(r.message) for r in records if str(r.message) in texts]


def test_transitions_warn_as_parameter_sweep_on_hybridized_initial_states():
    # A resonator of negative frequency: the bare ground (0, 0) is not the dressed ground,
    # and (2, 3) has no dressed state among the 8 labelled.
    tmon = scq.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=8, truncated_dim=3, id_str="tmon")
    osc = scq.Oscillator(E_osc=-6.0, truncated_dim=4, id_str="osc")
    hs = scq.HilbertSpace([tmon, osc])
    hs.add_interaction(g=0.1, op1=tmon.n_operator, op2=osc.creation_operator, add_hc=True)
    m = jbq.model(hs)
    ejs = np.array([18.0, 20.0])
    sweep = _sweep(hs, ejs, 8)
    cases = [{}, {"initial": (2, 3)}, {"initial": [(0, 0), (2, 3)], "final": [(1, 1), 3]},
             {"initial": 1}]  # fmt: skip
    seen = set()
    for case in cases:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            labels, _ = sweep.transitions(**case)
        with warnings.catch_warnings(record=True) as we_said:
            warnings.simplefilter("always")
            got, _ = m.transitions({"tmon": {"EJ": jnp.asarray(ejs)}}, evals_count=8, **case)
        assert got == labels
        assert _label_warnings(we_said) == _label_warnings(said), case
        seen |= set(_label_warnings(said))
    assert seen == {_transitions.HYBRIDIZED, _transitions.NOT_GROUND}

    # Under jit the values are not known when the list is made: no warning, the NaN columns
    # say it (at EJ = 18 alone, (2, 3) has no dressed state: eagerly, the warning).
    def energies(ej):
        return m.transitions({"tmon": {"EJ": ej}}, initial=(2, 3), evals_count=8, omit_nan=False)

    for run, want in ((energies, [_transitions.HYBRIDIZED]), (jax.jit(energies), [])):
        with warnings.catch_warnings(record=True) as we_said:
            warnings.simplefilter("always")
            _, e = run(18.0)
        assert _label_warnings(we_said) == want
        assert np.isnan(np.asarray(e)).all()


def test_transitions_under_jit_vmap_and_grad():
    hs = two_transmons()
    m = jbq.model(hs)

    def qubit_line(ej):
        labels, e = m.transitions({"t1": {"EJ": ej}}, omit_nan=False, final=[(1, 0), (0, 1)])
        assert labels == [((0, 0), (1, 0)), ((0, 0), (0, 1))]
        return e

    ejs = jnp.asarray([18.0, 22.0])
    batched = jax.jit(jax.vmap(qubit_line))(ejs)
    eager = np.stack([m.transitions({"t1": {"EJ": float(x)}}, final=[(1, 0), (0, 1)])[1]
                      for x in ejs])  # fmt: skip
    np.testing.assert_allclose(batched, eager, atol=1e-12)
    programs = m._compiled._cache_size()
    m.transitions({"t1": {"EJ": 19.5}}, final=[(1, 0), (0, 1)])  # a new value: no new program
    assert m._compiled._cache_size() == programs
    # the gradient against central differences of scqubits' own lookup
    t1 = _sub(hs, "t1")

    def scqubits_line(ej):
        t1.EJ = ej
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hs.generate_lookup()
        return hs.energy_by_bare_index((1, 0)) - hs.energy_by_bare_index((0, 0))

    grad = jax.grad(lambda ej: qubit_line(ej)[0])(20.0)
    np.testing.assert_allclose(grad, central_difference(scqubits_line, 20.0, 1e-3), rtol=1e-7)
    with pytest.raises(ValueError) as info:
        jax.jit(lambda ej: m.transitions({"t1": {"EJ": ej}})[1])(20.0)
    assert str(info.value) == _hs_errors.HS_OMIT_NAN


# -- the dressed basis


def test_op_in_dressed_eigenbasis_equals_scqubits():
    hs = fluxonium_resonator()
    m = jbq.model(hs)
    f, osc = _sub(hs, "f"), _sub(hs, "osc")
    hs.generate_lookup()
    theirs = hs.op_in_dressed_eigenbasis(f.n_operator, truncated_dim=6).full()
    # scqubits' dressed states in the model's bare basis, against the model's own
    delta = _bare_phase_map(m, hs)
    evecs = np.stack([e.full()[:, 0] for e in hs._data["evecs"][0]], axis=1)[:, :6]
    ours = np.asarray(fix_phases(m.eigensys(evals_count=6)[1]))  # the model's dressed phases
    p = np.sum(ours.conj() * (delta[:, None] * evecs), axis=0)  # E_theirs = p E_ours
    p = p / np.abs(p)
    forms = [f.n_operator, (f.n_operator(energy_esys=f.eigensys(evals_count=4)), f)]
    for i, form in enumerate(forms):
        got = np.asarray(m.op_in_dressed_eigenbasis(form, truncated_dim=6,
                                                    op_in_bare_eigenbasis=i == 1))  # fmt: skip
        np.testing.assert_allclose(p.conj()[:, None] * p[None, :] * got, theirs, atol=1e-10)
    a = osc.annihilation_operator()
    got = m.op_in_dressed_eigenbasis((a, "osc"), truncated_dim=4)
    want = hs.op_in_dressed_eigenbasis((a, osc), truncated_dim=4).full()
    np.testing.assert_allclose(np.abs(got), np.abs(want), atol=1e-10)
    # a sweep is a batch; |<0|n|1>|^2's derivative against central differences of scqubits'
    batch = m.op_in_dressed_eigenbasis(f.n_operator, {"f": {"flux": jnp.asarray([0.3, 0.33])}},
                                       truncated_dim=6)  # fmt: skip
    np.testing.assert_allclose(np.abs(batch[1]), np.abs(theirs), atol=1e-10)

    def element(flux):
        return (
            jnp.abs(m.op_in_dressed_eigenbasis(f.n_operator, {"f": {"flux": flux}}, 6)[0, 1]) ** 2
        )

    def scqubits_element(flux):
        f.flux = flux
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hs.generate_lookup()
        return abs(hs.op_in_dressed_eigenbasis(f.n_operator, truncated_dim=2).full()[0, 1]) ** 2

    want = central_difference(scqubits_element, 0.33, 1e-4)
    np.testing.assert_allclose(jax.grad(element)(0.33), want, rtol=1e-6)
    # the object changed after `model`: a matrix in its bare eigenbasis refers to its values now
    f.flux = 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hs.generate_lookup()
    matrix = f.n_operator(energy_esys=f.eigensys(evals_count=4))
    want = hs.op_in_dressed_eigenbasis((matrix, f), truncated_dim=6, op_in_bare_eigenbasis=True)
    got = m.op_in_dressed_eigenbasis((matrix, "f"), {"f": {"flux": 0.3}}, 6, True)
    np.testing.assert_allclose(np.abs(got), np.abs(want.full()), atol=1e-10)


def test_dressed_state_components_equal_scqubits():
    hs = transmon_resonator()
    m = jbq.model(hs)
    hs.generate_lookup()
    for label in [(1, 1), (0, 2), 3, 0]:
        want = hs.dressed_state_components(label, components_count=5)
        bare, probs = m.dressed_state_components(label, components_count=5)
        got = {tuple(int(x) for x in b): float(p) for b, p in zip(bare, probs)}
        assert list(got) == [tuple(int(x) for x in k) for k in want], label
        np.testing.assert_allclose(list(got.values()), list(want.values()), atol=1e-12)
        _, amps = m.dressed_state_components(label, components_count=5, return_probability=False)
        np.testing.assert_allclose(np.abs(amps) ** 2, probs, atol=1e-14)
    bare, probs = m.dressed_state_components((1, 0), {"tmon": {"EJ": jnp.asarray([18.0, 22.0])}})
    assert bare.shape == (2, 12, 2) and probs.shape == (2, 12)
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0, atol=1e-12)


# -- the orderings of generate_lookup


ORDERINGS = [("LX", None, None), ("LX", [1, 0], None), ("BE", None, None), ("BE", [1, 0], 5)]


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_orderings_equal_generate_lookup(system):
    hs = SYSTEMS[system]()
    m = jbq.model(hs)
    dims = hs.subsystem_dims
    for ordering, priority, count in ORDERINGS:
        if system == "transmon+resonator" and priority == [1, 0] and ordering == "LX":
            continue  # phase-dependent there: test_lx_refuses_a_phase_dependent_label
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hs.generate_lookup(ordering=ordering, subsys_priority=priority, BEs_count=count)
        key = {"ordering": ordering, "subsys_priority": priority, "BEs_count": count}
        for bare in np.ndindex(*dims):
            want = hs.dressed_index(bare)
            assert int(m.dressed_index(bare, **key)) == (-1 if want is None else want), key
            energy = m.energy_by_bare_index(bare, **key)
            np.testing.assert_allclose(energy, hs.energy_by_bare_index(bare), atol=1e-10)
        for dressed in range(count or hs.dimension):
            if hs.bare_index(dressed) is not None:
                assert tuple(np.asarray(m.bare_index(dressed, **key))) == hs.bare_index(dressed)


def test_orderings_over_a_batch_equal_each_point():
    hs = two_transmons()
    m = jbq.model(hs)
    ejs = [16.0, 24.0]
    got = m.dressed_index((1, 1), {"t1": {"EJ": jnp.asarray(ejs)}}, ordering="LX")
    for ej, index in zip(ejs, got):
        _sub(hs, "t1").EJ = ej
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hs.generate_lookup(ordering="LX")
        assert int(index) == hs.dressed_index((1, 1))
    grad = jax.grad(lambda ej: m.energy_by_bare_index((1, 1), {"t1": {"EJ": ej}}, ordering="BE"))
    assert np.isfinite(grad(20.0))


def test_lx_refuses_a_phase_dependent_label():
    """Where the model refuses, scqubits' own label follows its solver's phases: flipping the
    sign of one bare eigenvector of the transmon (the same spectrum) changes it."""
    hs = transmon_resonator(ng=0.1)
    m = jbq.model(hs)
    tmon = _sub(hs, "tmon")

    def scqubits_labels():
        hs.generate_lookup(ordering="LX", subsys_priority=[1, 0])
        return [hs.dressed_index(b) for b in np.ndindex(3, 4)], hs.eigenvals(12)

    labels, evals = scqubits_labels()
    solve = type(tmon).eigensys

    def flipped(evals_count=6, **kwargs):
        w, v = solve(tmon, evals_count=evals_count, **kwargs)
        v = v.copy()
        v[:, 2] *= -1
        return w, v

    tmon.eigensys = flipped
    flipped_labels, flipped_evals = scqubits_labels()
    np.testing.assert_allclose(flipped_evals, evals, atol=1e-12)
    assert flipped_labels != labels
    with pytest.raises(jbq.LabelAmbiguityError) as info:
        m.dressed_index((2, 1), ordering="LX", subsys_priority=[1, 0])
    assert str(info.value) == _hs_errors.HS_LX_PHASES.format(
        ordering="LX", label=(2, 1), subsystem=0, chosen=8, rival=7,
        why="its bare eigenvectors' phases",
    )  # fmt: skip


def test_be_refuses_a_tie_of_bare_energies():
    a = scq.Oscillator(E_osc=5.0, truncated_dim=3, id_str="a")
    b = scq.Oscillator(E_osc=5.0, truncated_dim=3, id_str="b")
    hs = scq.HilbertSpace([a, b])
    hs.add_interaction(g=0.05, op1=a.creation_operator, op2=b.annihilation_operator, add_hc=True)
    m = jbq.model(hs)
    with pytest.raises(jbq.LabelAmbiguityError) as info:
        m.dressed_index((1, 0), ordering="BE")
    assert str(info.value) == _hs_errors.HS_BE_TIE.format(a=(0, 1), b=(1, 0), energy=5.0)
    with pytest.raises(jbq.LabelAmbiguityError, match="depends on rounding"):
        m.dressed_index((1, 0), ordering="LX")  # (|01> +- |10>)/sqrt(2): a tie of overlaps


# -- add_interaction(qobj=...)


def _with_qobj(ng):
    hs = transmon_resonator(ng)
    tmon, osc = _sub(hs, "tmon"), _sub(hs, "osc")
    n: Any = scq.identity_wrap(tmon.n_operator(), tmon, hs.subsystem_list,
                          evecs=tmon.eigensys(evals_count=3)[1])  # fmt: skip
    hs.add_interaction(qobj=0.05 * n * (hs.annihilate(osc) + hs.annihilate(osc).dag()))
    return hs


def test_qobj_term_equals_scqubits():
    # At the object's values: the Qobj refers to scqubits' bare phases there (complex at
    # ng = 0.1, unlike the model's), and the model takes it to its own.
    hs = _with_qobj(0.1)
    m = jbq.model(hs)
    assert m.params["g"] == [0.1, None]
    delta = _bare_phase_map(m, hs)
    assert np.max(np.abs(delta - 1)) > 0.1  # the phases differ: the test sees a missing transform
    h = np.asarray(m.hamiltonian())
    want = delta[:, None] * hs.hamiltonian().full() * delta.conj()
    np.testing.assert_allclose(h, want, atol=1e-12)
    np.testing.assert_allclose(m.eigenvals(evals_count=12), hs.eigenvals(12), atol=1e-10)
    # A sweep: the Qobj stays fixed in the bare basis; at ng = 0 scqubits' phases stay too.
    hs = _with_qobj(0.0)
    m = jbq.model(hs)
    delta = _bare_phase_map(m, hs)
    ejs = np.array([19.0, 20.0, 21.0])
    sweep = _sweep(hs, ejs, 12)
    for ej in ejs:
        _sub(hs, "tmon").EJ = ej
        phases = _bare_phase_map(m, hs, {"tmon": {"EJ": ej}})
        np.testing.assert_allclose(phases, delta, atol=1e-8)
    got = m.eigenvals({"tmon": {"EJ": jnp.asarray(ejs)}}, evals_count=12)
    np.testing.assert_allclose(got, sweep["evals"].toarray(), atol=1e-10)

    # The derivative in E_osc (scqubits' LAPACK flips the transmon's level-2 sign at EJ =
    # 19.998, where its own Qobj changes meaning; the oscillator's basis has no phases).
    def level(e_osc):
        return m.eigenvals({"osc": {"E_osc": e_osc}}, evals_count=3)[2]

    def scqubits_level(e_osc):
        _sub(hs, "osc").E_osc = e_osc
        return hs.eigenvals(3)[2]

    _sub(hs, "tmon").EJ = 20.0
    want = central_difference(scqubits_level, 6.0, 1e-3)
    np.testing.assert_allclose(jax.grad(level)(6.0), want, rtol=1e-7)


# -- bad input


def test_errors_name_the_cause():
    hs = transmon_resonator()
    m = jbq.model(hs)
    cases = [
        (lambda: m.transitions(initial=(3, 0)), _hs_errors.HS_LEVEL.format(
            method="transitions", what="initial state", got=(3, 0), n=2, dims=[3, 4], k=12)),
        (lambda: m.transitions(final=12), _hs_errors.HS_LEVEL.format(
            method="transitions", what="final state", got=12, n=2, dims=[3, 4], k=12)),
        (lambda: m.transitions(subsystems="qubit"), _hs_errors.HS_SUBSYSTEMS.format(
            method="transitions", got="qubit", known=["tmon", "osc"])),
        (lambda: m.op_in_dressed_eigenbasis(("qubit", "n_operator")), _hs_errors.HS_OP.format(
            method="op_in_dressed_eigenbasis", got=("qubit", "n_operator"))),
        (lambda: m.op_in_dressed_eigenbasis(("tmon", "n_operator"), truncated_dim=13),
         _hs_errors.HS_TRUNCATE.format(method="op_in_dressed_eigenbasis", most=12, got=13)),
        (lambda: m.dressed_index((0, 0), ordering="XY"), _hs_errors.HS_ORDERING.format(
            method="dressed_index", got="XY")),
        (lambda: m.dressed_index((0, 0), ordering="LX", subsys_priority=[0, 0]),
         _hs_errors.HS_PRIORITY.format(method="dressed_index", last=1, got=[0, 0])),
        (lambda: m.bare_index(0, evals_count=6, ordering="LX"), _hs_errors.HS_LX_EVALS.format(
            method="bare_index", dim=12, got=6)),
        (lambda: m.dressed_state_components(12), _hs_errors.HS_DRESSED.format(
            method="dressed_state_components", got=12, k=12)),
        (lambda: m.dressed_state_components((0, 4)), _hs_errors.HS_BARE.format(
            method="dressed_state_components", got=(0, 4), n=2, dims=[3, 4])),
    ]  # fmt: skip
    for call, text in cases:
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == text
    with pytest.raises(ValueError, match="has no operator `x_operator`"):
        m.op_in_dressed_eigenbasis(("osc", "x_operator"))
    hs = transmon_resonator()
    hs.add_interaction(qobj=hs.hubbard_operator(0, 1, _sub(hs, "tmon")))
    with pytest.raises(ValueError) as info:
        jbq.model(hs)
    assert str(info.value) == _hs_errors.HS_QOBJ_HERMITIAN.format(index=1, got=1.0)
    hs = transmon_resonator()
    hs.add_interaction(qobj=qutip.qeye(5), check_validity=False)
    with pytest.raises(ValueError) as info:
        jbq.model(hs)
    assert str(info.value) == _hs_errors.HS_QOBJ_SHAPE.format(
        index=1, got=(5, 5), dim=12, dims=[3, 4]
    )
    hs = transmon_resonator()
    hs.add_interaction(qobj=0.0 * hs.hubbard_operator(0, 0, _sub(hs, "tmon")))
    with pytest.raises(ValueError) as info:
        jbq.model(hs).eigenvals({"g": [0.1, 0.2]})
    assert str(info.value) == _hs_errors.HS_G_QOBJ.format(method="eigenvals", index=1, got=0.2)
