"""`load(env_name)`: a MuJoCo Playground environment whose physics runs on C MuJoCo.

The environment is Playground's own (its `reset`, `step`, observations, rewards and
terminations, from `mujoco_playground.registry.load`), made with MJX's `impl="jax"` model and
data (the layout `jaxbridge.mujoco.mjx` reads), its `MjModel` registered as the C model of its
`mjx.Model`, and its class replaced by a subclass whose `reset` and `step` run inside
`on_c_mujoco()`: every `mjx.step` and `mjx.forward` they trace is `jaxbridge.mujoco.mjx`'s.
Their States carry the compact Data of `_carried.py`: a step costs only what it reads.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import jax
import numpy as np

from jaxbridge.mujoco import mjx as cmjx

from ._carried import carried
from ._route import install, on_c_mujoco

__all__ = ["load"]

NOT_FOUND = (
    "`jaxbridge.playground.load`: no Playground environment {name!r}. Its names are "
    "`mujoco_playground.registry.ALL_ENVS`: {names}."
)
NEEDS_MENAGERIE = (
    "`jaxbridge.playground.load({name!r})`: this environment's robot comes from MuJoCo "
    "Menagerie, which is not in the `playground` wheel: Playground clones it from GitHub on "
    "first use (into mujoco_playground/external_deps/mujoco_menagerie), and that failed here "
    "({error}). Run it once where GitHub can be reached, or clone "
    "https://github.com/google-deepmind/mujoco_menagerie there yourself."
)
NOT_JAX = (
    "`jaxbridge.playground.load({name!r})`: C MuJoCo serves an environment through MJX's "
    "impl='jax' layout, and MJX cannot make it for this model: {error}"
)
IMPL = (
    "`jaxbridge.playground.load({name!r})`: `impl` is MJX's implementation; on C MuJoCo it is "
    "always 'jax' (the layout of the mjx.Data it steps). Leave it out; got {impl!r}."
)
MODEL_EDITED = (
    "`jaxbridge.playground.load({name!r})`: the environment's `mj_model` differs from its "
    "`mjx_model` in `{field}` (edited after `mjx.put_model`), so there is no single C model "
    "for it."
)


def _set_impl(config: Any) -> Any:
    config = copy.deepcopy(config)
    with config.unlocked():
        config.impl = "jax"
    return config


@functools.cache
def _subclass(cls: type) -> type:
    """`cls` with `reset` and `step` on C MuJoCo."""

    def reset(self: Any, rng: jax.Array) -> Any:
        keep = carried(self, cls)
        with on_c_mujoco():
            state = cls.reset(self, rng)
        return state.replace(data=keep.compact(state.data))

    def step(self: Any, state: Any, action: jax.Array) -> Any:
        keep = carried(self, cls)
        with on_c_mujoco():
            state = cls.step(self, state, action)
        return state.replace(data=keep.compact(state.data))

    reset.__doc__ = f"`{cls.__name__}.reset`, its physics on C MuJoCo."
    step.__doc__ = f"`{cls.__name__}.step`, its physics on C MuJoCo."
    return type(
        cls.__name__,
        (cls,),
        {
            "reset": reset,
            "step": step,
            "__module__": __name__,
            "__qualname__": f"CMuJoCo.{cls.__name__}",
            "__doc__": f"Playground's `{cls.__module__}.{cls.__name__}` on C MuJoCo.",
            "_jaxbridge_playground": True,
        },
    )


def _check_models(name: str, env: Any) -> None:
    from mujoco import mjx

    fresh = mjx.put_model(env.mj_model, impl="jax")
    a = jax.tree_util.tree_flatten_with_path(fresh)
    b = jax.tree_util.tree_flatten_with_path(env.mjx_model)
    if a[1] != b[1]:
        raise ValueError(MODEL_EDITED.format(name=name, field="its structure"))
    for (path, x), (_, y) in zip(a[0], b[0]):
        if np.shape(x) != np.shape(y) or not np.array_equal(np.asarray(x), np.asarray(y)):
            raise ValueError(MODEL_EDITED.format(name=name, field=jax.tree_util.keystr(path)))


def load(
    env_name: str,
    config: Any = None,
    config_overrides: dict[str, Any] | None = None,
) -> Any:
    """`mujoco_playground.registry.load` with the environment's physics on C MuJoCo.

    Args:
        env_name: a name of `mujoco_playground.registry.ALL_ENVS` ("CheetahRun", ...).
        config: the environment's `ml_collections.ConfigDict`, or None for its default.
        config_overrides: flattened overrides, as Playground takes them.

    Returns:
        Playground's environment (`mjx_env.MjxEnv`): `reset(rng)` and `step(state, action)`
        trace Playground's own code, with each `mjx.step`/`mjx.forward` a call of
        `jaxbridge.mujoco.mjx` (MuJoCo's `mj_step`/`mj_forward`, in float64 with
        `jax_enable_x64`, else rounded to float32). Under `jit`, `vmap` (one `mujoco.batch` call
        for the batch), `scan` and `grad`, as `jaxbridge.mujoco.mjx`: its derivatives are the
        package's straddle-safe differences (`_differences.jacobian`: the mean of the two
        one-sided quotients where they agree, and where a step reaches over a contact that
        appears or vanishes, the quotient of the side that holds the state). Its States carry
        a compact `mjx.Data`: every state field, and of the derived fields those its own code
        reads, each exactly as `mj_step` leaves it; any other field is a placeholder that
        raises `NotCarriedError` naming it on any use (`carry_all(env)` carries them all).

    Raises:
        ValueError: an unknown name; an environment C MuJoCo cannot serve (its robot needs
            MuJoCo Menagerie, which could not be fetched; MJX cannot make its impl="jax"
            layout); an `impl` other than "jax" in `config_overrides`.

    Example:
        >>> import jax
        >>> from jaxbridge import playground
        >>> env = playground.load("CartpoleBalance")
        >>> state = jax.jit(env.reset)(jax.random.PRNGKey(0))
        >>> state = jax.jit(env.step)(state, jax.numpy.zeros(env.action_size))
        >>> state.obs.shape
        (5,)
    """
    from mujoco_playground import registry

    install()
    if env_name not in registry.ALL_ENVS:
        raise ValueError(NOT_FOUND.format(name=env_name, names=", ".join(registry.ALL_ENVS)))
    overrides = dict(config_overrides or {})
    impl = overrides.pop("impl", "jax")
    if str(impl).lower() != "jax":
        raise ValueError(IMPL.format(name=env_name, impl=impl))
    config = _set_impl(config if config is not None else registry.get_default_config(env_name))
    try:
        env = registry.load(env_name, config, overrides or None)
    except NotImplementedError as e:
        raise ValueError(NOT_JAX.format(name=env_name, error=e)) from e
    except Exception as e:
        if "menagerie" in str(e).lower() or "git" in str(e).lower():
            raise ValueError(NEEDS_MENAGERIE.format(name=env_name, error=e)) from e
        raise
    _check_models(env_name, env)
    cmjx.register(env.mj_model, env.mjx_model)
    env.__class__ = _subclass(type(env))
    return env
