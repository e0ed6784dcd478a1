# ruff: noqa: E402 - the thread limit precedes the imports
"""jaxbridge.gymnasium against raw MuJoCo, EnvPool and gymnasium, side by side in one run.

    python benchmarks/gymnasium_envs.py [--quick] [--rounds N] [--steps T]

Environment steps per second (batch x steps / seconds), float64, OPENBLAS_NUM_THREADS=1,
random actions drawn once (uniform over the action space, the same for every row), on
Hopper-v5 and Humanoid-v5 at batch 16 and 64. Every row runs `T` steps of the batch in each
round, the rows in turn round after round (a slow phase of a shared machine hits them alike),
and the best round counts. Rows:

- `raw mujoco.rollout` (the engine floor): one long `mujoco.rollout` of the same controls,
  each held for the environment's `frame_skip`, from the same initial states, on the same
  number of threads as jaxbridge's environment; MuJoCo carries the warm start as
  gymnasium's environment does, so its final states must equal jaxbridge's bit for bit
  (checked, and printed).
- `jaxbridge.gymnasium`: `jit(scan(vmap(env.step)))` of `jaxbridge.gymnasium.make(id)`,
  observation, reward and termination included (the scan sums the observations and stacks
  the rewards and flags, so none of them is dead code). `step` never resets.
- `EnvPool XLA`: EnvPool's XLA `step` (`env.xla()`) inside a jitted `lax.scan`, the same
  observation and reward outputs, `num_threads` the same; EnvPool resets finished episodes
  itself, links its own MuJoCo and starts from its own reset states.
- `gymnasium SyncVectorEnv`: `gymnasium.make_vec(id, vectorization_mode="sync")`, the real v5
  environments stepped from a Python loop (autoreset, one thread).
- `jaxbridge sim.step only`: `jit(scan(vmap(sim.step)))` of `Simulator.from_gymnasium(id)`:
  the physics alone, no observation or reward, no warm start carried (for reference).

A peer that is not installed (EnvPool: the `bench` extra) skips its row with a line that says
so. `--quick` runs batch 16 only, a few steps, one round: a smoke test of every row;
`--batch 64` (repeatable) picks the batch sizes.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from _util import peer, require, table, verdict

gymnasium = require("gymnasium", script="gymnasium_envs.py")
mujoco = require("mujoco", script="gymnasium_envs.py")
from mujoco import rollout as mj_rollout

import jaxbridge.gymnasium as jbg
from jaxbridge.mujoco import Simulator

ENV_IDS = ("Hopper-v5", "Humanoid-v5")
TARGET = 0.9  # jaxbridge.gymnasium's steps/s against the engine floor's

FLOOR = "raw mujoco.rollout (the engine floor)"
OURS = "jaxbridge.gymnasium jit(scan(vmap(env.step)))"
AUTO = "jaxbridge.gymnasium jit(scan(vmap(env.autoreset_step)))"
ENVPOOL = "EnvPool 1.2.5 XLA step in a jitted lax.scan"
SYNC = "gymnasium SyncVectorEnv"
SIM = "jaxbridge sim.step only"
ROWS = (FLOOR, OURS, AUTO, ENVPOOL, SYNC, SIM)


def once(f: Callable[[], Any]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this process, all its threads: EnvPool's and MuJoCo's
    too) of one call of `f`, its result blocked on."""
    t0, c0 = time.perf_counter(), time.process_time()
    jax.block_until_ready(f())
    return time.perf_counter() - t0, time.process_time() - c0


