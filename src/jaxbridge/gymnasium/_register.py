"""gymnasium's registry: `gymnasium.make("jaxbridge/<id>")` and `gymnasium.make_vec(...)`.

`register()` (run by `import jaxbridge.gymnasium`) adds every id of `ENV_IDS` under the
`jaxbridge/` namespace: `gymnasium.make` gives a `FunctionalJaxEnv` over the id's
`MujocoFuncEnv` (its methods jitted; gymnasium's `TimeLimit` truncates), and
`gymnasium.make_vec(..., num_envs=N)` a `MujocoVectorEnv`, N environments stepped as one
jitted `vmap` of `autoreset_step` (one MuJoCo batch call a step, `AutoresetMode.SAME_STEP`).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from gymnasium.envs.functional_jax_env import FunctionalJaxEnv
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ._make import ENV_IDS, make

__all__ = ["MujocoJaxEnv", "MujocoVectorEnv", "register"]


class MujocoJaxEnv(FunctionalJaxEnv):
    """gymnasium's `FunctionalJaxEnv` over `make(env_id, **kwargs)`, its methods jitted."""

    def __init__(self, env_id: str, render_mode: str | None = None, **kwargs: Any):
        func_env = make(env_id, render_mode=render_mode, **kwargs)
        func_env.transform(jax.jit)
        metadata = {"render_modes": [], "jax": True, "render_fps": round(1 / func_env.dt)}
        super().__init__(func_env, metadata=metadata, render_mode=render_mode)


class MujocoVectorEnv(VectorEnv):
    """`num_envs` environments of one id as one jitted `vmap` of `autoreset_step`.

    Observations, rewards, flags and info values are JAX arrays with a leading `num_envs`
    dimension; `info["final_obs"]` is each environment's last observation of the step (the
    one before its reset where it terminated or truncated), and `info["_final_obs"]`, as in
    gymnasium's vector environments, marks where it did.
    """

    def __init__(
        self,
        num_envs: int,
        env_id: str,
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
        **kwargs: Any,
    ):
        super().__init__()
        self.func_env = env = make(
            env_id, max_episode_steps=max_episode_steps, render_mode=render_mode, **kwargs
        )
        self.num_envs = int(num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "jax": True}
        self.render_mode = render_mode
        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space
        self.observation_space = batch_space(env.observation_space, self.num_envs)
        self.action_space = batch_space(env.action_space, self.num_envs)
        self._reset = jax.jit(jax.vmap(env.reset))
        self._step = jax.jit(jax.vmap(env.autoreset_step))
        self._key = jax.random.key(int(np.random.SeedSequence().generate_state(1)[0]))
        self.state: Any = None

    def _keys(self) -> jax.Array:
        self._key, key = jax.random.split(self._key)
        return jax.random.split(key, self.num_envs)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._key = jax.random.key(seed)
        self.state, obs, info = self._reset(self._keys())
        return obs, info

    def step(self, actions: Any):
        if self.state is None:
            raise RuntimeError("`MujocoVectorEnv.step` before `reset`: call `reset()` first.")
        actions = jnp.asarray(actions, self.state.physics.dtype)
        self.state, obs, reward, terminated, truncated, info = self._step(
            self.state, actions, self._keys()
        )
        # gymnasium's mask of the environments whose `final_obs` is a final observation
        info = {**info, "_final_obs": terminated | truncated}
        return obs, reward, terminated, truncated, info


def register() -> None:
    """Registers `jaxbridge/<id>` for every id of `ENV_IDS` (again: no effect)."""
    for env_id in ENV_IDS:
        name = f"jaxbridge/{env_id}"
        if name in gymnasium.registry:
            continue
        gymnasium.register(
            id=name,
            entry_point="jaxbridge.gymnasium._register:MujocoJaxEnv",
            vector_entry_point="jaxbridge.gymnasium._register:MujocoVectorEnv",
            max_episode_steps=gymnasium.spec(env_id).max_episode_steps,
            kwargs={"env_id": env_id},
            disable_env_checker=True,
        )
