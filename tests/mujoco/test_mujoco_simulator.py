"""`Simulator` under jit, vmap, scan, grad, jacfwd and jacrev, against raw MuJoCo."""

from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from test_mujoco_models import GYM, arm, gym, random_states, raw_forward, raw_rollout

from jaxbridge.mujoco import Simulator, Trajectory


@pytest.fixture(scope="module")
def sims():
    return {env_id: Simulator(*gym(env_id)[:1], frame_skip=gym(env_id)[1]) for env_id in GYM}


@pytest.mark.parametrize("env_id", GYM)
def test_step_and_rollout_equal_mujoco_bit_for_bit(sims, env_id, x64):
    sim = sims[env_id]
    model, frame_skip = gym(env_id)
    S = random_states(model, 3)
    U = np.random.default_rng(0).uniform(-0.4, 0.4, (3, 4, model.nu))
    refs = [raw_rollout(model, S[i], U[i], frame_skip) for i in range(3)]
    # jit, one element at a time
    step = jax.jit(sim.step)
    for i in range(3):
        np.testing.assert_array_equal(step(S[i], U[i, 0]), refs[i][0][0])
    # vmap equals the loop; a leading batch dimension equals vmap
    batched = jax.jit(jax.vmap(sim.step))(S, U[:, 0])
    np.testing.assert_array_equal(batched, np.stack([r[0][0] for r in refs]))
    np.testing.assert_array_equal(sim.step(S, U[:, 0]), batched)
    # rollout, batched, under jit
    traj = jax.jit(sim.rollout)(S, U)
    assert isinstance(traj, Trajectory) and not traj.diverged.any()
    np.testing.assert_array_equal(traj.state, np.stack([r[0] for r in refs]))

    # A scan of steps equals single raw steps, each from a fresh MjData: `step` carries no
    # solver warm start from one call to the next (a rollout does, within itself).
    def scan(s, us):
        return jax.lax.scan(lambda c, u: (sim.step(c, u),) * 2, s, us)[1]

    scanned = jax.jit(jax.vmap(scan))(S, U)
    for i in range(3):
        s = S[i]
        for t in range(4):
            s = raw_rollout(model, s, U[i, t : t + 1], frame_skip)[0][0]
            np.testing.assert_array_equal(scanned[i, t], s)


def test_float32_matches_to_rounding(sims):
    sim = sims["Hopper-v5"]
    model, frame_skip = gym("Hopper-v5")
    S = random_states(model, 2)
    U = np.full((2, model.nu), 0.2)
    out = jax.jit(sim.step)(jnp.asarray(S, jnp.float32), jnp.asarray(U, jnp.float32))
    assert out.dtype == jnp.float32
    ref = np.stack(
        [
            raw_rollout(model, np.float32(S[i]).astype(float), U[i : i + 1], frame_skip)[0][0]
            for i in range(2)
        ]
    )
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_forward_equals_mujoco(x64):
    model = arm()
    sim = Simulator(model)
    S = random_states(model, 3)
    U = np.random.default_rng(1).uniform(-1, 1, (3, model.nu))
    names = ("xpos", "xquat", "site_xpos", "sensordata", "qacc")
    out = jax.jit(jax.vmap(lambda s, u: sim.forward(s, u, outputs=names)))(S, U)
    for i in range(3):
        ref, _ = raw_forward(model, S[i], U[i], names)
        for name in names:
            np.testing.assert_array_equal(out[name][i], ref[name])


def test_in_axes_patterns_and_nesting(x64):
    model = arm()
    sim = Simulator(model, frame_skip=2)
    S = random_states(model, 3)
    U = np.random.default_rng(2).uniform(-1, 1, (2, model.nu))
    loop = np.stack(
        [[raw_rollout(model, S[i], U[j : j + 1], 2)[0][0] for j in range(2)] for i in range(3)]
    )
    nested = jax.jit(jax.vmap(jax.vmap(sim.step, (None, 0)), (0, None)))(S, U)
    np.testing.assert_array_equal(nested, loop)
    np.testing.assert_array_equal(jax.vmap(sim.step, (None, 0))(S[1], U), loop[1])
    np.testing.assert_array_equal(jax.vmap(sim.step, (0, None))(S, U[0]), loop[:, 0])


def _raw_loss(model, frame_skip, state, ctrls):
    states, sensors = raw_rollout(model, state, ctrls, frame_skip)
    return np.sum(states[:, 1:] ** 2) + np.sum(sensors**2)


