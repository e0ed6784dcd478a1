"""Swimmer-v5: a three-link swimmer in a viscous fluid (gymnasium's `swimmer_v5.py`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from ._task import EnvState, Params, Task

__all__ = ["Swimmer", "SwimmerParams"]


@dataclasses.dataclass(frozen=True)
class SwimmerParams(Params):
    """`gymnasium.make("Swimmer-v5", ...)`'s keywords, with its defaults."""

    xml_file: str = "swimmer.xml"
    frame_skip: int = 4
    forward_reward_weight: float = 1.0
    ctrl_cost_weight: float = 1e-4
    reset_noise_scale: float = 0.1
    exclude_current_positions_from_observation: bool = True


class Swimmer(Task):
    """Rewarded for its speed along x; observes qpos (x and y left out by default) and qvel."""

    def sample(self, key: jax.Array, dtype: Any, p: SwimmerParams):
        return self.noisy(key, dtype, p.reset_noise_scale, normal_qvel=False)

    def observation(self, s: EnvState, p: SwimmerParams) -> jax.Array:
        qpos = self.positions(s, p.exclude_current_positions_from_observation, 2)
        return jnp.concatenate([qpos, self.qvel(s)])

    def reward(self, s0: EnvState, action: jax.Array, s1: EnvState, p: SwimmerParams):
        xy0, xy1 = self.qpos(s0)[0:2], self.qpos(s1)[0:2]
        v = (xy1 - xy0) / self.dt
        forward = p.forward_reward_weight * v[0]
        ctrl = self.ctrl_cost(p.ctrl_cost_weight, action)
        info = {
            **self.reset_info(s1, p),
            "x_velocity": v[0],
            "y_velocity": v[1],
            "reward_forward": forward,
            "reward_ctrl": -ctrl,
        }
        return forward - ctrl, info

    def reset_info(self, s: EnvState, p: SwimmerParams) -> dict[str, jax.Array]:
        xy = self.qpos(s)[0:2]
        return {
            "x_position": xy[0],
            "y_position": xy[1],
            "distance_from_origin": jnp.linalg.norm(xy),
        }
