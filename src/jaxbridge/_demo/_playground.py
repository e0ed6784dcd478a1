"""Stage 7: PPO on MuJoCo Playground's CartpoleBalance on C MuJoCo (`examples/10_playground.py`).

The stage runs the example script itself, so the demo and the example are one program:
`jaxbridge.playground.load("CartpoleBalance")`, Playground's own environment code with its
physics on C MuJoCo, trained by the project's PPO (`examples/08_ppo.py`'s), each update one
jitted function over `jax.vmap(env.step)`.

- The default demo trains for 80 updates (163,840 env steps): the reward rate rises from the
  untrained policy's towards the ceiling of 1,000 as the pole is kept up (30 updates, tried
  first, moved it by only a few percent).
- `--quick` (the tests) runs 4 updates.
- The script alone trains 200k steps (`python examples/10_playground.py`).
- Then the trained policy drives one environment and Playground's `env.render` draws it:
  `demo-output/playground_policy.gif` (EGL, then OSMesa; where neither renders, one line
  naming `MUJOCO_GL` says so and the demo goes on without the video).
"""

from __future__ import annotations

import pathlib

from ._common import example, needs, run_script

#: The default run's env steps: 80 updates of 64 environments x 32 steps.
STEPS = 163_840

#: The lines of the script's output that go into the demo's report.
_REPORTED = (
    "PPO on Playground's",
    "setup and compile",
    "CartpoleBalance: reward per step",
    "video of the trained policy",
    "no video:",
)


def stage(report: list[str], *, quick: bool, out: pathlib.Path) -> None:
    """PPO on MuJoCo Playground's CartpoleBalance, its physics on C MuJoCo"""
    needs("mujoco", "mujoco_playground", "gymnasium", "flax", "optax", "matplotlib")
    script = example("10_playground.py", "Playground")
    args = ["--out", str(out.resolve())] + (["--quick"] if quick else ["--steps", str(STEPS)])
    lines = run_script(script, args, out)
    report += [f"  {line}" for line in lines if line.startswith(_REPORTED)]
    report.append(f"  learning curve: {out / 'playground_ppo.png'}")
    report.append("  200k steps: `python examples/10_playground.py`")
