"""`make(env_id, **kwargs)`: the ids, their constructor keywords, and the models they load.

The keywords and their defaults are read from gymnasium's own classes (the `__init__` of the
id's entry point and of `MujocoEnv`), so `make` accepts exactly what `gymnasium.make` accepts
for the id, with the same defaults, plus `max_episode_steps` (gymnasium's registry value by
default). The rendering keywords are accepted and have no effect on the numbers.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from ._env import MujocoFuncEnv
from ._tasks import TASKS, Task

__all__ = ["ENV_IDS", "make"]

#: The ids `make` accepts: gymnasium's 11 MuJoCo v5 environments.
ENV_IDS = (
    "Ant-v5",
    "HalfCheetah-v5",
    "Hopper-v5",
    "Humanoid-v5",
    "HumanoidStandup-v5",
    "InvertedDoublePendulum-v5",
    "InvertedPendulum-v5",
    "Pusher-v5",
    "Reacher-v5",
    "Swimmer-v5",
    "Walker2d-v5",
)

# `MujocoEnv`'s keywords that only concern rendering.
_RENDERING = ("width", "height", "camera_id", "camera_name", "max_geom", "visual_options")


def _tasks() -> dict[str, type[Task]]:
    from . import _arms, _bodies

    return {**TASKS, **_bodies.TASKS, **_arms.TASKS}


@functools.cache
def keywords(env_id: str) -> dict[str, Any]:
    """The constructor keywords gymnasium's class for `env_id` accepts, with their defaults."""
    import gymnasium
    from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
    from gymnasium.envs.registration import load_env_creator

    entry: Any = gymnasium.spec(env_id).entry_point
    cls = load_env_creator(entry)
    out: dict[str, Any] = {}
    for fn in (cls.__init__, MujocoEnv.__init__):
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.name == "self":
                continue
            if p.name in ("model_path", "observation_space"):  # set by the class itself
                continue
            out.setdefault(p.name, p.default)
    return out


def make(env_id: str, **kwargs: Any) -> MujocoFuncEnv:
    """One of gymnasium's MuJoCo v5 environments as a `FuncEnv` of pure JAX functions.

    Args:
        env_id: one of `ENV_IDS`, e.g. `"Hopper-v5"` (a `"jaxbridge/"` prefix is allowed).
        **kwargs: any keyword of gymnasium's class for the id, with the same meaning
            (`xml_file`, `frame_skip`, reward weights, `reset_noise_scale`, `healthy_*`,
            `exclude_current_positions_from_observation`, ...), and `max_episode_steps`
            (default: gymnasium's registry value). Rendering keywords are accepted and
            ignored; `render_mode` must be None.

    Returns:
        A `MujocoFuncEnv`.

    Raises:
        ValueError: an unknown id or keyword (the message names the accepted ones), or a
            `render_mode`.

    Example:
        >>> import jax
        >>> from jaxbridge.gymnasium import make
        >>> env = make("Hopper-v5", ctrl_cost_weight=1e-2)
        >>> state, obs, info = env.reset(jax.random.key(0))
        >>> obs.shape, sorted(info)
        ((11,), ['x_position', 'z_distance_from_origin'])
    """
    import gymnasium

    name = env_id.removeprefix("jaxbridge/")
    if name not in ENV_IDS:
        raise ValueError(
            f"`jaxbridge.gymnasium.make`: unknown environment id {env_id!r}; the ids are "
            f"{', '.join(ENV_IDS)}."
        )
    accepted = keywords(name)
    unknown = sorted(set(kwargs) - set(accepted) - {"max_episode_steps"})
    if unknown:
        raise ValueError(
            f"`jaxbridge.gymnasium.make({name!r})`: unknown keyword(s) {', '.join(unknown)}; "
            f"the accepted ones are {', '.join([*accepted, 'max_episode_steps'])}."
        )
    if kwargs.get("render_mode") is not None:
        raise ValueError(
            f"`jaxbridge.gymnasium.make({name!r}, render_mode=...)`: these environments do not "
            f"render; got render_mode={kwargs['render_mode']!r}. Pass None, or render "
            "gymnasium's own environment at `state`'s qpos."
        )
    max_steps: Any = kwargs.pop("max_episode_steps", None)
    if max_steps is None:
        max_steps = gymnasium.spec(name).max_episode_steps
    resolved = {**accepted, **kwargs}
    model = _load(resolved["xml_file"])
    return MujocoFuncEnv(name, model, _tasks()[name], resolved, int(max_steps))


def _load(xml_file: str) -> Any:
    """The model gymnasium's `MujocoEnv` loads for `xml_file` (its path rules)."""
    from gymnasium.envs.mujoco.mujoco_env import expand_model_path

    from jaxbridge.mujoco._model import mj

    return mj.MjModel.from_xml_path(expand_model_path(xml_file))
