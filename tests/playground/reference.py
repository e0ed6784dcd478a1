"""The reference: Playground's own environment code, its physics raw `mujoco.mj_step`.

`Reference(name)` is the environment `mujoco_playground.registry.load` makes (MJX's impl "jax"
layout), run eagerly with `mjx_env.step` and `mjx.forward` replaced, for the duration of each
call, by raw MuJoCo through MJX's own converters: `mjx.get_data`, then `mujoco.mj_step` (or
`mj_forward`) on that `MjData`, then `mjx.put_data`. Nothing of jaxbridge runs in it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax
import mujoco as _mujoco
import numpy as np
from mujoco import mjx
from mujoco_playground import registry
from mujoco_playground._src import mjx_env

mujoco: Any = _mujoco  # MuJoCo ships no type stubs


def jax_config(name: str) -> Any:
    config = registry.get_default_config(name)
    with config.unlocked():
        config.impl = "jax"
    return config


class Reference:
    """Playground's environment `name` with raw `mj_step` physics (see the module)."""

    def __init__(self, name: str):
        self.env = registry.load(name, jax_config(name))
        self.m = self.env.mj_model

    def _get_data(self, data: Any) -> Any:
        """`mjx.get_data`. On a Data fresh from `mjx.make_data` (empty contact slots at
        distance 0, no constraint rows) MJX 3.17's counts its slots as contacts and fails
        indexing their rows: there, the slots are marked empty (distance 1e10, as
        `mjx.put_data` marks them) first. `mj_forward` and `mj_step` recompute the contacts."""
        try:
            return mjx.get_data(self.m, data)
        except IndexError:
            c = data._impl.contact
            empty = c.replace(dist=jax.numpy.full_like(c.dist, 1e10))
            return mjx.get_data(self.m, data.replace(_impl=data._impl.replace(contact=empty)))

    def _step(self, model: Any, data: Any, action: Any, n_substeps: int = 1) -> Any:
        del model
        d = self._get_data(data)
        d.ctrl[:] = np.asarray(action)
        for _ in range(int(n_substeps)):
            mujoco.mj_step(self.m, d)
        return mjx.put_data(self.m, d)

    def _forward(self, model: Any, data: Any) -> Any:
        del model
        d = self._get_data(data)
        mujoco.mj_forward(self.m, d)
        return mjx.put_data(self.m, d)

    @contextlib.contextmanager
    def _raw(self) -> Iterator[None]:
        saved = mjx_env.step, mjx.forward
        mjx_env.step, mjx.forward = self._step, self._forward  # type: ignore[assignment]
        try:
            yield
        finally:
            mjx_env.step, mjx.forward = saved  # type: ignore[assignment]

    def reset(self, rng: jax.Array) -> Any:
        with self._raw(), jax.disable_jit():
            return self.env.reset(rng)

    def step(self, state: Any, action: Any) -> Any:
        with self._raw(), jax.disable_jit():
            return self.env.step(state, action)


def actions(name: str, size: int, T: int, seed: int = 0) -> np.ndarray:
    """`(T, size)` uniform random actions in [-1, 1], the same for a name and seed."""
    rng = np.random.default_rng([seed, sum(map(ord, name))])
    return rng.uniform(-1.0, 1.0, (T, size))


def leaves(x: Any) -> list[np.ndarray]:
    return [np.asarray(v, np.float64) for v in jax.tree_util.tree_leaves(x)]