@pytest.mark.parametrize("integrator", ["implicitfast", "RK4"])
def test_rollout_gradient_against_raw_central_differences(integrator, x64):
    model = arm(integrator)
    sim = Simulator(model, frame_skip=2)
    state = random_states(model, 1, qvel=0.3)[0]
    ctrls = np.random.default_rng(3).uniform(-0.3, 0.3, (20, model.nu))

    def loss(s, u):
        traj = sim.rollout(s, u)
        return jnp.sum(traj.state[:, 1:] ** 2) + jnp.sum(traj.sensordata**2)

    np.testing.assert_allclose(jax.jit(loss)(state, ctrls), _raw_loss(model, 2, state, ctrls))
    g_state, g_ctrl = jax.jit(jax.grad(loss, argnums=(0, 1)))(state, ctrls)
    eps = 1e-6
    for j in [1, 4, 5, 13, 20, 23]:  # positions (a quaternion), velocities, act
        e = np.zeros_like(state)
        e[j] = eps
        fd = (_raw_loss(model, 2, state + e, ctrls) - _raw_loss(model, 2, state - e, ctrls)) / (
            2 * eps
        )
        np.testing.assert_allclose(g_state[j], fd, rtol=1e-5, atol=1e-5)
    for t, k in [(0, 0), (7, 1), (19, 0)]:
        e = np.zeros_like(ctrls)
        e[t, k] = eps
        fd = (_raw_loss(model, 2, state, ctrls + e) - _raw_loss(model, 2, state, ctrls - e)) / (
            2 * eps
        )
        np.testing.assert_allclose(g_ctrl[t, k], fd, rtol=1e-5, atol=1e-5)


def test_check_grads_step_rollout_forward(x64):
    sim = Simulator(arm(), frame_skip=2)
    state = jnp.asarray(random_states(sim.model, 1, qvel=0.2)[0])
    ctrl = jnp.array([0.1, -0.2])
    tol = dict(atol=1e-4, rtol=1e-4, eps=1e-4)
    check_grads(sim.step, (state, ctrl), order=1, modes=("fwd", "rev"), **tol)
    check_grads(
        lambda s, u: sim.rollout(s, u).state,
        (state, jnp.tile(ctrl, (5, 1))),
        order=1,
        modes=("fwd", "rev"),
        **tol,
    )
    check_grads(
        lambda s: sim.forward(s, outputs=("xpos", "sensordata"))["xpos"],
        (state,),
        order=1,
        modes=("fwd", "rev"),
        **tol,
    )


def test_jacfwd_equals_jacrev_and_vmap_grad(x64):
    sim = Simulator(arm("RK4"))
    S = jnp.asarray(random_states(sim.model, 3, qvel=0.2))
    U = jnp.zeros((3, 4, sim.nu))
    f = lambda s, u: sim.rollout(s, u).sensordata  # noqa: E731
    fwd = jax.jit(jax.jacfwd(f, argnums=(0, 1)))(S[0], U[0])
    rev = jax.jit(jax.jacrev(f, argnums=(0, 1)))(S[0], U[0])
    for a, b in zip(fwd, rev, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
    loss = lambda s, u: jnp.sum(f(s, u) ** 2)  # noqa: E731
    per = jax.vmap(jax.grad(loss))(S, U)
    for i in range(3):
        np.testing.assert_allclose(per[i], jax.grad(loss)(S[i], U[i]), atol=1e-12)


def test_gradient_wrt_state_array_with_quaternions(x64):
    # The quaternion in qpos gets 4 gradient entries: the derivative w.r.t. the array held.
    sim = Simulator(arm())
    s = jnp.asarray(random_states(sim.model, 1, qvel=0.2)[0])
    f = lambda q: sim.step(sim.make_state(qpos=q, qvel=sim.split_state(s).qvel))[3]  # noqa: E731
    q = sim.split_state(s).qpos
    g = jax.grad(f)(q)
    eps = 1e-6
    for j in range(sim.model.nq):
        e = jnp.zeros_like(q).at[j].set(eps)
        np.testing.assert_allclose(g[j], (f(q + e) - f(q - e)) / (2 * eps), atol=1e-6)


def test_threads_calling_one_jitted_function():
    # float32: `jax.enable_x64` is a per-thread setting.
    model, frame_skip = gym("Ant-v5")
    sim = Simulator(model, frame_skip=frame_skip, nthread=2)
    S = jnp.asarray(random_states(model, 32))
    U = jnp.full((32, 10, model.nu), 0.3)
    f = jax.jit(lambda s, u: sim.rollout(s, u).state)
    serial = f(S, U)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: f(S, U), range(4)))
    for r in results:
        np.testing.assert_array_equal(r, serial)


