"""Field calls (`DataCalls`, `_fields.FieldSteps`) against raw MuJoCo; the one difference rule."""

from typing import Any

import jax
import jax.numpy as jnp
import mujoco as _mujoco
import numpy as np
import pytest
from test_mujoco_models import arm, gym, random_states

from jaxbridge.mujoco import DataCalls, Simulator, _differences, _fields

pytest.importorskip("mujoco.batch")

# (pyright resolves `mujoco` in this folder, tests/mujoco, to the folder itself)
mujoco: Any = _mujoco

FULL = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)


def _raw_step(model, qpos, qvel, ctrl, warm, nstep, names, xfrc=None):
    """`nstep` `mj_step`s from a reset `MjData`, then `mj_rnePostConstraint`; the named fields."""
    d = mujoco.MjData(model)
    d.qpos[:], d.qvel[:], d.ctrl[:], d.qacc_warmstart[:] = qpos, qvel, ctrl, warm
    if xfrc is not None:
        d.xfrc_applied[:] = xfrc
    mujoco.mj_step(model, d, nstep=nstep)
    mujoco.mj_rnePostConstraint(model, d)
    return {n: np.array(getattr(d, n)) for n in names}


OUT = ("qpos", "qvel", "qacc_warmstart", "xpos", "cvel", "qfrc_actuator", "cfrc_ext", "ncon")


@pytest.mark.parametrize("env_id", ["Ant-v5", "Humanoid-v5"])
def test_step_equals_raw_mj_step_bit_for_bit(env_id, x64):
    model, fs = gym(env_id)
    S = random_states(model, 6, seed=3)
    nq, nv = model.nq, model.nv
    q, v = S[:, 1 : 1 + nq].copy(), S[:, 1 + nq : 1 + nq + nv]
    q[::2, 2] -= 0.5  # every other row sunk into the floor: in contact
    rng = np.random.default_rng(0)
    u = rng.uniform(-0.4, 0.4, (6, model.nu))
    w = rng.normal(size=(6, nv))
    calls = DataCalls(model)
    ins = {"qpos": q, "qvel": v, "ctrl": u, "qacc_warmstart": w}
    out = jax.jit(lambda i: calls.step(i, OUT, nstep=fs))(ins)
    assert out["ncon"].dtype == jnp.int32
    for i in range(6):
        ref = _raw_step(model, q[i], v[i], u[i], w[i], fs, OUT)
        for n in OUT:
            np.testing.assert_array_equal(np.asarray(out[n][i]), ref[n], err_msg=n)
    assert np.asarray(out["ncon"]).any()  # some rows in contact: the pass of those rows ran


def test_xfrc_applied_input_runs_the_pass_on_every_row(x64):
    model, fs = gym("Ant-v5")
    S = random_states(model, 3, seed=1)
    q, v = S[:, 1 : 1 + model.nq], S[:, 1 + model.nq : 1 + model.nq + model.nv]
    xfrc = np.random.default_rng(2).normal(
        size=(3, int(mujoco.MjData(model).xfrc_applied.shape[0]), 6)
    )
    steps = _fields.FieldSteps(model, ("qpos", "qvel", "xfrc_applied"), ("cfrc_ext", "qpos"), fs)
    assert not steps.rne_in_contact
    cfrc, qpos = steps.step(q, v, xfrc)
    for i in range(3):
        ref = _raw_step(model, q[i], v[i], 0.0, 0.0, fs, ("cfrc_ext", "qpos"), xfrc[i])
        np.testing.assert_array_equal(cfrc[i], ref["cfrc_ext"])
        np.testing.assert_array_equal(qpos[i], ref["qpos"])


def test_inputs_not_given_are_reset_on_every_call(x64):
    """A call is a pure function: what the last call's steps left is not the next one's start."""
    model = arm()
    steps = _fields.FieldSteps(model, ("qpos",), ("qpos", "qvel", "time", "qacc_warmstart"), 3)
    q = np.tile(model.qpos0, (2, 1))
    first = steps.step(q)
    second = steps.step(q)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    d = mujoco.MjData(model)
    mujoco.mj_step(model, d, nstep=3)
    np.testing.assert_array_equal(first[1][0], d.qvel)
    np.testing.assert_array_equal(first[2][0], d.time)


def test_physics_input_is_simulators_state(x64):
    """`"physics"` is `Simulator`'s state: the field call's step equals `sim.step`."""
    model, fs = gym("Hopper-v5")
    sim = Simulator(model, frame_skip=fs)
    S = random_states(model, 4)
    u = np.random.default_rng(5).uniform(-1, 1, (4, model.nu))
    (physics,) = sim.step_fields({"physics": S, "ctrl": u}, ("physics",)).values()
    np.testing.assert_array_equal(physics, sim.step(S, u))


