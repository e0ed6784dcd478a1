"""Each environment's keywords as its file's params dataclass: gymnasium's defaults, passed as
`FuncEnv` params, static under `jit`."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gym_helpers import gym_make, jg

from jaxbridge.gymnasium import _make


@pytest.mark.parametrize("env_id", jg.ENV_IDS)
def test_params_are_gymnasiums_keywords_and_defaults(env_id):
    theirs = _make.keywords(env_id)
    params_type, _ = _make.ENVS[env_id]
    ours = {f.name: f.default for f in dataclasses.fields(params_type)}
    assert set(ours) | set(_make.RENDERING) == set(theirs), env_id
    for name, default in ours.items():
        expected = theirs[name]
        assert default == (tuple(expected) if isinstance(expected, list) else expected), name


@pytest.mark.parametrize("env_id", jg.ENV_IDS)
def test_observation_size_is_gymnasiums(env_id):
    env, g = jg.make(env_id), gym_make(env_id)
    assert env.observation_space.shape == g.observation_space.shape
    g.close()


def test_params_passed_to_the_funcenv_methods(x64):
    """A `dataclasses.replace` of the params gives what `make` with that keyword gives."""
    env = jg.make("Hopper-v5")
    heavier = jg.make("Hopper-v5", ctrl_cost_weight=0.5, healthy_z_range=[0.1, 5.0])
    assert heavier.params.healthy_z_range == (0.1, 5.0)  # a list is held as a tuple
    p = dataclasses.replace(env.params, ctrl_cost_weight=0.5, healthy_z_range=(0.1, 5.0))
    assert env.default_params == env.params and hash(p) == hash(heavier.params)
    state = jax.jit(env.initial)(jax.random.key(0))
    a = jnp.full(env.nu, 0.7)
    nxt = jax.jit(env.transition)(state, a, None)
    reward = jax.jit(env.reward)
    np.testing.assert_array_equal(
        reward(state, a, nxt, None, p), heavier.reward(state, a, nxt, None)
    )
    assert reward(state, a, nxt, None, p) != reward(state, a, nxt, None)
    np.testing.assert_array_equal(jax.jit(env.terminal)(nxt, None, p), heavier.terminal(nxt, None))


def test_params_of_another_model_are_refused():
    env = jg.make("Hopper-v5")
    with pytest.raises(ValueError, match=r"frame_skip=2 describe another model or step"):
        env.observation(
            env.initial(jax.random.key(0)), None, dataclasses.replace(env.params, frame_skip=2)
        )
    with pytest.raises(TypeError, match="params must be a HopperParams; got Walker2dParams"):
        env.initial(jax.random.key(0), jg.make("Walker2d-v5").params)
