"""What each environment computes from its states: observation, reward, termination, info.

A `Task` is the part of one of gymnasium's `*_v5.py` classes that is not physics, written in
JAX over the environment's state (`EnvState`): the fields `MjData` holds after a step are in
the state, so each function reads the same numbers gymnasium reads from `self.data`. This
module holds the base and the planar walkers (Hopper, Walker2d, HalfCheetah, Swimmer), whose
numbers all come from qpos and qvel.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["EnvState", "Task", "TASKS"]


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


class Task:
    """An environment's observation, reward, termination and info over `EnvState`s.

    Args:
        model: the `mujoco.MjModel`.
        kw: the constructor keywords (all of them, defaults filled in).
        dt: `model.opt.timestep * frame_skip`, as gymnasium's `MujocoEnv.dt`.
    """

    fields: tuple[str, ...] = ()  # the derived MjData fields the task reads

    def __init__(self, model: Any, kw: dict[str, Any], dt: float):
        self.model = model
        self.kw = kw
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

    def noisy(self, key: jax.Array, dtype: Any, *, normal_qvel: bool) -> tuple[jax.Array, ...]:
        """gymnasium's usual reset: uniform noise of `reset_noise_scale` on qpos, uniform or
        standard normal (times the scale) on qvel."""
        scale = float(self.kw["reset_noise_scale"])
        kq, kv = jax.random.split(key)
        qpos = jnp.asarray(self.init_qpos, dtype) + self.uniform(kq, self.nq, scale, dtype)
        if normal_qvel:
            noise = scale * jax.random.normal(kv, (self.nv,), dtype)
        else:
            noise = self.uniform(kv, self.nv, scale, dtype)
        return qpos, jnp.asarray(self.init_qvel, dtype) + noise

    def ctrl_cost(self, action: jax.Array) -> jax.Array:
        return self.kw["ctrl_cost_weight"] * jnp.sum(jnp.square(action))

    # the task ---------------------------------------------------------------------------

    def obs_size(self) -> int:
        raise NotImplementedError

    def sample(self, key: jax.Array, dtype: Any) -> tuple[jax.Array, jax.Array]:
        """qpos and qvel of gymnasium's `reset_model`, before its `set_state`."""
        raise NotImplementedError

    def observation(self, s: EnvState) -> jax.Array:
        raise NotImplementedError

    def reward(self, s0: EnvState, action: jax.Array, s1: EnvState) -> tuple[jax.Array, dict]:
        """The reward of the step `s0 -> s1` and its info (gymnasium's `step` info)."""
        raise NotImplementedError

    def terminated(self, s: EnvState) -> jax.Array:
        return jnp.zeros((), bool)

    def reset_info(self, s: EnvState) -> dict[str, jax.Array]:
        return {}


class _Planar(Task):
    """Hopper, Walker2d, HalfCheetah: forward speed of qpos[0] over `dt`."""

    normal_qvel = False
    clip_qvel = False
    skip = 1  # qpos coordinates left out with `exclude_current_positions_from_observation`
    healthy = True  # Hopper and Walker2d

    def obs_size(self) -> int:
        return self.nq + self.nv - self.skip * self.kw["exclude_current_positions_from_observation"]

    def sample(self, key, dtype):
        return self.noisy(key, dtype, normal_qvel=self.normal_qvel)

    def observation(self, s):
        qpos, qvel = self.qpos(s), self.qvel(s)
        if self.clip_qvel:
            qvel = jnp.clip(qvel, -10, 10)
        if self.kw["exclude_current_positions_from_observation"]:
            qpos = qpos[self.skip :]
        return jnp.concatenate([qpos, qvel])

    def is_healthy(self, s: EnvState) -> jax.Array:
        z, angle = self.qpos(s)[1], self.qpos(s)[2]
        lo_z, hi_z = self.kw["healthy_z_range"]
        lo_a, hi_a = self.kw["healthy_angle_range"]
        return (lo_z < z) & (z < hi_z) & (lo_a < angle) & (angle < hi_a)

    def terminated(self, s):
        if not self.healthy or not self.kw["terminate_when_unhealthy"]:
            return jnp.zeros((), bool)
        return ~self.is_healthy(s)

    def reward(self, s0, action, s1):
        x0, x1 = self.qpos(s0)[0], self.qpos(s1)[0]
        x_velocity = (x1 - x0) / self.dt
        forward = self.kw["forward_reward_weight"] * x_velocity
        ctrl = self.ctrl_cost(action)
        info = {"x_position": x1}
        if self.healthy:
            info["z_distance_from_origin"] = self.qpos(s1)[1] - self.init_qpos[1]
        info["x_velocity"] = x_velocity
        info["reward_forward"] = forward
        info["reward_ctrl"] = -ctrl
        if not self.healthy:
            return forward - ctrl, info
        survive = jnp.where(self.is_healthy(s1), self.kw["healthy_reward"], 0.0).astype(x1.dtype)
        info["reward_survive"] = survive
        return forward + survive - ctrl, info

    def reset_info(self, s):
        info = {"x_position": self.qpos(s)[0]}
        if self.healthy:
            info["z_distance_from_origin"] = self.qpos(s)[1] - self.init_qpos[1]
        return info


class Hopper(_Planar):
    clip_qvel = True

    def is_healthy(self, s):
        state = jnp.concatenate([self.qpos(s), self.qvel(s)])[2:]
        lo, hi = self.kw["healthy_state_range"]
        ok = jnp.all((lo < state) & (state < hi))
        return ok & super().is_healthy(s)


class Walker2d(_Planar):
    clip_qvel = True


class HalfCheetah(_Planar):
    normal_qvel = True
    healthy = False


class Swimmer(Task):
    def obs_size(self):
        return self.nq + self.nv - 2 * self.kw["exclude_current_positions_from_observation"]

    def sample(self, key, dtype):
        return self.noisy(key, dtype, normal_qvel=False)

    def observation(self, s):
        qpos = self.qpos(s)
        if self.kw["exclude_current_positions_from_observation"]:
            qpos = qpos[2:]
        return jnp.concatenate([qpos, self.qvel(s)])

    def reward(self, s0, action, s1):
        xy0, xy1 = self.qpos(s0)[0:2], self.qpos(s1)[0:2]
        v = (xy1 - xy0) / self.dt
        forward = self.kw["forward_reward_weight"] * v[0]
        ctrl = self.ctrl_cost(action)
        info = {
            "x_position": xy1[0],
            "y_position": xy1[1],
            "distance_from_origin": jnp.linalg.norm(xy1),
            "x_velocity": v[0],
            "y_velocity": v[1],
            "reward_forward": forward,
            "reward_ctrl": -ctrl,
        }
        return forward - ctrl, info

    def reset_info(self, s):
        xy = self.qpos(s)[0:2]
        return {
            "x_position": xy[0],
            "y_position": xy[1],
            "distance_from_origin": jnp.linalg.norm(xy),
        }


TASKS: dict[str, type[Task]] = {
    "Hopper-v5": Hopper,
    "Walker2d-v5": Walker2d,
    "HalfCheetah-v5": HalfCheetah,
    "Swimmer-v5": Swimmer,
}
