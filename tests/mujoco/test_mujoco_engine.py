"""The host side against raw MuJoCo: bit for bit in float64, divergence, threads, Jacobians."""

import copy
import threading
from concurrent.futures import ThreadPoolExecutor

import mujoco
import numpy as np
import pytest
from test_mujoco_models import GYM, arm, gym, random_states, raw_forward, raw_rollout

from jaxbridge.mujoco import _batched
from jaxbridge.mujoco._derivatives import step_jacobians
from jaxbridge.mujoco._engine import Engine
from jaxbridge.mujoco._tangent import QposMap


@pytest.fixture(autouse=True, params=["batch", "rollout"])
def steps_on(request, monkeypatch):
    """Every test on both of the engine's ways to step a batch on the pool and to step the
    differences' points: `mujoco.batch` (MuJoCo 4.0 and later) and `mujoco.rollout` (before)."""
    if request.param == "batch" and not _batched.available():
        pytest.skip("mujoco.batch needs MuJoCo 4.0")
    monkeypatch.setattr(_batched, "ENABLED", request.param == "batch")
    return request.param


@pytest.mark.parametrize("env_id", GYM)
def test_rollout_bit_for_bit(env_id):
    model, frame_skip = gym(env_id)
    engine = Engine(model, nthread=2)
    S = random_states(model, 5)
    U = np.random.default_rng(1).uniform(-0.4, 0.4, (5, 3, model.nu))
    states, sensors, diverged = engine.rollout(S, U, frame_skip)
    assert states.shape == (5, 3, engine.layout.nstate) and not diverged.any()
    for i in range(5):
        ref_states, ref_sensors = raw_rollout(model, S[i], U[i], frame_skip)
        np.testing.assert_array_equal(states[i], ref_states)
        np.testing.assert_array_equal(sensors[i], ref_sensors)


def test_rollout_sensors_and_act_bit_for_bit():
    model = arm()
    engine = Engine(model, nthread=2)
    S = random_states(model, 4)
    U = np.random.default_rng(2).uniform(-1, 1, (4, 6, model.nu))
    states, sensors, _ = engine.rollout(S, U, 2)
    for i in range(4):
        ref_states, ref_sensors = raw_rollout(model, S[i], U[i], 2)
        np.testing.assert_array_equal(states[i], ref_states)
        np.testing.assert_array_equal(sensors[i], ref_sensors)
    assert np.abs(sensors).max() > 0


def test_forward_bit_for_bit():
    model, _ = gym("Humanoid-v5")
    engine = Engine(model, nthread=2)
    S = random_states(model, 3)
    S[:, 3] = 1.0  # torso low enough to touch the floor: some contacts
    U = np.zeros((3, model.nu))
    names = ("xpos", "xquat", "qacc", "sensordata", "contact_dist", "contact_geom")
    out = engine.forward(S, U, names, max_contacts=8)
    for i in range(3):
        ref, d = raw_forward(model, S[i], U[i], ("xpos", "xquat", "qacc"))
        for name, value in ref.items():
            np.testing.assert_array_equal(out[name][i], value)
        k = min(d.ncon, 8)
        assert out["ncon"][i] == d.ncon
        np.testing.assert_array_equal(out["contact_dist"][i, :k], d.contact.dist[:k])
        np.testing.assert_array_equal(out["contact_geom"][i, :k], d.contact.geom[:k])
        assert (out["contact_dist"][i, k:] == 0).all()
    assert out["ncon"].max() > 0


def test_forward_unknown_output():
    engine = Engine(arm(), nthread=1)
    with pytest.raises(ValueError, match="unknown output 'efc_force'"):
        engine.output_specs(("efc_force",), 4)


def test_divergence_is_per_element(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo logs its warnings to ./MUJOCO_LOG.TXT
    model, frame_skip = gym("Hopper-v5")
    engine = Engine(model, nthread=2)
    S = random_states(model, 6)
    S[1, 1 + model.nq + 2] = 1e30  # a velocity MuJoCo calls unstable
    S[4, 2] = np.nan
    U = np.zeros((6, 4, model.nu))
    U[5, 2, 0] = np.inf
    states, _, diverged = engine.rollout(S, U, frame_skip)
    assert diverged.tolist() == [False, True, False, False, True, True]
    assert np.isfinite(states[:4]).all()
    for i in (0, 2, 3):  # the healthy elements are untouched
        np.testing.assert_array_equal(states[i], raw_rollout(model, S[i], U[i], frame_skip)[0])
    # The engine works as before afterwards.
    again, _, diverged = engine.rollout(S[[0, 2]], U[[0, 2]], frame_skip)
    np.testing.assert_array_equal(again, states[[0, 2]])
    assert not diverged.any()


def test_divergence_in_single_step_from_time_zero(tmp_path, monkeypatch):
    # A reset ends at time dt, just like a healthy single step from time 0: it is replayed.
    monkeypatch.chdir(tmp_path)
    model = arm()
    engine = Engine(model, nthread=2)
    S = random_states(model, 3)
    S[:, 0] = 0.0
    S[2, 1 + model.nq] = 1e30
    _, _, diverged = engine.rollout(S, np.zeros((3, 1, model.nu)), 1)
    assert diverged.tolist() == [False, False, True]


def test_threads_share_an_engine():
    model, frame_skip = gym("Ant-v5")
    engine = Engine(model, nthread=2)
    S = random_states(model, 16)
    U = np.random.default_rng(3).uniform(-1, 1, (16, 5, model.nu))
    serial = engine.rollout(S, U, frame_skip)[0]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: engine.rollout(S, U, frame_skip)[0], range(4)))
    for r in results:
        np.testing.assert_array_equal(r, serial)


