"""PPO on MuJoCo Playground's CartpoleBalance, its physics on C MuJoCo: one jit per update.

`jaxbridge.playground.load("CartpoleBalance")` is Playground's own environment (its reset,
step, observation and reward code) whose `mjx.step` runs on C MuJoCo through
`jaxbridge.mujoco.mjx`: float64, one `mujoco.batch` call per step for the whole batch. The
trainer is the project's PPO, imported from `examples/08_ppo.py` (the same `PPO`, `Config`,
network and update, not a second implementation). One update is ONE `jax.jit`-compiled call:
a `lax.scan` over `jax.vmap(env.step)` for `num_steps` steps, GAE, the epochs of minibatches.

Playground's environments have no time limit or reset of their own; its training wraps them
(Brax's `EpisodeWrapper` and `AutoResetWrapper`): an episode ends after `episode_length`
steps (1000 here, from the environment's config) or when `done`, and a finished environment
restarts from its first reset state. This script does the same inside the jitted rollout.

The learning curve is the mean reward per step of each update's rollout times the episode
length (the return a 1000-step episode at that rate would have), and the returns of the
episodes that ended. It is drawn beside Playground's result for this environment: see
`PLAYGROUND` below for what was found and where.

After training, the trained policy (its mean action) drives one environment and Playground's
own `env.render` draws it: `playground_policy.gif` in the output folder. The OpenGL backend is
chosen headless (EGL, then OSMesa: `jaxbridge.render.use_headless_gl`) before MuJoCo is
imported; where none renders, one line says so (naming `MUJOCO_GL`) and the run goes on.

    python examples/10_playground.py [--quick] [--steps N] [--out DIR] [--no-video]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads; stated in the output

import argparse
import importlib.util
import pathlib
import time
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)  # the environment in float64; the network float32

ENV = "CartpoleBalance"

#: Playground's reported result for CartpoleBalance. The MuJoCo Playground paper (Zakka et
#: al. 2025, arXiv:2502.08844, its DM Control Suite section) shows Brax PPO's learning curves
#: for every dm_control environment as a figure (60M env steps, 2048 environments, from the
#: config `mujoco_playground.config.dm_control_suite_params.brax_ppo_config`); its text and
#: the repository (github.com/google-deepmind/mujoco_playground: README, learning/, the
#: notebooks, whose outputs are stripped) state no number for it, so none is drawn here.
#: What is drawn is the ceiling Playground's environment defines: a reward of at most 1 a
#: step over its `episode_length` of 1000 steps, an episode return of at most 1000.
PLAYGROUND = None


def _ppo_module() -> Any:
    """`examples/08_ppo.py`, the project's PPO, as a module (its `main` is not run)."""
    path = pathlib.Path(__file__).with_name("08_ppo.py")
    spec = importlib.util.spec_from_file_location("jaxbridge_example_ppo", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ppo_lib = _ppo_module()
F32 = jnp.float32


def trainer(ppo: Any, env: Any, key: jax.Array, episode_length: int):
    """Each call: one PPO update, one jitted function; returns its metrics."""
    cfg = ppo.cfg
    step = jax.vmap(env.step)

    def update(state, env_state, first, clock, key):
        def body(carry, key):
            env_state, (t, running, whole) = carry
            sample, action = ppo.act(state, env_state.obs, key)
            new = step(env_state, action.astype(env_state.obs.dtype))
            t, running = t + 1, running + new.reward
            terminated = new.done > 0
            truncated = (t >= episode_length) & ~terminated
            ended = terminated | truncated
            out = ppo_lib.Transitions(
                env_state.obs.astype(F32),
                sample,
                new.reward.astype(F32),
                terminated,
                truncated,
                new.obs.astype(F32),  # the final observation where an episode ends
            )
            counted = ended & whole  # an episode that ran from a reset to its end

            def restart(a, b):
                return jnp.where(ended.reshape(ended.shape + (1,) * (b.ndim - 1)), a, b)

            clock = (jnp.where(ended, 0, t), jnp.where(ended, 0.0, running), whole | ended)
            return (jax.tree.map(restart, first, new), clock), (
                out,
                jnp.where(counted, running, 0.0),
                counted,
            )

        key, rollout_key, learn_key = jax.random.split(key, 3)
        (env_state, clock), (batch, returns, counted) = jax.lax.scan(
            body, (env_state, clock), jax.random.split(rollout_key, cfg.num_steps)
        )
        state, metrics = ppo.learn(state, batch, learn_key)
        metrics["reward_mean"] = batch.reward.mean()
        metrics["whole_return_sum"], metrics["whole_episodes"] = returns.sum(), counted.sum()
        return state, env_state, clock, key, metrics

    key, reset_key = jax.random.split(key)
    first = jax.jit(jax.vmap(env.reset))(jax.random.split(reset_key, cfg.num_envs))
    # The environments' clocks start spread over an episode, so that every update's rollout
    # sees all phases of one (Brax starts them together); the first, shorter episode of each
    # is left out of the returns.
    n = cfg.num_envs
    clock = (
        jnp.arange(n, dtype=jnp.int32) * episode_length // n,
        jnp.zeros(n, first.reward.dtype),
        jnp.zeros(n, bool),
    )
    carry = (ppo.fresh(), first, clock, key)
    compiled = jax.jit(update).lower(carry[0], carry[1], first, *carry[2:]).compile()
    box = [carry]

    def run() -> dict[str, jax.Array]:
        state, env_state, clock, key = box[0]
        state, env_state, clock, key, metrics = compiled(state, env_state, first, clock, key)
        box[0] = (state, env_state, clock, key)
        return jax.block_until_ready(metrics)

    return run, lambda: box[0][0]


def policy_video(ppo: Any, state: Any, env: Any, steps: int, out: pathlib.Path) -> pathlib.Path:
    """The trained policy's mean action driving one environment for `steps` steps, rendered
    by Playground's `env.render` (every second step) into a GIF."""
    from jaxbridge.render import frames, write_gif

    def body(s, _):
        mean, _, _ = ppo.apply(state.params, state.obs_moments.normalize(s.obs.astype(F32)))
        s = env.step(s, jnp.clip(mean, ppo.low, ppo.high).astype(s.obs.dtype))
        return s, s

    first = env.reset(jax.random.key(7))
    _, trajectory = jax.jit(lambda s: jax.lax.scan(body, s, None, length=steps))(first)
    images = frames(env, trajectory, height=240, width=320)[::2]
    return write_gif(images, out / "playground_policy.gif", fps=1 / (2 * env.dt))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few updates (the tests)")
    parser.add_argument("--steps", type=int, help="env steps (default 200k)")
    parser.add_argument("--out", default="playground-output", help="folder for the figure")
    parser.add_argument("--no-video", action="store_true", help="no GIF of the trained policy")
    args = parser.parse_args()
    began = time.perf_counter()
    from jaxbridge.render import GLUnavailableError, use_headless_gl

    no_gl = None
    if not args.no_video:
        try:
            use_headless_gl()  # before MuJoCo is imported: it binds its backend once
        except GLUnavailableError as e:
            no_gl = e
    from jaxbridge import playground

    env = playground.load(ENV)
    episode_length = int(env._config.episode_length)
    cfg = ppo_lib.Config()
    batch = cfg.num_envs * cfg.num_steps
    steps = args.steps or (4 * batch if args.quick else 200_000)
    num_updates = max(steps // batch, 2)
    print(
        f"PPO on Playground's {ENV} (C MuJoCo, float64): {num_updates} updates of "
        f"{cfg.num_envs} envs x {cfg.num_steps} steps ({num_updates * batch:,} env steps), "
        f"episodes of {episode_length} steps; OPENBLAS_NUM_THREADS="
        f"{os.environ.get('OPENBLAS_NUM_THREADS')}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}, jax {jax.__version__}"
    )
    space = gymnasium.spaces.Box(-1.0, 1.0, (env.action_size,), np.float32)
    ppo = ppo_lib.PPO(cfg, int(env.observation_size), space, num_updates)
    with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
        start = time.perf_counter()
        run, trained = trainer(ppo, env, jax.random.key(1), episode_length)
        setup = time.perf_counter() - start
        rates, ended, times = [], [], []
        for i in range(num_updates):
            metrics = run()
            rates.append(float(metrics["reward_mean"]) * episode_length)
            n = int(metrics["whole_episodes"])
            ended.append(float(metrics["whole_return_sum"]) / n if n else float("nan"))
            times.append(time.perf_counter() - start)
            if i % max(num_updates // 10, 1) == 0 or i == num_updates - 1:
                print(
                    f"update {i + 1:4d}/{num_updates} ({(i + 1) * batch:>9,} steps): reward "
                    f"per step x {episode_length} = {rates[-1]:7.1f}"
                    + (f", episodes ended: mean return {ended[-1]:.1f}" if n else ""),
                    flush=True,
                )
    train = times[-1] - setup
    print(
        f"setup and compile {setup:.1f} s, training {train:.1f} s: "
        f"{num_updates * batch / train:,.0f} env steps/s (rollout and update)"
    )
    figure = plot(rates, ended, batch, episode_length, pathlib.Path(args.out))
    print(f"learning curve saved to {figure}")
    if no_gl is not None:
        print(f"no video: {no_gl}")
    elif not args.no_video:
        with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
            video = policy_video(
                ppo, trained(), env, 60 if args.quick else 300, pathlib.Path(args.out)
            )
        print(f"video of the trained policy saved to {video}")
    print(f"whole run: {time.perf_counter() - began:.1f} s")
    untrained = rates[min(7, len(rates) - 1)]  # every phase of an episode in the rollout
    print(
        f"{ENV}: reward per step x {episode_length}: {untrained:.1f} at update "
        f"{min(8, len(rates))} (untrained) -> {rates[-1]:.1f} at update {len(rates)}"
    )
    assert np.isfinite(rates).all(), "a reward is not finite"
    if len(rates) >= 30:
        # Update 8 is the untrained policy's rate once every phase of an episode is in the
        # rollout (update 1 sees the reset states, the pole upright, alone).
        assert max(rates[-3:]) > rates[7], "the reward did not improve"


def plot(rates, ended, batch, episode_length, out: pathlib.Path) -> pathlib.Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
    x = [(i + 1) * batch for i in range(len(rates))]
    ax.plot(x, rates, label=f"jaxbridge: mean reward per step x {episode_length}")
    ax.plot(x, ended, "o", label="jaxbridge: returns of the episodes that ended")
    ax.axhline(
        float(episode_length),
        color="grey",
        linestyle=":",
        label=f"Playground's ceiling: reward <= 1 a step, {episode_length} steps "
        "(no published number found; see PLAYGROUND)",
    )
    ax.set_xlabel("environment steps")
    ax.xaxis.set_major_formatter(matplotlib.ticker.EngFormatter())
    ax.set_ylabel("episode return")
    ax.set_ylim(0, 1.05 * episode_length)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"PPO on Playground's {ENV}, physics on C MuJoCo")
    path = out / "playground_ppo.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


if __name__ == "__main__":
    main()
