"""Gates from scqubits' objects against the path users take now: scqubits builds the
Hamiltonian and collapse operators, qutip 5 evolves them (float64, tight tolerances on both
sides). Each comparison is one compiled solve (diffrax), so the file stays short."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxbridge.scqubits as jbq

scq = pytest.importorskip("scqubits")
qt = pytest.importorskip("qutip")
pytest.importorskip("diffrax")

from jaxbridge.scqubits import dynamics  # noqa: E402

TOL = {"rtol": 1e-10, "atol": 1e-10}
QUTIP = {"rtol": 1e-11, "atol": 1e-12, "nsteps": 10**7, "method": "adams"}
TWO_PI = 2 * np.pi


@pytest.fixture(autouse=True)
def _x64(x64):
    scq.settings.T1_DEFAULT_WARNING = False
    yield


def _pauli_states():
    """The six Pauli eigenstates: a 2-design, so their mean fidelity is the average one."""
    s = 1 / np.sqrt(2)
    return [np.array(v, dtype=complex) for v in
            ([1, 0], [0, 1], [s, s], [s, -s], [s, 1j * s], [s, -1j * s])]  # fmt: skip


def _qutip_gate_fidelity(h0, drives, target, subspace, tlist, c_ops=None):
    """The average gate fidelity as a qutip user computes it: the 2-design average of the
    state fidelity over the subspace, in the frame of `h0` (d = 2), leakage counted."""
    k = h0.shape[0]
    H = [qt.Qobj(TWO_PI * h0)] + [[qt.Qobj(TWO_PI * op), f] for op, f in drives]
    frame = np.exp(1j * TWO_PI * np.diag(h0) * tlist[-1])
    fidelities = []
    for v in _pauli_states():
        psi = np.zeros(k, dtype=complex)
        psi[subspace] = v
        want = np.zeros(k, dtype=complex)
        want[subspace] = target @ v
        rho0 = qt.ket2dm(qt.Qobj(psi[:, None]))
        result = qt.mesolve(H, rho0, tlist, c_ops or [], options=QUTIP)
        rho = result.states[-1].full()
        rho = frame[:, None] * rho * frame[None, :].conj()
        fidelities.append(np.real(want.conj() @ rho @ want))
    return float(np.mean(fidelities))


def _gaussian(t, args):
    amp, freq = args["amp"], args["freq"]
    return amp * jnp.exp(-(((t - 10.0) / 4.0) ** 2)) * jnp.cos(TWO_PI * freq * t)


def _np_gaussian(amp, freq):
    return lambda t: amp * np.exp(-(((t - 10.0) / 4.0) ** 2)) * np.cos(TWO_PI * freq * t)


X = np.array([[0, 1], [1, 0]], dtype=complex)


def _transmon_x(tmon, amp, levels=3):
    e = tmon.eigenvals(evals_count=levels)
    h0 = np.diag(e - e[0])
    n = tmon.matrixelement_table("n_operator", evals_count=levels)
    f01 = e[1] - e[0]
    return _qutip_gate_fidelity(h0, [(n, _np_gaussian(amp, f01))], X, [0, 1], np.array([0, 20.0]))


def test_driven_transmon_and_vmap_over_pulses_equal_qutip():
    tmon = scq.Transmon(EJ=15.0, EC=0.3, ng=0.0, ncut=8)
    m = jbq.model(tmon)
    f01 = float(np.diff(tmon.eigenvals(evals_count=2))[0])

    @jax.jit
    @jax.vmap
    def fidelity(amp):
        h = dynamics.static_hamiltonian(m, levels=3)
        n = dynamics.drive_operator(m, "n_operator", levels=3)
        pulse = dynamics.smooth(_gaussian, {"amp": amp, "freq": f01})
        return dynamics.gate_fidelity(h, [(n, pulse)], X, [0, 1], jnp.array([0.0, 20.0]), **TOL)

    amps = np.array([0.05, 0.09])
    got = fidelity(jnp.asarray(amps))[:, -1]
    want = [_transmon_x(tmon, a) for a in amps]
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert want[1] > 0.5  # a real rotation, not a fidelity near the identity's


def test_gradient_in_a_circuit_parameter_equals_qutip_differences():
    tmon = scq.Transmon(EJ=15.0, EC=0.3, ng=0.0, ncut=8)
    m = jbq.model(tmon)
    f01 = float(np.diff(tmon.eigenvals(evals_count=2))[0])
    amp = 0.09

    def fidelity(ej, gradient):
        p = {"EJ": ej}
        h = dynamics.static_hamiltonian(m, p, levels=3)
        n = dynamics.drive_operator(m, "n_operator", p, levels=3)
        pulse = dynamics.smooth(_gaussian, {"amp": amp, "freq": f01})
        tsave = jnp.array([0.0, 20.0])
        drives = [(n, pulse)]
        return dynamics.gate_fidelity(h, drives, X, [0, 1], tsave, gradient=gradient, **TOL)[-1]

    # The default, reverse mode through diffrax's loop (the discrete adjoint: below).
    got = jax.jit(jax.grad(fidelity), static_argnums=1)(15.0, "checkpointed")
    step = 1e-4

    def qutip_at(ej):
        obj = scq.Transmon(EJ=ej, EC=0.3, ng=0.0, ncut=8)
        e = obj.eigenvals(evals_count=3)
        n = obj.matrixelement_table("n_operator", evals_count=3)
        drive = _np_gaussian(amp, f01)  # the pulse held fixed, the qubit detuned
        return _qutip_gate_fidelity(np.diag(e - e[0]), [(n, drive)], X, [0, 1], np.array([0, 20.0]))

    want = (qutip_at(15.0 + step) - qutip_at(15.0 - step)) / (2 * step)
    assert abs(want) > 1e-3
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_fluxonium_with_its_t1_channels_equals_qutip_mesolve():
    flux = scq.Fluxonium(EJ=4.0, EC=1.0, EL=1.0, flux=0.5, cutoff=30)
    m = jbq.model(flux)
    k = 3
    channels = ["t1_capacitive", "t1_inductive"]
    options = {
        "t1_capacitive": {"Q_cap": 2e3, "T": 0.05},
        "t1_inductive": {"Q_ind": 2e4, "T": 0.05},
    }
    e = flux.eigenvals(evals_count=k)
    f01 = float(e[1] - e[0])
    times = jnp.linspace(0.0, 20.0, 11)
    values = 0.08 * jnp.cos(TWO_PI * f01 * (times[:-1] + 1.0))

    @jax.jit
    def fidelity(values):
        h = dynamics.static_hamiltonian(m, levels=k)
        n = dynamics.drive_operator(m, "n_operator", levels=k)
        jumps = dynamics.jump_operators(m, levels=k, channels=channels, options=options)
        drive = (n, dynamics.pwc(times, values))
        return dynamics.gate_fidelity(h, [drive], X, [0, 1], times, jump_ops=jumps, **TOL)

    got = fidelity(values)[-1]
    # The qutip path: scqubits' rates i -> j for each kept pair as collapse operators.
    c_ops = []
    for i in range(k):
        for j in range(k):
            if i != j:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    rate = sum(getattr(flux, c)(i=i, j=j, total=False, get_rate=True, **options[c])
                               for c in channels)  # fmt: skip
                c_ops.append(np.sqrt(rate) * qt.basis(k, j) * qt.basis(k, i).dag())
    n = flux.matrixelement_table("n_operator", evals_count=k)
    vs = np.asarray(values)
    tb = np.asarray(times)

    def step(t):
        i = np.searchsorted(tb, t, side="right") - 1
        return vs[i] if 0 <= i < len(vs) else 0.0

    # qutip integrates across the jumps of a step function only with small steps: sample it
    # on a fine grid, as a user does (`qutip.coefficient` of an array, "step" interpolation).
    fine = np.linspace(0.0, 20.0, 20001)
    coeff = qt.coefficient(np.array([step(t) for t in fine]), tlist=fine, order=0)
    want = _qutip_gate_fidelity(
        np.diag(e - e[0]), [(n, coeff)], X, [0, 1], np.array([0, 20.0]), c_ops
    )
    closed = _qutip_gate_fidelity(np.diag(e - e[0]), [(n, coeff)], X, [0, 1], np.array([0, 20.0]))
    assert abs(closed - want) > 1e-3  # the channels matter at this strength
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_two_coupled_transmons_equal_qutip():
    t1 = scq.Transmon(EJ=15.0, EC=0.3, ng=0.0, ncut=6, truncated_dim=3, id_str="q1")
    t2 = scq.Transmon(EJ=18.0, EC=0.28, ng=0.0, ncut=6, truncated_dim=3, id_str="q2")
    hs = scq.HilbertSpace([t1, t2])
    hs.add_interaction(g=0.02, op1=t1.n_operator, op2=t2.n_operator)
    m = jbq.model(hs)
    k = 5
    hs.generate_lookup()
    i00, i10 = hs.dressed_index((0, 0)), hs.dressed_index((1, 0))
    e = hs.eigenvals(evals_count=k)
    f = float(e[i10] - e[i00])
    tsave = jnp.array([0.0, 20.0])

    @jax.jit
    def populations():
        h = dynamics.static_hamiltonian(m, levels=k)
        n1 = dynamics.drive_operator(m, (t1, "n_operator"), levels=k)
        pulse = dynamics.smooth(_gaussian, {"amp": 0.06, "freq": f})
        return dynamics.transition_fidelity(h, [(n1, pulse)], i00, i10, tsave, **TOL)

    got = populations()[-1]
    # The qutip path: the dressed Hamiltonian and scqubits' operator in the dressed basis.
    h0 = np.diag(e - e[0])
    n1 = hs.op_in_dressed_eigenbasis(t1.n_operator, truncated_dim=k).full()
    H = [qt.Qobj(TWO_PI * h0), [qt.Qobj(TWO_PI * n1), _np_gaussian(0.06, f)]]
    result = qt.sesolve(H, qt.basis(k, i00), np.asarray(tsave), options=QUTIP)
    want = abs(result.states[-1].full()[i10, 0]) ** 2
    assert want > 0.1
    np.testing.assert_allclose(got, want, atol=1e-6)


# -- bad input: the messages are pinned


def _transmon():
    return jbq.model(scq.Transmon(EJ=15.0, EC=0.3, ng=0.0, ncut=4))


def test_a_target_on_levels_not_kept_is_refused():
    h = jnp.diag(jnp.array([0.0, 5.0, 9.8]))
    with pytest.raises(ValueError) as info:
        dynamics.gate_fidelity(h, [], np.eye(2), [0, 3], jnp.array([0.0, 1.0]))
    assert str(info.value) == (
        "`gate_fidelity`: the computational subspace must be distinct levels among the 3 kept "
        "(0 to 2); got [0, 3]. Keep more levels (`levels=`) or choose kept ones."
    )
    with pytest.raises(ValueError, match=r"must be a \(2, 2\) unitary on the 2 levels"):
        dynamics.gate_fidelity(h, [], np.eye(3), [0, 1], jnp.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="must be levels among the 3 kept"):
        dynamics.transition_fidelity(h, [], 0, 5, jnp.array([0.0, 1.0]))


def test_a_channel_the_model_does_not_have_is_refused():
    m = _transmon()
    with pytest.raises(ValueError) as info:
        dynamics.jump_operators(m, levels=2, channels=["t1_inductive"])
    assert str(info.value) == (
        "`jump_operators`: this model has no noise channel 't1_inductive'. Its channels are "
        f"{m.supported_noise_channels()} (`model.supported_noise_channels()`); T1 channels "
        "start with `t1_`, pure dephasing with `tphi_`."
    )


def test_a_pulse_whose_shape_does_not_match_its_grid_is_refused():
    with pytest.raises(ValueError) as info:
        dynamics.pwc(jnp.linspace(0.0, 10.0, 11), jnp.ones(11))
    assert str(info.value) == (
        "`pwc(times, values)`: `values` must have one entry per interval of `times` "
        "(len(times) - 1 = 10, shape (10,)); got `times` of shape (11,) and `values` of shape "
        "(11,). A pulse of n values needs n + 1 boundary times."
    )


def test_jump_operators_carry_scqubits_rates():
    """Cheap (no solver): each |j><i| carries scqubits' rate, the dephasing its 1/Tphi."""
    obj = scq.Transmon(EJ=15.0, EC=0.3, ng=0.3, ncut=6)
    m = jbq.model(obj)
    ops = np.asarray(
        dynamics.jump_operators(m, levels=3, channels=["t1_capacitive", "tphi_1_over_f_ng"])
    )
    assert ops.shape == (7, 3, 3)
    for op, (i, j) in zip(ops[:6], [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]):
        rate = obj.t1_capacitive(i=i, j=j, total=False, get_rate=True)
        np.testing.assert_allclose(abs(op[j, i]) ** 2, rate, rtol=1e-8)
    deph = np.diag(ops[6])
    for j in (1, 2):
        rate = obj.tphi_1_over_f_ng(i=0, j=j, get_rate=True)
        np.testing.assert_allclose(deph[j] ** 2 / 2, rate, rtol=1e-8)


