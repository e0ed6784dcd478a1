"""`make`, the FuncEnv methods under jit/vmap/scan, autoreset and gymnasium's registry."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gym_helpers import close, close_info, gym_make, gym_make_vec, jg
from gymnasium.envs.functional_jax_env import FunctionalJaxEnv

from jaxbridge.mujoco import _fields, _native


def test_make_rejects_unknown_ids_and_keywords():
    with pytest.raises(ValueError, match="unknown environment id 'Hopper-v4'.*Walker2d-v5"):
        jg.make("Hopper-v4")
    with pytest.raises(ValueError, match="unknown keyword.*ctrl_cost.*healthy_angle_range"):
        jg.make("Hopper-v5", ctrl_cost=1.0)
    with pytest.raises(ValueError, match="do not render"):
        jg.make("Hopper-v5", render_mode="human")


def test_max_episode_steps_default_is_gymnasiums():
    assert jg.make("Hopper-v5").max_episode_steps == 1000
    assert jg.make("Hopper-v5", max_episode_steps=7).max_episode_steps == 7


def test_spaces_are_gymnasiums():
    env, g = jg.make("Hopper-v5"), gym_make("Hopper-v5")
    assert env.observation_space == g.observation_space
    assert env.action_space == g.action_space


def _gym_batch(env_id, n, seed):
    envs = [gym_make(env_id) for _ in range(n)]
    for i, g in enumerate(envs):
        g.reset(seed=seed + i)
    return envs


def test_vmap_is_one_batch_call_and_matches_each_env(x64, monkeypatch):
    env, n = jg.make("Hopper-v5"), 3
    envs = _gym_batch("Hopper-v5", n, 10)
    states = [env.state_from_gymnasium(g) for g in envs]
    state = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *states)
    calls = []
    original = _fields.FieldRows.run

    def counted(self, *args):
        if not self.forward:
            calls.append(self.B)
        return original(self, *args)

    monkeypatch.setattr(_fields.FieldRows, "run", counted)
    plans = [p for p in _native._PLANS.values() if not p.forward and n == p.B]
    before = [p.calls for p in plans]
    step = jax.jit(jax.vmap(env.step))
    rng = np.random.default_rng(1)
    for t in range(8):
        a = rng.uniform(-1, 1, (n, env.nu))
        state, obs, r, term, trunc, info = step(state, a)
        for i, g in enumerate(envs):
            o2, r2, *_, inf2 = g.step(a[i])
            close(obs[i], o2, f"env {i} step {t}")
            close(r[i], r2, f"env {i} step {t} reward")
            close_info({k: v[i] for k, v in info.items()}, inf2, f"env {i} step {t}")
    # the Python path's batch calls, and the compiled path's (`_native`), which counts its own
    new = [p for p in _native._PLANS.values() if p not in plans and not p.forward and n == p.B]
    native = sum(p.calls - b for p, b in zip(plans, before)) + sum(p.calls for p in new)
    assert native == (8 if _native.available() else 0)
    assert calls == [n] * (8 - native)


def test_scan_of_vmap_matches_stepwise(x64):
    env = jg.make("Hopper-v5")
    keys = jax.random.split(jax.random.key(3), 4)
    state, _, _ = jax.jit(jax.vmap(env.reset))(keys)
    acts = jnp.asarray(np.random.default_rng(2).uniform(-1, 1, (6, 4, env.nu)))

    def body(s, a):
        s, o, r, *_ = jax.vmap(env.step)(s, a)
        return s, (o, r)

    _, (obs, rew) = jax.jit(lambda s, u: jax.lax.scan(body, s, u))(state, acts)
    s = state
    for t in range(6):
        s, o, r, *_ = jax.jit(jax.vmap(env.step))(s, acts[t])
        np.testing.assert_array_equal(o, obs[t])
        np.testing.assert_array_equal(r, rew[t])


def test_a_scan_that_reads_the_old_state_after_a_step_sees_it_unchanged(x64):
    """A step writes the new physics state and warm start into its input's buffers
    (`InPlace`); where the program still reads the old state, XLA copies it first."""
    env = jg.make("Hopper-v5")
    state, _, _ = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(4), 3))
    acts = jnp.asarray(np.random.default_rng(5).uniform(-1, 1, (4, 3, env.nu)))

    def body(s, a):
        new = jax.vmap(env.step)(s, a)[0]
        return new, (s, new)

    run = jax.jit(lambda s, u: jax.lax.scan(body, s, u))
    assert "output_to_operand_aliasing" in run.lower(state, acts).compile().as_text()
    _, (old, new) = run(state, acts)
    for a, b, c in zip(
        jax.tree_util.tree_leaves(old),
        jax.tree_util.tree_leaves(new),
        jax.tree_util.tree_leaves(state),
    ):
        np.testing.assert_array_equal(a[0], c)
        np.testing.assert_array_equal(a[1:], b[:-1])


def test_step_never_resets_and_counts_steps(x64):
    env = jg.make("Hopper-v5", max_episode_steps=3)
    state, _, _ = jax.jit(env.reset)(jax.random.key(0))
    truncs, step = [], jax.jit(env.step)
    for _ in range(4):
        state, _, _, _, trunc, _ = step(state, jnp.zeros(env.nu))
        truncs.append(bool(trunc))
    assert truncs == [False, False, True, True]
    assert int(state.steps) == 4


def test_autoreset_step_keeps_the_final_observation(x64):
    env = jg.make("Hopper-v5", max_episode_steps=2)
    state, _, _ = jax.jit(env.reset)(jax.random.key(0))
    step = jax.jit(env.autoreset_step)
    a = jnp.zeros(env.nu)
    state, obs, _, _, trunc, info = step(state, a, jax.random.key(1))
    assert not bool(trunc)
    np.testing.assert_array_equal(obs, info["final_obs"])
    before = state
    state, obs, _, _, trunc, info = step(state, a, jax.random.key(2))
    assert bool(trunc) and int(state.steps) == 0
    # the final observation is the step's own; the returned one the new episode's
    expected = jax.jit(env.step)(before, a)[1]
    np.testing.assert_array_equal(info["final_obs"], expected)
    fresh = jax.jit(env.initial)(jax.random.key(2))
    np.testing.assert_array_equal(obs, jax.jit(env.observation)(fresh))
    np.testing.assert_array_equal(state.physics, fresh.physics)


def test_registration_make_and_make_vec(x64):
    e = gym_make("jaxbridge/Hopper-v5")
    assert isinstance(e.unwrapped, FunctionalJaxEnv)
    obs, info = e.reset(seed=0)
    assert obs.shape == (11,) and "x_position" in info
    obs, r, term, trunc, info = e.step(np.zeros(3))
    assert isinstance(r, float) and "reward_ctrl" in info
    v = gym_make_vec("jaxbridge/Hopper-v5", num_envs=3)
    assert isinstance(v, jg.MujocoVectorEnv) and v.func_env.max_episode_steps == 1000
    obs, info = v.reset(seed=0)
    obs, r, term, trunc, info = v.step(np.zeros((3, 3)))
    assert obs.shape == (3, 11) and r.shape == (3,) and info["final_obs"].shape == (3, 11)


def test_initial_is_gymnasiums_reset_distribution(x64):
    """Hopper's reset: init_qpos/qvel plus U(-0.005, 0.005) noise on every coordinate."""
    env, g = jg.make("Hopper-v5"), gym_make("Hopper-v5")
    states = jax.jit(jax.vmap(env.initial))(jax.random.split(jax.random.key(0), 2000))
    u = g.unwrapped
    x = np.asarray(states.physics[:, 1:]) - np.concatenate([u.init_qpos, u.init_qvel])
    assert np.all(np.abs(x) <= 0.005) and np.abs(x).max() > 0.0049
    np.testing.assert_allclose(x.mean(0), 0.0, atol=0.0005)
    np.testing.assert_allclose(x.std(0), 0.005 / np.sqrt(3), rtol=0.08)
    assert int(states.steps.max()) == 0


