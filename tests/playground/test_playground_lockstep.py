"""`jaxbridge.playground.load(name)` in lockstep with Playground's own environment code whose
physics is raw `mujoco.mj_step` (`reference.Reference`): observations, rewards and done flags
to 1e-9 in float64 with random actions.

By default three environments run 150 steps and every dm_control suite environment a few;
`JAXBRIDGE_SLOW=1` runs all 25 for 150 steps (and MJX's own step, which drifts from the
reference, to show that the test tells the engines apart).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mujoco_playground._src import dm_control_suite
from reference import Reference, actions, leaves

from jaxbridge import playground

ALL = tuple(dm_control_suite.ALL_ENVS)
LONG = ("HopperHop", "CheetahRun", "FingerTurnHard")
TOL = 1e-9


def _lockstep(name: str, T: int, seed: int = 0) -> None:
    ref, ours = Reference(name), playground.load(name)
    key = jax.random.PRNGKey(seed)
    r, o = ref.reset(key), jax.jit(ours.reset)(key)
    np.testing.assert_allclose(o.obs, r.obs, rtol=TOL, atol=TOL, err_msg=f"{name} reset")
    step = jax.jit(ours.step)
    for t, a in enumerate(actions(name, ours.action_size, T, seed)):
        r, o = ref.step(r, jnp.asarray(a)), step(o, jnp.asarray(a))
        for what, x, y in zip(
            ("obs", "reward", "done"),
            leaves((o.obs, o.reward, o.done)),
            leaves((r.obs, r.reward, r.done)),
        ):
            np.testing.assert_allclose(x, y, rtol=TOL, atol=TOL, err_msg=f"{name} {what} t={t}")


@pytest.mark.parametrize("name", LONG)
def test_150_steps(x64, name):
    _lockstep(name, 150)


@pytest.mark.parametrize("name", [n for n in ALL if n not in LONG])
def test_every_dm_control_env(x64, name):
    _lockstep(name, 150 if _slow() else 5)


def _slow() -> bool:
    import os

    return os.environ.get("JAXBRIDGE_SLOW") == "1"


@pytest.mark.slow
def test_mjx_own_step_is_told_apart(x64):
    """MJX's JAX engine on the same environment leaves the reference by far more than 1e-9."""
    from mujoco_playground import registry
    from reference import jax_config

    name = "HopperHop"
    ref, mjx_env = Reference(name), registry.load(name, jax_config(name))
    key = jax.random.PRNGKey(0)
    r, o = ref.reset(key), jax.jit(mjx_env.reset)(key)
    step = jax.jit(mjx_env.step)
    worst = 0.0
    for a in actions(name, mjx_env.action_size, 150):
        r, o = ref.step(r, jnp.asarray(a)), step(o, jnp.asarray(a))
        worst = max(worst, float(np.max(np.abs(np.asarray(o.obs) - np.asarray(r.obs)))))
    assert worst > 1e3 * TOL
