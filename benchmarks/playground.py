# ruff: noqa: E402 - the thread limit precedes the imports
"""jaxbridge.playground against the raw C floor and MuJoCo Playground's own CPU paths.

    python benchmarks/playground.py [--quick] [--rounds N] [--steps T] [--batch B]
                                    [--no-default] [--envs NAME ...]

Environment steps per second (batch x steps / seconds) at B=64 on CheetahRun, WalkerWalk and
HumanoidWalk, OPENBLAS_NUM_THREADS=1 for every row, random actions in [-1, 1] drawn once (the
same for every row). Every row runs its steps of the batch in each round, the rows in turn
round after round (a slow phase of a shared machine hits them alike); the best round counts.
The load average is printed before and after. Rows:

- `raw mujoco.rollout` (the engine floor): one `mujoco.rollout` of the same controls, each
  held for the environment's `n_substeps`, from jaxbridge's reset states, on as many threads
  as jaxbridge's batch call; its final states are checked against jaxbridge's.
- `jaxbridge.playground`: `jit(scan(vmap(env.step)))` of `jaxbridge.playground.load(name)`,
  float64, as an RL user runs it: Playground's own observations, rewards and done flags (the
  scan sums the observations and stacks the rewards and flags, so none is dead code).
- `the same in float32`: that loop with x64 off (Playground's default), on an environment
  loaded with x64 off, the actions rounded to float32: the compiled field call widens and
  rounds in C (a note says whether the lowered loop takes it).
- `the same, returning only qpos, qvel`: that loop, its final Data reduced to `qpos` and
  `qvel`, so every other leaf is dead code (the engine computes only what is read).
- `the first row on the Python path`: the first row's loop on a fresh environment lowered
  with the compiled field call withheld (`jaxbridge.mujoco._native.withheld`), as where it
  cannot be built: its host calls copy XLA's buffers into MuJoCo's rows in Python.
- `Playground impl="jax"`: the same loop on `mujoco_playground.registry.load(name)` with
  `impl="jax"` (MJX's JAX engine on XLA's CPU backend), float32 as Playground runs it.
- `Playground default`: the same loop on `registry.load(name)` as it comes (its default
  `impl`, "warp": MuJoCo Warp on the CPU), float32.

A round is `STEPS[name]` env steps from the reset states (CheetahRun 200, WalkerWalk 10,
HumanoidWalk 50: random actions take walker and humanoid past the contacts MJX's layout has
slots for soon after, see `STEPS`). Playground's rows are ~5x and ~100x slower, so they run
`T // 10` and `T // 100` steps a round (at least 2). `--quick` (the smoke test of
`python -m jaxbridge bench --quick`) runs CheetahRun alone at batch 8, a few steps, one
round, and leaves out the default row (its first compile takes about a minute).
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

from _util import require, table, verdict

mujoco = require("mujoco", script="playground.py")
require("mujoco_playground", script="playground.py")
from mujoco import rollout as mj_rollout
from mujoco_playground import registry

from jaxbridge import playground
from jaxbridge.mujoco import _native

ENVS = ("CheetahRun", "WalkerWalk", "HumanoidWalk")
TARGET = 0.9  # jaxbridge.playground's steps/s against the floor's

FLOOR = "raw mujoco.rollout (the engine floor)"
OURS = "jaxbridge.playground jit(scan(vmap(env.step))), float64"
OURS32 = "the same in float32 (x64 off, Playground's default)"
STATE = "the same, returning only qpos, qvel of the final Data"
PYTHON = "the first row on the Python path (JAXBRIDGE_NATIVE=0)"
PG_JAX = 'Playground impl="jax" (MJX on XLA:CPU), float32'
PG_DEFAULT = 'Playground default (impl="warp" on the CPU), float32'
ROWS = (FLOOR, OURS, OURS32, STATE, PYTHON, PG_JAX, PG_DEFAULT)

#: Env steps a round, from the reset states. Random actions make C MuJoCo find more contacts
#: than MJX's impl="jax" Data has slots for (walker: 5 of condim 3 in 4 slots at step 12 of
#: 64 rows; humanoid: 9 in 8 at step 63), which jaxbridge refuses with that message (MJX's
#: layout cannot hold the state, as `mjx.put_data` cannot), so each round stops before.
STEPS = {"CheetahRun": 200, "WalkerWalk": 10, "HumanoidWalk": 50}


def _threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _loop(env: Any, B: int, state_only: bool = False) -> Callable[[Any, jax.Array], Any]:
    """`jit(scan(vmap(env.step)))` over `(T, B, nu)` actions; observations summed, rewards and
    done flags stacked. It returns the final State (every leaf of its Data, as an RL loop
    carries it into the next rollout), or with `state_only` its Data's qpos and qvel alone (the
    other leaves dead code: what the engine computes when they are not read)."""

    @jax.jit
    def run(states: Any, U: jax.Array) -> Any:
        def body(carry, u):
            s, obs_sum = carry
            s = jax.vmap(env.step)(s, u)
            return (s, obs_sum + s.obs), (s.reward, s.done)

        zero = jnp.zeros((B, env.observation_size), U.dtype)
        (s, obs_sum), rest = jax.lax.scan(body, (states, zero), U)
        if state_only:
            return (s.data.qpos, s.data.qvel, obs_sum), rest
        return (s, obs_sum), rest

    return run


class Case:
    """The rows of one environment at one batch size."""

    def __init__(self, name: str, B: int, T: int, default: bool):
        self.name, self.B = name, B
        self.fns: dict[str, Callable[[], Any]] = {}
        self.steps: dict[str, int] = {}
        self.notes: list[str] = []
        env = playground.load(name)
        n = int(env.n_substeps)
        rng = np.random.default_rng(0)
        U = rng.uniform(-1.0, 1.0, (T, B, env.action_size))
        keys = jax.random.split(jax.random.PRNGKey(0), B)
        with _promotion():
            states = jax.jit(jax.vmap(env.reset))(keys)
            run = _loop(env, B)
            U_j = jnp.asarray(U)
            jax.block_until_ready(run(states, U_j))
        self.fns[OURS], self.steps[OURS] = lambda: _promoted(run, states, U_j), T
        # float32, x64 off (what Playground's users run): the same loop, the same actions
        # rounded to float32, on an environment loaded with x64 off
        with jax.enable_x64(False), _promotion():
            env32 = playground.load(name)
            states32 = jax.jit(jax.vmap(env32.reset))(keys)
            run32 = _loop(env32, B)
            U32 = jnp.asarray(U, jnp.float32)
            compiled = _native.TARGET in run32.lower(states32, U32).as_text()
            jax.block_until_ready(run32(states32, U32))
        self.notes.append(
            f"{name} B={B}: the float32 loop {'takes' if compiled else 'does NOT take'} the "
            "compiled field call"
        )

        def call32(f=run32, s=states32, u=U32):
            with jax.enable_x64(False), _promotion():
                return f(s, u)

        self.fns[OURS32], self.steps[OURS32] = call32, T
        with _promotion():
            run_state = _loop(env, B, state_only=True)
            jax.block_until_ready(run_state(states, U_j))
        self.fns[STATE], self.steps[STATE] = lambda: _promoted(run_state, states, U_j), T
        # The first row's loop with its host calls on the Python path, as where the compiled
        # field call cannot be built: a fresh environment, lowered with the library withheld.
        with _native.withheld("benchmarks/playground.py"), _promotion():
            env_py = playground.load(name)
            run_py = _loop(env_py, B)
            states_py = jax.jit(jax.vmap(env_py.reset))(keys)
            jax.block_until_ready(run_py(states_py, U_j))
        self.fns[PYTHON] = lambda: _promoted(run_py, states_py, U_j)
        self.steps[PYTHON] = T

        # The floor: one rollout of T * n_substeps physics steps, the controls held.
        model, spec = env.mj_model, mujoco.mjtState.mjSTATE_FULLPHYSICS
        nthread = _threads() if B > 1 else 0
        runner = mj_rollout.Rollout(nthread=nthread)
        datas = [mujoco.MjData(model) for _ in range(max(nthread, 1))]
        S0 = np.empty((B, mujoco.mj_stateSize(model, spec)))
        d = mujoco.MjData(model)
        for i in range(B):  # jaxbridge's reset states (a State carries every state field)
            for field in ("time", "qpos", "qvel", "act", "history", "plugin_state"):
                value = np.asarray(getattr(states.data, field)[i])
                if field == "time":
                    d.time = float(value)
                elif value.size:
                    getattr(d, field)[...] = value.reshape(getattr(d, field).shape)
            mujoco.mj_getState(model, d, S0[i], spec)
        held = np.ascontiguousarray(np.repeat(np.swapaxes(U, 0, 1), n, axis=1))
        out = np.empty((B, T * n, S0.shape[1]))

        def floor():
            runner.rollout([model] * B, datas, S0, held, nstep=T * n, skip_checks=True, state=out)
            return out

        self.fns[FLOOR], self.steps[FLOOR] = floor, T
        (final, _), _ = _promoted(run, states, U_j)
        ours = np.concatenate([np.asarray(final.data.qpos), np.asarray(final.data.qvel)], axis=1)
        floor_out = floor()[:, -1]
        theirs = np.concatenate(
            [floor_out[:, 1 : 1 + model.nq], floor_out[:, 1 + model.nq : 1 + model.nq + model.nv]],
            axis=1,
        )
        gap = float(np.max(np.abs(ours - theirs)))
        self.notes.append(
            f"{name} B={B}: jaxbridge's final qpos, qvel after {T} env steps "
            f"{'equal' if gap == 0.0 else f'differ by {gap:.1e} from'} the floor's"
        )

        for row, config, steps in (
            (PG_JAX, "jax", max(T // 10, 2)),
            *(((PG_DEFAULT, None, max(T // 100, 2)),) if default else ()),
        ):
            with jax.enable_x64(False), _promotion():
                cfg = registry.get_default_config(name)
                if config is not None:
                    with cfg.unlocked():
                        cfg.impl = config
                theirs_env = registry.load(name, cfg)
                their_states = jax.jit(jax.vmap(theirs_env.reset))(keys)
                their_run = _loop(theirs_env, B)
                U_f = jnp.asarray(U[:steps], jnp.float32)
                started = time.perf_counter()
                jax.block_until_ready(their_run(their_states, U_f))
                compile_s = time.perf_counter() - started
                self.notes.append(f"{name} B={B}: {row}: first call (compile) {compile_s:.0f} s")

            def call(f=their_run, s=their_states, u=U_f):
                with jax.enable_x64(False), _promotion():
                    return f(s, u)

            self.fns[row], self.steps[row] = call, steps


def _promotion() -> Any:
    """Playground's code relies on JAX's default promotion rules (humanoid broadcasts)."""
    import contextlib

    stack = contextlib.ExitStack()
    stack.enter_context(jax.numpy_rank_promotion("allow"))
    stack.enter_context(jax.numpy_dtype_promotion("standard"))
    return stack


def _promoted(f: Callable[..., Any], *args: Any) -> Any:
    with _promotion():
        return f(*args)


def once(f: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(f())
    return time.perf_counter() - t0


Key = tuple[str, int, str]  # (env, batch, row)


def measure(cases: list[Case], rounds: int) -> dict[Key, float]:
    """Env steps per second of each row: the best of `rounds` interleaved rounds."""
    for case in cases:
        for f in case.fns.values():
            once(f)
    best: dict[Key, float] = {}
    for _ in range(rounds):
        for case in cases:
            for row, f in case.fns.items():
                key = (case.name, case.B, row)
                best[key] = min(best.get(key, float("inf")), once(f))
    return {k: c.B * c.steps[k[2]] / best[k] for c in cases for k in best if k[:2] == (c.name, c.B)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CheetahRun, batch 8, one round")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=None, help="jaxbridge's env steps a round")
    parser.add_argument("--batch", type=int, default=None, help="the batch size (default 64)")
    parser.add_argument(
        "--no-default", action="store_true", help="leave out Playground's default (warp) row"
    )
    parser.add_argument(
        "--envs", nargs="+", choices=ENVS, default=None, help=f"a subset of {', '.join(ENVS)}"
    )
    args = parser.parse_args()
    B = args.batch or (8 if args.quick else 64)
    rounds = args.rounds or (1 if args.quick else 5)
    names = args.envs or (ENVS[:1] if args.quick else ENVS)
    default = not (args.quick or args.no_default)
    load_before = os.getloadavg()
    cases = []
    for name in names:
        T = args.steps or (20 if args.quick else STEPS[name])
        cases.append(Case(name, B, T, default))
    rate = measure(cases, rounds)
    load_after = os.getloadavg()
    columns = [(c.name, c.B) for c in cases]
    rows = [
        (row, *(f"{rate[(e, b, row)]:,.0f}" if (e, b, row) in rate else "—" for e, b in columns))
        for row in ROWS
        if any((e, b, row) in rate for e, b in columns)
    ]
    print(
        table(
            f"jaxbridge.playground against the floor and Playground's CPU paths (env steps/s, "
            f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, {_threads()} "
            f"threads for MuJoCo, best of {rounds} interleaved rounds; load average "
            f"{load_before[0]:.1f} before, {load_after[0]:.1f} after, {os.cpu_count()} CPUs)",
            rows,
            ("env steps/s", *(f"{e} B={b}" for e, b in columns)),
        )
    )
    ratios = []
    for e, b in columns:
        ours = rate[(e, b, OURS)]
        floor = ours / rate[(e, b, FLOOR)]
        ratios.append(
            (
                f"{e} B={b}",
                f"{floor:.2f}",
                verdict(floor, TARGET, lower_is_better=False),
                f"{rate[(e, b, OURS32)] / rate[(e, b, FLOOR)]:.2f}",
                verdict(rate[(e, b, OURS32)] / rate[(e, b, FLOOR)], TARGET, lower_is_better=False),
                f"{rate[(e, b, STATE)] / rate[(e, b, FLOOR)]:.2f}",
                f"{rate[(e, b, PYTHON)] / rate[(e, b, FLOOR)]:.2f}",
                f"{ours / rate[(e, b, PG_JAX)]:.1f}",
                f"{ours / rate[(e, b, PG_DEFAULT)]:.0f}" if (e, b, PG_DEFAULT) in rate else "—",
            )
        )
    print(
        table(
            "Ratios (steps/s over steps/s)",
            ratios,
            (
                "case",
                "ours/floor (f64)",
                f"target ≥ {TARGET:g}",
                "ours/floor (f32)",
                f"target ≥ {TARGET:g} (f32)",
                "qpos, qvel only/floor",
                "Python path/floor",
                'ours/impl="jax"',
                "ours/default",
            ),
        )
    )
    for case in cases:
        for note in case.notes:
            print(f"- {note}")


if __name__ == "__main__":
    main()
