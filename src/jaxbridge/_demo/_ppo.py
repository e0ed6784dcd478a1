"""Stage 5: PPO on Hopper-v5, the main job of an RL user (`examples/08_ppo.py`).

The stage runs the example script itself, so the demo and the example are one program: Flax
NNX and Optax PPO whose whole update (the rollout of 64 environments with autoreset, GAE and
the epochs of minibatches) is one `jax.jit`-compiled function over
`jaxbridge.gymnasium.make("Hopper-v5")`. The script ships with the source, not the wheel, as
the benchmarks do.

- The default demo trains that trainer alone, for 200k env steps or until its wall time
  (compile included) passes 40 s, whichever comes first: long enough for the mean return to
  rise from a random policy's (about 15) by tens of times.
- `--full` runs the script's side-by-side: the same algorithm also stepping gymnasium's own
  `SyncVectorEnv` from a Python loop, both trainers for 1M steps, interleaved (minutes).
- `--quick` (the tests) runs 4 updates of jaxbridge's trainer.
"""

from __future__ import annotations

import pathlib

from ._common import example, needs, run_script

#: The default run's env steps and wall-time budget (seconds, setup and compile included).
STEPS, BUDGET = 204_800, 40

#: The lines of the script's output that go into the demo's report.
_REPORTED = (
    "PPO on Hopper-v5:",
    "stopped after",
    "| trainer",
    "|---",
    "| jaxbridge",
    "| gymnasium",
    "(the mean return",
    "jaxbridge trains",
    "jaxbridge: mean episode return",
    "gymnasium: mean episode return",
)


def stage(report: list[str], *, quick: bool, out: pathlib.Path, full: bool = False) -> None:
    """PPO on Hopper-v5 with one jitted update over jaxbridge.gymnasium"""
    needs("mujoco", "gymnasium", "flax", "optax", "matplotlib")
    script = example("08_ppo.py", "PPO")
    args = ["--out", str(out.resolve())]
    if quick:
        args += ["--only", "jaxbridge", "--steps", "8192"]  # 4 updates
    elif not full:
        args += ["--only", "jaxbridge", "--steps", str(STEPS), "--budget", str(BUDGET)]
    lines = run_script(script, args, out)
    report += [f"  {line}" for line in lines if line.startswith(_REPORTED)]
    report.append(f"  learning curves: {out / 'ppo_hopper.png'}")
    if not full:
        report.append(
            "  both trainers side by side, 1M steps each: `python -m jaxbridge demo --full`"
        )