def test_autoreset_forwards_only_the_new_episodes(x64, monkeypatch):
    """Reacher reads body positions: a new episode's come from `mj_forward` of its rows only."""
    env = jg.make("Reacher-v5", max_episode_steps=2)
    keys = jax.random.split(jax.random.key(0), 3)
    state, _, _ = jax.jit(jax.vmap(env.reset))(keys)
    state = state._replace(steps=jnp.asarray([0, 1, 0], jnp.int32))  # the second one truncates
    forwarded = []
    original = _fields.FieldRows.run

    def counted(self, ins, outs, ids=None):
        if self.forward:
            forwarded.append(None if ids is None else ids.tolist())
        return original(self, ins, outs, ids)

    monkeypatch.setattr(_fields.FieldRows, "run", counted)
    a = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (3, 2)))
    new_keys = jax.random.split(jax.random.key(1), 3)
    out, obs, _, _, trunc, info = jax.jit(jax.vmap(env.autoreset_step))(state, a, new_keys)
    assert trunc.tolist() == [False, True, False] and forwarded == [[1]]
    stepped = jax.jit(jax.vmap(env.step))(state, a)
    fresh = jax.jit(env.initial)(new_keys[1])
    for i in (0, 2):
        np.testing.assert_array_equal(out.fields["xpos"][i], stepped[0].fields["xpos"][i])
        np.testing.assert_array_equal(obs[i], stepped[1][i])
    np.testing.assert_array_equal(out.fields["xpos"][1], fresh.fields["xpos"])
    np.testing.assert_array_equal(obs[1], jax.jit(env.observation)(fresh))
    np.testing.assert_array_equal(info["final_obs"], stepped[1])