def test_diverged_element_flagged_under_jit(tmp_path, monkeypatch, x64):
    monkeypatch.chdir(tmp_path)  # MuJoCo logs warnings to ./MUJOCO_LOG.TXT
    model, frame_skip = gym("Hopper-v5")
    sim = Simulator(model, frame_skip=frame_skip)
    S = jnp.asarray(random_states(model, 4)).at[2, 1 + model.nq].set(jnp.nan)
    traj = jax.jit(sim.rollout)(S, jnp.zeros((4, 3, model.nu)))
    assert traj.diverged.tolist() == [False, False, True, False]
    assert jnp.isfinite(traj.state).all()
    ok = jax.jit(sim.rollout)(S[:2], jnp.zeros((2, 3, model.nu)))
    np.testing.assert_array_equal(ok.state, traj.state[:2])


def test_rejected_controls_are_nan_under_jit(tmp_path, monkeypatch, x64):
    # MuJoCo zeroes every control of a step where one is beyond 1e10 after clamping (or NaN)
    # and carries on: a healthy-looking state from the wrong controls, and in `forward` the
    # accelerations of zero controls. The Hopper's actuators are clamped to [-1, 1]: clamping
    # makes 1e11 harmless, so the ranges are lifted here.
    monkeypatch.chdir(tmp_path)
    model, frame_skip = gym("Hopper-v5")
    model.actuator_ctrllimited[:] = 0
    sim = Simulator(model, frame_skip=frame_skip)
    S = jnp.asarray(random_states(model, 3)).at[:, 0].set(1.0)  # not time 0: no time tells
    U = jnp.zeros((3, model.nu)).at[1, 0].set(1e11).at[2, 2].set(0.5)
    step = jax.jit(jax.vmap(sim.step))(S, U)
    assert jnp.isnan(step[1]).all() and jnp.isfinite(step[jnp.array([0, 2])]).all()
    np.testing.assert_array_equal(jax.jit(sim.step)(S[1], U[1]), jnp.full(sim.nstate, jnp.nan))
    traj = jax.jit(sim.rollout)(S, jnp.broadcast_to(U[:, None], (3, 2, model.nu)))
    assert traj.diverged.tolist() == [False, True, False]
    out = jax.jit(sim.forward)(S, U.at[0, 1].set(jnp.nan))
    for name in ("xpos", "sensordata", "contact_dist"):
        assert jnp.isnan(out[name][:2]).all() and jnp.isfinite(out[name][2]).all()
    model.actuator_ctrllimited[:] = 1  # clamped: MuJoCo's own result, not flagged
    ref = raw_rollout(model, np.asarray(S[1]), np.clip(np.asarray(U[1:2]), -1, 1), frame_skip)
    np.testing.assert_array_equal(jax.jit(sim.step)(S[1], U[1]), ref[0][-1])


def test_derivatives_of_a_diverged_element_are_nan(tmp_path, monkeypatch, x64):
    # Differences around a reset (or a rejected control) are finite and mean nothing: a
    # gradient through a diverged element must be NaN, as its value is, and the other
    # elements' derivatives must not change. (They were 0, or the identity, before.)
    monkeypatch.chdir(tmp_path)
    model, frame_skip = gym("Hopper-v5")
    model.actuator_ctrllimited[:] = 0
    sim = Simulator(model, frame_skip=frame_skip)
    S = jnp.asarray(random_states(model, 3)).at[:, 0].set(1.0)
    S = S.at[1, 1 + model.nq].set(1e30)  # finite, but MuJoCo resets
    U = jnp.zeros((3, model.nu)).at[2, 0].set(1e11)  # MuJoCo replaces it by zero
    healthy = jnp.array([True, False, False])
    U2 = jnp.broadcast_to(U[:, None], (3, 2, model.nu))
    losses = {
        "step": lambda s, u: jnp.sum(sim.step(s, u[0]) ** 2),
        "rollout": lambda s, u: jnp.sum(sim.rollout(s, u).state ** 2),
        "forward": lambda s, u: jnp.sum(sim.forward(s, u[0], outputs=("qacc",))["qacc"] ** 2),
    }
    for name, loss in losses.items():
        args = (S, U[:, None]) if name != "rollout" else (S, U2)
        gs, gu = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1))))(*args)
        for i in range(3):
            if healthy[i]:
                assert jnp.isfinite(gs[i]).all() and jnp.isfinite(gu[i]).all(), name
                alone = jax.grad(loss, argnums=(0, 1))(args[0][i], args[1][i])
                np.testing.assert_allclose(gs[i], alone[0], rtol=1e-12, err_msg=name)
            elif name != "forward" or i == 2:  # forward warns on the control only
                assert jnp.isnan(gs[i]).all() and jnp.isnan(gu[i]).all(), (name, i)


