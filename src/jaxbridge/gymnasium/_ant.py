"""Ant-v5: a four-legged walker that reads body positions and contact forces (`ant_v5.py`).

Its forward reward is the speed of `main_body`'s `xpos`, as `mj_step` left it (describing the
last substep's evaluation), and its contact cost and observation read `cfrc_ext`, which
gymnasium's `do_simulation` computes with `mj_rnePostConstraint` after the step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from ._task import EnvState, Params, Task

__all__ = ["Ant", "AntParams"]


@dataclasses.dataclass(frozen=True)
class AntParams(Params):
    """`gymnasium.make("Ant-v5", ...)`'s keywords, with its defaults."""

    xml_file: str = "ant.xml"
    frame_skip: int = 5
    forward_reward_weight: float = 1.0
    ctrl_cost_weight: float = 0.5
    contact_cost_weight: float = 5e-4
    healthy_reward: float = 1.0
    main_body: int | str = 1
    terminate_when_unhealthy: bool = True
    healthy_z_range: tuple[float, float] = (0.2, 1.0)
    contact_force_range: tuple[float, float] = (-1.0, 1.0)
    reset_noise_scale: float = 0.1
    exclude_current_positions_from_observation: bool = True
    include_cfrc_ext_in_observation: bool = True


class Ant(Task):
    fields = ("xpos", "cfrc_ext")

    def __init__(self, model: Any, params: AntParams, dt: float):
        super().__init__(model, params, dt)
        self.main_body = int(model.body(params.main_body).id)

    def sample(self, key: jax.Array, dtype: Any, p: AntParams):
        return self.noisy(key, dtype, p.reset_noise_scale, normal_qvel=True)

    def contact_forces(self, s: EnvState, p: AntParams) -> jax.Array:
        lo, hi = p.contact_force_range
        return jnp.clip(s.fields["cfrc_ext"], lo, hi)

    def observation(self, s: EnvState, p: AntParams) -> jax.Array:
        parts = [self.positions(s, p.exclude_current_positions_from_observation, 2), self.qvel(s)]
        if p.include_cfrc_ext_in_observation:
            parts.append(self.contact_forces(s, p)[1:].reshape(-1))
        return jnp.concatenate(parts)

    def is_healthy(self, s: EnvState, p: AntParams) -> jax.Array:
        state = jnp.concatenate([self.qpos(s), self.qvel(s)])
        lo, hi = p.healthy_z_range
        return jnp.all(jnp.isfinite(state)) & (lo <= state[2]) & (state[2] <= hi)

    def terminated(self, s: EnvState, p: AntParams) -> jax.Array:
        if not p.terminate_when_unhealthy:
            return jnp.zeros((), bool)
        return ~self.is_healthy(s, p)

    def reward(self, s0: EnvState, action: jax.Array, s1: EnvState, p: AntParams):
        xy0 = s0.fields["xpos"][self.main_body, :2]
        xy1 = s1.fields["xpos"][self.main_body, :2]
        v = (xy1 - xy0) / self.dt
        forward = v[0] * p.forward_reward_weight
        survive = jnp.where(self.is_healthy(s1, p), p.healthy_reward, 0.0).astype(v.dtype)
        ctrl = self.ctrl_cost(p.ctrl_cost_weight, action)
        contact = p.contact_cost_weight * jnp.sum(jnp.square(self.contact_forces(s1, p)))
        info = {
            **self.reset_info(s1, p),
            "x_velocity": v[0],
            "y_velocity": v[1],
            "reward_forward": forward,
            "reward_ctrl": -ctrl,
            "reward_contact": -contact,
            "reward_survive": survive,
        }
        return forward + survive - (ctrl + contact), info

    def reset_info(self, s: EnvState, p: AntParams) -> dict[str, jax.Array]:
        q = self.qpos(s)
        return {
            "x_position": q[0],
            "y_position": q[1],
            "distance_from_origin": jnp.linalg.norm(q[:2]),
        }