def test_a_stepper_called_from_two_threads_at_once(steps_on):
    # `stepper`'s function steps a batch of its own; a second call while one is under way (a
    # jitted loop run from two threads) takes a worker's batch instead. Held here inside
    # MuJoCo's call of the first, so the second surely overlaps it.
    if steps_on != "batch":
        pytest.skip("the rollout paths use a worker per call throughout")
    inside, go_on = threading.Event(), threading.Event()
    made, batches = _batched.Exact.__init__, []

    def held(self, *args):
        made(self, *args)
        batches.append(self)
        native = self.step

        def step(*a):
            if self is batches[0] and not go_on.is_set():  # the stepper's own, made first
                inside.set()
                go_on.wait(30)
            return native(*a)

        self.step = step

    model, frame_skip = gym("Ant-v5")
    S = random_states(model, 4)
    U = np.random.default_rng(3).uniform(-1, 1, (2, 4, model.nu))
    ref = [
        np.stack([raw_rollout(model, S[i], U[k, i : i + 1], frame_skip)[0][0] for i in range(4)])
        for k in range(2)
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_batched.Exact, "__init__", held)
        engine = Engine(model, nthread=2)
        step = engine.stepper(4, frame_skip)
        first, second = np.empty_like(S), np.empty_like(S)
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(step, S, U[0], first)
            assert inside.wait(30)
            assert step(S, U[1], second) is None  # while the first is inside MuJoCo
            go_on.set()
            assert pending.result() is None
    assert len(batches) == 2  # the stepper's, and the worker's the second call took
    np.testing.assert_array_equal(first, ref[0])
    np.testing.assert_array_equal(second, ref[1])


# -- the nq <-> nv mapping and the Jacobians -------------------------------------------------


def test_qpos_map_matches_mujoco():
    model = arm()
    qmap = QposMap.from_model(model)
    rng = np.random.default_rng(4)
    qpos = random_states(model, 1)[0, 1 : 1 + model.nq]
    v = 0.3 * rng.standard_normal(model.nv)
    ref = qpos.copy()
    mujoco.mj_integratePos(model, ref, v, 1.0)
    np.testing.assert_allclose(qmap.integrate(qpos, v), ref, rtol=0, atol=1e-14)
    back = np.zeros(model.nv)
    mujoco.mj_differentiatePos(model, back, 1.0, qpos, ref)
    np.testing.assert_allclose(qmap.difference(qpos, ref), back, rtol=0, atol=1e-12)
    unit = ref  # integratePos normalises: M P = I at unit quaternions
    np.testing.assert_allclose(
        qmap.qpos_to_tangent(unit) @ qmap.tangent_to_qpos(unit), np.eye(model.nv), atol=1e-14
    )


def _direct_fd(engine, S, U, nstep, eps=1e-6):
    """Central differences in the raw coordinates of the state vector (4 per quaternion)."""
    B, n = S.shape
    Jx = np.zeros((B, n, n))
    Ju = np.zeros((B, n, U.shape[1]))
    Sx = np.zeros((B, engine.model.nsensordata, n))
    for j in range(1, n):
        for sign in (1, -1):
            P = S.copy()
            P[:, j] += sign * eps
            st, se, _ = engine.rollout(P, U[:, None], nstep)
            Jx[:, :, j] += sign * st[:, 0] / (2 * eps)
            Sx[:, :, j] += sign * se[:, 0] / (2 * eps)
    for j in range(U.shape[1]):
        for sign in (1, -1):
            P = U.copy()
            P[:, j] += sign * eps
            Ju[:, :, j] += sign * engine.rollout(S, P[:, None], nstep)[0][:, 0] / (2 * eps)
    Jx[:, 0, 0] = 1.0
    return Jx, Ju, Sx


