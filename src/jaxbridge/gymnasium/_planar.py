"""What the planar walkers share (Hopper, Walker2d, HalfCheetah): forward speed of qpos[0].

gymnasium's three classes compute their observation, forward reward and info the same way;
each environment's file says what is its own (its keywords, its health check, its reset).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ._task import EnvState, Task

__all__ = ["Planar"]


class Planar(Task):
    """qpos (the x position left out by default) and qvel observed, qvel clipped where
    `clip_qvel`; the reward `forward_reward_weight * dx/dt - ctrl_cost_weight |a|^2`, plus
    `healthy_reward` where the task has a health check (`healthy`)."""

    clip_qvel = False
    healthy = True

    def observation(self, s: EnvState, p: Any) -> jax.Array:
        qvel = self.qvel(s)
        if self.clip_qvel:
            qvel = jnp.clip(qvel, -10, 10)
        return jnp.concatenate(
            [self.positions(s, p.exclude_current_positions_from_observation, 1), qvel]
        )

    def is_healthy(self, s: EnvState, p: Any) -> jax.Array:
        z, angle = self.qpos(s)[1], self.qpos(s)[2]
        lo_z, hi_z = p.healthy_z_range
        lo_a, hi_a = p.healthy_angle_range
        return (lo_z < z) & (z < hi_z) & (lo_a < angle) & (angle < hi_a)

    def terminated(self, s: EnvState, p: Any) -> jax.Array:
        if not self.healthy or not p.terminate_when_unhealthy:
            return jnp.zeros((), bool)
        return ~self.is_healthy(s, p)

    def reward(self, s0: EnvState, action: jax.Array, s1: EnvState, p: Any):
        x0, x1 = self.qpos(s0)[0], self.qpos(s1)[0]
        x_velocity = (x1 - x0) / self.dt
        forward = p.forward_reward_weight * x_velocity
        ctrl = self.ctrl_cost(p.ctrl_cost_weight, action)
        info = {"x_position": x1}
        if self.healthy:
            info["z_distance_from_origin"] = self.qpos(s1)[1] - self.init_qpos[1]
        info["x_velocity"] = x_velocity
        info["reward_forward"] = forward
        info["reward_ctrl"] = -ctrl
        if not self.healthy:
            return forward - ctrl, info
        survive = jnp.where(self.is_healthy(s1, p), p.healthy_reward, 0.0).astype(x1.dtype)
        info["reward_survive"] = survive
        return forward + survive - ctrl, info

    def reset_info(self, s: EnvState, p: Any) -> dict[str, jax.Array]:
        info = {"x_position": self.qpos(s)[0]}
        if self.healthy:
            info["z_distance_from_origin"] = self.qpos(s)[1] - self.init_qpos[1]
        return info
