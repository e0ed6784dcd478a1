"""Loading an `MjModel` from whatever the user holds: a model, MJCF text, a path, a gym id."""

from __future__ import annotations

import os
import pathlib
from typing import Any

try:
    import mujoco
except ImportError as e:  # the optional extra is missing: say how to get it
    raise ImportError("`jaxbridge.mujoco` needs MuJoCo: `pip install jaxbridge[mujoco]`") from e

__all__ = ["load_model", "load_gymnasium"]


def load_model(model: Any) -> mujoco.MjModel:
    """Turns an `MjModel`, MJCF text or a path to an MJCF/MJB file into an `MjModel`.

    Args:
        model: a `mujoco.MjModel` (used as is, not copied), a string of MJCF XML (anything
            starting with `<`), or a `str`/`os.PathLike` path to an `.xml` or `.mjb` file.

    Returns:
        The compiled `mujoco.MjModel`.

    Raises:
        TypeError: `model` is none of these.
        FileNotFoundError: the path does not exist.

    Example:
        >>> m = load_model('<mujoco><worldbody><body><freejoint/><geom size=".1"/>'
        ...                '</body></worldbody></mujoco>')
        >>> (m.nq, m.nv)
        (7, 6)
    """
    if isinstance(model, mujoco.MjModel):
        return model
    if isinstance(model, str) and model.lstrip().startswith("<"):
        return mujoco.MjModel.from_xml_string(model)
    if isinstance(model, str | os.PathLike):
        path = pathlib.Path(model)
        if not path.exists():
            raise FileNotFoundError(
                f"`jaxbridge.mujoco.Simulator(model=...)`: no file at {str(path)!r}. Pass an "
                "`mujoco.MjModel`, MJCF text (starting with `<`), or the path of an .xml/.mjb file."
            )
        if path.suffix.lower() == ".mjb":
            return mujoco.MjModel.from_binary_path(str(path))
        return mujoco.MjModel.from_xml_path(str(path))
    raise TypeError(
        "`jaxbridge.mujoco.Simulator(model=...)` must be a `mujoco.MjModel`, MJCF text or a path "
        f"to an .xml/.mjb file; got {type(model).__name__}. For a gymnasium environment use "
        "`Simulator.from_gymnasium(env_id)`."
    )


def load_gymnasium(env_id: str, **make_kwargs: Any) -> tuple[mujoco.MjModel, int]:
    """The `MjModel` and `frame_skip` of a gymnasium MuJoCo environment.

    The environment is made once (with `make_kwargs`, e.g. `xml_file=` or `frame_skip=`),
    its model taken, and the environment closed.

    Args:
        env_id: a gymnasium id such as `"Humanoid-v5"`.
        **make_kwargs: passed to `gymnasium.make`.

    Returns:
        `(model, frame_skip)`: one environment step is `frame_skip` physics steps.

    Raises:
        ImportError: gymnasium is not installed.
        TypeError: the environment is not a MuJoCo environment.

    Example:
        >>> model, frame_skip = load_gymnasium("Hopper-v5")
        >>> (model.nq, frame_skip)
        (6, 4)
    """
    try:
        import gymnasium
    except ImportError as e:
        raise ImportError(
            "`Simulator.from_gymnasium` needs gymnasium: `pip install jaxbridge[mujoco]`"
        ) from e
    env = gymnasium.make(env_id, **make_kwargs)
    try:
        inner = env.unwrapped
        model = getattr(inner, "model", None)
        if not isinstance(model, mujoco.MjModel):
            raise TypeError(
                f"`Simulator.from_gymnasium({env_id!r})`: this environment has no "
                "`mujoco.MjModel` (`env.unwrapped.model`); pass a MuJoCo environment id "
                "such as 'Humanoid-v5'."
            )
        frame_skip = int(getattr(inner, "frame_skip", 1))
    finally:
        env.close()
    return model, frame_skip
