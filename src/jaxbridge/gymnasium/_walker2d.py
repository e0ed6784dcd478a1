"""Walker2d-v5: a two-legged planar walker (gymnasium's `walker2d_v5.py`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from ._planar import Planar
from ._task import Params

__all__ = ["Walker2d", "Walker2dParams"]


@dataclasses.dataclass(frozen=True)
class Walker2dParams(Params):
    """`gymnasium.make("Walker2d-v5", ...)`'s keywords, with its defaults."""

    xml_file: str = "walker2d_v5.xml"
    frame_skip: int = 4
    forward_reward_weight: float = 1.0
    ctrl_cost_weight: float = 1e-3
    healthy_reward: float = 1.0
    terminate_when_unhealthy: bool = True
    healthy_z_range: tuple[float, float] = (0.8, 2.0)
    healthy_angle_range: tuple[float, float] = (-1.0, 1.0)
    reset_noise_scale: float = 5e-3
    exclude_current_positions_from_observation: bool = True


class Walker2d(Planar):
    """Healthy while its z and torso angle are in range; observes qvel clipped to [-10, 10]."""

    clip_qvel = True

    def sample(self, key: jax.Array, dtype: Any, p: Walker2dParams):
        return self.noisy(key, dtype, p.reset_noise_scale, normal_qvel=False)
