"""`train(trainer, **arguments)`: brax's trainer, its arguments checked first.

brax 0.14.2 checks a few of its trainers' arguments with bare `assert` statements (an
`AssertionError` with no message, raised before the environment is touched, so nothing of
jaxbridge's runs yet and it cannot explain them). `train` binds the arguments to the
trainer's own signature, checks those conditions, raising a `ValueError` that names the
arguments, their values and a fix, and then calls the trainer with the arguments unchanged:
the run is the trainer's own, step for step.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from . import _errors

__all__ = ["train"]

_PPO = "brax.training.agents.ppo.train"
_SAC = "brax.training.agents.sac.train"


def _device_count(arguments: dict[str, Any]) -> int:
    """The devices brax spreads the environments over (its own arithmetic)."""
    import jax

    local = jax.local_device_count()
    most = arguments.get("max_devices_per_host")
    if most:
        local = min(local, most)
    return local * jax.process_count()


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _check_ppo(a: dict[str, Any]) -> None:
    batch = a["batch_size"] * a["num_minibatches"]
    if batch % a["num_envs"]:
        raise ValueError(
            _errors.PPO_BATCH.format(
                batch_size=a["batch_size"],
                num_minibatches=a["num_minibatches"],
                batch=batch,
                num_envs=a["num_envs"],
                divisors=", ".join(map(str, _divisors(batch))),
            )
        )


def _check_sac(a: dict[str, Any]) -> None:
    num_envs, min_replay = a["num_envs"], a["min_replay_size"]
    prefill = -(-min_replay // num_envs) * a["action_repeat"] * num_envs
    if a["num_timesteps"] < prefill:
        raise ValueError(
            _errors.SAC_PREFILL.format(
                num_timesteps=a["num_timesteps"],
                min_replay_size=min_replay,
                num_envs=num_envs,
                action_repeat=a["action_repeat"],
                prefill=prefill,
            )
        )
    most = a.get("max_replay_size")
    if most is not None and most < min_replay:
        raise ValueError(
            _errors.SAC_REPLAY.format(max_replay_size=most, min_replay_size=min_replay)
        )


_CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {_PPO: _check_ppo, _SAC: _check_sac}


def train(trainer: Callable[..., Any], /, **arguments: Any) -> Any:
    """Runs brax's `ppo.train` or `sac.train` after checking what brax only asserts.

    brax's trainers take jaxbridge's environments unchanged (`environment=` an environment
    of `jaxbridge.playground.load`, `wrap_env_fn=mujoco_playground.wrapper.
    wrap_for_brax_training`); `train(ppo.train, **arguments)` is `ppo.train(**arguments)`,
    called with the same arguments, except that a combination brax refuses with a bare
    `AssertionError` is refused first with a `ValueError` that says what to change:

    - PPO: `batch_size * num_minibatches` a multiple of `num_envs`;
    - PPO and SAC: `num_envs` a multiple of the devices brax uses (`max_devices_per_host`
      per process);
    - SAC: `num_timesteps` at least the prefill (`min_replay_size` rounded up to whole steps
      of `num_envs`, times `action_repeat`), and `max_replay_size` at least
      `min_replay_size`.

    Args:
        trainer: `brax.training.agents.ppo.train.train` or `brax.training.agents.sac.train.
            train` (the functions, as Playground's notebooks import them).
        **arguments: the trainer's keyword arguments, as the trainer takes them; those left
            out take the trainer's defaults.

    Returns:
        What the trainer returns: `(make_policy, params, metrics)`.

    Raises:
        TypeError: `trainer` is not one of brax's two, or an argument is not the trainer's.
        ValueError: the arguments break one of the conditions above.

    Example:
        >>> from jaxbridge import playground
        >>> from brax.training.agents.ppo import train as ppo
        >>> env = playground.load("CartpoleBalance")
        >>> playground.train(ppo.train, environment=env, num_timesteps=100, num_envs=8,
        ...                  batch_size=4, num_minibatches=1, episode_length=10)
        Traceback (most recent call last):
        ...
        ValueError: brax's ppo.train collects batch_size * num_minibatches = 4 * 1 = 4 ...
    """
    name = f"{getattr(trainer, '__module__', '')}.{getattr(trainer, '__name__', '')}"
    module = name.rsplit(".", 1)[0]
    if module not in _CHECKS or not name.endswith(".train"):
        raise TypeError(_errors.NOT_BRAX.format(got=name if name != "." else repr(trainer)))
    try:
        bound = inspect.signature(trainer).bind(**arguments)
    except TypeError as e:
        raise TypeError(_errors.BAD_ARGUMENT.format(trainer=name, error=e)) from None
    bound.apply_defaults()
    a = dict(bound.arguments)
    devices = _device_count(a)
    if a["num_envs"] % devices:
        short = module.rsplit(".", 2)[-2] + ".train"  # ppo.train or sac.train
        raise ValueError(
            _errors.DEVICES.format(trainer=short, num_envs=a["num_envs"], devices=devices)
        )
    _CHECKS[module](a)
    return trainer(**arguments)
