"""What the demo's stages share: the humanoid model, a clear error when extras are missing."""

from __future__ import annotations

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