def test_no_retrace():
    sim = Simulator(arm())
    traces = []

    @jax.jit
    def f(s, u):
        traces.append(None)
        return sim.step(s, u), sim.rollout(s, u[None]).state, sim.forward(s, u)["xpos"]

    s, u = sim.initial_state(), jnp.zeros(sim.nu)
    f(s, u)
    f(s + 0.0, u + 1.0)
    assert len(traces) == 1


def test_bad_sizes():
    sim = Simulator(arm())
    s, u = sim.initial_state(), jnp.zeros(sim.nu)
    with pytest.raises(
        ValueError,
        match=r"`Simulator.step\(state=...\)` must have trailing "
        r"dimension nstate=24 .*got shape \(23,\)",
    ):
        sim.step(s[:-1], u)
    with pytest.raises(
        ValueError,
        match=r"`Simulator.step\(ctrl=...\)` must have trailing "
        r"dimension nu=2 .*got shape \(3,\)",
    ):
        sim.step(s, jnp.zeros(3))
    with pytest.raises(ValueError, match=r"must have shape \(\*batch, T, nu=2\); got shape \(2,\)"):
        sim.rollout(s, u)
    with pytest.raises(ValueError, match="unknown output 'nope'"):
        sim.forward(s, outputs=("nope",))
    with pytest.raises(ValueError, match=r"`Simulator.step\(nstep=...\)` must be an int >= 1"):
        sim.step(s, u, nstep=0)
    with pytest.raises(ValueError, match="`Simulator\\(derivatives='mjd'\\)`"):
        Simulator(arm("RK4"), derivatives="mjd")
    assert sim.step(s, u).shape == (24,)  # and it still works


def test_from_gymnasium_frame_skip():
    sim = Simulator.from_gymnasium("Humanoid-v5")
    assert sim.frame_skip == 5 and sim.nstate == 48 and "nstate=48" in repr(sim)
    assert Simulator.from_gymnasium("Hopper-v5", frame_skip=2).frame_skip == 2


def test_position_only_outputs_skip_velocity_and_control_directions(x64):
    """For kinematic outputs only qpos directions are differenced: same Jacobian, fewer calls."""
    sim = Simulator(arm(), frame_skip=1)
    state = jnp.asarray(random_states(sim.model, 1, qvel=0.3)[0])
    ctrl = jnp.array([0.3, -0.1])
    f = lambda s, u, outs: sim.forward(s, u, outputs=outs)["site_xpos"]  # noqa: E731
    lean = jax.jacrev(f, argnums=(0, 1))(state, ctrl, ("site_xpos", "xpos"))
    full = jax.jacrev(f, argnums=(0, 1))(state, ctrl, ("site_xpos", "sensordata"))
    np.testing.assert_allclose(lean[0], full[0], atol=1e-9)
    np.testing.assert_array_equal(lean[1], 0.0)
    np.testing.assert_allclose(full[1], 0.0, atol=1e-9)  # truly independent of the controls
    assert np.abs(lean[0]).max() > 0


def test_a_diverging_step_is_nan_not_a_silent_reset(x64):
    sim = Simulator(arm(), frame_skip=1)
    good = jnp.asarray(random_states(sim.model, 1, qvel=0.2)[0])
    bad = good.at[1].set(jnp.nan)
    out = jax.jit(jax.vmap(sim.step))(jnp.stack([good, bad]), jnp.zeros((2, sim.nu)))
    assert bool(jnp.isnan(out[1]).all())
    np.testing.assert_array_equal(out[0], sim.step(good, jnp.zeros(sim.nu)))
    assert not bool(jnp.isnan(out[0]).any())


