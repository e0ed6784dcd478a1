"""HumanoidStandup-v5: the humanoid rewarded for standing up (`humanoidstandup_v5.py`)."""

from __future__ import annotations

import dataclasses
import math

import jax

from ._humanoid import HumanoidBody
from ._task import EnvState, Params

__all__ = ["HumanoidStandup", "HumanoidStandupParams"]


@dataclasses.dataclass(frozen=True)
class HumanoidStandupParams(Params):
    """`gymnasium.make("HumanoidStandup-v5", ...)`'s keywords, with its defaults."""

    xml_file: str = "humanoidstandup.xml"
    frame_skip: int = 5
    uph_cost_weight: float = 1.0
    ctrl_cost_weight: float = 0.1
    impact_cost_weight: float = 5e-7
    impact_cost_range: tuple[float, float] = (-math.inf, 10.0)
    reset_noise_scale: float = 1e-2
    exclude_current_positions_from_observation: bool = True
    include_cinert_in_observation: bool = True
    include_cvel_in_observation: bool = True
    include_qfrc_actuator_in_observation: bool = True
    include_cfrc_ext_in_observation: bool = True


class HumanoidStandup(HumanoidBody):
    """Rewarded for its height over one physics step (gymnasium divides by `opt.timestep`,
    not `dt`; and multiplies by no `uph_cost_weight`, which it accepts)."""

    def reward(self, s0: EnvState, action: jax.Array, s1: EnvState, p: HumanoidStandupParams):
        uph = (self.qpos(s1)[2] - 0) / float(self.model.opt.timestep)
        ctrl = self.ctrl_cost(p.ctrl_cost_weight, action)
        impact = self.contact_cost(s1, p.impact_cost_weight, p.impact_cost_range)
        info = {
            **self.reset_info(s1, p),
            "reward_linup": uph,
            "reward_quadctrl": -ctrl,
            "reward_impact": -impact,
        }
        return uph - ctrl - impact + 1, info

    def reset_info(self, s: EnvState, p: HumanoidStandupParams) -> dict[str, jax.Array]:
        q = self.qpos(s)
        return {
            "x_position": q[0],
            "y_position": q[1],
            "z_distance_from_origin": q[2] - self.init_qpos[2],
            **self.tendons(s),
        }