@pytest.mark.parametrize(
    "integrator, method", [("implicitfast", "mjd"), ("implicitfast", "fd"), ("RK4", "fd")]
)
def test_step_jacobians_match_differences_in_qpos(integrator, method):
    model = arm(integrator)
    engine = Engine(model, nthread=2)
    S = random_states(model, 3, qvel=0.3, qpos=0.02)
    U = np.random.default_rng(5).uniform(-0.3, 0.3, (3, model.nu))
    Jx, Ju, Sx, Su = step_jacobians(engine, QposMap.from_model(model), S, U, 3, method=method)
    rJx, rJu, rSx = _direct_fd(engine, S, U, 3)
    # step_jacobians differences with step 1e-7 (to keep clear of contact activations): its
    # rounding error is about 1e-16 |f| / 1e-7, about 1e-7 here, where the reference's is 1e-9.
    np.testing.assert_allclose(Jx, rJx, atol=2e-6)
    np.testing.assert_allclose(Ju, rJu, atol=2e-6)
    np.testing.assert_allclose(Sx, rSx, atol=2e-6)
    assert Su.shape == (3, model.nsensordata, model.nu)


def test_step_jacobians_on_gym_rk4():
    model, frame_skip = gym("Ant-v5")  # RK4: mjd_transitionFD refuses it
    engine = Engine(model, nthread=2)
    S = random_states(model, 2, qvel=0.1)
    U = np.zeros((2, model.nu))
    Jx, Ju, _, _ = step_jacobians(engine, QposMap.from_model(model), S, U, frame_skip)
    rJx, rJu, _ = _direct_fd(engine, S, U, frame_skip)
    np.testing.assert_allclose(Jx, rJx, atol=1e-6)
    np.testing.assert_allclose(Ju, rJu, atol=1e-6)


# -- the hot path: time arithmetic, divergence on both paths, pool choice, in-place steps ----


@pytest.mark.parametrize("N", [1, 2, 5, 37, 400])
def test_expected_time_is_mujocos_repeated_addition(N):
    # Bit for bit what MuJoCo computes: time advanced N times by its timestep, on both the
    # Euler path (`time += dt`) and RK4's (`time + h`), from start times that round.
    from jaxbridge.mujoco._divergence import _time_after

    rng = np.random.default_rng(N)
    t0 = np.concatenate([[0.0, 0.1, 1e5, 1 / 3], rng.uniform(0, 50, 12)])
    for integrator in ("Euler", "RK4"):
        model = arm(integrator)
        model.opt.timestep = 0.0031  # not a power of two: every addition rounds
        d = mujoco.MjData(model)
        for t in t0[:4]:
            d.time = t
            for _ in range(N):
                mujoco.mj_step(model, d)
            np.testing.assert_array_equal(_time_after(np.array([t]), 0.0031, N), [d.time])
    loop = t0.copy()
    for _ in range(N):
        loop += 0.0031
    np.testing.assert_array_equal(_time_after(t0, 0.0031, N), loop)
    assert N == 1 or not np.array_equal(loop, t0 + N * 0.0031)  # a product would not do


@pytest.mark.parametrize("pool", [False, True])
def test_divergence_from_time_zero_on_both_paths(tmp_path, monkeypatch, pool):
    # Elements that diverge at their only step from time 0 end at time dt, as healthy ones
    # do; they are told apart exactly (the last one of a serial call from MuJoCo's warning
    # counters, the others by a replay), whichever path the call takes.
    monkeypatch.chdir(tmp_path)
    model = arm()
    engine = Engine(model, nthread=2)
    engine.POOL_MIN_WORK = 0.0 if pool else float("inf")
    assert engine.uses_pool(6, 1) is pool
    S = random_states(model, 6)
    S[:, 0] = 0.0
    S[1, 1 + model.nq] = 1e30
    S[5, 1 + model.nq] = 1e30
    U = np.zeros((6, 1, model.nu))
    U[3, 0, 0] = np.nan
    states, _, diverged = engine.rollout(S, U, 1)
    assert diverged.tolist() == [False, True, False, True, False, True]
    for i in (0, 2, 4):
        np.testing.assert_array_equal(states[i], raw_rollout(model, S[i], U[i], 1)[0])
    # One element (always serial) and its warning counters, through both entry points.
    for i in range(6):
        assert engine.step(S[i : i + 1], U[i, :, :], 1)[1].tolist() == [diverged[i]]
        out = np.empty((1, engine.layout.nstate))
        assert engine.step_one(S[i : i + 1].copy(), U[i].copy(), out) == diverged[i]
        if not diverged[i]:
            np.testing.assert_array_equal(out, states[i])


@pytest.mark.parametrize("pool", [False, True])
def test_serial_and_pool_paths_bit_for_bit(pool):
    model, frame_skip = gym("Humanoid-v5")
    engine = Engine(model, nthread=2)
    engine.POOL_MIN_WORK = 0.0 if pool else float("inf")
    S = random_states(model, 5, qvel=0.2, qpos=0.02)
    U = np.random.default_rng(7).uniform(-0.4, 0.4, (5, 2, model.nu))
    states, sensors, diverged = engine.rollout(S, U, frame_skip)
    assert not diverged.any()
    for i in range(5):
        ref_states, ref_sensors = raw_rollout(model, S[i], U[i], frame_skip)
        np.testing.assert_array_equal(states[i], ref_states)
        np.testing.assert_array_equal(sensors[i], ref_sensors)