def test_a_generic_channel_carries_scqubits_rates_and_needs_its_operator():
    """scqubits' generic `t1` (a noise operator and spectral density of one's own)."""
    obj = scq.Fluxonium(EJ=4.0, EC=1.0, EL=1.0, flux=0.45, cutoff=30)
    m = jbq.model(obj)
    density = {"jax": lambda w, T: 1e-7 * jnp.abs(w), "np": lambda w, T: 1e-7 * np.abs(w)}
    given = {"noise_op": "phi_operator", "spectral_density": density["jax"]}
    ops = np.asarray(dynamics.jump_operators(m, levels=2, channels=[("t1", given)]))
    for op, (i, j) in zip(ops, [(0, 1), (1, 0)]):
        rate = obj.t1(i, j, obj.phi_operator(), density["np"], total=False, get_rate=True)
        np.testing.assert_allclose(abs(op[j, i]) ** 2, rate, rtol=1e-8)
    with pytest.raises(ValueError) as info:
        dynamics.jump_operators(m, levels=2, channels=["t1"])
    assert str(info.value) == (
        "`jump_operators`: scqubits' generic channel 't1' needs ['noise_op', "
        "'spectral_density'] in its options: `channels=[('t1', {'noise_op': 'n_operator', "
        "...})]` or `options={'t1': {...}}`."
    )
    with pytest.raises(ValueError, match="`t1_effective` and `t2_effective` are sums"):
        dynamics.jump_operators(m, levels=2, channels=["t1_effective"])


