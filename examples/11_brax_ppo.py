"""brax's own PPO on MuJoCo Playground's CheetahRun: C MuJoCo (jaxbridge) beside MJX.

The training code is Playground's notebook code, unchanged: `brax.training.agents.ppo.train`
with `wrap_env_fn=mujoco_playground.wrapper.wrap_for_brax_training`. Only the environment
differs:

- `jaxbridge.playground.load(ENV)`: Playground's environment, its physics on C MuJoCo;
- `mujoco_playground.registry.load(ENV, config_overrides={"impl": "jax"})`: the same
  environment on MJX's JAX implementation (Playground's CPU path).

Both train from the same seed and configuration, one after the other on the same machine, in
float32 (x64 off, Playground's default). The figure plots brax's evaluation reward against the
wall-clock time since `ppo.train` was called (compilation included, as a user waits for it).
The policy trained on C MuJoCo then drives one episode, drawn by Playground's
`env.render(trajectory)` into a GIF (the GL backend: `MUJOCO_GL` if set, else EGL, else
OSMesa; without one the script says so and goes on).

brax 0.14.2 (its newest release) needs `jax.device_put_replicated`, which jax 0.10 removed
(brax#671): run this on jax 0.9.2 (`make test-jax092` makes `.venv-jax092` with it). On a jax
without it the script says so and stops.

    OPENBLAS_NUM_THREADS=1 python examples/11_brax_ppo.py [--quick | --long] [--env WalkerWalk]
        [--out DIR]

The default budget (20,480 steps, 32 envs, episodes of 200 steps) takes a few minutes on 2
CPU cores, most of it MJX's compile; `--long` trains 2M steps each with Playground-like sizes.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads; stated in the output

import argparse
import pathlib
import time
import warnings

BUDGETS = {
    # name: (num_timesteps, num_envs, batch_size, num_minibatches, unroll_length, num_evals,
    #        num_eval_envs, episode_length, hidden layers, GIF steps)
    "quick": (8_192, 16, 16, 4, 16, 2, 4, 100, (32, 32), 40),
    "default": (20_480, 32, 32, 8, 16, 3, 8, 200, (64, 64), 150),
    "long": (2_000_000, 256, 256, 16, 20, 10, 32, 1000, (128, 128, 128, 128), 300),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CheetahRun", choices=["CheetahRun", "WalkerWalk"])
    parser.add_argument("--quick", action="store_true", help="a tiny run, C MuJoCo only")
    parser.add_argument("--long", action="store_true", help="2M steps each (an hour or more)")
    parser.add_argument("--out", default="demo-output", help="folder for the figure and GIF")
    args = parser.parse_args()
    budget = "quick" if args.quick else "long" if args.long else "default"
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import jax

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        has_replicated = hasattr(jax, "device_put_replicated")
    if not has_replicated:
        print(
            f"brax's trainers call jax.device_put_replicated, which jax {jax.__version__} does "
            "not have (removed in jax 0.10; brax#671, fixed on brax's main, unreleased): run "
            "this example on jax 0.9.2 (`make test-jax092` makes .venv-jax092 with it)."
        )
        return
    from jaxbridge.render import GLUnavailableError, use_headless_gl

    try:
        gl: str | None = use_headless_gl()  # before MuJoCo is imported: it binds one backend
        no_gl = None
    except GLUnavailableError as e:
        gl, no_gl = None, e
    # brax's calls of it on jax 0.9 warn: theirs, not this script's.
    warnings.filterwarnings("ignore", "jax.device_put_replicated", DeprecationWarning)
    warnings.filterwarnings("ignore", "JAXopt is no longer maintained", DeprecationWarning)

    import functools

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo
    from mujoco_playground import registry, wrapper

    from jaxbridge import playground

    steps, n_envs, batch, minibatches, unroll, evals, eval_envs, episode, hidden, gif_steps = (
        BUDGETS[budget]
    )
    config = dict(
        num_timesteps=steps,
        num_envs=n_envs,
        batch_size=batch,
        num_minibatches=minibatches,
        unroll_length=unroll,
        num_updates_per_batch=4,
        num_evals=evals,
        num_eval_envs=eval_envs,
        episode_length=episode,
        normalize_observations=True,
        reward_scaling=10.0,
        discounting=0.97,
        learning_rate=1e-3,
        entropy_cost=1e-2,
        seed=0,
    )
    load = os.getloadavg()
    print(
        f"{args.env}, brax PPO ({budget}): {steps} steps, {n_envs} envs, episodes of {episode}, "
        f"networks {hidden}; float32 (x64 {jax.config.jax_enable_x64}); jax {jax.__version__}; "
        f"{os.cpu_count()} CPUs, load average {load[0]:.1f}; "
        f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}"
    )

    envs = {
        "jaxbridge (C MuJoCo)": lambda: playground.load(args.env),
        'MJX impl="jax"': lambda: registry.load(args.env, config_overrides={"impl": "jax"}),
    }
    if args.quick:  # MJX's CheetahRun alone compiles for about two minutes on 2 CPU cores
        del envs['MJX impl="jax"']
        print('--quick: C MuJoCo only (MJX impl="jax" runs without --quick)')
    curves, results = {}, {}
    for name, make in envs.items():
        env = make()
        curve: list[tuple[float, int, float]] = []
        t0 = time.perf_counter()

        def progress(step, metrics, curve=curve, t0=t0, name=name):
            reward = float(metrics["eval/episode_reward"])
            curve.append((time.perf_counter() - t0, int(step), reward))
            print(f"  {name}: {step:>9} steps  {curve[-1][0]:7.1f} s  eval reward {reward:8.2f}")

        make_inference_fn, params, _ = ppo.train(
            environment=env,
            wrap_env_fn=wrapper.wrap_for_brax_training,
            network_factory=functools.partial(
                ppo_networks.make_ppo_networks,
                policy_hidden_layer_sizes=hidden,
                value_hidden_layer_sizes=hidden,
            ),
            progress_fn=progress,
            **config,
        )
        curves[name] = curve
        results[name] = (env, make_inference_fn, params)
        assert np.all(np.isfinite([c[2] for c in curve])), curve

    print("| environment | steps | wall-clock s | final eval reward |")
    print("|---|---|---|---|")
    for name, curve in curves.items():
        print(f"| {name} | {curve[-1][1]} | {curve[-1][0]:.1f} | {curve[-1][2]:.2f} |")
    if 'MJX impl="jax"' in curves:
        ratio = curves['MJX impl="jax"'][-1][0] / curves["jaxbridge (C MuJoCo)"][-1][0]
        print(f"MJX's run took {ratio:.2f}x jaxbridge's wall-clock time")

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        ax.plot([c[0] for c in curve], [c[2] for c in curve], "o-", label=name)
    ax.set_xlabel("wall-clock time since ppo.train was called (s)")
    ax.set_ylabel(f"eval episode reward ({episode} steps)")
    trained = max(curve[-1][1] for curve in curves.values())  # brax rounds up to its epochs
    ax.set_title(f"brax PPO on {args.env}, {trained} steps, {n_envs} envs, float32")
    ax.legend()
    fig.tight_layout()
    figure = out / f"brax_ppo_{args.env}.png"
    fig.savefig(figure, dpi=120)
    print(f"figure: {figure}")

    if gl is None:
        print(f"no video: {no_gl}")
        return
    env, make_inference_fn, params = results["jaxbridge (C MuJoCo)"]
    policy = jax.jit(make_inference_fn(params, deterministic=True))
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    state = reset(jax.random.PRNGKey(1))
    trajectory = [state]
    key = jax.random.PRNGKey(2)
    for _ in range(gif_steps):
        key, sub = jax.random.split(key)
        action, _ = policy(state.obs, sub)
        state = step(state, action)
        trajectory.append(state)
    from jaxbridge.render import frames, write_gif

    images = frames(env, trajectory[::2], height=240, width=320)
    gif = write_gif(images, out / f"brax_ppo_{args.env}.gif", fps=1 / (2 * float(env.dt)))
    print(f"video: {gif} ({len(images)} frames, MUJOCO_GL={gl})")


if __name__ == "__main__":
    main()
