"""`MujocoFuncEnv`: one of gymnasium's MuJoCo environments as pure JAX functions of a state.

The state (`EnvState`) is what gymnasium's `MjData` carries from one step to the next; a
transition is one field call of `jaxbridge.mujoco` (`DataCalls`: the physics state, warm start
and action in; the next physics state, warm start and every derived field the task reads out),
and everything else (observation, reward, termination, info) is JAX. MuJoCo steps and forwards
only through `jaxbridge.mujoco`; the one C call here, `mj_getState` in `state_from_gymnasium`,
reads a live gymnasium environment.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces
from gymnasium.experimental.functional import FuncEnv

from jaxbridge.mujoco import DataCalls
from jaxbridge.mujoco._fields import PHYSICS
from jaxbridge.mujoco._model import mj

from ._task import EnvState, Params, Task

__all__ = ["MujocoFuncEnv"]

mujoco: Any = mj
_WARM = "qacc_warmstart"
#: The field only `mj_rnePostConstraint` computes, which gymnasium's `set_state` leaves zero
#: (`mj_resetData` zeroes it, `mj_forward` does not compute it).
_RNE = "cfrc_ext"


class MujocoFuncEnv(FuncEnv):
    """A gymnasium MuJoCo v5 environment as a `FuncEnv` of pure JAX functions.

    Build one with `jaxbridge.gymnasium.make(env_id, **kwargs)`. Every method is a pure
    function of its arguments, traceable under `jit`, `vmap`, `scan` and `grad`: the state is
    an `EnvState` pytree of arrays, and a `vmap` over states is one MuJoCo batch call per step.

    Under `jax.vmap` the host receives `(B, ·)` float64 rows (nested vmaps are flattened into
    one batch). Numbers match gymnasium's to rounding with x64 on (`jax.enable_x64`); without
    it the state is float32, MuJoCo still computes in float64, and the results are rounded.
    Derivatives (`jvp`, `grad`, `jacfwd`, `jacrev`, and their `vmap`s) of `transition`, and
    hence of a return, are differences of the MuJoCo step in qpos, qvel, the warm start and
    the action that do not reach over contact changes (see "Gradients" in docs/gymnasium.md);
    time and `steps` have none.

    Attributes:
        env_id: the gymnasium id, e.g. `"Hopper-v5"`.
        model: the `mujoco.MjModel` (edits are seen by later calls).
        frame_skip: physics steps per environment step.
        dt: `model.opt.timestep * frame_skip`.
        max_episode_steps: the step count at which `step` reports `truncated`.
        observation_space: gymnasium's `Box`, float64.
        action_space: gymnasium's `Box` of the actuators' control range, float32.
    """

    def __init__(
        self,
        env_id: str,
        model: Any,
        task_type: type[Task],
        params: Params,
        max_episode_steps: int,
        kwargs: dict[str, Any] | None = None,
    ):
        self.env_id = env_id
        self.model = model
        self.params = params
        self.frame_skip = int(params.frame_skip)
        self.dt = float(model.opt.timestep) * self.frame_skip
        # every keyword `make` was given or defaulted, rendering ones included
        self.kwargs = dict(kwargs) if kwargs is not None else dataclasses.asdict(params)
        self.max_episode_steps = int(max_episode_steps)
        self.task = task_type(model, params, self.dt)
        self.fields = tuple(self.task.fields)
        self.calls = DataCalls(model)
        # One field call a step: gymnasium's `do_simulation` (`mj_step` `frame_skip` times,
        # then `mj_rnePostConstraint` where `cfrc_ext` is read), the warm start carried.
        self.step_calls = self.calls.calls(
            (PHYSICS, _WARM, "ctrl"), (PHYSICS, _WARM, *self.fields), self.frame_skip
        )
        # `set_state`'s `mj_forward`: the fields but `cfrc_ext`, zero after `mj_resetData`.
        self._forward_fields = tuple(n for n in self.fields if n != _RNE)
        self.forward_calls = self.calls.calls((PHYSICS,), self._forward_fields, forward=True)
        self.nq, self.nv, self.nu = int(model.nq), int(model.nv), int(model.nu)
        self.nphysics = self.step_calls.steps.nphysics
        self._shapes = dict(zip(self.fields, self.step_calls.steps.out_shapes[2:]))
        bounds = np.array(model.actuator_ctrlrange, dtype=np.float32)
        self.action_space = spaces.Box(low=bounds[:, 0], high=bounds[:, 1], dtype=np.float32)
        # The observation's size is what the task's own code gives: traced, not run.
        obs = jax.eval_shape(lambda key: self.observation(self.initial(key)), jax.random.key(0))
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=obs.shape, dtype=np.float64)
        super().__init__()

    def get_default_params(self, **kwargs: Any) -> Params:
        """The params this environment was made with (`FuncEnv`'s `default_params`)."""
        del kwargs
        return self.params

    def _params(self, params: Params | None) -> Params:
        """`params`, or the environment's where None; refuses params of another model."""
        if params is None:
            return self.params
        if type(params) is not type(self.params):
            raise TypeError(
                f"`{self!r}`: params must be a {type(self.params).__name__}; got "
                f"{type(params).__name__}."
            )
        if (params.xml_file, params.frame_skip) != (self.params.xml_file, self.frame_skip):
            raise ValueError(
                f"`{self!r}`: params with xml_file={params.xml_file!r} and frame_skip="
                f"{params.frame_skip} describe another model or step than this environment's "
                f"({self.params.xml_file!r}, {self.frame_skip}); make one with "
                f"`jaxbridge.gymnasium.make({self.env_id!r}, xml_file=..., frame_skip=...)`."
            )
        return params

    def __repr__(self) -> str:
        return f"jaxbridge.gymnasium.make({self.env_id!r})"

    # -- states -------------------------------------------------------------------------

    def make_state(self, qpos: Any, qvel: Any, *, time: Any = 0.0, steps: Any = 0) -> EnvState:
        """The state gymnasium's `set_state(qpos, qvel)` leaves after `mj_resetData`: derived
        fields from `mj_forward`, zero warm start, `cfrc_ext` zero. Differentiable in `qpos`
        and `qvel` (differences of the forward pass).

        Args:
            qpos: `(nq,)` positions.
            qvel: `(nv,)` velocities.
            time: the simulation time.
            steps: the step count of the episode.

        Returns:
            An `EnvState`.
        """
        qpos, qvel = jnp.asarray(qpos), jnp.asarray(qvel)
        dtype = jnp.result_type(qpos, qvel, float)
        if qpos.shape != (self.nq,) or qvel.shape != (self.nv,):
            raise ValueError(
                f"`{self!r}.make_state` takes qpos of shape ({self.nq},) and qvel of shape "
                f"({self.nv},); got {qpos.shape} and {qvel.shape}. Use `jax.vmap` for a batch."
            )
        physics = self._physics(qpos.astype(dtype), qvel.astype(dtype), time)
        values = self.forward_calls(physics) if self._forward_fields else ()
        fields = self._with_rne(dict(zip(self._forward_fields, values)), dtype)
        return EnvState(
            physics, jnp.zeros((self.nv,), dtype), fields, jnp.asarray(steps, jnp.int32)
        )

    def _with_rne(self, fields: dict[str, jax.Array], dtype: Any) -> dict[str, jax.Array]:
        """`fields` in the task's order, `cfrc_ext` zero where the task reads it."""
        if _RNE in self.fields:
            fields[_RNE] = jnp.zeros(self._shapes[_RNE], dtype)
        return {n: fields[n] for n in self.fields}

    def _physics(self, qpos: jax.Array, qvel: jax.Array, time: Any) -> jax.Array:
        head = jnp.reshape(jnp.asarray(time, qpos.dtype), (1,))
        rest = jnp.zeros((self.nphysics - 1 - self.nq - self.nv,), qpos.dtype)
        return jnp.concatenate([head, qpos, qvel, rest])

    def state_from_gymnasium(self, env: Any) -> EnvState:
        """The state of a live gymnasium environment of this id, after its `reset` or any step.

        Args:
            env: what `gymnasium.make(env_id, ...)` returned (its `TimeLimit` wrapper gives
                the step count; an unwrapped environment counts as step 0), made with the
                same keywords as this environment.

        Returns:
            An `EnvState` of float64 arrays (float32 without x64).

        Raises:
            TypeError: `env` is not a MuJoCo environment with this model's sizes.
        """
        inner = env.unwrapped
        model: Any = getattr(inner, "model", None)
        data: Any = getattr(inner, "data", None)
        if not isinstance(model, mujoco.MjModel) or (model.nq, model.nv, model.nu) != (
            self.nq,
            self.nv,
            self.nu,
        ):
            raise TypeError(
                f"`{self!r}.state_from_gymnasium(env)` needs a gymnasium MuJoCo environment "
                f"of this model (nq={self.nq}, nv={self.nv}, nu={self.nu}); got "
                f"{type(inner).__name__}. Make it with `gymnasium.make({self.env_id!r}, ...)`."
            )
        physics = np.empty(self.nphysics)
        mujoco.mj_getState(model, data, physics, int(mujoco.mjtState.mjSTATE_FULLPHYSICS))
        fields = {n: jnp.asarray(np.array(getattr(data, n))) for n in self.fields}
        return EnvState(
            jnp.asarray(physics),
            jnp.asarray(np.array(data.qacc_warmstart)),
            fields,
            jnp.asarray(_elapsed_steps(env), jnp.int32),
        )

    # -- FuncEnv ------------------------------------------------------------------------

    def initial(self, rng: Any, params: Params | None = None) -> EnvState:
        """A state from gymnasium's reset distribution (`reset_model`) for key `rng`."""
        dtype = jnp.zeros(()).dtype  # float64 with x64
        qpos, qvel = self.task.sample(rng, dtype, self._params(params))
        return self.make_state(qpos, qvel)

    def transition(
        self, state: EnvState, action: Any, rng: Any, params: Params | None = None
    ) -> EnvState:
        """`do_simulation(action, frame_skip)`: one host call."""
        del rng
        self._params(params)
        ctrl = self._action(state, action)
        physics, warm, *values = self.step_calls(state.physics, state.warmstart, ctrl)
        fields = dict(zip(self.fields, values))
        return EnvState(physics, warm, fields, state.steps + 1)

    def observation(
        self, state: EnvState, rng: Any = None, params: Params | None = None
    ) -> jax.Array:
        del rng
        return self.task.observation(state, self._params(params))

    def reward(
        self,
        state: EnvState,
        action: Any,
        next_state: EnvState,
        rng: Any = None,
        params: Params | None = None,
    ) -> jax.Array:
        del rng
        p = self._params(params)
        return self.task.reward(state, self._action(state, action), next_state, p)[0]

    def terminal(self, state: EnvState, rng: Any = None, params: Params | None = None) -> jax.Array:
        del rng
        return self.task.terminated(state, self._params(params))

    def truncated(self, state: EnvState) -> jax.Array:
        """Whether gymnasium's `TimeLimit` truncates at this state's step count."""
        return state.steps >= self.max_episode_steps

    def state_info(self, state: EnvState, params: Params | None = None) -> dict[str, jax.Array]:
        """gymnasium's reset info at `state`."""
        return self.task.reset_info(state, self._params(params))

    def transition_info(
        self, state: EnvState, action: Any, next_state: EnvState, params: Params | None = None
    ) -> dict[str, jax.Array]:
        """gymnasium's step info of `state -> next_state`."""
        p = self._params(params)
        return self.task.reward(state, self._action(state, action), next_state, p)[1]

    def _action(self, state: EnvState, action: Any) -> jax.Array:
        action = jnp.asarray(action)
        if action.shape != (self.nu,):
            raise ValueError(
                f"`{self!r}`: the action must have shape ({self.nu},); got {action.shape}. "
                "Use `jax.vmap` for a batch of environments."
            )
        return action.astype(state.physics.dtype)

    # -- gymnasium's Env API, functionally ----------------------------------------------

    def reset(self, rng: Any) -> tuple[EnvState, jax.Array, dict[str, jax.Array]]:
        """`(state, obs, info)` of gymnasium's `reset`, the state drawn with key `rng`."""
        state = self.initial(rng)
        return state, self.observation(state), self.state_info(state)

    def step(self, state: EnvState, action: Any, rng: Any = None) -> tuple[Any, ...]:
        """`(state, obs, reward, terminated, truncated, info)` of gymnasium's `step` (with its
        `TimeLimit`); never resets."""
        nxt = self.transition(state, action, rng)
        reward, info = self.task.reward(state, self._action(state, action), nxt, self.params)
        return (
            nxt,
            self.observation(nxt),
            reward,
            self.terminal(nxt),
            self.truncated(nxt),
            info,
        )

    def autoreset_step(self, state: EnvState, action: Any, rng: Any) -> tuple[Any, ...]:
        """`step`, then a reset where the episode ended, in the same call: gymnasium's
        `AutoresetMode.SAME_STEP`.

        Returns `(state, obs, reward, terminated, truncated, info)`: reward, terminated,
        truncated and info are the step's; where it terminated or truncated, `state` and `obs`
        are a new episode's (drawn with `rng`), and `info["final_obs"]` holds the step's own
        observation (equal to `obs` elsewhere).
        """
        nxt, obs, reward, terminated, truncated, info = self.step(state, action)
        done = terminated | truncated
        fresh = self._fresh(rng, done)
        state_out = jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), fresh, nxt)
        obs_out = jnp.where(done, self.observation(fresh), obs)
        return state_out, obs_out, reward, terminated, truncated, {**info, "final_obs": obs}

    def _fresh(self, rng: Any, done: jax.Array) -> EnvState:
        """`initial(rng)`, its derived fields computed only where `done` (in one host call of
        those rows, none where no episode ended; Hopper's and the other qpos-only tasks' need
        no host call at all)."""
        if not self.fields:
            return self.initial(rng)
        dtype = jnp.zeros(()).dtype
        qpos, qvel = self.task.sample(rng, dtype, self.params)
        bare = self._physics(qpos, qvel, 0.0)
        values = self.forward_calls.where(done, bare) if self._forward_fields else ()
        return EnvState(
            bare,
            jnp.zeros((self.nv,), dtype),
            self._with_rne(dict(zip(self._forward_fields, values)), dtype),
            jnp.zeros((), jnp.int32),
        )


def _elapsed_steps(env: Any) -> int:
    """The `TimeLimit` wrapper's step count of a wrapped gymnasium environment, or 0."""
    while env is not None:
        if hasattr(env, "_elapsed_steps") and env._elapsed_steps is not None:
            return int(env._elapsed_steps)
        env = getattr(env, "env", None)
    return 0