def test_pool_is_chosen_from_the_work_per_call():
    engine = Engine(arm(), nthread=2)
    assert engine.step_seconds > 0
    engine.step_seconds = 10e-6  # 10 µs a physics step
    assert not engine.uses_pool(16, 1)  # 160 µs: the pool's dispatch would cost more
    assert engine.uses_pool(32, 1) and engine.uses_pool(4, 5)
    assert not engine.uses_pool(1, 1000)  # one element: nothing to split
    assert not Engine(arm(), nthread=1).uses_pool(64, 100)


@pytest.mark.parametrize("nstep", [1, 3])
def test_step_writes_in_place_and_equals_rollout(nstep):
    model = arm()
    engine = Engine(model, nthread=2)
    S = random_states(model, 4)
    U = np.random.default_rng(8).uniform(-1, 1, (4, model.nu))
    out = np.full((4, engine.layout.nstate), -1.0)
    next_state, diverged = engine.step(S, U, nstep, out=out)
    assert next_state is out or np.shares_memory(next_state, out)
    np.testing.assert_array_equal(out, engine.rollout(S, U[:, None], nstep)[0][:, 0])
    assert not diverged.any()
    S32, U32 = S.astype(np.float32), U.astype(np.float32)
    f32 = engine.step(S32, U32, nstep)[0]
    ref = engine.rollout(S32.astype(float), U32.astype(float)[:, None], nstep)[0][:, 0]
    np.testing.assert_array_equal(f32, ref)


# Two slide joints, each with a strong motor: the first control is clamped to its range, the
# second is not (MuJoCo zeroes every control of a step when an unclamped one is beyond 1e10).
MOTORS = """
<mujoco>
  <option gravity="{g} 0 0"/>
  <worldbody>
    <body><joint name="x" type="slide" axis="1 0 0"/><geom size=".1"/></body>
    <body pos="0 1 0"><joint name="y" type="slide" axis="0 1 0"/><geom size=".1"/></body>
  </worldbody>
  <actuator>
    <motor joint="x" gear="1000" ctrllimited="true" ctrlrange="-1 1"/>
    <motor joint="y" gear="1000"/>
  </actuator>
</mujoco>
"""


