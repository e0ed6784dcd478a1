"""HalfCheetah-v5: a planar two-legged runner with no health check (`half_cheetah_v5.py`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from ._planar import Planar
from ._task import Params

__all__ = ["HalfCheetah", "HalfCheetahParams"]


@dataclasses.dataclass(frozen=True)
class HalfCheetahParams(Params):
    """`gymnasium.make("HalfCheetah-v5", ...)`'s keywords, with its defaults."""

    xml_file: str = "half_cheetah.xml"
    frame_skip: int = 5
    forward_reward_weight: float = 1.0
    ctrl_cost_weight: float = 0.1
    reset_noise_scale: float = 0.1
    exclude_current_positions_from_observation: bool = True


class HalfCheetah(Planar):
    """Never terminates; its reset draws qvel from a normal distribution."""

    healthy = False

    def sample(self, key: jax.Array, dtype: Any, p: HalfCheetahParams):
        return self.noisy(key, dtype, p.reset_noise_scale, normal_qvel=True)