class Case:
    """The rows of one environment id at one batch size: `T` steps each, from the same
    states and with the same actions where the row allows it."""

    def __init__(self, env_id: str, B: int, T: int, envpool: Any):
        self.env_id, self.B, self.T = env_id, B, T
        self.fns: dict[str, Callable[[], Any]] = {}
        self.notes: list[str] = []
        sim = Simulator.from_gymnasium(env_id)
        self.nthread, fs = sim.nthread, sim.frame_skip
        low, high = (np.asarray(b, np.float64) for b in _action_bounds(env_id))
        rng = np.random.default_rng(0)
        U = rng.uniform(low, high, (T, B, low.size))  # (T, B, nu)

        env = jbg.make(env_id)
        states, _, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), B))
        S0 = np.asarray(states.physics)
        nobs = env.observation_space.shape[0]

        @jax.jit
        def run_env(states, U):
            def body(carry, u):
                s, obs_sum = carry
                s, obs, reward, terminated, truncated, _ = jax.vmap(env.step)(s, u)
                return (s, obs_sum + obs), (reward, terminated | truncated)

            return jax.lax.scan(body, (states, jnp.zeros((B, nobs))), U)

        @jax.jit
        def run_auto(states, U, keys):
            def body(carry, xs):
                s, obs_sum = carry
                u, k = xs
                s, obs, reward, terminated, truncated, _ = jax.vmap(env.autoreset_step)(s, u, k)
                return (s, obs_sum + obs), (reward, terminated | truncated)

            return jax.lax.scan(body, (states, jnp.zeros((B, nobs))), (U, keys))

        U_j = jnp.asarray(U)
        keys = jax.random.split(jax.random.key(1), (T, B))
        self.fns[OURS] = lambda: run_env(states, U_j)
        # Each round continues the episodes where the last one left them, as EnvPool's
        # and gymnasium's rows do.
        carry = [states]

        def auto():
            (carry[0], obs_sum), rest = run_auto(carry[0], U_j, keys)
            return obs_sum, rest

        self.fns[AUTO] = auto
        final_ours = np.asarray(self.fns[OURS]()[0][0].physics)

        # The floor: one rollout of all T * frame_skip physics steps, the controls held.
        model = sim.model
        runner = mj_rollout.Rollout(nthread=self.nthread if B > 1 else 0)
        datas = [mujoco.MjData(model) for _ in range(max(self.nthread, 1))]
        held = np.ascontiguousarray(np.repeat(np.swapaxes(U, 0, 1), fs, axis=1))
        out = np.empty((B, T * fs, sim.nstate))

        def floor():
            runner.rollout([model] * B, datas, S0, held, nstep=T * fs, skip_checks=True, state=out)
            return out

        self.fns[FLOOR] = floor
        same = np.array_equal(floor()[:, -1], final_ours)
        self.notes.append(
            f"{env_id} B={B}: jaxbridge.gymnasium's final states "
            f"{'equal' if same else 'DIFFER FROM'} the floor's bit for bit"
        )

        if envpool is not None:
            pool = envpool.make(
                env_id, env_type="gymnasium", num_envs=B, batch_size=B, num_threads=self.nthread
            )
            pool.reset()  # synchronous: an `async_reset` left unreceived puts two batches in flight
            handle, _, _, step = pool.xla()
            nobs = pool.observation_space.shape[0]

            @jax.jit
            def run_pool(handle, U):
                def body(carry, u):
                    h, obs_sum = carry
                    h, (obs, reward, terminated, truncated, _) = step(h, u)
                    return (h, obs_sum + obs), (reward, terminated | truncated)

                return jax.lax.scan(body, (handle, jnp.zeros((B, nobs))), U)

            U_p = jnp.asarray(U)  # float64: EnvPool's XLA step takes no other action dtype
            box = [handle]

            def envpool_row():
                (box[0], obs_sum), rest = run_pool(box[0], U_p)
                return obs_sum, rest

            self.fns[ENVPOOL] = envpool_row

        vec = gymnasium.make_vec(env_id, num_envs=B, vectorization_mode="sync")
        vec.reset(seed=0)
        U_g = U.astype(np.float32)  # the environments' action dtype

        def sync():
            total = 0.0
            for u in U_g:
                obs, reward, terminated, truncated, _ = vec.step(u)
                total += float(reward.sum())
            return total

        self.fns[SYNC] = sync

        @jax.jit
        def run_sim(S, U):
            return jax.lax.scan(lambda s, u: (jax.vmap(sim.step)(s, u), None), S, U)[0]

        S0_j, U_s = jnp.asarray(S0), jnp.asarray(U)
        self.fns[SIM] = lambda: run_sim(S0_j, U_s)


def _action_bounds(env_id: str) -> tuple[np.ndarray, np.ndarray]:
    env = gymnasium.make(env_id)
    try:
        return env.action_space.low, env.action_space.high
    finally:
        env.close()


Key = tuple[str, int, str]  # (env id, batch, row)


