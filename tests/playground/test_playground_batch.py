"""`jaxbridge.playground.load(name)` under `jax.vmap` and `jax.grad`.

- `vmap` of `reset` and `step` over a batch equals each element stepped alone: observations,
  rewards and done flags, to 1e-12 in float64 (one `mujoco.batch` call for the batch against
  one call per element).
- The gradient of a short return (the rewards of a few steps summed) with respect to the
  actions equals central differences of the reference: Playground's own environment code on
  raw `mujoco.mj_step` (`reference.Reference`, nothing of jaxbridge in it). The environment
  is the cartpole, whose geoms do not collide, so no
  contact appears or vanishes inside a difference step; `JAXBRIDGE_SLOW=1` adds more of them
  and longer horizons.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import Reference, actions, leaves

from jaxbridge import playground

TOL = 1e-12
SLOW = os.environ.get("JAXBRIDGE_SLOW") == "1"

BATCHED = ("CartpoleSwingup", "CheetahRun") + (("WalkerWalk", "HopperHop") if SLOW else ())


@pytest.mark.parametrize("name", BATCHED)
def test_vmap_equals_single_steps(x64, name):
    B, T = 4, 8 if not SLOW else 40
    env = playground.load(name)
    keys = jax.random.split(jax.random.PRNGKey(3), B)
    U = np.stack([actions(name, env.action_size, T, seed=s) for s in range(B)], 1)  # (T, B, nu)
    batched_reset, batched_step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    states = batched_reset(keys)
    singles = [reset(k) for k in keys]
    for t in range(T + 1):
        for i, single in enumerate(singles):
            for what, x, y in zip(
                ("obs", "reward", "done"),
                leaves((states.obs[i], states.reward[i], states.done[i])),
                leaves((single.obs, single.reward, single.done)),
            ):
                np.testing.assert_allclose(
                    x, y, rtol=TOL, atol=TOL, err_msg=f"{name} {what} row {i} t={t}"
                )
        if t < T:
            states = batched_step(states, jnp.asarray(U[t]))
            singles = [step(s, jnp.asarray(U[t, i])) for i, s in enumerate(singles)]


# Rewards dense where the episode starts: the reachers' and the pendulum's are indicators
# (a zero gradient), the acrobot's tolerance tail leaves 1e-9, below the differences' error.
GRADS = (("CartpoleBalance", 5), ("CartpoleSwingup", 5)) + (
    (("CartpoleBalance", 20), ("CartpoleSwingup", 20)) if SLOW else ()
)


@pytest.mark.parametrize(("name", "T"), GRADS)
def test_grad_of_return_matches_reference_differences(x64, name, T):
    env, ref = playground.load(name), Reference(name)
    key = jax.random.PRNGKey(1)
    # Away from the action bounds (Playground's actuators clamp controls to [-1, 1]).
    U0 = 0.5 * actions(name, env.action_size, T, seed=2)

    def ret(U):
        state = env.reset(key)
        total = jnp.zeros(())
        for t in range(T):
            state = env.step(state, U[t])
            total = total + state.reward
        return total

    value, grad = jax.jit(jax.value_and_grad(ret))(jnp.asarray(U0))

    def ref_ret(U):
        state = ref.reset(key)
        total = 0.0
        for t in range(T):
            state = ref.step(state, jnp.asarray(U[t]))
            total += float(state.reward)
        return total

    np.testing.assert_allclose(float(value), ref_ret(U0), rtol=1e-9, atol=1e-9)
    h = 1e-6
    want = np.zeros_like(U0)
    for idx in np.ndindex(*U0.shape):
        e = np.zeros_like(U0)
        e[idx] = h
        want[idx] = (ref_ret(U0 + e) - ref_ret(U0 - e)) / (2 * h)
    # The differences' rounding error is about 1e-16 * |return| / h, some 1e-9 here.
    assert np.abs(want).max() > 1e-6, f"{name}: the return does not depend on the actions"
    np.testing.assert_allclose(np.asarray(grad), want, rtol=1e-5, atol=1e-4 * np.abs(want).max())
