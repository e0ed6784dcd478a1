"""The arms and pendulums: Reacher, Pusher, InvertedPendulum and InvertedDoublePendulum.

Reacher and Pusher read body positions (`xpos`) as `mj_step` leaves them, and draw their goals
by gymnasium's rejection sampling (a `lax.while_loop`, which `vmap` batches);
InvertedDoublePendulum reads its tip site and the constraint force.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._tasks import Task

__all__ = ["TASKS"]


def _rejection(key, draw, accept):
    """gymnasium's `while True: x = draw(); if accept(x): break`, with fresh keys."""

    def cond(carry):
        return ~accept(carry[1])

    def body(carry):
        key, _ = carry
        key, sub = jax.random.split(key)
        return key, draw(sub)

    key, sub = jax.random.split(key)
    return jax.lax.while_loop(cond, body, (key, draw(sub)))[1]


class Reacher(Task):
    fields = ("xpos",)

    def __init__(self, model, kw, dt):
        super().__init__(model, kw, dt)
        self.tip, self.target = int(model.body("fingertip").id), int(model.body("target").id)

    def obs_size(self):
        return 2 + 2 + (self.nq - 2) + 2 + 2

    def sample(self, key, dtype):
        kq, kg, kv = jax.random.split(key, 3)
        qpos = self.uniform(kq, self.nq, 0.1, dtype) + jnp.asarray(self.init_qpos, dtype)
        goal = _rejection(
            kg,
            lambda k: jax.random.uniform(k, (2,), dtype, -0.2, 0.2),
            lambda g: jnp.linalg.norm(g) < 0.2,
        )
        qpos = qpos.at[-2:].set(goal)
        qvel = jnp.asarray(self.init_qvel, dtype) + self.uniform(kv, self.nv, 0.005, dtype)
        return qpos, qvel.at[-2:].set(0.0)

    def vec(self, s):
        return s.fields["xpos"][self.tip] - s.fields["xpos"][self.target]

    def observation(self, s):
        q, theta = self.qpos(s), self.qpos(s)[:2]
        parts = [jnp.cos(theta), jnp.sin(theta), q[2:], self.qvel(s)[:2], self.vec(s)[:2]]
        return jnp.concatenate(parts)

    def reward(self, s0, action, s1):
        dist = -jnp.linalg.norm(self.vec(s1)) * self.kw["reward_dist_weight"]
        ctrl = -jnp.sum(jnp.square(action)) * self.kw["reward_control_weight"]
        return dist + ctrl, {"reward_dist": dist, "reward_ctrl": ctrl}


class Pusher(Task):
    fields = ("xpos",)

    def __init__(self, model, kw, dt):
        super().__init__(model, kw, dt)
        self.arm, self.obj, self.goal = (
            int(model.body(n).id) for n in ("tips_arm", "object", "goal")
        )

    def obs_size(self):
        return 7 + 7 + 9

    def sample(self, key, dtype):
        kc, kv = jax.random.split(key)

        def draw(k):
            kx, ky = jax.random.split(k)
            x = jax.random.uniform(kx, (1,), dtype, -0.3, 0.0)
            return jnp.concatenate([x, jax.random.uniform(ky, (1,), dtype, -0.2, 0.2)])

        cylinder = _rejection(kc, draw, lambda c: jnp.linalg.norm(c) > 0.17)  # goal at 0
        qpos = jnp.asarray(self.init_qpos, dtype).at[-4:-2].set(cylinder).at[-2:].set(0.0)
        qvel = jnp.asarray(self.init_qvel, dtype) + self.uniform(kv, self.nv, 0.005, dtype)
        return qpos, qvel.at[-4:].set(0.0)

    def observation(self, s):
        x = s.fields["xpos"]
        parts = [self.qpos(s)[:7], self.qvel(s)[:7], x[self.arm], x[self.obj], x[self.goal]]
        return jnp.concatenate(parts)

    def reward(self, s0, action, s1):
        x = s1.fields["xpos"]
        near = -jnp.linalg.norm(x[self.obj] - x[self.arm]) * self.kw["reward_near_weight"]
        dist = -jnp.linalg.norm(x[self.obj] - x[self.goal]) * self.kw["reward_dist_weight"]
        ctrl = -jnp.sum(jnp.square(action)) * self.kw["reward_control_weight"]
        info = {"reward_dist": dist, "reward_ctrl": ctrl, "reward_near": near}
        return dist + ctrl + near, info


class InvertedPendulum(Task):
    def obs_size(self):
        return self.nq + self.nv

    def sample(self, key, dtype):
        return self.noisy(key, dtype, normal_qvel=False)

    def observation(self, s):
        return jnp.concatenate([self.qpos(s), self.qvel(s)])

    def terminated(self, s):
        obs = self.observation(s)
        return ~jnp.all(jnp.isfinite(obs)) | (jnp.abs(obs[1]) > 0.2)

    def reward(self, s0, action, s1):
        r = jnp.where(self.terminated(s1), 0.0, 1.0).astype(s1.physics.dtype)
        return r, {"reward_survive": r}


class InvertedDoublePendulum(Task):
    fields = ("site_xpos", "qfrc_constraint")

    def obs_size(self):
        return 1 + 2 * (self.nq - 1) + self.nv + 1

    def sample(self, key, dtype):
        return self.noisy(key, dtype, normal_qvel=True)

    def observation(self, s):
        q = self.qpos(s)
        parts = [
            q[:1],
            jnp.sin(q[1:]),
            jnp.cos(q[1:]),
            jnp.clip(self.qvel(s), -10, 10),
            jnp.clip(s.fields["qfrc_constraint"], -10, 10)[:1],
        ]
        return jnp.concatenate(parts)

    def terminated(self, s):
        return s.fields["site_xpos"][0, 2] <= 1

    def reward(self, s0, action, s1):
        x, y = s1.fields["site_xpos"][0, 0], s1.fields["site_xpos"][0, 2]
        v1, v2 = self.qvel(s1)[1], self.qvel(s1)[2]
        dist = 0.01 * x**2 + (y - 2) ** 2
        vel = 1e-3 * v1**2 + 5e-3 * v2**2
        alive = jnp.where(y <= 1, 0.0, self.kw["healthy_reward"]).astype(x.dtype)
        info = {"reward_survive": alive, "distance_penalty": -dist, "velocity_penalty": -vel}
        return alive - dist - vel, info


TASKS: dict[str, type[Task]] = {
    "Reacher-v5": Reacher,
    "Pusher-v5": Pusher,
    "InvertedPendulum-v5": InvertedPendulum,
    "InvertedDoublePendulum-v5": InvertedDoublePendulum,
}