def test_vmap_is_one_host_call_and_equals_single_calls(x64, monkeypatch):
    model = arm()
    calls = DataCalls(model)
    runs = []
    original = _fields.FieldRows.run

    def counted(self, *args):
        runs.append(self.B)
        return original(self, *args)

    monkeypatch.setattr(_fields.FieldRows, "run", counted)
    S = random_states(model, 5)
    q = S[:, 1 : 1 + model.nq]
    u = np.random.default_rng(0).uniform(-1, 1, model.nu)

    def f(q, u):
        return calls.step({"qpos": q, "ctrl": u}, ("qpos", "xpos"), nstep=2)

    batched = jax.jit(jax.vmap(f, in_axes=(0, None)))(q, u)
    assert runs == [5]
    for i in range(5):
        one = jax.jit(f)(q[i], u)
        for n in ("qpos", "xpos"):
            np.testing.assert_array_equal(batched[n][i], one[n])
    nested = jax.jit(jax.vmap(jax.vmap(f, in_axes=(0, None)), in_axes=(0, None)))
    out = nested(q.reshape(1, 5, -1), u)
    np.testing.assert_array_equal(out["xpos"][0], batched["xpos"])


def test_forward_and_forward_where_equal_raw_mj_forward(x64):
    model, _ = gym("Ant-v5")
    S = random_states(model, 3, seed=4)
    calls = DataCalls(model)
    out = calls.forward({"physics": S}, ("xpos", "cinert", "ncon"))
    where = calls.forward_where(np.array([False, True, False]), {"physics": S}, ("xpos",))
    for i in range(3):
        d = mujoco.MjData(model)
        mujoco.mj_setState(model, d, S[i], FULL)
        mujoco.mj_forward(model, d)
        np.testing.assert_array_equal(out["xpos"][i], d.xpos)
        np.testing.assert_array_equal(out["cinert"][i], d.cinert)
        assert int(out["ncon"][i]) == d.ncon
        np.testing.assert_array_equal(where["xpos"][i], d.xpos if i == 1 else 0.0)


def test_jvp_equals_central_differences_of_raw_mj_step(x64):
    """A smooth model (no contacts): the JVP in qpos, qvel and ctrl against raw MuJoCo."""
    model = arm("RK4")
    model.geom_contype[:] = 0  # no contacts: every difference is smooth
    model.geom_conaffinity[:] = 0
    calls = DataCalls(model)
    S = random_states(model, 1, seed=7)[0]
    q, v = S[1 : 1 + model.nq], S[1 + model.nq : 1 + model.nq + model.nv]
    u = np.full(model.nu, 0.1)

    def f(q, v, u):
        out = calls.step({"qpos": q, "qvel": v, "ctrl": u}, ("qvel", "xpos"), nstep=3)
        return jnp.concatenate([out["qvel"], out["xpos"].ravel()])

    dq, dv, du = (np.random.default_rng(i).normal(size=a.shape) for i, a in enumerate((q, v, u)))
    _, tangent = jax.jit(lambda *p: jax.jvp(f, p[:3], p[3:]))(q, v, u, dq, dv, du)

    def raw(t):
        out = _raw_step(model, q + t * dq, v + t * dv, u + t * du, 0.0, 3, ("qvel", "xpos"))
        return np.concatenate([out["qvel"], out["xpos"].ravel()])

    h = 1e-6
    central = (raw(h) - raw(-h)) / (2 * h)
    np.testing.assert_allclose(tangent, central, rtol=1e-5, atol=1e-6)
    grad = jax.grad(lambda u: f(q, v, u)[0])(jnp.asarray(u))
    assert grad.shape == u.shape and np.all(np.isfinite(grad))


def test_no_retrace_on_a_second_call(x64):
    model = arm()
    calls = DataCalls(model)
    traces = []

    @jax.jit
    def f(q):
        traces.append(None)
        return calls.step({"qpos": q}, ("qpos",))["qpos"]

    q = jnp.asarray(model.qpos0)
    f(q)
    f(q + 0.01)
    assert len(traces) == 1
    assert calls.calls(("qpos",), ("qpos",)) is calls.calls(("qpos",), ("qpos",))


