"""Models shared by the MuJoCo tests (imported by the other test files): the gymnasium ones,
and a small contact-free one with every joint kind (free, ball, hinge), sensors and a filtered
actuator (so `act` is nonempty)."""

import contextlib
import functools
import tempfile

import mujoco
import numpy as np

from jaxbridge.mujoco._model import load_gymnasium

GYM = ("Humanoid-v5", "Ant-v5", "Hopper-v5", "HalfCheetah-v5")

ARM = """<mujoco><option integrator="{integrator}" timestep="0.005"/>
<worldbody><body pos="0 0 1"><freejoint/><geom type="capsule" size=".05" fromto="0 0 0 .3 0 0"/>
<body pos=".3 0 0"><joint type="ball" damping=".1"/>
<geom type="capsule" size=".04" fromto="0 0 0 0 .3 0"/>
<body pos="0 .3 0"><joint name="h" type="hinge" axis="0 0 1" damping=".05"/>
<geom size=".05" pos="0 .1 0"/><site name="tip" pos="0 .2 0"/></body></body></body></worldbody>
<actuator><motor joint="h"/><general name="filt" joint="h" dyntype="filter" dynprm=".1"/></actuator>
<sensor><framepos objtype="site" objname="tip"/><jointvel joint="h"/>
<actuatorfrc actuator="filt"/></sensor></mujoco>"""

FULL = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)


@functools.cache
def gym(env_id: str):
    # MuJoCo logs compiler warnings (half_cheetah.xml's deprecated `settotalmass`) to
    # ./MUJOCO_LOG.TXT: keep that file out of the repository.
    with contextlib.chdir(tempfile.gettempdir()):
        return load_gymnasium(env_id)


def arm(integrator: str = "implicitfast") -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(ARM.format(integrator=integrator))


def random_states(model, B, seed=0, qvel=0.5, qpos=0.05):
    """`B` states near the initial one (quaternions slightly off unit length on purpose)."""
    rng = np.random.default_rng(seed)
    d = mujoco.MjData(model)
    s = np.empty(mujoco.mj_stateSize(model, FULL))
    mujoco.mj_getState(model, d, s, FULL)
    S = np.tile(s, (B, 1))
    S[:, 0] = rng.uniform(0, 1, B)
    S[:, 1 : 1 + model.nq] += qpos * rng.standard_normal((B, model.nq))
    S[:, 1 + model.nq : 1 + model.nq + model.nv] += qvel * rng.standard_normal((B, model.nv))
    if model.na:
        S[:, 1 + model.nq + model.nv :][:, : model.na] = rng.uniform(0, 0.5, (B, model.na))
    return S


def raw_rollout(model, state, ctrls, nstep):
    """Reference: a fresh MjData, mj_setState, then mj_step, nothing else."""
    d = mujoco.MjData(model)
    mujoco.mj_setState(model, d, state, FULL)
    states, sensors = [], []
    for u in ctrls:
        d.ctrl[:] = u
        for _ in range(nstep):
            mujoco.mj_step(model, d)
        s = np.empty(mujoco.mj_stateSize(model, FULL))
        mujoco.mj_getState(model, d, s, FULL)
        states.append(s)
        sensors.append(d.sensordata.copy())
    return np.array(states), np.array(sensors).reshape(len(ctrls), model.nsensordata)


def raw_forward(model, state, ctrl, names):
    d = mujoco.MjData(model)
    mujoco.mj_setState(model, d, state, FULL)
    d.ctrl[:] = ctrl
    mujoco.mj_forward(model, d)
    return {n: getattr(d, n).copy() for n in names}, d


def test_arm_model_has_every_joint_kind():
    model = arm()
    assert (model.nq, model.nv, model.na, model.nu, model.nsensordata) == (12, 10, 1, 2, 5)
