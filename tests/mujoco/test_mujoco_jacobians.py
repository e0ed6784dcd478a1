"""`forward`'s Jacobians (analytic for kinematics, differences at the cheapest stage otherwise)
against central differences of raw `mj_forward` in the coordinates of the state array."""

import jax
import mujoco
import numpy as np
import pytest
from test_mujoco_models import FULL, arm, gym, random_states

from jaxbridge.mujoco import Simulator
from jaxbridge.mujoco._jacobians import ANALYTIC, KINEMATIC

KINDS = (
    "xpos",
    "xipos",
    "geom_xpos",
    "site_xpos",
    "subtree_com",
    "xquat",
    "xmat",
    "ximat",
    "geom_xmat",
    "site_xmat",
    "xanchor",
    "xaxis",
    "cam_xpos",
    "actuator_length",
)


def raw_jacobians(model, state, ctrl, names, h=1e-6):
    """Central differences of raw mj_forward over every state entry and control."""
    d = mujoco.MjData(model)

    def f(s, u):
        mujoco.mj_resetData(model, d)
        mujoco.mj_setState(model, d, s, FULL)
        d.ctrl[:] = u
        mujoco.mj_forward(model, d)
        return {n: np.array(getattr(d, n), dtype=float) for n in names}

    def diff(points):
        cols = [(f(*p), f(*q)) for p, q in points]
        return {n: np.stack([(a[n] - b[n]) / (2 * h) for a, b in cols], axis=-1) for n in names}

    Js = diff([((state + h * e, ctrl), (state - h * e, ctrl)) for e in np.eye(len(state))])
    Ju = diff([((state, ctrl + h * e), (state, ctrl - h * e)) for e in np.eye(len(ctrl))])
    for n in names:
        Js[n][..., 0] = 0.0  # time: forward's Jacobian treats it as a constant
    return Js, Ju


@pytest.mark.parametrize("case", ["Humanoid-v5", "Ant-v5", "Hopper-v5", "Pusher-v5", "arm"])
def test_kinematic_jacobians_equal_raw_central_differences(case, x64):
    model = arm() if case == "arm" else gym(case)[0]  # arm: free, ball and hinge joints, a site
    sim = Simulator(model)
    S = random_states(model, 2, qvel=0.3, qpos=0.1)
    U = np.random.default_rng(1).uniform(-0.5, 0.5, (2, model.nu))
    names = tuple(k for k in KINDS if getattr(mujoco.MjData(model), k).size)
    jac = jax.jit(jax.vmap(jax.jacrev(lambda s, u: sim.forward(s, u, outputs=names), (0, 1))))
    got = jac(S, U)
    for i in range(2):
        Js, Ju = raw_jacobians(model, S[i], U[i], names)
        for name in names:
            np.testing.assert_allclose(got[name][0][i], Js[name], atol=1e-6, err_msg=name)
            np.testing.assert_allclose(got[name][1][i], Ju[name], atol=1e-6, err_msg=name)
    assert "xquat" in names and "geom_xmat" in names


@pytest.mark.parametrize("case", ["Humanoid-v5", "arm"])
def test_differenced_outputs_equal_raw_central_differences(case, x64):
    model = arm() if case == "arm" else gym(case)[0]
    sim = Simulator(model, max_contacts=4)
    S = random_states(model, 1, qvel=0.3, qpos=0.05)
    U = np.random.default_rng(2).uniform(-0.5, 0.5, (1, model.nu))
    names = ("qacc", "sensordata", "actuator_force") if model.nsensordata else ("qacc", "cacc")
    got = jax.jit(jax.jacrev(lambda s, u: sim.forward(s, u, outputs=names), (0, 1)))(S[0], U[0])
    Js, Ju = raw_jacobians(model, S[0], U[0], names)
    for name in names:
        # Differenced with step 1e-8 (as steps are): rounding of about 1e-16 |f| / 1e-8.
        scale = max(1.0, np.abs(Js[name]).max())
        np.testing.assert_allclose(got[name][0], Js[name], atol=1e-5 * scale, err_msg=name)
        np.testing.assert_allclose(got[name][1], Ju[name], atol=1e-5 * scale, err_msg=name)


def test_contact_outputs_and_kinds():
    model = gym("Hopper-v5")[0]
    sim = Simulator(model, max_contacts=4)
    with jax.enable_x64(True):
        state = sim.make_state(qpos=np.array([0.0, 3.0, 0.0, 0.0, 0.0, 0.0]))  # in the air
        out = lambda s: sim.forward(s, outputs=("contact_dist", "xpos", "sensordata"))  # noqa: E731
        J = jax.jacrev(lambda s: {k: v for k, v in out(s).items() if k != "ncon"})(state)
    np.testing.assert_array_equal(J["contact_dist"], 0.0)  # no contact: zero padding
    assert np.abs(J["xpos"]).max() > 0
    assert ANALYTIC < KINEMATIC