def test_grad_through_scan_of_vmapped_step(x64):
    # The closed loop: `step` under vmap inside lax.scan, its Jacobian on the way back.
    sim = Simulator(arm(), frame_skip=2)
    S = jnp.asarray(random_states(sim.model, 2, qvel=0.3, qpos=0.02))
    U = jnp.asarray(np.random.default_rng(9).uniform(-0.3, 0.3, (3, 2, sim.nu)))

    def loss(S, U):
        final = jax.lax.scan(lambda s, u: (jax.vmap(sim.step)(s, u), None), S, U)[0]
        return jnp.sum(final[:, 1:] ** 2)

    check_grads(jax.jit(loss), (S, U), order=1, modes=("rev",), atol=1e-5, rtol=1e-5)


def test_diverging_single_element_from_time_zero_is_nan(tmp_path, monkeypatch, x64):
    # A batch of one from time 0: MuJoCo's warning counters flag the reset (no replay).
    monkeypatch.chdir(tmp_path)
    sim = Simulator(arm(), frame_skip=1)
    good = jnp.asarray(random_states(sim.model, 1, qvel=0.2)).at[:, 0].set(0.0)
    bad = good.at[0, 1 + sim.model.nq].set(1e30)
    step = jax.jit(jax.vmap(sim.step))
    assert bool(jnp.isnan(step(bad, jnp.zeros((1, sim.nu)))).all())
    out = step(good, jnp.zeros((1, sim.nu)))
    assert not bool(jnp.isnan(out).any()) and float(out[0, 0]) == sim.model.opt.timestep


@pytest.mark.parametrize("env_id", ["Hopper-v5", "Ant-v5"])
def test_one_element_paths_equal_mujoco_and_flag_divergence(sims, env_id, x64):
    # Batch 1 (vmapped or not) at the environment's frame_skip takes the one-element engine
    # path: equal to raw MuJoCo bit for bit, and a non-finite control gives NaN, not a reset.
    sim = sims[env_id]
    model, frame_skip = gym(env_id)
    assert frame_skip > 1
    S = random_states(model, 1)
    U = np.random.default_rng(3).uniform(-0.4, 0.4, (1, 1, model.nu))
    ref = raw_rollout(model, S[0], U[0], frame_skip)[0][0]
    np.testing.assert_array_equal(jax.jit(sim.step)(S[0], U[0, 0]), ref)
    np.testing.assert_array_equal(jax.jit(jax.vmap(sim.step))(S, U[:, 0])[0], ref)
    bad = U[0, 0].copy()
    bad[0] = np.nan
    assert bool(jnp.isnan(jax.jit(sim.step)(S[0], bad)).all())
    assert bool(jnp.isnan(jax.jit(jax.vmap(sim.step))(S, bad[None])).all())


PASSIVE = """<mujoco><worldbody><geom type="plane" size="5 5 .1"/>
  <body pos="0 0 0.3"><freejoint/><geom type="sphere" size="0.06"/></body>
  <body pos="0.5 0 0.5"><joint type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/></body>
</worldbody><sensor><framepos objtype="xbody" objname="world"/></sensor></mujoco>"""


def test_a_model_without_actuators(x64):
    """`nu == 0`: zero-size controls everywhere (they used to fail in a reshape)."""
    import mujoco

    model = mujoco.MjModel.from_xml_string(PASSIVE)
    sim = Simulator(model, frame_skip=2)
    assert sim.nu == 0
    rng = np.random.default_rng(1)
    S = np.stack([np.asarray(sim.initial_state())] * 3)
    S[:, 1 + model.nq :] += 0.3 * rng.standard_normal((3, model.nv))  # random velocities
    U = np.zeros((3, 4, 0))
    refs = [raw_rollout(model, S[i], U[i], 2) for i in range(3)]
    traj = jax.jit(sim.rollout)(S, U)
    np.testing.assert_array_equal(traj.state, np.stack([r[0] for r in refs]))
    np.testing.assert_array_equal(traj.sensordata, np.stack([r[1] for r in refs]))
    # two leading batch dimensions, and vmap of one
    np.testing.assert_array_equal(
        sim.step(S[None], U[None, :, 0]), np.stack([r[0][0] for r in refs])[None]
    )
    np.testing.assert_array_equal(jax.vmap(sim.step)(S, U[:, 0]), np.stack([r[0][0] for r in refs]))
    # derivatives of rollout, step and forward, against central differences of raw MuJoCo
    loss = lambda s: sim.rollout(s, U[0]).state[-1, 1 : 1 + model.nq].sum()  # noqa: E731
    h = 1e-6
    fd = []
    for j in range(1 + model.nq, 1 + model.nq + model.nv):  # velocity directions
        plus, minus = S[0].copy(), S[0].copy()
        plus[j] += h
        minus[j] -= h
        fd.append(
            (
                raw_rollout(model, plus, U[0], 2)[0][-1, 1 : 1 + model.nq].sum()
                - raw_rollout(model, minus, U[0], 2)[0][-1, 1 : 1 + model.nq].sum()
            )
            / (2 * h)
        )
    g = jax.jit(jax.grad(loss))(S[0])
    np.testing.assert_allclose(g[1 + model.nq : 1 + model.nq + model.nv], fd, rtol=1e-5, atol=1e-6)
    assert jax.jacfwd(sim.step)(S[0]).shape == (sim.nstate, sim.nstate)
    J = jax.jacrev(lambda s: sim.forward(s)["xpos"])(S[0])
    assert J.shape == (model.nbody, 3, sim.nstate) and np.isfinite(J).all()


