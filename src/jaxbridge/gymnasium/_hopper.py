"""Hopper-v5: a one-legged planar hopper (gymnasium's `hopper_v5.py`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

from ._planar import Planar
from ._task import EnvState, Params

__all__ = ["Hopper", "HopperParams"]


@dataclasses.dataclass(frozen=True)
class HopperParams(Params):
    """`gymnasium.make("Hopper-v5", ...)`'s keywords, with its defaults."""

    xml_file: str = "hopper.xml"
    frame_skip: int = 4
    forward_reward_weight: float = 1.0
    ctrl_cost_weight: float = 1e-3
    healthy_reward: float = 1.0
    terminate_when_unhealthy: bool = True
    healthy_state_range: tuple[float, float] = (-100.0, 100.0)
    healthy_z_range: tuple[float, float] = (0.7, math.inf)
    healthy_angle_range: tuple[float, float] = (-0.2, 0.2)
    reset_noise_scale: float = 5e-3
    exclude_current_positions_from_observation: bool = True


class Hopper(Planar):
    """Healthy while its z and torso angle are in range and every other state entry is in
    `healthy_state_range`; observes qvel clipped to [-10, 10]."""

    clip_qvel = True

    def sample(self, key: jax.Array, dtype: Any, p: HopperParams):
        return self.noisy(key, dtype, p.reset_noise_scale, normal_qvel=False)

    def is_healthy(self, s: EnvState, p: HopperParams) -> jax.Array:
        state = jnp.concatenate([self.qpos(s), self.qvel(s)])[2:]
        lo, hi = p.healthy_state_range
        return jnp.all((lo < state) & (state < hi)) & super().is_healthy(s, p)
