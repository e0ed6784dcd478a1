"""Reacher-v5: a two-link arm reaching for a goal (gymnasium's `reacher_v5.py`).

It reads body positions (`xpos`) as `mj_step` leaves them, and draws its goal by gymnasium's
rejection sampling (a `lax.while_loop`, which `vmap` batches).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from ._task import EnvState, Params, Task

__all__ = ["Reacher", "ReacherParams", "rejection"]


def rejection(key: jax.Array, draw: Callable[[jax.Array], jax.Array], accept: Callable) -> Any:
    """gymnasium's `while True: x = draw(); if accept(x): break`, with fresh keys."""

    def cond(carry):
        return ~accept(carry[1])

    def body(carry):
        key, _ = carry
        key, sub = jax.random.split(key)
        return key, draw(sub)

    key, sub = jax.random.split(key)
    return jax.lax.while_loop(cond, body, (key, draw(sub)))[1]


@dataclasses.dataclass(frozen=True)
class ReacherParams(Params):
    """`gymnasium.make("Reacher-v5", ...)`'s keywords, with its defaults."""

    xml_file: str = "reacher.xml"
    frame_skip: int = 2
    reward_dist_weight: float = 1.0
    reward_control_weight: float = 1.0


class Reacher(Task):
    fields = ("xpos",)

    def __init__(self, model: Any, params: ReacherParams, dt: float):
        super().__init__(model, params, dt)
        self.tip, self.target = int(model.body("fingertip").id), int(model.body("target").id)

    def sample(self, key: jax.Array, dtype: Any, p: ReacherParams):
        kq, kg, kv = jax.random.split(key, 3)
        qpos = self.uniform(kq, self.nq, 0.1, dtype) + jnp.asarray(self.init_qpos, dtype)
        goal = rejection(
            kg,
            lambda k: jax.random.uniform(k, (2,), dtype, -0.2, 0.2),
            lambda g: jnp.linalg.norm(g) < 0.2,
        )
        qpos = qpos.at[-2:].set(goal)
        qvel = jnp.asarray(self.init_qvel, dtype) + self.uniform(kv, self.nv, 0.005, dtype)
        return qpos, qvel.at[-2:].set(0.0)

    def vec(self, s: EnvState) -> jax.Array:
        return s.fields["xpos"][self.tip] - s.fields["xpos"][self.target]

    def observation(self, s: EnvState, p: ReacherParams) -> jax.Array:
        q, theta = self.qpos(s), self.qpos(s)[:2]
        parts = [jnp.cos(theta), jnp.sin(theta), q[2:], self.qvel(s)[:2], self.vec(s)[:2]]
        return jnp.concatenate(parts)

    def reward(self, s0: EnvState, action: jax.Array, s1: EnvState, p: ReacherParams):
        dist = -jnp.linalg.norm(self.vec(s1)) * p.reward_dist_weight
        ctrl = -jnp.sum(jnp.square(action)) * p.reward_control_weight
        return dist + ctrl, {"reward_dist": dist, "reward_ctrl": ctrl}
