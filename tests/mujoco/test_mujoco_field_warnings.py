"""The `"warning"` output of the engine's field calls: the MuJoCo warnings each row raised in a
call, which `mj_step` otherwise answers silently by resetting the simulation."""

from typing import Any

import jax
import jax.numpy as jnp
import mujoco as _mujoco
import numpy as np

from jaxbridge.mujoco import DataCalls

mujoco: Any = _mujoco  # MuJoCo ships no type stubs

XML = """
<mujoco><worldbody><body><joint name="j" type="hinge"/>
<geom type="capsule" size=".1" fromto="0 0 0 0 0 -.5"/></body></worldbody>
<actuator><motor joint="j"/></actuator></mujoco>
"""


def _raw_warnings(m, qpos, qvel, nstep):
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    for _ in range(nstep):
        mujoco.mj_step(m, d)
    return [d.warning[i].number for i in range(int(mujoco.mjtWarning.mjNWARNING))], d.qpos.copy()


def test_each_row_reports_the_warnings_of_its_own_call(x64):
    calls = DataCalls(XML)
    m = calls.model
    qpos = np.array([[0.1], [np.nan], [0.2], [0.3]])
    qvel = np.array([[0.0], [0.0], [1e12], [0.5]])  # a NaN pose; a velocity MuJoCo rejects
    f = jax.jit(
        jax.vmap(lambda q, v: calls.step({"qpos": q, "qvel": v}, ("qpos", "warning"), nstep=3))
    )
    out = f(jnp.asarray(qpos), jnp.asarray(qvel))
    assert out["warning"].dtype == jnp.int32 and out["warning"].shape == (4, 7)
    for i in range(4):
        want, q = _raw_warnings(m, qpos[i], qvel[i], 3)
        np.testing.assert_array_equal(out["warning"][i], want)
        np.testing.assert_allclose(out["qpos"][i], q, atol=1e-12)
    assert out["warning"][1, int(mujoco.mjtWarning.mjWARN_BADQPOS)] == 1
    w = np.asarray(out["warning"])
    assert w[2].sum() >= 1 and w[[0, 3]].sum() == 0
    # the next call counts its own warnings only
    clean = f(jnp.zeros((4, 1)), jnp.zeros((4, 1)))
    assert int(clean["warning"].sum()) == 0
