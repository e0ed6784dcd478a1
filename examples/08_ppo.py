"""PPO on Hopper-v5 with Flax NNX and Optax: the whole update is one jitted function.

`jaxbridge.gymnasium.make("Hopper-v5")` is gymnasium's Hopper as pure JAX functions on the real
MuJoCo engine. One PPO update is ONE `jax.jit`-compiled call: the rollout of `num_envs`
environments for `num_steps` steps (`jax.lax.scan` over `jax.vmap` of the environment's
autoreset step, one MuJoCo call per step for the whole batch), the advantages (GAE), and the
epochs of minibatch updates of the clipped objective.

The same algorithm (same network, same hyperparameters, the same jitted `learn`) also runs on
gymnasium's own `SyncVectorEnv` of Hopper-v5, stepped from a Python loop with the policy
evaluated by a jitted function each step. The two trainers run interleaved, one update each in
turn, in this process, so both see the same load on the machine. The script reports each one's
env steps/s and time to a mean episode return of 1,000, and saves the learning curves to
`OUT/ppo_hopper.png`. `--budget S` stops training after the update that passes S seconds (a
trainer's wall time, setup and compile included), before `--steps` if need be: the default
`python -m jaxbridge demo` trains jaxbridge's trainer for 200k steps or 40 s.

PPO as in CleanRL's `ppo_continuous_action`: separate 64-64 tanh actor and critic with
orthogonal initialisation, a Gaussian policy with a state-independent log std whose samples are
clipped to the action bounds (the log-probability is the unclipped sample's), observations
normalised by running moments, rewards scaled by the running std of the discounted return,
advantages normalised per minibatch, an unclipped value loss, global gradient-norm clipping and
a linearly annealed learning rate. Unlike CleanRL, a truncated episode bootstraps from the value
of its final observation (kept by the autoreset, as in gymnasium's `AutoresetMode.SAME_STEP`).

    python examples/08_ppo.py [--quick] [--out DIR] [--steps N] [--budget S]
                              [--only jaxbridge|gymnasium]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads; stated in the output

import argparse
import math
import pathlib
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

# The environment in float64, as gymnasium's (the network stays in float32).
jax.config.update("jax_enable_x64", True)
F32 = jnp.float32


class Config(NamedTuple):
    num_envs: int = 64
    num_steps: int = 32  # per environment and update: a batch of 2,048 transitions
    epochs: int = 10
    minibatches: int = 32
    learning_rate: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    max_grad_norm: float = 0.5


# ---------------------------------------------------------------- network and running moments


class Agent(nnx.Module):
    def __init__(self, obs_size: int, action_size: int, rngs: nnx.Rngs, hidden: int = 64):
        def linear(n_in: int, n_out: int, scale: float) -> nnx.Linear:
            init = nnx.initializers.orthogonal(scale)
            return nnx.Linear(n_in, n_out, kernel_init=init, rngs=rngs)

        root2 = math.sqrt(2.0)
        self.actor = nnx.Sequential(
            linear(obs_size, hidden, root2), jnp.tanh,
            linear(hidden, hidden, root2), jnp.tanh,
            linear(hidden, action_size, 0.01),
        )  # fmt: skip
        self.critic = nnx.Sequential(
            linear(obs_size, hidden, root2), jnp.tanh,
            linear(hidden, hidden, root2), jnp.tanh,
            linear(hidden, 1, 1.0),
        )  # fmt: skip
        self.log_std = nnx.Param(jnp.zeros(action_size, F32))

    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        return self.actor(obs), self.log_std[...], self.critic(obs)[..., 0]


class Moments(NamedTuple):
    """Running mean and variance (Chan's parallel update), as gymnasium's `RunningMeanStd`."""

    mean: jax.Array
    var: jax.Array
    count: jax.Array

    @staticmethod
    def zero(shape: tuple[int, ...]) -> Moments:
        return Moments(jnp.zeros(shape, F32), jnp.ones(shape, F32), jnp.asarray(1e-4, F32))

    def update(self, batch: jax.Array) -> Moments:
        n = batch.shape[0]
        mean, var = batch.mean(0), batch.var(0)
        delta, total = mean - self.mean, self.count + n
        m2 = self.var * self.count + var * n + delta**2 * self.count * n / total
        return Moments(self.mean + delta * n / total, m2 / total, total)

    def normalize(self, x: jax.Array) -> jax.Array:
        return jnp.clip((x - self.mean) / jnp.sqrt(self.var + 1e-8), -10.0, 10.0)


def log_prob(mean: jax.Array, log_std: jax.Array, x: jax.Array) -> jax.Array:
    z = (x - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi), axis=-1)


# ---------------------------------------------------------------- PPO


class TrainState(NamedTuple):
    params: nnx.State
    opt_state: optax.OptState
    obs_moments: Moments
    return_moments: Moments  # of the running discounted return: the reward's scale
    discounted: jax.Array  # (num_envs,) the running discounted return of each environment
    episode_return: jax.Array  # (num_envs,) the return so far of each running episode


class Transitions(NamedTuple):
    """`num_steps` x `num_envs` transitions; `next_obs` is the final one where an episode ends."""

    obs: jax.Array
    sample: jax.Array  # the Gaussian sample, before clipping to the action bounds
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    next_obs: jax.Array


class PPO:
    """The algorithm, free of any environment: `act` for one step, `learn` for one update."""

    def __init__(self, cfg: Config, obs_size: int, space: gymnasium.spaces.Box, num_updates: int):
        self.cfg = cfg
        self.low, self.high = np.asarray(space.low), np.asarray(space.high)
        self.graphdef, params = nnx.split(Agent(obs_size, space.shape[0], nnx.Rngs(0)))
        schedule = optax.linear_schedule(
            cfg.learning_rate, 0.0, num_updates * cfg.epochs * cfg.minibatches
        )
        self.tx = optax.chain(
            optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(schedule, eps=1e-5)
        )
        self.params, self.obs_size = params, obs_size

    def fresh(self) -> TrainState:
        """The initial state, in new buffers of its own (each trainer donates its own)."""
        params = jax.tree.map(jnp.copy, self.params)
        zeros = jnp.zeros(self.cfg.num_envs, F32)
        return TrainState(
            params,
            self.tx.init(params),
            Moments.zero((self.obs_size,)),
            Moments.zero(()),
            zeros,
            jnp.zeros_like(zeros),
        )

    def apply(self, params: nnx.State, obs: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        return nnx.merge(self.graphdef, params)(obs)

    def act(self, state: TrainState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """A Gaussian sample for each environment, and the action: the sample clipped."""
        mean, log_std, _ = self.apply(state.params, state.obs_moments.normalize(obs.astype(F32)))
        sample = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, F32)
        return sample, jnp.clip(sample, self.low, self.high)

    def learn(
        self, state: TrainState, batch: Transitions, key: jax.Array
    ) -> tuple[TrainState, dict[str, jax.Array]]:
        """One update from `batch`; the moments stay fixed until its end, so ratios start at 1."""
        cfg = self.cfg
        done = batch.terminated | batch.truncated

        def account(carry, step):
            discounted, episode = carry
            reward, done = step
            discounted, episode = discounted * cfg.gamma + reward, episode + reward
            finished = jnp.where(done, episode, 0.0)
            carry = jnp.where(done, 0.0, discounted), jnp.where(done, 0.0, episode)
            return carry, (discounted, finished)

        (discounted, episode), (running, finished) = jax.lax.scan(
            account, (state.discounted, state.episode_return), (batch.reward, done)
        )
        return_moments = state.return_moments.update(running.reshape(-1))
        reward = jnp.clip(batch.reward / jnp.sqrt(return_moments.var + 1e-8), -10.0, 10.0)

        obs = state.obs_moments.normalize(batch.obs)
        mean, log_std, value = self.apply(state.params, obs)
        _, _, next_value = self.apply(state.params, state.obs_moments.normalize(batch.next_obs))
        old_log_prob = log_prob(mean, log_std, batch.sample)
        alive = 1.0 - batch.terminated.astype(F32)  # a truncated episode bootstraps
        delta = reward + cfg.gamma * alive * next_value - value

        def gae(next_advantage, step):
            delta, done = step
            advantage = (
                delta + cfg.gamma * cfg.gae_lambda * (1.0 - done.astype(F32)) * next_advantage
            )
            return advantage, advantage

        _, advantage = jax.lax.scan(gae, jnp.zeros_like(delta[0]), (delta, done), reverse=True)
        data = (obs, batch.sample, old_log_prob, advantage, advantage + value)
        size = cfg.num_steps * cfg.num_envs
        data = jax.tree.map(lambda x: x.reshape(size, *x.shape[2:]), data)

        def loss(params, minibatch):
            obs, sample, old_log_prob, advantage, target = minibatch
            mean, log_std, value = self.apply(params, obs)
            log_ratio = log_prob(mean, log_std, sample) - old_log_prob
            ratio = jnp.exp(log_ratio)
            advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
            clipped = jnp.clip(ratio, 1.0 - cfg.clip, 1.0 + cfg.clip)
            policy_loss = -jnp.mean(jnp.minimum(ratio * advantage, clipped * advantage))
            value_loss = 0.5 * jnp.mean((value - target) ** 2)
            entropy = jnp.sum(log_std + 0.5 * math.log(2 * math.pi * math.e))
            total = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy
            kl = jnp.mean(ratio - 1.0 - log_ratio)  # the k3 estimator of KL(old || new)
            return total, {"value_loss": value_loss, "kl": kl}

        def minibatch_step(carry, minibatch):
            params, opt_state = carry
            grads, info = jax.grad(loss, has_aux=True)(params, minibatch)
            updates, opt_state = self.tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), info

        def epoch(carry, key):
            order = jax.random.permutation(key, size)
            shuffled = jax.tree.map(
                lambda x: x[order].reshape(cfg.minibatches, -1, *x.shape[1:]), data
            )
            return jax.lax.scan(minibatch_step, carry, shuffled)

        (params, opt_state), info = jax.lax.scan(
            epoch, (state.params, state.opt_state), jax.random.split(key, cfg.epochs)
        )
        obs_moments = state.obs_moments.update(batch.obs.reshape(size, -1))
        new = TrainState(params, opt_state, obs_moments, return_moments, discounted, episode)
        metrics = {k: v[-1].mean() for k, v in info.items()}  # the last epoch's
        metrics["return_sum"] = finished.sum()
        metrics["episodes"] = done.sum()
        return new, metrics


# ---------------------------------------------------------------- the two ways to step Hopper


def jaxbridge_trainer(ppo: PPO, env: Any, key: jax.Array) -> Callable[[], dict[str, jax.Array]]:
    """Each call: one update, ONE jitted function (rollout, advantages, epochs)."""
    cfg = ppo.cfg
    step = jax.vmap(env.autoreset_step)

    def update(state: TrainState, env_state: Any, obs: jax.Array, key: jax.Array):
        def body(carry, key):
            env_state, obs = carry
            act_key, env_key = jax.random.split(key)
            sample, action = ppo.act(state, obs, act_key)
            env_state, next_obs, reward, terminated, truncated, info = step(
                env_state, action.astype(obs.dtype), jax.random.split(env_key, cfg.num_envs)
            )
            final = jnp.where((terminated | truncated)[:, None], info["final_obs"], next_obs)
            out = Transitions(
                obs.astype(F32),
                sample,
                reward.astype(F32),
                terminated,
                truncated,
                final.astype(F32),
            )
            return (env_state, next_obs), out

        key, rollout_key, learn_key = jax.random.split(key, 3)
        (env_state, obs), batch = jax.lax.scan(
            body, (env_state, obs), jax.random.split(rollout_key, cfg.num_steps)
        )
        state, metrics = ppo.learn(state, batch, learn_key)
        return state, env_state, obs, key, metrics

    key, reset_key = jax.random.split(key)
    env_state, obs, _ = jax.jit(jax.vmap(env.reset))(jax.random.split(reset_key, cfg.num_envs))
    carry = (ppo.fresh(), env_state, obs, key)
    compiled = jax.jit(update, donate_argnums=(0, 1, 2, 3)).lower(*carry).compile()
    box = [carry]

    def run() -> dict[str, jax.Array]:
        *carry, metrics = compiled(*box[0])
        box[0] = tuple(carry)
        return jax.block_until_ready(metrics)

    return run


def gymnasium_trainer(ppo: PPO, env_id: str, seed: int) -> Callable[[], dict[str, jax.Array]]:
    """Each call: one update; the rollout is a Python loop over gymnasium's `SyncVectorEnv`."""
    cfg = ppo.cfg
    envs = gymnasium.vector.SyncVectorEnv(
        [lambda: gymnasium.make(env_id) for _ in range(cfg.num_envs)],
        autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP,
    )
    obs, _ = envs.reset(seed=seed)

    def act(state, obs, key):
        key, sub = jax.random.split(key)
        return *ppo.act(state, obs, sub), key

    state, key = ppo.fresh(), jax.random.key(seed)
    act_c = jax.jit(act).lower(state, obs, key).compile()
    shapes = (cfg.num_steps, cfg.num_envs)
    buffer = Transitions(
        np.zeros((*shapes, obs.shape[1]), np.float32),
        np.zeros((*shapes, ppo.low.size), np.float32),
        np.zeros(shapes, np.float32),
        np.zeros(shapes, bool),
        np.zeros(shapes, bool),
        np.zeros((*shapes, obs.shape[1]), np.float32),
    )  # jit copies it in at each call, so one buffer serves every update
    learn_c = jax.jit(ppo.learn, donate_argnums=0).lower(state, buffer, key).compile()
    box: list[Any] = [state, obs, key]

    def run() -> dict[str, jax.Array]:
        state, obs, key = box
        for t in range(cfg.num_steps):
            sample, action, key = act_c(state, obs, key)
            next_obs, reward, terminated, truncated, info = envs.step(np.asarray(action))
            buffer.obs[t], buffer.sample[t], buffer.reward[t] = obs, sample, reward
            buffer.terminated[t], buffer.truncated[t], buffer.next_obs[t] = (
                terminated,
                truncated,
                next_obs,
            )
            if "final_obs" in info:  # SAME_STEP: `next_obs` is already the reset observation
                ended = info["_final_obs"]
                buffer.next_obs[t, ended] = np.stack(info["final_obs"][ended])
            obs = next_obs
        key, learn_key = jax.random.split(key)
        state, metrics = learn_c(state, buffer, learn_key)
        box[:] = [state, obs, key]
        return jax.block_until_ready(metrics)

    return run


# ---------------------------------------------------------------- the run


class Point(NamedTuple):
    """A trainer's learning curve after one update."""

    steps: int  # env steps so far
    seconds: float  # training time so far, setup and compile included
    return_sum: float  # the returns of the episodes that ended in this update, summed
    episodes: int  # how many ended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about 33k env steps (the tests)")
    parser.add_argument("--steps", type=int, help="env steps per trainer (default 1M)")
    parser.add_argument(
        "--budget", type=float, help="stop after this many seconds of a trainer's wall time"
    )
    parser.add_argument("--only", choices=("jaxbridge", "gymnasium"), help="one trainer")
    parser.add_argument("--out", default="ppo-output", help="folder for the figure")
    args = parser.parse_args()
    began = time.perf_counter()
    cfg = Config()
    batch = cfg.num_envs * cfg.num_steps
    steps = args.steps or (16 * batch if args.quick else 1_000_000)
    num_updates = max(steps // batch, 2)
    names = [args.only] if args.only else ["jaxbridge", "gymnasium"]
    print(
        f"PPO on Hopper-v5: {num_updates} updates of {cfg.num_envs} envs x {cfg.num_steps} steps"
        f" ({num_updates * batch:,} env steps per trainer); OPENBLAS_NUM_THREADS="
        f"{os.environ.get('OPENBLAS_NUM_THREADS')}, {os.cpu_count()} CPUs, jax {jax.__version__}"
    )

    probe = gymnasium.make("Hopper-v5")
    space = probe.action_space
    assert isinstance(space, gymnasium.spaces.Box)
    obs_size = int(np.prod(probe.observation_space.shape or ()))
    probe.close()
    ppo = PPO(cfg, obs_size, space, num_updates)
    trainers, setup = {}, {}
    for name in names:
        start = time.perf_counter()
        if name == "jaxbridge":
            import jaxbridge.gymnasium

            env = jaxbridge.gymnasium.make("Hopper-v5")
            trainers[name] = jaxbridge_trainer(ppo, env, jax.random.key(1))
        else:
            trainers[name] = gymnasium_trainer(ppo, "Hopper-v5", seed=1)
        setup[name] = time.perf_counter() - start  # making the envs, compiling

    # The trainers take turns, one update each, so both run under the same load.
    curves: dict[str, list[Point]] = {n: [] for n in names}
    last: dict[str, dict[str, jax.Array]] = {}
    elapsed = dict(setup)
    for i in range(num_updates):
        for name, run in trainers.items():
            start = time.perf_counter()
            last[name] = metrics = run()
            elapsed[name] += time.perf_counter() - start
            curves[name].append(
                Point(
                    (i + 1) * batch,
                    elapsed[name],
                    float(metrics["return_sum"]),
                    int(metrics["episodes"]),
                )
            )
        spent = args.budget is not None and max(elapsed.values()) >= args.budget
        if i % max(num_updates // 20, 1) == 0 or i == num_updates - 1 or spent:
            line = ", ".join(
                f"{n} {windowed(curves[n])[-1]:7.1f} (KL {float(last[n]['kl']):.4f}, value loss "
                f"{float(last[n]['value_loss']):.2e})"
                for n in names
            )
            print(
                f"update {i + 1:4d}/{num_updates} ({(i + 1) * batch:>9,} steps): mean "
                f"episode return {line}",
                flush=True,
            )
        if spent and i < num_updates - 1:
            print(f"stopped after {i + 1} of {num_updates} updates: the {args.budget:g} s budget")
            break

    print(
        "\n| trainer | env steps/s (training) | setup and compile (s) | wall time (s) "
        "| steps to return 1000 | time to return 1000 (s) | final return |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in names:
        curve, returns = curves[name], windowed(curves[name])
        reached = next((p for p, r in zip(curve, returns) if r >= 1000.0), None)
        steps_to, time_to = (
            ("not reached", "-")
            if reached is None
            else (f"{reached.steps:,}", f"{reached.seconds:.1f}")
        )
        rate = curve[-1].steps / (elapsed[name] - setup[name])
        print(
            f"| {name} | {rate:,.0f} | {setup[name]:.1f} | {elapsed[name]:.1f} | {steps_to} | "
            f"{time_to} | {returns[-1]:.1f} |"
        )
    print(
        "(the mean return of the episodes ended in the last 10 updates; times include setup "
        "and compile, steps/s does not)"
    )
    if len(names) == 2:
        ratio = (elapsed["gymnasium"] - setup["gymnasium"]) / (
            elapsed["jaxbridge"] - setup["jaxbridge"]
        )
        print(f"jaxbridge trains {ratio:.2f}x as many env steps/s as gymnasium's SyncVectorEnv")
    both = ", both trainers interleaved" if len(names) == 2 else ""
    print(f"whole run{both}: {time.perf_counter() - began:.1f} s")
    figure = plot(curves, pathlib.Path(args.out))
    print(f"learning curves saved to {figure}")
    for name in names:
        returns = windowed(curves[name])
        print(f"{name}: mean episode return {returns[0]:.1f} -> {returns[-1]:.1f}")
        assert np.isfinite(returns).all(), f"{name}: a return is not finite"
        if (args.steps is None and args.quick) or (args.budget is not None and len(returns) >= 16):
            # A random policy falls in about 20 steps (a return near 15); 16 updates triple it.
            assert returns[-1] > 3.0 * returns[0], f"{name}: the return did not improve"
        elif args.steps is None:
            assert max(returns) >= 1000.0, f"{name}: no mean return of 1,000 in 1M steps"


def windowed(curve: list[Point], window: int = 10) -> list[float]:
    """The mean return of the episodes that ended in the last `window` updates, at each update."""
    sums = np.cumsum([p.return_sum for p in curve])
    counts = np.cumsum([p.episodes for p in curve])
    out = []
    for i in range(len(curve)):
        j = i - window
        total, n = sums[i] - (sums[j] if j >= 0 else 0.0), counts[i] - (counts[j] if j >= 0 else 0)
        out.append(float(total / n) if n else (out[-1] if out else 0.0))
    return out


def plot(curves: dict[str, list[Point]], out: pathlib.Path) -> pathlib.Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    out.mkdir(parents=True, exist_ok=True)
    fig, (by_steps, by_time) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    labels = {
        "jaxbridge": "jaxbridge.gymnasium, one jit per update",
        "gymnasium": "gymnasium SyncVectorEnv, Python loop",
    }
    for name, curve in curves.items():
        returns = windowed(curve)
        by_steps.plot([p.steps for p in curve], returns, label=labels[name])
        by_time.plot([p.seconds for p in curve], returns, label=labels[name])
    for ax, xlabel in (
        (by_steps, "environment steps"),
        (by_time, "wall time (s), setup and compile included"),
    ):
        ax.axhline(1000.0, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel(xlabel)
        ax.xaxis.set_major_formatter(matplotlib.ticker.EngFormatter())
        ax.set_ylabel("mean episode return (last 10 updates)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("PPO on Hopper-v5")
    path = out / "ppo_hopper.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


if __name__ == "__main__":
    main()