def test_bad_fields_raise_with_the_accepted_ones():
    model = arm()
    calls = DataCalls(model)
    q = jnp.zeros(model.nq)
    with pytest.raises(ValueError, match="input 'xpos' is not a field of MuJoCo's state rows"):
        calls.step({"xpos": q}, ("qpos",))
    with pytest.raises(ValueError, match="input 'qpos' overlaps another input"):
        calls.step({"physics": jnp.zeros(1 + model.nq + model.nv), "qpos": q}, ("qpos",))
    with pytest.raises(ValueError, match="output 'efc_force' is not a fixed-shape"):
        calls.step({"qpos": q}, ("efc_force",))
    with pytest.raises(ValueError, match=rf"input .qpos. must have shape \(\*batch, {model.nq}\)"):
        calls.step({"qpos": jnp.zeros(3)}, ("qpos",))
    with pytest.raises(TypeError, match="takes a dict from `MjData` field name"):
        calls.step([q], ("qpos",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nstep"):
        calls.step({"qpos": q}, ("qpos",), nstep=0)


def test_load_reads_a_persistent_rows_mjdata(x64):
    model, fs = gym("Ant-v5")
    steps = _fields.FieldSteps(model, ("physics",), ("qpos",), fs, persistent=True)
    S = random_states(model, 2, seed=1)
    (qpos,) = steps.step(S)
    d = mujoco.MjData(model)
    steps.rows(2).load(1, d)
    np.testing.assert_array_equal(d.qpos, qpos[1])
    shared = _fields.FieldSteps(model, ("physics",), ("qpos",), fs)
    shared.step(S)
    with pytest.raises(ValueError, match="persistent=True"):
        shared.rows(2).load(0, d)


# -- the one difference rule -------------------------------------------------------------


def _jump(at):
    """`x + (x > at)` per coordinate: slope 1 everywhere but a unit jump at `at`."""
    return lambda pts, rows: pts + (pts > at).astype(float)


@pytest.mark.parametrize("at", [3e-8, -3e-8, 5e-9, -5e-9, 2.0])
def test_differences_do_not_reach_over_a_jump(at):
    J = _differences.jacobian(_jump(at), np.zeros((1, 1)))
    np.testing.assert_allclose(J, [[[1.0]]], rtol=1e-6)


def test_differences_at_a_kink_are_the_mean_of_the_sides():
    def f(pts, rows):
        return np.concatenate([np.abs(pts), np.maximum(pts, 0.0)], axis=1)

    J = _differences.jacobian(f, np.zeros((2, 1)))
    np.testing.assert_allclose(J[:, :, 0], [[0.0, 0.5], [0.0, 0.5]], atol=1e-9)


def test_differences_keep_each_rows_other_inputs():
    """`f` sees which row each point perturbs: a row's own constant enters its derivative."""
    c = np.array([2.0, -3.0])
    J = _differences.jacobian(lambda p, rows: c[rows, None] * p, np.ones((2, 1)))
    np.testing.assert_allclose(J[:, 0, 0], c, rtol=1e-7)


def test_unused_outputs_are_not_copied_and_the_used_ones_are_right(x64, monkeypatch):
    """The primitive's dead-code rule: an output the program does not read gets no buffer,
    and the fast path still writes the others (`mj_rnePostConstraint` skipped with it)."""
    model, fs = gym("Ant-v5")
    S = random_states(model, 4, seed=2)
    q, v = S[:, 1 : 1 + model.nq].copy(), S[:, 1 + model.nq : 1 + model.nq + model.nv]
    q[::2, 2] -= 0.5
    calls = DataCalls(model)
    names = ("qpos", "xpos", "cfrc_ext")
    seen = []
    original = _fields.FieldRows.run

    def counted(self, ins, outs, ids=None):
        seen.append([o is None for o in outs])
        return original(self, ins, outs, ids)

    monkeypatch.setattr(_fields.FieldRows, "run", counted)
    step = jax.vmap(lambda q, v: calls.step({"qpos": q, "qvel": v}, names, nstep=fs))
    xpos = jax.jit(lambda q, v: step(q, v)["xpos"])(q, v)
    assert seen == [[True, False, True]]
    full = jax.jit(step)(q, v)
    assert seen[1:] == [[False, False, False]]
    np.testing.assert_array_equal(xpos, full["xpos"])
    for i in range(4):
        ref = _raw_step(model, q[i], v[i], 0.0, 0.0, fs, names)
        np.testing.assert_array_equal(np.asarray(full["cfrc_ext"][i]), ref["cfrc_ext"])
        np.testing.assert_array_equal(np.asarray(xpos[i]), ref["xpos"])