def measure(cases: list[Case], rounds: int) -> tuple[dict[Key, float], dict[Key, float]]:
    """Env steps per wall second and per CPU second of each row of each case: the best of
    `rounds` interleaved rounds (on a shared machine the noise only ever adds)."""
    for case in cases:  # compile, and warm every path
        for f in case.fns.values():
            once(f)
    wall: dict[Key, float] = {}
    cpu: dict[Key, float] = {}
    for _ in range(rounds):
        for case in cases:
            for name, f in case.fns.items():
                key = (case.env_id, case.B, name)
                w, c = once(f)
                wall[key] = min(wall.get(key, float("inf")), w)
                cpu[key] = min(cpu.get(key, float("inf")), c)
    steps = {(c.env_id, c.B): c.B * c.T for c in cases}
    return (
        {k: steps[k[:2]] / seconds for k, seconds in wall.items()},
        {k: steps[k[:2]] / seconds for k, seconds in cpu.items()},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="batch 16, few steps, one round")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=None, help="env steps per row and round")
    parser.add_argument(
        "--batch", type=int, action="append", default=None, help="a batch size (repeatable)"
    )
    args = parser.parse_args()
    batches = tuple(args.batch) if args.batch else (16,) if args.quick else (16, 64)
    rounds = args.rounds or (1 if args.quick else 5)
    envpool = peer("envpool", rows=f"the {ENVPOOL} rows")
    cases = []
    for env_id in ENV_IDS:
        T = args.steps or (10 if args.quick else 100 if env_id.startswith("Humanoid") else 200)
        for B in batches:
            cases.append(Case(env_id, B, T, envpool))
    nthread = cases[0].nthread
    rate, cpu_rate = measure(cases, rounds)
    columns = [(c.env_id, c.B) for c in cases]
    header = ("env steps/s", *(f"{e} B={b}" for e, b in columns))

    def rows(rates: dict[Key, float]) -> list[tuple[str, ...]]:
        return [
            (
                name,
                *(
                    f"{rates[(e, b, name)]:,.0f}" if (e, b, name) in rates else "—"
                    for e, b in columns
                ),
            )
            for name in ROWS
            if any((e, b, name) in rates for e, b in columns)
        ]

    print(
        table(
            f"jaxbridge.gymnasium against the engine floor, EnvPool and gymnasium (float64, "
            f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, {nthread} threads "
            f"for MuJoCo and EnvPool, random actions, best of {rounds} interleaved rounds)",
            rows(rate),
            header,
        )
    )
    print(
        table(
            "The same, in env steps per CPU second of this process (all its threads): work done, "
            "which other processes' time slices do not inflate",
            rows(cpu_rate),
            ("env steps per CPU s", *header[1:]),
        )
    )
    ratios = []
    for e, b in columns:
        ours = rate.get((e, b, OURS))
        if ours is None:
            continue
        floor = ours / rate[(e, b, FLOOR)]
        pool, auto = rate.get((e, b, ENVPOOL)), rate[(e, b, AUTO)]
        ratios.append(
            (
                f"{e} B={b}",
                f"{floor:.2f}",
                verdict(floor, TARGET, lower_is_better=False),
                f"{cpu_rate[(e, b, OURS)] / cpu_rate[(e, b, FLOOR)]:.2f}",
                "—" if pool is None else f"{ours / pool:.2f}",
                "—" if pool is None else f"{auto / pool:.2f}",
                f"{ours / rate[(e, b, SYNC)]:.1f}",
            )
        )
    if ratios:
        print(
            "`ours` is `env.step` (no resets), the floor's exact physics; `autoreset` resets "
            "finished episodes, as EnvPool and SyncVectorEnv do. `(CPU)`: the same ratio in "
            "steps per CPU second of this process, steadier on a loaded machine.\n"
        )
        print(
            table(
                "Ratios (steps/s over steps/s)",
                ratios,
                (
                    "case",
                    "ours/floor",
                    f"target ≥ {TARGET:g}",
                    "ours/floor (CPU)",
                    "ours/EnvPool",
                    "autoreset/EnvPool",
                    "ours/SyncVectorEnv",
                ),
            )
        )
    for case in cases:
        for note in case.notes:
            print(f"- {note}")


if __name__ == "__main__":
    main()
