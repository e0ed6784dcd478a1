"""Humanoid-v5: a 3-D humanoid rewarded for walking (gymnasium's `humanoid_v5.py`).

Its observation reads the fields `mj_step` leaves describing its last substep's evaluation
(`cinert`, `cvel`, `qfrc_actuator`) and `cfrc_ext` from `mj_rnePostConstraint` after the step;
its forward reward, the speed of the centre of mass of `xipos`. `HumanoidStandup-v5`
(`_humanoid_standup.py`) shares its observation (`HumanoidBody`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._task import EnvState, Params, Task

__all__ = ["Humanoid", "HumanoidBody", "HumanoidParams"]


@dataclasses.dataclass(frozen=True)
class HumanoidParams(Params):
    """`gymnasium.make("Humanoid-v5", ...)`'s keywords, with its defaults."""

    xml_file: str = "humanoid.xml"
    frame_skip: int = 5
    forward_reward_weight: float = 1.25
    ctrl_cost_weight: float = 0.1
    contact_cost_weight: float = 5e-7
    contact_cost_range: tuple[float, float] = (-math.inf, 10.0)
    healthy_reward: float = 5.0
    terminate_when_unhealthy: bool = True
    healthy_z_range: tuple[float, float] = (1.0, 2.0)
    reset_noise_scale: float = 1e-2
    exclude_current_positions_from_observation: bool = True
    include_cinert_in_observation: bool = True
    include_cvel_in_observation: bool = True
    include_qfrc_actuator_in_observation: bool = True
    include_cfrc_ext_in_observation: bool = True


class HumanoidBody(Task):
    """What Humanoid and HumanoidStandup share: their fields, observation, reset and tendons."""

    fields = ("xipos", "cinert", "cvel", "qfrc_actuator", "cfrc_ext", "ten_length", "ten_velocity")

    def __init__(self, model: Any, params: Params, dt: float):
        super().__init__(model, params, dt)
        self.mass = np.array(model.body_mass, dtype=np.float64)[:, None]

    def sample(self, key: jax.Array, dtype: Any, p: Any):
        return self.noisy(key, dtype, p.reset_noise_scale, normal_qvel=False)

    def observation(self, s: EnvState, p: Any) -> jax.Array:
        f = s.fields
        parts = [self.positions(s, p.exclude_current_positions_from_observation, 2), self.qvel(s)]
        # gymnasium tests these keywords with `is True`: a truthy non-bool leaves a part out
        if p.include_cinert_in_observation is True:
            parts.append(f["cinert"][1:].reshape(-1))
        if p.include_cvel_in_observation is True:
            parts.append(f["cvel"][1:].reshape(-1))
        if p.include_qfrc_actuator_in_observation is True:
            parts.append(f["qfrc_actuator"][6:])
        if p.include_cfrc_ext_in_observation is True:
            parts.append(f["cfrc_ext"][1:].reshape(-1))
        return jnp.concatenate(parts)

    def tendons(self, s: EnvState) -> dict[str, jax.Array]:
        return {
            "tendon_length": s.fields["ten_length"],
            "tendon_velocity": s.fields["ten_velocity"],
        }

    def contact_cost(self, s: EnvState, weight: float, bounds: tuple[float, float]) -> jax.Array:
        cost = weight * jnp.sum(jnp.square(s.fields["cfrc_ext"]))
        return jnp.clip(cost, *bounds)


class Humanoid(HumanoidBody):
    def mass_center(self, s: EnvState) -> jax.Array:
        mass = jnp.asarray(self.mass, s.physics.dtype)
        return (jnp.sum(mass * s.fields["xipos"], axis=0) / jnp.sum(mass))[0:2]

    def is_healthy(self, s: EnvState, p: HumanoidParams) -> jax.Array:
        lo, hi = p.healthy_z_range
        z = self.qpos(s)[2]
        return (lo < z) & (z < hi)

    def terminated(self, s: EnvState, p: HumanoidParams) -> jax.Array:
        if not p.terminate_when_unhealthy:
            return jnp.zeros((), bool)
        return ~self.is_healthy(s, p)

    def reward(self, s0: EnvState, action: jax.Array, s1: EnvState, p: HumanoidParams):
        v = (self.mass_center(s1) - self.mass_center(s0)) / self.dt
        forward = p.forward_reward_weight * v[0]
        survive = jnp.where(self.is_healthy(s1, p), p.healthy_reward, 0.0).astype(v.dtype)
        ctrl = self.ctrl_cost(p.ctrl_cost_weight, action)  # of `data.ctrl`: the action
        contact = self.contact_cost(s1, p.contact_cost_weight, p.contact_cost_range)
        info = {
            **self.reset_info(s1, p),
            "x_velocity": v[0],
            "y_velocity": v[1],
            "reward_survive": survive,
            "reward_forward": forward,
            "reward_ctrl": -ctrl,
            "reward_contact": -contact,
        }
        return forward + survive - (ctrl + contact), info

    def reset_info(self, s: EnvState, p: HumanoidParams) -> dict[str, jax.Array]:
        q = self.qpos(s)
        return {
            "x_position": q[0],
            "y_position": q[1],
            **self.tendons(s),
            "distance_from_origin": jnp.linalg.norm(q[0:2]),
        }
