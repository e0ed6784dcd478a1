"""InvertedPendulum-v5: a pole balanced on a cart (gymnasium's `inverted_pendulum_v5.py`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from ._task import EnvState, Params, Task

__all__ = ["InvertedPendulum", "InvertedPendulumParams"]


@dataclasses.dataclass(frozen=True)
class InvertedPendulumParams(Params):
    """`gymnasium.make("InvertedPendulum-v5", ...)`'s keywords, with its defaults."""

    xml_file: str = "inverted_pendulum.xml"
    frame_skip: int = 2
    reset_noise_scale: float = 1e-2


class InvertedPendulum(Task):
    """Ends when the pole leans more than 0.2 rad (or the state is not finite)."""

    def sample(self, key: jax.Array, dtype: Any, p: InvertedPendulumParams):
        return self.noisy(key, dtype, p.reset_noise_scale, normal_qvel=False)

    def observation(self, s: EnvState, p: InvertedPendulumParams) -> jax.Array:
        return jnp.concatenate([self.qpos(s), self.qvel(s)])

    def terminated(self, s: EnvState, p: InvertedPendulumParams) -> jax.Array:
        obs = self.observation(s, p)
        return ~jnp.all(jnp.isfinite(obs)) | (jnp.abs(obs[1]) > 0.2)

    def reward(self, s0: EnvState, action: jax.Array, s1: EnvState, p: InvertedPendulumParams):
        r = jnp.where(self.terminated(s1, p), 0.0, 1.0).astype(s1.physics.dtype)
        return r, {"reward_survive": r}