def test_pulses_cross_jit_as_arguments():
    pulse = dynamics.smooth(lambda t, a: a["amp"] * jnp.sin(t), {"amp": 2.0})
    step = dynamics.pwc(jnp.array([0.0, 1.0, 2.0]), jnp.array([3.0, 4.0]))
    at = jax.jit(lambda p, q, t: p(t) + q(t))
    np.testing.assert_allclose(at(pulse, step, 1.5), 2.0 * np.sin(1.5) + 4.0)


def test_lab_frame_states_equal_qutip_sesolve():
    """`solve` integrates in the levels' frame; its lab-frame states are qutip's, phases too."""
    tmon = scq.Transmon(EJ=15.0, EC=0.3, ng=0.0, ncut=8)
    e = tmon.eigenvals(evals_count=3)
    h0 = np.diag(e - e[0])
    n = tmon.matrixelement_table("n_operator", evals_count=3)
    pulse = dynamics.smooth(_gaussian, {"amp": 0.07, "freq": float(e[1] - e[0])})
    tsave = np.array([0.0, 7.0, 20.0])
    ket = np.array([[1.0], [0.0], [0.0]])
    got = dynamics.solve(jnp.asarray(h0), [(jnp.asarray(n), pulse)], ket, tsave, **TOL)
    H = [qt.Qobj(TWO_PI * h0), [qt.Qobj(TWO_PI * n), _np_gaussian(0.07, float(e[1] - e[0]))]]
    want = qt.sesolve(H, qt.Qobj(ket), tsave, options=QUTIP).states
    for g, w in zip(np.asarray(got), want):
        np.testing.assert_allclose(g, w.full(), atol=1e-6)
    rho = dynamics.solve(jnp.asarray(h0), [(jnp.asarray(n), pulse)], ket, tsave, jump_ops=[], **TOL)
    np.testing.assert_allclose(rho[-1], want[-1].full() @ want[-1].full().conj().T, atol=1e-6)


