"""`from jaxbridge.mujoco import mjx` in place of `from mujoco import mjx`: every name resolves,
and an MJX tutorial's program with only its import changed steps as `mujoco.mj_step` does."""

import types
from typing import Any

import jax
import mujoco as _mujoco
import numpy as np
import pytest

real_mjx = pytest.importorskip("mujoco.mjx")

from mjx_models import scene  # noqa: E402

from jaxbridge.mujoco import mjx as cmjx  # noqa: E402
from jaxbridge.mujoco.mjx import _step  # noqa: E402

mujoco: Any = _mujoco  # MuJoCo ships no type stubs


def _public(module) -> list[str]:
    return [
        n
        for n in dir(module)
        if not n.startswith("_") and not isinstance(getattr(module, n), types.ModuleType)
    ]


def test_every_public_name_of_mujoco_mjx_resolves():
    names = _public(real_mjx)
    assert {"make_data", "put_data", "get_data", "Model", "Data", "kinematics"} <= set(names)
    for name in names:
        ours = getattr(cmjx, name)
        if name in cmjx.ON_C_MUJOCO:
            assert ours is not getattr(real_mjx, name), name
        else:
            assert ours is getattr(real_mjx, name), name
        assert name in dir(cmjx) and name in cmjx.__all__, name
    assert cmjx.step is _step.step and cmjx.forward is _step.forward
    assert set(cmjx.ON_C_MUJOCO) == {"step", "forward", "put_model", "register"}


def test_from_import_and_star_import():
    from jaxbridge.mujoco.mjx import Data, make_data, put_data  # noqa: F401

    namespace: dict[str, Any] = {}
    exec("from jaxbridge.mujoco.mjx import *", namespace)
    assert namespace["make_data"] is real_mjx.make_data
    assert namespace["step"] is cmjx.step


def test_a_name_neither_has_raises_attribute_error():
    with pytest.raises(AttributeError, match=r"has no attribute 'not_a_name' \(neither has"):
        cmjx.not_a_name  # noqa: B018
    assert not hasattr(cmjx, "__wrapped__")  # dunder probes (inspect, doctest) are not forwarded


def _noise(key, n: int):
    return jax.random.uniform(key, (n,), minval=-0.02, maxval=0.02)


def _tutorial(mjx, m: Any, d: Any, nsteps: int):
    """MJX's tutorial, as written for `from mujoco import mjx` (only `mjx` differs)."""
    mjx_model = mjx.put_model(m)
    mjx_data = mjx.put_data(m, d)
    rng = jax.random.split(jax.random.PRNGKey(0), 8)
    batch = jax.vmap(lambda r: mjx_data.replace(qpos=mjx_data.qpos + _noise(r, m.nq)))(rng)
    jit_step = jax.jit(jax.vmap(mjx.step, in_axes=(None, 0)))
    for _ in range(nsteps):
        batch = jit_step(mjx_model, batch)
    return mjx.get_data(m, batch), jax.vmap(lambda d: d.qpos)(batch)


def test_a_tutorial_program_with_only_the_import_changed_equals_mj_step(x64):
    m = scene()
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    got, qpos = _tutorial(cmjx, m, d, nsteps=30)
    assert len(got) == 8

    # the reference: each row's initial state, stepped by C MuJoCo itself
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    start = jax.vmap(lambda r: real_mjx.put_data(m, d).qpos + _noise(r, m.nq))(keys)
    for i, row in enumerate(got):
        ref = mujoco.MjData(m)
        ref.qpos[:] = np.asarray(start[i])
        for _ in range(30):
            mujoco.mj_step(m, ref)
        assert ref.ncon > 0  # the box rests on the plane: contacts were stepped
        np.testing.assert_allclose(row.qpos, ref.qpos, atol=1e-9, rtol=0)
        np.testing.assert_allclose(row.qvel, ref.qvel, atol=1e-9, rtol=0)
        np.testing.assert_allclose(np.asarray(qpos[i]), ref.qpos, atol=1e-9, rtol=0)
        assert row.ncon == ref.ncon


def test_mjx_own_functions_act_on_the_same_data(x64):
    """A name that is MJX's own (here `kinematics`) runs on a Data our step returned."""
    m = scene()
    d = mujoco.MjData(m)
    mx = cmjx.put_model(m)
    stepped = jax.jit(cmjx.step)(mx, cmjx.put_data(m, d))
    with jax.numpy_dtype_promotion("standard"):  # MJX's own code mixes Python floats and bools
        xpos = jax.jit(cmjx.kinematics)(mx, stepped).xpos
    ref = mujoco.MjData(m)
    mujoco.mj_step(m, ref)
    mujoco.mj_kinematics(m, ref)
    np.testing.assert_allclose(np.asarray(xpos), ref.xpos, atol=1e-9, rtol=0)


def test_a_model_of_mjx_own_put_model_that_was_never_registered_is_refused(x64):
    xml = "<mujoco><worldbody><body><joint/><joint/><geom size='.1'/></body></worldbody></mujoco>"
    m = mujoco.MjModel.from_xml_string(xml)  # a structure no other test registers
    mx = real_mjx.put_model(m, impl="jax")
    with pytest.raises(ValueError, match=r"matches no registered MjModel.*put_model\(mj_model\)"):
        cmjx.step(mx, real_mjx.make_data(mx))