def test_state_from_gymnasium_refuses_another_model():
    env = jg.make("Hopper-v5")
    g = gym_make("Walker2d-v5")
    g.reset(seed=0)
    with pytest.raises(TypeError, match=r"nq=6, nv=6, nu=3.*Walker2dEnv.*gymnasium.make\('Hopper"):
        env.state_from_gymnasium(g)


def test_state_from_gymnasium_reads_the_time_limit_count(x64):
    env = jg.make("Hopper-v5")
    g = gym_make("Hopper-v5")
    g.reset(seed=0)
    for _ in range(3):
        g.step(np.zeros(3))
    state = env.state_from_gymnasium(g)
    assert int(state.steps) == 3
    assert float(state.physics[0]) == pytest.approx(g.unwrapped.data.time)


def test_no_retrace_on_a_second_call(x64):
    env = jg.make("Reacher-v5")
    traces = []

    def f(s, a):
        traces.append(None)
        return env.step(s, a)

    step = jax.jit(jax.vmap(f))
    state, _, _ = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(0), 2))
    for _ in range(3):
        state, *_ = step(state, jnp.zeros((2, 2)))
    assert len(traces) == 1


def test_float32_without_x64_rounds_gymnasiums_numbers():
    """x64 off: float32 states and observations, MuJoCo's float64 results rounded."""
    env = jg.make("Hopper-v5")
    g = gym_make("Hopper-v5")
    g.reset(seed=0)
    state = env.state_from_gymnasium(g)
    assert state.physics.dtype == jnp.float32
    a = np.asarray([0.5, -0.5, 0.25])
    _, obs, r, *_ = jax.jit(env.step)(state, jnp.asarray(a, jnp.float32))
    o2, r2, *_ = g.step(a)
    assert obs.dtype == jnp.float32
    np.testing.assert_allclose(obs, o2, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(r, r2, rtol=1e-4)


def test_float32_steps_take_the_compiled_call_and_equal_the_python_path():
    """x64 off: a vmapped step lowers to the compiled field call, which widens and rounds in
    C exactly as the Python twin does (bit for bit)."""
    if not _native.available():
        pytest.skip(f"no compiled field call here: {_native.why()}")
    env, n = jg.make("Hopper-v5"), 3
    states = [env.state_from_gymnasium(g) for g in _gym_batch("Hopper-v5", n, 4)]
    state = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *states)
    assert state.physics.dtype == jnp.float32
    a = jnp.asarray(np.random.default_rng(2).uniform(-1, 1, (n, env.nu)), jnp.float32)

    def loop(state, a):
        def body(s, _):
            s, obs, r, *_ = jax.vmap(env.step)(s, a)
            return s, (obs, r)

        return jax.lax.scan(body, state, length=3)

    assert _native.TARGET in jax.jit(loop).lower(state, a).as_text()
    got = jax.jit(loop)(state, a)
    jax.clear_caches()
    with _native.withheld():
        assert _native.TARGET not in jax.jit(loop).lower(state, a).as_text()
        want = jax.jit(loop)(state, a)
    jax.clear_caches()
    for x, y in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert np.asarray(x).dtype != np.float64
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_nested_and_broadcast_vmaps_are_the_flat_batch(x64):
    env = jg.make("Reacher-v5")
    keys = jax.random.split(jax.random.key(0), 6).reshape(2, 3)
    state, _, _ = jax.jit(jax.vmap(jax.vmap(env.reset)))(keys)
    a = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (2, 3, 2)))
    nested = jax.jit(jax.vmap(jax.vmap(env.step)))(state, a)
    flat_state = jax.tree_util.tree_map(lambda x: x.reshape(6, *x.shape[2:]), state)
    flat = jax.jit(jax.vmap(env.step))(flat_state, a.reshape(6, 2))
    np.testing.assert_array_equal(nested[1].reshape(6, -1), flat[1])
    row = jax.tree_util.tree_map(lambda x: x[0], state)
    one = jax.tree_util.tree_map(lambda x: x[1], row)
    shared_action = jax.jit(jax.vmap(env.step, in_axes=(0, None)))(row, a[0, 0])
    step = jax.jit(env.step)
    np.testing.assert_array_equal(shared_action[1][1], step(one, a[0, 0])[1])
    shared_state = jax.jit(jax.vmap(env.step, in_axes=(None, 0)))(one, a[0])
    np.testing.assert_array_equal(shared_state[1][2], step(one, a[0, 2])[1])