def test_an_unknown_solver_option_is_refused():
    h = jnp.diag(jnp.array([0.0, 5.0]))
    with pytest.raises(ValueError) as info:
        dynamics.solve(h, [], np.eye(2)[:, :1], jnp.array([0.0, 1.0]), gradient="backsolve")
    assert str(info.value) == (
        "`solve(gradient=...)` must be one of ('checkpointed', 'adjoint', 'direct', 'forward', "
        "'sensitivity'); got 'backsolve'. 'checkpointed', 'adjoint' and 'direct' are reverse "
        "mode (`jax.grad`), 'forward' and 'sensitivity' are forward mode (`jax.jacfwd`)."
    )
    with pytest.raises(ValueError) as info:
        dynamics.solve(h, [], np.eye(2)[:, :1], jnp.array([0.0, 1.0]), method="rk4")
    assert str(info.value) == (
        "`solve(method=...)` must be one of ('dopri8', 'tsit5', 'dopri5') (explicit "
        "Runge-Kutta methods with adaptive steps); got 'rk4'."
    )


def test_the_discrete_adjoint_equals_central_differences():
    """`gradient="adjoint"` against central differences of the solve: a damped, driven
    qubit, a smooth pulse, cotangents at three save times (the adjoint runs per interval);
    a `pwc` pulse is refused (its jumps are not retraced exactly)."""
    h = jnp.diag(jnp.array([0.0, 1.0]))
    sx = jnp.array([[0.0, 1.0], [1.0, 0.0]])
    decay = jnp.array([[0.0, 0.2], [0.0, 0.0]])
    tsave = jnp.array([0.0, 1.5, 3.0])

    def loss(amp, rate, gradient):
        drives = [(sx, dynamics.smooth(lambda t, a: a * jnp.sin(2.0 * t), amp))]
        rho = dynamics.solve(h, drives, jnp.array([[1.0], [0.0]]), tsave,
                             jump_ops=[rate * decay], gradient=gradient, **TOL)  # fmt: skip
        return jnp.sum(jnp.real(rho[:, 1, 1]) * jnp.array([0.0, 1.0, 2.0]))

    got = jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)(0.4, 1.0, "adjoint")
    # Central differences of the value (one compiled solve, cheaper than a second gradient).
    value = jax.jit(lambda amp, rate: loss(amp, rate, "checkpointed"))
    step = 1e-4
    want = ((value(0.4 + step, 1.0) - value(0.4 - step, 1.0)) / (2 * step),
            (value(0.4, 1.0 + step) - value(0.4, 1.0 - step)) / (2 * step))  # fmt: skip
    assert abs(float(want[1])) > 1e-3 and abs(float(want[0])) > 1e-2
    np.testing.assert_allclose(got, want, atol=1e-6)
    step = dynamics.pwc(jnp.linspace(0.0, 3.0, 4), jnp.array([0.3, 0.1, -0.2]))
    with pytest.raises(ValueError) as info:
        dynamics.solve(h, [(sx, step)], jnp.array([[1.0], [0.0]]), tsave, gradient="adjoint")
    assert str(info.value) == (
        "`solve(gradient='adjoint')` takes smooth pulses only: a step of the solver that ends "
        "on a `pwc` pulse's jump is not retraced exactly backward in time; got a `pwc` pulse. "
        "Use `gradient='checkpointed'` for `pwc` pulses."
    )


