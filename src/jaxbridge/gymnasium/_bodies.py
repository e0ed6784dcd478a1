"""The 3-D bodies: Ant, Humanoid and HumanoidStandup, which read derived `MjData` fields.

Their observations and rewards read fields that `mj_step` leaves describing its last
substep's evaluation (`xpos`, `xipos`, `cinert`, `cvel`, `qfrc_actuator`, tendon lengths), and
`cfrc_ext` from `mj_rnePostConstraint` after the step; the speed before a step comes from the
fields the previous step left, all carried in the state.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._tasks import EnvState, Task

__all__ = ["TASKS"]


class Ant(Task):
    fields = ("xpos", "cfrc_ext")

    def __init__(self, model, kw, dt):
        super().__init__(model, kw, dt)
        self.main_body = int(model.body(kw["main_body"]).id)

    def obs_size(self):
        n = self.nq + self.nv - 2 * self.kw["exclude_current_positions_from_observation"]
        return n + (int(self.model.nbody) - 1) * 6 * self.kw["include_cfrc_ext_in_observation"]

    def sample(self, key, dtype):
        return self.noisy(key, dtype, normal_qvel=True)

    def contact_forces(self, s: EnvState) -> jax.Array:
        lo, hi = self.kw["contact_force_range"]
        return jnp.clip(s.fields["cfrc_ext"], lo, hi)

    def observation(self, s):
        qpos = self.qpos(s)
        if self.kw["exclude_current_positions_from_observation"]:
            qpos = qpos[2:]
        parts = [qpos, self.qvel(s)]
        if self.kw["include_cfrc_ext_in_observation"]:
            parts.append(self.contact_forces(s)[1:].reshape(-1))
        return jnp.concatenate(parts)

    def is_healthy(self, s: EnvState) -> jax.Array:
        state = jnp.concatenate([self.qpos(s), self.qvel(s)])
        lo, hi = self.kw["healthy_z_range"]
        return jnp.all(jnp.isfinite(state)) & (lo <= state[2]) & (state[2] <= hi)

    def terminated(self, s):
        if not self.kw["terminate_when_unhealthy"]:
            return jnp.zeros((), bool)
        return ~self.is_healthy(s)

    def reward(self, s0, action, s1):
        xy0 = s0.fields["xpos"][self.main_body, :2]
        xy1 = s1.fields["xpos"][self.main_body, :2]
        v = (xy1 - xy0) / self.dt
        forward = v[0] * self.kw["forward_reward_weight"]
        survive = jnp.where(self.is_healthy(s1), self.kw["healthy_reward"], 0.0).astype(v.dtype)
        ctrl = self.ctrl_cost(action)
        contact = self.kw["contact_cost_weight"] * jnp.sum(jnp.square(self.contact_forces(s1)))
        info = {
            **self.reset_info(s1),
            "x_velocity": v[0],
            "y_velocity": v[1],
            "reward_forward": forward,
            "reward_ctrl": -ctrl,
            "reward_contact": -contact,
            "reward_survive": survive,
        }
        return forward + survive - (ctrl + contact), info

    def reset_info(self, s):
        q = self.qpos(s)
        return {
            "x_position": q[0],
            "y_position": q[1],
            "distance_from_origin": jnp.linalg.norm(q[:2]),
        }


class _Humanoids(Task):
    """What Humanoid and HumanoidStandup share: their observation and reset."""

    fields = ("xipos", "cinert", "cvel", "qfrc_actuator", "cfrc_ext", "ten_length", "ten_velocity")

    def __init__(self, model, kw, dt):
        super().__init__(model, kw, dt)
        self.mass = np.array(model.body_mass, dtype=np.float64)[:, None]

    def obs_size(self):
        kw, nb = self.kw, int(self.model.nbody) - 1
        n = self.nq + self.nv - 2 * kw["exclude_current_positions_from_observation"]
        n += nb * 10 * kw["include_cinert_in_observation"]
        n += nb * 6 * kw["include_cvel_in_observation"]
        n += (self.nv - 6) * kw["include_qfrc_actuator_in_observation"]
        return n + nb * 6 * kw["include_cfrc_ext_in_observation"]

    def sample(self, key, dtype):
        return self.noisy(key, dtype, normal_qvel=False)

    def observation(self, s):
        kw, f = self.kw, s.fields
        qpos = self.qpos(s)
        if kw["exclude_current_positions_from_observation"]:
            qpos = qpos[2:]
        parts = [qpos, self.qvel(s)]
        if kw["include_cinert_in_observation"] is True:
            parts.append(f["cinert"][1:].reshape(-1))
        if kw["include_cvel_in_observation"] is True:
            parts.append(f["cvel"][1:].reshape(-1))
        if kw["include_qfrc_actuator_in_observation"] is True:
            parts.append(f["qfrc_actuator"][6:])
        if kw["include_cfrc_ext_in_observation"] is True:
            parts.append(f["cfrc_ext"][1:].reshape(-1))
        return jnp.concatenate(parts)

    def tendons(self, s: EnvState) -> dict[str, jax.Array]:
        return {
            "tendon_length": s.fields["ten_length"],
            "tendon_velocity": s.fields["ten_velocity"],
        }

    def contact_cost(self, s: EnvState, weight: str, bounds: str) -> jax.Array:
        cost = self.kw[weight] * jnp.sum(jnp.square(s.fields["cfrc_ext"]))
        lo, hi = self.kw[bounds]
        return jnp.clip(cost, lo, hi)


class Humanoid(_Humanoids):
    def mass_center(self, s: EnvState) -> jax.Array:
        mass = jnp.asarray(self.mass, s.physics.dtype)
        return (jnp.sum(mass * s.fields["xipos"], axis=0) / jnp.sum(mass))[0:2]

    def is_healthy(self, s: EnvState) -> jax.Array:
        lo, hi = self.kw["healthy_z_range"]
        z = self.qpos(s)[2]
        return (lo < z) & (z < hi)

    def terminated(self, s):
        if not self.kw["terminate_when_unhealthy"]:
            return jnp.zeros((), bool)
        return ~self.is_healthy(s)

    def reward(self, s0, action, s1):
        v = (self.mass_center(s1) - self.mass_center(s0)) / self.dt
        forward = self.kw["forward_reward_weight"] * v[0]
        survive = jnp.where(self.is_healthy(s1), self.kw["healthy_reward"], 0.0).astype(v.dtype)
        ctrl = self.ctrl_cost(action)  # of `data.ctrl`, which is the action
        contact = self.contact_cost(s1, "contact_cost_weight", "contact_cost_range")
        info = {
            **self.reset_info(s1),
            "x_velocity": v[0],
            "y_velocity": v[1],
            "reward_survive": survive,
            "reward_forward": forward,
            "reward_ctrl": -ctrl,
            "reward_contact": -contact,
        }
        return forward + survive - (ctrl + contact), info

    def reset_info(self, s):
        q = self.qpos(s)
        return {
            "x_position": q[0],
            "y_position": q[1],
            **self.tendons(s),
            "distance_from_origin": jnp.linalg.norm(q[0:2]),
        }


class HumanoidStandup(_Humanoids):
    def reward(self, s0, action, s1):
        uph = (self.qpos(s1)[2] - 0) / float(self.model.opt.timestep)
        ctrl = self.ctrl_cost(action)
        impact = self.contact_cost(s1, "impact_cost_weight", "impact_cost_range")
        reward = uph - ctrl - impact + 1
        info = {
            **self.reset_info(s1),
            "reward_linup": uph,
            "reward_quadctrl": -ctrl,
            "reward_impact": -impact,
        }
        return reward, info

    def reset_info(self, s):
        q = self.qpos(s)
        return {
            "x_position": q[0],
            "y_position": q[1],
            "z_distance_from_origin": q[2] - self.init_qpos[2],
            **self.tendons(s),
        }


TASKS: dict[str, type[Task]] = {
    "Ant-v5": Ant,
    "Humanoid-v5": Humanoid,
    "HumanoidStandup-v5": HumanoidStandup,
}
