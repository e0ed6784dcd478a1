"""What the demo's stages share: missing extras named, the humanoid model, example scripts run."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any


def needs(*modules: str) -> None:
    """Imports `modules` or exits with the command that installs them."""
    import importlib

    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise SystemExit(
            f"the demo needs {', '.join(missing)}: `pip install jaxbridge[all]` (or `make demo`)."
        )


def humanoid_model() -> tuple[Any, Any]:
    """`mujoco` and the `MjModel` of gymnasium's `Humanoid-v5`."""
    needs("mujoco", "gymnasium")
    import gymnasium
    import mujoco

    env = gymnasium.make("Humanoid-v5")
    model = env.unwrapped.model  # type: ignore[attr-defined]
    env.close()
    return mujoco, model


def example(name: str, stage: str) -> pathlib.Path:
    """The path of `examples/<name>`, which a stage runs, or exits saying where to run from."""
    # A source checkout: src/jaxbridge/_demo/_common.py -> examples/ beside src/.
    script = pathlib.Path(__file__).resolve().parents[3] / "examples" / name
    if not script.is_file():
        raise SystemExit(
            f"the {stage} stage runs {name} from the repository's examples/, which is not at "
            f"{script.parent}: the examples ship with the source, not the wheel. Run the demo "
            "from a clone (`make demo`)."
        )
    return script


def run_script(script: pathlib.Path, args: list[str], out: pathlib.Path) -> list[str]:
    """Runs `script` with `args` in `out` (MuJoCo's log goes there), echoing its output.

    The script imports the jaxbridge that runs this one, also from a checkout not installed.
    Paths in `args` must be absolute: the script's working directory is `out`.

    Returns:
        The lines it printed.

    Raises:
        RuntimeError: it exited with an error; the message holds its last lines.
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1", OPENBLAS_NUM_THREADS="1")
    here = str(pathlib.Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    lines: list[str] = []
    with subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=out,
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
    return lines