def test_forward_sensitivities_equal_central_differences_and_forward_mode():
    """`gradient="sensitivity"` (all of `jacfwd`'s tangents as columns of one augmented
    solve) against central differences of the solve and diffrax's forward mode: Lindblad's
    equation (lab frame, real arithmetic) with a smooth and a `pwc` drive, Schrodinger's (the
    levels' frame) with the gate's duration among the inputs (a save time's tangent)."""
    h = jnp.diag(jnp.array([0.0, 1.0]))
    sx = jnp.array([[0.0, 1.0], [1.0, 0.0]])
    sy = jnp.array([[0.0, -1j], [1j, 0.0]])
    decay = jnp.array([[0.0, 0.2], [0.0, 0.0]])

    def loss(x, gradient):
        amp, rate, level, duration = x
        tsave = jnp.array([0.0, 1.5, duration])
        steps = dynamics.pwc(jnp.linspace(0.0, 3.0, 4), jnp.array([0.3, 0.1, -0.2]) * amp)
        drives = [(sx, dynamics.smooth(lambda t, a: a * jnp.sin(2.0 * t), amp)), (sy, steps)]
        hx = h * level
        rho = dynamics.solve(hx, drives, jnp.array([[1.0], [0.0]]), tsave,
                             jump_ops=[rate * decay], gradient=gradient, **TOL)  # fmt: skip
        psi = dynamics.solve(hx, drives[:1], jnp.array([[1.0], [0.0]]), tsave,
                             gradient=gradient, **TOL)  # fmt: skip
        weights = jnp.array([0.0, 1.0, 2.0])
        return jnp.sum((jnp.real(rho[:, 1, 1]) + jnp.abs(psi[:, 1, 0]) ** 2) * weights)

    x = jnp.array([0.4, 1.0, 1.1, 3.2])
    got = jax.jit(jax.jacfwd(lambda x: loss(x, "sensitivity")))(x)
    forward = jax.jit(jax.jacfwd(lambda x: loss(x, "forward")))(x)
    np.testing.assert_allclose(got, forward, atol=1e-9)
    value = jax.jit(lambda x: loss(x, "checkpointed"))
    step = 1e-4
    want = np.array([(value(x.at[i].add(step)) - value(x.at[i].add(-step))) / (2 * step)
                     for i in range(4)])  # fmt: skip
    assert np.min(np.abs(want)) > 1e-2
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_allclose(loss(x, "sensitivity"), value(x), atol=1e-10)


