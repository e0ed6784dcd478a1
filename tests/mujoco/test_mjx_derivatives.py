"""The derivatives of `jaxbridge.mujoco.mjx.step` where a difference would reach over a contact.

A box rests a few `1e-8` above (or below) the plane, so that moving its height by the difference
step (`1e-7`) makes or breaks its four contacts. A central difference over that point is no
derivative of anything (it holds the contact's impulse divided by the step); the derivative of
the piece that holds the state is a difference whose points stay on the state's side of the
change, computed here by hand from raw `mujoco.mj_step`. `mjx.step`'s must equal it, and equal
`jaxbridge.mujoco.DataCalls`' (the engine's own rule) for the same state.
"""

from typing import Any

import jax
import jax.numpy as jnp
import mujoco as _mujoco
import numpy as np
import pytest

mjx = pytest.importorskip("mujoco.mjx")

from mjx_models import scene  # noqa: E402

from jaxbridge.mujoco import DataCalls  # noqa: E402
from jaxbridge.mujoco import mjx as cmjx  # noqa: E402

mujoco: Any = _mujoco  # MuJoCo ships no type stubs

Z = 2  # the box's height in qpos
H = 1e-7  # the package's difference step (`_differences.EPS`) at |x| <= 1


def _near_contact(m, offset):
    """An MjData with the box, flat, `offset` above the plane (below where negative), falling."""
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0
    d.qpos[Z] = 0.1 + offset
    d.qvel[Z] = -0.3
    d.qvel[0] = 0.2
    mujoco.mj_forward(m, d)
    return d


def _raw_step(m, d0, qpos):
    """`(qpos, qvel)` after one raw `mj_step` from `d0` with `qpos` in place of its own."""
    d = mujoco.MjData(m)
    mujoco.mj_copyData(d, m, d0)
    d.qpos[:] = qpos
    mujoco.mj_step(m, d)
    return np.concatenate([d.qpos, d.qvel]), int(d.ncon)


def _piece_derivative(m, d0, q0, e):
    """The derivative of the piece that holds the state: a central difference whose points
    both keep its contacts (a step of `1e-8`, inside the `3e-8` from the contact change)."""
    h = H / 10
    return (_raw_step(m, d0, q0 + h * e)[0] - _raw_step(m, d0, q0 - h * e)[0]) / (2 * h)


@pytest.mark.parametrize("offset", [3e-8, -3e-8], ids=["contact_below", "contact_above"])
def test_a_step_over_a_contact_change_is_the_derivative_of_its_own_side(x64, offset):
    m = scene()
    mx = cmjx.put_model(m)
    d0 = _near_contact(m, offset)
    data = mjx.put_data(m, d0)
    q0 = d0.qpos.copy()
    e = np.eye(m.nq)[Z]
    n0 = _raw_step(m, d0, q0)[1]
    fp, n_plus = _raw_step(m, d0, q0 + H * e)
    fm, n_minus = _raw_step(m, d0, q0 - H * e)
    assert (n_plus, n_minus) == (0, 4)  # the step makes or breaks four contacts
    assert n0 == (0 if offset > 0 else 4)
    ref = _piece_derivative(m, d0, q0, e)
    central = (fp - fm) / (2 * H)
    assert np.abs(central - ref).max() > 10.0  # the central difference is meaningless here

    def qpos_qvel(q):
        out = cmjx.step(mx, data.replace(qpos=q))
        return jnp.concatenate([out.qpos, out.qvel])

    col = jax.jit(jax.jacfwd(qpos_qvel))(jnp.asarray(q0))[:, Z]
    np.testing.assert_allclose(col, ref, atol=1e-6, rtol=1e-6)
    rev = jax.jit(jax.jacrev(qpos_qvel))(jnp.asarray(q0))[:, Z]
    np.testing.assert_allclose(rev, col, atol=1e-12)

    # The engine's field calls, from the same state, give the same derivative.
    calls = DataCalls(m)
    state = {
        "qpos": jnp.asarray(q0),
        "qvel": jnp.asarray(d0.qvel),
        "qacc_warmstart": jnp.asarray(d0.qacc_warmstart),
        "ctrl": jnp.asarray(d0.ctrl),
    }

    def fields(q):
        out = calls.step({**state, "qpos": q}, ("qpos", "qvel"))
        return jnp.concatenate([out["qpos"], out["qvel"]])

    theirs = jax.jit(jax.jacfwd(fields))(jnp.asarray(q0))
    np.testing.assert_allclose(jax.jit(jax.jacfwd(qpos_qvel))(jnp.asarray(q0)), theirs, atol=1e-9)


def test_every_leaf_differentiated_at_a_contact_change_is_finite_and_one_sided(x64):
    """The whole Data's Jacobian, contact slots included (an empty slot's distance is 1e10):
    the state's part is still the one-sided derivative, and nothing is the jump over a step."""
    m = scene()
    mx = cmjx.put_model(m)
    d0 = _near_contact(m, 3e-8)
    data = mjx.put_data(m, d0)
    q0 = d0.qpos.copy()
    e = np.eye(m.nq)[Z]
    ref = _piece_derivative(m, d0, q0, e)

    def step(q):
        return cmjx.step(mx, data.replace(qpos=q))

    tangent = jax.jit(lambda q, t: jax.jvp(step, (q,), (t,))[1])(jnp.asarray(q0), jnp.asarray(e))
    for path, leaf in jax.tree_util.tree_flatten_with_path(tangent)[0]:
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            assert np.all(np.abs(np.asarray(leaf)) < 1e6), jax.tree_util.keystr(path)
    np.testing.assert_allclose(
        np.concatenate([tangent.qpos, tangent.qvel]), ref, atol=1e-6, rtol=1e-6
    )


def test_under_vmap_each_row_takes_its_own_side(x64):
    """Both poses in one batch (one Jacobian call for the two rows): each row's derivative is
    that of its own piece, as when differenced alone."""
    m = scene()
    mx = cmjx.put_model(m)
    ds = [_near_contact(m, offset) for offset in (3e-8, -3e-8)]
    data = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[mjx.put_data(m, d) for d in ds])
    e = np.eye(m.nq)[Z]

    def qpos_qvel(x):
        out = cmjx.step(mx, x)
        return jnp.concatenate([out.qpos, out.qvel])

    def column(x):
        return jax.jvp(lambda q: qpos_qvel(x.replace(qpos=q)), (x.qpos,), (jnp.asarray(e),))[1]

    cols = jax.jit(jax.vmap(column))(data)
    for col, d in zip(cols, ds):
        np.testing.assert_allclose(
            col, _piece_derivative(m, d, d.qpos.copy(), e), atol=1e-6, rtol=1e-6
        )
