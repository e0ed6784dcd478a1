"""Rendering a Playground environment's trajectory and saving it as a GIF."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._gl import check_here


def _unstacked(trajectory: Any) -> list[Any]:
    """A list of States: the list given, or one State with a leading time axis split."""
    if isinstance(trajectory, list | tuple):
        return list(trajectory)
    import jax

    qpos = np.asarray(trajectory.data.qpos)
    if qpos.ndim == 1:
        return [trajectory]
    if qpos.ndim != 2:
        raise ValueError(
            "the trajectory must be a list of States or one State whose data.qpos is "
            f"(steps, nq); got data.qpos of shape {qpos.shape} (a batch of environments: "
            "pick one, `jax.tree.map(lambda x: x[:, i], trajectory)`)"
        )
    return [jax.tree.map(lambda x, t=t: x[t], trajectory) for t in range(qpos.shape[0])]


def frames(
    env: Any,
    trajectory: Any,
    *,
    height: int = 240,
    width: int = 320,
    camera: str | None = None,
) -> list[np.ndarray]:
    """The frames of `trajectory`, by Playground's own `env.render`.

    Args:
        env: a MuJoCo Playground environment (`jaxbridge.playground.load(...)` or Playground's).
        trajectory: a list of its States, or one State with a leading time axis (a `lax.scan`'s
            output).
        height, width: the frame's size in pixels.
        camera: the camera's name (None: the free camera).

    Returns:
        One `(height, width, 3)` uint8 array a State.

    Raises:
        GLUnavailableError: MuJoCo cannot render in this process (the message names
            `MUJOCO_GL`; see `use_headless_gl`).
        ValueError: a trajectory of a batch of environments.
    """
    states = _unstacked(trajectory)
    check_here()
    return [np.asarray(f) for f in env.render(states, height=height, width=width, camera=camera)]


def write_gif(
    images: Sequence[np.ndarray], path: str | pathlib.Path, *, fps: float = 30.0
) -> pathlib.Path:
    """Save frames as a looping GIF (Pillow, which Matplotlib needs too).

    Args:
        images: `(height, width, 3)` uint8 frames, at least one.
        path: the file to write (its folder is made).
        fps: frames a second (a GIF keeps whole hundredths of a second a frame).

    Returns:
        The path written.

    Raises:
        ValueError: no frames, or frames that are not `(height, width, 3)` uint8.
    """
    from PIL import Image

    if not images:
        raise ValueError("write_gif needs at least one frame; got none")
    first = np.asarray(images[0])
    for image in images:
        a = np.asarray(image)
        if a.dtype != np.uint8 or a.ndim != 3 or a.shape != first.shape or a.shape[2] != 3:
            raise ValueError(
                "every frame must be a (height, width, 3) uint8 array of one size; got "
                f"{a.dtype} {a.shape} beside {first.dtype} {first.shape}"
            )
    out = pathlib.Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pictures = [Image.fromarray(np.asarray(a)) for a in images]
    duration = max(round(1000 / fps / 10) * 10, 10)
    pictures[0].save(out, save_all=True, append_images=pictures[1:], duration=duration, loop=0)
    return out