def _linear_systems():
    """A driven three-level ket system in the levels' frame and the same system's damped
    Liouvillian in the lab frame: `(args, y0)` as `_solve.integrate` hands them to diffrax."""
    from jaxbridge.scqubits.dynamics import _solve

    h = 2 * np.pi * jnp.diag(jnp.array([0.0, 1.0, 1.9], dtype=complex))
    op = 2 * np.pi * jnp.array([[0, 1, 0], [1, 0, 1.4], [0, 1.4, 0]], dtype=complex)
    pulse = dynamics.smooth(lambda t, a: a * jnp.sin(2 * np.pi * 0.95 * t) * jnp.exp(-t), 0.3)
    omega = jnp.real(jnp.diagonal(h))
    frame = 1j * jnp.diag(omega).astype(complex)
    kets = ((-1j * h + frame, [(-1j * op, pulse)], omega), jnp.eye(3, 2, dtype=complex))
    decay = jnp.sqrt(0.3) * jnp.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=complex)
    dissipator = _solve.dissipator_superoperator([decay], 3, complex)
    static = _solve.commutator_superoperator(h) + dissipator
    rho0 = jnp.eye(9, 2, dtype=complex)
    lindblad = ((static, [(_solve.commutator_superoperator(op), pulse)], None), rho0)
    return {"kets, levels' frame": kets, "Lindblad, lab frame": lindblad}


@pytest.mark.parametrize("system", ["kets, levels' frame", "Lindblad, lab frame"])
def test_the_written_dopri8_step_is_diffrax_dopri8(system):
    """The Dormand-Prince 8(7) step written out for `y' = G(t) y` (`_dopri8`) against
    diffrax's own `Dopri8` on the same field: one step (its state, error estimate, dense
    output and FSAL stage) to 1e-12, a first step and one after it; and a whole adaptive
    solve takes the same steps (to rounding) to the same states."""
    import diffrax

    from jaxbridge.scqubits.dynamics import _dopri8, _solve

    args, y0 = _linear_systems()[system]
    term = diffrax.ODETerm(_solve._field)
    ours, theirs = _dopri8.linear_dopri8(_solve._generator), diffrax.Dopri8()

    def two_steps(solver):
        state = solver.init(term, 0.0, 0.1, y0, args)
        y1, _, _, state, _ = solver.step(term, 0.0, 0.1, y0, args, state, False)
        y2, error, dense, state, _ = solver.step(term, 0.1, 0.25, y1, args, state, False)
        return y1, y2, error, dense["k"], state[1]

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Complex dtype")
        got, want = jax.jit(lambda: (two_steps(ours), two_steps(theirs)))()
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)

        # A first step given: diffrax's own choice (dt0=None) starts with a step whose error
        # estimate is rounding noise, and the two roundings then differ in the next step.
        def solve(solver):
            controller = diffrax.PIDController(rtol=1e-8, atol=1e-8)
            steps = diffrax.diffeqsolve(term, solver, 0.0, 6.0, 0.05, y0, args=args,
                                        saveat=diffrax.SaveAt(steps=True),
                                        stepsize_controller=controller)  # fmt: skip
            grid = diffrax.diffeqsolve(term, solver, 0.0, 6.0, 0.05, y0, args=args,
                                       saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 6.0, 7)),
                                       stepsize_controller=controller)  # fmt: skip
            return steps.ts, grid.ys, steps.stats["num_steps"], steps.stats["num_rejected_steps"]

        got, want = jax.jit(lambda: (solve(ours), solve(theirs)))()
    n = int(got[2])
    assert (n, int(got[3])) == (int(want[2]), int(want[3])) and n > 40
    np.testing.assert_allclose(got[0][:n], want[0][:n], rtol=1e-8)  # the steps' ends
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-11)  # dense output on a grid
