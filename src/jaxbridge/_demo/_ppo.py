"""Stage 5: PPO on Hopper-v5, the main job of an RL user (`examples/08_ppo.py`).

The stage runs the example script itself, so the demo and the example are one program: Flax
NNX and Optax PPO whose whole update (the rollout of 64 environments with autoreset, GAE and
the epochs of minibatches) is one `jax.jit`-compiled function over
`jaxbridge.gymnasium.make("Hopper-v5")`, beside the same algorithm stepping gymnasium's own
`SyncVectorEnv` from a Python loop. The script ships with the source, not the wheel, as the
benchmarks do. The quick demo trains the jaxbridge trainer alone, for a few updates (the test
suite runs the full comparison in `--quick` through the examples' test).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from ._common import needs

#: The lines of the script's output that go into the demo's report.
_REPORTED = (
    "| trainer",
    "|---",
    "| jaxbridge",
    "| gymnasium",
    "(the mean return",
    "jaxbridge trains",
    "jaxbridge: mean episode return",
    "gymnasium: mean episode return",
)


def _script() -> pathlib.Path:
    # A source checkout: src/jaxbridge/_demo/_ppo.py -> examples/ beside src/.
    return pathlib.Path(__file__).resolve().parents[3] / "examples" / "08_ppo.py"


def stage(report: list[str], *, quick: bool, out: pathlib.Path) -> None:
    """PPO on Hopper-v5 with one jitted update over jaxbridge.gymnasium"""
    needs("mujoco", "gymnasium", "flax", "optax", "matplotlib")
    script = _script()
    if not script.is_file():
        raise SystemExit(
            f"the PPO stage runs {script.name} from the repository's examples/, which is not "
            f"at {script.parent}: the examples ship with the source, not the wheel. Run the "
            "demo from a clone (`make demo`)."
        )
    command = [sys.executable, str(script), "--out", str(out)]
    if quick:
        command += ["--only", "jaxbridge", "--steps", "8192"]  # 4 updates
    env = dict(os.environ, PYTHONUNBUFFERED="1", OPENBLAS_NUM_THREADS="1")
    # The script imports the jaxbridge that runs this, also from a checkout not installed.
    here = str(pathlib.Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    lines: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=out
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            print(f"      {line}", end="", flush=True)
            lines.append(line.rstrip("\n"))
    if process.returncode != 0:
        tail = "\n".join(lines[-20:])
        raise RuntimeError(
            f"{script.name} exited with status {process.returncode}; its last lines:\n{tail}"
        )
    report += [f"  {line}" for line in lines if line.startswith(_REPORTED)]
    report.append(f"  learning curves: {out / 'ppo_hopper.png'}")
