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


@pytest.mark.parametrize("case", ["Humanoid-v5", "Ant-v5", "Pusher-v5", "arm"])
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
        # Differenced with step 1e-7 (as steps are): rounding of about 1e-16 |f| / 1e-7.
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
    assert ANALYTIC - {"contact_dist"} < KINEMATIC


@pytest.mark.parametrize("case", ["HumanoidStandup-v5", "Humanoid-v5", "Walker2d-v5"])
def test_contact_distances_on_the_ground(case, x64):
    """The analytic contact_dist Jacobian (contacts held fixed) against raw differences, in
    the directions where no contact appears or disappears."""
    from test_mujoco_gradients import ground_state

    model, frame_skip = gym(case)
    K = 16
    sim = Simulator(model, max_contacts=K)
    state, ncon = ground_state(model, frame_skip, 0)
    assert 0 < ncon <= K
    out = lambda s: sim.forward(s, outputs=("contact_dist",))["contact_dist"]  # noqa: E731
    got = jax.jit(jax.jacrev(out))(state)
    d = mujoco.MjData(model)

    def raw(s):
        mujoco.mj_resetData(model, d)
        mujoco.mj_setState(model, d, s, FULL)
        mujoco.mj_forward(model, d)
        dist = np.zeros(K)
        dist[: d.ncon] = d.contact.dist[: d.ncon]
        return dist, d.ncon, d.contact.geom[: d.ncon].copy()

    _, _, geoms = raw(state)
    checked = 0
    for j in range(1, 1 + model.nq):
        h = 1e-6
        e = np.zeros_like(state)
        e[j] = h
        (plus, n_plus, g_plus), (minus, n_minus, g_minus) = raw(state + e), raw(state - e)
        if not (n_plus == n_minus == ncon and (g_plus == geoms).all() and (g_minus == geoms).all()):
            continue  # the contact set changes within the step
        np.testing.assert_allclose(got[:, j], (plus - minus) / (2 * h), atol=1e-6, err_msg=str(j))
        checked += 1
    assert checked > model.nq // 2
    np.testing.assert_array_equal(got[ncon:], 0.0)  # padding
