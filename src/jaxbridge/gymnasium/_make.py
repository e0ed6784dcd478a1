"""`make(env_id, **kwargs)`: the ids, the file of each, and the models they load.

Each id's keywords are its file's params dataclass (`HopperParams`, ...), with gymnasium's
defaults (a test holds them to the `__init__` of gymnasium's class and of `MujocoEnv`), plus
gymnasium's rendering keywords, which are accepted and have no effect on the numbers, and
`max_episode_steps` (gymnasium's registry value by default).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

import numpy as np

from ._ant import Ant, AntParams
from ._env import MujocoFuncEnv
from ._half_cheetah import HalfCheetah, HalfCheetahParams
from ._hopper import Hopper, HopperParams
from ._humanoid import Humanoid, HumanoidParams
from ._humanoid_standup import HumanoidStandup, HumanoidStandupParams
from ._inverted_double_pendulum import InvertedDoublePendulum, InvertedDoublePendulumParams
from ._inverted_pendulum import InvertedPendulum, InvertedPendulumParams
from ._pusher import Pusher, PusherParams
from ._reacher import Reacher, ReacherParams
from ._swimmer import Swimmer, SwimmerParams
from ._task import Params, Task
from ._walker2d import Walker2d, Walker2dParams

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

#: Each id's params dataclass and task: its file's two classes.
ENVS: dict[str, tuple[type[Params], type[Task]]] = {
    "Ant-v5": (AntParams, Ant),
    "HalfCheetah-v5": (HalfCheetahParams, HalfCheetah),
    "Hopper-v5": (HopperParams, Hopper),
    "Humanoid-v5": (HumanoidParams, Humanoid),
    "HumanoidStandup-v5": (HumanoidStandupParams, HumanoidStandup),
    "InvertedDoublePendulum-v5": (InvertedDoublePendulumParams, InvertedDoublePendulum),
    "InvertedPendulum-v5": (InvertedPendulumParams, InvertedPendulum),
    "Pusher-v5": (PusherParams, Pusher),
    "Reacher-v5": (ReacherParams, Reacher),
    "Swimmer-v5": (SwimmerParams, Swimmer),
    "Walker2d-v5": (Walker2dParams, Walker2d),
}

# gymnasium's keywords that only concern rendering, with `MujocoEnv`'s defaults.
RENDERING: dict[str, Any] = {
    "default_camera_config": None,
    "render_mode": None,
    "width": 480,
    "height": 480,
    "camera_id": None,
    "camera_name": None,
    "max_geom": 1000,
    "visual_options": None,
}


def accepted(env_id: str) -> list[str]:
    """The keywords `make(env_id, ...)` accepts, in the order of its params."""
    fields = [f.name for f in dataclasses.fields(ENVS[env_id][0])]
    return [*fields, *RENDERING, "max_episode_steps"]


def _hashable(value: Any) -> Any:
    """A keyword's value as params hold it: sequences (a range given as a list or an array)
    as tuples, so that params stay hashable (static under `jit`)."""
    if isinstance(value, np.ndarray | list | tuple):
        return tuple(_hashable(v) for v in np.asarray(value).tolist())
    return value


@functools.cache
def keywords(env_id: str) -> dict[str, Any]:
    """The constructor keywords gymnasium's own class for `env_id` accepts, with their
    defaults (what the params dataclasses are tested against)."""
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
    names = accepted(name)
    unknown = sorted(set(kwargs) - set(names))
    if unknown:
        raise ValueError(
            f"`jaxbridge.gymnasium.make({name!r})`: unknown keyword(s) {', '.join(unknown)}; "
            f"the accepted ones are {', '.join(names)}."
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
    params_type, task_type = ENVS[name]
    fields = {f.name for f in dataclasses.fields(params_type)}
    params = params_type(**{k: _hashable(v) for k, v in kwargs.items() if k in fields})
    resolved = {**dataclasses.asdict(params), **RENDERING, **kwargs}
    model = _load(params.xml_file)
    return MujocoFuncEnv(name, model, task_type, params, int(max_steps), resolved)


def _load(xml_file: str) -> Any:
    """The model gymnasium's `MujocoEnv` loads for `xml_file` (its path rules)."""
    from gymnasium.envs.mujoco.mujoco_env import expand_model_path

    from jaxbridge.mujoco._model import mj

    return mj.MjModel.from_xml_path(expand_model_path(xml_file))
