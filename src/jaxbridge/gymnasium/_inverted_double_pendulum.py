"""InvertedDoublePendulum-v5: two poles balanced on a cart (`inverted_double_pendulum_v5.py`).

It reads its tip site (`site_xpos`) and the constraint force (`qfrc_constraint`) as `mj_step`
leaves them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from ._task import EnvState, Params, Task

__all__ = ["InvertedDoublePendulum", "InvertedDoublePendulumParams"]


@dataclasses.dataclass(frozen=True)
class InvertedDoublePendulumParams(Params):
    """`gymnasium.make("InvertedDoublePendulum-v5", ...)`'s keywords, with its defaults."""

    xml_file: str = "inverted_double_pendulum.xml"
    frame_skip: int = 5
    healthy_reward: float = 10.0
    reset_noise_scale: float = 0.1


class InvertedDoublePendulum(Task):
    fields = ("site_xpos", "qfrc_constraint")

    def sample(self, key: jax.Array, dtype: Any, p: InvertedDoublePendulumParams):
        return self.noisy(key, dtype, p.reset_noise_scale, normal_qvel=True)

    def observation(self, s: EnvState, p: InvertedDoublePendulumParams) -> jax.Array:
        q = self.qpos(s)
        parts = [
            q[:1],
            jnp.sin(q[1:]),
            jnp.cos(q[1:]),
            jnp.clip(self.qvel(s), -10, 10),
            jnp.clip(s.fields["qfrc_constraint"], -10, 10)[:1],
        ]
        return jnp.concatenate(parts)

    def terminated(self, s: EnvState, p: InvertedDoublePendulumParams) -> jax.Array:
        return s.fields["site_xpos"][0, 2] <= 1

    def reward(
        self, s0: EnvState, action: jax.Array, s1: EnvState, p: InvertedDoublePendulumParams
    ):
        x, y = s1.fields["site_xpos"][0, 0], s1.fields["site_xpos"][0, 2]
        v1, v2 = self.qvel(s1)[1], self.qvel(s1)[2]
        dist = 0.01 * x**2 + (y - 2) ** 2
        vel = 1e-3 * v1**2 + 5e-3 * v2**2
        alive = jnp.where(y <= 1, 0.0, p.healthy_reward).astype(x.dtype)
        info = {"reward_survive": alive, "distance_penalty": -dist, "velocity_penalty": -vel}
        return alive - dist - vel, info