def test_make_vec_of_an_env_with_fields(x64):
    v = gym_make_vec("jaxbridge/Reacher-v5", num_envs=2, reward_control_weight=0.5)
    assert v.func_env.kwargs["reward_control_weight"] == 0.5
    obs, _ = v.reset(seed=1)
    for _ in range(3):
        obs, r, term, trunc, info = v.step(np.full((2, 2), 0.1))
    assert obs.shape == (2, 10) and np.all(np.isfinite(np.asarray(obs)))
    assert set(info) == {"reward_dist", "reward_ctrl", "final_obs", "_final_obs"}


def test_many_rows_are_stepped_in_chunks_as_the_rows_alone(x64):
    """A Jacobian's points exceed one batch: chunks of `CHUNK` rows, the last one padded."""
    env = jg.make("Reacher-v5")
    n = _fields.CHUNK + 44
    states = jax.jit(jax.vmap(env.initial))(jax.random.split(jax.random.key(0), n))
    P = np.asarray(states.physics)
    W = np.zeros((n, env.nv))
    U = np.random.default_rng(0).uniform(-1, 1, (n, env.nu))
    step, forward = env.step_calls.steps, env.forward_calls.steps
    whole = step.step(P, W, U)
    for lo, hi in ((0, 3), (n - 5, n)):
        part = step.step(P[lo:hi], W[lo:hi], U[lo:hi])
        for a, b in zip(whole, part):
            np.testing.assert_array_equal(a[lo:hi], b)
    fields = forward.forward(P)
    np.testing.assert_array_equal(fields[0][n - 5 :], forward.forward(P[n - 5 :])[0])


def _draws(env_id, n=2000):
    env = jg.make(env_id)
    states = jax.jit(jax.vmap(env.initial))(jax.random.split(jax.random.key(7), n))
    q = np.asarray(states.physics[:, 1 : 1 + env.nq])
    v = np.asarray(states.physics[:, 1 + env.nq : 1 + env.nq + env.nv])
    return env, q, v


def test_reacher_and_pusher_draw_gymnasiums_goals(x64):
    env, q, v = _draws("Reacher-v5")
    goal = q[:, -2:]
    assert np.all(np.linalg.norm(goal, axis=1) < 0.2) and np.all(np.abs(goal) <= 0.2)
    assert np.abs(goal).max() > 0.19  # the whole disc, not a shrunken one
    assert np.all(np.abs(q[:, :2] - env.task.init_qpos[:2]) <= 0.1) and np.all(v[:, -2:] == 0)
    env, q, v = _draws("Pusher-v5")
    cyl = q[:, -4:-2]
    assert np.all(np.linalg.norm(cyl, axis=1) > 0.17) and np.all(q[:, -2:] == 0)
    assert np.all((cyl[:, 0] >= -0.3) & (cyl[:, 0] <= 0) & (np.abs(cyl[:, 1]) <= 0.2))
    np.testing.assert_array_equal(
        q[:, :-4], np.broadcast_to(env.task.init_qpos[:-4], q[:, :-4].shape)
    )
    assert np.all(np.abs(v[:, :-4]) <= 0.005) and np.all(v[:, -4:] == 0)


def test_normal_velocity_noise_where_gymnasium_draws_it(x64):
    """Ant, HalfCheetah, InvertedDoublePendulum: qvel ~ scale * N(0, 1); qpos uniform."""
    for env_id, scale in (("Ant-v5", 0.1), ("HalfCheetah-v5", 0.1)):
        env, q, v = _draws(env_id)
        np.testing.assert_allclose(v.std(0), scale, rtol=0.1)
        assert np.abs(v).max() > 3 * scale  # tails a uniform draw would not have
        assert np.all(np.abs(q - env.task.init_qpos) <= scale)
