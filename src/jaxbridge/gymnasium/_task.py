"""What every environment file builds on: the state, the params base, and the `Task` protocol.

Each of gymnasium's MuJoCo v5 environments is one file here (`_hopper.py`, `_humanoid.py`, ...)
with two classes: its constructor's keywords as a frozen dataclass of `Params` (the `FuncEnv`
params, defaults gymnasium's own), and a `Task` (the part of gymnasium's `*_v5.py` class that
is not physics: reset distribution, observation, reward, termination, info), written in JAX
over `EnvState`, whose `fields` hold the derived `MjData` fields the task names. The physics
is `_env.MujocoFuncEnv`'s: one field call of `jaxbridge.mujoco` a step.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["EnvState", "Params", "Task"]


class EnvState(NamedTuple):
    """The state of one environment: what gymnasium's `MjData` carries from step to step.

    Attributes:
        physics: `(nphysics,)` MuJoCo's `mjSTATE_FULLPHYSICS` vector: time, qpos, qvel (and
            act, history, plugin state: empty in gymnasium's models).
        warmstart: `(nv,)` the constraint solver's warm start, `MjData.qacc_warmstart`.
        fields: the derived `MjData` fields the environment reads (`xpos`, `cfrc_ext`, ...),
            as the last `mj_step` (and `mj_rnePostConstraint`) or reset left them.
        steps: `()` int32, steps since the reset, for truncation at `max_episode_steps`.
    """

    physics: jax.Array
    warmstart: jax.Array
    fields: dict[str, jax.Array]
    steps: jax.Array


@dataclasses.dataclass(frozen=True)
class Params:
    """The keywords every environment takes: the model file and the physics steps per step.

    A subclass per environment adds its own keywords, with gymnasium's defaults. Params are
    static under `jit` (hashable; a new value retraces). `xml_file` and `frame_skip` choose
    the model and the engine's call: they are fixed when the environment is made.
    """

    xml_file: str = ""
    frame_skip: int = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        jax.tree_util.register_static(cls)


jax.tree_util.register_static(Params)


class Task:
    """An environment's reset, observation, reward, termination and info over `EnvState`s.

    Args:
        model: the `mujoco.MjModel`.
        params: the environment's `Params` at construction (model-dependent constants, such as
            a body's id, are read here; the methods take the params of each call).
        dt: `model.opt.timestep * frame_skip`, as gymnasium's `MujocoEnv.dt`.
    """

    #: The derived `MjData` fields the task reads (besides qpos and qvel).
    fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, model: Any, params: Params, dt: float):
        self.model = model
        self.dt = float(dt)
        self.nq, self.nv = int(model.nq), int(model.nv)
        self.init_qpos = np.array(model.qpos0, dtype=np.float64)
        self.init_qvel = np.zeros(self.nv)

    # helpers ---------------------------------------------------------------------------

    def qpos(self, s: EnvState) -> jax.Array:
        return s.physics[1 : 1 + self.nq]

    def qvel(self, s: EnvState) -> jax.Array:
        return s.physics[1 + self.nq : 1 + self.nq + self.nv]

    def uniform(self, key: jax.Array, n: int, scale: float, dtype: Any) -> jax.Array:
        return jax.random.uniform(key, (n,), dtype, -scale, scale)

    def noisy(
        self, key: jax.Array, dtype: Any, scale: float, *, normal_qvel: bool
    ) -> tuple[jax.Array, jax.Array]:
        """gymnasium's usual reset: uniform noise of `scale` on qpos, uniform or standard
        normal (times the scale) on qvel."""
        kq, kv = jax.random.split(key)
        qpos = jnp.asarray(self.init_qpos, dtype) + self.uniform(kq, self.nq, scale, dtype)
        if normal_qvel:
            noise = scale * jax.random.normal(kv, (self.nv,), dtype)
        else:
            noise = self.uniform(kv, self.nv, scale, dtype)
        return qpos, jnp.asarray(self.init_qvel, dtype) + noise

    @staticmethod
    def ctrl_cost(weight: float, action: jax.Array) -> jax.Array:
        return weight * jnp.sum(jnp.square(action))

    def positions(self, s: EnvState, exclude: bool, n: int) -> jax.Array:
        """qpos, without its first `n` coordinates where `exclude` (gymnasium's
        `exclude_current_positions_from_observation`)."""
        qpos = self.qpos(s)
        return qpos[n:] if exclude else qpos

    # the task ---------------------------------------------------------------------------

    def sample(self, key: jax.Array, dtype: Any, p: Any) -> tuple[jax.Array, jax.Array]:
        """qpos and qvel of gymnasium's `reset_model`, before its `set_state`."""
        raise NotImplementedError

    def observation(self, s: EnvState, p: Any) -> jax.Array:
        raise NotImplementedError

    def reward(
        self, s0: EnvState, action: jax.Array, s1: EnvState, p: Any
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """The reward of the step `s0 -> s1` and its info (gymnasium's `step` info)."""
        raise NotImplementedError

    def terminated(self, s: EnvState, p: Any) -> jax.Array:
        return jnp.zeros((), bool)

    def reset_info(self, s: EnvState, p: Any) -> dict[str, jax.Array]:
        return {}
