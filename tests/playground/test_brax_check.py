"""`jaxbridge.playground.train`: brax's trainers with the arguments brax only asserts checked.

Each refusal happens before brax's trainer is called, so these run on any jax (brax's own
trainers need jax 0.9: test_brax_training.py), except the pass-through, which trains.
"""

import re
import warnings
from typing import Any

import jax
import numpy as np
import pytest

from jaxbridge import playground
from jaxbridge.playground import _errors

pytest.importorskip("brax")

from brax.training.agents.ppo import train as ppo  # noqa: E402
from brax.training.agents.sac import train as sac  # noqa: E402
from mujoco_playground import wrapper  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    HAS_REPLICATED = hasattr(jax, "device_put_replicated")


def _pinned(template: str, **values: Any) -> str:
    return "^" + re.escape(template.format(**values)) + "$"


@pytest.fixture(scope="module")
def env():
    return playground.load("CartpoleBalance")


def test_ppo_batch_that_does_not_divide_the_env_count(env):
    # brax itself: a bare AssertionError at the top of ppo.train (test_brax_training.py).
    bad = dict(num_timesteps=100, num_envs=8, batch_size=4, num_minibatches=1, episode_length=10)
    message = _pinned(
        _errors.PPO_BATCH, batch_size=4, num_minibatches=1, batch=4, num_envs=8, divisors="1, 2, 4"
    )
    with pytest.raises(ValueError, match=message):
        playground.train(ppo.train, environment=env, **bad)


def test_ppo_defaults_are_brax_own(env):
    # batch_size and num_minibatches left out: brax's defaults, 32 * 16 = 512, and 12 envs.
    with pytest.raises(ValueError, match=r"= 32 \* 16 = 512 .* num_envs = 12 "):
        playground.train(ppo.train, environment=env, num_timesteps=100, num_envs=12)


def test_env_count_that_the_devices_do_not_divide(env):
    # The suite runs with several host devices (conftest); brax spreads the envs over them.
    devices = jax.local_device_count() * jax.process_count()
    if devices == 1:
        pytest.skip("one device: every num_envs divides")
    bad = dict(num_timesteps=100, num_envs=devices + 1, batch_size=devices + 1, num_minibatches=1)
    message = _pinned(_errors.DEVICES, trainer="ppo.train", num_envs=devices + 1, devices=devices)
    with pytest.raises(ValueError, match=message):
        playground.train(ppo.train, environment=env, **bad)


def test_sac_prefill_longer_than_the_run(env):
    bad = dict(num_timesteps=100, num_envs=8, min_replay_size=97, episode_length=10)
    message = _pinned(
        _errors.SAC_PREFILL,
        num_timesteps=100,
        min_replay_size=97,
        num_envs=8,
        action_repeat=1,
        prefill=104,
    )
    with pytest.raises(ValueError, match=message):
        playground.train(sac.train, environment=env, **bad)


def test_sac_replay_smaller_than_its_prefill(env):
    bad = dict(
        num_timesteps=1000, num_envs=8, min_replay_size=64, max_replay_size=32, episode_length=10
    )
    message = _pinned(_errors.SAC_REPLAY, max_replay_size=32, min_replay_size=64)
    with pytest.raises(ValueError, match=message):
        playground.train(sac.train, environment=env, **bad)


def test_not_a_brax_trainer():
    with pytest.raises(TypeError, match=_pinned(_errors.NOT_BRAX, got="numpy.sum")):
        playground.train(np.sum, a=1)


def test_an_argument_brax_does_not_take(env):
    with pytest.raises(TypeError, match=r"do not fit brax\.training\.agents\.ppo\.train\.train"):
        playground.train(ppo.train, environment=env, num_timesteps=10, num_env=8)


@pytest.mark.skipif(not HAS_REPLICATED, reason="brax's trainers need jax 0.9 (brax#671)")
@pytest.mark.filterwarnings("ignore:jax.device_put_replicated is deprecated:DeprecationWarning")
def test_good_arguments_reach_brax_unchanged(env):
    # The trainer's own run: the same call as ppo.train(**arguments).
    seen: list[int] = []
    _, params, _ = playground.train(
        ppo.train,
        environment=env,
        wrap_env_fn=wrapper.wrap_for_brax_training,
        num_timesteps=400,
        num_envs=4,
        episode_length=20,
        unroll_length=5,
        batch_size=4,
        num_minibatches=2,
        num_updates_per_batch=1,
        num_evals=2,
        num_eval_envs=2,
        progress_fn=lambda step, metrics: seen.append(step),
    )
    assert seen and all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(params))