def test_the_closed_loops_own_callback_equals_the_generic_one(monkeypatch, x64):
    """`step`'s own `buffer_callback` function (no `vmap`, a `vmap` of one, a batch) gives
    what the generic host call gives, bit for bit: NaN for a diverged element, the others
    unaffected, and an error raised as a host error naming the function."""
    from jaxbridge.mujoco import _step

    made = []
    own = _step.StepBatching.buffer_call

    def counting(self, call, in_shapes, out_shapes):
        fn = own(self, call, in_shapes, out_shapes)
        made.append(fn is not None)
        return fn

    sim = Simulator(arm(), frame_skip=2)
    S = jnp.asarray(random_states(sim.model, 3, qvel=0.2)).at[1, 1].set(jnp.nan)
    U = jnp.asarray(np.random.default_rng(4).uniform(-0.5, 0.5, (4, 3, sim.nu)))

    def loops():
        return (
            jax.jit(lambda s, U: jax.lax.scan(lambda s, u: (sim.step(s, u), s), s, U))(
                S[1],
                U[:, 1],  # diverges: NaN
            ),
            jax.jit(lambda s, U: jax.lax.scan(lambda s, u: (jax.vmap(sim.step)(s, u), s), s, U))(
                S[:1], U[:, :1]
            ),
            jax.jit(lambda s, U: jax.lax.scan(lambda s, u: (jax.vmap(sim.step)(s, u), s), s, U))(
                S, U
            ),
            # broadcast controls: the generic call
            jax.jit(jax.vmap(sim.step, in_axes=(0, None)))(S, U[0, 0]),
        )

    monkeypatch.setattr(_step.StepBatching, "buffer_call", counting)
    fast = loops()
    assert made == [True, True, True, False]
    monkeypatch.setattr(_step.StepBatching, "buffer_call", lambda *a: None)
    sim._step._hosts.clear()  # new host calls, lowered anew through the generic call
    generic = loops()
    for a, b in zip(jax.tree.leaves(fast), jax.tree.leaves(generic)):
        np.testing.assert_array_equal(a, b)
    final = fast[2][0]
    assert jnp.isnan(final[1]).all() and jnp.isfinite(final[jnp.array([0, 2])]).all()
    assert jnp.isnan(fast[0][0]).all() and jnp.isfinite(fast[1][0]).all()
    monkeypatch.setattr(_step.StepBatching, "buffer_call", own)
    sim._step._hosts.clear()

    def broken(*args):
        raise RuntimeError("the engine broke")

    monkeypatch.setattr(sim.core.engine, "step_into", broken)
    monkeypatch.setattr(sim.core.engine, "step_one", broken)
    monkeypatch.setattr(sim.core.engine, "stepper", lambda B, nstep, rank=2: broken)
    for f, args in (
        (jax.jit(jax.vmap(sim.step)), (S, U[0])),
        (jax.jit(sim.step), (S[0], U[0, 0])),
    ):
        with pytest.raises(Exception) as info:  # XLA's error, carrying the host error's text
            jax.block_until_ready(f(*args))
        text = str(info.value)
        assert "StepCalls._host_step" in text and "raised RuntimeError: the engine broke" in text
        assert 'raise RuntimeError("the engine broke")' in text  # the host traceback line