def raw_warns(model, state, ctrls):
    """Whether MuJoCo warns at any of the physics steps of `ctrls` from `state` (raw mj_step)."""
    d = mujoco.MjData(model)
    mujoco.mj_setState(model, d, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    for u in ctrls:
        d.ctrl[:] = u
        mujoco.mj_step(model, d)
        if d.warning.number.any():
            return True
    return False


@pytest.mark.parametrize("pool", [False, True])
def test_controls_mujoco_replaces_by_zero_are_flagged(tmp_path, monkeypatch, pool):
    # A control beyond 1e10 is replaced, with all the others, by zero, and the step carries on
    # at the right time: a healthy-looking state computed from the wrong controls. Clamped to
    # its range, the same value is fine. Neither starts at time 0, and the bad one is in the
    # last physics step, where no time tells.
    monkeypatch.chdir(tmp_path)
    model = mujoco.MjModel.from_xml_string(MOTORS.format(g=-9.81))
    engine = Engine(model, nthread=2)
    engine.POOL_MIN_WORK = 0.0 if pool else float("inf")
    S = random_states(model, 4)
    S[:, 0] = 1.0
    U = np.zeros((4, 3, 2))
    U[1, 2, 1] = 1e11  # unclamped: zeroed
    U[2, 2, 0] = 1e11  # clamped to 1
    U[3, 2, 1] = -2e10
    expect = [raw_warns(model, S[i], U[i]) for i in range(4)]
    assert expect == [False, True, False, True]
    states, _, diverged = engine.rollout(S, U, 1)
    assert diverged.tolist() == expect
    np.testing.assert_array_equal(states[2], raw_rollout(model, S[2], U[2], 1)[0])
    # One step, batched and one element at a time, and `forward`.
    last = np.ascontiguousarray(U[:, 2])
    assert engine.step(S, last, 1)[1].tolist() == expect
    for i in range(4):
        out = np.empty((1, engine.layout.nstate))
        assert engine.step_one(S[i : i + 1].copy(), last[i : i + 1].copy(), out) == expect[i]
        assert engine.step(S[i : i + 1], last[i : i + 1], 2)[1].tolist() == [expect[i]]
    qacc = engine.forward(S, last, ("qacc", "xpos"), 4)
    assert np.isnan(qacc["qacc"][[1, 3]]).all() and np.isfinite(qacc["qacc"][[0, 2]]).all()


@pytest.mark.parametrize("B", [1, 4])
@pytest.mark.parametrize("pool", [False, True])
def test_a_calls_warnings_are_not_read_by_the_next(tmp_path, monkeypatch, steps_on, pool, B):
    # The closed loop's function (`stepper`, made once, called on every step) on the same
    # batch: a call MuJoCo warns on, then a clean one, which must come back clean and equal to
    # raw MuJoCo. On `mujoco.batch` the counters are not cleared before a call but after one
    # that leaves any, and after one that fails: a failure is made here once MuJoCo has set
    # counters, on every batch the engine makes.
    monkeypatch.chdir(tmp_path)
    fail = []
    made = _batched.Exact.__init__

    def failing_once(self, *args):
        made(self, *args)
        native = self.step

        def step(*a):
            nfail = native(*a)
            if fail and fail.pop():
                self.warning[..., 1] = 1
                raise RuntimeError("failed")
            return nfail

        self.step = step

    monkeypatch.setattr(_batched.Exact, "__init__", failing_once)
    model = mujoco.MjModel.from_xml_string(MOTORS.format(g=-9.81))
    engine = Engine(model, nthread=2)
    engine.POOL_MIN_WORK = 0.0 if pool else float("inf")
    step = engine.stepper(B, 1)
    S = random_states(model, B)
    S[:, 0] = 1.0
    bad, good = np.zeros((B, model.nu)), np.zeros((B, model.nu))
    bad[B - 1, 1] = 1e11  # unclamped: MuJoCo zeroes the controls and warns
    out = np.empty_like(S)
    expect = np.arange(B) == B - 1
    ref = np.stack([raw_rollout(model, S[i], good[i : i + 1], 1)[0][0] for i in range(B)])
    for _ in range(2):
        np.testing.assert_array_equal(step(S, bad, out), expect)
        assert step(S, good, out) is None
        np.testing.assert_array_equal(out, ref)
    if steps_on == "batch":
        ((_, own),) = engine._steppers.values()
        assert own is not None  # the function's own batch, not the general path
        fail.append(True)
        with pytest.raises(RuntimeError, match="failed"):
            step(S, good, out)
        assert step(S, good, out) is None
        np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("pool", [False, True])
@pytest.mark.parametrize("gravity", [-9.81, -1e13])
@pytest.mark.parametrize("integrator", ["Euler", "RK4", "implicitfast"])
def test_one_step_from_time_zero_without_a_replay_each(
    tmp_path, monkeypatch, pool, gravity, integrator
):
    # From time 0, one step ends at time dt whether or not MuJoCo reset the element. A reset
    # element ends where a healthy step from the reset state ends; only elements that end
    # there are replayed, not those that started from the reset state itself with zero
    # controls. With gravity at -1e13 every step diverges, the reset state's included (then
    # all are replayed).
    monkeypatch.chdir(tmp_path)
    model = mujoco.MjModel.from_xml_string(MOTORS.format(g=gravity))
    model.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    engine = Engine(model, nthread=2)
    engine.POOL_MIN_WORK = 0.0 if pool else float("inf")
    B = 9
    S = random_states(model, B)
    S[:, 0] = 0.0
    U = np.random.default_rng(3).uniform(-1, 1, (B, 1, 2))
    U[[2, 6], 0, 1] = 1e9  # finite and within MuJoCo's bound, but the acceleration is not
    d = mujoco.MjData(model)
    origin = np.empty(engine.layout.nstate)
    mujoco.mj_getState(model, d, origin, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    S[[4, 7]], U[[4, 7]] = origin, 0.0  # from the reset state, zero controls
    replays = []
    replay = engine.divergence.replay_warns
    monkeypatch.setattr(
        engine.divergence, "replay_warns", lambda *a: replays.append(1) or replay(*a)
    )
    states, _, diverged = engine.rollout(S, U, 1)
    expect = [raw_warns(model, S[i], U[i]) for i in range(B)]
    assert diverged.tolist() == expect
    if gravity == -9.81:
        assert expect == [i in (2, 6) for i in range(B)]
        assert len(replays) <= 2  # the elements that really reset (was one per element)
        for i in np.flatnonzero(~diverged):
            np.testing.assert_array_equal(states[i], raw_rollout(model, S[i], U[i], 1)[0])
        healthy = [0, 1, 3, 5, 8]  # none ends in the reset state: no replay, no flag
        assert not engine.rollout(S[healthy], U[healthy], 1)[2].any()
        assert len(replays) <= 2
    else:
        assert all(expect)
    assert engine.step(S, np.ascontiguousarray(U[:, 0]), 1)[1].tolist() == expect


def test_one_step_from_time_zero_on_the_humanoid(tmp_path, monkeypatch):
    # The shipped humanoid (RK4, PGS with warm start, contacts): resets told apart from
    # healthy steps from time 0 without a replay of every element, on the pool.
    monkeypatch.chdir(tmp_path)
    model, _ = gym("Humanoid-v5")
    engine = Engine(model, nthread=2)
    engine.POOL_MIN_WORK = 0.0
    S = random_states(model, 7, qvel=0.2, qpos=0.02)
    S[:, 0] = 0.0
    S[[1, 4], 1 + model.nq + 3] = 1e30  # finite, but MuJoCo resets
    d = mujoco.MjData(model)
    mujoco.mj_getState(model, d, S[3], mujoco.mjtState.mjSTATE_FULLPHYSICS)  # the reset state
    U = np.random.default_rng(4).uniform(-0.4, 0.4, (7, 1, model.nu))
    U[3] = 0.0
    replays = []
    replay = engine.divergence.replay_warns
    monkeypatch.setattr(
        engine.divergence, "replay_warns", lambda *a: replays.append(1) or replay(*a)
    )
    states, _, diverged = engine.rollout(S, U, 1)
    assert diverged.tolist() == [raw_warns(model, S[i], U[i]) for i in range(7)]
    assert diverged.tolist() == [i in (1, 4) for i in range(7)] and len(replays) <= 2
    for i in np.flatnonzero(~diverged):
        np.testing.assert_array_equal(states[i], raw_rollout(model, S[i], U[i], 1)[0])


# Eight boxes on a plane: with too little arena memory, MuJoCo drops constraints (warning
# mjWARN_CNSTRFULL) and the step carries on, at the right time, without its contacts.
BOXES = """
<mujoco>
  <size memory="{memory}"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    {bodies}
  </worldbody>
</mujoco>
"""


def boxes(memory: str) -> mujoco.MjModel:
    bodies = "".join(
        f'<body pos="{0.25 * i} 0 0.09"><freejoint/><geom type="box" size=".1 .1 .1"/></body>'
        for i in range(8)
    )
    return mujoco.MjModel.from_xml_string(BOXES.format(memory=memory, bodies=bodies))


def test_a_warning_that_does_not_reset_is_flagged(tmp_path, monkeypatch, steps_on):
    # The warning comes in the call's last physics step (its only one), not from time 0, so
    # the time is right. One element runs serially, on an `MjData` whose counters are its
    # own; a batch on `mujoco.batch` keeps every simulation's counters. (A batch on
    # `mujoco.rollout`'s pool, MuJoCo before 4.0, leaves no trace of it: documented.)
    monkeypatch.chdir(tmp_path)
    for memory, expect in (("64K", True), ("4M", False)):
        model = boxes(memory)
        engine = Engine(model, nthread=2)
        S = random_states(model, 4, qvel=0.01, qpos=0.0)
        S[:, 0] = 1.0
        U = np.zeros((4, model.nu))
        assert [raw_warns(model, S[i], U[i : i + 1]) for i in range(4)] == [expect] * 4
        for i in range(4):
            assert engine.step(S[i : i + 1], U[i : i + 1], 1)[1].tolist() == [expect]
            out = np.empty((1, engine.layout.nstate))
            assert engine.step_one(S[i : i + 1].copy(), U[i : i + 1].copy(), out) == expect
        if steps_on == "batch":
            for pool in (False, True):
                engine.POOL_MIN_WORK = 0.0 if pool else float("inf")
                assert engine.step(S, U, 1)[1].tolist() == [expect] * 4
                assert engine.rollout(S, U[:, None], 1)[2].tolist() == [expect] * 4


@pytest.mark.parametrize("pool", [False, True])
def test_an_edit_of_the_model_after_the_first_call_is_seen(pool):
    # mujoco.rollout and mj_step read the model they are given on every call; so must every
    # path here (`mujoco.batch` copies its model unless given the caller's).
    model, frame_skip = gym("Humanoid-v5")
    model = copy.copy(model)  # edited below
    engine = Engine(model, nthread=2)
    engine.POOL_MIN_WORK = 0.0 if pool else float("inf")
    S = random_states(model, 3, qvel=0.2, qpos=0.02)
    U = np.random.default_rng(5).uniform(-0.4, 0.4, (3, 2, model.nu))
    engine.rollout(S, U, frame_skip)  # make the workers (and batches) with the old model
    engine.step(S, np.ascontiguousarray(U[:, 0]), frame_skip)
    model.opt.gravity[:] = [0.0, 0.0, -3.0]
    model.opt.timestep = 0.004
    model.body_mass[2] *= 2
    states, sensors, diverged = engine.rollout(S, U, frame_skip)
    next_state, _ = engine.step(S, np.ascontiguousarray(U[:, 0]), frame_skip)
    assert not diverged.any()
    for i in range(3):
        ref_states, ref_sensors = raw_rollout(model, S[i], U[i], frame_skip)
        np.testing.assert_array_equal(states[i], ref_states)
        np.testing.assert_array_equal(sensors[i], ref_sensors)
        np.testing.assert_array_equal(next_state[i], ref_states[0])


SLEEPING = """
<mujoco>
  <option sleep_tolerance="0.01"><flag sleep="enable"/></option>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .1"><freejoint/><geom size=".1"/></body>
    <body pos="1 0 .1"><freejoint/><geom size=".1"/></body>
  </worldbody>
</mujoco>
"""


def test_a_model_with_sleep_keeps_the_rollout_paths(steps_on):
    # `mujoco.batch` refuses a model with sleep enabled unless each simulation has an MjData
    # of its own: such a model keeps `mujoco.rollout`'s paths, whatever MuJoCo has (and
    # enabling it later switches too, `stepper`'s functions made before included).
    if not hasattr(mujoco.mjtEnableBit, "mjENBL_SLEEP"):
        pytest.skip("this MuJoCo has no sleep")
    model = mujoco.MjModel.from_xml_string(SLEEPING)
    engine = Engine(model, nthread=2)
    assert not engine.batched()
    S = random_states(model, 4, qvel=0.05, qpos=0.0)
    U = np.zeros((4, 3, model.nu))
    states, _, diverged = engine.rollout(S, U, 1)
    next_state, _ = engine.step(S, np.zeros((4, model.nu)), 1)
    np.testing.assert_array_equal(next_state, states[:, 0])
    model.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_SLEEP)
    assert engine.batched() == (steps_on == "batch")
    states = engine.rollout(S, U, 1)[0]
    for i in range(4):  # without sleep, every path is raw MuJoCo's
        np.testing.assert_array_equal(states[i], raw_rollout(model, S[i], U[i], 1)[0])
    sleep = int(mujoco.mjtEnableBit.mjENBL_SLEEP)
    for B in (1, 3):
        step, out = engine.stepper(B, 1), np.empty((B, S.shape[1]))
        assert step(S[:B], U[:B, 0], out) is None
        np.testing.assert_array_equal(out, states[:B, 0])
        model.opt.enableflags |= sleep
        assert step(S[:B], U[:B, 0], out) is None
        np.testing.assert_array_equal(out, engine.rollout(S[:B], U[:B], 1)[0][:, 0])
        model.opt.enableflags &= ~sleep


MOCAP = """
<mujoco>
  <worldbody>
    <body name="target" mocap="true" pos="0 0 1">
      <geom size=".05" contype="0" conaffinity="0"/>
    </body>
    <body name="ball" pos="0 0 1"><freejoint/><geom size=".1"/></body>
    <body name="other" pos="1 0 1"><freejoint/><geom size=".1"/></body>
  </worldbody>
  <equality>
    <weld body1="target" body2="ball"/>
    <connect body1="other" anchor="1 0 1" active="false"/>
  </equality>
</mujoco>
"""


@pytest.mark.parametrize("pool", [False, True])
def test_mocap_poses_and_active_equalities_follow_the_model(pool):
    # mujoco.rollout sets every element's mocap poses (from body_pos, body_quat) and active
    # equalities (eq_active0) from the model on every call: an edit of those is seen.
    model = mujoco.MjModel.from_xml_string(MOCAP)
    engine = Engine(model, nthread=2)
    engine.POOL_MIN_WORK = 0.0 if pool else float("inf")
    S = random_states(model, 3, qvel=0.1, qpos=0.0)
    U = np.zeros((3, 4, model.nu))
    for edit in (None, "moved", "activated"):
        if edit == "moved":
            model.body_pos[model.body("target").id] = [0.3, 0.0, 1.2]
            model.body_quat[model.body("target").id] = [0.0, 1.0, 0.0, 0.0]
        if edit == "activated":
            model.eq_active0[1] = 1
        states, _, diverged = engine.rollout(S, U, 1)
        next_state, _ = engine.step(S, np.zeros((3, model.nu)), 1)
        assert not diverged.any()
        for i in range(3):
            ref = raw_rollout(model, S[i], U[i], 1)[0]
            np.testing.assert_array_equal(states[i], ref)
            np.testing.assert_array_equal(next_state[i], ref[0])


def test_sum_of_squares_is_exact_in_its_checks_at_any_size():
    from jaxbridge.mujoco._state import DOT_BLOCK, sum_of_squares

    rng = np.random.default_rng(0)
    for n in (0, 5, DOT_BLOCK, DOT_BLOCK + 1, 3 * DOT_BLOCK + 17):
        a = rng.standard_normal((n, 1))
        assert sum_of_squares(a) == pytest.approx(float(np.sum(a * a)), rel=1e-12)
        if n:
            for bad in (np.nan, np.inf, -np.inf, 1e200):  # the last overflows to Inf
                b = a.copy()
                b[-1] = bad
                assert not np.isfinite(sum_of_squares(b))
    # Blocks whose sums are finite but overflow together: Inf, not an error.
    huge = np.full(3 * DOT_BLOCK, 1e152)
    assert np.isfinite(np.vdot(huge[:DOT_BLOCK], huge[:DOT_BLOCK]))
    assert sum_of_squares(huge) == np.inf
    strided = rng.standard_normal((40, 30))[:, ::3]  # not contiguous: a copy, the same sum
    assert sum_of_squares(strided) == pytest.approx(float(np.sum(strided**2)), rel=1e-12)


@pytest.mark.parametrize("B", [4, 300, 2500])
def test_the_steppers_input_check_at_every_size(tmp_path, monkeypatch, B):
    # `stepper`'s check of the inputs takes one pass over the rows of a small batch, two over
    # the inputs of a larger one, in blocks past `DOT_BLOCK` numbers (here: 4, 300 and 2,500
    # elements of 5 numbers a state). A NaN time, an infinite clamped control and a huge
    # unclamped one (MuJoCo warns only on the last) are flagged at each, anywhere in the batch.
    monkeypatch.chdir(tmp_path)
    model = mujoco.MjModel.from_xml_string(MOTORS.format(g=-9.81))
    engine = Engine(model, nthread=2)
    rng = np.random.default_rng(B)
    S = np.tile(random_states(model, 1), (B, 1))
    S[:, 1:] += 0.01 * rng.standard_normal((B, S.shape[1] - 1))
    U = rng.uniform(-0.5, 0.5, (B, model.nu))
    out = np.empty_like(S)
    for pool in (False, True):
        engine.POOL_MIN_WORK = 0.0 if pool else float("inf")
        step = engine.stepper(B, 1)
        assert step(S, U, out) is None
        np.testing.assert_array_equal(out[-1], raw_rollout(model, S[-1], U[-1:], 1)[0][0])
        for i, j, bad in ((0, B - 1, np.inf), (B // 2, B - 2, -1e12)):
            S2, U2 = S.copy(), U.copy()
            S2[i, 0] = np.nan
            U2[j, 1 if bad == -1e12 else 0] = bad  # motor 0 is clamped, motor 1 is not
            expect = np.zeros(B, bool)
            expect[[i, j]] = True
            np.testing.assert_array_equal(step(S2, U2, out), expect)
        assert step(S, U, out) is None


@pytest.mark.parametrize("views", [True, False])
def test_non_finite_inputs_mujoco_does_not_warn_on_are_flagged(tmp_path, monkeypatch, views):
    # A NaN time (MuJoCo only carries it on) and an infinite control that clamping makes 1
    # (MuJoCo steps on without a warning): only the engine's own checks can tell, and a
    # non-finite input is flagged. `views=False` writes a batch's rows the other way (for a
    # model whose plugin state puts the state's columns apart).
    monkeypatch.chdir(tmp_path)
    if not views:
        made = _batched.Exact.__init__

        def apart(self, *args):
            made(self, *args)
            self.full = self.head = self.zeros = None

        monkeypatch.setattr(_batched.Exact, "__init__", apart)
    model = mujoco.MjModel.from_xml_string(MOTORS.format(g=-9.81))
    engine = Engine(model, nthread=2)
    S = random_states(model, 4)
    S[1, 0] = np.nan
    U = np.zeros((4, model.nu))
    U[2, 0] = np.inf  # the clamped motor
    assert not any(raw_warns(model, S[i], U[i : i + 1]) for i in range(4))
    for pool in (False, True):
        engine.POOL_MIN_WORK = 0.0 if pool else float("inf")
        next_state, diverged = engine.step(S, U, 1)
        assert diverged.tolist() == [False, True, True, False]
        ref = [raw_rollout(model, S[i], U[i : i + 1], 1)[0][0] for i in (0, 3)]
        np.testing.assert_array_equal(next_state[[0, 3]], np.stack(ref))
        assert engine.rollout(S, U[:, None], 1)[2].tolist() == [False, True, True, False]
    # Called again on the same batch, from other states: each starts from a zero warm start
    # (the rows hold the last call's), in contact, as raw MuJoCo from a fresh `MjData`.
    hopper = gym("Hopper-v5")[0]
    d = mujoco.MjData(hopper)
    for _ in range(300):  # fallen, on the ground
        mujoco.mj_step(hopper, d)
    assert d.ncon
    landed = np.empty(mujoco.mj_stateSize(hopper, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(hopper, d, landed, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    engine = Engine(hopper, nthread=2)
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        S = landed + np.concatenate([[0.0], 0.01 * rng.standard_normal(landed.size - 1)])
        S = np.tile(S, (3, 1))
        U = rng.uniform(-0.5, 0.5, (3, hopper.nu))
        ref = [raw_rollout(hopper, S[i], U[i : i + 1], 2)[0][0] for i in range(3)]
        np.testing.assert_array_equal(engine.step(S, U, 2)[0], np.stack(ref))
