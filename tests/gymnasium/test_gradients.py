"""`jax.grad` of a K-step return against central differences of gymnasium's own environment."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gym_helpers import gym_make, jg


def _our_return(env, K):
    def ret(qpos, qvel, acts):
        state = env.make_state(qpos, qvel)

        def body(s, a):
            n = env.transition(s, a, None)
            return n, env.reward(s, a, n, None)

        return jax.lax.scan(body, state, acts)[1].sum()

    return jax.jit(jax.grad(ret, argnums=(0, 1, 2)))


def _gym_return(g, seed):
    u = g.unwrapped

    def ret(qpos, qvel, acts):
        g.reset(seed=seed)  # a fresh MjData: zero warm start, time 0, as `make_state`
        u.set_state(qpos, qvel)
        return sum(float(g.step(a)[1]) for a in acts)

    return ret


def _central(f, args, h=1e-6):
    grads = []
    for i, x in enumerate(args):
        d = np.zeros_like(x)
        for j in np.ndindex(x.shape):
            up, down = [a.copy() for a in args], [a.copy() for a in args]
            up[i][j] += h
            down[i][j] -= h
            d[j] = (f(*up) - f(*down)) / (2 * h)
        grads.append(d)
    return grads


def _start(env_id, seed, warmup, kwargs):
    """qpos and qvel after `warmup` random steps of gymnasium's environment."""
    g = gym_make(env_id, **kwargs)
    g.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(warmup):
        g.step(rng.uniform(g.action_space.low, g.action_space.high))
    u = g.unwrapped
    return g, u.data.qpos.copy(), u.data.qvel.copy(), rng


@pytest.mark.parametrize("env_id", ["Reacher-v5", "Swimmer-v5"])
def test_grad_of_return_is_gymnasiums_central_difference(x64, env_id):
    K = 5
    g, qpos, qvel, rng = _start(env_id, 3, 4, {})
    acts = rng.uniform(g.action_space.low, g.action_space.high, (K, g.action_space.shape[0]))
    env = jg.make(env_id)
    ours = _our_return(env, K)(jnp.asarray(qpos), jnp.asarray(qvel), jnp.asarray(acts))
    theirs = _central(_gym_return(g, 3), [qpos, qvel, acts])
    for name, a, b in zip(("qpos", "qvel", "actions"), ours, theirs):
        scale = max(np.abs(b).max(), 1e-3)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * scale, err_msg=name)


def test_grad_in_contact_follows_the_step(x64):
    """Hopper standing on its foot: the warm start's sensitivity is carried from step to step,
    and the return's derivative is gymnasium's central difference (no contact change)."""
    K = 3
    g, qpos, qvel, rng = _start("Hopper-v5", 0, 12, {"terminate_when_unhealthy": False})
    assert g.unwrapped.data.ncon > 0
    acts = rng.uniform(-1, 1, (K, 3))
    env = jg.make("Hopper-v5", terminate_when_unhealthy=False)
    ours = _our_return(env, K)(jnp.asarray(qpos), jnp.asarray(qvel), jnp.asarray(acts))
    theirs = _central(_gym_return(g, 0), [qpos, qvel, acts])
    for name, a, b in zip(("qpos", "qvel", "actions"), ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max(), err_msg=name)


def test_jvp_is_the_transpose_of_vjp(x64):
    env = jg.make("Reacher-v5")
    state, _, _ = env.reset(jax.random.key(0))
    a = jnp.asarray([0.3, -0.2])

    def f(physics, action):
        return env.transition(state._replace(physics=physics), action, None).physics

    t = (jnp.ones_like(state.physics).at[0].set(0.0), jnp.asarray([1.0, -2.0]))
    _, jv = jax.jvp(f, (state.physics, a), t)
    _, vjp = jax.vjp(f, state.physics, a)
    ct = jnp.arange(state.physics.shape[0], dtype=jv.dtype)
    back = vjp(ct)
    np.testing.assert_allclose(jnp.vdot(ct, jv), jnp.vdot(back[0], t[0]) + jnp.vdot(back[1], t[1]))


@pytest.mark.parametrize(
    "env_id", ["Hopper-v5", pytest.param("Humanoid-v5", marks=pytest.mark.slow)]
)
def test_step_jacobian_in_contact_is_the_simulators(x64, env_id):
    """On the ground, the physics part of the step's Jacobian is `jaxbridge.mujoco`'s
    `Simulator.step` Jacobian (issue 13's differences that do not reach over contact changes),
    from the same zero warm start."""
    from jaxbridge.mujoco import Simulator

    g, qpos, qvel, rng = _start(env_id, 0, 40, {"terminate_when_unhealthy": False})
    assert g.unwrapped.data.ncon > 0
    env = jg.make(env_id)
    state = env.make_state(jnp.asarray(qpos), jnp.asarray(qvel))
    a = jnp.asarray(rng.uniform(-0.4, 0.4, env.nu))

    def ours(physics, action):
        return env.transition(state._replace(physics=physics), action, None).physics

    sim = Simulator(env.model, frame_skip=env.frame_skip)
    Jx, Ju = jax.jit(jax.jacfwd(ours, argnums=(0, 1)))(state.physics, a)
    Sx, Su = jax.jit(jax.jacfwd(sim.step, argnums=(0, 1)))(state.physics, a)
    np.testing.assert_array_equal(ours(state.physics, a), sim.step(state.physics, a))
    x = slice(1, 1 + env.nq + env.nv)
    for A, B in ((Jx[x, x], Sx[x, x]), (Ju[x], Su[x])):
        scale = np.maximum(np.abs(B).max(0), 1.0)
        assert (np.abs(A - B).max(0) / scale).max() < 1e-5
