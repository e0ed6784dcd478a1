"""Models and states for the tests of `jaxbridge.mujoco.mjx` (real MuJoCo, no Playground)."""

from typing import Any

import mujoco as _mujoco
import numpy as np

mujoco: Any = _mujoco  # MuJoCo ships no type stubs

#: A free box falling on a plane (contacts), a two-link arm with a tendon, three kinds of
#: actuator, and position and acceleration sensors (MuJoCo's `mj_rnePostConstraint` inside).
SCENE = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .12"><freejoint/><geom type="box" size=".1 .1 .1"/><site name="s"/></body>
    <body pos=".5 0 .5">
      <joint name="h" type="hinge" axis="0 1 0" damping=".1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05"/>
      <body pos=".3 0 0">
        <joint name="h2" type="hinge" axis="0 1 0" range="-1 1"/>
        <geom type="sphere" size=".06" pos=".2 0 0"/><site name="tip" pos=".2 0 0"/>
      </body>
    </body>
  </worldbody>
  <tendon><fixed name="t"><joint joint="h" coef="1"/><joint joint="h2" coef="-1"/></fixed></tendon>
  <actuator>
    <motor joint="h" gear="2"/><position joint="h2" kp="5"/><motor tendon="t"/>
  </actuator>
  <sensor><framepos objtype="site" objname="tip"/><accelerometer site="s"/></sensor>
</mujoco>
"""

#: Another model, for the errors.
PENDULUM = """
<mujoco><worldbody><body><joint name="j" type="hinge"/>
<geom type="capsule" size=".1" fromto="0 0 0 0 0 -.5"/></body>
</worldbody><actuator><motor joint="j"/></actuator></mujoco>
"""


def scene() -> Any:
    return mujoco.MjModel.from_xml_string(SCENE)


def pendulum() -> Any:
    return mujoco.MjModel.from_xml_string(PENDULUM)


def chain(n: int) -> Any:
    """A chain of `n` hinged links: a structure no other test registers, for each `n`."""
    body = ""
    for _ in range(n):
        body += '<body pos="0 0 -.2"><joint type="hinge"/><geom type="sphere" size=".05"/>'
    xml = f"<mujoco><worldbody>{body}{'</body>' * n}</worldbody></mujoco>"
    return mujoco.MjModel.from_xml_string(xml)


def states(m: Any, n: int, seed: int = 0, settle: int = 20) -> list[Any]:
    """`n` MjData in motion (after `settle` raw steps from a random pose and control), with
    contacts where the model has them, and a warm start."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        d = mujoco.MjData(m)
        d.qpos[:] = m.qpos0
        d.qpos[7:] += 0.3 * rng.standard_normal(m.nq - 7) if m.nq > 7 else 0.0
        d.qvel[:] = 0.5 * rng.standard_normal(m.nv)
        d.ctrl[:] = rng.uniform(-1, 1, m.nu)
        mujoco.mj_forward(m, d)
        for _ in range(settle):
            mujoco.mj_step(m, d)
        out.append(d)
    return out


def crowd(cone: str = "pyramidal", jacobian: str = "dense") -> Any:
    """Free bodies of condim 1 (3 in an elliptic cone, where MJX has no condim 1), 3, 4 and 6
    over a plane, a hinge with a range and friction loss, and a connect equality: every kind
    of constraint row `mjx.put_data` places."""
    low = 3 if cone == "elliptic" else 1
    xml = f"""
    <mujoco>
      <option timestep="0.005" cone="{cone}" jacobian="{jacobian}"/>
      <worldbody>
        <geom type="plane" size="5 5 .1" condim="{low}"/>
        <body pos="0 0 .1"><freejoint/><geom type="sphere" size=".1" condim="{low}"/></body>
        <body pos=".4 0 .1"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
        <body pos="-.4 0 .1"><freejoint/><geom type="sphere" size=".1" condim="4"/></body>
        <body pos="0 .4 .1"><freejoint/><geom type="sphere" size=".1" condim="6"/></body>
        <body name="arm" pos="0 -.6 .5">
          <joint name="h" type="hinge" axis="0 1 0" range="-.3 .3" frictionloss=".05"/>
          <geom type="capsule" fromto="0 0 0 .3 0 0" size=".04" contype="0" conaffinity="0"/>
          <body name="tip" pos=".3 0 0"><joint type="hinge" axis="0 1 0"/>
            <geom type="sphere" size=".04" contype="0" conaffinity="0"/></body>
        </body>
      </worldbody>
      <equality><connect body1="tip" body2="world" anchor="0 0 0"/></equality>
      <actuator><motor joint="h"/></actuator>
    </mujoco>
    """
    return mujoco.MjModel.from_xml_string(xml)


def crowd_states(m: Any, lifted: list[bool], seed: int = 0) -> list[Any]:
    """States of `crowd`: those `lifted` (each free body raised by a different height, some
    off the ground) touch the ground in fewer places, or none."""
    rng = np.random.default_rng(seed)
    out = []
    for k, up in enumerate(lifted):
        d = mujoco.MjData(m)
        d.qpos[:] = m.qpos0
        d.qvel[:] = 0.3 * rng.standard_normal(m.nv)
        d.ctrl[:] = rng.uniform(-1, 1, m.nu)
        for body in range(4):  # free joints' z: lifted by 0.5 from the k-th on
            d.qpos[7 * body + 2] += 0.5 if up and body >= k % 4 else -0.005
        d.qpos[28] = 0.4 * (k % 3 - 1)  # the hinge near, past or away from its range
        mujoco.mj_forward(m, d)
        for _ in range(3):
            mujoco.mj_step(m, d)
        out.append(d)
    return out
