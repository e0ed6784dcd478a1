"""State helpers, model loading, and the missing-MuJoCo error."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from test_mujoco_models import ARM, FULL, arm

from jaxbridge.mujoco import Simulator, StateParts, load_model


def test_initial_state_is_a_fresh_mjdata(x64):
    model = arm()
    sim = Simulator(model)
    ref = np.empty(mujoco.mj_stateSize(model, FULL))
    mujoco.mj_getState(model, mujoco.MjData(model), ref, FULL)
    assert sim.nstate == ref.size == 1 + model.nq + model.nv + model.na
    np.testing.assert_array_equal(sim.initial_state(), ref)


def test_keyframe_zero_is_the_initial_state():
    xml = ARM.format(integrator="Euler").replace(
        "</mujoco>", '<keyframe><key qpos="0 0 2 1 0 0 0 1 0 0 0 0.5"/></keyframe></mujoco>'
    )
    sim = Simulator(xml)
    assert float(sim.split_state(sim.initial_state()).qpos[2]) == 2.0


def test_make_and_split_round_trip_batched(x64):
    sim = Simulator(arm())
    qpos = jnp.arange(3 * 12, dtype=jnp.float64).reshape(3, 12)
    state = jax.jit(lambda q, t: sim.make_state(qpos=q, time=t))(qpos, jnp.array(2.0))
    assert state.shape == (3, sim.nstate)
    parts = sim.split_state(state)
    assert isinstance(parts, StateParts)
    np.testing.assert_array_equal(parts.qpos, qpos)
    np.testing.assert_array_equal(parts.time, [2.0, 2.0, 2.0])
    init = sim.split_state(sim.initial_state())
    np.testing.assert_array_equal(parts.qvel, jnp.broadcast_to(init.qvel, (3, 10)))
    assert parts.act.shape == (3, 1) and parts.history.shape == (3, 0)
    again = sim.make_state(**{k: v for k, v in parts._asdict().items()})
    np.testing.assert_array_equal(again, state)
    # vmap and grad through the helpers
    g = jax.grad(lambda q: jnp.sum(sim.make_state(qpos=q) ** 2))(qpos[0])
    np.testing.assert_array_equal(g, 2 * qpos[0])


def test_make_state_errors():
    sim = Simulator(arm())
    with pytest.raises(
        ValueError,
        match=r"`Simulator.make_state\(qpos=...\)` must have trailing "
        r"dimension 12 \(this model's qpos size\); got shape \(7,\)",
    ):
        sim.make_state(qpos=jnp.zeros(7))
    with pytest.raises(ValueError, match="do not broadcast together"):
        sim.make_state(qpos=jnp.zeros((2, 12)), qvel=jnp.zeros((3, 10)))
    with pytest.raises(
        ValueError,
        match=r"`Simulator.split_state\(state=...\)` must have "
        r"trailing dimension nstate=24",
    ):
        sim.split_state(jnp.zeros(5))


def test_load_model_forms(tmp_path):
    model = arm()
    assert load_model(model) is model
    path = tmp_path / "arm.xml"
    path.write_text(ARM.format(integrator="Euler"))
    assert load_model(path).nq == 12 and load_model(str(path)).nq == 12
    mjb = tmp_path / "arm.mjb"
    mujoco.mj_saveModel(model, str(mjb), None)
    assert load_model(mjb).nq == 12
    with pytest.raises(FileNotFoundError, match="no file at"):
        load_model(tmp_path / "missing.xml")
    with pytest.raises(
        TypeError,
        match=r"must be a `mujoco.MjModel`, MJCF text or a path .*got "
        r"int",
    ):
        load_model(3)
    with pytest.raises(TypeError, match="has no `mujoco.MjModel`"):
        Simulator.from_gymnasium("CartPole-v1")


def test_missing_mujoco_names_the_fix():
    code = (
        "import sys; sys.modules['mujoco'] = None\n"
        "import jaxbridge\n"
        "try:\n"
        "    import jaxbridge.mujoco\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "`jaxbridge.mujoco` needs MuJoCo: `pip install jaxbridge[mujoco]`"
