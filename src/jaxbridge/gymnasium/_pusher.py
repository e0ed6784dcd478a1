"""Pusher-v5: a 7-DoF arm pushing a cylinder to a goal (gymnasium's `pusher_v5.py`).

It reads body positions (`xpos`) as `mj_step` leaves them, and draws the cylinder's start by
gymnasium's rejection sampling.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from ._reacher import rejection
from ._task import EnvState, Params, Task

__all__ = ["Pusher", "PusherParams"]


@dataclasses.dataclass(frozen=True)
class PusherParams(Params):
    """`gymnasium.make("Pusher-v5", ...)`'s keywords, with its defaults."""

    xml_file: str = "pusher_v5.xml"
    frame_skip: int = 5
    reward_near_weight: float = 0.5
    reward_dist_weight: float = 1.0
    reward_control_weight: float = 0.1


class Pusher(Task):
    fields = ("xpos",)

    def __init__(self, model: Any, params: PusherParams, dt: float):
        super().__init__(model, params, dt)
        self.arm, self.obj, self.goal = (
            int(model.body(n).id) for n in ("tips_arm", "object", "goal")
        )

    def sample(self, key: jax.Array, dtype: Any, p: PusherParams):
        kc, kv = jax.random.split(key)

        def draw(k):
            kx, ky = jax.random.split(k)
            x = jax.random.uniform(kx, (1,), dtype, -0.3, 0.0)
            return jnp.concatenate([x, jax.random.uniform(ky, (1,), dtype, -0.2, 0.2)])

        cylinder = rejection(kc, draw, lambda c: jnp.linalg.norm(c) > 0.17)  # goal at 0
        qpos = jnp.asarray(self.init_qpos, dtype).at[-4:-2].set(cylinder).at[-2:].set(0.0)
        qvel = jnp.asarray(self.init_qvel, dtype) + self.uniform(kv, self.nv, 0.005, dtype)
        return qpos, qvel.at[-4:].set(0.0)

    def observation(self, s: EnvState, p: PusherParams) -> jax.Array:
        x = s.fields["xpos"]
        parts = [self.qpos(s)[:7], self.qvel(s)[:7], x[self.arm], x[self.obj], x[self.goal]]
        return jnp.concatenate(parts)

    def reward(self, s0: EnvState, action: jax.Array, s1: EnvState, p: PusherParams):
        x = s1.fields["xpos"]
        near = -jnp.linalg.norm(x[self.obj] - x[self.arm]) * p.reward_near_weight
        dist = -jnp.linalg.norm(x[self.obj] - x[self.goal]) * p.reward_dist_weight
        ctrl = -jnp.sum(jnp.square(action)) * p.reward_control_weight
        return dist + ctrl + near, {"reward_dist": dist, "reward_ctrl": ctrl, "reward_near": near}
